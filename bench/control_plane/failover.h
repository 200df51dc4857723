#pragma once

// load_generator --failover: how long the workers' training goes without a coordinator
// when the one serving them is killed (SIGKILL), and whether any job restarts for it.
//
// Against a coordinator given as its replicas' addresses (several on etcd, or one SQLite
// coordinator that the calling script restarts on the same port and state whenever it
// exits): registers N simulated workers that reconnect as the agent does (sim_workers.h,
// `reconnect`), submits J jobs of N/J workers each and waits until every one is RUNNING
// (so every worker runs an assignment) and records each job's generation; after a settle
// time of steady heartbeats, finds the replica that leads (grpc.health.v1 SERVING for
// baton.v1.WorkerService), SIGKILLs the pid its --pid_files entry names, and measures from
// the kill:
//   leader_s      a replica's health says SERVING again (polled every 20 ms);
//   reattach_s    every worker re-registered (its latest Registered, on the worker's side);
//   reattached_event_s  the coordinator's last "Reattached" job event (its clock);
// then checks every job is RUNNING in the generation it had (restarted_jobs=K, expected
// 0) and ends them all (every rank exits 0: SUCCEEDED). Prints one "result failover=1 ..."
// line, with the kill's time (killed_at_unix) for lining up the daemons' logs. Every wait
// has a deadline.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::bench {

struct FailoverConfig {
  std::vector<std::string> coordinators;  // the replicas' HOST:PORT, plaintext
  // Per coordinator address, a file holding that replica's pid (read when it is killed:
  // the script may rewrite it when it restarts one).
  std::vector<std::string> pid_files;
  int workers = 0;  // N
  int jobs = 1;     // J, dividing N
  int slots = 1;
  int workers_per_channel = 100;
  std::string id_prefix = "sim-";
  absl::Duration settle = absl::Seconds(2);     // RUNNING everywhere -> the kill
  absl::Duration timeout = absl::Seconds(120);  // of each phase
  // etcd's client address (127.0.0.1:PORT): its writes from the kill until every job was
  // re-attached, from its /metrics. Empty: not measured.
  std::string etcd_metrics;
};

// Runs the measurement; prints the result line (and why it failed on stderr). Exit status:
// 0 iff a replica served again, every worker re-registered, every job was re-attached
// RUNNING in its generation and then SUCCEEDED; 2 for a bad config; 1 otherwise.
int RunFailover(const FailoverConfig& config);

// What the jobs' records say after the failover, against their generations before it.
struct FailoverCheck {
  int restarted = 0;   // not RUNNING, or RUNNING in another generation
  int reattached = 0;  // RUNNING in the same generation with a "Reattached" event since
  absl::Time last_reattached = absl::InfinitePast();  // the latest such event's time
};

// Compares `jobs` (GetJob's, with events) with `generations` (job id -> generation before
// the kill), counting "Reattached" events at or after `since`. A job missing from `jobs`
// counts in neither.
FailoverCheck CheckJobs(const std::map<std::string, int64_t>& generations,
                        const std::vector<baton::v1::Job>& jobs, absl::Time since);

}  // namespace baton::bench
