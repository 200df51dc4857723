#include "coordinator/server/metrics.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "baton/v1/job.pb.h"
#include "common/logging.h"
#include "common/metrics_http.h"
#include "common/spec/restart_stats.h"
#include "common/time/proto_time.h"
#include "coordinator/jobs/job_state.h"
#include "coordinator/policy/failure_reason.h"
#include "coordinator/server/role_metrics.h"

namespace baton::coordinator {
namespace {

using baton::v1::JobUpdate;

// Durations of scheduling phases and RPCs, seconds: 1 ms .. 10 min.
prometheus::Histogram::BucketBoundaries PhaseBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}

// The reasons of planned resizes' RESTARTING transitions (RecoveryManager::Resize).
constexpr baton::v1::FailureReason kPlannedResizeReasons[] = {
    baton::v1::FAILURE_REASON_DRAINING, baton::v1::FAILURE_REASON_SCALING_UP,
    baton::v1::FAILURE_REASON_SHRINKING, baton::v1::FAILURE_REASON_PREEMPTED};

// A counter family with one series per `label` value: every value in `always` (0 until
// counted), then any other value `counts` holds.
prometheus::MetricFamily CountsByLabel(const std::string& name, const std::string& help,
                                       const std::string& label,
                                       const std::map<std::string, int64_t>& counts,
                                       std::initializer_list<const char*> always) {
  prometheus::MetricFamily family = MakeFamily(name, help, prometheus::MetricType::Counter);
  std::set<std::string> listed;
  for (const char* value : always) {
    const auto it = counts.find(value);
    family.metric.push_back(MakeSample({{label, value}},
                                       static_cast<double>(it == counts.end() ? 0 : it->second),
                                       prometheus::MetricType::Counter));
    listed.insert(value);
  }
  for (const auto& [value, n] : counts) {
    if (listed.count(value) > 0) continue;
    family.metric.push_back(
        MakeSample({{label, value}}, static_cast<double>(n), prometheus::MetricType::Counter));
  }
  return family;
}

// "queued" for JOB_STATE_QUEUED: the label value of a state.
std::string StateLabel(baton::v1::JobState s) {
  return absl::AsciiStrToLower(absl::StripPrefix(baton::v1::JobState_Name(s), "JOB_STATE_"));
}

// Every proto job state but UNSPECIFIED, so states added to the proto appear by themselves.
std::vector<baton::v1::JobState> AllStates() {
  std::vector<baton::v1::JobState> out;
  const google::protobuf::EnumDescriptor* d = baton::v1::JobState_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    const auto s = static_cast<baton::v1::JobState>(d->value(i)->number());
    if (s != baton::v1::JOB_STATE_UNSPECIFIED) out.push_back(s);
  }
  return out;
}

bool IsTerminalProto(baton::v1::JobState s) {
  JobState state;
  return JobStateFromProto(s, &state).ok() && IsTerminal(state);
}

// The recovery phases of a Failure record: label value and the two times bounding it.
struct RecoveryPhase {
  const char* label;
  const google::protobuf::Timestamp& (baton::v1::Failure::*from)() const;
  bool (baton::v1::Failure::*has_from)() const;
  const google::protobuf::Timestamp& (baton::v1::Failure::*to)() const;
  bool (baton::v1::Failure::*has_to)() const;
};
using F = baton::v1::Failure;
constexpr RecoveryPhase kRecoveryPhases[] = {
    {"detect", &F::occurred_time, &F::has_occurred_time, &F::fail_time, &F::has_fail_time},
    {"stop", &F::fail_time, &F::has_fail_time, &F::stopped_time, &F::has_stopped_time},
    {"backoff", &F::stopped_time, &F::has_stopped_time, &F::rendezvous_time,
     &F::has_rendezvous_time},
    {"rendezvous", &F::rendezvous_time, &F::has_rendezvous_time, &F::running_time,
     &F::has_running_time},
    {"restore", &F::running_time, &F::has_running_time, &F::first_step_time,
     &F::has_first_step_time},
};
constexpr int kNumRecoveryPhases = sizeof(kRecoveryPhases) / sizeof(kRecoveryPhases[0]);

}  // namespace

// What the metrics know of one followed job, from its events: what the histograms need,
// and whether and when it ended (for terminal_retention). Loop-owned.
struct CoordinatorMetrics::JobTracker {
  baton::v1::JobState state = baton::v1::JOB_STATE_UNSPECIFIED;
  absl::Time end = absl::InfiniteFuture();  // InfiniteFuture: not ended.
  absl::Time queued_since = absl::InfinitePast();
  absl::Time rendezvous_since = absl::InfinitePast();
  // Per Failure record (by index in Job.restarts.failures, which only grows): the
  // recovery phases already observed, bit i for kRecoveryPhases[i].
  std::vector<unsigned> phases_observed;
};

// The watch stream of one job, feeding OnUpdate. JobManager calls it on the loop only.
class CoordinatorMetrics::Sink final : public UpdateSink {
 public:
  Sink(const CoordinatorMetrics* metrics, std::string job_id)
      : metrics_(metrics), job_id_(std::move(job_id)) {}
  bool Push(const JobUpdate& update) override {
    metrics_->OnUpdate(job_id_, update);
    return true;
  }
  void Finish(const absl::Status&) override {}

 private:
  const CoordinatorMetrics* const metrics_;
  const std::string job_id_;
};

CoordinatorMetrics::CoordinatorMetrics(CoordinatorMetricsOptions options, EventLoop* loop,
                                       JobManager* jobs, Coordinator* coordinator,
                                       const Clock* clock)
    : options_(options),
      loop_(loop),
      jobs_(jobs),
      coordinator_(coordinator),
      clock_(clock),
      started_(clock->Now()),
      registry_(std::make_shared<prometheus::Registry>()),
      queue_wait_(prometheus::BuildHistogram()
                      .Name("baton_coordinator_queue_wait_seconds")
                      .Help("Time a job waited QUEUED before its rendezvous started.")
                      .Register(*registry_)
                      .Add({}, PhaseBuckets())),
      rendezvous_(prometheus::BuildHistogram()
                      .Name("baton_coordinator_rendezvous_duration_seconds")
                      .Help("Time from RENDEZVOUS to RUNNING (ranks assigned, port reserved, "
                            "every process started).")
                      .Register(*registry_)
                      .Add({}, PhaseBuckets())),
      recovery_(prometheus::BuildHistogram()
                    .Name("baton_coordinator_recovery_duration_seconds")
                    .Help("Duration of each recovery phase after a failure that restarted "
                          "a job: detect (failure -> coordinator knows), stop (-> processes "
                          "stopped), backoff (-> "
                          "rendezvous), rendezvous (-> running), restore (-> first step).")
                    .Register(*registry_)),
      restarts_(prometheus::BuildCounter()
                    .Name("baton_coordinator_restarts_total")
                    .Help("Job restarts (RESTARTING transitions), by the event's reason; planned "
                          "resizes have reason Draining, ScalingUp, Shrinking or Preempted.")
                    .Register(*registry_)),
      rpc_(prometheus::BuildHistogram()
               .Name("baton_coordinator_rpc_duration_seconds")
               .Help("Server-side latency of unary RPCs, by method and gRPC status code.")
               .Register(*registry_)) {
  // Every phase's series exists from the start (zero until a recovery).
  for (const RecoveryPhase& phase : kRecoveryPhases) {
    recovery_.Add({{"phase", phase.label}}, PhaseBuckets());
  }
  // So do the planned resizes' causes: a counter that appears at 1 hides its first
  // increase from increase()/changes(), which the dashboard's resize annotation uses.
  for (baton::v1::FailureReason reason : kPlannedResizeReasons) {
    restarts_.Add({{"cause", std::string(FailureReasonName(reason))}});
  }
}

CoordinatorMetrics::~CoordinatorMetrics() = default;

void CoordinatorMetrics::ObserveRpc(const std::string& method, grpc::StatusCode code,
                                    absl::Duration latency) {
  static const char* const kCodes[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  const std::string code_label = c >= 0 && c <= 16 ? kCodes[c] : absl::StrCat(c);
  rpc_.Add({{"method", method}, {"code", code_label}}, PhaseBuckets())
      .Observe(absl::ToDoubleSeconds(latency));
}

void CoordinatorMetrics::OnUpdate(const std::string& job_id, const JobUpdate& update) const {
  auto it = trackers_.find(job_id);
  if (it == trackers_.end()) return;
  JobTracker& t = *it->second;
  switch (update.update_case()) {
    case JobUpdate::kSnapshot: {
      const baton::v1::Job& job = update.snapshot();
      t.state = job.state();
      if (job.has_end_time()) t.end = FromProto(job.end_time());
      return;
    }
    case JobUpdate::kEvent: {
      const baton::v1::JobEvent& e = update.event();
      if (e.to_state() == baton::v1::JOB_STATE_UNSPECIFIED) return;
      const absl::Time at = FromProto(e.time());
      const auto observe_since = [&](absl::Time since, prometheus::Histogram& h) {
        if (since != absl::InfinitePast() && at >= since)
          h.Observe(absl::ToDoubleSeconds(at - since));
      };
      if (e.from_state() == baton::v1::JOB_STATE_QUEUED &&
          e.to_state() == baton::v1::JOB_STATE_RENDEZVOUS) {
        observe_since(t.queued_since, queue_wait_);
      }
      if (e.from_state() == baton::v1::JOB_STATE_RENDEZVOUS &&
          e.to_state() == baton::v1::JOB_STATE_RUNNING) {
        observe_since(t.rendezvous_since, rendezvous_);
      }
      switch (e.to_state()) {
        case baton::v1::JOB_STATE_QUEUED:
          t.queued_since = at;
          break;
        case baton::v1::JOB_STATE_RENDEZVOUS:
          t.rendezvous_since = at;
          break;
        case baton::v1::JOB_STATE_RESTARTING:
          restarts_.Add({{"cause", e.reason().empty() ? "unknown" : e.reason()}}).Increment();
          break;
        default:
          break;
      }
      return;
    }
    case JobUpdate::kMetric:  // Not followed (an events-only watch): JobManager folds them.
      return;
    case JobUpdate::UPDATE_NOT_SET:
      return;
  }
}

void CoordinatorMetrics::ObserveRecoveryOnLoop(JobTracker& t, const baton::v1::Job& job) const {
  const auto& failures = job.restarts().failures();
  if (t.phases_observed.size() < static_cast<size_t>(failures.size())) {
    t.phases_observed.resize(failures.size(), 0);
  }
  for (int i = 0; i < failures.size(); ++i) {
    const baton::v1::Failure& f = failures[i];
    for (int p = 0; p < kNumRecoveryPhases; ++p) {
      const RecoveryPhase& phase = kRecoveryPhases[p];
      if ((t.phases_observed[i] & (1u << p)) != 0) continue;
      if (!(f.*phase.has_from)() || !(f.*phase.has_to)()) continue;
      t.phases_observed[i] |= 1u << p;
      const absl::Duration d = FromProto((f.*phase.to)()) - FromProto((f.*phase.from)());
      if (d >= absl::ZeroDuration()) {
        recovery_.Add({{"phase", phase.label}}, PhaseBuckets()).Observe(absl::ToDoubleSeconds(d));
      }
    }
  }
}

void CoordinatorMetrics::RefreshOnLoop() const {
  const absl::Time now = clock_->Now();
  // Recovery phases completed since the last refresh (before ended jobs are dropped).
  for (auto& [id, t] : trackers_) {
    if (const baton::v1::Job* job = jobs_->Peek(id)) ObserveRecoveryOnLoop(*t, *job);
  }
  // Forget trackers of jobs that ended more than the retention ago.
  for (auto it = trackers_.begin(); it != trackers_.end();) {
    const JobTracker& t = *it->second;
    if (IsTerminalProto(t.state) && now - t.end >= options_.terminal_retention) {
      it = trackers_.erase(it);
    } else {
      ++it;
    }
  }
  // Follow every job not followed yet, unless it ended before this process started (or
  // longer than the retention ago).
  std::vector<JobState> all;
  for (baton::v1::JobState s : AllStates()) {
    JobState state;
    if (JobStateFromProto(s, &state).ok()) all.push_back(state);
  }
  for (const std::string& id : jobs_->JobsIn(all)) {
    if (followed_.count(id) > 0) continue;
    const baton::v1::Job* job = jobs_->Peek(id);
    if (job == nullptr) continue;
    if (IsTerminalProto(job->state())) {
      const absl::Time end =
          job->has_end_time() ? FromProto(job->end_time()) : absl::InfinitePast();
      if (end < started_ || now - end >= options_.terminal_retention) {
        followed_.insert(id);  // Never followed: its history predates us.
        continue;
      }
    }
    followed_.insert(id);
    JobTracker& t = *(trackers_[id] = std::make_unique<JobTracker>());
    const absl::Status s =
        jobs_->Watch(id, 0, std::make_shared<Sink>(this, id), /*events_only=*/true);
    if (!s.ok()) BATON_LOG(WARNING) << "metrics: cannot follow job " << id << ": " << s;
    ObserveRecoveryOnLoop(t, *job);
  }
}

std::vector<prometheus::MetricFamily> CoordinatorMetrics::SnapshotOnLoop() const {
  std::vector<prometheus::MetricFamily> out;
  SnapshotJobCounts(out);
  SnapshotWorkers(out);
  SnapshotRefusals(out);
  SnapshotQueues(out);
  SnapshotTrackedJobs(out);
  return out;
}

void CoordinatorMetrics::SnapshotJobCounts(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  prometheus::MetricFamily jobs = MakeFamily(
      "baton_coordinator_jobs", "Jobs known to the coordinator, by state.", MetricType::Gauge);
  prometheus::MetricFamily queue =
      MakeFamily("baton_coordinator_queue_length", "Jobs waiting to be scheduled (QUEUED).",
                 MetricType::Gauge);
  for (baton::v1::JobState s : AllStates()) {
    JobState state;
    if (!JobStateFromProto(s, &state).ok()) continue;
    const double n = static_cast<double>(jobs_->JobsIn({state}).size());
    jobs.metric.push_back(MakeSample({{"state", StateLabel(s)}}, n, MetricType::Gauge));
    if (s == baton::v1::JOB_STATE_QUEUED)
      queue.metric.push_back(MakeSample({}, n, MetricType::Gauge));
  }
  out.push_back(std::move(jobs));
  out.push_back(std::move(queue));
  if (absl::StatusOr<int64_t> bytes = jobs_->StateBytes(); bytes.ok()) {
    prometheus::MetricFamily state = MakeFamily(
        "baton_coordinator_state_bytes",
        "Bytes the coordinator's state (SQLite database and write-ahead log) occupies on disk.",
        MetricType::Gauge);
    state.metric.push_back(MakeSample({}, static_cast<double>(*bytes), MetricType::Gauge));
    out.push_back(std::move(state));
  }
  const JobManager::CommitStats& commits = jobs_->commit_stats();
  prometheus::MetricFamily committed =
      MakeFamily("baton_coordinator_store_commits_total",
                 "State store transactions, by result (ok, failed); each ok one is an fsync of "
                 "the write-ahead log.",
                 MetricType::Counter);
  committed.metric.push_back(
      MakeSample({{"result", "ok"}}, static_cast<double>(commits.commits), MetricType::Counter));
  committed.metric.push_back(
      MakeSample({{"result", "failed"}}, static_cast<double>(commits.failed), MetricType::Counter));
  out.push_back(std::move(committed));
  prometheus::MetricFamily commit_time = MakeFamily(
      "baton_coordinator_store_commit_seconds_total",
      "Time the event loop spent in state store transactions (rate: the fraction of a core).",
      MetricType::Counter);
  commit_time.metric.push_back(
      MakeSample({}, absl::ToDoubleSeconds(commits.time), MetricType::Counter));
  out.push_back(std::move(commit_time));
}

void CoordinatorMetrics::SnapshotWorkers(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  const absl::Time now = clock_->Now();
  prometheus::MetricFamily workers = MakeFamily(
      "baton_coordinator_workers",
      "Workers known to the coordinator, by state (ready, draining, lost).", MetricType::Gauge);
  prometheus::MetricFamily heartbeat = MakeFamily(
      "baton_coordinator_worker_heartbeat_age_seconds",
      "Time since a connected (READY or DRAINING) worker's last heartbeat (heartbeat lag).",
      MetricType::Gauge);
  prometheus::MetricFamily lease = MakeFamily(
      "baton_coordinator_worker_lease_remaining_seconds",
      "Time until a connected worker's lease runs out unless renewed (it kills its training "
      "processes then); workers with leases only.",
      MetricType::Gauge);
  prometheus::MetricFamily losses = MakeFamily(
      "baton_coordinator_worker_losses_total",
      "Workers lost, by cause: lease_expired (silent for the lease: a network partition or a "
      "dead host), stream_closed, lease_revoked (its processes did not stop when asked).",
      MetricType::Counter);
  prometheus::MetricFamily unhealthy = MakeFamily(
      "baton_coordinator_worker_unhealthy",
      "1 while a connected worker is left out of new gangs because a pre-flight check found "
      "it slow or failing (`baton workers` shows why; it is checked again once the mark "
      "lapses), else 0.",
      MetricType::Gauge);
  double ready = 0, draining = 0, lost = 0;
  double lease_expired = 0, stream_closed = 0, lease_revoked = 0;
  for (const baton::v1::Worker& w : coordinator_->ListWorkers()) {
    lease_expired += w.lease_expirations();
    stream_closed += w.stream_losses();
    lease_revoked += w.lease_revocations();
    if (w.state() == baton::v1::WORKER_STATE_READY ||
        w.state() == baton::v1::WORKER_STATE_DRAINING) {
      ++(w.state() == baton::v1::WORKER_STATE_READY ? ready : draining);
      unhealthy.metric.push_back(MakeSample(
          {{"worker_id", w.id()}}, w.unhealthy_reason().empty() ? 0 : 1, MetricType::Gauge));
      if (w.has_last_heartbeat_time()) {
        heartbeat.metric.push_back(MakeSample(
            {{"worker_id", w.id()}},
            absl::ToDoubleSeconds(now - FromProto(w.last_heartbeat_time())), MetricType::Gauge));
      }
      if (w.has_lease_renew_time()) {
        lease.metric.push_back(MakeSample(
            {{"worker_id", w.id()}},
            absl::ToDoubleSeconds(FromProto(w.lease_renew_time()) + FromProto(w.lease()) - now),
            MetricType::Gauge));
      }
    } else if (w.state() == baton::v1::WORKER_STATE_LOST) {
      ++lost;
    }
  }
  workers.metric.push_back(MakeSample({{"state", "ready"}}, ready, MetricType::Gauge));
  workers.metric.push_back(MakeSample({{"state", "draining"}}, draining, MetricType::Gauge));
  workers.metric.push_back(MakeSample({{"state", "lost"}}, lost, MetricType::Gauge));
  losses.metric.push_back(
      MakeSample({{"cause", "lease_expired"}}, lease_expired, MetricType::Counter));
  losses.metric.push_back(
      MakeSample({{"cause", "stream_closed"}}, stream_closed, MetricType::Counter));
  losses.metric.push_back(
      MakeSample({{"cause", "lease_revoked"}}, lease_revoked, MetricType::Counter));
  out.push_back(std::move(workers));
  out.push_back(std::move(heartbeat));
  out.push_back(std::move(lease));
  out.push_back(std::move(losses));
  out.push_back(std::move(unhealthy));
}

void CoordinatorMetrics::SnapshotQueues(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  const baton::v1::ListQueuesResponse queues = coordinator_->ListQueues();
  if (!queues.configured()) return;
  struct Family {
    prometheus::MetricFamily family;
    std::function<double(const baton::v1::QueueStatus&)> value;
  };
  std::vector<Family> families;
  // One family, one series per queue: `value` of its QueueStatus.
  const auto add = [&](const char* name, const char* help,
                       std::function<double(const baton::v1::QueueStatus&)> value,
                       MetricType type = MetricType::Gauge) {
    families.push_back({MakeFamily(name, help, type), std::move(value)});
  };
  add("baton_coordinator_queue_pending_jobs", "Jobs waiting (QUEUED) in the queue.",
      [](const auto& q) { return q.pending_jobs(); });
  add("baton_coordinator_queue_admitted_jobs",
      "Jobs of the queue holding workers (RENDEZVOUS, RUNNING, RESTARTING).",
      [](const auto& q) { return q.admitted_jobs(); });
  add("baton_coordinator_queue_nominal_slots", "The queue's nominal quota in slots.",
      [](const auto& q) { return q.nominal().slots(); });
  add("baton_coordinator_queue_used_slots", "Slots the queue's admitted jobs hold.",
      [](const auto& q) { return q.used().slots(); });
  add("baton_coordinator_queue_borrowed_slots",
      "Slots the queue holds beyond its nominal quota, borrowed within its cohort "
      "(reclaimable by preemption).",
      [](const auto& q) { return q.borrowed().slots(); });
  add("baton_coordinator_queue_nominal_gpus", "The queue's nominal quota in GPUs.",
      [](const auto& q) { return q.nominal().gpus(); });
  add("baton_coordinator_queue_used_gpus", "GPUs the queue's admitted jobs hold.",
      [](const auto& q) { return q.used().gpus(); });
  add(
      "baton_coordinator_queue_preemptions_total",
      "Jobs of the queue preempted (checkpointed, stopped and requeued) to make room for "
      "another job, since the coordinator started.",
      [](const auto& q) { return q.preemptions(); }, MetricType::Counter);
  add(
      "baton_coordinator_queue_shrinks_total",
      "Elastic jobs of the queue shrunk toward workers.min to make room for another job, "
      "since the coordinator started.",
      [](const auto& q) { return q.shrinks(); }, MetricType::Counter);
  for (Family& f : families) {
    const MetricType type = f.family.type;
    for (const baton::v1::QueueStatus& q : queues.queues()) {
      f.family.metric.push_back(MakeSample({{"queue", q.name()}}, f.value(q), type));
    }
    out.push_back(std::move(f.family));
  }
}

void CoordinatorMetrics::SnapshotRefusals(std::vector<prometheus::MetricFamily>& out) const {
  out.push_back(CountsByLabel(
      "baton_coordinator_worker_reports_refused_total",
      "Worker reports refused because they were about an assignment the coordinator did not "
      "give that worker in the job's current generation (a compromised or buggy worker), "
      "by kind of report.",
      "kind", coordinator_->refused_reports(),
      {"logs", "metrics", "assignment_started", "assignment_failed", "process_exited",
       "port_reserved", "profile_trace"}));
  // Refused changes: a bug if ever non-zero (the log names each change and why).
  int64_t refused_changes = 0;
  for (const auto& [change, n] : coordinator_->refused_changes()) refused_changes += n;
  prometheus::MetricFamily changes = MakeFamily(
      "baton_coordinator_changes_refused_total",
      "Changes the coordinator abandoned because its own rules refused them (an illegal job "
      "transition, a broken invariant: a bug; its log names each).",
      prometheus::MetricType::Counter);
  changes.metric.push_back(
      MakeSample({}, static_cast<double>(refused_changes), prometheus::MetricType::Counter));
  out.push_back(std::move(changes));
  out.push_back(CountsByLabel(
      "baton_coordinator_worker_events_refused_total",
      "Worker lifecycle events the coordinator refused because the lifecycle has no such "
      "transition (a drain of a worker that is not READY, a loss of one not connected: the "
      "races of a closing stream, no-ops), by event.",
      "event", coordinator_->refused_worker_events(),
      {"Connect", "ConnectDraining", "Drain", "Lose"}));
}

void CoordinatorMetrics::SnapshotTrackedJobs(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  prometheus::MetricFamily state =
      MakeFamily("baton_coordinator_job_state",
                 "1 for the job's current state, 0 for the others (non-terminal jobs and recently "
                 "ended ones).",
                 MetricType::Gauge);
  prometheus::MetricFamily restarts = MakeFamily(
      "baton_coordinator_job_restarts_total",
      "Restarts of a job caused by failures: restarts used over all failure classes, one "
      "per RESTARTING transition a failure caused (as `baton describe` shows); planned "
      "resizes (drain, scale-up) are not counted.",
      MetricType::Counter);
  prometheus::MetricFamily goodput = MakeFamily(
      "baton_coordinator_job_goodput_ratio",
      "Productive step time / wall time since the job started (see coordinator/server/metrics.h).",
      MetricType::Gauge);
  prometheus::MetricFamily slowdown =
      MakeFamily("baton_rank_slowdown_ratio",
                 "A rank's recent own work per step (its step time less its wait in collectives) / "
                 "the median of its job's ranks (RUNNING jobs).",
                 MetricType::Gauge);
  prometheus::MetricFamily hangs = MakeFamily(
      "baton_coordinator_job_hangs_total",
      "Hangs of a job (stall failures: coordinator/policy/stall_detector.h), by the culprit the "
      "coordinator named (rank, worker), the phase it was stuck in and the evidence (silent: "
      "its heartbeat stopped; stuck: in its phase past the learned timeout; no-report; "
      "output-silence).",
      MetricType::Counter);
  const std::vector<baton::v1::JobState> states = AllStates();
  // The job's state, restarts, goodput and slowdown are JobManager's (the record as
  // written, and what it folds from the metric points); the tracker only says which jobs
  // are exported.
  for (const auto& [id, t] : trackers_) {
    const baton::v1::Job* job = jobs_->PeekWritten(id);
    if (job == nullptr) continue;
    for (baton::v1::JobState s : states) {
      state.metric.push_back(MakeSample({{"job_id", id}, {"state", StateLabel(s)}},
                                        s == job->state() ? 1 : 0, MetricType::Gauge));
    }
    restarts.metric.push_back(MakeSample({{"job_id", id}},
                                         static_cast<double>(TotalRestarts(job->restarts())),
                                         MetricType::Counter));
    std::map<std::vector<std::string>, int> by_culprit;  // rank, worker, phase, evidence
    for (const baton::v1::Failure& f : job->restarts().failures()) {
      if (f.failure_class() != baton::v1::FAILURE_CLASS_STALL) continue;
      ++by_culprit[{f.has_rank() ? absl::StrCat(f.rank()) : "", f.worker_id(), f.hang_phase(),
                    f.hang_evidence()}];
    }
    for (const auto& [labels, count] : by_culprit) {
      hangs.metric.push_back(MakeSample({{"job_id", id},
                                         {"rank", labels[0]},
                                         {"worker", labels[1]},
                                         {"phase", labels[2]},
                                         {"evidence", labels[3]}},
                                        count, MetricType::Counter));
    }
    if (const std::optional<double> ratio = jobs_->GoodputRatioNow(id)) {
      goodput.metric.push_back(MakeSample({{"job_id", id}}, *ratio, MetricType::Gauge));
    }
    if (job->state() == baton::v1::JOB_STATE_RUNNING) {
      for (const auto& [rank, ratio] : jobs_->SlowdownRatios(id)) {
        slowdown.metric.push_back(
            MakeSample({{"job_id", id}, {"rank", absl::StrCat(rank)}}, ratio, MetricType::Gauge));
      }
    }
  }
  out.push_back(std::move(state));
  out.push_back(std::move(restarts));
  out.push_back(std::move(hangs));
  out.push_back(std::move(goodput));
  out.push_back(std::move(slowdown));
}

std::vector<prometheus::MetricFamily> CoordinatorMetrics::Collect() const {
  // The loop may run the closure after a timed-out scrape returned: it only writes into
  // the shared result.
  struct Result {
    absl::Notification done;
    std::vector<prometheus::MetricFamily> families;
  };
  auto result = std::make_shared<Result>();
  loop_->Post([this, result] {
    RefreshOnLoop();
    result->families = SnapshotOnLoop();
    result->done.Notify();
  });
  const bool refreshed = result->done.WaitForNotificationWithTimeout(options_.scrape_timeout);
  // After the refresh, which observes recovery phases into the registry's histograms.
  std::vector<prometheus::MetricFamily> out = registry_->Collect();
  AppendRoleFamilies(/*leader=*/true, options_.election_errors, out);
  if (refreshed) {
    for (prometheus::MetricFamily& f : result->families) {
      if (!f.metric.empty()) out.push_back(std::move(f));
    }
  } else {
    BATON_LOG(WARNING) << "metrics: no snapshot from the event loop within "
                       << options_.scrape_timeout << "; serving event-derived families only";
  }
  return out;
}

namespace {

class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(CoordinatorMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->ObserveRpc(method_, methods->GetSendStatus().error_code(), absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics* const metrics_;
  const std::string method_;
  const absl::Time start_;
};

class RpcInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) return nullptr;
    return new RpcInterceptor(metrics_, std::string(absl::StripPrefix(info->method(), "/")));
  }

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics) {
  return std::make_unique<RpcInterceptorFactory>(metrics);
}

}  // namespace baton::coordinator
