// The Agent with a coordinator run as several replicas: each connection attempt goes to the
// leader (agent.h, "Following the leader"). The replicas are FakeCoordinators (real gRPC on
// 127.0.0.1) in the leader or the standby role; the agent runs on simulated time, so the
// test lets each reconnect backoff pass once the agent waits for it.

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"
#include "worker/agent/agent.h"
#include "worker/agent/outbox.h"
#include "worker/supervisor/supervisor.h"
#include "worker/testing/fake_coordinator.h"
#include "worker/testing/fake_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using baton::v1::WorkerMessage;

// Constant, so that a timer due at Now() + kBackoff is the agent waiting to reconnect.
constexpr absl::Duration kBackoff = absl::Seconds(7);
constexpr absl::Duration kElectionRetry = absl::Seconds(1);
constexpr char kCheck[] = "/grpc.health.v1.Health/Check";

class AgentLeaderTest : public ::testing::Test {
 protected:
  void StartWorker(const std::vector<std::string>& coordinators) {
    SupervisorOptions so;
    so.work_dir = MakeTestDir("agent-leader");
    so.base_env = {"PATH=/usr/bin:/bin"};
    supervisor_ = std::make_unique<Supervisor>(so, &launcher_, &clock_, &outbox_);
    ASSERT_TRUE(supervisor_->Start().ok());
    AgentOptions ao;
    ao.coordinators = coordinators;
    ao.worker_id = "w-leader-test";
    ao.resources.set_slots(1);
    ao.backoff.initial = kBackoff;
    ao.backoff.max = kBackoff;
    ao.backoff.jitter = 0;
    ao.election_retry = kElectionRetry;
    agent_ = std::make_unique<Agent>(ao, supervisor_.get(), &outbox_, &clock_);
    ASSERT_TRUE(agent_->Start().ok());
  }

  // Once the agent waits out the reconnect backoff (its attempt failed), lets it pass.
  void PassBackoff() {
    ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kBackoff));
    clock_.Advance(kBackoff);
  }

  void TearDown() override {
    if (supervisor_ != nullptr) supervisor_->Shutdown(absl::ZeroDuration());
    if (agent_ != nullptr) agent_->Stop();
  }

  // Declared before the worker so that they outlive it.
  std::unique_ptr<FakeCoordinator> a_ = std::make_unique<FakeCoordinator>();
  std::unique_ptr<FakeCoordinator> b_ = std::make_unique<FakeCoordinator>();
  FakeClock clock_;
  FakeProcessLauncher launcher_;
  Outbox outbox_{OutboxOptions(), &clock_};
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentLeaderTest, FollowsAStandbysHintToTheLeaderThenTheNextLeader) {
  // a, first in the list, has just stepped down: its health still says it leads, and it
  // refuses the stream naming b, the leader.
  a_->role().BecomeStandby(b_->address());
  a_->role().set_checks_report_leader(true);
  StartWorker({a_->address(), b_->address()});
  PassBackoff();  // The attempt at a was refused.
  ASSERT_TRUE(b_->Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil([&] { return b_->registrations() == 1; }));
  EXPECT_EQ(a_->registrations(), 0);
  // The hint sent the second attempt straight to b: a was probed once, by the first.
  EXPECT_EQ(a_->role().calls(kCheck), 1);
  EXPECT_EQ(b_->role().calls(kCheck), 1);

  // b goes away and a becomes the leader: the agent tries b first (its last leader), is
  // refused, and registers with a.
  a_->role().set_checks_report_leader(false);
  a_->role().BecomeLeader();
  b_.reset();
  PassBackoff();
  ASSERT_TRUE(a_->Next(WorkerMessage::kRegister).has_value());
  EXPECT_TRUE(WaitUntil([&] { return a_->registrations() == 1; }));
}

TEST_F(AgentLeaderTest, WhileStandbysHoldAnElectionTheAgentRetriesSoonNotAfterTheBackoff) {
  a_->role().BecomeStandby(std::nullopt);
  b_->role().BecomeStandby(std::nullopt);
  StartWorker({a_->address(), b_->address()});
  // The probes found no leader, but standbys: an election is under way.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kElectionRetry));
  EXPECT_EQ(a_->role().calls(kCheck), 1);
  EXPECT_EQ(b_->role().calls(kCheck), 1);
  b_->role().BecomeLeader();
  clock_.Advance(kElectionRetry);
  ASSERT_TRUE(b_->Next(WorkerMessage::kRegister).has_value());
  EXPECT_FALSE(a_->Next(WorkerMessage::kRegister, absl::ZeroDuration()).has_value());
}

TEST_F(AgentLeaderTest, WhenNoReplicaAnswersTheBackoffApplies) {
  const std::string a = a_->address(), b = b_->address();
  a_.reset();
  b_.reset();
  StartWorker({a, b});
  EXPECT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kBackoff));
}

TEST_F(AgentLeaderTest, ASingleCoordinatorIsDialedWithoutAProbe) {
  StartWorker({a_->address()});
  ASSERT_TRUE(a_->Next(WorkerMessage::kRegister).has_value());
  EXPECT_EQ(a_->role().calls(kCheck), 0);
}

}  // namespace
}  // namespace baton::worker
