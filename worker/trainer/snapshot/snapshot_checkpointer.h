#pragma once

// Disk checkpoints written from in-memory snapshots on a thread of their own, so that a
// save does not stall training: at a checkpoint step the training loop takes the step's
// snapshot (a copy into memory, async_snapshot_writer.h), hands its bytes over and goes on;
// this thread decodes them (snapshot_codec.h), encodes the checkpoint file (the format of
// checkpoint/checkpoint_codec.h, which torch.load reads: the same contents a synchronous
// save of that step writes, RNG states included) and commits it through the
// CheckpointManager (atomic, fenced by generation, pruned).
//
// One save at a time: Start waits for the save in flight first. A failed save is reported
// by the next Start, Poll or Wait; FAILED_PRECONDITION (a newer generation has started)
// means the caller must stop training, as for a synchronous save.
//
// Threading: Start, Poll, Wait and the destructor are called from one thread (the training
// loop's). The manager is not used by that thread while a save is in flight (its contract:
// one thread at a time per directory and generation): Wait first.

#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"

namespace baton::trainer {

class SnapshotCheckpointer {
 public:
  // What the last save that finished did.
  struct Saved {
    int64_t step = 0;
    std::string path;
    absl::Duration took;  // Decoding, encoding and committing, on this thread.
  };

  explicit SnapshotCheckpointer(CheckpointManager manager);
  // Waits for the save in flight (its status is dropped: call Wait first), then stops.
  ~SnapshotCheckpointer();
  SnapshotCheckpointer(const SnapshotCheckpointer&) = delete;
  SnapshotCheckpointer& operator=(const SnapshotCheckpointer&) = delete;

  // Starts saving the snapshot `bytes` as the checkpoint of its step. Waits for the save in
  // flight first and returns its status; on an error nothing new is started.
  absl::Status Start(std::string bytes);
  // The status of a save that finished since the last report (OK while one runs or when
  // none did); does not block.
  absl::Status Poll();
  // Blocks until no save is in flight; the status of one that finished unreported.
  absl::Status Wait();
  // The last save that succeeded, once Poll or Wait reported it.
  const std::optional<Saved>& last_saved() const { return last_saved_; }

 private:
  void Loop();
  // Decodes, encodes and commits `bytes`.
  absl::StatusOr<Saved> Save(const std::string& bytes) const;

  const CheckpointManager manager_;
  std::optional<Saved> last_saved_;  // The caller's copy.
  absl::Mutex mu_;
  std::optional<std::string> job_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // job_ taken and not finished.
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::optional<Saved> saved_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace baton::trainer
