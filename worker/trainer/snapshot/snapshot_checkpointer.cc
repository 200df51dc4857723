#include "worker/trainer/snapshot/snapshot_checkpointer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/snapshot/snapshot_codec.h"

namespace baton::trainer {

SnapshotCheckpointer::SnapshotCheckpointer(CheckpointManager manager)
    : manager_(std::move(manager)), thread_([this] { Loop(); }) {}

SnapshotCheckpointer::~SnapshotCheckpointer() {
  (void)Wait();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::Status SnapshotCheckpointer::Start(std::string bytes) {
  RETURN_IF_ERROR(Wait());
  absl::MutexLock lock(&mu_);
  job_ = std::move(bytes);
  return absl::OkStatus();
}

absl::Status SnapshotCheckpointer::Poll() {
  absl::MutexLock lock(&mu_);
  if (job_.has_value() || busy_) return absl::OkStatus();
  if (saved_.has_value()) last_saved_ = std::exchange(saved_, std::nullopt);
  return std::exchange(result_, absl::OkStatus());
}

absl::Status SnapshotCheckpointer::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](SnapshotCheckpointer* c)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) { return !c->job_.has_value() && !c->busy_; },
      this));
  if (saved_.has_value()) last_saved_ = std::exchange(saved_, std::nullopt);
  return std::exchange(result_, absl::OkStatus());
}

absl::StatusOr<SnapshotCheckpointer::Saved> SnapshotCheckpointer::Save(
    const std::string& bytes) const {
  const absl::Time start = absl::Now();
  absl::StatusOr<DecodedCheckpoint> decoded = DecodeSnapshot(bytes);
  if (!decoded.ok()) {
    return absl::Status(
        decoded.status().code(),
        absl::StrCat("checkpoint from an in-memory snapshot: ", decoded.status().message()));
  }
  ASSIGN_OR_RETURN(std::vector<char> sealed, EncodeDecodedCheckpoint(*decoded));
  ASSIGN_OR_RETURN(std::string path, manager_.CommitCheckpoint(decoded->progress.step, sealed));
  return Saved{decoded->progress.step, std::move(path), absl::Now() - start};
}

void SnapshotCheckpointer::Loop() {
  while (true) {
    std::string bytes;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SnapshotCheckpointer* c)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) { return c->job_.has_value() || c->stop_; },
          this));
      if (!job_.has_value()) return;  // Stopped.
      bytes = std::move(*job_);
      job_.reset();
      busy_ = true;
    }
    absl::StatusOr<Saved> saved = Save(bytes);
    absl::MutexLock lock(&mu_);
    if (saved.ok()) {
      saved_ = *std::move(saved);
      result_ = absl::OkStatus();
    } else {
      result_ = saved.status();
    }
    busy_ = false;
  }
}

}  // namespace baton::trainer
