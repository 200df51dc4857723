#pragma once

// A small synchronous client of etcd's KV and Lease APIs (@etcd_api), for the coordinator's
// etcd store and its leader election: every call has a deadline and answers absl::Status
// naming the call and the endpoint, and writes can be fenced on a leader key, so that a
// replica that lost its leadership writes nothing (see docs/ARCHITECTURE.md, "Coordinator
// replicas on etcd").
//
// Errors: UNAVAILABLE / DEADLINE_EXCEEDED when etcd cannot be reached or answer in time
// (quorum lost, partition), RESOURCE_EXHAUSTED when a request is over etcd's size limit or
// its database quota, FAILED_PRECONDITION when a fenced write's fence no longer holds, and
// the gRPC code otherwise.
//
// Threading: thread-safe (gRPC stubs are); calls block up to `call_timeout`.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "etcd/api/etcdserverpb/rpc.grpc.pb.h"

namespace baton::coordinator {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// Leadership as etcd records it: the leader key and the revision that created it. A write
// fenced on it applies only while that key still exists with that create revision.
struct EtcdFence {
  std::string key;
  int64_t create_revision = 0;
};

// One write of a Commit: a put (`value` set) or a delete.
struct EtcdWrite {
  std::string key;
  std::optional<std::string> value;  // nullopt: delete `key`
};

class EtcdKv {
 public:
  struct Options {
    absl::Duration call_timeout = absl::Seconds(5);
  };

  // `endpoint` ("host:port") is only named in errors; `channel` dials it.
  EtcdKv(std::shared_ptr<grpc::Channel> channel, std::string endpoint, Options options);

  // The key; NOT_FOUND if it does not exist.
  absl::StatusOr<EtcdKeyValue> Get(const std::string& key);
  // The keys starting with `prefix`, in key order, at most `limit` (> 0).
  absl::StatusOr<std::vector<EtcdKeyValue>> List(const std::string& prefix, int64_t limit);
  // Applies `writes` in one transaction if `fence` holds; FAILED_PRECONDITION (nothing
  // written) if the fence's key is gone or was created again since. Returns the revision
  // the transaction committed at.
  absl::StatusOr<int64_t> Commit(const EtcdFence& fence, const std::vector<EtcdWrite>& writes);
  // Creates `key` = `value`, bound to `lease` (0: none), unless it exists. Returns the
  // fence of the new key; ALREADY_EXISTS naming the holder's value if it existed.
  absl::StatusOr<EtcdFence> CreateIfAbsent(const std::string& key, const std::string& value,
                                           int64_t lease);
  // A lease of `ttl` (at least 1 s; etcd counts whole seconds): its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Revokes the lease: every key bound to it is deleted. NOT_FOUND if it already expired.
  absl::Status RevokeLease(int64_t lease);

 private:
  // A context with the call deadline.
  std::unique_ptr<grpc::ClientContext> Context() const;
  // `status` of `call` as absl::Status naming the call and the endpoint.
  absl::Status Error(const char* call, const grpc::Status& status) const;

  const std::string endpoint_;
  const Options options_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
};

}  // namespace baton::coordinator
