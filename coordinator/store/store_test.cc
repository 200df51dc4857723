#include "coordinator/store/store.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::baton::v1::Job;
using ::baton::v1::JobUpdate;
using ::baton::v1::LogLine;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pointwise;

MATCHER_P(IsOkAndHolds, matcher, "") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

MATCHER(ProtoEq, "") {
  return google::protobuf::util::MessageDifferencer::Equals(std::get<0>(arg), std::get<1>(arg));
}

// ---------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------

Job MakeJob(const std::string& id, baton::v1::JobState state) {
  Job job;
  job.set_id(id);
  job.set_state(state);
  job.mutable_spec()->set_name(absl::StrCat("job-", id));
  job.mutable_spec()->mutable_workers()->set_min(2);
  return job;
}

JobUpdate Event(int64_t seq, const std::string& reason) {
  JobUpdate update;
  update.set_seq(seq);
  update.mutable_event()->set_reason(reason);
  update.mutable_event()->set_message(absl::StrCat("event ", seq));
  return update;
}

JobUpdate Metric(int64_t seq, double loss) {
  JobUpdate update;
  update.set_seq(seq);
  update.mutable_metric()->set_step(seq * 10);
  (*update.mutable_metric()->mutable_values())["loss"] = loss;
  return update;
}

LogLine Line(int64_t seq, int32_t rank, const std::string& text) {
  LogLine line;
  line.set_seq(seq);
  line.set_rank(rank);
  line.set_stream(LogLine::STREAM_STDOUT);
  line.set_text(text);
  return line;
}

template <typename T>
std::vector<int64_t> Seqs(const std::vector<T>& items) {
  std::vector<int64_t> seqs;
  for (const T& item : items) seqs.push_back(item.seq());
  return seqs;
}

// A fresh database path under $TEST_TMPDIR, named after the running test.
std::string TempDbPath() {
  const std::string path = absl::StrCat(
      ::testing::TempDir(), ::testing::UnitTest::GetInstance()->current_test_info()->name(),
      ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
  return path;
}

// Runs `sql` on the database file through a separate raw connection, bypassing the
// Store. Returns the first column of the first row ("" if none).
std::string RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closer(db, sqlite3_close_v2);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> finalizer(stmt, sqlite3_finalize);
  const int rc = sqlite3_step(stmt);
  EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sqlite3_errmsg(db);
  if (rc != SQLITE_ROW) return "";
  const unsigned char* text = sqlite3_column_text(stmt, 0);
  return text == nullptr ? "" : reinterpret_cast<const char*>(text);
}

// ---------------------------------------------------------------------------------------
// Round trips on an in-memory database.
// ---------------------------------------------------------------------------------------

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
    ASSERT_OK(store);
    store_ = *std::move(store);
  }

  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, PutJobInsertsAndReplacesKeepingCreationOrder) {
  ASSERT_OK(store_->PutJob(MakeJob("j-000001", baton::v1::JOB_STATE_QUEUED)));
  ASSERT_OK(store_->PutJob(MakeJob("j-000002", baton::v1::JOB_STATE_QUEUED)));
  ASSERT_OK(store_->PutJob(MakeJob("j-000003", baton::v1::JOB_STATE_QUEUED)));

  // Replacing j-000001 keeps its place; its events are not stored.
  Job running = MakeJob("j-000001", baton::v1::JOB_STATE_RUNNING);
  running.set_generation(3);
  running.add_events()->set_reason("Scheduled");
  ASSERT_OK(store_->PutJob(running));

  absl::StatusOr<std::vector<Job>> jobs = store_->LoadJobs();
  ASSERT_OK(jobs);
  Job running_without_events = running;
  running_without_events.clear_events();
  EXPECT_THAT(*jobs, Pointwise(ProtoEq(), {running_without_events,
                                           MakeJob("j-000002", baton::v1::JOB_STATE_QUEUED),
                                           MakeJob("j-000003", baton::v1::JOB_STATE_QUEUED)}));
}

TEST_F(StoreTest, PutJobWithoutIdIsInvalid) {
  EXPECT_THAT(store_->PutJob(Job()), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("job.id")));
}

TEST_F(StoreTest, EmptyStore) {
  absl::StatusOr<std::vector<Job>> jobs = store_->LoadJobs();
  ASSERT_OK(jobs);
  EXPECT_THAT(*jobs, IsEmpty());
  absl::StatusOr<std::vector<JobUpdate>> updates = store_->ReadUpdates("j-1", 0, 0, false);
  ASSERT_OK(updates);
  EXPECT_THAT(*updates, IsEmpty());
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(0));
  EXPECT_THAT(store_->LastLogSeq("j-1"), IsOkAndHolds(0));
}

TEST_F(StoreTest, UpdatesRoundTrip) {
  const std::vector<JobUpdate> first = {Event(1, "Submitted"), Metric(2, 0.9)};
  const std::vector<JobUpdate> second = {Metric(5, 0.5), Event(7, "Succeeded")};
  ASSERT_OK(store_->AppendUpdates("j-1", first));
  ASSERT_OK(store_->AppendUpdates("j-1", second));
  ASSERT_OK(store_->AppendUpdates("j-2", {Event(1, "Other job")}));

  absl::StatusOr<std::vector<JobUpdate>> all = store_->ReadUpdates("j-1", 0, 0, false);
  ASSERT_OK(all);
  EXPECT_THAT(*all, Pointwise(ProtoEq(), {first[0], first[1], second[0], second[1]}));
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(7));
  EXPECT_THAT(store_->LastUpdateSeq("j-2"), IsOkAndHolds(1));

  absl::StatusOr<std::vector<JobUpdate>> after = store_->ReadUpdates("j-1", 2, 0, false);
  ASSERT_OK(after);
  EXPECT_THAT(Seqs(*after), ElementsAre(5, 7));

  absl::StatusOr<std::vector<JobUpdate>> limited = store_->ReadUpdates("j-1", 1, 2, false);
  ASSERT_OK(limited);
  EXPECT_THAT(Seqs(*limited), ElementsAre(2, 5));

  absl::StatusOr<std::vector<JobUpdate>> events = store_->ReadUpdates("j-1", 0, 0, true);
  ASSERT_OK(events);
  EXPECT_THAT(Seqs(*events), ElementsAre(1, 7));

  absl::StatusOr<std::vector<JobUpdate>> one_event = store_->ReadUpdates("j-1", 1, 1, true);
  ASSERT_OK(one_event);
  EXPECT_THAT(Seqs(*one_event), ElementsAre(7));

  EXPECT_THAT(store_->ReadUpdates("j-1", 0, -1, false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
}

TEST_F(StoreTest, SnapshotsAreKeptByEventsOnly) {
  JobUpdate snapshot;
  snapshot.set_seq(1);
  *snapshot.mutable_snapshot() = MakeJob("j-1", baton::v1::JOB_STATE_RUNNING);
  ASSERT_OK(store_->AppendUpdates("j-1", {snapshot, Metric(2, 1.0)}));

  absl::StatusOr<std::vector<JobUpdate>> events = store_->ReadUpdates("j-1", 0, 0, true);
  ASSERT_OK(events);
  EXPECT_THAT(*events, Pointwise(ProtoEq(), {snapshot}));
}

TEST_F(StoreTest, NonIncreasingUpdateSeqWritesNothing) {
  ASSERT_OK(store_->AppendUpdates("j-1", {Event(1, "a"), Event(2, "b")}));

  // Equal to the stored maximum, below it, and out of order within the batch: each
  // batch's valid prefix must not be written either.
  EXPECT_THAT(store_->AppendUpdates("j-1", {Event(2, "dup")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 2")));
  EXPECT_THAT(store_->AppendUpdates("j-1", {Event(3, "ok"), Event(1, "old")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 1")));
  EXPECT_THAT(store_->AppendUpdates("j-1", {Event(3, "ok"), Event(4, "ok"), Event(4, "dup")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 4")));
  EXPECT_THAT(store_->AppendUpdates("j-2", {Event(0, "zero")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 0")));

  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(2));
  EXPECT_THAT(store_->LastUpdateSeq("j-2"), IsOkAndHolds(0));
  absl::StatusOr<std::vector<JobUpdate>> all = store_->ReadUpdates("j-1", 0, 0, false);
  ASSERT_OK(all);
  EXPECT_THAT(Seqs(*all), ElementsAre(1, 2));

  // The store is still usable, and an empty batch is a no-op.
  EXPECT_OK(store_->AppendUpdates("j-1", {}));
  EXPECT_OK(store_->AppendUpdates("j-1", {Event(3, "ok")}));
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(3));
}

TEST_F(StoreTest, BatchIsAllOrNothing) {
  ASSERT_OK(store_->AppendLogs("j-1", {Line(1, 0, "old")}));
  // A job row, its event, a log line and a meta key in one batch whose last part is
  // invalid (log seq 1 is taken): none of it may be written.
  WriteBatch bad;
  bad.jobs.push_back(MakeJob("j-1", baton::v1::JOB_STATE_QUEUED));
  bad.updates["j-1"] = {Event(1, "Submitted")};
  bad.logs["j-1"] = {Line(1, 0, "dup")};
  bad.meta["next_job_number"] = "2";
  EXPECT_THAT(store_->Write(bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 1")));
  EXPECT_THAT(store_->LoadJobs(), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(0));
  EXPECT_THAT(store_->GetMeta("next_job_number"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("next_job_number")));

  WriteBatch good = bad;
  good.logs["j-1"] = {Line(2, 0, "new")};
  ASSERT_OK(store_->Write(good));
  EXPECT_THAT(store_->LoadJobs(), IsOkAndHolds(Pointwise(ProtoEq(), good.jobs)));
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(1));
  EXPECT_THAT(store_->LastLogSeq("j-1"), IsOkAndHolds(2));
  EXPECT_THAT(store_->GetMeta("next_job_number"), IsOkAndHolds("2"));
}

TEST_F(StoreTest, PruneKeepsTheNewestPointsAndLogBytesAndEveryEvent) {
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  std::vector<JobUpdate> updates;
  std::vector<LogLine> lines;
  for (int64_t seq = 1; seq <= 20; ++seq) {
    JobUpdate u = seq % 5 == 0 ? Event(seq, "e") : Metric(seq, 1.0);
    google::protobuf::Timestamp* t =
        u.has_metric() ? u.mutable_metric()->mutable_time() : u.mutable_event()->mutable_time();
    t->set_seconds(absl::ToUnixSeconds(t0 + absl::Seconds(seq)));
    updates.push_back(u);
    LogLine line = Line(seq, 0, std::string(10, 'a'));
    line.mutable_time()->set_seconds(absl::ToUnixSeconds(t0 + absl::Seconds(seq)));
    lines.push_back(line);
  }
  ASSERT_OK(store_->AppendUpdates("j-1", updates));
  ASSERT_OK(store_->AppendLogs("j-1", lines));
  ASSERT_OK(store_->AppendUpdates("j-2", {Metric(1, 1.0)}));

  RetentionLimits limits;
  limits.max_points = 6;      // of 16 points
  limits.max_log_bytes = 35;  // 3 lines of 10 bytes
  limits.min_time = t0 + absl::Seconds(3);
  // Points: age removes 1, 2; count keeps 14, 16, 17, 18, 19 and 13 (events 5..20 stay).
  absl::StatusOr<int64_t> deleted = store_->Prune("j-1", limits);
  ASSERT_OK(deleted);
  absl::StatusOr<std::vector<JobUpdate>> left = store_->ReadUpdates("j-1", 0, 0, false);
  ASSERT_OK(left);
  EXPECT_THAT(Seqs(*left), ElementsAre(5, 10, 13, 14, 15, 16, 17, 18, 19, 20));
  absl::StatusOr<std::vector<LogLine>> logs = store_->ReadLogs("j-1", -1, 0, 0);
  ASSERT_OK(logs);
  ASSERT_EQ(logs->size(), 3u);
  EXPECT_EQ((*logs)[0].seq(), 18);
  EXPECT_EQ(*deleted, 10 + 17);
  // Other jobs are untouched; a second prune finds nothing.
  EXPECT_THAT(store_->LastUpdateSeq("j-2"), IsOkAndHolds(1));
  EXPECT_THAT(store_->Prune("j-1", limits), IsOkAndHolds(0));
}

TEST_F(StoreTest, DeletedJobsLeaveNothing) {
  ASSERT_OK(store_->PutJob(MakeJob("j-1", baton::v1::JOB_STATE_SUCCEEDED)));
  ASSERT_OK(store_->PutJob(MakeJob("j-2", baton::v1::JOB_STATE_RUNNING)));
  ASSERT_OK(store_->AppendUpdates("j-1", {Event(1, "a")}));
  ASSERT_OK(store_->AppendLogs("j-1", {Line(1, 0, "x")}));
  WriteBatch batch;
  batch.delete_jobs.push_back("j-1");
  ASSERT_OK(store_->Write(batch));
  absl::StatusOr<std::vector<Job>> jobs = store_->LoadJobs();
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "j-2");
  EXPECT_THAT(store_->LastUpdateSeq("j-1"), IsOkAndHolds(0));
  EXPECT_THAT(store_->LastLogSeq("j-1"), IsOkAndHolds(0));
}

TEST_F(StoreTest, LogsByRankAndAll) {
  const std::vector<LogLine> lines = {Line(1, 0, "r0 a"), Line(2, 1, "r1 a"),
                                      Line(3, 0, "r0 b"), Line(4, 1, "r1 b"),
                                      Line(5, 0, "r0 c")};
  ASSERT_OK(store_->AppendLogs("j-1", {lines[0], lines[1]}));
  ASSERT_OK(store_->AppendLogs("j-1", {lines[2], lines[3], lines[4]}));
  ASSERT_OK(store_->AppendLogs("j-2", {Line(1, 0, "other job")}));

  absl::StatusOr<std::vector<LogLine>> all = store_->ReadLogs("j-1", -1, 0, 0);
  ASSERT_OK(all);
  EXPECT_THAT(*all, Pointwise(ProtoEq(), lines));

  absl::StatusOr<std::vector<LogLine>> rank0 = store_->ReadLogs("j-1", 0, 0, 0);
  ASSERT_OK(rank0);
  EXPECT_THAT(Seqs(*rank0), ElementsAre(1, 3, 5));

  absl::StatusOr<std::vector<LogLine>> rank1_after = store_->ReadLogs("j-1", 1, 2, 0);
  ASSERT_OK(rank1_after);
  EXPECT_THAT(Seqs(*rank1_after), ElementsAre(4));

  absl::StatusOr<std::vector<LogLine>> all_limited = store_->ReadLogs("j-1", -1, 1, 3);
  ASSERT_OK(all_limited);
  EXPECT_THAT(Seqs(*all_limited), ElementsAre(2, 3, 4));

  absl::StatusOr<std::vector<LogLine>> rank0_limited = store_->ReadLogs("j-1", 0, 0, 2);
  ASSERT_OK(rank0_limited);
  EXPECT_THAT(Seqs(*rank0_limited), ElementsAre(1, 3));

  EXPECT_THAT(store_->LastLogSeq("j-1"), IsOkAndHolds(5));
  EXPECT_THAT(store_->LastLogSeq("j-2"), IsOkAndHolds(1));
}

// The n-th last line of a rank (or of all), among those written since a time; its seq
// starts a tail. Times need not follow seqs.
TEST_F(StoreTest, NthLastLogSeqByRankAndTime) {
  std::vector<LogLine> lines;
  for (int seq = 1; seq <= 8; ++seq) {
    lines.push_back(Line(seq, seq % 2, "x"));
    lines.back().mutable_time()->set_seconds(seq == 7 ? 1 : seq);  // 7 is old
  }
  ASSERT_OK(store_->AppendLogs("j-1", lines));
  ASSERT_OK(store_->AppendLogs("j-2", {Line(1, 0, "other job")}));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", -1, 0, 1), IsOkAndHolds(8));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", -1, 0, 3), IsOkAndHolds(6));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", 1, 0, 2), IsOkAndHolds(5));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", 1, 2'000'000, 1), IsOkAndHolds(5))
      << "seq 7 of rank 1 is older than the bound";
  EXPECT_THAT(store_->NthLastLogSeq("j-1", 1, 2'000'000, 2), IsOkAndHolds(3));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", 1, 2'000'000, 3), IsOkAndHolds(0)) << "too few";
  EXPECT_THAT(store_->NthLastLogSeq("j-1", 0, 0, 4), IsOkAndHolds(2));
  EXPECT_THAT(store_->NthLastLogSeq("j-3", -1, 0, 1), IsOkAndHolds(0));
  EXPECT_THAT(store_->NthLastLogSeq("j-1", -1, 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("n is 0")));
}

TEST_F(StoreTest, NonIncreasingLogSeqWritesNothing) {
  ASSERT_OK(store_->AppendLogs("j-1", {Line(1, 0, "a")}));
  EXPECT_THAT(store_->AppendLogs("j-1", {Line(2, 0, "b"), Line(2, 1, "dup")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 2")));
  EXPECT_THAT(store_->LastLogSeq("j-1"), IsOkAndHolds(1));
}

TEST_F(StoreTest, Meta) {
  EXPECT_THAT(store_->GetMeta("next_job"), StatusIs(absl::StatusCode::kNotFound,
                                                    HasSubstr("next_job")));
  ASSERT_OK(store_->SetMeta("next_job", "7"));
  EXPECT_THAT(store_->GetMeta("next_job"), IsOkAndHolds(std::string("7")));
  ASSERT_OK(store_->SetMeta("next_job", "8"));
  EXPECT_THAT(store_->GetMeta("next_job"), IsOkAndHolds(std::string("8")));

  const std::string binary("a\0b", 3);
  ASSERT_OK(store_->SetMeta("binary", binary));
  EXPECT_THAT(store_->GetMeta("binary"), IsOkAndHolds(binary));
  ASSERT_OK(store_->SetMeta("empty", ""));
  EXPECT_THAT(store_->GetMeta("empty"), IsOkAndHolds(std::string()));

  EXPECT_THAT(store_->SetMeta("schema_version", "99"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reserved")));
}

// ---------------------------------------------------------------------------------------
// File-backed databases.
// ---------------------------------------------------------------------------------------

TEST(StoreFileTest, ReopenFindsEverything) {
  const std::string path = TempDbPath();
  const Job job = MakeJob("j-000001", baton::v1::JOB_STATE_RUNNING);
  const std::vector<JobUpdate> updates = {Event(1, "Submitted"), Metric(2, 0.25)};
  const std::vector<LogLine> lines = {Line(1, 0, "hello"), Line(2, 1, "world")};
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_OK(store);
    ASSERT_OK((*store)->PutJob(job));
    ASSERT_OK((*store)->AppendUpdates(job.id(), updates));
    ASSERT_OK((*store)->AppendLogs(job.id(), lines));
    ASSERT_OK((*store)->SetMeta("next_job", "2"));
  }
  EXPECT_EQ(RawSql(path, "PRAGMA journal_mode"), "wal");

  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_OK(store);
  absl::StatusOr<std::vector<Job>> jobs = (*store)->LoadJobs();
  ASSERT_OK(jobs);
  EXPECT_THAT(*jobs, Pointwise(ProtoEq(), {job}));
  absl::StatusOr<std::vector<JobUpdate>> read_updates =
      (*store)->ReadUpdates(job.id(), 0, 0, false);
  ASSERT_OK(read_updates);
  EXPECT_THAT(*read_updates, Pointwise(ProtoEq(), updates));
  absl::StatusOr<std::vector<LogLine>> read_lines = (*store)->ReadLogs(job.id(), -1, 0, 0);
  ASSERT_OK(read_lines);
  EXPECT_THAT(*read_lines, Pointwise(ProtoEq(), lines));
  EXPECT_THAT((*store)->GetMeta("next_job"), IsOkAndHolds(std::string("2")));
  // The sequence rule holds across reopen.
  EXPECT_THAT((*store)->AppendUpdates(job.id(), {Event(2, "dup")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq 2")));
}

TEST(StoreFileTest, NewerSchemaVersionIsFailedPrecondition) {
  const std::string path = TempDbPath();
  ASSERT_OK(Store::Open(path));
  RawSql(path, "UPDATE meta SET value = '3' WHERE key = 'schema_version'");

  EXPECT_THAT(Store::Open(path), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("schema_version 3 is newer")));
}

// A file of schema 1 (no time or size columns) is migrated in place and keeps its rows;
// they have no time, so age never prunes them.
TEST(StoreFileTest, SchemaOneIsMigrated) {
  const std::string path = TempDbPath();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
         "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;"
         "INSERT INTO meta VALUES ('schema_version', '1');"
         "CREATE TABLE jobs (ord INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, job BLOB NOT NULL);"
         "CREATE TABLE updates (job_id TEXT NOT NULL, seq INTEGER NOT NULL, is_metric INTEGER "
         "NOT NULL, body BLOB NOT NULL, PRIMARY KEY (job_id, seq)) WITHOUT ROWID;"
         "CREATE TABLE logs (job_id TEXT NOT NULL, seq INTEGER NOT NULL, rank INTEGER NOT NULL, "
         "body BLOB NOT NULL, PRIMARY KEY (job_id, seq)) WITHOUT ROWID;"
         "CREATE INDEX logs_by_rank ON logs (job_id, rank, seq);"
         "INSERT INTO updates VALUES ('j-1', 1, 1, x'');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_OK(store);
  EXPECT_THAT((*store)->LastUpdateSeq("j-1"), IsOkAndHolds(1));
  RetentionLimits limits;
  limits.min_time = absl::Now();
  EXPECT_THAT((*store)->Prune("j-1", limits), IsOkAndHolds(0));
  JobUpdate later = Metric(2, 1.0);
  *later.mutable_metric()->mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
  EXPECT_OK((*store)->AppendUpdates("j-1", {later}));
  store->reset();
  EXPECT_OK(Store::Open(path));  // reopening a migrated file changes nothing
}

// The database holds every job's spec (env included): 0600 whatever the umask, and so are
// the files SQLite makes beside it (they take the database's mode).
TEST(StoreFileTest, TheDatabaseFileIsPrivate) {
  const std::string path = TempDbPath();
  const mode_t old_umask = ::umask(0);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ::umask(old_umask);
  ASSERT_OK(store);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);  // An older, wider file is narrowed.
  store->reset();
  ASSERT_OK(Store::Open(path));
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(StoreFileTest, ASymlinkedDatabaseIsRefused) {
  const std::string path = TempDbPath();
  ASSERT_EQ(::symlink((path + ".elsewhere").c_str(), path.c_str()), 0);
  EXPECT_THAT(Store::Open(path), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("symbolic link")));
}

TEST(StoreFileTest, MissingDirectoryIsUnavailable) {
  EXPECT_THAT(Store::Open(absl::StrCat(::testing::TempDir(), "no/such/dir/baton.db")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("directory must exist")));
}

TEST(StoreFileTest, NotADatabaseIsDataLoss) {
  const std::string path = TempDbPath();
  FILE* file = fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  fputs("this is not a SQLite database, not even close; it is long enough to have a header\n",
        file);
  fclose(file);
  EXPECT_THAT(Store::Open(path), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
}

TEST(StoreFileTest, EmptyPathIsInvalid) {
  EXPECT_THAT(Store::Open(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("path")));
}

// ---------------------------------------------------------------------------------------
// Crash safety with a real process and a real SIGKILL.
// ---------------------------------------------------------------------------------------

constexpr char kCrashJob[] = "j-crash";
// Each AppendUpdates call writes a batch of this many updates, so a torn transaction
// would show up as a stored count that is not a multiple of it.
constexpr int64_t kBatch = 3;
constexpr size_t kAcksBeforeKill = 100;

JobUpdate CrashUpdate(int64_t seq) {
  // Big enough that a batch spans several WAL frames' worth of cells.
  return Event(seq, absl::StrCat("r", seq, "-", std::string(512, 'x')));
}

// Appends batches forever, writing each batch's last seq to `ack_fd` once AppendUpdates
// has returned OK. Exits (without running the parent's test machinery) on any error.
[[noreturn]] void RunAppender(const std::string& path, int ack_fd) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  if (!store.ok()) _exit(2);
  for (int64_t next = 1;; next += kBatch) {
    std::vector<JobUpdate> batch;
    for (int64_t seq = next; seq < next + kBatch; ++seq) batch.push_back(CrashUpdate(seq));
    if (!(*store)->AppendUpdates(kCrashJob, batch).ok()) _exit(3);
    const int64_t acked = next + kBatch - 1;
    if (write(ack_fd, &acked, sizeof(acked)) != sizeof(acked)) _exit(4);
  }
}

// Reads one ack; false at EOF (every writer is gone).
bool ReadAck(int fd, int64_t* seq) {
  char* out = reinterpret_cast<char*>(seq);
  size_t got = 0;
  while (got < sizeof(*seq)) {
    const ssize_t n = read(fd, out + got, sizeof(*seq) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

TEST(StoreCrashTest, AcknowledgedAppendsSurviveSigkill) {
  const std::string path = TempDbPath();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // The parent holds no connection to the file across fork(), as SQLite requires.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    RunAppender(path, fds[1]);
  }
  close(fds[1]);

  std::vector<int64_t> acked;
  int64_t seq = 0;
  while (acked.size() < kAcksBeforeKill && ReadAck(fds[0], &seq)) acked.push_back(seq);
  // The child is mid-append (it never stops on its own).
  kill(child, SIGKILL);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "appender exited by itself, status " << wait_status << ", after " << acked.size()
      << " acks";
  ASSERT_EQ(acked.size(), kAcksBeforeKill);
  // Acks written between our last read and the kill are acknowledged too.
  while (ReadAck(fds[0], &seq)) acked.push_back(seq);
  close(fds[0]);
  const int64_t last_acked = acked.back();

  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_OK(store);
  absl::StatusOr<int64_t> last = (*store)->LastUpdateSeq(kCrashJob);
  ASSERT_OK(last);
  EXPECT_GE(*last, last_acked);
  // At most the one batch in flight at the kill can be there without an ack, and only whole.
  EXPECT_LE(*last, last_acked + kBatch);
  EXPECT_EQ(*last % kBatch, 0) << "a batch was stored in part";

  absl::StatusOr<std::vector<JobUpdate>> updates =
      (*store)->ReadUpdates(kCrashJob, 0, 0, false);
  ASSERT_OK(updates);
  ASSERT_EQ(static_cast<int64_t>(updates->size()), *last);
  for (int64_t i = 0; i < *last; ++i) {
    ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*updates)[i],
                                                                   CrashUpdate(i + 1)))
        << "update " << i + 1 << " is " << (*updates)[i].ShortDebugString();
  }

  EXPECT_EQ(RawSql(path, "PRAGMA integrity_check"), "ok");
  // The recovered store accepts the next append.
  EXPECT_OK((*store)->AppendUpdates(kCrashJob, {CrashUpdate(*last + 1)}));
}

}  // namespace
}  // namespace baton::coordinator
