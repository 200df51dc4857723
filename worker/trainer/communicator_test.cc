#include "worker/trainer/communicator.h"

#include <ATen/ATen.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/nn/functional/loss.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/compat.h"
#include "worker/trainer/gloo_communicator.h"
#include "worker/trainer/process_group.h"
#include "worker/trainer/test_ranks.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

using ::baton::trainer::testing::RunRanks;

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
TEST(GlooCommunicatorTest, TwoRankGradientsEqualSingleProcessGradients) {
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
      RunRanks<std::vector<at::Tensor>>(2, [&](Communicator& comm) {
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

}  // namespace
}  // namespace baton::trainer
