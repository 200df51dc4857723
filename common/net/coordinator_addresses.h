#pragma once

// The addresses of a coordinator's replicas and how a client finds the one that leads
// (docs/ARCHITECTURE.md, "Clients and workers follow the leader"). The protocol, as every
// replica speaks it:
// - the leader serves every call, and its grpc.health.v1 Check answers SERVING for
//   kJobServiceName and kWorkerServiceName;
// - a standby answers every baton.v1.* call (unary or streaming) with UNAVAILABLE, a message
//   naming the leader, and the leader's advertised HOST:PORT in the trailing metadata
//   kLeaderMetadataKey (absent while no leader is known); its Check answers NOT_SERVING;
// - between leaders an address may also refuse connections (a replica restarting).
// With a single address nothing of this applies: callers dial it as they always did.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace baton {

// Trailing metadata of a standby's refusal: the leader's advertised HOST:PORT.
inline constexpr char kLeaderMetadataKey[] = "baton-leader";
// The health service names a leader reports SERVING (and a standby NOT_SERVING).
inline constexpr char kJobServiceName[] = "baton.v1.JobService";
inline constexpr char kWorkerServiceName[] = "baton.v1.WorkerService";

// A comma-separated list of coordinator addresses, in order: each HOST:PORT (HOST a name,
// an IPv4 address or a bracketed IPv6 one, "[::1]:7070"; an optional "dns:///" prefix) or
// "unix:PATH"; whitespace around entries is ignored. One address is a valid list. Errors are
// INVALID_ARGUMENT naming the entry and what is allowed: an empty list or entry, a missing
// host or port, a port outside 1..65535, an unbracketed IPv6 address, a duplicate.
absl::StatusOr<std::vector<std::string>> ParseCoordinatorAddresses(absl::string_view list);

// The leader a standby named in a finished call's trailing metadata; nullopt if there is
// none (a leader's answer, a standby that knows no leader, a call that reached no server).
// `context` must belong to a call whose final status was received.
std::optional<std::string> LeaderHint(const grpc::ClientContext& context);

// Whether `status` is LeaderFinder::Find's "no coordinator leads" with at least one replica
// answering as a standby: an election is under way (a leader died or resigned) and a new
// leader is due within about the election ttl, so a caller retries soon rather than backing
// off as from replicas that are all down.
bool ElectionUnderway(const absl::Status& status);
inline constexpr char kElectionPayload[] = "type.baton.dev/election-underway";

// Makes the channel to one address (credentials, interceptors and arguments are the
// caller's). Called at most once per address by a LeaderFinder.
using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;

// Finds which of a coordinator's replicas leads by asking each one's grpc.health.v1 Check
// for a service, and keeps one channel per address (made on first use, reused by later
// probes and by the caller's calls; see ChannelTo). Thread-safe; no lock is held across a
// probe.
class LeaderFinder {
 public:
  struct Options {
    // Non-empty, no duplicates (ParseCoordinatorAddresses).
    std::vector<std::string> addresses;
    // The health service a leader reports SERVING: kJobServiceName or kWorkerServiceName.
    std::string service;
    // Deadline of each probe (gRPC's deadlines are wall-clock time). A probe of a dead host
    // takes this long; one of a refused port fails at once.
    absl::Duration probe_timeout = absl::Seconds(2);
  };

  LeaderFinder(Options options, ChannelFactory channel_factory);

  // The address whose Check answers SERVING: `preferred` first when it is in the list (the
  // last leader, or a standby's hint), then the others in list order, stopping at the first
  // SERVING one. With a single address, that address at once, with no probe (a lone
  // coordinator behaves as it always did). UNAVAILABLE if none answered SERVING, listing
  // each address with its answer (NOT_SERVING, unreachable and why, no answer within the
  // probe timeout, ...).
  absl::StatusOr<std::string> Find(absl::string_view preferred = "");

  // The channel to `address` (any address, usually one of addresses()): the factory's,
  // made on the first request and kept, except that one in TRANSIENT_FAILURE is replaced
  // by a new one. (Such a channel fails every call at once until its own reconnect backoff
  // lets it try again; a new channel tries to connect for the first call, as a caller that
  // paces its attempts expects.)
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);

  const std::vector<std::string>& addresses() const { return options_.addresses; }

 private:
  const Options options_;
  const ChannelFactory channel_factory_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton
