#include "bench/control_plane/sim_reconnect.h"

#include "absl/strings/cord.h"
#include "common/net/coordinator_addresses.h"
#include "common/protocol_version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

ReconnectOptions NoJitter() {
  ReconnectOptions options;
  options.backoff_jitter = 0;
  return options;
}

TEST(SimReconnectTest, BackoffDoublesToItsMaxAndResets) {
  SimBackoff backoff(NoJitter());
  const int64_t want_ms[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (int64_t ms : want_ms) EXPECT_EQ(backoff.Next(), absl::Milliseconds(ms));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
}

TEST(SimReconnectTest, JitterOnlyShortensWithinItsShare) {
  SimBackoff backoff(ReconnectOptions{});  // jitter 0.2
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = backoff.Next();
    const absl::Duration base =
        std::min(absl::Milliseconds(100) * (1 << std::min(i, 6)), absl::Seconds(5));
    EXPECT_LE(d, base);
    EXPECT_GE(d, base * 0.8);
  }
}

TEST(SimReconnectTest, ElectionRetriesSoonWithoutGrowingTheBackoff) {
  const ReconnectOptions options = NoJitter();
  SimBackoff backoff(options);
  absl::Status election = absl::UnavailableError("no coordinator leads");
  election.SetPayload(kElectionPayload, absl::Cord("standby answered"));
  EXPECT_EQ(RetryDelay(election, options, &backoff), absl::Milliseconds(200));
  EXPECT_EQ(RetryDelay(election, options, &backoff), absl::Milliseconds(200));
  // All replicas down (no standby answered): the backoff, from its start.
  const absl::Status down = absl::UnavailableError("no coordinator leads");
  EXPECT_EQ(RetryDelay(down, options, &backoff), absl::Milliseconds(100));
  EXPECT_EQ(RetryDelay(down, options, &backoff), absl::Milliseconds(200));
}

TEST(SimReconnectTest, RegisterListsTheRunningAssignmentWithoutExits) {
  baton::v1::AssignmentStatus running;
  running.set_job_id("job-7");
  running.set_generation(3);
  baton::v1::RankInfo* rank = running.add_ranks();
  rank->set_rank(5);
  rank->set_worker_id("w-1");
  rank->set_pid(4242);
  rank->mutable_exit()->set_exit_code(0);
  const baton::v1::WorkerMessage m = SimRegister("w-1", 2, {running});
  ASSERT_TRUE(m.has_register_());
  const baton::v1::Register& reg = m.register_();
  EXPECT_EQ(reg.worker_id(), "w-1");
  EXPECT_EQ(reg.resources().slots(), 2);
  EXPECT_EQ(reg.protocol_version(), kProtocolVersion);
  ASSERT_EQ(reg.assignments_size(), 1);
  EXPECT_EQ(reg.assignments(0).job_id(), "job-7");
  EXPECT_EQ(reg.assignments(0).generation(), 3);
  ASSERT_EQ(reg.assignments(0).ranks_size(), 1);
  EXPECT_EQ(reg.assignments(0).ranks(0).pid(), 4242);
  EXPECT_FALSE(reg.assignments(0).ranks(0).has_exit());
  EXPECT_EQ(SimRegister("w-2", 1, {}).register_().assignments_size(), 0);
}

}  // namespace
}  // namespace baton::bench
