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

}  // namespace

EtcdKv::EtcdKv(std::shared_ptr<grpc::Channel> channel, std::string endpoint, Options options)
    : endpoint_(std::move(endpoint)),
      options_(options),
      kv_(etcdserverpb::KV::NewStub(channel)),
      lease_(etcdserverpb::Lease::NewStub(channel)) {}

std::unique_ptr<grpc::ClientContext> EtcdKv::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  return ctx;
}

absl::Status EtcdKv::Error(const char* call, const grpc::Status& status) const {
  return absl::Status(CodeOf(status),
                      absl::StrCat("etcd ", endpoint_, ": ", call, ": ", status.error_message()));
}

absl::StatusOr<EtcdKeyValue> EtcdKv::Get(const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  if (grpc::Status s = kv_->Range(Context().get(), req, &resp); !s.ok()) return Error("Range", s);
  if (resp.kvs_size() == 0) {
    return absl::NotFoundError(absl::StrCat("etcd ", endpoint_, ": no key ", key));
  }
  return FromProto(resp.kvs(0));
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdKv::List(const std::string& prefix, int64_t limit) {
  etcdserverpb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  req.set_limit(limit);
  req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  req.set_sort_target(etcdserverpb::RangeRequest::KEY);
  etcdserverpb::RangeResponse resp;
  if (grpc::Status s = kv_->Range(Context().get(), req, &resp); !s.ok()) return Error("Range", s);
  std::vector<EtcdKeyValue> out;
  out.reserve(resp.kvs_size());
  for (const mvccpb::KeyValue& kv : resp.kvs()) out.push_back(FromProto(kv));
  return out;
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
    }
  }
  etcdserverpb::TxnResponse resp;
  if (grpc::Status s = kv_->Txn(Context().get(), txn, &resp); !s.ok()) return Error("Txn", s);
  if (!resp.succeeded()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd ", endpoint_, ": the fence on ", fence.key, " (created at revision ",
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
  if (grpc::Status s = kv_->Txn(Context().get(), txn, &resp); !s.ok()) return Error("Txn", s);
  if (resp.succeeded()) return EtcdFence{key, resp.header().revision()};
  std::string holder;
  if (resp.responses_size() > 0 && resp.responses(0).response_range().kvs_size() > 0) {
    holder = resp.responses(0).response_range().kvs(0).value();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("etcd ", endpoint_, ": ", key, " is held by '", holder, "'"));
}

absl::StatusOr<int64_t> EtcdKv::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse resp;
  if (grpc::Status s = lease_->LeaseGrant(Context().get(), req, &resp); !s.ok()) {
    return Error("LeaseGrant", s);
  }
  if (!resp.error().empty()) {
    return absl::InternalError(absl::StrCat("etcd ", endpoint_, ": LeaseGrant: ", resp.error()));
  }
  return resp.id();
}

absl::Status EtcdKv::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  if (grpc::Status s = lease_->LeaseRevoke(Context().get(), req, &resp); !s.ok()) {
    return Error("LeaseRevoke", s);
  }
  return absl::OkStatus();
}

}  // namespace baton::coordinator
