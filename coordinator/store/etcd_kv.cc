#include "coordinator/store/etcd_kv.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace baton::coordinator {
namespace {

EtcdKeyValue FromProto(const mvccpb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

// The end of the range of keys starting with `prefix`: the prefix with its last byte below
// 0xff incremented and what follows dropped; "\0" (every key) if there is none.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    const unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// gRPC's code (absl's codes have the same numbers), except that etcd answers a request
// over its size limit ("request is too large") with INVALID_ARGUMENT: RESOURCE_EXHAUSTED.
absl::StatusCode CodeOf(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
      status.error_message().find("too large") != std::string::npos) {
    return absl::StatusCode::kResourceExhausted;
  }
  return static_cast<absl::StatusCode>(status.error_code());
}

// The least time one attempt at one member gets.
constexpr absl::Duration kMinAttemptTimeout = absl::Milliseconds(100);

}  // namespace

EtcdKv::EtcdKv(std::shared_ptr<grpc::Channel> channel, std::string endpoint, Options options)
    : EtcdKv(std::vector<EtcdEndpoint>{{std::move(endpoint), std::move(channel)}}, options) {}

EtcdKv::EtcdKv(std::vector<EtcdEndpoint> endpoints, Options options) : options_(options) {
  for (EtcdEndpoint& e : endpoints) {
    members_.push_back({std::move(e.name), etcdserverpb::KV::NewStub(e.channel),
                        etcdserverpb::Lease::NewStub(e.channel)});
  }
}

const std::string& EtcdKv::current_endpoint() const {
  return members_[current_.load() % members_.size()].name;
}

absl::Status EtcdKv::Call(const char* name,
                          const std::function<grpc::Status(Member&, grpc::ClientContext*)>& call,
                          absl::Time until) {
  const absl::Time deadline = std::min(until, absl::Now() + options_.call_timeout);
  // With several members, no one member may take the whole deadline: one that hangs (a
  // stopped process, a link that drops packets) must leave time to ask the next.
  const absl::Duration attempt =
      members_.size() == 1 ? options_.call_timeout
                           : std::max(options_.call_timeout / static_cast<int64_t>(members_.size()),
                                      kMinAttemptTimeout);
  size_t index = current_.load();
  // Each member once, and each at most once more after a full round (a member restarting).
  for (size_t tries = 0;; ++tries) {
    Member& member = members_[index % members_.size()];
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + attempt)));
    const grpc::Status s = call(member, &context);
    const bool unanswered =
        s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && members_.size() > 1);
    const bool retry = unanswered && tries + 1 < 2 * members_.size() && absl::Now() < deadline;
    // A member that did not answer is not asked first next time, even when this call has no
    // time left to ask another: a short call (a lease renewal) would otherwise start at a
    // hung member every time, and each would run out there.
    if (unanswered) current_.store(index + 1);
    if (!retry) {
      if (s.ok()) return absl::OkStatus();
      return absl::Status(CodeOf(s),
                          absl::StrCat("etcd ", member.name, ": ", name, ": ", s.error_message()));
    }
    index = index + 1;
  }
}

absl::StatusOr<EtcdKeyValue> EtcdKv::Get(const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  if (absl::Status s =
          Call("Range",
               [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Range(ctx, req, &resp); });
      !s.ok()) {
    return s;
  }
  if (resp.kvs_size() == 0) {
    return absl::NotFoundError(absl::StrCat("etcd ", current_endpoint(), ": no key ", key));
  }
  return FromProto(resp.kvs(0));
}

absl::StatusOr<EtcdRange> EtcdKv::Range(const std::string& from, const std::string& prefix,
                                        int64_t limit, int64_t revision, bool reverse) {
  etcdserverpb::RangeRequest req;
  if (reverse) {
    req.set_key(prefix);
    req.set_range_end(from.empty() ? PrefixEnd(prefix) : from);
  } else {
    req.set_key(from.empty() ? prefix : from);
    req.set_range_end(PrefixEnd(prefix));
  }
  req.set_limit(limit);
  req.set_revision(revision);
  req.set_sort_order(reverse ? etcdserverpb::RangeRequest::DESCEND
                             : etcdserverpb::RangeRequest::ASCEND);
  req.set_sort_target(etcdserverpb::RangeRequest::KEY);
  etcdserverpb::RangeResponse resp;
  if (absl::Status s =
          Call("Range",
               [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Range(ctx, req, &resp); });
      !s.ok()) {
    return s;
  }
  EtcdRange out;
  out.kvs.reserve(resp.kvs_size());
  for (const mvccpb::KeyValue& kv : resp.kvs()) out.kvs.push_back(FromProto(kv));
  out.more = resp.more();
  out.revision = resp.header().revision();
  return out;
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdKv::ListAll(const std::string& prefix, int64_t page) {
  std::vector<EtcdKeyValue> all;
  std::string from;
  int64_t revision = 0;
  for (;;) {
    absl::StatusOr<EtcdRange> range = Range(from, prefix, page, revision);
    if (!range.ok()) return range.status();
    revision = range->revision;
    for (EtcdKeyValue& kv : range->kvs) all.push_back(std::move(kv));
    if (!range->more || range->kvs.empty()) return all;
    from = all.back().key + std::string(1, '\0');  // the next key after the last one
  }
}

absl::StatusOr<int64_t> EtcdKv::Commit(const EtcdFence& fence,
                                       const std::vector<EtcdWrite>& writes) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* held = txn.add_compare();
  held->set_key(fence.key);
  held->set_target(etcdserverpb::Compare::CREATE);
  held->set_result(etcdserverpb::Compare::EQUAL);
  held->set_create_revision(fence.create_revision);
  for (const EtcdWrite& w : writes) {
    etcdserverpb::RequestOp* op = txn.add_success();
    if (w.value.has_value()) {
      op->mutable_request_put()->set_key(w.key);
      op->mutable_request_put()->set_value(*w.value);
    } else {
      op->mutable_request_delete_range()->set_key(w.key);
      if (w.prefix) op->mutable_request_delete_range()->set_range_end(PrefixEnd(w.key));
    }
  }
  etcdserverpb::TxnResponse resp;
  if (absl::Status s = Call(
          "Txn", [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Txn(ctx, txn, &resp); });
      !s.ok()) {
    return s;
  }
  if (!resp.succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "etcd ", current_endpoint(), ": the fence on ", fence.key, " (created at revision ",
        fence.create_revision, ") no longer holds; nothing was written"));
  }
  return resp.header().revision();
}

absl::StatusOr<EtcdFence> EtcdKv::CreateIfAbsent(const std::string& key, const std::string& value,
                                                 int64_t lease) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(key);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);  // a key that does not exist has create revision 0
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  txn.add_failure()->mutable_request_range()->set_key(key);
  etcdserverpb::TxnResponse resp;
  if (absl::Status s = Call(
          "Txn", [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Txn(ctx, txn, &resp); });
      !s.ok()) {
    return s;
  }
  if (resp.succeeded()) return EtcdFence{key, resp.header().revision()};
  std::string holder;
  if (resp.responses_size() > 0 && resp.responses(0).response_range().kvs_size() > 0) {
    const mvccpb::KeyValue& held = resp.responses(0).response_range().kvs(0);
    // Our own create, applied by a member that then failed to answer and retried here.
    if (held.value() == value && held.lease() == lease) {
      return EtcdFence{key, held.create_revision()};
    }
    holder = held.value();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("etcd ", current_endpoint(), ": ", key, " is held by '", holder, "'"));
}

absl::StatusOr<int64_t> EtcdKv::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse resp;
  if (absl::Status s = Call("LeaseGrant",
                            [&](Member& m, grpc::ClientContext* ctx) {
                              return m.lease->LeaseGrant(ctx, req, &resp);
                            });
      !s.ok()) {
    return s;
  }
  if (!resp.error().empty()) {
    return absl::InternalError(
        absl::StrCat("etcd ", current_endpoint(), ": LeaseGrant: ", resp.error()));
  }
  return resp.id();
}

absl::Status EtcdKv::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return Call("LeaseRevoke", [&](Member& m, grpc::ClientContext* ctx) {
    return m.lease->LeaseRevoke(ctx, req, &resp);
  });
}

absl::StatusOr<absl::Duration> EtcdKv::KeepAlive(int64_t lease, absl::Time deadline) {
  // LeaseKeepAlive is a stream; one request and its answer per renewal keeps the deadline
  // per renewal (a stream kept open could block on a member that stopped answering).
  etcdserverpb::LeaseKeepAliveResponse resp;
  auto renew_once = [&](Member& m, grpc::ClientContext* ctx) {
    auto stream = m.lease->LeaseKeepAlive(ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    const bool answered = stream->Write(req) && stream->Read(&resp);
    ctx->TryCancel();
    const grpc::Status finished = stream->Finish();
    if (answered) return grpc::Status::OK;
    return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream closed") : finished;
  };
  if (absl::Status s = Call("LeaseKeepAlive", renew_once, deadline); !s.ok()) return s;
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd ", current_endpoint(), ": lease ", lease, " has expired"));
  }
  return absl::Seconds(resp.ttl());
}

}  // namespace baton::coordinator
