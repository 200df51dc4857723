#include "coordinator/ha/etcd_target.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace baton::coordinator {
namespace {

constexpr char kForm[] =
    "allowed: 'sqlite' or 'etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"
    "[?max_txn_ops=N&max_request_bytes=N]'";

absl::Status Bad(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--store=", flag, ": ", what, "; ", kForm));
}

// HOST:PORT with a port in 1..65535 ([V6]:PORT for IPv6).
bool IsEndpoint(absl::string_view e) {
  const size_t colon = e.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  int port = 0;
  return absl::SimpleAtoi(e.substr(colon + 1), &port) && port >= 1 && port <= 65535;
}

}  // namespace

absl::StatusOr<std::optional<EtcdTarget>> ParseStoreFlag(absl::string_view flag) {
  if (flag == "sqlite") return std::nullopt;
  absl::string_view rest = flag;
  if (!absl::ConsumePrefix(&rest, "etcd://")) return Bad(flag, "unknown store");
  EtcdTarget target;
  absl::string_view query;
  if (const size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  absl::string_view prefix = "baton";
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    prefix = absl::StripSuffix(rest.substr(slash + 1), "/");
    rest = rest.substr(0, slash);
    if (prefix.empty() || absl::StrContains(prefix, "//")) {
      return Bad(flag, absl::StrCat("prefix '", prefix, "' is empty or has an empty part"));
    }
  }
  target.store.prefix = absl::StrCat("/", prefix, "/");
  for (absl::string_view e : absl::StrSplit(rest, ',')) {
    if (!IsEndpoint(e)) {
      return Bad(flag, absl::StrCat("endpoint '", e, "' is not HOST:PORT with a port 1..65535"));
    }
    target.endpoints.emplace_back(e);
  }
  for (absl::string_view param : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(param, '=');
    int64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) {
      return Bad(flag, absl::StrCat("'", param, "' is not NAME=NUMBER"));
    }
    if (kv.first == "max_txn_ops" && value >= 2) {
      target.store.max_txn_ops = value;
    } else if (kv.first == "max_request_bytes" && value >= 64 << 10) {
      target.store.max_request_bytes = value;
    } else {
      return Bad(flag, absl::StrCat("'", param,
                                    "': allowed are max_txn_ops (>= 2) and max_request_bytes "
                                    "(>= 65536)"));
    }
  }
  return target;
}

}  // namespace baton::coordinator
