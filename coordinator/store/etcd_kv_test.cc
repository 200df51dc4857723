#include "coordinator/store/etcd_kv.h"

#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "coordinator/store/testing/etcd_suite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

class EtcdKvTest : public EtcdSuite {
 protected:
  void SetUp() override {
    EtcdSuite::SetUp();
    if (HasFatalFailure()) return;
    kv_ = std::make_unique<EtcdKv>(
        grpc::CreateChannel(member().endpoint(), grpc::InsecureChannelCredentials()),
        member().endpoint(), EtcdKv::Options());
  }

  // Starts a second member named `name` and stops it (SIGSTOP: connections stay open,
  // nothing answers; TearDown resumes it), and returns a client that asks it first, then
  // member(), with a 4 s call timeout.
  std::unique_ptr<EtcdKv> HungFirst(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    absl::StatusOr<std::unique_ptr<EtcdMember>> hung =
        EtcdMember::Start(absl::StrCat(tmp ? tmp : "/tmp", "/", name));
    EXPECT_OK(hung);
    if (!hung.ok()) return nullptr;
    hung_ = *std::move(hung);
    EXPECT_EQ(::kill(hung_->pid(), SIGSTOP), 0);
    EtcdKv::Options options;
    options.call_timeout = absl::Seconds(4);
    return std::make_unique<EtcdKv>(
        std::vector<EtcdEndpoint>{
            {hung_->endpoint(),
             grpc::CreateChannel(hung_->endpoint(), grpc::InsecureChannelCredentials())},
            {member().endpoint(),
             grpc::CreateChannel(member().endpoint(), grpc::InsecureChannelCredentials())}},
        options);
  }

  void TearDown() override {
    if (hung_ != nullptr) ::kill(hung_->pid(), SIGCONT);
    EtcdSuite::TearDown();
  }

  std::unique_ptr<EtcdKv> kv_;
  std::unique_ptr<EtcdMember> hung_;
};

TEST_F(EtcdKvTest, OnlyTheHolderOfTheLeaderKeyWrites) {
  const absl::StatusOr<EtcdFence> a_or = kv_->CreateIfAbsent("election/leader", "replica-a", 0);
  ASSERT_OK(a_or);
  const EtcdFence& a = *a_or;
  const absl::StatusOr<EtcdFence> b = kv_->CreateIfAbsent("election/leader", "replica-b", 0);
  EXPECT_TRUE(absl::IsAlreadyExists(b.status())) << b.status();
  EXPECT_THAT(b.status().message(), HasSubstr("held by 'replica-a'"));

  ASSERT_OK(kv_->Commit(a, {{"jobs/j1", "v1"}, {"jobs/j2", "v2"}}).status());
  const absl::StatusOr<EtcdKeyValue> j1_or = kv_->Get("jobs/j1");
  ASSERT_OK(j1_or);
  const EtcdKeyValue& j1 = *j1_or;
  EXPECT_EQ(j1.value, "v1");

  // A resigns (deletes the key under its own fence); B is elected.
  ASSERT_OK(kv_->Commit(a, {{"election/leader", std::nullopt}}).status());
  const absl::StatusOr<EtcdFence> b2_or = kv_->CreateIfAbsent("election/leader", "replica-b", 0);
  ASSERT_OK(b2_or);
  const EtcdFence& b2 = *b2_or;
  // A write of A's, late: refused whole, nothing of it lands.
  const absl::StatusOr<int64_t> late = kv_->Commit(a, {{"jobs/j1", "stale"}, {"jobs/j3", "stale"}});
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("nothing was written"));
  EXPECT_EQ(kv_->Get("jobs/j1")->value, "v1");
  EXPECT_TRUE(absl::IsNotFound(kv_->Get("jobs/j3").status()));
  ASSERT_OK(kv_->Commit(b2, {{"jobs/j1", "v1 by b"}}).status());
  EXPECT_EQ(kv_->Get("jobs/j1")->value, "v1 by b");
}

TEST_F(EtcdKvTest, ListsAPrefixInKeyOrderUpToTheLimit) {
  const absl::StatusOr<EtcdFence> f_or = kv_->CreateIfAbsent("list/leader", "x", 0);
  ASSERT_OK(f_or);
  const EtcdFence& f = *f_or;
  ASSERT_OK(
      kv_->Commit(f, {{"list/p/b", "2"}, {"list/p/a", "1"}, {"list/p0", "no"}, {"list/q", "no"}})
          .status());
  const auto all_or = kv_->Range("", "list/p/", 10);
  ASSERT_OK(all_or);
  const auto& all = all_or->kvs;
  EXPECT_THAT(all, ElementsAre(Field(&EtcdKeyValue::key, "list/p/a"),
                               Field(&EtcdKeyValue::key, "list/p/b")));
  const auto first_or = kv_->Range("", "list/p/", 1);
  ASSERT_OK(first_or);
  const auto& first = first_or->kvs;
  EXPECT_THAT(first, ElementsAre(Field(&EtcdKeyValue::value, "1")));
}

TEST_F(EtcdKvTest, ALeaderKeyOnALeaseGoesWithItAndTheNextOneCanTakeIt) {
  const absl::StatusOr<int64_t> lease_or = kv_->GrantLease(absl::Seconds(60));
  ASSERT_OK(lease_or);
  const int64_t& lease = *lease_or;
  const absl::StatusOr<EtcdFence> a_or = kv_->CreateIfAbsent("lease/leader", "a", lease);
  ASSERT_OK(a_or);
  const EtcdFence& a = *a_or;
  const absl::StatusOr<EtcdKeyValue> held_or = kv_->Get("lease/leader");
  ASSERT_OK(held_or);
  const EtcdKeyValue& held = *held_or;
  EXPECT_EQ(held.lease, lease);
  // What the lease's expiry does, without waiting for it.
  ASSERT_OK(kv_->RevokeLease(lease));
  EXPECT_TRUE(absl::IsNotFound(kv_->Get("lease/leader").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(kv_->Commit(a, {{"lease/x", "1"}}).status()));
  EXPECT_OK(kv_->CreateIfAbsent("lease/leader", "b", 0).status());
}

TEST_F(EtcdKvTest, AWriteOverEtcdsRequestLimitIsResourceExhausted) {
  const absl::StatusOr<EtcdFence> f_or = kv_->CreateIfAbsent("big/leader", "x", 0);
  ASSERT_OK(f_or);
  const EtcdFence& f = *f_or;
  const absl::StatusOr<int64_t> big =
      kv_->Commit(f, {{"big/value", std::string(3 << 20, 'x')}});  // etcd's limit: 1.5 MiB
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  EXPECT_TRUE(absl::IsNotFound(kv_->Get("big/value").status()));
}

TEST_F(EtcdKvTest, PagesAPrefixAtOneRevisionReadsBackwardsAndDeletesAPrefix) {
  const absl::StatusOr<EtcdFence> f = kv_->CreateIfAbsent("page/leader", "x", 0);
  ASSERT_OK(f);
  std::vector<EtcdWrite> writes;
  for (int i = 0; i < 7; ++i) writes.push_back({absl::StrCat("page/k/", i), absl::StrCat(i)});
  writes.push_back({"page/kz", "outside"});
  ASSERT_OK(kv_->Commit(*f, writes).status());
  const auto all = kv_->ListAll("page/k/", /*page=*/3);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 7u);
  EXPECT_EQ(all->front().key, "page/k/0");
  EXPECT_EQ(all->back().key, "page/k/6");
  const auto last = kv_->Range("", "page/k/", 1, 0, /*reverse=*/true);
  ASSERT_OK(last);
  EXPECT_THAT(last->kvs, ElementsAre(Field(&EtcdKeyValue::key, "page/k/6")));
  const auto from = kv_->Range("page/k/5", "page/k/", 0);
  ASSERT_OK(from);
  EXPECT_THAT(from->kvs, ElementsAre(Field(&EtcdKeyValue::key, "page/k/5"),
                                     Field(&EtcdKeyValue::key, "page/k/6")));
  ASSERT_OK(kv_->Commit(*f, {{"page/k/", std::nullopt, /*prefix=*/true}}).status());
  EXPECT_THAT(*kv_->ListAll("page/k"), ElementsAre(Field(&EtcdKeyValue::key, "page/kz")));
}

TEST_F(EtcdKvTest, KeepAliveRenewsALeaseAndNamesOneThatExpired) {
  const absl::StatusOr<int64_t> lease = kv_->GrantLease(absl::Seconds(30));
  ASSERT_OK(lease);
  const absl::StatusOr<absl::Duration> ttl = kv_->KeepAlive(*lease);
  ASSERT_OK(ttl);
  EXPECT_EQ(*ttl, absl::Seconds(30));
  ASSERT_OK(kv_->RevokeLease(*lease));
  EXPECT_TRUE(absl::IsNotFound(kv_->KeepAlive(*lease).status()));
}

TEST_F(EtcdKvTest, ACallGoesOnToTheNextMemberWhenOneIsUnreachable) {
  // The first endpoint refuses connections (port 1); the second is the member.
  EtcdKv kv(
      {{"127.0.0.1:1", grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials())},
       {member().endpoint(),
        grpc::CreateChannel(member().endpoint(), grpc::InsecureChannelCredentials())}},
      EtcdKv::Options());
  const absl::StatusOr<EtcdFence> f = kv.CreateIfAbsent("rotate/leader", "me", 0);
  ASSERT_OK(f);
  EXPECT_EQ(kv.current_endpoint(), member().endpoint());
  // A retried create that had been applied counts as ours.
  const absl::StatusOr<EtcdFence> again = kv.CreateIfAbsent("rotate/leader", "me", 0);
  ASSERT_OK(again);
  EXPECT_EQ(again->create_revision, f->create_revision);
}

TEST_F(EtcdKvTest, ACallGoesOnToTheNextMemberWhenOneHangs) {
  std::unique_ptr<EtcdKv> kv = HungFirst("etcd-hung-member");
  ASSERT_NE(kv, nullptr);
  ASSERT_OK(kv->CreateIfAbsent("hang/leader", "me", 0));
  EXPECT_EQ(kv->current_endpoint(), member().endpoint());
}

// A call whose own deadline runs out on a hung member (a lease renewal shortly before the
// lease ends) fails, but the next call starts at another member: found when a loaded
// machine made every renewal time out at the same stopped member and the leader resigned.
TEST_F(EtcdKvTest, ACallThatRanOutOnAHungMemberMovesTheNextOneOn) {
  std::unique_ptr<EtcdKv> kv = HungFirst("etcd-hung-member-2");
  ASSERT_NE(kv, nullptr);
  // Less time than one attempt: it runs out at the hung member.
  const absl::Status short_call =
      kv->KeepAlive(12345, absl::Now() + absl::Milliseconds(200)).status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(short_call)) << short_call;
  EXPECT_EQ(kv->current_endpoint(), member().endpoint());
  ASSERT_OK(kv->CreateIfAbsent("hang2/leader", "me", 0));
}

TEST(EtcdKvUnreachableTest, AnEtcdThatCannotBeReachedIsUnavailableNamingIt) {
  EtcdKv::Options options;
  options.call_timeout = absl::Seconds(2);
  // Port 1 on loopback: nothing listens there.
  EtcdKv kv(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()), "127.0.0.1:1",
            options);
  const absl::StatusOr<EtcdKeyValue> got = kv.Get("k");
  EXPECT_TRUE(absl::IsUnavailable(got.status()) || absl::IsDeadlineExceeded(got.status()))
      << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("etcd 127.0.0.1:1: Range"));
}

}  // namespace
}  // namespace baton::coordinator
