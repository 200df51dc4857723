#include "worker/agent/outbox.h"

#include <algorithm>

#include "common/time/proto_time.h"

namespace baton::worker {
namespace {

// Rough wire size of an entry, for the byte limits.
constexpr size_t kEntryOverhead = 64;

size_t EntryBytes(const baton::v1::LogLine& line) { return line.text().size() + kEntryOverhead; }
size_t EntryBytes(const baton::v1::MetricPoint& point) {
  size_t n = kEntryOverhead;
  for (const auto& [key, value] : point.values()) n += key.size() + 12;
  return n;
}

}  // namespace

bool Outbox::AdmitLocked(size_t bytes) {
  if (!connected_) return false;
  if (batch_entries_ >= options_.max_pending_entries ||
      batch_bytes_ + bytes > options_.max_pending_bytes) {
    return false;
  }
  if (batch_entries_ == 0) {
    batch_start_ = clock_->Now();
    batch_started_ = true;
  }
  ++batch_entries_;
  batch_bytes_ += bytes;
  return true;
}

void Outbox::OnLogLine(const std::string& job_id, baton::v1::LogLine line) {
  absl::MutexLock lock(&mu_);
  if (!AdmitLocked(EntryBytes(line))) {
    ++dropped_.log_lines;
    return;
  }
  logs_[job_id].push_back(std::move(line));
}

void Outbox::OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat, absl::Time read) {
  absl::MutexLock lock(&mu_);
  std::map<int32_t, PendingBeat>& job_beats = beats_[job_id];
  auto it = job_beats.find(beat.rank());
  if (it == job_beats.end()) {
    if (!AdmitLocked(kEntryOverhead + beat.ByteSizeLong())) {
      if (job_beats.empty()) beats_.erase(job_id);
      return;  // dropped with the backlog; the next beat says the same, newer
    }
    it = job_beats.emplace(beat.rank(), PendingBeat()).first;
  }
  it->second = PendingBeat{std::move(beat), read};
}

void Outbox::OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) {
  absl::MutexLock lock(&mu_);
  if (!AdmitLocked(EntryBytes(point))) {
    ++dropped_.metric_points;
    return;
  }
  metrics_[job_id].push_back(std::move(point));
}

void Outbox::OnReportsPending() {
  absl::MutexLock lock(&mu_);
  reports_pending_ = true;
}

void Outbox::PushReply(baton::v1::WorkerMessage reply) {
  absl::MutexLock lock(&mu_);
  if (!connected_) {
    ++dropped_.replies;
    return;
  }
  replies_.push_back(std::move(reply));
}

void Outbox::ClearBatchLocked() {
  logs_.clear();
  metrics_.clear();
  beats_.clear();
  batch_entries_ = 0;
  batch_bytes_ = 0;
  batch_start_ = absl::InfiniteFuture();
  batch_started_ = false;
}

void Outbox::SetConnected(bool connected) {
  absl::MutexLock lock(&mu_);
  connected_ = connected;
  if (connected) return;
  for (const auto& [job, lines] : logs_) dropped_.log_lines += lines.size();
  for (const auto& [job, points] : metrics_) dropped_.metric_points += points.size();
  dropped_.replies += replies_.size();
  replies_.clear();
  ClearBatchLocked();
}

bool Outbox::BatchFullLocked() const {
  return batch_entries_ >= options_.max_batch_entries || batch_bytes_ >= options_.max_batch_bytes;
}

bool Outbox::HasWorkLocked() const {
  // Reports wait for a connection: the agent announces them again once connected.
  return woken_ || (connected_ && (reports_pending_ || !replies_.empty() || BatchFullLocked() ||
                                   batch_started_));
}

bool Outbox::WaitForWork(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const bool work =
      clock_->AwaitWithDeadline(&mu_, absl::Condition(this, &Outbox::HasWorkLocked), deadline);
  woken_ = false;
  batch_started_ = false;
  return work;
}

void Outbox::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

std::vector<baton::v1::WorkerMessage> Outbox::TakeReplies() {
  absl::MutexLock lock(&mu_);
  std::vector<baton::v1::WorkerMessage> out;
  out.swap(replies_);
  return out;
}

bool Outbox::TakeReportsPending() {
  absl::MutexLock lock(&mu_);
  const bool pending = reports_pending_;
  reports_pending_ = false;
  return pending;
}

absl::Time Outbox::NextFlushTime() const {
  absl::MutexLock lock(&mu_);
  return batch_entries_ == 0 ? absl::InfiniteFuture() : batch_start_ + options_.flush_interval;
}

std::vector<baton::v1::WorkerMessage> Outbox::TakeBatches(bool force) {
  absl::MutexLock lock(&mu_);
  std::vector<baton::v1::WorkerMessage> out;
  if (batch_entries_ == 0) return out;
  if (!force && !BatchFullLocked() && clock_->Now() < batch_start_ + options_.flush_interval) {
    return out;
  }
  // Splits `entries` into messages of at most max_batch_entries / max_batch_bytes.
  auto chunk = [&](auto& entries, auto new_message) {
    size_t bytes = 0;
    size_t count = 0;
    decltype(new_message()) current = nullptr;
    for (auto& entry : entries) {
      const size_t b = EntryBytes(entry);
      if (current == nullptr || count >= options_.max_batch_entries ||
          (count > 0 && bytes + b > options_.max_batch_bytes)) {
        current = new_message();
        bytes = 0;
        count = 0;
      }
      *current->Add() = std::move(entry);
      bytes += b;
      ++count;
    }
  };
  for (auto& [job_id, lines] : logs_) {
    const std::string& id = job_id;
    chunk(lines, [&] {
      baton::v1::LogsReport* report = out.emplace_back().mutable_logs();
      report->set_job_id(id);
      return report->mutable_lines();
    });
  }
  for (auto& [job_id, points] : metrics_) {
    const std::string& id = job_id;
    chunk(points, [&] {
      baton::v1::MetricsReport* report = out.emplace_back().mutable_metrics();
      report->set_job_id(id);
      return report->mutable_points();
    });
  }
  const absl::Time now = clock_->Now();
  for (auto& [job_id, job_beats] : beats_) {
    baton::v1::MetricsReport* report = out.emplace_back().mutable_metrics();
    report->set_job_id(job_id);
    for (auto& [rank, pending] : job_beats) {
      baton::v1::RankBeat* beat = report->add_beats();
      *beat = std::move(pending.beat);
      *beat->mutable_age() = ToProto(std::max(now - pending.read, absl::ZeroDuration()));
    }
  }
  ClearBatchLocked();
  return out;
}

Outbox::Dropped Outbox::TakeDropped() {
  absl::MutexLock lock(&mu_);
  const Dropped d = dropped_;
  dropped_ = Dropped();
  return d;
}

}  // namespace baton::worker
