#include "bench/control_plane/sim_workers.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "bench/control_plane/testing/fake_worker_service.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(20);

SimOptions Options(std::vector<std::string> coordinators, int workers, bool reconnect) {
  SimOptions options;
  options.coordinators = std::move(coordinators);
  options.workers = workers;
  options.workers_per_channel = 2;
  options.id_prefix = "w-";
  options.reconnect = reconnect;
  return options;
}

// Polls `done` (on Counts()) until it holds or kTimeout passes.
template <typename Pred>
bool PollCounts(const SimCluster& sim, Pred done) {
  const absl::Time deadline = absl::Now() + kTimeout;
  while (!done(sim.Counts())) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));  // a poll with a deadline
  }
  return true;
}

TEST(SimWorkersTest, WithoutReconnectAnEndedStreamFails) {
  FakeWorkerService leader;
  SimCluster sim(Options({leader.address()}, 3, /*reconnect=*/false));
  ASSERT_OK(sim.Start());
  ASSERT_OK(sim.AwaitRegistered(absl::Now() + kTimeout));
  leader.Shutdown();
  EXPECT_TRUE(PollCounts(sim, [](const SimCounts& c) { return c.failed_streams == 3; }));
  const SimCounts counts = sim.Counts();
  EXPECT_EQ(counts.streams_lost, 0);
  EXPECT_EQ(counts.reconnect_attempts, 0);
  EXPECT_EQ(counts.reregistrations, 0);
}

TEST(SimWorkersTest, ReconnectsToTheNewLeaderListingItsAssignment) {
  FakeWorkerService a, b;
  a.set_start("job-1", 4);
  b.role().BecomeStandby(a.address());
  SimCluster sim(Options({a.address(), b.address()}, 4, /*reconnect=*/true));
  ASSERT_OK(sim.Start());
  ASSERT_OK(sim.AwaitRegistered(absl::Now() + kTimeout));
  ASSERT_OK(sim.AwaitStarted(4, absl::Now() + kTimeout));
  EXPECT_EQ(b.connects(), 0);

  // The leader dies; the standby answers, no leader yet: the workers retry (election).
  b.role().BecomeStandby(std::nullopt);
  a.Shutdown();
  ASSERT_TRUE(PollCounts(sim, [](const SimCounts& c) { return c.election_retries >= 8; }));
  EXPECT_EQ(sim.Counts().reregistrations, 0);

  const absl::Time elected = absl::Now();
  b.role().BecomeLeader();
  ASSERT_OK(sim.AwaitReregistrations(4, absl::Now() + kTimeout));
  const SimCounts counts = sim.Counts();
  EXPECT_EQ(counts.streams_lost, 4);
  EXPECT_EQ(counts.failed_streams, 0);
  EXPECT_GE(counts.last_reregistration, elected);
  for (absl::Time t : sim.LastRegistrations()) EXPECT_GE(t, elected);
  // The workers retried every election_retry (200 ms), not after a grown backoff.
  EXPECT_LT(counts.last_reregistration - elected, absl::Seconds(2));

  const std::vector<baton::v1::Register> registers = b.registers();
  ASSERT_EQ(registers.size(), 4u);
  for (const baton::v1::Register& reg : registers) {
    SCOPED_TRACE(reg.worker_id());
    ASSERT_EQ(reg.assignments_size(), 1);
    const baton::v1::AssignmentStatus& a = reg.assignments(0);
    EXPECT_EQ(a.job_id(), "job-1");
    EXPECT_EQ(a.generation(), 4);
    ASSERT_EQ(a.ranks_size(), 1);
    EXPECT_EQ(a.ranks(0).worker_id(), reg.worker_id());
    EXPECT_GT(a.ranks(0).pid(), 0);
    EXPECT_FALSE(a.ranks(0).has_exit());
  }
  sim.Stop();
}

TEST(SimWorkersTest, FollowsAStandbysHint) {
  FakeWorkerService stale, leader;
  // The probe still sees `stale` lead, but its Connect refuses naming the leader.
  stale.role().BecomeStandby(leader.address());
  stale.role().set_checks_report_leader(true);
  SimCluster sim(Options({stale.address(), leader.address()}, 2, /*reconnect=*/true));
  ASSERT_OK(sim.Start());
  ASSERT_OK(sim.AwaitRegistered(absl::Now() + kTimeout));
  EXPECT_EQ(stale.connects(), 2);
  EXPECT_EQ(leader.registers().size(), 2u);
  const SimCounts counts = sim.Counts();
  EXPECT_EQ(counts.streams_lost, 2);
  EXPECT_EQ(counts.reconnect_attempts, 2);
  EXPECT_EQ(counts.reregistrations, 0);  // the first registration of each
}

TEST(SimWorkersTest, StartFailsWithoutALeader) {
  FakeWorkerService a, b;
  a.role().BecomeStandby(std::nullopt);
  b.role().BecomeStandby(std::nullopt);
  SimCluster sim(Options({a.address(), b.address()}, 1, /*reconnect=*/true));
  EXPECT_THAT(sim.Start(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no coordinator leads")));
}

}  // namespace
}  // namespace baton::bench
