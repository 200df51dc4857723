#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/worker_service.pb.h"
#include "worker/supervisor/assignment_facts.h"

namespace baton::worker {

// What the coordinator was told about this worker's assignments, and what it is still
// owed. The Supervisor publishes facts (assignment_facts.h: started, failed, ranks exited);
// the ledger turns them into messages, subtracts those recorded as delivered, and tells
// the Supervisor to forget an assignment once everything about it was.
//
// Reports are level-triggered: GetPending() lists what the coordinator has not been told,
// every time it is called, until it is recorded: a failed assignment's AssignmentFailed
// (once none of its processes runs), a launched one's AssignmentStarted (again after each
// repeated StartAssignment of it), and the ProcessExited of each rank that exited. A failed
// assignment never reports AssignmentStarted or ProcessExited. The agent records a report
// with MarkSent() once its Write succeeded, so after a reconnect whatever was not written
// is listed again. Snapshot() lists every launched assignment, with its ranks' pids and
// exits, for a Register; MarkRegistered() records what it carried once the coordinator
// answered that Register with Registered. An assignment is forgotten (Forget) once its
// start was reported and all its ranks' exits were, or once its failure was; a Forget the
// source refuses (the start was asked for again meanwhile) leaves it listed.
//
// Recording what was never listed, or is no longer, changes nothing: a report is keyed by
// (job_id, generation) and rank, and recording it twice is recording it once.
//
// Bounds: one record per assignment the source lists facts of; records of assignments it
// no longer lists are dropped when facts are next read.
//
// Threading: thread-safe. One mutex, held while reading the source and telling it to
// forget (lock order: the ledger's, then the source's), so a Forget never races a read.
class ReportLedger {
 public:
  struct PendingReports {
    std::vector<baton::v1::AssignmentFailed> failed;    // Send these first,
    std::vector<baton::v1::AssignmentStarted> started;  // then these,
    std::vector<baton::v1::ProcessExited> exited;       // then these.
  };

  // `source` must outlive the ledger.
  explicit ReportLedger(AssignmentFactSource* source) : source_(source) {}

  // What the coordinator has not been told, by assignment (ordered by job_id, generation).
  PendingReports GetPending();
  // A report listed by GetPending() was written on the stream.
  void MarkSent(const baton::v1::AssignmentFailed& failed);
  void MarkSent(const baton::v1::AssignmentStarted& started);
  void MarkSent(const baton::v1::ProcessExited& exited);

  // Every launched assignment (not failed ones) with its ranks' pids and exits, for a
  // Register.
  std::vector<baton::v1::AssignmentStatus> Snapshot();
  // The coordinator answered the Register that listed `snapshot` with Registered: each
  // assignment's start, and each exit it listed, was reported.
  void MarkRegistered(const std::vector<baton::v1::AssignmentStatus>& snapshot);

 private:
  using Key = std::pair<std::string, int64_t>;  // (job_id, generation)
  struct Record {
    AssignmentFacts facts;       // As last read from the source.
    int64_t start_reported = 0;  // The facts.start_requests the last reported start answered.
    bool failure_reported = false;
    std::set<int32_t> exits_reported;  // Ranks.
  };

  // Reads the source: records the facts of every assignment listed and drops the records
  // of those no longer listed.
  void ReadFactsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that the exit of `rank` was reported, if the facts say it exited.
  static void MarkExitReported(Record& r, int32_t rank);
  // Tells the source to forget the assignment of `it` if everything about it was reported;
  // drops its record if it did.
  void MaybeForgetLocked(std::map<Key, Record>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AssignmentFactSource* const source_;

  absl::Mutex mu_;
  std::map<Key, Record> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::worker
