#include "coordinator/store/watched_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

class WatchedStore::Running {
 public:
  Running(WatchedStore* store, const char* op) : store_(store) {
    absl::MutexLock lock(&store_->mu_);
    store_->op_ = op;
    store_->started_ = store_->clock_->Now();
  }
  ~Running() {
    absl::MutexLock lock(&store_->mu_);
    store_->op_ = nullptr;
  }

 private:
  WatchedStore* const store_;
};

WatchedStore::WatchedStore(std::unique_ptr<Store> base, Clock* clock, absl::Duration limit,
                           std::function<void(const absl::Status&)> on_stuck)
    : base_(std::move(base)), clock_(clock), limit_(limit), on_stuck_(std::move(on_stuck)) {
  timer_ = clock_->Every(limit_ / 4, [this] { Check(); });
}

WatchedStore::~WatchedStore() { timer_.Cancel(); }

void WatchedStore::Check() {
  absl::Status stuck;
  {
    absl::MutexLock lock(&mu_);
    if (fired_ || op_ == nullptr || clock_->Now() - started_ <= limit_) return;
    fired_ = true;
    stuck = absl::UnavailableError(absl::StrCat(
        "the state store's ", op_, " has not returned for ",
        absl::FormatDuration(clock_->Now() - started_), " (limit ", absl::FormatDuration(limit_),
        "): is the state directory on a hung mount or a failing disk?"));
  }
  on_stuck_(stuck);
}

absl::Status WatchedStore::Write(const WriteBatch& batch) {
  Running running(this, "Write");
  return base_->Write(batch);
}
absl::StatusOr<std::vector<baton::v1::Job>> WatchedStore::LoadJobs() {
  Running running(this, "LoadJobs");
  return base_->LoadJobs();
}
absl::StatusOr<std::vector<baton::v1::JobUpdate>> WatchedStore::ReadUpdates(
    const std::string& job_id, int64_t after_seq, int64_t limit, bool events_only) {
  Running running(this, "ReadUpdates");
  return base_->ReadUpdates(job_id, after_seq, limit, events_only);
}
absl::StatusOr<int64_t> WatchedStore::LastUpdateSeq(const std::string& job_id) {
  Running running(this, "LastUpdateSeq");
  return base_->LastUpdateSeq(job_id);
}
absl::StatusOr<std::vector<baton::v1::LogLine>> WatchedStore::ReadLogs(const std::string& job_id,
                                                                       int32_t rank,
                                                                       int64_t after_seq,
                                                                       int64_t limit) {
  Running running(this, "ReadLogs");
  return base_->ReadLogs(job_id, rank, after_seq, limit);
}
absl::StatusOr<int64_t> WatchedStore::LastLogSeq(const std::string& job_id) {
  Running running(this, "LastLogSeq");
  return base_->LastLogSeq(job_id);
}

absl::StatusOr<int64_t> WatchedStore::NthLastLogSeq(const std::string& job_id, int32_t rank,
                                                    int64_t since_us, int64_t n) {
  Running running(this, "NthLastLogSeq");
  return base_->NthLastLogSeq(job_id, rank, since_us, n);
}
absl::StatusOr<int64_t> WatchedStore::Prune(const std::string& job_id,
                                            const RetentionLimits& limits) {
  Running running(this, "Prune");
  return base_->Prune(job_id, limits);
}
absl::StatusOr<int64_t> WatchedStore::DiskBytes() {
  Running running(this, "DiskBytes");
  return base_->DiskBytes();
}
absl::StatusOr<std::string> WatchedStore::GetMeta(const std::string& key) {
  Running running(this, "GetMeta");
  return base_->GetMeta(key);
}

}  // namespace baton::coordinator
