#include "coordinator/store/etcd_store.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/testing/status_matchers.h"
#include "coordinator/store/testing/etcd_suite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::baton::v1::Job;
using ::baton::v1::JobUpdate;
using ::baton::v1::LogLine;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Property;

Job MakeJob(const std::string& id, const std::string& name) {
  Job job;
  job.set_id(id);
  job.mutable_spec()->set_name(name);
  return job;
}

JobUpdate Event(int64_t seq, const std::string& reason) {
  JobUpdate u;
  u.set_seq(seq);
  u.mutable_event()->set_reason(reason);
  return u;
}

JobUpdate Point(int64_t seq, double value) {
  JobUpdate u;
  u.set_seq(seq);
  u.mutable_metric()->set_step(seq);
  (*u.mutable_metric()->mutable_values())["loss"] = value;
  return u;
}

LogLine Line(int64_t seq, const std::string& text) {
  LogLine line;
  line.set_seq(seq);
  line.set_text(text);
  return line;
}

// Each test has its own prefix on the suite's member, and a leader key to fence on.
class EtcdStoreTest : public EtcdSuite {
 protected:
  void SetUp() override {
    EtcdSuite::SetUp();
    if (HasFatalFailure()) return;
    kv_ = std::make_shared<EtcdKv>(
        grpc::CreateChannel(member().endpoint(), grpc::InsecureChannelCredentials()),
        member().endpoint(), EtcdKv::Options());
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    options_.prefix = absl::StrCat("/", info->name(), "/");
    leader_key_ = options_.prefix + "leader";
  }

  // Takes the leader key for `who` (it must be free) and opens a store fenced on it, with a
  // fresh local part: what a replica that just won the election does.
  std::unique_ptr<Store> Lead(const std::string& who) {
    absl::StatusOr<EtcdFence> fence = kv_->CreateIfAbsent(leader_key_, who, 0);
    EXPECT_OK(fence);
    fences_.push_back(*fence);
    absl::StatusOr<std::unique_ptr<Store>> local = Store::Open(":memory:");
    EXPECT_OK(local);
    absl::StatusOr<std::unique_ptr<Store>> store =
        EtcdStore::Open(kv_, *fence, *std::move(local), options_);
    EXPECT_OK(store);
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Deletes the leader key under the last leader's fence: it resigned.
  void Resign() { ASSERT_OK(kv_->Commit(fences_.back(), {{leader_key_, std::nullopt}}).status()); }

  std::vector<std::string> Keys(const std::string& under) {
    std::vector<std::string> keys;
    const absl::StatusOr<std::vector<EtcdKeyValue>> kvs = kv_->ListAll(options_.prefix + under);
    EXPECT_OK(kvs);
    if (kvs.ok()) {
      for (const EtcdKeyValue& kv : *kvs) keys.push_back(kv.key);
    }
    return keys;
  }

  std::shared_ptr<EtcdKv> kv_;
  EtcdStoreOptions options_;
  std::string leader_key_;
  std::vector<EtcdFence> fences_;
};

TEST_F(EtcdStoreTest, JobsAndEventsLiveInEtcdPointsAndLinesOnTheReplica) {
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->PutJob(MakeJob("j-000002", "second")));
  WriteBatch batch;
  batch.jobs = {MakeJob("j-000001", "first")};
  batch.updates["j-000001"] = {Event(1, "Submitted"), Point(2, 0.5), Event(3, "Started")};
  batch.logs["j-000001"] = {Line(1, "hello")};
  batch.meta["next_job_number"] = "3";
  ASSERT_OK(store->Write(batch));
  ASSERT_OK(store->PutJob(MakeJob("j-000002", "second, replaced")));

  // Creation order; a replace keeps its place.
  const auto jobs = store->LoadJobs();
  ASSERT_OK(jobs);
  EXPECT_THAT(*jobs, ElementsAre(Property(&Job::id, "j-000002"), Property(&Job::id, "j-000001")));
  EXPECT_EQ((*jobs)[0].spec().name(), "second, replaced");
  const auto all = store->ReadUpdates("j-000001", 0, 0, false);
  ASSERT_OK(all);
  EXPECT_THAT(*all, ElementsAre(Property(&JobUpdate::seq, 1), Property(&JobUpdate::seq, 2),
                                Property(&JobUpdate::seq, 3)));
  EXPECT_THAT(*store->ReadUpdates("j-000001", 1, 1, false),
              ElementsAre(Property(&JobUpdate::seq, 2)));
  EXPECT_THAT(*store->ReadUpdates("j-000001", 0, 0, true),
              ElementsAre(Property(&JobUpdate::seq, 1), Property(&JobUpdate::seq, 3)));
  EXPECT_THAT(*store->ReadLogs("j-000001", -1, 0, 0),
              ElementsAre(Property(&LogLine::text, "hello")));
  EXPECT_EQ(*store->GetMeta("next_job_number"), "3");
  EXPECT_TRUE(absl::IsNotFound(store->GetMeta("absent").status()));

  // In etcd: the two jobs, the two events (not the point) in one chunk, one seq block, no
  // log line.
  EXPECT_THAT(Keys("job/"),
              ElementsAre(options_.prefix + "job/j-000001", options_.prefix + "job/j-000002"));
  EXPECT_EQ(Keys("event/").size(), 1u);
  EXPECT_EQ(Keys("seq/").size(), 1u);
}

TEST_F(EtcdStoreTest, ADeposedLeaderWritesNothing) {
  std::unique_ptr<Store> a = Lead("a");
  ASSERT_NE(a, nullptr);
  ASSERT_OK(a->PutJob(MakeJob("j-000001", "by a")));
  Resign();
  std::unique_ptr<Store> b = Lead("b");
  ASSERT_NE(b, nullptr);

  WriteBatch late;
  late.jobs = {MakeJob("j-000001", "late"), MakeJob("j-000002", "late")};
  late.updates["j-000001"] = {Event(1, "Late")};
  late.meta["next_job_number"] = "99";
  const absl::Status s = a->Write(late);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("no longer holds"));
  const auto jobs = b->LoadJobs();
  ASSERT_OK(jobs);
  EXPECT_THAT(*jobs, ElementsAre(Property(&Job::id, "j-000001")));
  EXPECT_EQ((*jobs)[0].spec().name(), "by a");
  EXPECT_THAT(*b->ReadUpdates("j-000001", 0, 0, false), IsEmpty());
  EXPECT_TRUE(absl::IsNotFound(b->GetMeta("next_job_number").status()));
}

TEST_F(EtcdStoreTest, ANewLeaderNeverReusesASeqTheOldOneHandedOut) {
  options_.seq_block = 100;
  std::unique_ptr<Store> a = Lead("a");
  ASSERT_NE(a, nullptr);
  WriteBatch batch;
  batch.jobs = {MakeJob("j-000001", "x")};
  batch.updates["j-000001"] = {Event(1, "Submitted"), Point(2, 1), Point(3, 1)};
  batch.logs["j-000001"] = {Line(1, "a"), Line(2, "b")};
  ASSERT_OK(a->Write(batch));
  ASSERT_OK(a->AppendUpdates("j-000001", {Point(150, 1)}));  // past the block: a new one
  Resign();

  // B has none of A's points or lines, yet counts every seq A reserved as used.
  std::unique_ptr<Store> b = Lead("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(*b->LastUpdateSeq("j-000001"), 250);
  EXPECT_EQ(*b->LastLogSeq("j-000001"), 102);
  EXPECT_THAT(*b->ReadUpdates("j-000001", 0, 0, false), ElementsAre(Property(&JobUpdate::seq, 1)));
  const absl::Status reused = b->AppendUpdates("j-000001", {Event(250, "Reused")});
  EXPECT_TRUE(absl::IsFailedPrecondition(reused)) << reused;
  ASSERT_OK(b->AppendUpdates("j-000001", {Event(251, "After")}));
  EXPECT_THAT(*b->ReadUpdates("j-000001", 1, 0, true), ElementsAre(Property(&JobUpdate::seq, 251)));
}

TEST_F(EtcdStoreTest, ABatchOverEtcdsLimitsIsCommittedInWholeJobs) {
  options_.max_txn_ops = 4;
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  for (int i = 1; i <= 5; ++i) {
    const std::string id = absl::StrFormat("j-%06d", i);
    batch.jobs.push_back(MakeJob(id, "x"));
    batch.updates[id] = {Event(1, "Submitted")};  // job + event + seq block: 3 writes
  }
  ASSERT_OK(store->Write(batch));
  EXPECT_EQ(static_cast<EtcdStore*>(store.get())->etcd_commits(), 5);
  EXPECT_EQ(store->LoadJobs()->size(), 5u);

}

TEST_F(EtcdStoreTest, EveryRankOfALargeJobReportingAtOnceIsAFewWrites) {
  options_.max_txn_ops = 4;  // a job's record, its seq block and two chunks at most
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.jobs = {MakeJob("j-000001", "x")};
  for (int seq = 1; seq <= 3000; ++seq) {
    batch.updates["j-000001"].push_back(Event(seq, absl::StrCat("ProcessExited rank ", seq)));
  }
  ASSERT_OK(store->Write(batch));
  EXPECT_EQ(static_cast<EtcdStore*>(store.get())->etcd_commits(), 1);
  const auto all = store->ReadUpdates("j-000001", 0, 0, true);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3000u);
  for (size_t i = 0; i < all->size(); ++i) ASSERT_EQ((*all)[i].seq(), static_cast<int64_t>(i + 1));
  EXPECT_THAT(*store->ReadUpdates("j-000001", 1500, 2, false),
              ElementsAre(Property(&JobUpdate::seq, 1501), Property(&JobUpdate::seq, 1502)));
  EXPECT_THAT(*store->ReadUpdates("j-000001", 3000, 0, false), IsEmpty());
}

TEST_F(EtcdStoreTest, AJobOverEtcdsRequestLimitAloneIsResourceExhausted) {
  options_.max_request_bytes = 32 << 10;
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  const absl::Status s = store->PutJob(MakeJob("j-000001", std::string(40 << 10, 'x')));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--max-request-bytes=32768"));
  EXPECT_THAT(*store->LoadJobs(), IsEmpty());
}

TEST_F(EtcdStoreTest, DeletingAJobRemovesEverythingItOwns) {
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.jobs = {MakeJob("j-000001", "x"), MakeJob("j-000002", "y")};
  batch.updates["j-000001"] = {Event(1, "Submitted"), Point(2, 1)};
  batch.logs["j-000001"] = {Line(1, "a")};
  ASSERT_OK(store->Write(batch));
  WriteBatch del;
  del.delete_jobs = {"j-000001"};
  ASSERT_OK(store->Write(del));
  EXPECT_THAT(*store->LoadJobs(), ElementsAre(Property(&Job::id, "j-000002")));
  EXPECT_THAT(Keys("event/"), IsEmpty());
  EXPECT_THAT(Keys("seq/"), IsEmpty());
  EXPECT_THAT(*store->ReadLogs("j-000001", -1, 0, 0), IsEmpty());
  EXPECT_EQ(*store->LastUpdateSeq("j-000001"), 0);
}

TEST_F(EtcdStoreTest, RefusesBadInputAndANewerLayout) {
  std::unique_ptr<Store> store = Lead("a");
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(store->SetMeta(kSchemaVersionKey, "9")));
  EXPECT_TRUE(absl::IsInvalidArgument(store->PutJob(MakeJob("", "x"))));
  EXPECT_TRUE(absl::IsInvalidArgument(store->ReadUpdates("j", 0, -1, false).status()));

  ASSERT_OK(kv_->Commit(fences_.back(), {{options_.prefix + "meta/schema_version", "9"}}).status());
  absl::StatusOr<std::unique_ptr<Store>> local = Store::Open(":memory:");
  ASSERT_OK(local);
  const auto newer = EtcdStore::Open(kv_, fences_.back(), *std::move(local), options_);
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status())) << newer.status();
  EXPECT_THAT(newer.status().message(), HasSubstr("layout version 9"));
}

}  // namespace
}  // namespace baton::coordinator
