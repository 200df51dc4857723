#include "coordinator/worker_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"

namespace baton::coordinator {
namespace {

bool Connected(const baton::v1::Worker& w) {
  return w.state() == baton::v1::WORKER_STATE_READY ||
         w.state() == baton::v1::WORKER_STATE_DRAINING;
}

}  // namespace

WorkerRegistry::WorkerRegistry(const Clock* clock) : clock_(clock) {}

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
  e.info.set_state(reg.draining() ? baton::v1::WORKER_STATE_DRAINING
                                  : baton::v1::WORKER_STATE_READY);
  e.protocol_version = reg.protocol_version();
  e.channel = std::move(channel);
  e.session = next_session_++;
  e.last_heartbeat = clock_->Now();
  *e.info.mutable_last_heartbeat_time() = ToProto(e.last_heartbeat);
  return e.session;
}

bool WorkerRegistry::Disconnect(const std::string& worker_id, uint64_t session) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.session != session || !Connected(it->second.info)) {
    return false;
  }
  it->second.info.set_state(baton::v1::WORKER_STATE_LOST);
  it->second.channel.reset();
  return true;
}

bool WorkerRegistry::IsCurrent(const std::string& worker_id, uint64_t session) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.session == session && Connected(it->second.info);
}

void WorkerRegistry::Heartbeat(const std::string& worker_id, uint64_t session) {
  if (!IsCurrent(worker_id, session)) return;
  Entry& e = workers_[worker_id];
  e.last_heartbeat = clock_->Now();
  *e.info.mutable_last_heartbeat_time() = ToProto(e.last_heartbeat);
}

std::vector<std::string> WorkerRegistry::ExpireHeartbeats(absl::Duration timeout) {
  std::vector<std::string> lost;
  const absl::Time now = clock_->Now();
  for (auto& [id, e] : workers_) {
    if (!Connected(e.info)) continue;
    if (now - e.last_heartbeat <= timeout) continue;
    e.info.set_state(baton::v1::WORKER_STATE_LOST);
    if (e.channel != nullptr) {
      e.channel->Close(absl::UnavailableError(
          absl::StrCat("no heartbeat for ", absl::FormatDuration(now - e.last_heartbeat))));
      e.channel.reset();
    }
    lost.push_back(id);
  }
  return lost;
}

bool WorkerRegistry::Send(const std::string& worker_id,
                          const baton::v1::CoordinatorMessage& msg) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.channel == nullptr) return false;
  return it->second.channel->Send(msg);
}

bool WorkerRegistry::IsReady(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.info.state() == baton::v1::WORKER_STATE_READY;
}

bool WorkerRegistry::IsConnected(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && Connected(it->second.info);
}

bool WorkerRegistry::SetDraining(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.info.state() != baton::v1::WORKER_STATE_READY) {
    return false;
  }
  it->second.info.set_state(baton::v1::WORKER_STATE_DRAINING);
  return true;
}

uint32_t WorkerRegistry::ProtocolVersion(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.protocol_version;
}

absl::Time WorkerRegistry::LastHeartbeat(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? absl::InfinitePast() : it->second.last_heartbeat;
}

std::string WorkerRegistry::Host(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? std::string() : it->second.info.host();
}

int WorkerRegistry::Slots(const std::string& worker_id) const {
  return IsReady(worker_id) ? workers_.at(worker_id).info.resources().slots() : 0;
}

std::vector<std::string> WorkerRegistry::ReadyWorkers() const {
  std::vector<std::string> ids;
  for (const auto& [id, e] : workers_) {
    if (e.info.state() == baton::v1::WORKER_STATE_READY) ids.push_back(id);
  }
  return ids;
}

std::vector<baton::v1::Worker> WorkerRegistry::List() const {
  std::vector<baton::v1::Worker> out;
  for (const auto& [id, e] : workers_) out.push_back(e.info);
  return out;
}

}  // namespace baton::coordinator
