#include "bench/control_plane/sim_reconnect.h"

#include <algorithm>
#include <utility>

#include "common/net/coordinator_addresses.h"
#include "common/protocol_version.h"

namespace baton::bench {

SimBackoff::SimBackoff(const ReconnectOptions& options)
    : options_(options), next_(options.backoff_initial) {}

absl::Duration SimBackoff::Next() {
  const absl::Duration base = std::min(next_, options_.backoff_max);
  next_ = std::min(base * options_.backoff_multiplier, options_.backoff_max);
  const double jitter = std::clamp(options_.backoff_jitter, 0.0, 1.0);
  if (jitter == 0) return base;
  return base * (1.0 - jitter * absl::Uniform<double>(rng_, 0.0, 1.0));
}

absl::Duration RetryDelay(const absl::Status& status, const ReconnectOptions& options,
                          SimBackoff* backoff) {
  return ElectionUnderway(status) ? options.election_retry : backoff->Next();
}

baton::v1::WorkerMessage SimRegister(const std::string& id, int slots,
                                     const std::vector<baton::v1::AssignmentStatus>& running) {
  baton::v1::WorkerMessage hello;
  baton::v1::Register* reg = hello.mutable_register_();
  reg->set_worker_id(id);
  reg->set_hostname(id);
  reg->set_advertise_host("127.0.0.1");
  reg->mutable_resources()->set_slots(slots);
  reg->mutable_resources()->set_cpu_cores(slots);
  reg->set_protocol_version(kProtocolVersion);
  reg->set_probe_port(0);  // none: peers skip probing this worker (StartAssignment.peers)
  for (const baton::v1::AssignmentStatus& a : running) {
    baton::v1::AssignmentStatus* listed = reg->add_assignments();
    *listed = a;
    for (baton::v1::RankInfo& r : *listed->mutable_ranks()) r.clear_exit();
  }
  return hello;
}

SimChannels::SimChannels(int per_channel, const ReconnectOptions& options)
    : per_channel_(std::max(1, per_channel)), options_(options) {}

std::shared_ptr<grpc::Channel> SimChannels::MakeChannel(const std::string& address) {
  int64_t tag;
  {
    absl::MutexLock lock(&mu_);
    tag = made_++;
  }
  grpc::ChannelArguments args;
  // A connection of its own per channel: no sharing of subchannels between channels.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("baton.sim_channel", static_cast<int>(tag));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options_.backoff_initial)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options_.backoff_max)));
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::shared_ptr<baton::v1::WorkerService::Stub> SimChannels::StubFor(const std::string& address,
                                                                     int worker_index) {
  const int index = worker_index / per_channel_;
  {
    absl::MutexLock lock(&mu_);
    const auto it = groups_[address].find(index);
    if (it != groups_[address].end() &&
        it->second.channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
      return it->second.stub;
    }
  }
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  auto stub = std::shared_ptr<baton::v1::WorkerService::Stub>(
      baton::v1::WorkerService::NewStub(channel).release());
  absl::MutexLock lock(&mu_);
  Group& group = groups_[address][index];
  // Another worker of the group may have replaced it meanwhile: keep the healthy one.
  if (group.channel != nullptr &&
      group.channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return group.stub;
  }
  group.channel = std::move(channel);
  group.stub = stub;
  return stub;
}

}  // namespace baton::bench
