#pragma once

// Text views of Baton resources for `-o table` (the default). Pure functions: the
// current time and the time zone are passed in, so tests pin them.

#include <string>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"

namespace baton::cli {

// How a table is drawn: `wide` adds columns (-o wide); `color` colours the state words
// (ColorState in output.h).
struct TableStyle {
  bool wide = false;
  bool color = false;
};

// `baton jobs`: ID NAME STATE WORKERS GEN STEP AGE; when a job has a queue
// (Job.queueing.queue, a coordinator with a queue file), QUEUE, PRIO (its resolved
// priority) and POS (its place in its queue while QUEUED, 1 next; "-" otherwise) follow
// STATE, "-" for jobs without one.
//   WORKERS  workers holding ranks / requested range, e.g. "3/2-4" or "0/2".
//   STEP     rank 0's latest step (Job.result.steps), "/max_steps" when the budget sets one;
//            "-" before the first metric point.
//   AGE      since create_time.
// Wide adds OWNER, WORLD (ranks of the current generation), MASTER (rendezvous
// address:port), LOSS and SAMPLES/S (Job.result.final_metrics "loss", "samples_per_sec").
std::string RenderJobsTable(const baton::v1::ListJobsResponse& jobs, absl::Time now,
                            TableStyle style = {});

// `baton workers`: ID HOST SLOTS USED STATE LAST-HEARTBEAT JOBS. Wide adds HOSTNAME and
// LEASE (the worker's lease).
std::string RenderWorkersTable(const baton::v1::ListWorkersResponse& workers, absl::Time now,
                               TableStyle style = {});

// `baton describe`: spec summary, state, message, generation, master endpoint, times,
// for a job with a queue its queue block (Queue, Priority with the class it named,
// Preemptible: no when it opted out, Preemptions when > 0; while QUEUED Position, Waiting
// (why) and Making room (the jobs that shrink or are preempted for it, one a line); once
// admitted Borrowing when it runs beyond its queue's quota), ranks table (RANK WORKER LOCAL PID
// EXIT), result, goodput (Job.result.goodput as a percentage, the value of
// baton_coordinator_job_goodput_ratio; "-" before the job started), restarts (the total,
// TotalRestarts() of common/spec/restart_stats.h as baton_coordinator_job_restarts_total counts it;
// used/budget per failure class; then one row per failed generation: GEN "1->2" ("1->x" when the
// job did not restart), CLASS, RANK, WORKER, STEP reached, RESUMED step, the recovery phases STOP,
// WAIT, RENDEZVOUS, FIRST-STEP and TOTAL in seconds, CAUSE) and events
// (TIME STATE REASON MESSAGE).
// `color` colours the State line.
std::string RenderJobDescription(const baton::v1::Job& job, absl::Time now, absl::TimeZone tz,
                                 bool color = false);

// `baton queues`: NAME COHORT QUOTA USED BORROWED PENDING ADMITTED PREEMPTED, the
// quantities as "8 slots" or "8 slots, 2 GPUs" (GPUs only where there are some), BORROWED
// "-" when none; wide adds SHRUNK and USERS ("*" as "everyone"). Then the default queue and
// the priority classes, highest first. A coordinator without queues
// (ListQueuesResponse.configured false): one line saying it schedules first come, first
// served.
std::string RenderQueues(const baton::v1::ListQueuesResponse& queues, TableStyle style = {});

// The result block printed at the end of `baton submit --wait`, e.g.
//   Job j-000007 SUCCEEDED
//     steps:          5000/5000
//     loss:           0.0712 (initial 2.303)
//     accuracy:       97.8%
//     eval_accuracy:  97.1%
//     wall time:      2m13s
// "accuracy"-like values (keys ending in "accuracy") are fractions shown as percentages.
std::string RenderResult(const baton::v1::Job& job);

// One line per event: "[12:00:03] RUNNING -> SUCCEEDED  Completed: reached max_steps".
// State changes show "FROM -> TO"; other events only "Reason: message".
std::string RenderEventLine(const baton::v1::JobEvent& event, absl::TimeZone tz);

}  // namespace baton::cli
