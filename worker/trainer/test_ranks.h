#pragma once

// Test helper: runs one function per rank, each rank on its own thread with its own
// communicator (ProcessGroupGloo unless told otherwise), rendezvousing through one c10d
// TCPStore server on an OS-chosen port (no fixed ports, so tests may run in parallel).
// Header-only, testonly.

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/trainer/communicator.h"
#include "worker/trainer/gloo_communicator.h"

namespace baton::trainer::testing {

// Builds rank r's communicator of a world through the shared store.
using CommunicatorFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world)>;

inline absl::StatusOr<std::unique_ptr<Communicator>> MakeGloo(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
  GlooOptions options;
  options.collective_timeout = absl::Seconds(30);
  options.hostname = "127.0.0.1";
  return CreateGlooCommunicator(store, rank, world, options);
}

// fn(comm) for ranks 0..world-1 concurrently, each with make(store, rank, world); returns
// the results in rank order.
template <typename Result>
std::vector<Result> RunRanksWith(int world, const CommunicatorFactory& make,
                                 const std::function<Result(Communicator&)>& fn) {
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
    ranks.push_back(std::async(std::launch::async, [store, r, world, &make, &fn] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = make(store, r, world);
      if (!comm.ok()) {
        ADD_FAILURE() << comm.status();
        return Result();
      }
      return fn(**comm);
    }));
  }
  std::vector<Result> results;
  for (auto& f : ranks) results.push_back(f.get());
  return results;
}

// RunRanksWith over Gloo.
template <typename Result>
std::vector<Result> RunRanks(int world, const std::function<Result(Communicator&)>& fn) {
  return RunRanksWith<Result>(world, MakeGloo, fn);
}

}  // namespace baton::trainer::testing
