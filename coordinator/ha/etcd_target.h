#pragma once

// Where the coordinator's state lives, from --store: "sqlite" (the default: one file in
// --state_dir) or etcd, as
//
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?max_txn_ops=N&max_request_bytes=N]
//
// e.g. etcd://etcd-0.etcd:2379,etcd-1.etcd:2379,etcd-2.etcd:2379/baton. PREFIX (default
// "baton") puts every key under "/PREFIX/", so clusters can share an etcd. The limits are
// etcd's --max-txn-ops and --max-request-bytes (default: etcd's defaults), which the
// store keeps every transaction within.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/etcd_store.h"

namespace baton::coordinator {

struct EtcdTarget {
  std::vector<std::string> endpoints;  // HOST:PORT, at least one
  EtcdStoreOptions store;              // prefix "/PREFIX/" and the limits
};

// nullopt for "sqlite"; the etcd target for an etcd:// URL; INVALID_ARGUMENT naming the
// part that is wrong and what is allowed otherwise.
absl::StatusOr<std::optional<EtcdTarget>> ParseStoreFlag(absl::string_view flag);

}  // namespace baton::coordinator
