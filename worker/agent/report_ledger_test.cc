#include "worker/agent/report_ledger.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A Supervisor's facts as a table the test edits, with the Supervisor's Forget contract.
class FakeFactSource final : public AssignmentFactSource {
 public:
  std::vector<AssignmentFacts> ListFacts() const override {
    std::vector<AssignmentFacts> out;
    for (const auto& [job, facts] : facts_) out.push_back(facts);
    return out;
  }
  absl::Status Forget(const std::string& job_id, int64_t generation,
                      int64_t start_requests) override {
    auto it = facts_.find(job_id);
    if (it == facts_.end() || it->second.generation != generation) {
      return absl::NotFoundError(job_id);
    }
    for (const baton::v1::RankInfo& r : it->second.ranks) {
      if (!r.has_exit()) return absl::FailedPreconditionError("a rank runs");
    }
    if (it->second.start_requests != start_requests) {
      return absl::FailedPreconditionError("asked to start again");
    }
    facts_.erase(it);
    return absl::OkStatus();
  }

  // Every job is at generation 1.
  void Launch(const std::string& job, int ranks) {
    AssignmentFacts& f = facts_[job];
    f.job_id = job;
    f.generation = 1;
    f.start_requests = 1;
    for (int r = 0; r < ranks; ++r) {
      baton::v1::RankInfo* info = &f.ranks.emplace_back();
      info->set_rank(r);
      info->set_pid(1000 + r);
    }
  }
  void Exit(const std::string& job, int rank) {
    facts_.at(job).ranks.at(rank).mutable_exit()->set_exit_code(rank + 10);
  }
  void Fail(const std::string& job) {
    AssignmentFacts& f = facts_[job];
    f.job_id = job;
    f.generation = 1;
    f.failure.emplace();
    f.failure->set_job_id(job);
    f.failure->set_generation(1);
    f.failure->set_reason("LaunchFailed");
  }
  void RequestStart(const std::string& job) { ++facts_.at(job).start_requests; }
  // Gone without a Forget (a source that lost it).
  void Drop(const std::string& job) { facts_.erase(job); }

  std::vector<std::string> jobs() const {
    std::vector<std::string> out;
    for (const auto& [job, facts] : facts_) out.push_back(job);
    return out;
  }

 private:
  std::map<std::string, AssignmentFacts> facts_;  // By job; every one at generation 1.
};

// One thing that happens: a fact published, the writer's read, a report recorded, a
// Register built or acknowledged.
struct Step {
  enum class Op {
    kLaunch,        // `job` launched with `n` ranks.
    kExit,          // Rank `n` of `job` exited.
    kFail,          // `job` failed (none of its processes runs).
    kRequestStart,  // StartAssignment of the launched `job` again.
    kDrop,          // The source no longer lists `job` (never forgotten through the ledger).
    kRead,          // The writer reads what is pending (GetPending).
    kSentFailed,    // MarkSent(AssignmentFailed of `job`).
    kSentStarted,   // MarkSent(AssignmentStarted of `job`).
    kSentExited,    // MarkSent(ProcessExited of rank `n` of `job`).
    kSnapshot,      // A Register is built (Snapshot).
    kRegistered,    // Registered answered the last Register (MarkRegistered).
  };
  Op op;
  std::string job;
  int n = 0;
};

Step Launch(const std::string& job, int ranks) { return {Step::Op::kLaunch, job, ranks}; }
Step Exit(const std::string& job, int rank) { return {Step::Op::kExit, job, rank}; }
Step Fail(const std::string& job) { return {Step::Op::kFail, job}; }
Step RequestStart(const std::string& job) { return {Step::Op::kRequestStart, job}; }
Step Drop(const std::string& job) { return {Step::Op::kDrop, job}; }
Step Read() { return {Step::Op::kRead, ""}; }
Step SentFailed(const std::string& job) { return {Step::Op::kSentFailed, job}; }
Step SentStarted(const std::string& job) { return {Step::Op::kSentStarted, job}; }
Step SentExited(const std::string& job, int rank) { return {Step::Op::kSentExited, job, rank}; }
Step TakeSnapshot() { return {Step::Op::kSnapshot, ""}; }
Step Registered() { return {Step::Op::kRegistered, ""}; }

// GetPending() as "failed J", "started J", "exited J/R" in the order to send them.
std::vector<std::string> Describe(const ReportLedger::PendingReports& p) {
  std::vector<std::string> out;
  for (const auto& f : p.failed) out.push_back(absl::StrCat("failed ", f.job_id()));
  for (const auto& s : p.started) out.push_back(absl::StrCat("started ", s.job_id()));
  for (const auto& e : p.exited) out.push_back(absl::StrCat("exited ", e.job_id(), "/", e.rank()));
  return out;
}

struct Case {
  std::string what;
  std::vector<Step> steps;
  std::vector<std::string> pending;  // GetPending() after the steps.
  std::vector<std::string> kept;     // The jobs the source still has (not forgotten).
};

void RunSteps(const Case& c, FakeFactSource& source, ReportLedger& ledger) {
  std::vector<baton::v1::AssignmentStatus> snapshot;
  for (const Step& s : c.steps) {
    switch (s.op) {
      case Step::Op::kLaunch:
        source.Launch(s.job, s.n);
        break;
      case Step::Op::kExit:
        source.Exit(s.job, s.n);
        break;
      case Step::Op::kFail:
        source.Fail(s.job);
        break;
      case Step::Op::kRequestStart:
        source.RequestStart(s.job);
        break;
      case Step::Op::kDrop:
        source.Drop(s.job);
        break;
      case Step::Op::kRead:
        (void)ledger.GetPending();
        break;
      case Step::Op::kSentFailed: {
        baton::v1::AssignmentFailed m;
        m.set_job_id(s.job);
        m.set_generation(1);
        ledger.MarkSent(m);
        break;
      }
      case Step::Op::kSentStarted: {
        baton::v1::AssignmentStarted m;
        m.set_job_id(s.job);
        m.set_generation(1);
        ledger.MarkSent(m);
        break;
      }
      case Step::Op::kSentExited: {
        baton::v1::ProcessExited m;
        m.set_job_id(s.job);
        m.set_generation(1);
        m.set_rank(s.n);
        ledger.MarkSent(m);
        break;
      }
      case Step::Op::kSnapshot:
        snapshot = ledger.Snapshot();
        break;
      case Step::Op::kRegistered:
        ledger.MarkRegistered(snapshot);
        break;
    }
  }
}

TEST(ReportLedgerTest, Table) {
  const std::vector<Case> cases = {
      {"nothing launched", {}, {}, {}},
      {"a launch is reported as started", {Launch("a", 2)}, {"started a"}, {"a"}},
      {"level-triggered: listed at every read until it is recorded",
       {Launch("a", 1), Read(), Read()},
       {"started a"},
       {"a"}},
      {"a start recorded is not listed again",
       {Launch("a", 1), Read(), SentStarted("a")},
       {},
       {"a"}},
      {"an exit after the start",
       {Launch("a", 2), Read(), SentStarted("a"), Exit("a", 1)},
       {"exited a/1"},
       {"a"}},
      {"forgotten once its start and every exit were recorded",
       {Launch("a", 2), Read(), SentStarted("a"), Exit("a", 0), Exit("a", 1), Read(),
        SentExited("a", 1), SentExited("a", 0)},
       {},
       {}},
      {"not forgotten while a rank runs",
       {Launch("a", 2), Exit("a", 0), Read(), SentStarted("a"), SentExited("a", 0)},
       {},
       {"a"}},
      {"not forgotten while its start is unrecorded",
       {Launch("a", 1), Exit("a", 0), Read(), SentExited("a", 0)},
       {"started a"},
       {"a"}},
      {"the start is listed before the exits, assignment by assignment",
       {Launch("b", 1), Launch("a", 2), Exit("a", 1), Exit("b", 0)},
       {"started a", "started b", "exited a/1", "exited b/0"},
       {"a", "b"}},
      {"an exit the writer never read is not recorded",
       {Launch("a", 1), Read(), SentStarted("a"), Exit("a", 0), SentExited("a", 0)},
       {"exited a/0"},
       {"a"}},
      {"recording twice is recording once",
       {Launch("a", 2), Exit("a", 0), Read(), SentStarted("a"), SentStarted("a"),
        SentExited("a", 0), SentExited("a", 0)},
       {},
       {"a"}},
      {"a failure is listed instead of a start and exits", {Fail("a")}, {"failed a"}, {"a"}},
      {"failures come first",
       {Launch("a", 1), Fail("b"), Exit("a", 0)},
       {"failed b", "started a", "exited a/0"},
       {"a", "b"}},
      {"a failure recorded is forgotten", {Fail("a"), Read(), SentFailed("a")}, {}, {}},
      {"a start or an exit recorded for a failed assignment changes nothing",
       {Fail("a"), Read(), SentStarted("a"), SentExited("a", 0)},
       {"failed a"},
       {"a"}},
      {"a failure recorded for a launched assignment changes nothing",
       {Launch("a", 1), Exit("a", 0), Read(), SentFailed("a"), SentExited("a", 0)},
       {"started a"},
       {"a"}},
      {"records of what was never listed change nothing",
       {Launch("a", 1), Read(), SentStarted("x"), SentExited("x", 0), SentFailed("x"),
        SentExited("a", 3)},
       {"started a"},
       {"a"}},
      {"a repeated StartAssignment lists the start again",
       {Launch("a", 1), Read(), SentStarted("a"), RequestStart("a")},
       {"started a"},
       {"a"}},
      {"a repeat that came after the read outlives the record of the start read before it",
       {Launch("a", 1), Exit("a", 0), Read(), RequestStart("a"), SentStarted("a"),
        SentExited("a", 0)},
       {"started a"},
       {"a"}},
      {"... and is forgotten once that start was recorded too",
       {Launch("a", 1), Exit("a", 0), Read(), RequestStart("a"), SentStarted("a"),
        SentExited("a", 0), Read(), SentStarted("a")},
       {},
       {}},
      {"a Register acknowledged records the starts and exits it listed",
       {Launch("a", 1), Launch("b", 2), Exit("b", 0), Exit("b", 1), TakeSnapshot(), Registered()},
       {},
       {"a"}},
      {"an exit after the Register was built is still owed",
       {Launch("a", 1), TakeSnapshot(), Exit("a", 0), Registered()},
       {"exited a/0"},
       {"a"}},
      {"a Register never acknowledged records nothing",
       {Launch("a", 1), Exit("a", 0), TakeSnapshot()},
       {"started a", "exited a/0"},
       {"a"}},
      {"a Register does not list a failure, nor acknowledge it",
       {Fail("a"), TakeSnapshot(), Registered()},
       {"failed a"},
       {"a"}},
      {"a new assignment under a forgotten key starts afresh",
       {Launch("a", 1), Exit("a", 0), Read(), SentStarted("a"), SentExited("a", 0), Launch("a", 1)},
       {"started a"},
       {"a"}},
      {"a key the source stopped listing loses its records",
       {Launch("a", 1), Read(), SentStarted("a"), Drop("a"), Read(), Launch("a", 1)},
       {"started a"},
       {"a"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeFactSource source;
    ReportLedger ledger(&source);
    RunSteps(c, source, ledger);
    EXPECT_EQ(Describe(ledger.GetPending()), c.pending);
    EXPECT_EQ(source.jobs(), c.kept);
  }
}

TEST(ReportLedgerTest, ReportsCarryTheFacts) {
  FakeFactSource source;
  ReportLedger ledger(&source);
  source.Launch("a", 2);
  source.Exit("a", 1);
  source.Fail("b");
  const ReportLedger::PendingReports p = ledger.GetPending();

  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_EQ(p.failed[0].job_id(), "b");
  EXPECT_EQ(p.failed[0].reason(), "LaunchFailed");
  // The start lists every rank with its pid and without its exit.
  ASSERT_EQ(p.started.size(), 1u);
  EXPECT_EQ(p.started[0].generation(), 1);
  ASSERT_EQ(p.started[0].ranks_size(), 2);
  EXPECT_EQ(p.started[0].ranks(1).pid(), 1001);
  EXPECT_FALSE(p.started[0].ranks(1).has_exit());
  ASSERT_EQ(p.exited.size(), 1u);
  EXPECT_EQ(p.exited[0].generation(), 1);
  EXPECT_EQ(p.exited[0].rank(), 1);
  EXPECT_EQ(p.exited[0].exit().exit_code(), 11);

  // The Register lists the launched assignment with its pids and exits, not the failure.
  const std::vector<baton::v1::AssignmentStatus> snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_EQ(snapshot[0].job_id(), "a");
  ASSERT_EQ(snapshot[0].ranks_size(), 2);
  EXPECT_EQ(snapshot[0].ranks(0).pid(), 1000);
  EXPECT_FALSE(snapshot[0].ranks(0).has_exit());
  EXPECT_EQ(snapshot[0].ranks(1).exit().exit_code(), 11);
}

}  // namespace
}  // namespace baton::worker
