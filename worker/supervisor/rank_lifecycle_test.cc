#include "worker/supervisor/rank_lifecycle.h"

#include <set>
#include <utility>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using S = RankState;

TEST(RankLifecycleTest, TransitionTable) {
  const S all[] = {S::kStarting, S::kRunning, S::kStopping, S::kKilling, S::kExited};
  const std::set<std::pair<S, S>> legal = {
      {S::kStarting, S::kRunning}, {S::kStarting, S::kExited}, {S::kRunning, S::kStopping},
      {S::kRunning, S::kKilling},  {S::kRunning, S::kExited},  {S::kStopping, S::kKilling},
      {S::kStopping, S::kExited},  {S::kKilling, S::kExited},
  };
  for (S from : all) {
    for (S to : all) {
      EXPECT_EQ(IsLegalTransition(from, to), legal.count({from, to}) == 1)
          << RankStateName(from) << " -> " << RankStateName(to);
    }
  }
}

TEST(RankLifecycleTest, RecordsTransitionsAndRejectsIllegalOnes) {
  RankLifecycle r;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  EXPECT_EQ(r.state(), S::kStarting);
  ASSERT_OK(r.TransitionTo(S::kRunning, t0, "Spawned"));
  ASSERT_OK(r.TransitionTo(S::kStopping, t0 + absl::Seconds(1), "StopRequested"));
  EXPECT_THAT(
      r.TransitionTo(S::kRunning, t0, "x"),
      StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("STOPPING -> RUNNING")));
  EXPECT_EQ(r.state(), S::kStopping);
  ASSERT_OK(r.TransitionTo(S::kKilling, t0 + absl::Seconds(2), "GraceExpired"));
  ASSERT_OK(r.TransitionTo(S::kExited, t0 + absl::Seconds(3), "Exited"));
  EXPECT_TRUE(r.exited());
  EXPECT_FALSE(r.TransitionTo(S::kExited, t0, "again").ok());
  ASSERT_EQ(r.history().size(), 4u);
  EXPECT_EQ(r.history()[1].from, S::kRunning);
  EXPECT_EQ(r.history()[1].to, S::kStopping);
  EXPECT_EQ(r.history()[1].reason, "StopRequested");
  EXPECT_EQ(r.history()[3].time, t0 + absl::Seconds(3));
}

}  // namespace
}  // namespace baton::worker
