#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

// The worker's lease, published where its ranks' shims read it without the daemon's help
// (worker/trainer/contract/lease_page.h has the page's format): fencing that holds when the
// worker daemon itself hangs (stopped by a signal, deadlocked, starved of CPU).
//
// One page per daemon, a memfd sealed against every writer but this object's own mapping
// (F_SEAL_FUTURE_WRITE, size sealed): a rank holds its fd, may read it, and cannot move
// the deadline, not even through /proc/<pid>/fd. Each shim (a fork of the worker) reads
// the deadline through the mapping it inherited and SIGKILLs its rank's process tree
// once it passes (posix_process_launcher.h).
//
// Thread-safe: Set() is one atomic store.
class LeaseFence {
 public:
  // Errors: INTERNAL (memfd_create, ftruncate, mmap or the seals failed, with the OS error).
  static absl::StatusOr<std::unique_ptr<LeaseFence>> Create();
  ~LeaseFence();
  LeaseFence(const LeaseFence&) = delete;
  LeaseFence& operator=(const LeaseFence&) = delete;

  // The lease runs out `remaining` from now (InfiniteDuration: no lease that can run out;
  // zero or negative: it has run out).
  void SetRemaining(absl::Duration remaining);

  // The page's fd (read by the shims' children; valid for this object's lifetime).
  int fd() const { return fd_.get(); }
  // The page in this process's memory, for the shims (forks of the worker) to read.
  const int64_t* page() const { return page_; }

 private:
  LeaseFence(UniqueFd fd, int64_t* page) : fd_(std::move(fd)), page_(page) {}
  UniqueFd fd_;
  int64_t* const page_;
};

}  // namespace baton::worker
