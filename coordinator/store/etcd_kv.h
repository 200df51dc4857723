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
// Several endpoints (the members of one cluster): a call that finds its member unreachable
// (UNAVAILABLE) or gets no answer within its share of the deadline (call_timeout / members,
// at least 100 ms: a member that hangs) is retried on the next member while the deadline
// lasts. Retrying a write is safe: a Commit is puts and deletes of fixed keys and values
// under a fence, so applying it twice leaves the same state.
//
// Threading: thread-safe (gRPC stubs are; the current member is an atomic); calls block up
// to `call_timeout`.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
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

// One write of a Commit: a put (`value` set) or a delete (of `key`, or with `prefix`, of
// every key starting with it).
struct EtcdWrite {
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
  bool prefix = false;               // a delete of every key starting with `key`
};

// A page of a range read and the revision it was read at.
struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  bool more = false;  // keys beyond the limit remain
  int64_t revision = 0;
};

// One member of the cluster: its name for errors ("host:port") and a channel to it.
struct EtcdEndpoint {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
};

class EtcdKv {
 public:
  struct Options {
    absl::Duration call_timeout = absl::Seconds(5);
  };

  // `endpoint` ("host:port") is only named in errors; `channel` dials it.
  EtcdKv(std::shared_ptr<grpc::Channel> channel, std::string endpoint, Options options);
  // The members of one cluster (at least one).
  EtcdKv(std::vector<EtcdEndpoint> endpoints, Options options);

  // The key; NOT_FOUND if it does not exist.
  absl::StatusOr<EtcdKeyValue> Get(const std::string& key);
  // The keys in [from, end of `prefix`'s range), in key order (descending with `reverse`:
  // then from the end of the range down), at most `limit` (0: all), read at `revision`
  // (0: the newest). Pages of a larger listing pass the first page's revision, so that
  // together they show one moment.
  absl::StatusOr<EtcdRange> Range(const std::string& from, const std::string& prefix, int64_t limit,
                                  int64_t revision = 0, bool reverse = false);
  // Every key starting with `prefix`, in key order, read in pages of `page` keys at one
  // revision.
  absl::StatusOr<std::vector<EtcdKeyValue>> ListAll(const std::string& prefix, int64_t page = 1000);
  // Applies `writes` in one transaction if `fence` holds; FAILED_PRECONDITION (nothing
  // written) if the fence's key is gone or was created again since. Returns the revision
  // the transaction committed at.
  absl::StatusOr<int64_t> Commit(const EtcdFence& fence, const std::vector<EtcdWrite>& writes);
  // Creates `key` = `value`, bound to `lease` (0: none), unless it exists. Returns the
  // fence of the new key; ALREADY_EXISTS naming the holder's value if it existed. A key
  // holding this very value and lease counts as created (a retried create that had been
  // applied), so `value` should name the caller uniquely.
  absl::StatusOr<EtcdFence> CreateIfAbsent(const std::string& key, const std::string& value,
                                           int64_t lease);
  // A lease of `ttl` (at least 1 s; etcd counts whole seconds): its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Revokes the lease: every key bound to it is deleted. NOT_FOUND if it already expired.
  absl::Status RevokeLease(int64_t lease);
  // Renews the lease once: its remaining ttl as etcd granted it. NOT_FOUND if it expired.
  // Gives up at `deadline` if that comes before the call timeout.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease,
                                           absl::Time deadline = absl::InfiniteFuture());

  // The member calls go to now (for logs).
  const std::string& current_endpoint() const;

 private:
  struct Member {
    std::string name;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };

  // Runs `call(member, context)` on the current member, moving on to the next member after
  // an UNAVAILABLE answer while the deadline lasts. The last answer as absl::Status naming
  // `name` and the member.
  absl::Status Call(const char* name,
                    const std::function<grpc::Status(Member&, grpc::ClientContext*)>& call,
                    absl::Time deadline = absl::InfiniteFuture());

  const Options options_;
  std::vector<Member> members_;
  std::atomic<size_t> current_{0};
};

}  // namespace baton::coordinator
