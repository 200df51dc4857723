#include "coordinator/policy/recovery.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

const absl::Time kFailed = absl::FromUnixSeconds(1000);
const absl::Duration kWait = absl::Seconds(20);

// A rank on `worker` in the given condition.
StoppingRank Rank(int rank, const std::string& worker, bool exited, bool stopped, bool connected,
                  bool leased, absl::Time connected_since = absl::FromUnixSeconds(0)) {
  return {rank, worker, exited, stopped, connected, leased, connected_since};
}

std::vector<std::string> Workers(const std::vector<StoppingRank>& ranks) {
  std::vector<std::string> out;
  for (const StoppingRank& r : ranks) out.push_back(r.worker);
  return out;
}

TEST(DecideStopTest, Table) {
  const absl::Time before = kFailed + kWait - absl::Seconds(1);
  const absl::Time after = kFailed + kWait;
  struct Case {
    std::string what;
    absl::Time now;
    std::vector<StoppingRank> ranks;
    bool stopped;
    bool all_stopped;
    std::vector<std::string> revoke;
  };
  const std::vector<Case> cases = {
      {"every rank exited", before,
       {Rank(0, "w1", true, false, true, true), Rank(1, "w2", true, false, true, true)},
       true, true, {}},
      {"an exit and a lost worker's expired lease", before,
       {Rank(0, "w1", true, false, true, true), Rank(1, "w2", false, true, false, true)},
       true, true, {}},
      {"a rank still running, within the wait", before,
       {Rank(0, "w1", false, false, true, true)}, false, false, {}},
      {"past the wait: a leased worker's rank ignores the stop", after,
       {Rank(0, "w1", false, false, true, true), Rank(1, "w1", false, false, true, true),
        Rank(2, "w2", true, false, true, true)},
       false, false, {"w1"}},
      {"past the wait: a lost worker's lease is still running out", after,
       {Rank(0, "w1", false, false, false, true)}, false, false, {}},
      {"past the wait: a worker that reconnected since gets its own wait", after,
       {Rank(0, "w1", false, false, true, true, after - absl::Seconds(5))}, false, false, {}},
      {"past the wait: only a worker without a lease is left", after,
       {Rank(0, "w1", false, false, true, false), Rank(1, "w2", true, false, true, true)},
       true, false, {}},
      {"past the wait: no lease on one worker, a revoke on the other", after,
       {Rank(0, "w1", false, false, true, false), Rank(1, "w2", false, false, true, true)},
       false, false, {"w2"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const StopDecision d = DecideStop({c.now, kFailed, kWait, c.ranks});
    EXPECT_EQ(d.stopped, c.stopped);
    EXPECT_EQ(d.all_stopped, c.all_stopped);
    EXPECT_EQ(Workers(d.revoke), c.revoke);
  }
}

TEST(DecideStopTest, TheRevokeNamesTheFirstRankThatHoldsTheStopUp) {
  const StopDecision d = DecideStop({kFailed + kWait, kFailed, kWait,
                                     {Rank(3, "w1", false, false, true, true),
                                      Rank(5, "w1", false, false, true, true)}});
  ASSERT_EQ(d.revoke.size(), 1u);
  EXPECT_EQ(d.revoke[0].rank, 3);
}

TEST(DecideNextGenerationTest, Table) {
  const absl::Time restart_at = absl::FromUnixSeconds(2000);
  const absl::Duration timeout = absl::Seconds(60);
  struct Case {
    absl::Time now;
    bool gang;
    NextGeneration want;
  };
  const std::vector<Case> cases = {
      {restart_at - absl::Seconds(1), true, NextGeneration::kWait},  // backoff
      {restart_at, true, NextGeneration::kRendezvous},
      {restart_at, false, NextGeneration::kWait},  // waiting for workers
      {restart_at + timeout - absl::Seconds(1), false, NextGeneration::kWait},
      {restart_at + timeout, false, NextGeneration::kFail},
      {restart_at + timeout, true, NextGeneration::kRendezvous},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DecideNextGeneration({c.now, restart_at, timeout, c.gang}), c.want)
        << absl::FormatTime(c.now) << " gang " << c.gang;
  }
}

}  // namespace
}  // namespace baton::coordinator
