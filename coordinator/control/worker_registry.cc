#include "coordinator/control/worker_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
WorkerRegistry::WorkerRegistry(const Clock* clock, LeaseOptions lease)
    : clock_(clock), lease_(lease), start_(clock->Now()) {}

bool WorkerRegistry::Apply(Entry& e, WorkerEvent event) {
  const absl::StatusOr<WorkerState> next = NextWorkerState(e.state, event);
  if (!next.ok()) {
    ++refused_events_[std::string(WorkerEventName(event))];
    return false;
  }
  e.state = *next;
  e.info.set_state(WorkerStateToProto(e.state));
  return true;
}

void WorkerRegistry::Lose(Entry& e, const absl::Status& status) {
  Apply(e, WorkerEvent::kLose);
  if (e.channel != nullptr) {
    e.channel->Close(status);
    e.channel.reset();
  }
}

absl::Status WorkerRegistry::Admit(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || clock_->Now() >= it->second.revoked_until) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("worker ", worker_id, " may not register before ",
                   absl::FormatTime(it->second.revoked_until), ": its lease was revoked (",
                   it->second.revoked_why, ") and must run out first, which stops its processes"));
}

uint64_t WorkerRegistry::Connect(const baton::v1::Register& reg, const std::string& host,
                                 std::shared_ptr<WorkerChannel> channel) {
  Entry& e = workers_[reg.worker_id()];
  if (e.channel != nullptr) {
    e.channel->Close(absl::AbortedError("superseded by a newer connection of this worker"));
  }
  e.info.set_id(reg.worker_id());
  e.info.set_host(host);
  e.info.set_hostname(reg.hostname());
  *e.info.mutable_resources() = reg.resources();
  Apply(e, reg.draining() ? WorkerEvent::kConnectDraining : WorkerEvent::kConnect);
  e.protocol_version = reg.protocol_version();
  e.leased = reg.protocol_version() >= kLeaseProtocolVersion;
  e.probe_port = reg.probe_port();
  e.channel = std::move(channel);
  e.session = next_session_++;
  e.last_heartbeat = clock_->Now();
  e.connected = e.last_heartbeat;
  *e.info.mutable_last_heartbeat_time() = ToProto(e.last_heartbeat);
  return e.session;
}

bool WorkerRegistry::Disconnect(const std::string& worker_id, uint64_t session) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.session != session ||
      !Apply(it->second, WorkerEvent::kLose)) {
    return false;
  }
  it->second.channel.reset();
  it->second.info.set_stream_losses(it->second.info.stream_losses() + 1);
  return true;
}

bool WorkerRegistry::IsCurrent(const std::string& worker_id, uint64_t session) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.session == session &&
         coordinator::IsConnected(it->second.state);
}

bool WorkerRegistry::Heartbeat(const std::string& worker_id, uint64_t session) {
  if (!IsCurrent(worker_id, session)) return false;
  Entry& e = workers_[worker_id];
  e.last_heartbeat = clock_->Now();
  *e.info.mutable_last_heartbeat_time() = ToProto(e.last_heartbeat);
  return e.leased;
}

std::vector<std::string> WorkerRegistry::ExpireLeases() {
  std::vector<std::string> lost;
  const absl::Time now = clock_->Now();
  for (auto& [id, e] : workers_) {
    if (!coordinator::IsConnected(e.state)) continue;
    if (!LeaseExpiredAt(e.last_heartbeat, now, lease_)) continue;
    const absl::Duration silent = now - e.last_heartbeat;
    e.info.set_lease_expirations(e.info.lease_expirations() + 1);
    Lose(e, absl::UnavailableError(absl::StrCat("no heartbeat for ", absl::FormatDuration(silent),
                                                ": the worker lease expired")));
    lost.push_back(id);
  }
  return lost;
}

void WorkerRegistry::Revoke(const std::string& worker_id, const std::string& why) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || !it->second.leased || !coordinator::IsConnected(it->second.state))
    return;
  Entry& e = it->second;
  e.revoked_until = LeaseCertainlyExpired(e.last_heartbeat, lease_);
  e.revoked_why = why;
  e.info.set_lease_revocations(e.info.lease_revocations() + 1);
  Lose(e, absl::UnavailableError(absl::StrCat("lease revoked: ", why)));
}

absl::Time WorkerRegistry::LeaseExpiry(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  LeaseFacts facts;
  if (it != workers_.end()) {
    facts = {/*known=*/true, coordinator::IsConnected(it->second.state), it->second.leased,
             it->second.last_heartbeat};
  }
  return ProcessesDeadAfter(facts, start_, lease_);
}

bool WorkerRegistry::ProcessesStopped(const std::string& worker_id) const {
  return clock_->Now() >= LeaseExpiry(worker_id);
}

bool WorkerRegistry::Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.channel == nullptr) return false;
  return it->second.channel->Send(msg);
}

bool WorkerRegistry::IsReady(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.state == WorkerState::kReady;
}

bool WorkerRegistry::IsConnected(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && coordinator::IsConnected(it->second.state);
}

bool WorkerRegistry::SetDraining(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && Apply(it->second, WorkerEvent::kDrain);
}

uint32_t WorkerRegistry::ProtocolVersion(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.protocol_version;
}

bool WorkerRegistry::HasLease(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.leased;
}

absl::Time WorkerRegistry::ConnectedSince(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? absl::InfinitePast() : it->second.connected;
}

absl::Time WorkerRegistry::LastHeartbeat(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? absl::InfinitePast() : it->second.last_heartbeat;
}

std::string WorkerRegistry::Host(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? std::string() : it->second.info.host();
}

int WorkerRegistry::ProbePort(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.probe_port;
}

int WorkerRegistry::Slots(const std::string& worker_id) const {
  return IsReady(worker_id) ? workers_.at(worker_id).info.resources().slots() : 0;
}

bool WorkerRegistry::HasGpus(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.info.resources().gpus_size() > 0;
}

std::vector<std::string> WorkerRegistry::ReadyWorkers() const {
  std::vector<std::string> ids;
  for (const auto& [id, e] : workers_) {
    if (e.state == WorkerState::kReady) ids.push_back(id);
  }
  return ids;
}

void WorkerRegistry::MarkUnhealthy(const std::string& worker_id, const std::string& reason,
                                   absl::Time until) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  it->second.unhealthy_until = until;
  it->second.unhealthy_reason = reason;
}

bool WorkerRegistry::IsUnhealthy(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && clock_->Now() < it->second.unhealthy_until;
}

void WorkerRegistry::SetCordon(const baton::v1::WorkerCordon& cordon) {
  cordons_[cordon.worker_id()] = cordon;
}

void WorkerRegistry::ClearCordon(const std::string& worker_id) { cordons_.erase(worker_id); }

std::vector<baton::v1::Worker> WorkerRegistry::List() const {
  std::vector<baton::v1::Worker> out;
  const absl::Time now = clock_->Now();
  for (const auto& [id, e] : workers_) {
    out.push_back(e.info);
    if (now < e.unhealthy_until) {
      out.back().set_unhealthy_reason(e.unhealthy_reason);
      *out.back().mutable_unhealthy_until() = ToProto(e.unhealthy_until);
    }
    if (auto c = cordons_.find(id); c != cordons_.end()) *out.back().mutable_cordon() = c->second;
    if (e.leased) {
      *out.back().mutable_lease_renew_time() = ToProto(e.last_heartbeat);
      *out.back().mutable_lease() = ToProto(lease_.lease);
    }
  }
  return out;
}

}  // namespace baton::coordinator
