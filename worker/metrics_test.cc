#include "worker/metrics.h"

#include <map>
#include <optional>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/metrics_testing.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"

namespace baton::worker {
namespace {

using ::testing::Optional;
using ::testing::DoubleNear;

using ::baton::metrics_testing::Point;
using ::baton::metrics_testing::Value;

baton::v1::StartAssignment Assignment(const std::string& job, int64_t generation,
                                      std::vector<int32_t> ranks, int32_t world_size) {
  baton::v1::StartAssignment a;
  a.set_job_id(job);
  a.set_generation(generation);
  a.set_world_size(world_size);
  a.mutable_spec()->mutable_trainer()->set_batch_size(8);
  a.mutable_spec()->mutable_trainer()->set_accumulation_steps(2);
  for (int32_t r : ranks) a.add_ranks()->set_rank(r);
  return a;
}

class WorkerMetricsTest : public ::testing::Test {
 protected:
  WorkerMetricsTest()
      : metrics_({absl::Seconds(30)}, &clock_,
                 [this](const std::string& job, int64_t gen, int32_t rank) {
                   return alive_.count(std::make_tuple(job, gen, rank)) > 0;
                 }) {}

  FakeClock clock_;
  std::set<std::tuple<std::string, int64_t, int32_t>> alive_;
  WorkerMetrics metrics_;
};

TEST_F(WorkerMetricsTest, CountsStepsSamplesAndPhasesFromWindows) {
  alive_.insert({"j-1", 1, 0});
  metrics_.OnAssignmentStarted(Assignment("j-1", 1, {0}, 2));
  // Two windows of 10 and 5 steps; the histogram gets one observation per step.
  metrics_.OnMetricPoint("j-1", Point(1, 0, 10, {{"loss", 2.5}, {"lr", 0.1},
                                                 {"time_step_s", 0.2}, {"time_data_s", 0.05},
                                                 {"time_forward_s", 0.06},
                                                 {"samples_per_sec", 160},
                                                 {"tokens_per_sec", 1600},
                                                 {"comm_bytes", 1000}}));
  metrics_.OnMetricPoint("j-1", Point(1, 0, 15, {{"loss", 1.5}, {"time_step_s", 0.4},
                                                 {"time_data_s", 0.1}, {"comm_bytes", 1000}}));
  const auto scrape = metrics_.Collect();
  const std::map<std::string, std::string> l = {{"job_id", "j-1"}, {"rank", "0"}};
  EXPECT_THAT(Value(scrape, "baton_trainer_steps_total", l), Optional(15.0));
  // batch_size 8 x accumulation 2 per rank per step.
  EXPECT_THAT(Value(scrape, "baton_trainer_samples_total", l), Optional(15.0 * 16));
  // Only the first window had tokens_per_sec: 10 steps x 16 samples x 10 tokens/sample.
  EXPECT_THAT(Value(scrape, "baton_trainer_tokens_total", l), Optional(1600.0));
  EXPECT_THAT(Value(scrape, "baton_trainer_allreduce_bytes_total", l), Optional(15.0 * 1000));
  EXPECT_THAT(Value(scrape, "baton_trainer_loss", l), Optional(1.5));
  EXPECT_THAT(Value(scrape, "baton_trainer_learning_rate", l), Optional(0.1));
  EXPECT_THAT(Value(scrape, "baton_trainer_step_seconds", l, "count"), Optional(15.0));
  EXPECT_THAT(Value(scrape, "baton_trainer_step_seconds", l, "sum"),
              Optional(DoubleNear(10 * 0.2 + 5 * 0.4, 1e-9)));
  auto phase = [&](const std::string& p) {
    return std::map<std::string, std::string>{{"job_id", "j-1"}, {"rank", "0"}, {"phase", p}};
  };
  EXPECT_THAT(Value(scrape, "baton_trainer_step_phase_seconds", phase("data"), "sum"),
              Optional(DoubleNear(10 * 0.05 + 5 * 0.1, 1e-9)));
  EXPECT_THAT(Value(scrape, "baton_trainer_step_phase_seconds", phase("forward"), "count"),
              Optional(10.0));
  EXPECT_THAT(Value(scrape, "baton_trainer_step_phase_seconds", phase("optimizer"), "count"),
              Optional(0.0));
  // No fp16 and no GPU: those series are not exported at all.
  EXPECT_EQ(Value(scrape, "baton_trainer_loss_scale", l), std::nullopt);
  EXPECT_EQ(Value(scrape, "baton_trainer_gpu_memory_bytes",
                  {{"job_id", "j-1"}, {"rank", "0"}, {"kind", "peak"}}),
            std::nullopt);
  EXPECT_THAT(Value(scrape, "baton_worker_process_starts_total", {{"job_id", "j-1"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_worker_process_restarts_total", {{"job_id", "j-1"}}),
              Optional(0.0));
  for (const prometheus::MetricFamily& f : scrape) {
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.name.rfind("baton_", 0), 0u) << f.name;
  }
}

TEST_F(WorkerMetricsTest, AGlobalBatchIsSharedByTheRanks) {
  baton::v1::StartAssignment a = Assignment("j-g", 1, {0, 1}, 4);
  a.mutable_spec()->mutable_trainer()->set_global_batch(96);
  metrics_.OnAssignmentStarted(a);
  metrics_.OnMetricPoint("j-g", Point(1, 1, 10, {{"time_step_s", 0.1}}));
  EXPECT_THAT(Value(metrics_.Collect(), "baton_trainer_samples_total",
                    {{"job_id", "j-g"}, {"rank", "1"}}),
              Optional(10.0 * 96 / 4));
}

TEST_F(WorkerMetricsTest, DerivesSamplesFromTheGlobalRateForCommands) {
  baton::v1::StartAssignment a = Assignment("j-2", 1, {1}, 4);
  a.mutable_spec()->mutable_command()->add_argv("python3");  // Not the built-in trainer.
  alive_.insert({"j-2", 1, 1});
  metrics_.OnAssignmentStarted(a);
  // 400 samples/s globally at 0.1 s/step = 40 samples per step, 10 per rank.
  metrics_.OnMetricPoint("j-2", Point(1, 1, 3, {{"samples_per_sec", 400}, {"time_step_s", 0.1}}));
  EXPECT_THAT(Value(metrics_.Collect(), "baton_trainer_samples_total",
                    {{"job_id", "j-2"}, {"rank", "1"}}),
              Optional(DoubleNear(30.0, 1e-9)));
}

TEST_F(WorkerMetricsTest, ARestartedGenerationContinuesFromTheGlobalStep) {
  alive_.insert({"j-3", 1, 0});
  metrics_.OnAssignmentStarted(Assignment("j-3", 1, {0}, 1));
  metrics_.OnMetricPoint("j-3", Point(1, 0, 20, {}));
  alive_.clear();
  alive_.insert({"j-3", 2, 0});
  metrics_.OnAssignmentStarted(Assignment("j-3", 2, {0}, 1));
  // Restored from the checkpoint at step 20; the new line at 25 adds 5, not 25.
  metrics_.OnMetricPoint("j-3", Point(2, 0, 25, {}));
  const auto scrape = metrics_.Collect();
  EXPECT_THAT(Value(scrape, "baton_trainer_steps_total", {{"job_id", "j-3"}, {"rank", "0"}}),
              Optional(25.0));
  EXPECT_THAT(Value(scrape, "baton_worker_process_restarts_total", {{"job_id", "j-3"}}),
              Optional(1.0));
}

TEST_F(WorkerMetricsTest, AFirstLineOfALaterGenerationOnlySetsTheBaseline) {
  alive_.insert({"j-4", 3, 0});
  metrics_.OnAssignmentStarted(Assignment("j-4", 3, {0}, 1));
  metrics_.OnMetricPoint("j-4", Point(3, 0, 40, {}));
  metrics_.OnMetricPoint("j-4", Point(3, 0, 50, {}));
  EXPECT_THAT(Value(metrics_.Collect(), "baton_trainer_steps_total",
                    {{"job_id", "j-4"}, {"rank", "0"}}),
              Optional(10.0));
}

TEST_F(WorkerMetricsTest, RemovesAJobsSeriesRetentionAfterItsRanksEnded) {
  alive_.insert({"j-5", 1, 0});
  metrics_.OnAssignmentStarted(Assignment("j-5", 1, {0}, 1));
  metrics_.OnMetricPoint("j-5", Point(1, 0, 5, {{"loss", 1}}));
  const std::map<std::string, std::string> l = {{"job_id", "j-5"}, {"rank", "0"}};
  alive_.clear();                   // The process exited.
  metrics_.Sweep();                 // Seen gone now,
  clock_.Advance(absl::Seconds(29));  // still exported within the retention,
  EXPECT_THAT(Value(metrics_.Collect(), "baton_trainer_steps_total", l), Optional(5.0));
  clock_.Advance(absl::Seconds(1));  // and removed after it.
  const auto scrape = metrics_.Collect();
  EXPECT_EQ(Value(scrape, "baton_trainer_steps_total", l), std::nullopt);
  EXPECT_EQ(Value(scrape, "baton_trainer_step_phase_seconds",
                  {{"job_id", "j-5"}, {"rank", "0"}, {"phase", "data"}}),
            std::nullopt);
  EXPECT_EQ(Value(scrape, "baton_worker_process_starts_total", {{"job_id", "j-5"}}),
            std::nullopt);
  for (const prometheus::MetricFamily& f : scrape) {
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const auto& label : m.label) EXPECT_NE(label.value, "j-5") << f.name;
    }
  }
}

TEST_F(WorkerMetricsTest, GpuMemoryAndLossScaleAppearWhenReported) {
  alive_.insert({"j-6", 1, 0});
  metrics_.OnMetricPoint("j-6", Point(1, 0, 1, {{"mem_peak_bytes", 1 << 20},
                                                {"loss_scale", 65536}}));
  const auto scrape = metrics_.Collect();
  EXPECT_THAT(Value(scrape, "baton_trainer_gpu_memory_bytes",
                    {{"job_id", "j-6"}, {"rank", "0"}, {"kind", "peak"}}),
              Optional(double{1 << 20}));
  EXPECT_THAT(Value(scrape, "baton_trainer_loss_scale", {{"job_id", "j-6"}, {"rank", "0"}}),
              Optional(65536.0));
}

TEST(SupervisorMetricsTest, TheSupervisorsCountersAndTheCgroupGauge) {
  int64_t illegal = 0, dropped = 0, capped = 0;
  SupervisorMetrics metrics({[&] { return illegal; }, [&] { return dropped; },
                             [&] { return capped; }},
                            /*rank_cgroups=*/false);
  EXPECT_THAT(Value(metrics.Collect(), "baton_worker_illegal_rank_transitions_total", {}),
              Optional(0.0));
  EXPECT_THAT(Value(metrics.Collect(), "baton_worker_rank_cgroups", {}), Optional(0.0));
  illegal = 3;
  dropped = 1200;
  capped = 2;
  const std::vector<prometheus::MetricFamily> scrape = metrics.Collect();
  ASSERT_EQ(scrape.size(), 4u);
  for (const prometheus::MetricFamily& family : scrape) {
    EXPECT_FALSE(family.help.empty()) << family.name;
    EXPECT_EQ(family.type, absl::EndsWith(family.name, "_total")
                               ? prometheus::MetricType::Counter
                               : prometheus::MetricType::Gauge)
        << family.name;
  }
  EXPECT_THAT(Value(scrape, "baton_worker_illegal_rank_transitions_total", {}), Optional(3.0));
  EXPECT_THAT(Value(scrape, "baton_worker_rank_log_lines_dropped_total", {}), Optional(1200.0));
  EXPECT_THAT(Value(scrape, "baton_worker_rank_logs_capped_total", {}), Optional(2.0));
  SupervisorMetrics with_cgroups({[] { return 0; }, [] { return 0; }, [] { return 0; }},
                                 /*rank_cgroups=*/true);
  EXPECT_THAT(Value(with_cgroups.Collect(), "baton_worker_rank_cgroups", {}), Optional(1.0));
}

}  // namespace
}  // namespace baton::worker
