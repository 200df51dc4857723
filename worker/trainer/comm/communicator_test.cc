#include "worker/trainer/comm/communicator.h"

#include <ATen/ATen.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/nn/functional/loss.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/process_group.h"
#include "worker/trainer/comm/shm_communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/device/compat.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeShmWithSlots;
using ::baton::trainer::testing::RunRanks;
using ::baton::trainer::testing::RunRanksOwning;
using ::baton::trainer::testing::RunRanksWith;
using ::baton::trainer::testing::SetUpRanks;

// Shared-memory ranks with small slots, so that tensors of a few KiB take several pieces.
// `on_waiter`: ShmOptions::collectives_on_waiter.
CommunicatorFactory MakeShm(size_t slot_bytes = 4096, absl::Duration timeout = absl::Seconds(30),
                            bool on_waiter = false) {
  return MakeShmWithSlots(slot_bytes, timeout, on_waiter);
}

// Where the shm collectives run: on the communication thread, or on the thread that waits.
constexpr bool kShmModes[] = {false, true};
std::string ShmMode(bool on_waiter) { return on_waiter ? "on the waiter" : "on the thread"; }

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

TEST(LocalCommunicatorTest, CollectivesAreIdentities) {
  LocalCommunicator comm;
  EXPECT_EQ(comm.world_size(), 1);
  at::Tensor t = at::arange(4, at::kFloat);
  ASSERT_OK(comm.AllReduceSum(t));
  EXPECT_TRUE(t.equal(at::arange(4, at::kFloat)));
  at::Tensor p = at::ones({2}, at::kFloat).requires_grad_();
  p.mutable_grad() = at::full({2}, 3.0);
  ASSERT_OK(AverageGradients({p}, comm));
  EXPECT_TRUE(p.grad().equal(at::full({2}, 3.0)));
  EXPECT_THAT(comm.Broadcast(t, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root 1")));
}

TEST(GlooCommunicatorTest, AverageGradientsLeavesTheMeanOnEveryRank) {
  const std::vector<std::vector<at::Tensor>> grads =
      RunRanks<std::vector<at::Tensor>>(2, [](Communicator& comm) {
        const double r = comm.rank();
        // Two parameters of different shapes, plus one that got no gradient on rank 1.
        at::Tensor w = at::zeros({2, 3}, at::kFloat).requires_grad_();
        at::Tensor b = at::zeros({3}, at::kFloat).requires_grad_();
        at::Tensor unused = at::zeros({2}, at::kFloat).requires_grad_();
        w.mutable_grad() = at::arange(6, at::kFloat).reshape({2, 3}) * (r + 1);
        b.mutable_grad() = at::full({3}, 10.0 * (r + 1));
        if (r == 0) unused.mutable_grad() = at::full({2}, 4.0);
        const absl::Status s = AverageGradients({w, b, unused}, comm);
        EXPECT_TRUE(s.ok()) << s;
        return std::vector<at::Tensor>{w.grad(), b.grad(), unused.grad()};
      });
  for (const auto& rank_grads : grads) {
    // Mean of (1x, 2x) = 1.5x; of (4, none = 0) = 2.
    EXPECT_TRUE(rank_grads[0].equal(at::arange(6, at::kFloat).reshape({2, 3}) * 1.5));
    EXPECT_TRUE(rank_grads[1].equal(at::full({3}, 15.0)));
    EXPECT_TRUE(rank_grads[2].equal(at::full({2}, 2.0)));
  }
}

TEST(GlooCommunicatorTest, BroadcastParametersCopiesRootWeights) {
  const std::vector<at::Tensor> got = RunRanks<at::Tensor>(3, [](Communicator& comm) {
    at::Tensor p = at::full({4}, static_cast<double>(comm.rank() + 7)).requires_grad_();
    const absl::Status s = BroadcastParameters({p}, /*root=*/1, comm);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(p.requires_grad());
    return p.detach();
  });
  for (const at::Tensor& p : got) EXPECT_TRUE(p.equal(at::full({4}, 8.0)));
}

// Data parallelism is exact: averaging the gradients of two half batches over two ranks
// gives the gradient of the whole batch in one process.
void ExpectTwoRankGradientsEqualSingleProcessGradients(const CommunicatorFactory& make) {
  constexpr int64_t kBatch = 32;
  const MlpOptions options{/*input_dim=*/20, /*hidden=*/{16, 8}, /*num_classes=*/5};
  at::Generator gen = at::detail::createCPUGenerator(123);
  const at::Tensor inputs = at::randn({kBatch, 20}, gen, at::kFloat);
  const at::Tensor targets = at::randint(5, {kBatch}, gen, at::kLong);

  auto gradients = [&](const at::Tensor& x, const at::Tensor& y) {
    Mlp model(options, /*seed=*/9);
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad());
    return std::make_pair(model, grads);
  };
  const std::vector<at::Tensor> want = gradients(inputs, targets).second;

  const std::vector<std::vector<at::Tensor>> got =
      RunRanksWith<std::vector<at::Tensor>>(2, make, [&](Communicator& comm) {
        const int64_t half = kBatch / 2;
        auto [model, grads] = gradients(inputs.narrow(0, comm.rank() * half, half),
                                        targets.narrow(0, comm.rank() * half, half));
        const absl::Status s = AverageGradients(model->parameters(), comm);
        EXPECT_TRUE(s.ok()) << s;
        std::vector<at::Tensor> averaged;
        for (const at::Tensor& p : model->parameters()) averaged.push_back(p.grad().clone());
        return averaged;
      });
  ASSERT_EQ(want.size(), 6u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_LT(RelativeError(got[r][i], want[i]), 1e-5) << "rank " << r << " param " << i;
    }
  }
  // A half batch alone is a different gradient: the comparison above can fail.
  const std::vector<at::Tensor> half =
      gradients(inputs.narrow(0, 0, kBatch / 2), targets.narrow(0, 0, kBatch / 2)).second;
  EXPECT_GT(RelativeError(half[0], want[0]), 1e-2);
}

TEST(GlooCommunicatorTest, TwoRankGradientsEqualSingleProcessGradients) {
  ExpectTwoRankGradientsEqualSingleProcessGradients(MakeGloo);
}

TEST(ShmCommunicatorTest, TwoRankGradientsEqualSingleProcessGradients) {
  ExpectTwoRankGradientsEqualSingleProcessGradients(MakeShm());
}

TEST(GlooCommunicatorTest, RendezvousWithNoServerFailsWithAClearError) {
  // A bound but not listening socket: connections are refused until the timeout.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  RendezvousOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.timeout = absl::Seconds(1);
  EXPECT_THAT(ConnectStore(options),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr(absl::StrCat("rendezvous at 127.0.0.1:", port, " failed")),
                             HasSubstr("rank 1 of 2"))));
  ProcessGroupOptions group;
  group.rendezvous = options;
  EXPECT_THAT(JoinProcessGroup(group),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rendezvous at")));
  ::close(fd);

  options.rank = 2;
  EXPECT_THAT(ConnectStore(options), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(ProcessGroupTest, WorldOfOneIsLocalOnTheDevice) {
  ProcessGroupOptions options;
  absl::StatusOr<std::unique_ptr<Communicator>> comm = JoinProcessGroup(options);
  ASSERT_OK(comm);
  EXPECT_EQ((*comm)->backend(), "local");
  EXPECT_TRUE((*comm)->device().is_cpu());
}

TEST(GlooCommunicatorTest, AsyncAllReducesCompleteInAnyWaitOrder) {
  const std::vector<std::vector<at::Tensor>> got =
      RunRanks<std::vector<at::Tensor>>(2, [](Communicator& comm) {
        EXPECT_EQ(comm.backend(), "gloo");
        at::Tensor a = at::full({1000}, static_cast<double>(comm.rank() + 1), at::kFloat);
        at::Tensor b = at::full({3}, 10.0 * (comm.rank() + 1), at::kHalf);
        auto pa = comm.StartAllReduceSum(a);
        auto pb = comm.StartAllReduceSum(b);
        EXPECT_TRUE(pa.ok() && pb.ok());
        EXPECT_OK((*pb)->Wait());
        EXPECT_OK((*pa)->Wait());
        return std::vector<at::Tensor>{a, b};
      });
  for (const auto& r : got) {
    EXPECT_TRUE(r[0].equal(at::full({1000}, 3.0, at::kFloat)));
    EXPECT_TRUE(r[1].equal(at::full({3}, 30.0, at::kHalf)));
  }
}

// A rank may destroy its group as soon as it has it: creation returns only once every rank
// is connected, so a peer still connecting is never cut off ("Connection closed by peer",
// seen in a test that only checked settings and returned).
TEST(GlooCommunicatorTest, ARankMayDestroyItsGroupAsSoonAsItHasIt) {
  for (int round = 0; round < 10; ++round) {
    const std::vector<int> ranks = RunRanksOwning<int>(
        3, MakeGloo, [](std::unique_ptr<Communicator> comm) { return comm->rank(); });
    EXPECT_THAT(ranks, ::testing::ElementsAre(0, 1, 2)) << "round " << round;
  }
}

TEST(GlooCommunicatorTest, RejectsWhatItCannotReduce) {
  RunRanks<int>(2, [](Communicator& comm) {
    EXPECT_EQ(comm.CanReduce(at::kBFloat16), compat::GlooReduces(at::kBFloat16));
    EXPECT_TRUE(comm.CanReduce(at::kFloat));
    if (!comm.CanReduce(at::kBFloat16)) {
      EXPECT_THAT(comm.StartAllReduceSum(at::ones({2}, at::kBFloat16)).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BFloat16")));
    }
    return 0;
  });
}

TEST(GlooCommunicatorTest, BroadcastParametersHandlesMixedDtypes) {
  const std::vector<std::vector<at::Tensor>> got =
      RunRanks<std::vector<at::Tensor>>(2, [](Communicator& comm) {
        at::Tensor w = at::full({3}, static_cast<double>(comm.rank()), at::kFloat);
        at::Tensor steps = at::full({1}, comm.rank() == 0 ? 7 : 0, at::kLong);  // a buffer
        EXPECT_OK(BroadcastParameters({w, steps}, /*root=*/0, comm));
        return std::vector<at::Tensor>{w, steps};
      });
  for (const auto& r : got) {
    EXPECT_TRUE(r[0].equal(at::zeros({3}, at::kFloat)));
    EXPECT_EQ(r[1].item<int64_t>(), 7);
  }
}

TEST(ShmCommunicatorTest, AllReduceSumsEveryDtypeAcrossPiecesIdenticallyOnEveryRank) {
  // 3 ranks; 4 KiB slots hold 512 floats per piece, so 10007 elements take 20 pieces and
  // the last piece and chunk are ragged.
  constexpr int64_t kN = 10007;
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kLong, at::kInt,
                                              at::kHalf, at::kBFloat16};
  for (bool on_waiter : kShmModes) {
    SCOPED_TRACE(ShmMode(on_waiter));
    const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
        3, MakeShm(4096, absl::Seconds(30), on_waiter), [&](Communicator& comm) {
          EXPECT_EQ(comm.backend(), "shm");
          std::vector<at::Tensor> out;
          for (at::ScalarType dtype : dtypes) {
            // Small integers: exact in every dtype, so the expected sum is exact too.
            at::Tensor t = (at::arange(kN, at::kLong) % 7 + comm.rank()).to(dtype);
            EXPECT_OK(comm.AllReduceSum(t));
            out.push_back(t);
          }
          at::Tensor random = at::randn({kN}, at::detail::createCPUGenerator(comm.rank()));
          at::Tensor reduced = random.clone();
          EXPECT_OK(comm.AllReduceSum(reduced));
          out.push_back(random);
          out.push_back(reduced);
          return out;
        });
    for (size_t i = 0; i < dtypes.size(); ++i) {
      const at::Tensor want = ((at::arange(kN, at::kLong) % 7) * 3 + 3).to(dtypes[i]);
      for (int r = 0; r < 3; ++r) EXPECT_TRUE(got[r][i].equal(want)) << dtypes[i] << " rank " << r;
    }
    const size_t k = dtypes.size();
    // Summed in rank order, and the same bits on every rank.
    const at::Tensor want = (got[0][k] + got[1][k]) + got[2][k];
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(got[r][k + 1].equal(want)) << "rank " << r;
  }
}

// The mean is divided in the pass that writes each chunk's sum: bit for bit what dividing
// the sum afterwards gives, on every rank, in every floating-point dtype, across pieces.
TEST(ShmCommunicatorTest, AllReduceMeanIsTheSumDividedIdenticallyOnEveryRank) {
  constexpr int64_t kN = 10007;
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
  for (bool on_waiter : kShmModes) {
    for (int world : {2, 3}) {
      SCOPED_TRACE(ShmMode(on_waiter));
      const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
          world, MakeShm(4096, absl::Seconds(30), on_waiter), [&](Communicator& comm) {
            std::vector<at::Tensor> out;
            for (at::ScalarType dtype : dtypes) {
              const at::Tensor x =
                  at::randn({kN}, at::detail::createCPUGenerator(comm.rank() + 1)).to(dtype);
              at::Tensor sum = x.clone();
              at::Tensor mean = x.clone();
              EXPECT_OK(comm.AllReduceSum(sum));
              EXPECT_OK(comm.AllReduceMean(mean));
              out.push_back(sum);
              out.push_back(mean);
            }
            EXPECT_THAT(comm.StartAllReduceMean(at::ones({3}, at::kLong)).status(),
                        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("floating-point")));
            return out;
          });
      for (size_t i = 0; i < dtypes.size(); ++i) {
        at::Tensor want = got[0][2 * i].clone();
        at::div_out(want, want, MeanDivisor(world));
        for (int r = 0; r < world; ++r) {
          EXPECT_TRUE(got[r][2 * i + 1].equal(want))
              << dtypes[i] << " world " << world << " rank " << r;
        }
      }
    }
  }
}

// Gloo has no mean of its own: Communicator's default divides the sum when it is waited for.
TEST(GlooCommunicatorTest, AllReduceMeanDividesTheSum) {
  const std::vector<at::Tensor> got = RunRanks<at::Tensor>(2, [](Communicator& comm) {
    at::Tensor t = at::full({5}, comm.rank() == 0 ? 1.0 : 4.0, at::kFloat);
    EXPECT_OK(comm.AllReduceMean(t));
    EXPECT_THAT(comm.StartAllReduceMean(at::ones({2}, at::kInt)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("floating-point")));
    return t;
  });
  for (const at::Tensor& t : got) EXPECT_TRUE(t.equal(at::full({5}, 2.5, at::kFloat)));
}

// Waited for in the reverse order, the collectives still run in the order they were
// started (on the waiter: waiting for the second runs the first, then the second).
TEST(ShmCommunicatorTest, AsyncAllReducesAndBroadcastsRunInIssueOrder) {
  for (bool on_waiter : kShmModes) {
    SCOPED_TRACE(ShmMode(on_waiter));
    const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
        2, MakeShm(4096, absl::Seconds(30), on_waiter), [](Communicator& comm) {
          at::Tensor a = at::full({3000}, static_cast<double>(comm.rank() + 1), at::kFloat);
          at::Tensor b = at::full({5}, 10.0 * (comm.rank() + 1), at::kDouble);
          auto pa = comm.StartAllReduceSum(a);
          auto pb = comm.StartAllReduceSum(b);
          EXPECT_TRUE(pa.ok() && pb.ok());
          EXPECT_OK((*pb)->Wait());
          EXPECT_OK((*pa)->Wait());
          at::Tensor w = at::full({2500}, static_cast<double>(comm.rank() + 7), at::kFloat);
          at::Tensor steps = at::full({1}, comm.rank() == 1 ? 42 : 0, at::kLong);
          EXPECT_OK(BroadcastParameters({w, steps}, /*root=*/1, comm));
          return std::vector<at::Tensor>{a, b, w, steps};
        });
    for (const auto& r : got) {
      EXPECT_TRUE(r[0].equal(at::full({3000}, 3.0, at::kFloat)));
      EXPECT_TRUE(r[1].equal(at::full({5}, 30.0, at::kDouble)));
      EXPECT_TRUE(r[2].equal(at::full({2500}, 8.0, at::kFloat)));
      EXPECT_EQ(r[3].item<int64_t>(), 42);
    }
  }
}

// On the waiter, a collective whose PendingCollective is dropped unwaited still completes:
// it is handed to the communication thread, so the peer waiting for it is not left hanging,
// and a later collective of the same rank runs after it.
TEST(ShmCommunicatorTest, OnTheWaiterACollectiveNeverWaitedForStillCompletes) {
  const std::vector<std::vector<at::Tensor>> got = RunRanksWith<std::vector<at::Tensor>>(
      2, MakeShm(4096, absl::Seconds(30), /*on_waiter=*/true), [](Communicator& comm) {
        at::Tensor dropped = at::full({3000}, comm.rank() + 1.0, at::kFloat);
        at::Tensor waited = at::full({3000}, comm.rank() + 1.0, at::kFloat);
        {
          absl::StatusOr<std::unique_ptr<PendingCollective>> p = comm.StartAllReduceSum(dropped);
          EXPECT_OK(p);
          if (comm.rank() == 1) {
            EXPECT_OK((*p)->Wait());
          }
        }  // Rank 0 destroys it unwaited.
        // Rank 1's peer for this one is rank 0's, which runs only after the dropped one.
        at::Tensor later = at::full({10}, 5.0 * (comm.rank() + 1), at::kDouble);
        EXPECT_OK(comm.AllReduceSum(later));
        return std::vector<at::Tensor>{dropped, later};
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(got[r][0].equal(at::full({3000}, 3.0, at::kFloat))) << "rank " << r;
    EXPECT_TRUE(got[r][1].equal(at::full({10}, 15.0, at::kDouble))) << "rank " << r;
  }
}

TEST(ShmCommunicatorTest, RejectsWhatItCannotReduce) {
  RunRanksWith<int>(2, MakeShm(), [](Communicator& comm) {
    EXPECT_THAT(comm.StartAllReduceSum(at::ones({2}, at::kBool)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bool")));
    EXPECT_THAT(comm.StartAllReduceSum(at::ones({4, 4}).t()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contiguous")));
    at::Tensor t = at::ones({2});
    EXPECT_THAT(comm.Broadcast(t, 2),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root 2")));
    return 0;
  });
}

// Rank 1 joins the collective only after rank 0 gave up on it: rank 0 times out, and rank
// 1's late arrival must not complete a barrier with it. From then on every collective
// fails at once on both ranks.
TEST(ShmCommunicatorTest, HungPeerTimesOutAndBreaksTheGroup) {
  std::promise<void> rank0_gave_up;
  std::shared_future<void> gave_up = rank0_gave_up.get_future().share();
  RunRanksWith<int>(2, MakeShm(4096, absl::Milliseconds(300)), [&](Communicator& comm) {
    at::Tensor t = at::ones({100});
    if (comm.rank() == 0) {
      EXPECT_THAT(comm.AllReduceSum(t),
                  StatusIs(absl::StatusCode::kUnavailable, HasSubstr("timed out")));
      rank0_gave_up.set_value();
    } else {
      gave_up.wait();
      EXPECT_THAT(comm.AllReduceSum(t),
                  StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 0 gave up")));
    }
    EXPECT_THAT(comm.AllReduceSum(t), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
    return 0;
  });
}

// A segment that cannot be sized (its byte count overflows off_t) stands for a /dev/shm
// that is too small: every rank gets the same FAILED_PRECONDITION at once (so all may fall
// back to Gloo), not a store timeout.
TEST(ShmCommunicatorTest, UnusableSegmentFailsEveryRankAlike) {
  const auto results = SetUpRanks(3, MakeShm(size_t{1} << 62));
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(results[r], StatusIs(absl::StatusCode::kFailedPrecondition,
                                     HasSubstr("shared memory unusable (rank 0): sizing")))
        << "rank " << r;
  }
}

// A rank whose communicator is destroyed counts as gone: a peer waiting for it fails.
TEST(ShmCommunicatorTest, DestroyedPeerFailsTheCollective) {
  for (bool on_waiter : kShmModes) {
    SCOPED_TRACE(ShmMode(on_waiter));
    const std::vector<absl::Status> got = RunRanksOwning<absl::Status>(
        2, MakeShm(4096, absl::Seconds(30), on_waiter), [](std::unique_ptr<Communicator> comm) {
          if (comm->rank() == 1) return absl::OkStatus();  // Destroyed on return.
          at::Tensor t = at::ones({100});
          return comm->AllReduceSum(t);
        });
    EXPECT_THAT(got[0], StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 1 left")));
  }
}

std::string PeerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "baton",
                      "/worker/trainer/comm/testing/shm_peer");
}

// A real peer process killed with SIGKILL while rank 0 waits in the collective `start` starts: it
// fails with UNAVAILABLE naming the dead rank, and later collectives fail too. Seen as the
// peer exits, still unreaped (a zombie, which kill(pid, 0) calls alive), not at a liveness
// poll: the poll interval and the collective timeout are an hour, past the test's own
// timeout.
void ExpectKilledPeerProcessFailsTheCollective(
    const std::function<absl::StatusOr<std::unique_ptr<PendingCollective>>(Communicator&)>& start,
    bool on_waiter = false) {
  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.numWorkers = 2;
  server_options.waitWorkers = false;
  server_options.timeout = std::chrono::seconds(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);

  const std::string binary = PeerBinary();
  const std::string port = std::to_string(store->getPort());
  char* const argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>(port.c_str()),
                        nullptr};
  pid_t peer = 0;
  ASSERT_EQ(posix_spawn(&peer, binary.c_str(), nullptr, nullptr, argv, environ), 0) << binary;

  ShmOptions options;
  options.collective_timeout = absl::Hours(1);
  options.poll_interval = absl::Hours(1);
  options.collectives_on_waiter = on_waiter;
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateShmCommunicator(store, /*rank=*/0, /*world_size=*/2, options);
  ASSERT_OK(comm);
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = start(**comm);
  ASSERT_OK(pending);
  ASSERT_EQ(kill(peer, SIGKILL), 0);
  EXPECT_THAT((*pending)->Wait(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(absl::StrCat("rank 1 (pid ", peer, ") exited"))));
  at::Tensor t = at::ones({1000});
  EXPECT_THAT((*comm)->AllReduceSum(t), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  int status = 0;
  ASSERT_EQ(waitpid(peer, &status, 0), peer);
}

TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheAllReduce) {
  at::Tensor t = at::ones({1000});
  ExpectKilledPeerProcessFailsTheCollective(
      [&t](Communicator& comm) { return comm.StartAllReduceSum(t); });
}

// On the waiter the collective only starts in Wait, after the peer died: it still fails.
TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheAllReduceOnTheWaiter) {
  at::Tensor t = at::ones({1000});
  ExpectKilledPeerProcessFailsTheCollective(
      [&t](Communicator& comm) { return comm.StartAllReduceSum(t); }, /*on_waiter=*/true);
}

TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheReduceScatter) {
  at::Tensor full = at::ones({2000});
  at::Tensor shard = at::empty({1000});
  ExpectKilledPeerProcessFailsTheCollective(
      [&](Communicator& comm) { return comm.StartReduceScatterSum(full, shard); });
}

TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheAllGather) {
  at::Tensor shard = at::ones({1000});
  at::Tensor full = at::empty({2000});
  ExpectKilledPeerProcessFailsTheCollective(
      [&](Communicator& comm) { return comm.StartAllGather(shard, full); });
}

// Point to point with a SIGKILLed peer process: a receive that waits for it, and a send larger
// than the pair's channel (which waits for the receiver to drain it), fail with UNAVAILABLE
// naming the dead rank.
TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheRecv) {
  at::Tensor t = at::ones({1000});
  ExpectKilledPeerProcessFailsTheCollective(
      [&t](Communicator& comm) { return comm.StartRecv(t, /*src=*/1); });
}

TEST(ShmCommunicatorTest, KilledPeerProcessFailsTheSend) {
  at::Tensor big = at::ones({8 << 20});  // 32 MiB: more than the channel's two 4 MiB pieces.
  ExpectKilledPeerProcessFailsTheCollective(
      [&big](Communicator& comm) { return comm.StartSend(big, /*dst=*/1); });
}

TEST(ProcessGroupTest, CpuBackendNames) {
  EXPECT_EQ(ParseCpuBackend("auto").value(), CpuBackend::kAuto);
  EXPECT_EQ(ParseCpuBackend("shm").value(), CpuBackend::kShm);
  EXPECT_EQ(ParseCpuBackend("gloo").value(), CpuBackend::kGloo);
  EXPECT_EQ(ParseCpuBackend("hierarchical").value(), CpuBackend::kHierarchical);
  EXPECT_THAT(ParseCpuBackend("tcp"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'tcp' is not one of auto, shm, gloo, hierarchical")));
}

// A communication thread per rank only where the CPUs hold every rank's training threads
// and one more per rank.
TEST(ProcessGroupTest, CommunicationThreadOnlyWithACoreOfItsOwn) {
  EXPECT_FALSE(UseCommunicationThread(/*cpus=*/2, /*local_world_size=*/2, /*threads=*/1));
  EXPECT_FALSE(UseCommunicationThread(3, 2, 1));
  EXPECT_TRUE(UseCommunicationThread(4, 2, 1));
  EXPECT_TRUE(UseCommunicationThread(2, 1, 1));
  EXPECT_FALSE(UseCommunicationThread(15, 4, 3));
  EXPECT_TRUE(UseCommunicationThread(16, 4, 3));
  EXPECT_FALSE(UseCommunicationThread(256, 128, 1 << 30));  // No overflow.
}

// Ranks as threads whose host keys are keys[rank] (as BATON_HOST_KEY sets them).
// point_to_point: the job sends between any two ranks (ProcessGroupOptions).
CommunicatorFactory MakeCpu(CpuBackend backend, std::vector<std::string> keys,
                            size_t slot_bytes = ShmOptions().slot_bytes,
                            bool point_to_point = false) {
  return [backend, keys, slot_bytes, point_to_point](const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int world) {
    ProcessGroupOptions options;
    options.rendezvous.rank = rank;
    options.rendezvous.world_size = world;
    options.rendezvous.master_addr = "127.0.0.1";
    options.cpu_backend = backend;
    options.collective_timeout = absl::Seconds(30);
    options.host_key = keys.at(rank);
    options.shm_slot_bytes = slot_bytes;
    options.point_to_point = point_to_point;
    return CreateCpuCommunicator(store, options);
  };
}

TEST(ProcessGroupTest, CpuBackendFollowsTheHosts) {
  struct Case {
    CpuBackend backend;
    std::vector<std::string> keys;
    std::string want;
    bool point_to_point = false;
  };
  const std::vector<Case> cases = {
      // Pipelines send between any two ranks: auto does not pick the hierarchical backend,
      // which crosses hosts only through their leaders.
      {CpuBackend::kAuto, {"a", "a", "b", "b"}, "gloo", /*point_to_point=*/true},
      {CpuBackend::kAuto, {"a", "a"}, "shm", /*point_to_point=*/true},
      {CpuBackend::kAuto, {"a", "a"}, "shm"},
      {CpuBackend::kAuto, {"a", "a", "b", "b"}, "hierarchical(shm+gloo, 2 hosts)"},
      {CpuBackend::kAuto, {"a", "a", "b"}, "hierarchical(shm+gloo, 2 hosts)"},
      {CpuBackend::kAuto, {"a", "b"}, "gloo"},
      {CpuBackend::kGloo, {"a", "a", "b", "b"}, "gloo"},
      {CpuBackend::kHierarchical, {"a", "b"}, "hierarchical(shm+gloo, 2 hosts)"},
      {CpuBackend::kHierarchical, {"a", "a"}, "hierarchical(shm+gloo, 1 host)"},
      {CpuBackend::kShm, {"a", "a"}, "shm"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(static_cast<int>(c.backend), " ", c.keys.size(), " ranks: ",
                              c.want));
    const int world = static_cast<int>(c.keys.size());
    const std::vector<at::Tensor> got = RunRanksWith<at::Tensor>(
        world, MakeCpu(c.backend, c.keys, ShmOptions().slot_bytes, c.point_to_point),
        [&](Communicator& comm) {
          EXPECT_EQ(comm.backend(), c.want);
          at::Tensor t = at::full({3}, static_cast<double>(comm.rank()), at::kFloat);
          EXPECT_OK(comm.AllReduceSum(t));
          return t;
        });
    for (const at::Tensor& t : got) {
      EXPECT_TRUE(t.equal(at::full({3}, world * (world - 1) / 2.0, at::kFloat)));
    }
  }
}

// Shared memory that cannot be set up (a segment too large to size): auto falls back to
// flat Gloo on every rank and says why on stderr; hierarchical and shm fail.
TEST(ProcessGroupTest, UnusableSharedMemoryFallsBackToGlooUnlessForced) {
  const std::vector<std::string> keys = {"a", "a", "b", "b"};
  const size_t unusable = size_t{1} << 62;
  ::testing::internal::CaptureStderr();
  RunRanksWith<int>(4, MakeCpu(CpuBackend::kAuto, keys, unusable), [](Communicator& comm) {
    EXPECT_EQ(comm.backend(), "gloo");
    at::Tensor t = at::ones({2});
    EXPECT_OK(comm.AllReduceSum(t));
    EXPECT_TRUE(t.equal(at::full({2}, 4.0)));
    return 0;
  });
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("baton-trainer: shared memory unusable (2 hosts: 0,1 | 2,3), using flat "
                        "Gloo: host 0 (ranks 0,1): shared memory unusable (rank 0): sizing"));
  for (const auto& result : SetUpRanks(4, MakeCpu(CpuBackend::kHierarchical, keys, unusable))) {
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("host 0")));
  }
  for (const auto& result : SetUpRanks(2, MakeCpu(CpuBackend::kShm, {"a", "a"}, unusable))) {
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("sizing")));
  }
}

}  // namespace
}  // namespace baton::trainer
