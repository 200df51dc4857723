#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {

// A Store that forwards to a real one and fails chosen commits, for tests that check what
// the coordinator does when the disk says no. Reads always forward. Thread-compatible,
// like Store.
class FaultyStore final : public Store {
 public:
  explicit FaultyStore(std::unique_ptr<Store> base) : base_(std::move(base)) {}

  // The `n`-th Write from now (n >= 1) fails with UNAVAILABLE and writes nothing; so do
  // all later ones if `sticky` (a disk that stays full). Before it, `on_failure` runs (e.g.
  // to note how many side effects had happened by then).
  void FailWrite(int64_t n, bool sticky = false, std::function<void()> on_failure = {}) {
    fail_at_ = writes_ + n;
    sticky_ = sticky;
    on_failure_ = std::move(on_failure);
  }
  // Runs at the start of every Write (e.g. to hold the caller's thread).
  void SetBeforeWrite(std::function<void()> hook) { before_write_ = std::move(hook); }
  // Writes attempted so far (failed ones included).
  int64_t writes() const { return writes_; }
  // Whether an injected failure happened.
  bool failed() const { return failed_; }

  absl::Status Write(const WriteBatch& batch) override {
    if (batch.empty()) return absl::OkStatus();
    if (before_write_) before_write_();
    ++writes_;
    if (fail_at_ > 0 && (writes_ == fail_at_ || (sticky_ && writes_ > fail_at_))) {
      if (!failed_ && on_failure_) on_failure_();
      failed_ = true;
      return absl::UnavailableError("Write: injected failure (disk I/O error)");
    }
    return base_->Write(batch);
  }
  absl::StatusOr<std::vector<baton::v1::Job>> LoadJobs() override { return base_->LoadJobs(); }
  absl::StatusOr<std::vector<baton::v1::JobUpdate>> ReadUpdates(const std::string& job_id,
                                                                int64_t after_seq, int64_t limit,
                                                                bool events_only) override {
    return base_->ReadUpdates(job_id, after_seq, limit, events_only);
  }
  absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) override {
    return base_->LastUpdateSeq(job_id);
  }
  absl::StatusOr<std::vector<baton::v1::LogLine>> ReadLogs(const std::string& job_id, int32_t rank,
                                                           int64_t after_seq,
                                                           int64_t limit) override {
    return base_->ReadLogs(job_id, rank, after_seq, limit);
  }
  absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) override {
    return base_->LastLogSeq(job_id);
  }
  absl::StatusOr<int64_t> NthLastLogSeq(const std::string& job_id, int32_t rank, int64_t since_us,
                                        int64_t n) override {
    return base_->NthLastLogSeq(job_id, rank, since_us, n);
  }
  absl::StatusOr<int64_t> Prune(const std::string& job_id, const RetentionLimits& limits) override {
    return base_->Prune(job_id, limits);
  }
  absl::StatusOr<int64_t> DiskBytes() override { return base_->DiskBytes(); }
  absl::StatusOr<std::string> GetMeta(const std::string& key) override {
    return base_->GetMeta(key);
  }

 private:
  std::unique_ptr<Store> base_;
  int64_t writes_ = 0;
  int64_t fail_at_ = 0;  // 0: never
  bool sticky_ = false;
  bool failed_ = false;
  std::function<void()> on_failure_;
  std::function<void()> before_write_;
};

}  // namespace baton::coordinator
