#pragma once

// baton-worker's Prometheus metrics: every family is built here, once, in WorkerMetrics.
// The training series are fed from the trainer's metric lines (worker/trainer/contract/contract.h)
// as the supervisor parses them, and from the assignments the agent starts.
//
// Naming: `baton_` prefix, base units (_seconds, _bytes), counters end in _total, every
// family has HELP. The training job is the label `job_id` (not `job`: Prometheus owns the
// `job` target label and would rename ours to `exported_job`). Labels are bounded: job_id
// and rank only exist while a rank of that job runs here, plus `retention` after its
// process ended (so the final values are scraped), then the series are removed.

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "worker/supervisor/supervisor.h"

namespace baton::worker {

struct WorkerMetricsOptions {
  // How long a rank's series stay exported after its process ended.
  absl::Duration retention = absl::Minutes(2);
};

// The families (label names in braces; phase is one of data, forward, backward,
// communication, optimizer):
//   baton_trainer_steps_total{job_id,rank}            optimizer steps completed
//   baton_trainer_samples_total{job_id,rank}          samples this rank trained on
//   baton_trainer_tokens_total{job_id,rank}           target tokens (language models)
//   baton_trainer_skipped_steps_total{job_id,rank}    fp16 steps skipped for inf/NaN
//   baton_trainer_allreduce_bytes_total{job_id,rank}  gradient bytes all-reduced (the time
//                                                     waited for them: phase communication)
//   baton_trainer_loss{job_id,rank}, baton_trainer_learning_rate, baton_trainer_loss_scale,
//   baton_trainer_grad_norm                           latest values (gauges)
//   baton_trainer_gpu_memory_bytes{job_id,rank,kind}  kind: allocated, reserved, peak
//   baton_trainer_step_seconds{job_id,rank}           histogram, one observation per step
//   baton_trainer_step_phase_seconds{job_id,rank,phase}  histogram, one per step and phase
//   baton_trainer_last_step_timestamp_seconds{job_id,rank}  when the latest line arrived
//   baton_worker_process_starts_total{job_id}         training processes started here
//   baton_worker_process_restarts_total{job_id}       ...of them for a generation > 1
//
// How a metric line becomes counts: a line reports the global step S and averages over
// the steps since the rank's previous line. Steps covered = S - previous S of the same
// job and rank on this worker (any generation; S is global and resumes after a restore);
// for the first line of a rank, S itself in generation 1, and 0 in later generations
// (the restore point is unknown here, so that line only sets the baseline). The
// histograms get `covered` observations of the line's per-step average (so _count is
// steps and _sum the total time). Samples per step and rank: the TrainerSpec's
// batch_size x accumulation_steps when the job uses the built-in trainer, else
// samples_per_sec x time_step_s / world_size (samples_per_sec is global). Tokens:
// samples x tokens_per_sec / samples_per_sec.
//
// Thread-safe (one mutex; prometheus-cpp metrics are thread-safe themselves).
class WorkerMetrics final : public prometheus::Collectable {
 public:
  // Whether (job, generation, rank) still has a live process on this worker. Called from
  // Sweep() with the WorkerMetrics lock held: it must not call into WorkerMetrics.
  using RankAliveFn =
      std::function<bool(const std::string& job_id, int64_t generation, int32_t rank)>;

  // `clock` must outlive this object.
  WorkerMetrics(WorkerMetricsOptions options, const Clock* clock, RankAliveFn rank_alive);
  ~WorkerMetrics() override;

  // An assignment's processes were spawned: records world size and samples per step,
  // counts process starts/restarts.
  void OnAssignmentStarted(const baton::v1::StartAssignment& request);
  // One parsed metric line of a rank of `job_id`.
  void OnMetricPoint(const std::string& job_id, const baton::v1::MetricPoint& point);
  // Removes the series of ranks that ended (rank_alive false) longer than `retention` ago,
  // and of jobs with no rank left. Collect() calls it first.
  void Sweep();

  // prometheus::Collectable: every family, after a Sweep().
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct RankSeries;
  struct JobInfo {
    int64_t generation = 0;  // Of the latest assignment started here.
    std::vector<int32_t> ranks;  // Its ranks.
    int32_t world_size = 0;
    double samples_per_step_per_rank = 0;  // 0: derive it from each line.
    absl::Time ended = absl::InfiniteFuture();  // When no rank of it was seen alive.
    prometheus::Counter* starts = nullptr;
    prometheus::Counter* restarts = nullptr;
  };
  using RankKey = std::pair<std::string, int32_t>;  // (job_id, rank)

  RankSeries& SeriesLocked(const std::string& job_id, int32_t rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobInfo& JobLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveSeriesLocked(RankSeries& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepImpl() const;

  const WorkerMetricsOptions options_;
  const Clock* const clock_;
  const RankAliveFn rank_alive_;
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& samples_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& allreduce_bytes_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& lr_;
  prometheus::Family<prometheus::Gauge>& loss_scale_;
  prometheus::Family<prometheus::Gauge>& grad_norm_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_;
  prometheus::Family<prometheus::Gauge>& last_step_time_;
  prometheus::Family<prometheus::Histogram>& step_seconds_;
  prometheus::Family<prometheus::Histogram>& phase_seconds_;
  prometheus::Family<prometheus::Counter>& process_starts_;
  prometheus::Family<prometheus::Counter>& process_restarts_;

  // Sweep() runs from the const Collect(); the tables are its state.
  mutable absl::Mutex mu_;
  mutable std::map<RankKey, std::unique_ptr<RankSeries>> series_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::string, JobInfo> jobs_ ABSL_GUARDED_BY(mu_);
};

// The Supervisor's own errors on /metrics:
//   baton_worker_illegal_rank_transitions_total  rank transitions the lifecycle forbids
//                                                (rank_lifecycle.h), refused by the
//                                                Supervisor: a bug of the worker (alert
//                                                WorkerIllegalRankTransition)
class SupervisorMetrics final : public prometheus::Collectable {
 public:
  // Counters read at each scrape; each must be thread-safe and usable for the lifetime of
  // this object.
  struct Counters {
    std::function<int64_t()> illegal_transitions;  // Supervisor::illegal_rank_transitions
    std::function<int64_t()> dropped_log_lines;    // Supervisor::dropped_log_lines
    std::function<int64_t()> capped_logs;          // Supervisor::capped_rank_logs
  };
  // `rank_cgroups`: whether ranks run in a cgroup each (RankCgroups), else the fallback.
  SupervisorMetrics(Counters counters, bool rank_cgroups)
      : counters_(std::move(counters)), rank_cgroups_(rank_cgroups) {}
  // baton_worker_illegal_rank_transitions_total, baton_worker_rank_log_lines_dropped_total,
  // baton_worker_rank_logs_capped_total, baton_worker_rank_cgroups.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Counters counters_;
  const bool rank_cgroups_;
};

// A SupervisorListener that feeds every metric point to WorkerMetrics and forwards all
// calls to `next` (the Outbox). Both must outlive it. Thread-safe, never blocks.
class MetricsListener final : public SupervisorListener {
 public:
  MetricsListener(WorkerMetrics* metrics, SupervisorListener* next)
      : metrics_(metrics), next_(next) {}
  void OnLogLine(const std::string& job_id, baton::v1::LogLine line) override;
  void OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) override;
  void OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat, absl::Time read) override;
  void OnReportsPending() override;

 private:
  WorkerMetrics* const metrics_;
  SupervisorListener* const next_;
};

}  // namespace baton::worker
