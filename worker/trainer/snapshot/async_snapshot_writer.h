#pragma once

// A SnapshotWriter on a thread of its own, so that the copy of a snapshot overlaps the next
// step's forward and backward passes, which only read the parameters and the optimizer
// state: the training loop starts a write at a step boundary and waits for it right before
// the next update changes what is being copied (TrainingSession: after the gradients'
// exchange). Whatever does change during forward (BatchNorm's running statistics) must be
// copied into the image before Start (a clone) rather than referenced live.
//
// Threading: Start, Wait and the destructor are called from one thread (the training
// loop's); the copy runs on the writer's own thread.

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/trainer/snapshot/snapshot_codec.h"
#include "worker/trainer/snapshot/snapshot_store.h"

namespace baton::trainer {

class AsyncSnapshotWriter {
 public:
  // SnapshotWriter::Open, and the thread. Errors as Open.
  static absl::StatusOr<std::unique_ptr<AsyncSnapshotWriter>> Open(const std::string& dir,
                                                                   const std::string& name);
  // Waits for the write in flight, then stops the thread.
  ~AsyncSnapshotWriter();
  AsyncSnapshotWriter(const AsyncSnapshotWriter&) = delete;
  AsyncSnapshotWriter& operator=(const AsyncSnapshotWriter&) = delete;

  // Starts writing `image` as generation `generation`'s snapshot. The tensors it references
  // must stay unchanged until Wait returns. Waits first for a write still in flight (its
  // status is then lost: call Wait before). With `keep_copy`, the written bytes are copied
  // out of the slot too, for TakeCopy.
  void Start(int64_t generation, SnapshotImage image, bool keep_copy = false);
  // Blocks until no write is in flight; returns the status of the last write started since
  // the previous Wait (OK when there was none).
  absl::Status Wait();
  // The bytes of the last write waited for that was started with keep_copy and succeeded
  // (once; nullopt after). Moves them out: nothing is copied twice.
  std::optional<std::string> TakeCopy() { return std::exchange(kept_, std::nullopt); }
  // Whether a write was started and not yet waited for.
  bool in_flight() const { return pending_; }
  // How long the last write waited for took on the writer's thread (the copy's wall time).
  absl::Duration last_write_time() const { return last_write_time_; }

 private:
  explicit AsyncSnapshotWriter(std::unique_ptr<SnapshotWriter> writer);
  void Loop();

  std::unique_ptr<SnapshotWriter> writer_;
  bool pending_ = false;             // The caller's view: started and not waited for.
  absl::Duration last_write_time_;   // The caller's copy, set by Wait.
  std::optional<std::string> kept_;  // The caller's, set by Wait.
  struct Job {
    int64_t generation = 0;
    SnapshotImage image;
    bool keep_copy = false;
  };
  absl::Mutex mu_;
  std::optional<Job> job_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // job_ taken and not finished.
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> copy_ ABSL_GUARDED_BY(mu_);
  absl::Duration write_time_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace baton::trainer
