#pragma once

// The worker's side of a pre-flight check (RunPreflight, worker_service.proto): measures
// its links to the peers it was given (worker/host/link_test.h) while it checks the host
// itself (worker/host/host_checks.h), and gathers one PreflightResult.

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"

namespace baton::worker {

struct PreflightHost {
  // Where the shared-memory check writes, and how much (a rank's transport segments are of
  // this order).
  std::string shm_dir = "/dev/shm";
  int64_t shm_bytes = int64_t{32} << 20;
  // GPUs the worker registered; > 0: the "gpu" check runs with these.
  int registered_gpus = 0;
  std::function<std::vector<baton::v1::Gpu>()> detect_gpus;
  // How long a connect to a peer may take, unless the request says.
  absl::Duration connect_timeout = absl::Seconds(2);
};

// At most this many links per request (the coordinator sends two; more are answered as
// errors, unmeasured).
inline constexpr int kMaxPreflightLinks = 8;

// Runs `req` on this host: one thread per link (up to kMaxPreflightLinks), the host's
// checks on the calling thread meanwhile. Returns when every part finished: about
// req.link_window after the slowest connect. Thread-safe.
baton::v1::PreflightResult RunPreflight(const baton::v1::RunPreflight& req,
                                        const PreflightHost& host, Clock* clock);

}  // namespace baton::worker
