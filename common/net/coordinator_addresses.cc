#include "common/net/coordinator_addresses.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/health/health_check.h"

namespace baton {
namespace {

constexpr char kAllowed[] =
    "allowed: HOST:PORT, [IPV6]:PORT or unix:PATH with PORT in 1..65535; several separated "
    "by commas, each once";

absl::Status BadEntry(absl::string_view entry, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("coordinator address '", entry, "' ", problem, " (", kAllowed, ")"));
}

// Checks one trimmed, non-empty entry.
absl::Status CheckEntry(absl::string_view entry) {
  if (absl::StartsWith(entry, "unix:") || absl::StartsWith(entry, "unix-abstract:")) {
    if (entry.substr(entry.find(':') + 1).empty()) return BadEntry(entry, "has no path");
    return absl::OkStatus();
  }
  absl::string_view rest = entry;
  absl::ConsumePrefix(&rest, "dns:///");
  absl::string_view host, port;
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return BadEntry(entry, "has an unclosed '['");
    host = rest.substr(1, close - 1);
    absl::string_view after = rest.substr(close + 1);
    if (!absl::ConsumePrefix(&after, ":")) return BadEntry(entry, "has no port");
    port = after;
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) return BadEntry(entry, "has no port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return BadEntry(entry, "is an IPv6 address without brackets (write [::1]:7070)");
    }
  }
  if (host.empty()) return BadEntry(entry, "has no host");
  if (port.empty()) return BadEntry(entry, "has no port");
  int number = 0;
  if (!std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return BadEntry(entry, absl::StrCat("has port '", port, "', not one in 1..65535"));
  }
  return absl::OkStatus();
}

// What a probe's answer says, for the error listing every address.
std::string DescribeAnswer(const HealthAnswer& answer, absl::Duration timeout) {
  const grpc::Status& s = answer.status;
  if (s.ok()) return ServingStatusName(answer.serving);
  std::string message = s.error_message().substr(0, s.error_message().find('\n'));
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::StrCat("no answer within ", absl::FormatDuration(timeout));
    case grpc::StatusCode::UNAVAILABLE: {
      // gRPC's connection failures end with the cause ("...: Connection refused").
      const size_t sep = message.rfind(": ");
      if (sep != std::string::npos) message = message.substr(sep + 2);
      return absl::StrCat("unreachable (", message.empty() ? "UNAVAILABLE" : message, ")");
    }
    case grpc::StatusCode::NOT_FOUND:
      return "does not report this service (NOT_FOUND)";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "serves no grpc.health.v1 (UNIMPLEMENTED)";
    default:
      return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
                          message.empty() ? "" : ": ", message);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCoordinatorAddresses(absl::string_view list) {
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no coordinator address given (", kAllowed, ")"));
  }
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  for (absl::string_view piece : absl::StrSplit(list, ',')) {
    const absl::string_view entry = absl::StripAsciiWhitespace(piece);
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("coordinator address list '", list,
                                                     "' has an empty entry (", kAllowed, ")"));
    }
    if (absl::Status s = CheckEntry(entry); !s.ok()) return s;
    if (!seen.insert(std::string(entry)).second) return BadEntry(entry, "is listed twice");
    addresses.emplace_back(entry);
  }
  return addresses;
}

std::optional<std::string> LeaderHint(const grpc::ClientContext& context) {
  const std::multimap<grpc::string_ref, grpc::string_ref>& trailers =
      context.GetServerTrailingMetadata();
  const auto it = trailers.find(kLeaderMetadataKey);
  if (it == trailers.end() || it->second.empty()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

LeaderFinder::LeaderFinder(Options options, ChannelFactory channel_factory)
    : options_(std::move(options)), channel_factory_(std::move(channel_factory)) {}

std::shared_ptr<grpc::Channel> LeaderFinder::ChannelTo(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr ||
      channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    channel = channel_factory_(address);
  }
  return channel;
}

absl::StatusOr<std::string> LeaderFinder::Find(absl::string_view preferred) {
  const std::vector<std::string>& all = options_.addresses;
  if (all.size() == 1) return all.front();
  std::vector<std::string> order;
  if (std::find(all.begin(), all.end(), preferred) != all.end()) order.emplace_back(preferred);
  for (const std::string& address : all) {
    if (address != preferred) order.push_back(address);
  }
  std::vector<std::string> answers;
  bool standby_answered = false;
  for (const std::string& address : order) {
    const HealthAnswer answer = CheckHealth(
        ChannelTo(address), options_.service,
        std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.probe_timeout));
    if (answer.status.ok() && answer.serving == ServingStatus::kServing) return address;
    standby_answered |= answer.status.ok() && answer.serving == ServingStatus::kNotServing;
    answers.push_back(absl::StrCat(address, ": ", DescribeAnswer(answer, options_.probe_timeout)));
  }
  absl::Status none = absl::UnavailableError(
      absl::StrCat("no coordinator leads (none of ", all.size(), " addresses reports ",
                   options_.service, " SERVING): ", absl::StrJoin(answers, "; ")));
  if (standby_answered) none.SetPayload(kElectionPayload, absl::Cord("standby answered"));
  return none;
}

bool ElectionUnderway(const absl::Status& status) {
  return status.GetPayload(kElectionPayload).has_value();
}

}  // namespace baton
