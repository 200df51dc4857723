#pragma once

// baton-coordinator's Prometheus metrics: every family is built here, once.
//
// The metrics are data-driven: nothing in the Coordinator or the JobManager calls into
// them. They read state, not rebuild it: each job's state, restarts, goodput and slowdown
// ratios are JobManager's (PeekWritten, GoodputRatioNow, SlowdownRatios) at each scrape,
// and the cluster gauges are read from JobManager/Coordinator snapshots. Only the
// histograms need a job's history: each job is followed through the events of the update
// stream `baton watch` uses (JobManager::Watch, events only: no metric points). Both happen on the
// event loop, the only thread that may touch the domain objects; the HTTP thread only waits for the
// snapshot (bounded by scrape_timeout).
//
// Families (labels in braces). Training jobs are the label `job_id` (`job` belongs to
// Prometheus's target labels):
//   baton_coordinator_jobs{state}                      jobs per state (all known jobs)
//   baton_coordinator_queue_length                     jobs QUEUED
//   baton_coordinator_queue_wait_seconds               histogram: QUEUED -> RENDEZVOUS
//   baton_coordinator_rendezvous_duration_seconds      histogram: RENDEZVOUS -> RUNNING
//   baton_coordinator_recovery_duration_seconds{phase} histogram: recovery phases, below
//   baton_coordinator_restarts_total{cause}            RESTARTING transitions by reason; the
//                                                      planned resizes' (Draining, ScalingUp)
//                                                      exist from the start, at 0
//   baton_coordinator_workers{state}                   workers READY / LOST
//   baton_coordinator_worker_heartbeat_age_seconds{worker_id}  now - last heartbeat (READY)
//   baton_coordinator_worker_lease_remaining_seconds{worker_id}  lease renewal + lease - now
//   baton_coordinator_worker_unhealthy{worker_id}      1 while a pre-flight check's mark
//                                                      keeps a connected worker out of new
//                                                      gangs, else 0
//   baton_coordinator_worker_losses_total{cause}       lease_expired (partitions, dead hosts),
//                                                      stream_closed, lease_revoked
//   baton_coordinator_worker_reports_refused_total{kind}  worker reports about assignments
//                                                      not that worker's (Coordinator::
//                                                      refused_reports)
//   baton_coordinator_changes_refused_total            changes refused by the coordinator's
//                                                      own rules (illegal transitions: bugs)
//   baton_coordinator_worker_events_refused_total{event}  worker lifecycle events refused
//                                                      (races of a closing stream, no-ops)
//   baton_coordinator_job_state{job_id,state}          1 for the job's state, 0 for others
//   baton_coordinator_job_restarts_total{job_id}       the job's restarts: TotalRestarts()
//                                                      of Job.restarts
//                                                      (common/spec/restart_stats.h), = its
//                                                      RESTARTING transitions
//   baton_coordinator_job_goodput_ratio{job_id}        coordinator/policy/goodput.h
//   baton_rank_slowdown_ratio{job_id,rank}             coordinator/policy/slowdown.h
//   baton_coordinator_queue_{pending,admitted}_jobs{queue}  a coordinator with queues
//   baton_coordinator_queue_{nominal,used,borrowed}_slots{queue}, _{nominal,used}_gpus{queue}
//   baton_coordinator_queue_{preemptions,shrinks}_total{queue}  since the process started
//   baton_coordinator_rpc_duration_seconds{method,code}  unary RPCs, server-side latency
//   baton_coordinator_leader, baton_coordinator_election_errors_total  the role (role_metrics.h)
//
// Per-job series exist for non-terminal jobs and for `terminal_retention` after a job
// ended (so its final values are scraped); jobs that ended before this process started
// are not followed. Histograms and counters count what this process observed, including
// the replayed history of the jobs it follows.
//
// Recovery phases, from each failure's record in Job.restarts.failures (the times the
// coordinator stamps; see `baton describe`), one observation per failure and phase once
// both of its times are recorded (checked on the loop at each scrape):
//   detect      occurred_time -> fail_time         (failure happened -> coordinator knows;
//                                                  only when occurred_time is known)
//   stop        fail_time -> stopped_time          (failure detected -> processes stopped)
//   backoff     stopped_time -> rendezvous_time    (-> the next rendezvous began)
//   rendezvous  rendezvous_time -> running_time    (-> every process running)
//   restore     running_time -> first_step_time    (-> first metric point: restore, steps)
// Failures that ended the job (no restart) have no recovery phases.
//
// The goodput ratio and JobResult.goodput (what `baton describe` shows) are the same
// function (coordinator/policy/goodput.h) of the same state, JobManager's, so they always
// agree.

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics_http.h"
#include "common/time/clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/server/event_loop.h"

namespace baton::coordinator {

struct CoordinatorMetricsOptions {
  // How long a scrape waits for the event loop's snapshot; on timeout it returns the
  // event-derived families only.
  absl::Duration scrape_timeout = absl::Seconds(2);
  // How long a terminal job's series stay.
  absl::Duration terminal_retention = absl::Minutes(10);
  // With replicas: the election's failed etcd calls (role_metrics.h);
  // null: the family is left out.
  std::function<int64_t()> election_errors;
};

class CoordinatorMetrics final : public prometheus::Collectable {
 public:
  // All pointers must outlive this object, and the loop must run while it is scraped.
  // `jobs` and `coordinator` are only touched on `loop`.
  CoordinatorMetrics(CoordinatorMetricsOptions options, EventLoop* loop, JobManager* jobs,
                     Coordinator* coordinator, const Clock* clock);
  ~CoordinatorMetrics() override;

  // Records one unary RPC (method: "baton.v1.JobService/SubmitJob"). Thread-safe.
  void ObserveRpc(const std::string& method, grpc::StatusCode code, absl::Duration latency);

  // Starts following jobs that are not followed yet and forgets those past retention.
  // Must run on the loop; Collect() posts it (hence const: it only changes the loop-owned
  // tracking state). Tests call it directly.
  void RefreshOnLoop() const;

  // prometheus::Collectable. Thread-safe; blocks up to scrape_timeout.
  std::vector<prometheus::MetricFamily> Collect() const override;

  // The scrape-time families, built from the state on the loop. Must run on the loop.
  std::vector<prometheus::MetricFamily> SnapshotOnLoop() const;
  // The parts of SnapshotOnLoop: job counts by state and the state's size; workers by
  // state, heartbeat age, lease, losses; the tracked jobs' state, restarts, goodput and
  // rank slowdown.
  void SnapshotJobCounts(std::vector<prometheus::MetricFamily>& out) const;
  void SnapshotWorkers(std::vector<prometheus::MetricFamily>& out) const;
  // Refused worker reports, refused changes and refused worker lifecycle events.
  void SnapshotRefusals(std::vector<prometheus::MetricFamily>& out) const;
  // Per queue of a coordinator with queues (none without): pending and admitted jobs,
  // quota, usage and borrowing in slots and GPUs, preemptions and shrinks.
  void SnapshotQueues(std::vector<prometheus::MetricFamily>& out) const;
  void SnapshotTrackedJobs(std::vector<prometheus::MetricFamily>& out) const;

 private:
  struct JobTracker;
  class Sink;

  // Called (on the loop) by a job's watch stream.
  void OnUpdate(const std::string& job_id, const baton::v1::JobUpdate& update) const;
  // Observes the recovery phases of `job`'s failures that completed since the last call.
  void ObserveRecoveryOnLoop(JobTracker& tracker, const baton::v1::Job& job) const;

  const CoordinatorMetricsOptions options_;
  EventLoop* const loop_;
  JobManager* const jobs_;
  Coordinator* const coordinator_;
  const Clock* const clock_;
  const absl::Time started_;
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Histogram& queue_wait_;
  prometheus::Histogram& rendezvous_;
  prometheus::Family<prometheus::Histogram>& recovery_;
  prometheus::Family<prometheus::Counter>& restarts_;
  prometheus::Family<prometheus::Histogram>& rpc_;

  // Loop-owned (touched only on the event loop). A job is followed once: its id stays in
  // `followed_` after its tracker is dropped.
  mutable std::map<std::string, std::unique_ptr<JobTracker>> trackers_;
  mutable std::set<std::string> followed_;
};

// A gRPC server interceptor factory that times every unary RPC into `metrics`
// (must outlive the server). Streaming RPCs (watches, log follows, worker streams) are
// not timed: their duration is a session length, not a latency.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics);

// The server serves CoordinatorMetrics with the daemons' shared endpoint.
using ::baton::ServeMetrics;

}  // namespace baton::coordinator
