#include "worker/trainer/pipeline/schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer::pipeline {
namespace {

using ::testing::HasSubstr;
using Type = Action::Type;

std::string Names(const std::vector<Action>& actions) {
  return absl::StrJoin(
      actions, " ", [](std::string* out, const Action& a) { absl::StrAppend(out, ActionName(a)); });
}

std::vector<std::vector<Action>> AllStages(ScheduleKind kind, int stages, int m) {
  std::vector<std::vector<Action>> all;
  for (int s = 0; s < stages; ++s) {
    absl::StatusOr<std::vector<Action>> actions = StageActions(kind, s, stages, m);
    EXPECT_OK(actions.status());
    all.push_back(actions.ok() ? *actions : std::vector<Action>());
  }
  return all;
}

// Runs every stage's list as the executor does: sends never block (they are started and
// waited on at the end of the step), a receive waits until its neighbour sent. Messages in
// each direction between neighbours are FIFO channels; a receive must find the micro-batch it
// expects at the head of its channel. Returns "" if every stage finished, else why not.
std::string Simulate(const std::vector<std::vector<Action>>& stages) {
  const int n = static_cast<int>(stages.size());
  std::vector<size_t> pc(n, 0);
  // activations[s]: stage s -> s + 1; gradients[s]: stage s + 1 -> s.
  std::vector<std::deque<int>> activations(n), gradients(n);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < n; ++s) {
      while (pc[s] < stages[s].size()) {
        const Action& a = stages[s][pc[s]];
        if (a.type == Type::kSendActivation) {
          activations[s].push_back(a.micro_batch);
        } else if (a.type == Type::kSendGradient) {
          gradients[s - 1].push_back(a.micro_batch);
        } else if (a.type == Type::kRecvActivation || a.type == Type::kRecvGradient) {
          std::deque<int>& channel =
              a.type == Type::kRecvActivation ? activations[s - 1] : gradients[s];
          if (channel.empty()) break;  // Blocked until the neighbour sends.
          if (channel.front() != a.micro_batch) {
            return absl::StrCat("stage ", s, " ", ActionName(a), " got micro-batch ",
                                channel.front());
          }
          channel.pop_front();
        }
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < n; ++s) {
    if (pc[s] < stages[s].size()) {
      return absl::StrCat("deadlock: stage ", s, " stuck at ", ActionName(stages[s][pc[s]]));
    }
    if (!activations[s].empty() || !gradients[s].empty()) {
      return absl::StrCat("stage ", s, ": messages never received");
    }
  }
  return "";
}

// Most activations alive at once on a stage: forwarded, not yet backwarded.
int PeakInFlight(const std::vector<Action>& actions) {
  int alive = 0;
  int peak = 0;
  for (const Action& a : actions) {
    if (a.type == Type::kForward) peak = std::max(peak, ++alive);
    if (a.type == Type::kBackward) --alive;
  }
  return peak;
}

TEST(ScheduleTest, ExactListsForTwoStages) {
  const auto gpipe = AllStages(ScheduleKind::kGpipe, 2, 3);
  EXPECT_EQ(Names(gpipe[0]), "F0 SA0 F1 SA1 F2 SA2 RG0 B0 RG1 B1 RG2 B2");
  EXPECT_EQ(Names(gpipe[1]), "RA0 F0 RA1 F1 RA2 F2 B0 SG0 B1 SG1 B2 SG2");
  const auto one_f_one_b = AllStages(ScheduleKind::k1F1B, 2, 3);
  EXPECT_EQ(Names(one_f_one_b[0]), "F0 SA0 F1 SA1 RG0 B0 F2 SA2 RG1 B1 RG2 B2");
  EXPECT_EQ(Names(one_f_one_b[1]), "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2");
}

TEST(ScheduleTest, OneStageIsForwardBackwardWithoutTransfers) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1F1B}) {
    const auto stages = AllStages(kind, 1, 2);
    EXPECT_EQ(Names(stages[0]), kind == ScheduleKind::kGpipe ? "F0 F1 B0 B1" : "F0 B0 F1 B1");
  }
}

// Over a grid of shapes: every micro-batch is forwarded and backwarded exactly once per stage,
// forward before backward; transfers exist exactly where a neighbour is; the stages together
// finish (no deadlock, FIFO order matches); 1F1B keeps at most S - s activations on stage s,
// GPipe all M.
TEST(ScheduleTest, EveryShapeCompletesWithEachMicroBatchOncePerStage) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1F1B}) {
    for (int stages = 1; stages <= 6; ++stages) {
      for (int m = 1; m <= 9; ++m) {
        SCOPED_TRACE(absl::StrCat(ScheduleKindName(kind), " S=", stages, " M=", m));
        const auto all = AllStages(kind, stages, m);
        EXPECT_EQ(Simulate(all), "");
        for (int s = 0; s < stages; ++s) {
          std::map<Type, std::vector<int>> seen;
          std::vector<int> forward_at(m, -1), backward_at(m, -1);
          for (size_t i = 0; i < all[s].size(); ++i) {
            const Action& a = all[s][i];
            seen[a.type].push_back(a.micro_batch);
            if (a.type == Type::kForward) forward_at[a.micro_batch] = static_cast<int>(i);
            if (a.type == Type::kBackward) backward_at[a.micro_batch] = static_cast<int>(i);
          }
          std::vector<int> each(m);
          for (int mb = 0; mb < m; ++mb) each[mb] = mb;
          EXPECT_EQ(seen[Type::kForward], each) << "stage " << s;
          std::vector<int> backwards = seen[Type::kBackward];
          std::sort(backwards.begin(), backwards.end());
          EXPECT_EQ(backwards, each) << "stage " << s;
          for (int mb = 0; mb < m; ++mb) EXPECT_LT(forward_at[mb], backward_at[mb]);
          const std::vector<int> none;
          EXPECT_EQ(seen[Type::kRecvActivation], s > 0 ? each : none);
          EXPECT_EQ(seen[Type::kSendActivation], s + 1 < stages ? each : none);
          EXPECT_EQ(seen[Type::kRecvGradient].size(), s + 1 < stages ? m : 0u);
          EXPECT_EQ(seen[Type::kSendGradient].size(), s > 0 ? m : 0u);
          const int peak = PeakInFlight(all[s]);
          if (kind == ScheduleKind::k1F1B) {
            EXPECT_LE(peak, stages - s) << "stage " << s;
          } else {
            EXPECT_EQ(peak, m) << "stage " << s;
          }
        }
      }
    }
  }
}

// The simulation does catch a deadlock and out-of-order transfers.
TEST(ScheduleTest, SimulationCatchesDeadlocksAndMisorder) {
  std::vector<std::vector<Action>> deadlock = {
      {{Type::kRecvGradient, 0}, {Type::kForward, 0}, {Type::kSendActivation, 0}},
      {{Type::kRecvActivation, 0}, {Type::kBackward, 0}, {Type::kSendGradient, 0}}};
  EXPECT_THAT(Simulate(deadlock), HasSubstr("deadlock: stage 0 stuck at RG0"));
  std::vector<std::vector<Action>> misorder = {
      {{Type::kSendActivation, 1}, {Type::kSendActivation, 0}},
      {{Type::kRecvActivation, 0}, {Type::kRecvActivation, 1}}};
  EXPECT_THAT(Simulate(misorder), HasSubstr("RA0 got micro-batch 1"));
}

TEST(ScheduleTest, BubbleFraction) {
  EXPECT_DOUBLE_EQ(BubbleFraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(BubbleFraction(2, 1), 0.5);
  EXPECT_DOUBLE_EQ(BubbleFraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(BubbleFraction(2, 4), 0.2);
}

TEST(ScheduleTest, NamesAndBadShapes) {
  EXPECT_EQ(ParseScheduleKind("gpipe").value(), ScheduleKind::kGpipe);
  EXPECT_EQ(ParseScheduleKind("1f1b").value(), ScheduleKind::k1F1B);
  EXPECT_THAT(ParseScheduleKind("interleaved"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not one of gpipe, 1f1b")));
  EXPECT_THAT(StageActions(ScheduleKind::kGpipe, 2, 2, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stage 2 of 2")));
  EXPECT_THAT(StageActions(ScheduleKind::k1F1B, 0, 2, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 micro-batches")));
}

}  // namespace
}  // namespace baton::trainer::pipeline
