#include "worker/lease.h"

#include <algorithm>

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

}  // namespace baton::worker
