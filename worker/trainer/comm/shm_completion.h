#pragma once

// The outcome of one piece of work of the shared-memory communicator (shm_communicator.h),
// a collective or a point-to-point transfer (shm_point_to_point.h): the thread that runs the
// work finishes it once; the work's PendingCollective waits for it.

#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/status/status.h"

namespace baton::trainer {

// Thread-safe. `status` is final once `done`.
struct ShmCompletion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;    // Guarded by mu.
  absl::Status status;  // Guarded by mu.

  bool IsDone() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
  // Sets `status` and wakes every waiter on `cv`. Call once.
  void Finish(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  }
};

}  // namespace baton::trainer
