#include "coordinator/control/worker_state.h"

#include <optional>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

// Every (state, event) pair: its successor, or nullopt where the lifecycle refuses it.
TEST(WorkerStateTest, TheWholeTransitionTable) {
  using S = WorkerState;
  using E = WorkerEvent;
  struct Row {
    S from;
    E event;
    std::optional<S> to;
  };
  const std::vector<Row> table = {
      {S::kNew, E::kConnect, S::kReady},           {S::kNew, E::kConnectDraining, S::kDraining},
      {S::kNew, E::kDrain, std::nullopt},          {S::kNew, E::kLose, std::nullopt},
      {S::kReady, E::kConnect, S::kReady},         {S::kReady, E::kConnectDraining, S::kDraining},
      {S::kReady, E::kDrain, S::kDraining},        {S::kReady, E::kLose, S::kLost},
      {S::kDraining, E::kConnect, S::kReady},      {S::kDraining, E::kConnectDraining, S::kDraining},
      {S::kDraining, E::kDrain, std::nullopt},     {S::kDraining, E::kLose, S::kLost},
      {S::kLost, E::kConnect, S::kReady},          {S::kLost, E::kConnectDraining, S::kDraining},
      {S::kLost, E::kDrain, std::nullopt},         {S::kLost, E::kLose, std::nullopt},
  };
  for (const Row& row : table) {
    SCOPED_TRACE(absl::StrCat(WorkerStateName(row.from), " --", WorkerEventName(row.event), "-->"));
    const absl::StatusOr<WorkerState> next = NextWorkerState(row.from, row.event);
    if (row.to.has_value()) {
      ASSERT_OK(next);
      EXPECT_EQ(*next, *row.to);
    } else {
      EXPECT_THAT(next, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr(WorkerStateName(row.from))));
    }
  }
}

TEST(WorkerStateTest, ConnectedStatesAndProtoNames) {
  EXPECT_FALSE(IsConnected(WorkerState::kNew));
  EXPECT_TRUE(IsConnected(WorkerState::kReady));
  EXPECT_TRUE(IsConnected(WorkerState::kDraining));
  EXPECT_FALSE(IsConnected(WorkerState::kLost));
  EXPECT_EQ(WorkerStateToProto(WorkerState::kNew), baton::v1::WORKER_STATE_UNSPECIFIED);
  EXPECT_EQ(WorkerStateToProto(WorkerState::kReady), baton::v1::WORKER_STATE_READY);
  EXPECT_EQ(WorkerStateToProto(WorkerState::kDraining), baton::v1::WORKER_STATE_DRAINING);
  EXPECT_EQ(WorkerStateToProto(WorkerState::kLost), baton::v1::WORKER_STATE_LOST);
}

}  // namespace
}  // namespace baton::coordinator
