// Point-to-point transfers (Communicator::StartSend/StartRecv, communicator.h) on every CPU
// backend with real ranks (threads with their own communicators over one TCPStore): Gloo and
// shared memory at world sizes 2 and 3, hierarchical between ranks of one "host". Bytes arrive
// bit for bit in every dtype, a pair's transfers stay in issue order in both directions at once
// (messages larger than the shm channel, so senders wait for receivers), bad peers are refused,
// and a peer that is gone fails the transfer with UNAVAILABLE instead of hanging.

#include <ATen/ATen.h>

#include <future>
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

class PointToPointTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  int world() const { return GetParam().world; }
  CommunicatorFactory Make(absl::Duration timeout = absl::Seconds(30)) const {
    return GetParam().make(timeout);
  }
};

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                             at::kInt,   at::kLong,   at::kByte};
const std::vector<int64_t> kSizes = {0, 1, 1000, 10007};

// Random bits (NaN patterns included) as `numel` elements of `dtype`, from `seed`.
at::Tensor RandomBits(uint64_t seed, int64_t numel, at::ScalarType dtype) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const int64_t bytes = numel * c10::elementSize(dtype);
  return at::randint(256, {bytes}, gen, at::TensorOptions().dtype(at::kByte)).view(dtype);
}

uint64_t Seed(int src, size_t dtype, size_t size) { return 1000 * src + 10 * dtype + size; }

// Every rank sends to the next in a ring and receives from the previous one, every dtype and
// size (empty included); the receiver compares bytes, not values (NaNs).
TEST_P(PointToPointTest, BytesArriveExactlyInEveryDtype) {
  const int world = this->world();
  const std::vector<int> mismatches = RunRanksWith<int>(world, Make(), [&](Communicator& comm) {
    const int next = (comm.rank() + 1) % world;
    const int prev = (comm.rank() + world - 1) % world;
    int bad = 0;
    for (size_t d = 0; d < kDtypes.size(); ++d) {
      for (size_t z = 0; z < kSizes.size(); ++z) {
        const at::Tensor out = RandomBits(Seed(comm.rank(), d, z), kSizes[z], kDtypes[d]);
        at::Tensor in = at::empty({kSizes[z]}, at::TensorOptions().dtype(kDtypes[d]));
        absl::StatusOr<std::unique_ptr<PendingCollective>> send = comm.StartSend(out, next);
        absl::StatusOr<std::unique_ptr<PendingCollective>> recv = comm.StartRecv(in, prev);
        EXPECT_OK(send.status());
        EXPECT_OK(recv.status());
        if (!send.ok() || !recv.ok()) return -1;
        EXPECT_OK((*recv)->Wait());
        EXPECT_OK((*send)->Wait());
        const at::Tensor want = RandomBits(Seed(prev, d, z), kSizes[z], kDtypes[d]);
        if (!in.view(at::kByte).equal(want.view(at::kByte))) {
          ADD_FAILURE() << "rank " << comm.rank() << ": " << kDtypes[d] << " x " << kSizes[z];
          ++bad;
        }
      }
    }
    return bad;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(mismatches[r], 0) << "rank " << r;
}

// Every rank starts 6 sends to every other rank, then 6 receives from every other rank, then
// waits on the receives before the sends: each pair's messages arrive in issue order, both
// directions at once, with messages of several channel pieces.
TEST_P(PointToPointTest, PairsKeepIssueOrderInBothDirections) {
  constexpr int kMessages = 6;
  constexpr int64_t kNumel = 5000;  // 20000 bytes: 11 shm pieces.
  const int world = this->world();
  auto value = [](int src, int dst, int k) { return 100.0 * src + 10.0 * dst + k; };
  const std::vector<int> bad = RunRanksWith<int>(world, Make(), [&](Communicator& comm) {
    std::vector<std::unique_ptr<PendingCollective>> sends;
    std::vector<std::unique_ptr<PendingCollective>> recvs;
    std::vector<std::pair<int, at::Tensor>> received;  // (src, tensor), in issue order.
    for (int peer = 0; peer < world; ++peer) {
      if (peer == comm.rank()) continue;
      for (int k = 0; k < kMessages; ++k) {
        auto send = comm.StartSend(at::full({kNumel}, value(comm.rank(), peer, k)), peer);
        EXPECT_OK(send.status());
        if (!send.ok()) return -1;
        sends.push_back(*std::move(send));
      }
    }
    for (int peer = 0; peer < world; ++peer) {
      if (peer == comm.rank()) continue;
      for (int k = 0; k < kMessages; ++k) {
        at::Tensor in = at::zeros({kNumel});
        auto recv = comm.StartRecv(in, peer);
        EXPECT_OK(recv.status());
        if (!recv.ok()) return -1;
        recvs.push_back(*std::move(recv));
        received.emplace_back(peer, in);
      }
    }
    for (auto& r : recvs) EXPECT_OK(r->Wait());
    for (auto& s : sends) EXPECT_OK(s->Wait());
    int wrong = 0;
    for (size_t i = 0; i < received.size(); ++i) {
      const int k = static_cast<int>(i % kMessages);
      const auto& [src, in] = received[i];
      if (!in.equal(at::full({kNumel}, value(src, comm.rank(), k)))) {
        ADD_FAILURE() << "rank " << comm.rank() << " message " << k << " from " << src << " starts "
                      << in[0].item<double>();
        ++wrong;
      }
    }
    return wrong;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(bad[r], 0) << "rank " << r;
}

TEST_P(PointToPointTest, RejectsBadPeersAndTensors) {
  const int world = this->world();
  RunRanksWith<int>(world, Make(), [&](Communicator& comm) {
    at::Tensor t = at::ones({4});
    for (const int peer : {-1, comm.rank(), world}) {
      EXPECT_THAT(comm.StartSend(t, peer).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not another rank")))
          << "peer " << peer;
      EXPECT_THAT(comm.StartRecv(t, peer).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not another rank")))
          << "peer " << peer;
    }
    const int other = (comm.rank() + 1) % world;
    EXPECT_THAT(comm.StartSend(at::ones({4, 4}).t(), other).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contiguous")));
    EXPECT_THAT(comm.StartRecv(at::Tensor(), other).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("undefined")));
    return 0;
  });
}

// The last rank sends one message to rank 0, then its communicator is destroyed (as when its
// process exits): rank 0 gets the message, then its next receive, and a send larger than the
// shm channel, fail with UNAVAILABLE within the (short) timeout, not a hang.
TEST_P(PointToPointTest, AGonePeerFailsTheTransfer) {
  const int world = this->world();
  const int last = world - 1;
  const std::vector<absl::Status> got = RunRanksOwning<absl::Status>(
      world, Make(absl::Seconds(3)), [&](std::unique_ptr<Communicator> comm) -> absl::Status {
        if (comm->rank() == last) return comm->Send(at::full({10}, 7.0), 0);  // Then destroyed.
        if (comm->rank() != 0) return absl::OkStatus();
        at::Tensor in = at::zeros({10});
        RETURN_IF_ERROR(comm->Recv(in, last));
        EXPECT_TRUE(in.equal(at::full({10}, 7.0)));
        const absl::Status recv = comm->Recv(in, last);
        EXPECT_EQ(recv.code(), absl::StatusCode::kUnavailable) << recv;
        const absl::Status send = comm->Send(at::ones({100000}), last);
        EXPECT_EQ(send.code(), absl::StatusCode::kUnavailable) << send;
        return absl::OkStatus();
      });
  for (int r = 0; r < world; ++r) EXPECT_OK(got[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Backends, PointToPointTest, ::testing::ValuesIn(GlooAndShmBackends()),
                         [](const ::testing::TestParamInfo<TestBackend>& info) {
                           return info.param.name;
                         });

// A pair's channel is attached on its first transfer, the higher rank polling for the lower
// one's segment. Only that peer matters: a third rank that left the group meanwhile (rank 1
// here, gone before either transfer starts) must not fail the attach (it did, and failed
// AGonePeerFailsTheTransfer once in CI).
TEST(ShmPointToPointTest, AThirdRankLeavingDoesNotFailAPairsFirstTransfer) {
  std::promise<void> rank1_gone;
  const std::shared_future<void> gone = rank1_gone.get_future().share();
  const std::vector<absl::Status> got = RunRanksOwning<absl::Status>(
      3, MakeShm(absl::Seconds(30)), [&](std::unique_ptr<Communicator> comm) -> absl::Status {
        const int rank = comm->rank();
        if (rank == 1) {
          comm.reset();
          rank1_gone.set_value();
          return absl::OkStatus();
        }
        gone.wait();
        if (rank == 2) return comm->Send(at::full({10}, 7.0), 0);
        at::Tensor in = at::zeros({10});
        RETURN_IF_ERROR(comm->Recv(in, 2));
        EXPECT_TRUE(in.equal(at::full({10}, 7.0)));
        return absl::OkStatus();
      });
  for (int r = 0; r < 3; ++r) EXPECT_OK(got[r]) << "rank " << r;
}

TEST(ShmPointToPointTest, ASizeMismatchFailsTheRecv) {
  const std::vector<absl::Status> got =
      RunRanksWith<absl::Status>(2, MakeShm(absl::Seconds(30)), [](Communicator& comm) {
        absl::Status status;
        if (comm.rank() == 0) {
          status = comm.Send(at::ones({4}), 1);
        } else {
          at::Tensor in = at::zeros({5});
          status = comm.Recv(in, 0);
        }
        // Rank 0's communicator (and with it the pair's channel) outlives rank 1's receive.
        at::Tensor done = at::ones({1});
        EXPECT_OK(comm.AllReduceSum(done));
        return status;
      });
  EXPECT_OK(got[0]);
  EXPECT_THAT(got[1], StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("it sent 16 bytes, this rank receives 20")));
}

// Hierarchical: ranks of one host exchange through shared memory; ranks on different hosts
// are refused with UNIMPLEMENTED (their only link is the leaders' Gloo group).
TEST(HierarchicalPointToPointTest, SameHostWorksOtherHostsAreRefused) {
  const std::vector<std::string> keys = {"a", "a", "b", "b"};
  CommunicatorFactory make = [&keys](const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int world) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ASSIGN_OR_RETURN(const HostTopology topology,
                     ExchangeHostKeys(store, rank, world, keys.at(rank)));
    HierarchicalOptions options;
    options.shm.slot_bytes = 4096;
    options.shm.collective_timeout = absl::Seconds(30);
    options.shm.poll_interval = absl::Milliseconds(20);
    options.gloo.collective_timeout = absl::Seconds(30);
    options.gloo.hostname = "127.0.0.1";
    return CreateHierarchicalCommunicator(store, rank, topology, options);
  };
  const std::vector<at::Tensor> got = RunRanksWith<at::Tensor>(4, make, [](Communicator& comm) {
    const int partner = comm.rank() ^ 1;  // 0-1 and 2-3 share a host.
    at::Tensor in = at::zeros({3000});
    absl::StatusOr<std::unique_ptr<PendingCollective>> sent =
        comm.StartSend(at::full({3000}, static_cast<double>(comm.rank())), partner);
    EXPECT_OK(sent.status());
    EXPECT_OK(comm.Recv(in, partner));
    if (sent.ok()) {
      EXPECT_OK((*sent)->Wait());
    }
    const int across = (comm.rank() + 2) % 4;
    EXPECT_THAT(comm.StartSend(in, across).status(),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("different hosts")));
    // Every communicator (and with it each pair's channel) outlives its partner's receive.
    at::Tensor done = at::ones({1});
    EXPECT_OK(comm.AllReduceSum(done));
    return in;
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(got[r].equal(at::full({3000}, (r ^ 1) * 1.0)));
}

TEST(LocalPointToPointTest, HasNoPeer) {
  LocalCommunicator comm;
  EXPECT_THAT(comm.Send(at::ones({2}), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not another rank")));
  EXPECT_THAT(comm.Recv(at::ones({2}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not another rank")));
}

}  // namespace
}  // namespace baton::trainer
