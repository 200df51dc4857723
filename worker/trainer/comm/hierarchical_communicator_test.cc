#include "worker/trainer/comm/hierarchical_communicator.h"

#include <ATen/ATen.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/host/host_topology.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/device/compat.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::RunRanksOwning;
using ::baton::trainer::testing::RunRanksWith;
using ::baton::trainer::testing::SetUpRanks;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Ranks as threads on "hosts" named by keys[rank] (as BATON_HOST_KEY does for processes).
// 4 KiB slots: 512 floats per piece, so tensors of a few KiB take several pieces.
CommunicatorFactory MakeHierarchical(std::vector<std::string> keys, size_t slot_bytes = 4096,
                                     absl::Duration gloo_timeout = absl::Seconds(30)) {
  return [keys, slot_bytes, gloo_timeout](const c10::intrusive_ptr<c10d::Store>& store,
                                          int rank,
                                          int world) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ASSIGN_OR_RETURN(const HostTopology topology,
                     ExchangeHostKeys(store, rank, world, keys.at(rank)));
    HierarchicalOptions options;
    options.shm.slot_bytes = slot_bytes;
    options.shm.collective_timeout = absl::Seconds(30);
    options.shm.poll_interval = absl::Milliseconds(20);
    options.gloo.collective_timeout = gloo_timeout;
    options.gloo.hostname = "127.0.0.1";
    return CreateHierarchicalCommunicator(store, rank, topology, options);
  };
}

struct Layout {
  std::string name;
  std::vector<std::string> keys;
  int world() const { return static_cast<int>(keys.size()); }
};

void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

class HierarchicalTest : public ::testing::TestWithParam<Layout> {};

// Elements per rank: 20 pieces of floats and a ragged last piece and chunk.
constexpr int64_t kN = 10007;

TEST_P(HierarchicalTest, AllReduceEqualsTheFlatSumIdenticallyOnEveryRank) {
  const int world = GetParam().world();
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kLong, at::kInt,
                                              at::kHalf};
  const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
      world, MakeHierarchical(GetParam().keys), [&](Communicator& comm) {
        EXPECT_THAT(comm.backend(), StartsWith("hierarchical(shm+gloo"));
        std::vector<at::Tensor> out;
        for (at::ScalarType dtype : dtypes) {
          // Small integers: exact in every dtype, so the expected sum is exact too.
          at::Tensor t = (at::arange(kN, at::kLong) % 7 + comm.rank()).to(dtype);
          EXPECT_OK(comm.AllReduceSum(t));
          out.push_back(t);
        }
        at::Tensor random = at::randn({kN}, at::detail::createCPUGenerator(comm.rank() + 1));
        at::Tensor reduced = random.clone();
        EXPECT_OK(comm.AllReduceSum(reduced));
        out.push_back(random);
        out.push_back(reduced);
        return out;
      });
  ASSERT_EQ(static_cast<int>(got.size()), world);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const at::Tensor want =
        ((at::arange(kN, at::kLong) % 7) * world + world * (world - 1) / 2).to(dtypes[i]);
    for (int r = 0; r < world; ++r) EXPECT_TRUE(got[r][i].equal(want)) << dtypes[i] << " rank " << r;
  }
  const size_t k = dtypes.size();
  at::Tensor flat = at::zeros({kN}, at::kDouble);
  for (int r = 0; r < world; ++r) flat += got[r][k].to(at::kDouble);
  const double error =
      (got[0][k + 1].to(at::kDouble) - flat).norm().item<double>() / flat.norm().item<double>();
  EXPECT_LT(error, 1e-5);
  EXPECT_GT(flat.norm().item<double>(), 0);
  for (int r = 1; r < world; ++r) {
    EXPECT_TRUE(got[r][k + 1].equal(got[0][k + 1])) << "rank " << r << " differs from rank 0";
  }
}

// Across hosts the mean is divided as each rank copies the summed piece out of its slot.
TEST_P(HierarchicalTest, AllReduceMeanIsTheSumDividedIdenticallyOnEveryRank) {
  const int world = GetParam().world();
  const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
      world, MakeHierarchical(GetParam().keys), [&](Communicator& comm) {
        const at::Tensor x = at::randn({kN}, at::detail::createCPUGenerator(comm.rank() + 1));
        at::Tensor sum = x.clone();
        at::Tensor mean = x.clone();
        EXPECT_OK(comm.AllReduceSum(sum));
        EXPECT_OK(comm.AllReduceMean(mean));
        return std::vector<at::Tensor>{sum, mean};
      });
  ASSERT_EQ(static_cast<int>(got.size()), world);
  at::Tensor want = got[0][0].clone();
  at::div_out(want, want, MeanDivisor(world));
  for (int r = 0; r < world; ++r) EXPECT_TRUE(got[r][1].equal(want)) << "rank " << r;
}

TEST_P(HierarchicalTest, CollectivesInFlightCompleteInIssueOrder) {
  const int world = GetParam().world();
  const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
      world, MakeHierarchical(GetParam().keys), [](Communicator& comm) {
        const double r = comm.rank();
        at::Tensor a = at::full({3000}, r + 1, at::kFloat);
        at::Tensor b = at::full({5}, 10 * (r + 1), at::kDouble);
        at::Tensor c = at::full({2000}, r, at::kLong);
        auto pa = comm.StartAllReduceSum(a);
        auto pb = comm.StartAllReduceSum(b);
        auto pc = comm.StartAllReduceSum(c);
        EXPECT_TRUE(pa.ok() && pb.ok() && pc.ok());
        EXPECT_OK((*pc)->Wait());
        EXPECT_OK((*pa)->Wait());
        EXPECT_OK((*pb)->Wait());
        return std::vector<at::Tensor>{a, b, c};
      });
  const double sum = world * (world + 1) / 2.0;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(got[r][0].equal(at::full({3000}, sum, at::kFloat))) << "rank " << r;
    EXPECT_TRUE(got[r][1].equal(at::full({5}, 10 * sum, at::kDouble))) << "rank " << r;
    EXPECT_TRUE(got[r][2].equal(at::full({2000}, sum - world, at::kLong))) << "rank " << r;
  }
}

TEST_P(HierarchicalTest, BroadcastFromEveryRoot) {
  const int world = GetParam().world();
  const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
      world, MakeHierarchical(GetParam().keys), [world](Communicator& comm) {
        std::vector<at::Tensor> out;
        for (int root = 0; root < world; ++root) {
          // Several pieces, different on every rank.
          at::Tensor t = at::arange(2500, at::kFloat) * (comm.rank() + 1);
          EXPECT_OK(comm.Broadcast(t, root));
          at::Tensor w = at::full({700}, static_cast<double>(comm.rank() + 7), at::kDouble);
          at::Tensor steps = at::full({1}, comm.rank() == root ? 42 + root : 0, at::kLong);
          EXPECT_OK(BroadcastParameters({w, steps}, root, comm));
          out.push_back(t);
          out.push_back(w);
          out.push_back(steps);
        }
        return out;
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(static_cast<int>(got[r].size()), 3 * world);
    for (int root = 0; root < world; ++root) {
      SCOPED_TRACE(absl::StrCat("rank ", r, " root ", root));
      EXPECT_TRUE(got[r][3 * root].equal(at::arange(2500, at::kFloat) * (root + 1)));
      EXPECT_TRUE(got[r][3 * root + 1].equal(at::full({700}, root + 7.0, at::kDouble)));
      EXPECT_EQ(got[r][3 * root + 2].item<int64_t>(), 42 + root);
    }
  }
}

TEST_P(HierarchicalTest, ReducesOnlyWhatBothLayersCan) {
  RunRanksWith<int>(GetParam().world(), MakeHierarchical(GetParam().keys), [](Communicator& comm) {
    EXPECT_EQ(comm.CanReduce(at::kBFloat16), compat::GlooReduces(at::kBFloat16));
    EXPECT_TRUE(comm.CanReduce(at::kFloat));
    EXPECT_FALSE(comm.CanReduce(at::kBool));
    EXPECT_THAT(comm.StartAllReduceSum(at::ones({2}, at::kBool)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bool")));
    at::Tensor t = at::ones({2});
    EXPECT_THAT(comm.Broadcast(t, comm.world_size()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root")));
    return 0;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HierarchicalTest,
    ::testing::Values(Layout{"TwoHostsOfTwo", {"a", "a", "b", "b"}},
                      Layout{"ThreeHostsOfTwo", {"a", "a", "b", "b", "c", "c"}},
                      Layout{"UnevenTwoPlusOne", {"a", "a", "b"}},
                      Layout{"Interleaved", {"a", "b", "a", "b"}}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

TEST(HierarchicalCommunicatorTest, NamesItsLayers) {
  RunRanksWith<int>(4, MakeHierarchical({"a", "a", "b", "b"}), [](Communicator& comm) {
    EXPECT_EQ(comm.backend(), "hierarchical(shm+gloo, 2 hosts)");
    EXPECT_EQ(comm.world_size(), 4);
    EXPECT_TRUE(comm.device().is_cpu());
    return 0;
  });
}

TEST(HierarchicalCommunicatorTest, LargeTensorGoesThroughDefaultSizedPieces) {
  // 3M floats (12 MB): three pieces of the default 4 MiB.
  constexpr int64_t kLarge = 3'000'000;
  const std::vector<at::Tensor> got = RunRanksWith<at::Tensor>(
      4, MakeHierarchical({"a", "a", "b", "b"}, ShmOptions().slot_bytes), [](Communicator& comm) {
        at::Tensor t = (at::arange(kLarge, at::kInt) % 1000 + comm.rank()).to(at::kFloat);
        EXPECT_OK(comm.AllReduceSum(t));
        return t;
      });
  const at::Tensor want = ((at::arange(kLarge, at::kInt) % 1000) * 4 + 6).to(at::kFloat);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(got[r].equal(want)) << "rank " << r;
}

// One rank of 2 hosts x 2 destroys its communicator (as if its process exited) before the
// first collective; every other rank's all-reduce fails with UNAVAILABLE, none hangs: a
// host peer notices at its barrier, the other host's leader when its Gloo collective fails
// (at the short timeout at the latest), and that leader's host peer through the segment.
class HierarchicalFailureTest : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalFailureTest, ADestroyedRankFailsEveryOtherRank) {
  const int gone = GetParam();
  const std::vector<absl::Status> got = RunRanksOwning<absl::Status>(
      4, MakeHierarchical({"a", "a", "b", "b"}, 4096, absl::Seconds(2)),
      [gone](std::unique_ptr<Communicator> comm) {
        if (comm->rank() == gone) {
          comm.reset();
          return absl::OkStatus();
        }
        at::Tensor t = at::ones({3000});
        const absl::Status first = comm->AllReduceSum(t);
        // The communicator stays broken.
        EXPECT_THAT(comm->AllReduceSum(t), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
        return first;
      });
  const int gone_host = gone / 2;
  for (int r = 0; r < 4; ++r) {
    if (r == gone) continue;
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(got[r].code(), absl::StatusCode::kUnavailable) << got[r];
    if (r / 2 == gone_host) {
      EXPECT_THAT(got[r].message(), HasSubstr(absl::StrCat("rank ", gone, " left")));
    } else if (r % 2 == 0) {
      EXPECT_THAT(got[r].message(), HasSubstr("cross-host stage"));
    } else {
      EXPECT_THAT(got[r].message(),
                  HasSubstr(absl::StrCat("rank ", r - 1,
                                         " (this host's leader) failed the cross-host stage")));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NonLeaderAndLeader, HierarchicalFailureTest, ::testing::Values(1, 2));

TEST(HierarchicalCommunicatorTest, SharedMemoryUnusableOnAHostFailsEveryRankAlike) {
  // A segment too large to size (its byte count overflows off_t): every host's fails.
  const auto results = SetUpRanks(4, MakeHierarchical({"a", "a", "b", "b"}, size_t{1} << 62));
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(results[r], StatusIs(absl::StatusCode::kFailedPrecondition,
                                     AllOf(StartsWith("host 0 (ranks 0,1): "),
                                           HasSubstr("shared memory unusable (rank 0): sizing"))))
        << "rank " << r;
    if (r > 0 && !results[r].ok() && !results[0].ok()) {
      EXPECT_EQ(results[r].status(), results[0].status());
    }
  }
}

}  // namespace
}  // namespace baton::trainer
