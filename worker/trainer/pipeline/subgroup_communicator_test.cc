// SubgroupCommunicator over a world of 4 (Gloo and shm): the two groups {0, 2} and {1, 3}
// (a pipeline run's stage groups at S = 2, D = 2) sum, broadcast and transfer within
// themselves only, with the same bits on every member; bad members are refused.

#include "worker/trainer/pipeline/subgroup_communicator.h"

#include <ATen/ATen.h>

#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/testing/test_ranks.h"

namespace baton::trainer::pipeline {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeShm;
using ::baton::trainer::testing::RunRanksWith;

// Per rank: [its group's sum, the group's broadcast from group rank 1, what it received
// from its group's other member].
using Out = std::vector<double>;

std::vector<absl::StatusOr<Out>> RunGroups(const CommunicatorFactory& make) {
  return RunRanksWith<absl::StatusOr<Out>>(4, make, [](Communicator& world) -> absl::StatusOr<Out> {
    const int r = world.rank();
    absl::StatusOr<std::unique_ptr<SubgroupCommunicator>> group =
        SubgroupCommunicator::Create(world, {r % 2, r % 2 + 2});
    if (!group.ok()) return group.status();
    SubgroupCommunicator& g = **group;
    at::Tensor sum = at::full({3}, static_cast<double>(r + 1), at::kFloat);
    if (absl::Status s = g.AllReduceSum(sum); !s.ok()) return s;
    at::Tensor b = at::full({2}, static_cast<double>(10 * (r + 1)), at::kFloat);
    if (absl::Status s = g.Broadcast(b, 1); !s.ok()) return s;
    at::Tensor got = at::empty({1}, at::kFloat);
    const int peer = 1 - g.rank();
    auto sent = g.StartSend(at::full({1}, static_cast<double>(100 + r), at::kFloat), peer);
    if (!sent.ok()) return sent.status();
    if (absl::Status s = g.Recv(got, peer); !s.ok()) return s;
    if (absl::Status s = (*sent)->Wait(); !s.ok()) return s;
    return Out{sum[0].item<double>(), b[1].item<double>(), got[0].item<double>()};
  });
}

void ExpectGroups(const std::vector<absl::StatusOr<Out>>& outs) {
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& o : outs) ASSERT_OK(o);
  // Group {0, 2}: 1 + 3; {1, 3}: 2 + 4. Broadcast from group rank 1 (world 2, world 3).
  EXPECT_EQ(*outs[0], (Out{4, 30, 102}));
  EXPECT_EQ(*outs[2], (Out{4, 30, 100}));
  EXPECT_EQ(*outs[1], (Out{6, 40, 103}));
  EXPECT_EQ(*outs[3], (Out{6, 40, 101}));
}

TEST(SubgroupCommunicatorTest, GroupsOverGloo) { ExpectGroups(RunGroups(MakeGloo)); }

TEST(SubgroupCommunicatorTest, GroupsOverShm) {
  ExpectGroups(RunGroups(MakeShm(absl::Seconds(30))));
}

TEST(SubgroupCommunicatorTest, RefusesBadMembers) {
  LocalCommunicator world;
  EXPECT_THAT(SubgroupCommunicator::Create(world, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(SubgroupCommunicator::Create(world, {0, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  ASSERT_OK(SubgroupCommunicator::Create(world, {0}));
}

}  // namespace
}  // namespace baton::trainer::pipeline
