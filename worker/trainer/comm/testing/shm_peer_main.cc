// Test peer for communicator_test: joins a 2-rank shm group as rank 1 through the c10d
// TCPStore at 127.0.0.1:<port>, then waits to be killed (the test kills it with SIGKILL
// while rank 0 waits inside a collective).
//
// Usage: shm_peer <store port>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "worker/trainer/comm/shm_communicator.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <store port>\n", argv[0]);
    return 2;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(std::atoi(argv[1]));
  options.isServer = false;
  options.timeout = std::chrono::seconds(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  auto comm = baton::trainer::CreateShmCommunicator(store, /*rank=*/1, /*world_size=*/2,
                                                    baton::trainer::ShmOptions());
  if (!comm.ok()) {
    std::fprintf(stderr, "shm_peer: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  for (;;) pause();
}
