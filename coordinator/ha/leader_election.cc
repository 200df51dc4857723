#include "coordinator/ha/leader_election.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace baton::coordinator {

LeaderElection::LeaderElection(std::shared_ptr<EtcdKv> kv, LeaderElectionOptions options,
                               Clock* clock)
    : kv_(std::move(kv)), options_(std::move(options)), clock_(clock) {}

LeaderElection::~LeaderElection() { Stop(); }

std::string LeaderElection::leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

bool LeaderElection::WaitUntil(absl::Time deadline, const bool* stop) {
  absl::MutexLock lock(&mu_);
  clock_->AwaitWithDeadline(&mu_, absl::Condition(stop), deadline);
  return !*stop;
}

absl::StatusOr<EtcdFence> LeaderElection::TryOnce() {
  absl::StatusOr<EtcdKeyValue> held = kv_->Get(options_.key);
  if (held.ok()) {
    absl::MutexLock lock(&mu_);
    leader_ = held->value;
    return absl::AlreadyExistsError(absl::StrCat(options_.key, " is held by ", held->value));
  }
  if (!absl::IsNotFound(held.status())) return held.status();
  const absl::Time sent = clock_->Now();
  absl::StatusOr<int64_t> lease = kv_->GrantLease(options_.timing.ttl);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<EtcdFence> fence = kv_->CreateIfAbsent(options_.key, options_.self, *lease);
  if (!fence.ok()) {
    kv_->RevokeLease(*lease).IgnoreError();  // best effort: it expires anyway
    return fence.status();
  }
  absl::MutexLock lock(&mu_);
  leader_ = options_.self;
  lease_ = *lease;
  last_renewal_sent_ = sent;
  return fence;
}

absl::StatusOr<EtcdFence> LeaderElection::Campaign() {
  absl::Status last_error;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (campaign_stopped_) return absl::CancelledError("the election was stopped");
    }
    absl::StatusOr<EtcdFence> won = TryOnce();
    if (won.ok()) {
      BATON_LOG(INFO) << "leading: " << options_.key << " = " << options_.self
                      << " (created at revision " << won->create_revision << ")";
      return won;
    }
    if (!absl::IsAlreadyExists(won.status())) ++etcd_errors_;
    if (!absl::IsAlreadyExists(won.status()) && won.status().code() != last_error.code()) {
      BATON_LOG(WARNING) << "election: " << won.status() << "; retrying every "
                         << absl::FormatDuration(options_.poll);
    }
    last_error = absl::IsAlreadyExists(won.status()) ? absl::OkStatus() : won.status();
    if (!WaitUntil(clock_->Now() + options_.poll, &campaign_stopped_)) {
      return absl::CancelledError("the election was stopped");
    }
  }
}

void LeaderElection::KeepLeading(std::function<void(const absl::Status&)> on_lost) {
  renewer_ = std::thread([this, on_lost = std::move(on_lost)] { RenewLoop(on_lost); });
}

void LeaderElection::RenewLoop(std::function<void(const absl::Status&)> on_lost) {
  const ElectionOptions& timing = options_.timing;
  absl::Time next = clock_->Now() + timing.renew_every;
  for (;;) {
    absl::Time last_sent;
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu_);
      last_sent = last_renewal_sent_;
      lease = lease_;
    }
    const absl::Time lead_until = LeadUntil(last_sent, timing);
    // Wake for the next renewal, or when leadership runs out, whichever is first.
    if (!WaitUntil(std::min(next, lead_until), &stopped_)) return;
    const absl::Time now = clock_->Now();
    if (MustStepDown(last_sent, now, timing)) {
      on_lost(absl::UnavailableError(absl::StrCat(
          "lost leadership: no lease renewal answered by etcd since ",
          absl::FormatDuration(now - last_sent), " ago (ttl ", absl::FormatDuration(timing.ttl),
          " less ", absl::FormatDuration(timing.safety), " safety); a standby may lead now")));
      return;
    }
    if (now < next) continue;
    next = now + timing.renew_every;
    absl::StatusOr<absl::Duration> renewed = kv_->KeepAlive(lease, lead_until);
    if (renewed.ok()) {
      absl::MutexLock lock(&mu_);
      last_renewal_sent_ = now;
    } else if (absl::IsNotFound(renewed.status())) {
      on_lost(
          absl::UnavailableError(absl::StrCat("lost leadership: ", renewed.status().message())));
      return;
    } else {
      ++etcd_errors_;
      BATON_LOG(WARNING) << "election: renewal failed: " << renewed.status();
    }
  }
}

void LeaderElection::StopCampaign() {
  absl::MutexLock lock(&mu_);
  campaign_stopped_ = true;
}

void LeaderElection::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    campaign_stopped_ = true;
  }
  if (renewer_.joinable()) renewer_.join();
}

absl::Status LeaderElection::Resign() {
  Stop();
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    lease = std::exchange(lease_, 0);
  }
  if (lease == 0) return absl::OkStatus();
  absl::Status s = kv_->RevokeLease(lease);
  if (s.ok()) BATON_LOG(INFO) << "resigned: " << options_.key << " released";
  return s;
}

}  // namespace baton::coordinator
