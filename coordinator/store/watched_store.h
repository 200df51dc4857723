#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {

// A Store that notices a call stuck in the kernel: a state directory on a hung mount would
// otherwise stall the event loop (which owns the store) for ever, with the coordinator
// still answering health checks. A timer on `clock` checks every `limit / 4`; once one
// call has been running longer than `limit`, `on_stuck` runs, once, on the clock's timer
// thread (the daemon stops serving and exits; a restart recovers from disk).
//
// Thread-safe for what it adds; the Store contract (one caller at a time) is unchanged.
class WatchedStore final : public Store {
 public:
  WatchedStore(std::unique_ptr<Store> base, Clock* clock, absl::Duration limit,
               std::function<void(const absl::Status&)> on_stuck);
  ~WatchedStore() override;

  absl::Status Write(const WriteBatch& batch) override;
  absl::StatusOr<std::vector<baton::v1::Job>> LoadJobs() override;
  absl::StatusOr<std::vector<baton::v1::JobUpdate>> ReadUpdates(const std::string& job_id,
                                                                int64_t after_seq, int64_t limit,
                                                                bool events_only) override;
  absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) override;
  absl::StatusOr<std::vector<baton::v1::LogLine>> ReadLogs(const std::string& job_id,
                                                           int32_t rank, int64_t after_seq,
                                                           int64_t limit) override;
  absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) override;
  absl::StatusOr<int64_t> NthLastLogSeq(const std::string& job_id, int32_t rank, int64_t since_us,
                                        int64_t n) override;
  absl::StatusOr<int64_t> Prune(const std::string& job_id, const RetentionLimits& limits) override;
  absl::StatusOr<int64_t> DiskBytes() override;
  absl::StatusOr<std::string> GetMeta(const std::string& key) override;

 private:
  // Marks a call running from now until the returned guard goes.
  class Running;
  void Check();

  const std::unique_ptr<Store> base_;
  Clock* const clock_;
  const absl::Duration limit_;
  const std::function<void(const absl::Status&)> on_stuck_;
  absl::Mutex mu_;
  const char* op_ ABSL_GUARDED_BY(mu_) = nullptr;  // the running call, or null
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  Clock::Timer timer_;  // last: cancelled first
};

}  // namespace baton::coordinator
