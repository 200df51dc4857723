#include "coordinator/control/control_context.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/testing/status_matchers.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/store.h"
#include "coordinator/store/testing/faulty_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

baton::v1::JobSpec CommandSpec() {
  baton::v1::JobSpec spec;
  spec.set_name("job");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(1);
  return spec;
}

class ControlContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(":memory:");
    ASSERT_OK(base);
    store_ = std::make_unique<FaultyStore>(std::move(*base));
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    ASSERT_OK(jobs_->Load());
    ctx_ = std::make_unique<ControlContext>(jobs_.get(), &workers_, &clock_, CoordinatorOptions());
    ctx_->SetHaltHandler([this](const absl::Status& s) {
      ++halts_;
      halt_status_ = s;
    });
  }

  FakeClock clock_;
  WorkerRegistry workers_{&clock_};
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<ControlContext> ctx_;
  int halts_ = 0;
  absl::Status halt_status_;
};

TEST_F(ControlContextTest, AChangeRefusedByTheRulesIsCountedAndDoesNotHalt) {
  const absl::StatusOr<baton::v1::Job> job = jobs_->Submit(CommandSpec());
  ASSERT_OK(job);
  // QUEUED -> SUCCEEDED is not a transition of the job lifecycle.
  const absl::Status refused =
      jobs_->Transition(job->id(), JobState::kSucceeded, "Completed", "not allowed");
  ASSERT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_FALSE(ctx_->Ok(refused, "succeeded"));
  EXPECT_FALSE(ctx_->Ok(refused, "succeeded"));
  EXPECT_TRUE(ctx_->Ok(absl::OkStatus(), "fail"));
  EXPECT_THAT(ctx_->refused_changes(), ElementsAre(Pair("succeeded", 2)));
  EXPECT_OK(ctx_->halted());
  EXPECT_EQ(halts_, 0);
}

TEST_F(ControlContextTest, AStoreFailureHaltsOnceAndNothingIsSentAfter) {
  store_->FailWrite(1);
  const absl::StatusOr<baton::v1::Job> job = jobs_->Submit(CommandSpec());
  ASSERT_FALSE(job.ok());
  EXPECT_FALSE(ctx_->Ok(job.status(), "submit"));
  EXPECT_FALSE(ctx_->Ok(job.status(), "submit"));
  EXPECT_EQ(halts_, 1);
  EXPECT_TRUE(absl::IsUnavailable(ctx_->halted())) << ctx_->halted();
  EXPECT_EQ(halt_status_, ctx_->halted());
  EXPECT_TRUE(ctx_->refused_changes().empty());  // a store failure is not a refusal
  baton::v1::CoordinatorMessage msg;
  msg.mutable_heartbeat_ack()->set_seq(1);
  EXPECT_FALSE(ctx_->Send("w1", msg));
}

TEST_F(ControlContextTest, RuntimeEntriesAreCreatedOnUseAndForgotten) {
  EXPECT_EQ(ctx_->FindRuntime("j1"), nullptr);
  ctx_->Runtime("j2").last_step = 7;
  ctx_->Runtime("j1");
  EXPECT_THAT(ctx_->RuntimeJobIds(), ElementsAre("j1", "j2"));
  ASSERT_NE(ctx_->FindRuntime("j2"), nullptr);
  EXPECT_EQ(ctx_->FindRuntime("j2")->last_step, 7);
  ctx_->ForgetRuntime("j2");
  EXPECT_THAT(ctx_->RuntimeJobIds(), ElementsAre("j1"));
}

}  // namespace
}  // namespace baton::coordinator
