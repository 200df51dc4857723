#include "worker/trainer/snapshot/async_snapshot_writer.h"

#include <utility>

#include "common/status_macros.h"

namespace baton::trainer {

absl::StatusOr<std::unique_ptr<AsyncSnapshotWriter>> AsyncSnapshotWriter::Open(
    const std::string& dir, const std::string& name) {
  ASSIGN_OR_RETURN(std::unique_ptr<SnapshotWriter> writer, SnapshotWriter::Open(dir, name));
  return std::unique_ptr<AsyncSnapshotWriter>(new AsyncSnapshotWriter(std::move(writer)));
}

AsyncSnapshotWriter::AsyncSnapshotWriter(std::unique_ptr<SnapshotWriter> writer)
    : writer_(std::move(writer)), thread_([this] { Loop(); }) {}

AsyncSnapshotWriter::~AsyncSnapshotWriter() {
  (void)Wait();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void AsyncSnapshotWriter::Start(int64_t generation, SnapshotImage image, bool keep_copy) {
  (void)Wait();
  absl::MutexLock lock(&mu_);
  job_.emplace(Job{generation, std::move(image), keep_copy});
  pending_ = true;
}

absl::Status AsyncSnapshotWriter::Wait() {
  if (!pending_) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](AsyncSnapshotWriter* w)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return !w->job_.has_value() && !w->busy_; },
      this));
  pending_ = false;
  last_write_time_ = write_time_;
  kept_ = std::exchange(copy_, std::nullopt);
  return std::exchange(result_, absl::OkStatus());
}

void AsyncSnapshotWriter::Loop() {
  while (true) {
    std::optional<Job> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AsyncSnapshotWriter* w)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->job_.has_value() || w->stop_; },
          this));
      if (!job_.has_value()) return;  // Stopped.
      job = std::move(job_);
      job_.reset();
      busy_ = true;
    }
    const absl::Time start = absl::Now();
    std::optional<std::string> copy;
    if (job->keep_copy) copy.emplace();
    absl::Status written =
        writer_->Write(job->generation, job->image, copy.has_value() ? &*copy : nullptr);
    const absl::Duration took = absl::Now() - start;
    job.reset();  // Drops the image's tensor references on this thread, before Wait returns.
    absl::MutexLock lock(&mu_);
    if (written.ok()) copy_ = std::move(copy);
    result_ = std::move(written);
    write_time_ = took;
    busy_ = false;
  }
}

}  // namespace baton::trainer
