#pragma once

// Test helper: runs one function per rank, each rank on its own thread with its own
// communicator (ProcessGroupGloo unless told otherwise), rendezvousing through one c10d
// TCPStore server on an OS-chosen port (no fixed ports, so tests may run in parallel).
// Header-only, testonly.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <ostream>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/shm_communicator.h"

namespace baton::trainer::testing {

// Builds rank r's communicator of a world through the shared store.
using CommunicatorFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world)>;

// Gloo on loopback with the given collective timeout.
inline CommunicatorFactory MakeGlooWithTimeout(absl::Duration timeout) {
  return [timeout](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
    GlooOptions options;
    options.collective_timeout = timeout;
    options.hostname = "127.0.0.1";
    return CreateGlooCommunicator(store, rank, world, options);
  };
}

inline absl::StatusOr<std::unique_ptr<Communicator>> MakeGloo(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
  return MakeGlooWithTimeout(absl::Seconds(30))(store, rank, world);
}

// Shared-memory ranks (all on this host) with `slot_bytes` slots (4 KiB: 512 floats per
// piece, so a few thousand elements take several pieces), polling every 20 ms.
// `on_waiter`: ShmOptions::collectives_on_waiter.
inline CommunicatorFactory MakeShmWithSlots(size_t slot_bytes, absl::Duration timeout,
                                            bool on_waiter = false) {
  ShmOptions options;
  options.slot_bytes = slot_bytes;
  options.collective_timeout = timeout;
  options.poll_interval = absl::Milliseconds(20);
  options.collectives_on_waiter = on_waiter;
  return [options](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
    return CreateShmCommunicator(store, rank, world, options);
  };
}

inline CommunicatorFactory MakeShm(absl::Duration timeout, bool on_waiter = false) {
  return MakeShmWithSlots(4096, timeout, on_waiter);
}

inline CommunicatorFactory MakeShmOnWaiter(absl::Duration timeout) {
  return MakeShm(timeout, /*on_waiter=*/true);
}

// A rank whose peer is lost mid-step, deterministically: behaves as `inner` until the
// fail_at-th all-reduce or reduce-scatter (counting from 1) of at least min_elements
// elements (a gradient bucket, not a small bookkeeping collective), from which on every
// collective fails at its start with UNAVAILABLE, as when a peer is gone. Given to every
// rank of a gang with the same numbers, all ranks fail at the same collective and none
// waits for another.
class FailingCommunicator final : public Communicator {
 public:
  FailingCommunicator(std::unique_ptr<Communicator> inner, int fail_at, int64_t min_elements)
      : inner_(std::move(inner)), fail_at_(fail_at), min_elements_(min_elements) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  c10::Device device() const override { return inner_->device(); }
  std::string backend() const override { return inner_->backend(); }
  bool CanReduce(c10::ScalarType dtype) const override { return inner_->CanReduce(dtype); }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor t) override {
    if (absl::Status s = Count(t); !s.ok()) return s;
    return inner_->StartAllReduceSum(std::move(t));
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceMean(at::Tensor t) override {
    if (absl::Status s = Count(t); !s.ok()) return s;
    return inner_->StartAllReduceMean(std::move(t));
  }
  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->Broadcast(tensor, root);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override {
    if (absl::Status s = Count(input); !s.ok()) return s;
    return inner_->StartReduceScatterSum(std::move(input), std::move(output));
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->StartAllGather(std::move(input), std::move(output));
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor t, int dst) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->StartSend(std::move(t), dst);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor t, int src) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->StartRecv(std::move(t), src);
  }

 private:
  absl::Status Count(const at::Tensor& t) {
    if (t.numel() >= min_elements_ && ++large_ >= fail_at_) failed_ = true;
    return Check();
  }
  absl::Status Check() const {
    return failed_ ? absl::UnavailableError("the test's peer is gone") : absl::OkStatus();
  }

  std::unique_ptr<Communicator> inner_;
  const int fail_at_;
  const int64_t min_elements_;
  int large_ = 0;
  bool failed_ = false;
};

// `make`'s communicators, each wrapped in a FailingCommunicator(fail_at, min_elements).
inline CommunicatorFactory FailAt(CommunicatorFactory make, int fail_at, int64_t min_elements) {
  return [make = std::move(make), fail_at, min_elements](
             const c10::intrusive_ptr<c10d::Store>& store, int rank,
             int world) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    absl::StatusOr<std::unique_ptr<Communicator>> inner = make(store, rank, world);
    if (!inner.ok()) return inner.status();
    return std::make_unique<FailingCommunicator>(*std::move(inner), fail_at, min_elements);
  };
}

// A backend of the communicator tests parameterised over backends.
struct TestBackend {
  std::string name;
  int world;
  // The factory for a given collective timeout (short in the failure tests).
  std::function<CommunicatorFactory(absl::Duration)> make;
};

inline void PrintTo(const TestBackend& backend, std::ostream* os) { *os << backend.name; }

// Gloo and shared memory (collectives on the communication thread, and on the waiter) at
// world sizes 2 and 3.
inline std::vector<TestBackend> GlooAndShmBackends() {
  std::vector<TestBackend> backends;
  for (int world : {2, 3}) {
    backends.push_back({"Gloo" + std::to_string(world), world, MakeGlooWithTimeout});
    backends.push_back(
        {"Shm" + std::to_string(world), world, [](absl::Duration t) { return MakeShm(t); }});
    backends.push_back({"ShmOnWaiter" + std::to_string(world), world, MakeShmOnWaiter});
  }
  return backends;
}

// One c10d TCPStore server on an OS-chosen port and one store per rank: rank 0's is the
// server, the others are its clients.
inline std::vector<c10::intrusive_ptr<c10d::Store>> MakeRankStores(int world) {
  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.numWorkers = world;
  server_options.waitWorkers = false;
  server_options.timeout = std::chrono::seconds(30);
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);
  std::vector<c10::intrusive_ptr<c10d::Store>> stores = {server};
  for (int r = 1; r < world; ++r) {
    c10d::TCPStoreOptions client_options = server_options;
    client_options.port = server->getPort();
    client_options.isServer = false;
    stores.push_back(c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client_options));
  }
  return stores;
}

// make(store, rank, world) for ranks 0..world-1 concurrently: every rank's outcome, in rank
// order (for tests of setup failures).
inline std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> SetUpRanks(
    int world, const CommunicatorFactory& make) {
  const std::vector<c10::intrusive_ptr<c10d::Store>> stores = MakeRankStores(world);
  std::vector<std::future<absl::StatusOr<std::unique_ptr<Communicator>>>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&stores, r, world, &make] {
      return make(stores[r], r, world);
    }));
  }
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> results;
  for (auto& f : ranks) results.push_back(f.get());
  return results;
}

// fn(comm) for ranks 0..world-1 concurrently, each with make(store, rank, world) and
// owning it (so a rank may destroy its communicator early); returns the results in rank
// order. SIGPIPE is ignored from then on, as trainer_main does: a rank writing to a
// destroyed peer's socket (Gloo) must get the collective's error, not kill the process
// (exit 141).
template <typename Result>
std::vector<Result> RunRanksOwning(
    int world, const CommunicatorFactory& make,
    const std::function<Result(std::unique_ptr<Communicator>)>& fn) {
  ::signal(SIGPIPE, SIG_IGN);
  const std::vector<c10::intrusive_ptr<c10d::Store>> stores = MakeRankStores(world);
  std::vector<std::future<Result>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [store = stores[r], r, world, &make, &fn] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = make(store, r, world);
      if (!comm.ok()) {
        ADD_FAILURE() << comm.status();
        return Result();
      }
      return fn(*std::move(comm));
    }));
  }
  std::vector<Result> results;
  for (auto& f : ranks) results.push_back(f.get());
  return results;
}

// RunRanksOwning with fn(comm) borrowing the communicator.
template <typename Result>
std::vector<Result> RunRanksWith(int world, const CommunicatorFactory& make,
                                 const std::function<Result(Communicator&)>& fn) {
  return RunRanksOwning<Result>(
      world, make, [&fn](std::unique_ptr<Communicator> comm) { return fn(*comm); });
}

// RunRanksWith over Gloo.
template <typename Result>
std::vector<Result> RunRanks(int world, const std::function<Result(Communicator&)>& fn) {
  return RunRanksWith<Result>(world, MakeGloo, fn);
}

}  // namespace baton::trainer::testing
