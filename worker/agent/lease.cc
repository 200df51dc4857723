#include "worker/agent/lease.h"

#include <algorithm>

#include "common/metrics_http.h"

namespace baton::worker {

uint64_t Lease::OnHeartbeatSent(absl::Time sent) {
  absl::MutexLock lock(&mu_);
  const uint64_t seq = next_seq_++;
  sent_[seq] = sent;
  while (sent_.size() > kMaxOutstanding) sent_.erase(sent_.begin());
  return seq;
}

void Lease::OnRegistered(absl::Time register_sent, absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  sent_.clear();
  if (lease <= absl::ZeroDuration()) {
    lease_ = absl::ZeroDuration();
    expiry_ = absl::InfiniteFuture();
    return;
  }
  lease_ = lease;
  expiry_ = register_sent + lease;
}

void Lease::OnAck(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  auto it = sent_.find(seq);
  if (it == sent_.end() || lease_ == absl::ZeroDuration()) return;
  expiry_ = std::max(expiry_, it->second + lease_);
  sent_.erase(sent_.begin(), std::next(it));  // Acks arrive in order: older ones are moot.
}

bool Lease::Valid(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return now < expiry_;
}

absl::Time Lease::expiry() const {
  absl::MutexLock lock(&mu_);
  return expiry_;
}

absl::Duration Lease::duration() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

std::vector<prometheus::MetricFamily> LeaseMetrics::Collect() const {
  using prometheus::MetricType;
  prometheus::MetricFamily remaining = MakeFamily(
      "baton_worker_lease_remaining_seconds",
      "Time until this worker's lease runs out unless the coordinator renews it; then its "
      "training processes are killed. Absent while no lease is held.",
      MetricType::Gauge);
  if (const absl::Time expiry = lease_->expiry(); expiry != absl::InfiniteFuture()) {
    remaining.metric.push_back(
        MakeSample({}, absl::ToDoubleSeconds(expiry - clock_->Now()), MetricType::Gauge));
  }
  prometheus::MetricFamily expired = MakeFamily(
      "baton_worker_lease_expirations_total",
      "Times the lease ran out (no word from the coordinator: a partition, a dead "
      "coordinator) with training processes, which were killed.",
      MetricType::Counter);
  expired.metric.push_back(
      MakeSample({}, static_cast<double>(expirations_()), MetricType::Counter));
  return {std::move(remaining), std::move(expired)};
}

}  // namespace baton::worker
