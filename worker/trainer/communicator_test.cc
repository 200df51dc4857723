#include "worker/trainer/communicator.h"

#include <ATen/ATen.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/nn/functional/loss.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/gloo_communicator.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

// Runs fn(comm) for ranks 0..world-1, each on its own thread with its own
// ProcessGroupGloo, rendezvousing through one TCPStore server on an OS-chosen port.
template <typename Result>
std::vector<Result> RunRanks(int world, const std::function<Result(Communicator&)>& fn) {
  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.numWorkers = world;
  server_options.waitWorkers = false;
  server_options.timeout = std::chrono::seconds(30);
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);

  std::vector<std::future<Result>> ranks;
  for (int r = 0; r < world; ++r) {
    c10::intrusive_ptr<c10d::Store> store = server;
    if (r > 0) {
      c10d::TCPStoreOptions client_options = server_options;
      client_options.port = server->getPort();
      client_options.isServer = false;
      store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client_options);
    }
    ranks.push_back(std::async(std::launch::async, [store, r, world, &fn] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          CreateGlooCommunicator(store, r, world, absl::Seconds(30), "127.0.0.1");
      EXPECT_TRUE(comm.ok()) << comm.status();
      return fn(**comm);
    }));
  }
  std::vector<Result> results;
  for (auto& f : ranks) results.push_back(f.get());
  return results;
}

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

  GlooOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.rendezvous_timeout = absl::Seconds(1);
  EXPECT_THAT(ConnectGloo(options),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr(absl::StrCat("rendezvous at 127.0.0.1:", port, " failed")),
                             HasSubstr("rank 1 of 2"))));
  ::close(fd);

  options.rank = 2;
  EXPECT_THAT(ConnectGloo(options), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace baton::trainer
