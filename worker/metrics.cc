#include "worker/metrics.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/trainer/contract/contract.h"

namespace baton::worker {
namespace {

namespace tr = ::baton::trainer;

// Step and phase times, seconds: 1 ms .. 1 min.
const prometheus::Histogram::BucketBoundaries& StepBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *kBuckets;
}

// The trainer's phase keys and the `phase` label values, in step order.
constexpr std::pair<const char*, const char*> kPhases[] = {
    {tr::kMetricTimeData, "data"},
    {tr::kMetricTimeForward, "forward"},
    {tr::kMetricTimeBackward, "backward"},
    {tr::kMetricTimeCommWait, "communication"},
    {tr::kMetricTimeOptimizer, "optimizer"},
};
constexpr size_t kNumPhases = sizeof(kPhases) / sizeof(kPhases[0]);

constexpr std::pair<const char*, const char*> kMemory[] = {
    {tr::kMetricMemAllocated, "allocated"},
    {tr::kMetricMemReserved, "reserved"},
    {tr::kMetricMemPeak, "peak"},
};

// `count` observations of `value` in one call, so _count grows by the steps covered.
void ObserveMany(prometheus::Histogram& h, double value, int64_t count) {
  if (count <= 0 || !std::isfinite(value)) return;
  const auto& b = StepBuckets();
  std::vector<double> increments(b.size() + 1, 0.0);
  const size_t i = static_cast<size_t>(std::lower_bound(b.begin(), b.end(), value) - b.begin());
  increments[i] = static_cast<double>(count);
  h.ObserveMultiple(increments, value * static_cast<double>(count));
}

const double* Find(const baton::v1::MetricPoint& p, const char* key) {
  auto it = p.values().find(key);
  return it == p.values().end() ? nullptr : &it->second;
}

// Registers one metric family (name, help) with `registry`.
prometheus::Family<prometheus::Counter>& NewCounter(prometheus::Registry& registry,
                                                    const std::string& name,
                                                    const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}
prometheus::Family<prometheus::Gauge>& NewGauge(prometheus::Registry& registry,
                                                const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}
prometheus::Family<prometheus::Histogram>& NewHistogram(prometheus::Registry& registry,
                                                        const std::string& name,
                                                        const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

// One rank's series; pointers into the families, removed together.
struct WorkerMetrics::RankSeries {
  std::string job_id;
  int32_t rank = 0;
  int64_t generation = 0;  // Of the latest line.
  int64_t last_step = -1;  // -1: no line yet.
  absl::Time ended = absl::InfiniteFuture();  // First time the process was seen gone.

  prometheus::Counter* steps = nullptr;
  prometheus::Counter* samples = nullptr;
  prometheus::Counter* tokens = nullptr;
  prometheus::Counter* skipped = nullptr;
  prometheus::Counter* allreduce_bytes = nullptr;
  prometheus::Gauge* loss = nullptr;
  prometheus::Gauge* lr = nullptr;
  prometheus::Gauge* loss_scale = nullptr;  // Created on first use (fp16 only).
  prometheus::Gauge* grad_norm = nullptr;
  prometheus::Gauge* last_step_time = nullptr;
  prometheus::Gauge* memory[3] = {nullptr, nullptr, nullptr};  // Created on first use.
  prometheus::Histogram* step_seconds = nullptr;
  prometheus::Histogram* phases[kNumPhases] = {};
};

WorkerMetrics::WorkerMetrics(WorkerMetricsOptions options, const Clock* clock,
                             RankAliveFn rank_alive)
    : options_(options),
      clock_(clock),
      rank_alive_(std::move(rank_alive)),
      registry_(std::make_shared<prometheus::Registry>()),
      steps_(NewCounter(*registry_, "baton_trainer_steps_total",
                        "Optimizer steps completed by a training rank.")),
      samples_(NewCounter(*registry_, "baton_trainer_samples_total",
                          "Training samples processed by a rank (its share of the global "
                          "batch).")),
      tokens_(NewCounter(*registry_, "baton_trainer_tokens_total",
                         "Target tokens processed by a rank (language models only).")),
      skipped_(NewCounter(*registry_, "baton_trainer_skipped_steps_total",
                          "fp16 optimizer steps skipped because gradients overflowed.")),
      allreduce_bytes_(NewCounter(*registry_, "baton_trainer_allreduce_bytes_total",
                                  "Gradient bytes a rank all-reduced (as sent; 16-bit when "
                                  "compressed). Time waited: phase=\"communication\".")),
      loss_(NewGauge(*registry_, "baton_trainer_loss",
                     "Training loss, averaged over the rank's latest metric window.")),
      lr_(NewGauge(*registry_, "baton_trainer_learning_rate",
                   "Learning rate of the rank's latest step.")),
      loss_scale_(NewGauge(*registry_, "baton_trainer_loss_scale",
                           "fp16 dynamic loss scale after the latest step.")),
      grad_norm_(NewGauge(*registry_, "baton_trainer_grad_norm",
                          "Mean L2 norm of the averaged gradient over the latest window.")),
      gpu_memory_(NewGauge(*registry_, "baton_trainer_gpu_memory_bytes",
                           "CUDA caching allocator memory of a rank: allocated, reserved, "
                           "and peak allocated since the previous metric line.")),
      last_step_time_(NewGauge(*registry_, "baton_trainer_last_step_timestamp_seconds",
                               "Unix time of the rank's latest metric line.")),
      step_seconds_(NewHistogram(*registry_, "baton_trainer_step_seconds",
                                 "Wall time of one optimizer step (one observation per step: "
                                 "the window average).")),
      phase_seconds_(NewHistogram(*registry_, "baton_trainer_step_phase_seconds",
                                  "Time of one optimizer step spent in a phase: data, forward, "
                                  "backward, communication (all-reduce wait), optimizer.")),
      process_starts_(NewCounter(*registry_, "baton_worker_process_starts_total",
                                 "Training processes started on this worker for a job.")),
      process_restarts_(NewCounter(*registry_, "baton_worker_process_restarts_total",
                                   "Training processes started on this worker for a job "
                                   "generation after the first (restarts).")) {}

WorkerMetrics::~WorkerMetrics() = default;

WorkerMetrics::JobInfo& WorkerMetrics::JobLocked(const std::string& job_id) {
  JobInfo& job = jobs_[job_id];
  if (job.starts == nullptr) {
    job.starts = &process_starts_.Add({{"job_id", job_id}});
    job.restarts = &process_restarts_.Add({{"job_id", job_id}});
  }
  return job;
}

WorkerMetrics::RankSeries& WorkerMetrics::SeriesLocked(const std::string& job_id, int32_t rank) {
  std::unique_ptr<RankSeries>& slot = series_[{job_id, rank}];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<RankSeries>();
  RankSeries& s = *slot;
  s.job_id = job_id;
  s.rank = rank;
  const prometheus::Labels labels = {{"job_id", job_id}, {"rank", absl::StrCat(rank)}};
  s.steps = &steps_.Add(labels);
  s.samples = &samples_.Add(labels);
  s.tokens = &tokens_.Add(labels);
  s.skipped = &skipped_.Add(labels);
  s.allreduce_bytes = &allreduce_bytes_.Add(labels);
  s.loss = &loss_.Add(labels);
  s.lr = &lr_.Add(labels);
  s.grad_norm = &grad_norm_.Add(labels);
  s.last_step_time = &last_step_time_.Add(labels);
  s.step_seconds = &step_seconds_.Add(labels, StepBuckets());
  for (size_t i = 0; i < kNumPhases; ++i) {
    prometheus::Labels l = labels;
    l["phase"] = kPhases[i].second;
    s.phases[i] = &phase_seconds_.Add(l, StepBuckets());
  }
  return s;
}

void WorkerMetrics::RemoveSeriesLocked(RankSeries& s) const {
  steps_.Remove(s.steps);
  samples_.Remove(s.samples);
  tokens_.Remove(s.tokens);
  skipped_.Remove(s.skipped);
  allreduce_bytes_.Remove(s.allreduce_bytes);
  loss_.Remove(s.loss);
  lr_.Remove(s.lr);
  if (s.loss_scale != nullptr) loss_scale_.Remove(s.loss_scale);
  grad_norm_.Remove(s.grad_norm);
  last_step_time_.Remove(s.last_step_time);
  for (prometheus::Gauge* g : s.memory) {
    if (g != nullptr) gpu_memory_.Remove(g);
  }
  step_seconds_.Remove(s.step_seconds);
  for (prometheus::Histogram* h : s.phases) phase_seconds_.Remove(h);
}

void WorkerMetrics::OnAssignmentStarted(const baton::v1::StartAssignment& request) {
  absl::MutexLock lock(&mu_);
  JobInfo& job = JobLocked(request.job_id());
  // A repeated StartAssignment spawns nothing (Supervisor::StartAssignment).
  const bool repeated = job.generation == request.generation();
  job.generation = request.generation();
  job.ranks.clear();
  for (const baton::v1::RankInfo& r : request.ranks()) job.ranks.push_back(r.rank());
  job.world_size = request.world_size();
  job.ended = absl::InfiniteFuture();
  job.samples_per_step_per_rank = 0;
  if (request.spec().has_trainer()) {
    const baton::v1::TrainerSpec& t = request.spec().trainer();
    // With a global batch each rank's share is global_batch / world size.
    job.samples_per_step_per_rank =
        t.global_batch() > 0 && request.world_size() > 0
            ? static_cast<double>(t.global_batch()) / request.world_size()
            : static_cast<double>(t.batch_size()) * std::max(1, t.accumulation_steps());
  }
  if (repeated) return;
  job.starts->Increment(request.ranks_size());
  if (request.generation() > 1) job.restarts->Increment(request.ranks_size());
}

void WorkerMetrics::OnMetricPoint(const std::string& job_id, const baton::v1::MetricPoint& p) {
  absl::MutexLock lock(&mu_);
  RankSeries& s = SeriesLocked(job_id, p.rank());
  s.ended = absl::InfiniteFuture();
  int64_t covered = 0;
  if (s.last_step >= 0) {
    covered = std::max<int64_t>(0, p.step() - s.last_step);
  } else if (p.generation() <= 1) {
    covered = p.step();
  }
  s.last_step = std::max(s.last_step, p.step());
  s.generation = std::max(s.generation, p.generation());
  s.last_step_time->Set(absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()));

  s.steps->Increment(static_cast<double>(covered));
  const double* rate = Find(p, tr::kMetricSamplesPerSec);
  const double* step_time = Find(p, tr::kMetricTimeStep);
  double per_step = 0;
  auto job_it = jobs_.find(job_id);
  if (job_it != jobs_.end() && job_it->second.samples_per_step_per_rank > 0) {
    per_step = job_it->second.samples_per_step_per_rank;
  } else if (rate != nullptr && step_time != nullptr) {
    const int32_t world = job_it != jobs_.end() ? std::max(1, job_it->second.world_size) : 1;
    per_step = *rate * *step_time / world;
  }
  const double samples = per_step * static_cast<double>(covered);
  s.samples->Increment(samples);
  if (const double* tokens_rate = Find(p, tr::kMetricTokensPerSec);
      tokens_rate != nullptr && rate != nullptr && *rate > 0) {
    s.tokens->Increment(samples * *tokens_rate / *rate);
  }
  if (const double* v = Find(p, tr::kMetricSkippedSteps); v != nullptr && *v > 0) {
    s.skipped->Increment(*v);
  }
  if (const double* v = Find(p, tr::kMetricCommBytes); v != nullptr && *v > 0) {
    s.allreduce_bytes->Increment(*v * static_cast<double>(covered));
  }
  if (const double* v = Find(p, tr::kMetricLoss)) s.loss->Set(*v);
  if (const double* v = Find(p, tr::kMetricLr)) s.lr->Set(*v);
  if (const double* v = Find(p, tr::kMetricGradNorm)) s.grad_norm->Set(*v);
  if (const double* v = Find(p, tr::kMetricLossScale)) {
    if (s.loss_scale == nullptr) {
      s.loss_scale = &loss_scale_.Add({{"job_id", job_id}, {"rank", absl::StrCat(p.rank())}});
    }
    s.loss_scale->Set(*v);
  }
  for (size_t i = 0; i < 3; ++i) {
    const double* v = Find(p, kMemory[i].first);
    if (v == nullptr) continue;
    if (s.memory[i] == nullptr) {
      s.memory[i] = &gpu_memory_.Add(
          {{"job_id", job_id}, {"rank", absl::StrCat(p.rank())}, {"kind", kMemory[i].second}});
    }
    s.memory[i]->Set(*v);
  }
  if (step_time != nullptr) ObserveMany(*s.step_seconds, *step_time, covered);
  for (size_t i = 0; i < kNumPhases; ++i) {
    if (const double* v = Find(p, kPhases[i].first)) ObserveMany(*s.phases[i], *v, covered);
  }
}

void WorkerMetrics::Sweep() { SweepImpl(); }

void WorkerMetrics::SweepImpl() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (auto it = series_.begin(); it != series_.end();) {
    RankSeries& s = *it->second;
    if (rank_alive_(s.job_id, s.generation, s.rank)) {
      s.ended = absl::InfiniteFuture();
    } else if (s.ended == absl::InfiniteFuture()) {
      s.ended = now;
    }
    if (now - s.ended >= options_.retention) {
      RemoveSeriesLocked(s);
      it = series_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobInfo& job = it->second;
    const bool alive = std::any_of(job.ranks.begin(), job.ranks.end(), [&](int32_t r) {
      return rank_alive_(it->first, job.generation, r);
    });
    const auto series = series_.lower_bound({it->first, INT32_MIN});
    const bool has_series = series != series_.end() && series->first.first == it->first;
    if (alive) {
      job.ended = absl::InfiniteFuture();
    } else if (job.ended == absl::InfiniteFuture()) {
      job.ended = now;
    }
    if (!has_series && now - job.ended >= options_.retention) {
      process_starts_.Remove(job.starts);
      process_restarts_.Remove(job.restarts);
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<prometheus::MetricFamily> WorkerMetrics::Collect() const {
  SweepImpl();
  return registry_->Collect();
}

void MetricsListener::OnLogLine(const std::string& job_id, baton::v1::LogLine line) {
  next_->OnLogLine(job_id, std::move(line));
}

void MetricsListener::OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) {
  metrics_->OnMetricPoint(job_id, point);
  next_->OnMetricPoint(job_id, std::move(point));
}

void MetricsListener::OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat,
                                  absl::Time read) {
  next_->OnHeartbeat(job_id, std::move(beat), read);
}

void MetricsListener::OnReportsPending() { next_->OnReportsPending(); }

std::vector<prometheus::MetricFamily> SupervisorMetrics::Collect() const {
  const auto one = [](const char* name, const char* help, prometheus::MetricType type,
                      double value) {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = type;
    prometheus::ClientMetric sample;
    (type == prometheus::MetricType::Counter ? sample.counter.value : sample.gauge.value) = value;
    family.metric.push_back(std::move(sample));
    return family;
  };
  using prometheus::MetricType;
  return {
      one("baton_worker_illegal_rank_transitions_total",
          "Rank state transitions the worker refused because its lifecycle forbids them (a bug "
          "of the worker; the rank keeps its state).",
          MetricType::Counter, static_cast<double>(counters_.illegal_transitions())),
      one("baton_worker_rank_log_lines_dropped_total",
          "Output lines of ranks not relayed to the coordinator because a rank printed more "
          "than --max_rank_log_lines_per_second (a marker line in its log says how many; the "
          "rank's log file on the worker keeps them).",
          MetricType::Counter, static_cast<double>(counters_.dropped_log_lines())),
      one("baton_worker_rank_logs_capped_total",
          "Rank log files (stdout.log, stderr.log) that reached --max_rank_log_bytes; the "
          "rank's further output is not kept on the worker's disk.",
          MetricType::Counter, static_cast<double>(counters_.capped_logs())),
      one("baton_worker_rank_cgroups",
          "1 if each rank runs in a cgroup of its own (everything it starts is killed with "
          "it), 0 if the worker could not create cgroups and falls back to its shims and "
          "killing orphans (docs/SECURITY.md).",
          MetricType::Gauge, rank_cgroups_ ? 1.0 : 0.0),
  };
}

}  // namespace baton::worker
