// Retention soak: a day of metric points and log lines for 100 running jobs, written into a
// real SQLite file through JobManager with the reconcile's pruning in between, keeps the
// state directory under a bound that the limits imply (what it wrote is over 3x the bound).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/store.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

constexpr int kJobs = 100;
constexpr int kRanks = 2;
constexpr absl::Duration kPointEvery = absl::Seconds(10);  // per rank
constexpr int kLineBytes = 200;

TEST(RetentionSoakTest, ADayOfHistoryStaysUnderTheBound) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/soak.db";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_OK(store);
  FakeClock clock;
  JobManagerOptions options;
  options.retention.max_points_per_job = 1000;
  options.retention.max_log_bytes_per_job = 128 << 10;
  options.retention.prune_interval = absl::Hours(1);
  JobManager jobs(store->get(), &clock, options);
  ASSERT_OK(jobs.Load());

  std::vector<std::string> ids;
  for (int j = 0; j < kJobs; ++j) {
    baton::v1::JobSpec spec;
    spec.set_name(absl::StrCat("soak-", j));
    spec.mutable_command()->add_argv("/bin/true");
    spec.mutable_workers()->set_min(1);
    absl::StatusOr<baton::v1::Job> job = jobs.Submit(spec);
    ASSERT_OK(job);
    baton::v1::Job record = *jobs.Peek(job->id());
    record.set_generation(1);
    ASSERT_OK(jobs.Transition(job->id(), JobState::kRendezvous, "Scheduled", "", &record));
    ASSERT_OK(jobs.Transition(job->id(), JobState::kRunning, "Started", ""));
    ids.push_back(job->id());
  }

  int64_t written_bytes = 0;
  int64_t step = 0;
  const int per_hour = static_cast<int>(absl::Hours(1) / kPointEvery);
  for (int hour = 0; hour < 24; ++hour) {
    for (const std::string& id : ids) {
      std::vector<baton::v1::MetricPoint> points;
      std::vector<baton::v1::LogLine> lines;
      for (int i = 0; i < per_hour; ++i) {
        const absl::Time at = clock.Now() + i * kPointEvery;
        for (int rank = 0; rank < kRanks; ++rank) {
          baton::v1::MetricPoint p;
          p.set_generation(1);
          p.set_rank(rank);
          p.set_step(step + i);
          *p.mutable_time() = ToProto(at);
          (*p.mutable_values())["loss"] = 1.0 / (1 + step + i);
          (*p.mutable_values())["step_time"] = 0.01;
          written_bytes += static_cast<int64_t>(p.ByteSizeLong());
          points.push_back(std::move(p));
        }
        baton::v1::LogLine line;
        line.set_rank(0);
        line.set_text(std::string(kLineBytes, 'l'));
        *line.mutable_time() = ToProto(at);
        written_bytes += static_cast<int64_t>(line.ByteSizeLong());
        lines.push_back(std::move(line));
      }
      ASSERT_OK(jobs.AddMetrics(id, points));
      ASSERT_OK(jobs.Flush());  // the event loop's group commit
      ASSERT_OK(jobs.AddLogs(id, std::move(lines)));
    }
    step += per_hour;
    clock.Advance(absl::Hours(1));
    ASSERT_OK(jobs.Prune(kJobs));  // what the reconcile does, a few jobs a pass
  }

  // What the limits allow: per job 1000 points and 128 KiB of log text (plus row overhead),
  // the events and the job row; SQLite's pages and the write-ahead log on top.
  const int64_t kept = int64_t{kJobs} * (1000 * 100 + (128 << 10) * 3 / 2 + (16 << 10));
  const int64_t bound = 2 * kept + (8 << 20);
  absl::StatusOr<int64_t> size = jobs.StateBytes();
  ASSERT_OK(size);
  EXPECT_LT(*size, bound) << "state grew to " << *size << " bytes";
  EXPECT_GT(written_bytes, 3 * bound) << "the soak does not test the bound";
  // Every job still has its newest history.
  for (const std::string& id : ids) {
    absl::StatusOr<std::vector<baton::v1::JobUpdate>> last =
        (*store)->ReadUpdates(id, jobs.Get(id)->result().steps(), 0, false);
    ASSERT_OK(last);
  }
  absl::StatusOr<int64_t> last_seq = (*store)->LastUpdateSeq(ids[0]);
  ASSERT_OK(last_seq);
  absl::StatusOr<std::vector<baton::v1::JobUpdate>> kept_points =
      (*store)->ReadUpdates(ids[0], 0, 0, false);
  ASSERT_OK(kept_points);
  EXPECT_LE(kept_points->size(), 1000u + 10u);  // the points and a few events
  EXPECT_EQ(kept_points->back().seq(), *last_seq);
}

}  // namespace
}  // namespace baton::coordinator
