#include "worker/trainer/profile/profiler.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteRequest(const std::string& dir, const std::string& line) {
  std::ofstream(dir + "/profile-request") << line << "\n";
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(system(absl::StrCat("rm -rf ", dir_, " && mkdir -p ", dir_).c_str()), 0);
    ProfilerOptions options;
    options.dir = dir_;
    options.rank = 3;
    options.job_id = "j-000007";
    options.default_steps = 2;
    profiler_ = std::make_unique<Profiler>(options, clock_);
  }

  // Runs step `step` as the session does, recording one span in it.
  absl::StatusOr<std::optional<std::string>> RunStep(int64_t step) {
    TraceRecorder* recorder = profiler_->BeforeStep(step);
    if (recorder != nullptr) {
      TraceSpan span;
      span.name = absl::StrCat("step ", step);
      span.start = clock_.Now();
      span.duration = absl::Milliseconds(1);
      recorder->Record(span);
    }
    clock_.Advance(absl::Milliseconds(1));
    return profiler_->AfterStep(step);
  }

  FakeClock clock_;
  std::string dir_;
  std::unique_ptr<Profiler> profiler_;
};

TEST_F(ProfilerTest, NothingIsRecordedWithoutARequest) {
  for (int64_t step = 1; step <= 3; ++step) {
    EXPECT_EQ(profiler_->BeforeStep(step), nullptr);
    absl::StatusOr<std::optional<std::string>> written = profiler_->AfterStep(step);
    ASSERT_OK(written);
    EXPECT_FALSE(written->has_value());
  }
}

TEST_F(ProfilerTest, ARequestWithoutAFileRecordsTheDefaultWindowFromTheNextStep) {
  ASSERT_OK(RunStep(1));
  profiler_->Request();
  absl::StatusOr<std::optional<std::string>> written = RunStep(2);
  ASSERT_OK(written);
  EXPECT_FALSE(written->has_value());
  written = RunStep(3);
  ASSERT_OK(written);
  ASSERT_TRUE(written->has_value());
  EXPECT_EQ(**written, dir_ + "/trace-manual-rank3.json");
  const std::string trace = Read(**written);
  EXPECT_THAT(trace, HasSubstr(R"("name":"step 2")"));
  EXPECT_THAT(trace, HasSubstr(R"("name":"step 3")"));
  EXPECT_THAT(trace, Not(HasSubstr(R"("name":"step 1")")));
  EXPECT_THAT(trace, HasSubstr(R"({"rank":3,"first_step":2,"steps":2,"partial":false})"));
  EXPECT_EQ(profiler_->BeforeStep(4), nullptr);  // The window is closed.
}

TEST_F(ProfilerTest, TheRequestFileSetsIdLengthAndStartStep) {
  WriteRequest(dir_, "id=abc steps=3 start_step=5");
  profiler_->Request();
  EXPECT_EQ(profiler_->BeforeStep(3), nullptr);
  ASSERT_OK(profiler_->AfterStep(3));
  EXPECT_EQ(profiler_->BeforeStep(4), nullptr);
  ASSERT_OK(profiler_->AfterStep(4));
  for (int64_t step = 5; step <= 6; ++step) {
    absl::StatusOr<std::optional<std::string>> written = RunStep(step);
    ASSERT_OK(written);
    EXPECT_FALSE(written->has_value());
  }
  profiler_->Request();  // Ignored: a window is open.
  absl::StatusOr<std::optional<std::string>> written = RunStep(7);
  ASSERT_OK(written);
  ASSERT_TRUE(written->has_value());
  EXPECT_EQ(**written, dir_ + "/trace-abc-rank3.json");
  EXPECT_THAT(Read(**written), HasSubstr(R"("first_step":5,"steps":3,"partial":false)"));
  EXPECT_EQ(profiler_->BeforeStep(8), nullptr);
}

TEST_F(ProfilerTest, AStartStepAlreadyPassedStartsAtTheNextStep) {
  WriteRequest(dir_, "id=late steps=1 start_step=2");
  profiler_->Request();
  absl::StatusOr<std::optional<std::string>> written = RunStep(9);
  ASSERT_OK(written);
  ASSERT_TRUE(written->has_value());
  EXPECT_THAT(Read(**written), HasSubstr(R"("first_step":9,"steps":1)"));
}

TEST_F(ProfilerTest, ABadRequestIsReportedInAnErrorFileAndRecordsNothing) {
  WriteRequest(dir_, "id=x steps=many");
  profiler_->Request();
  EXPECT_EQ(profiler_->BeforeStep(1), nullptr);
  EXPECT_THAT(Read(dir_ + "/trace-unknown-rank3.error"), HasSubstr("'steps=many'"));
}

TEST_F(ProfilerTest, TrainingThatEndsInsideTheWindowWritesAPartialTrace) {
  WriteRequest(dir_, "id=short steps=10");
  profiler_->Request();
  ASSERT_OK(RunStep(1));
  profiler_->Record(TraceSpan{"checkpoint", "checkpoint", clock_.Now(), absl::Milliseconds(2)});
  absl::StatusOr<std::optional<std::string>> written = profiler_->Finish();
  ASSERT_OK(written);
  ASSERT_TRUE(written->has_value());
  const std::string trace = Read(**written);
  EXPECT_THAT(trace, HasSubstr(R"("first_step":1,"steps":1,"partial":true)"));
  EXPECT_THAT(trace, HasSubstr(R"("name":"checkpoint")"));
  written = profiler_->Finish();  // Nothing open any more.
  ASSERT_OK(written);
  EXPECT_FALSE(written->has_value());
}

}  // namespace
}  // namespace baton::trainer
