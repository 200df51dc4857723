#include "worker/agent/report_ledger.h"

#include "common/logging.h"

namespace baton::worker {

void ReportLedger::ReadFactsLocked() {
  std::map<Key, Record> read;
  for (AssignmentFacts& facts : source_->ListFacts()) {
    Key key(facts.job_id, facts.generation);
    auto it = records_.find(key);
    Record r = it != records_.end() ? std::move(it->second) : Record();
    r.facts = std::move(facts);
    read.emplace(std::move(key), std::move(r));
  }
  records_ = std::move(read);
}

ReportLedger::PendingReports ReportLedger::GetPending() {
  PendingReports out;
  absl::MutexLock lock(&mu_);
  ReadFactsLocked();
  for (const auto& [key, r] : records_) {
    const AssignmentFacts& f = r.facts;
    if (f.failure.has_value()) {
      if (!r.failure_reported) out.failed.push_back(*f.failure);
      continue;
    }
    if (r.start_reported < f.start_requests) {
      baton::v1::AssignmentStarted started;
      started.set_job_id(f.job_id);
      started.set_generation(f.generation);
      for (const baton::v1::RankInfo& rank : f.ranks) {
        baton::v1::RankInfo* info = started.add_ranks();
        *info = rank;
        info->clear_exit();
      }
      out.started.push_back(std::move(started));
    }
    for (const baton::v1::RankInfo& rank : f.ranks) {
      if (!rank.has_exit() || r.exits_reported.count(rank.rank()) > 0) continue;
      baton::v1::ProcessExited exited;
      exited.set_job_id(f.job_id);
      exited.set_generation(f.generation);
      exited.set_rank(rank.rank());
      *exited.mutable_exit() = rank.exit();
      out.exited.push_back(std::move(exited));
    }
  }
  return out;
}

void ReportLedger::MarkSent(const baton::v1::AssignmentFailed& failed) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find({failed.job_id(), failed.generation()});
  if (it == records_.end() || !it->second.facts.failure.has_value()) return;
  it->second.failure_reported = true;
  MaybeForgetLocked(it);
}

void ReportLedger::MarkSent(const baton::v1::AssignmentStarted& started) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find({started.job_id(), started.generation()});
  if (it == records_.end() || it->second.facts.failure.has_value()) return;
  it->second.start_reported = it->second.facts.start_requests;
  MaybeForgetLocked(it);
}

void ReportLedger::MarkSent(const baton::v1::ProcessExited& exited) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find({exited.job_id(), exited.generation()});
  if (it == records_.end()) return;
  MarkExitReported(it->second, exited.rank());
  MaybeForgetLocked(it);
}

std::vector<baton::v1::AssignmentStatus> ReportLedger::Snapshot() {
  std::vector<baton::v1::AssignmentStatus> out;
  absl::MutexLock lock(&mu_);
  ReadFactsLocked();
  for (const auto& [key, r] : records_) {
    if (r.facts.failure.has_value()) continue;
    baton::v1::AssignmentStatus status;
    status.set_job_id(r.facts.job_id);
    status.set_generation(r.facts.generation);
    for (const baton::v1::RankInfo& rank : r.facts.ranks) *status.add_ranks() = rank;
    out.push_back(std::move(status));
  }
  return out;
}

void ReportLedger::MarkRegistered(const std::vector<baton::v1::AssignmentStatus>& snapshot) {
  absl::MutexLock lock(&mu_);
  for (const baton::v1::AssignmentStatus& status : snapshot) {
    auto it = records_.find({status.job_id(), status.generation()});
    if (it == records_.end() || it->second.facts.failure.has_value()) continue;
    it->second.start_reported = it->second.facts.start_requests;
    for (const baton::v1::RankInfo& rank : status.ranks()) {
      if (rank.has_exit()) MarkExitReported(it->second, rank.rank());
    }
    MaybeForgetLocked(it);
  }
}

void ReportLedger::MarkExitReported(Record& r, int32_t rank) {
  for (const baton::v1::RankInfo& info : r.facts.ranks) {
    if (info.rank() == rank && info.has_exit()) r.exits_reported.insert(rank);
  }
}

void ReportLedger::MaybeForgetLocked(std::map<Key, Record>::iterator it) {
  const Record& r = it->second;
  const AssignmentFacts& f = r.facts;
  if (f.failure.has_value()) {
    if (!r.failure_reported) return;
  } else {
    if (r.start_reported < f.start_requests) return;
    for (const baton::v1::RankInfo& rank : f.ranks) {
      if (r.exits_reported.count(rank.rank()) == 0) return;  // Only exited ranks are marked.
    }
  }
  const absl::Status forgotten = source_->Forget(f.job_id, f.generation, f.start_requests);
  if (forgotten.ok() || absl::IsNotFound(forgotten)) {
    records_.erase(it);
    return;
  }
  // Its start was asked for again: the next read lists it as pending.
  BATON_LOG(INFO) << "job " << f.job_id << " gen " << f.generation
                  << " is not forgotten yet: " << forgotten;
}

}  // namespace baton::worker
