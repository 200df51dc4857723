// etcd's v3 API as Baton builds it (@etcd_api, from Debian's protos with the Go-only options
// stripped) against a real etcd member: the primitives the coordinator's etcd store and its
// leader election rest on. Writes conditional on the leader key (fencing) are the point:
// a deposed leader's transaction must write nothing.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "coordinator/store/testing/etcd_suite.h"
#include "etcd/api/etcdserverpb/rpc.grpc.pb.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

class EtcdApiTest : public EtcdSuite {
 protected:
  void SetUp() override {
    EtcdSuite::SetUp();
    if (HasFatalFailure()) return;
    channel_ = grpc::CreateChannel(member().endpoint(), grpc::InsecureChannelCredentials());
    kv_ = etcdserverpb::KV::NewStub(channel_);
    lease_ = etcdserverpb::Lease::NewStub(channel_);
  }

  etcdserverpb::PutResponse Put(const std::string& key, const std::string& value,
                                int64_t lease = 0) {
    grpc::ClientContext ctx;
    etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    etcdserverpb::PutResponse resp;
    EXPECT_TRUE(kv_->Put(&ctx, req, &resp).ok());
    return resp;
  }

  // The key's value, or "" if it does not exist.
  std::string Get(const std::string& key) {
    grpc::ClientContext ctx;
    etcdserverpb::RangeRequest req;
    req.set_key(key);
    etcdserverpb::RangeResponse resp;
    EXPECT_TRUE(kv_->Range(&ctx, req, &resp).ok());
    return resp.kvs_size() == 0 ? "" : resp.kvs(0).value();
  }

  // Puts key=value only if `leader_key` still has `create_revision` (the fencing
  // transaction of an elected leader). Returns whether it wrote.
  bool FencedPut(const std::string& leader_key, int64_t create_revision, const std::string& key,
                 const std::string& value) {
    grpc::ClientContext ctx;
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* c = txn.add_compare();
    c->set_key(leader_key);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_create_revision(create_revision);
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    etcdserverpb::TxnResponse resp;
    EXPECT_TRUE(kv_->Txn(&ctx, txn, &resp).ok());
    return resp.succeeded();
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
};

TEST_F(EtcdApiTest, PutThenRangeRoundTripsBytes) {
  const std::string value("a\0b\xff", 4);
  const etcdserverpb::PutResponse put = Put("baton/test/bytes", value);
  EXPECT_GT(put.header().revision(), 0);
  EXPECT_EQ(Get("baton/test/bytes"), value);
}

TEST_F(EtcdApiTest, AWriteFencedOnTheLeaderKeyFailsOnceAnotherLeaderTookIt) {
  // Replica A is elected: it created the leader key, at revision ra.
  const int64_t ra = Put("baton/test/leader", "A").header().revision();
  EXPECT_TRUE(FencedPut("baton/test/leader", ra, "baton/test/state", "written by A"));
  // A's lease ran out meanwhile and B was elected: the key is deleted and created again.
  {
    grpc::ClientContext ctx;
    etcdserverpb::DeleteRangeRequest del;
    del.set_key("baton/test/leader");
    etcdserverpb::DeleteRangeResponse resp;
    ASSERT_TRUE(kv_->DeleteRange(&ctx, del, &resp).ok());
  }
  const int64_t rb = Put("baton/test/leader", "B").header().revision();
  ASSERT_NE(ra, rb);
  // A has not noticed: its write is refused, and nothing of it lands.
  EXPECT_FALSE(FencedPut("baton/test/leader", ra, "baton/test/state", "written by A, deposed"));
  EXPECT_EQ(Get("baton/test/state"), "written by A");
  EXPECT_TRUE(FencedPut("baton/test/leader", rb, "baton/test/state", "written by B"));
  EXPECT_EQ(Get("baton/test/state"), "written by B");
}

TEST_F(EtcdApiTest, AKeyBoundToALeaseGoesWithTheLease) {
  grpc::ClientContext grant_ctx;
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(60);
  etcdserverpb::LeaseGrantResponse granted;
  ASSERT_TRUE(lease_->LeaseGrant(&grant_ctx, grant, &granted).ok());
  ASSERT_TRUE(granted.error().empty()) << granted.error();
  Put("baton/test/leased", "leader", granted.id());
  EXPECT_EQ(Get("baton/test/leased"), "leader");
  // Revoking the lease (what its expiry does, without waiting for it) deletes the key.
  grpc::ClientContext revoke_ctx;
  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  etcdserverpb::LeaseRevokeResponse revoked;
  ASSERT_TRUE(lease_->LeaseRevoke(&revoke_ctx, revoke, &revoked).ok());
  EXPECT_EQ(Get("baton/test/leased"), "");
}

}  // namespace
}  // namespace baton::coordinator
