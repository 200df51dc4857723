#include "worker/trainer/gloo_communicator.h"

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

std::chrono::milliseconds ToMillis(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group)
      : group_(std::move(group)) {}

  int rank() const override { return group_->getRank(); }
  int world_size() const override { return group_->getSize(); }

  absl::Status AllReduceSum(at::Tensor& tensor) override {
    try {
      std::vector<at::Tensor> tensors{tensor};
      group_->allreduce(tensors)->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("all-reduce failed (did a peer exit?): ", e.what()));
    }
    return absl::OkStatus();
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " not in world of ", world_size()));
    }
    try {
      std::vector<at::Tensor> tensors{tensor};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      group_->broadcast(tensors, options)->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("broadcast failed (did a peer exit?): ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateOnDevice(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration collective_timeout, const std::shared_ptr<::gloo::transport::Device>& device) {
  auto options = c10d::ProcessGroupGloo::Options::create(ToMillis(collective_timeout));
  options->devices.push_back(device);
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(group)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration collective_timeout, const std::string& hostname) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size));
  }
  try {
    return CreateOnDevice(store, rank, world_size, collective_timeout,
                          c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("creating the Gloo process group: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " not in world of ", options.world_size));
  }
  if (options.master_addr.empty() || options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad rendezvous address '", options.master_addr,
                                                   ":", options.master_port, "'"));
  }
  const std::string where = absl::StrCat(options.master_addr, ":", options.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = static_cast<size_t>(options.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = ToMillis(options.rendezvous_timeout);
    auto tcp_store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    store = c10::make_intrusive<c10d::PrefixStore>(options.store_prefix, std::move(tcp_store));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rendezvous at ", where, " failed (rank ", options.rank, " of ", options.world_size,
        ", timeout ", absl::FormatDuration(options.rendezvous_timeout), "): ", e.what()));
  }
  try {
    std::shared_ptr<::gloo::transport::Device> device;
    if (!options.interface.empty()) {
      device = c10d::ProcessGroupGloo::createDeviceForInterface(options.interface);
    } else if (IsLoopback(options.master_addr)) {
      device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    } else {
      device = c10d::ProcessGroupGloo::createDefaultDevice();
    }
    return CreateOnDevice(store, options.rank, options.world_size, options.collective_timeout,
                          device);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("connecting Gloo peers after rendezvous at ", where,
                                               " (rank ", options.rank, " of ", options.world_size,
                                               "): ", e.what()));
  }
}

}  // namespace baton::trainer
