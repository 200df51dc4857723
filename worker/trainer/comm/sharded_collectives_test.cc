// Reduce-scatter and all-gather (communicator.h) on every CPU backend: Gloo (emulated over
// all-reduce and list all-gather), shared memory (its own protocol) and hierarchical (shm + Gloo,
// composed), at world sizes 2 and 3 (and 4 on two "hosts"). Values are small integers, so every
// partial sum is exact in every dtype and results must equal the reference computed here in one
// process bit for bit, whatever the order of additions.

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
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/hierarchical_communicator.h"
#include "worker/trainer/comm/host/host_topology.h"
#include "worker/trainer/comm/shm_communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::GlooAndShmBackends;
using ::baton::trainer::testing::MakeShm;
using ::baton::trainer::testing::TestBackend;
using ::baton::trainer::testing::RunRanksOwning;
using ::baton::trainer::testing::RunRanksWith;
using ::testing::HasSubstr;

// Ranks on "hosts" named by keys[rank].
CommunicatorFactory MakeHierarchical(std::vector<std::string> keys, absl::Duration timeout) {
  return [keys, timeout](const c10::intrusive_ptr<c10d::Store>& store, int rank,
                         int world) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ASSIGN_OR_RETURN(const HostTopology topology,
                     ExchangeHostKeys(store, rank, world, keys.at(rank)));
    HierarchicalOptions options;
    options.shm.slot_bytes = 4096;
    options.shm.collective_timeout = absl::Seconds(30);
    options.shm.poll_interval = absl::Milliseconds(20);
    options.gloo.collective_timeout = timeout;
    options.gloo.hostname = "127.0.0.1";
    return CreateHierarchicalCommunicator(store, rank, topology, options);
  };
}

std::vector<TestBackend> Backends() {
  std::vector<TestBackend> backends = GlooAndShmBackends();
  auto hierarchical = [](std::vector<std::string> keys) {
    return [keys](absl::Duration timeout) { return MakeHierarchical(keys, timeout); };
  };
  backends.push_back({"HierarchicalTwoHosts2", 2, hierarchical({"a", "b"})});
  backends.push_back({"HierarchicalUneven3", 3, hierarchical({"a", "b", "a"})});
  backends.push_back({"HierarchicalTwoByTwo4", 4, hierarchical({"a", "a", "b", "b"})});
  return backends;
}

class ShardedCollectivesTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  int world() const { return GetParam().world; }
  CommunicatorFactory Make(absl::Duration timeout = absl::Seconds(30)) const {
    return GetParam().make(timeout);
  }
};

const std::vector<at::ScalarType> kDtypes = {at::kFloat,    at::kDouble, at::kHalf,
                                             at::kBFloat16, at::kInt,    at::kLong};

// Rank r's full reduce-scatter input: small integers (at most 10 + 3 r), exact in any dtype.
at::Tensor ReduceScatterInput(int rank, int64_t numel, at::ScalarType dtype) {
  return (at::arange(numel, at::kLong) % 11 + 3 * rank).to(dtype);
}

struct ReduceScatterResult {
  std::vector<at::Tensor> outputs;  // Per dtype and shard size, in the loops' order.
  std::vector<bool> reduced;        // Per dtype: whether the rank's CanReduce said yes.
};

// Shards of 1500 floats: 2 ranks take 6 pieces of 256, 3 ranks 9 pieces of 170 with a ragged last
// one; the shard of 1 element and the empty shard are edge cases.
TEST_P(ShardedCollectivesTest, ReduceScatterEqualsTheReferenceSumForEveryDtype) {
  const int world = this->world();
  const std::vector<int64_t> shard_sizes = {1500, 1, 0};
  const std::vector<ReduceScatterResult> got =
      RunRanksWith<ReduceScatterResult>(world, Make(), [&](Communicator& comm) {
        ReduceScatterResult result;
        for (at::ScalarType dtype : kDtypes) {
          result.reduced.push_back(comm.CanReduce(dtype));
          for (int64_t m : shard_sizes) {
            at::Tensor input = ReduceScatterInput(comm.rank(), world * m, dtype);
            at::Tensor output = at::full({m}, -1, dtype);  // Must be overwritten.
            if (comm.CanReduce(dtype)) {
              EXPECT_OK(comm.ReduceScatterSum(input, output));
            } else {
              EXPECT_THAT(comm.StartReduceScatterSum(input, output).status(),
                          StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reduce")));
            }
            result.outputs.push_back(output);
          }
        }
        return result;
      });
  ASSERT_EQ(static_cast<int>(got.size()), world);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[r].outputs.size(), kDtypes.size() * shard_sizes.size());
    size_t i = 0;
    for (size_t d = 0; d < kDtypes.size(); ++d) {
      const at::ScalarType dtype = kDtypes[d];
      // Every CPU backend sums these.
      if (dtype == at::kFloat || dtype == at::kDouble || dtype == at::kLong) {
        EXPECT_TRUE(got[r].reduced[d]) << dtype;
      }
      for (int64_t m : shard_sizes) {
        SCOPED_TRACE(absl::StrCat("rank ", r, " ", c10::toString(dtype), " shard ", m));
        at::Tensor sum = at::zeros({world * m}, at::kDouble);
        for (int p = 0; p < world; ++p) sum += ReduceScatterInput(p, world * m, at::kDouble);
        const at::Tensor want =
            got[r].reduced[d] ? sum.narrow(0, r * m, m).to(dtype) : at::full({m}, -1, dtype);
        EXPECT_TRUE(got[r].outputs[i].equal(want))
            << got[r].outputs[i].slice(0, 0, 8) << want.slice(0, 0, 8);
        ++i;
      }
    }
  }
}

TEST_P(ShardedCollectivesTest, AllGatherCopiesEveryRanksShardBitForBit) {
  const int world = this->world();
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                              at::kInt,   at::kLong,   at::kBool, at::kByte};
  constexpr int64_t kShard = 1300;
  auto shard = [](int rank, at::ScalarType dtype) {
    if (dtype == at::kBool) return (at::arange(kShard, at::kLong) % (rank + 2) == 0);
    return (at::arange(kShard, at::kLong) % 50 + 60 * rank).to(dtype);
  };
  // Random bits (not small integers): the gather must not do arithmetic on them.
  auto random = [](int rank) {
    return at::randn({kShard}, at::detail::createCPUGenerator(rank + 17));
  };
  const std::vector<std::vector<at::Tensor>> got =
      RunRanksWith<std::vector<at::Tensor>>(world, Make(), [&](Communicator& comm) {
        std::vector<at::Tensor> out;
        for (at::ScalarType dtype : dtypes) {
          const at::Tensor input = shard(comm.rank(), dtype);
          at::Tensor output = at::empty({world * kShard}, input.options());
          EXPECT_OK(comm.AllGather(input, output)) << dtype;
          EXPECT_TRUE(input.equal(shard(comm.rank(), dtype))) << "input changed";
          out.push_back(output);
        }
        at::Tensor output = at::empty({world * kShard}, at::kFloat);
        EXPECT_OK(comm.AllGather(random(comm.rank()), output));
        out.push_back(output);
        at::Tensor empty = at::empty({0}, at::kFloat);
        EXPECT_OK(comm.AllGather(at::empty({0}, at::kFloat), empty));
        return out;
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[r].size(), dtypes.size() + 1);
    for (size_t i = 0; i < dtypes.size(); ++i) {
      std::vector<at::Tensor> shards;
      for (int p = 0; p < world; ++p) shards.push_back(shard(p, dtypes[i]));
      EXPECT_TRUE(got[r][i].equal(at::cat(shards))) << "rank " << r << " " << dtypes[i];
    }
    std::vector<at::Tensor> shards;
    for (int p = 0; p < world; ++p) shards.push_back(random(p));
    EXPECT_TRUE(got[r].back().equal(at::cat(shards))) << "rank " << r << " random";
  }
}

// Reduce-scatter then all-gather of the shards is an all-reduce (ZeRO's round trip), and sharded
// collectives in flight complete in issue order with other collectives.
TEST_P(ShardedCollectivesTest, CollectivesInFlightCompleteInIssueOrder) {
  const int world = this->world();
  constexpr int64_t kShard = 700;
  const std::vector<std::vector<at::Tensor>> got =
      RunRanksWith<std::vector<at::Tensor>>(world, Make(), [&](Communicator& comm) {
        const at::Tensor full = ReduceScatterInput(comm.rank(), world * kShard, at::kFloat);
        at::Tensor scratch = full.clone();
        at::Tensor shard = at::empty({kShard}, at::kFloat);
        at::Tensor reduced = full.clone();
        at::Tensor gathered = at::empty({world * kShard}, at::kFloat);
        auto rs = comm.StartReduceScatterSum(scratch, shard);
        auto ar = comm.StartAllReduceSum(reduced);
        EXPECT_TRUE(rs.ok() && ar.ok());
        EXPECT_OK((*ar)->Wait());
        EXPECT_OK((*rs)->Wait());
        auto ag = comm.StartAllGather(shard, gathered);
        EXPECT_TRUE(ag.ok());
        EXPECT_OK((*ag)->Wait());
        return std::vector<at::Tensor>{reduced, gathered};
      });
  at::Tensor want = at::zeros({world * kShard}, at::kFloat);
  for (int p = 0; p < world; ++p) want += ReduceScatterInput(p, world * kShard, at::kFloat);
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(got[r][0].equal(want)) << "rank " << r << " all-reduce";
    EXPECT_TRUE(got[r][1].equal(want)) << "rank " << r << " reduce-scatter + all-gather";
  }
}

// Bad arguments fail with INVALID_ARGUMENT before anything is sent: the communicator still works
// afterwards.
TEST_P(ShardedCollectivesTest, RejectsTensorsThatDoNotFit) {
  const int world = this->world();
  RunRanksWith<int>(world, Make(), [world](Communicator& comm) {
    const auto invalid = [](const std::string& what) {
      return StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what));
    };
    at::Tensor out = at::empty({4});
    EXPECT_THAT(comm.StartReduceScatterSum(at::ones({4 * world + 1}), out).status(),
                invalid(absl::StrCat("not world size ", world, " x 4")));
    EXPECT_THAT(comm.StartAllGather(at::ones({4}), at::empty({4 * world - 1})).status(),
                invalid("elements, not world size"));
    EXPECT_THAT(comm.StartReduceScatterSum(at::ones({4 * world}, at::kDouble), out).status(),
                invalid("input is Double, output Float"));
    EXPECT_THAT(
        comm.StartReduceScatterSum(at::ones({4 * world}, at::kBool), at::empty({4}, at::kBool))
            .status(),
        invalid("Bool"));
    EXPECT_THAT(comm.StartAllGather(at::ones({4}, at::kComplexDouble),
                                    at::empty({4 * world}, at::kComplexDouble))
                    .status(),
                invalid("16 bytes per element"));
    EXPECT_THAT(comm.StartAllGather(at::ones({2, 4}).t(), at::empty({8 * world})).status(),
                invalid("contiguous"));
    at::Tensor both = at::zeros({5 * world});
    EXPECT_THAT(
        comm.StartReduceScatterSum(both.narrow(0, 0, world), both.narrow(0, world - 1, 1)).status(),
        invalid("overlap"));
    at::Tensor full = at::ones({4 * world});
    EXPECT_OK(comm.ReduceScatterSum(full, out));
    EXPECT_TRUE(out.equal(at::full({4}, static_cast<double>(world))));
    return 0;
  });
}

// A rank whose communicator is destroyed (as if its process exited) before the collective: every
// other rank's reduce-scatter and all-gather fail with UNAVAILABLE, none hangs (the short timeout
// bounds the Gloo stages).
TEST_P(ShardedCollectivesTest, ADestroyedPeerFailsTheCollective) {
  const int world = this->world();
  for (const bool reduce_scatter : {true, false}) {
    SCOPED_TRACE(reduce_scatter ? "reduce-scatter" : "all-gather");
    const std::vector<absl::Status> got = RunRanksOwning<absl::Status>(
        world, Make(absl::Seconds(3)), [&](std::unique_ptr<Communicator> comm) {
          if (comm->rank() == world - 1) return absl::OkStatus();  // Destroyed on return.
          at::Tensor full = at::ones({3000 * world});
          at::Tensor shard = at::ones({3000});
          return reduce_scatter ? comm->ReduceScatterSum(full, shard)
                                : comm->AllGather(shard, full);
        });
    for (int r = 0; r + 1 < world; ++r) {
      EXPECT_EQ(got[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << got[r];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ShardedCollectivesTest, ::testing::ValuesIn(Backends()),
                         [](const ::testing::TestParamInfo<TestBackend>& info) {
                           return info.param.name;
                         });

TEST(LocalCommunicatorTest, ShardedCollectivesCopy) {
  LocalCommunicator comm;
  at::Tensor out = at::empty({5}, at::kBFloat16);
  ASSERT_OK(comm.ReduceScatterSum(at::arange(5).to(at::kBFloat16), out));
  EXPECT_TRUE(out.equal(at::arange(5).to(at::kBFloat16)));
  at::Tensor gathered = at::empty({3}, at::kLong);
  ASSERT_OK(comm.AllGather(at::full({3}, 9, at::kLong), gathered));
  EXPECT_TRUE(gathered.equal(at::full({3}, 9, at::kLong)));
  EXPECT_THAT(comm.AllGather(at::ones({3}), at::empty({4})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the output has 4 elements, not world size 1 x 3")));
  at::Tensor same = at::ones({3});
  EXPECT_THAT(comm.ReduceScatterSum(same, same),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));
}

}  // namespace
}  // namespace baton::trainer
