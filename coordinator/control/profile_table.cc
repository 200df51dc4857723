#include "coordinator/control/profile_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/message_limits.h"

namespace baton::coordinator {

ProfileTable::ProfileTable(const Clock* clock, size_t max_pending)
    : clock_(clock), max_pending_(max_pending) {}

absl::StatusOr<std::string> ProfileTable::Add(Request request) {
  if (request.rank_workers.empty()) {
    return absl::InvalidArgumentError("a profile request needs at least one rank");
  }
  if (!request.done) return absl::InvalidArgumentError("a profile request needs a reply");
  if (pending_.size() >= max_pending_) {
    return absl::ResourceExhaustedError(absl::StrCat(pending_.size(),
                                                     " profiles are in flight, at most ",
                                                     max_pending_, "; retry once one finished"));
  }
  const std::string id = absl::StrCat("p", next_id_++, "-", absl::ToUnixMillis(clock_->Now()));
  pending_[id].request = std::move(request);
  return id;
}

absl::Status ProfileTable::OnTrace(const std::string& worker_id,
                                   const baton::v1::ProfileTrace& trace) {
  auto it = pending_.find(trace.request_id());
  if (it == pending_.end()) {
    return absl::NotFoundError(absl::StrCat("no profile request '", trace.request_id(),
                                            "' in flight (finished or expired)"));
  }
  Entry& entry = it->second;
  const auto asked = entry.request.rank_workers.find(trace.rank());
  if (trace.job_id() != entry.request.job_id || trace.generation() != entry.request.generation ||
      asked == entry.request.rank_workers.end() || asked->second != worker_id) {
    return absl::PermissionDeniedError(absl::StrCat(
        "profile request ", trace.request_id(), " did not ask worker ", worker_id, " for rank ",
        trace.rank(), " of job ", trace.job_id(), " generation ", trace.generation()));
  }
  if (!entry.answers.emplace(trace.rank(), trace).second) {
    return absl::AlreadyExistsError(absl::StrCat("profile request ", trace.request_id(), ": rank ",
                                                 trace.rank(), " answered twice"));
  }
  if (entry.answers.size() == entry.request.rank_workers.size()) {
    Finish(it->first, Result(entry));
  }
  return absl::OkStatus();
}

int ProfileTable::ExpireDue() {
  const absl::Time now = clock_->Now();
  std::vector<std::string> due;
  for (const auto& [id, entry] : pending_) {
    if (entry.request.deadline <= now) due.push_back(id);
  }
  for (const std::string& id : due) {
    const Entry& entry = pending_.at(id);
    Finish(id, WithMissing(
                   absl::DeadlineExceededError(absl::StrCat("not every rank sent its trace of job ",
                                                            entry.request.job_id, " in time")),
                   entry));
  }
  return static_cast<int>(due.size());
}

void ProfileTable::FailWhere(const Check& check) {
  std::vector<std::pair<std::string, absl::Status>> failed;
  for (const auto& [id, entry] : pending_) {
    absl::Status s = check(entry.request.job_id, entry.request.generation, Missing(entry));
    if (!s.ok()) failed.emplace_back(id, WithMissing(s, entry));
  }
  for (auto& [id, status] : failed) Finish(id, std::move(status));
}

void ProfileTable::FailAll(const absl::Status& status) {
  while (!pending_.empty()) Finish(pending_.begin()->first, status);
}

std::map<int32_t, std::string> ProfileTable::Missing(const Entry& entry) {
  std::map<int32_t, std::string> missing;
  for (const auto& [rank, worker] : entry.request.rank_workers) {
    if (entry.answers.count(rank) == 0) missing.emplace(rank, worker);
  }
  return missing;
}

absl::Status ProfileTable::WithMissing(const absl::Status& status, const Entry& entry) {
  std::vector<std::string> parts;
  for (const auto& [rank, worker] : Missing(entry)) {
    parts.push_back(absl::StrCat("rank ", rank, " on worker ", worker));
  }
  return absl::Status(status.code(), absl::StrCat(status.message(),
                                                  " (missing: ", absl::StrJoin(parts, ", "), ")"));
}

absl::StatusOr<baton::v1::ProfileJobResponse> ProfileTable::Result(const Entry& entry) {
  baton::v1::ProfileJobResponse response;
  response.set_job_id(entry.request.job_id);
  response.set_generation(entry.request.generation);
  int64_t bytes = 0;
  for (const auto& [rank, trace] : entry.answers) {  // rank order
    if (!trace.error().empty()) {
      return absl::InternalError(absl::StrCat("rank ", rank, " on worker ",
                                              entry.request.rank_workers.at(rank),
                                              " sent no trace: ", trace.error()));
    }
    bytes += static_cast<int64_t>(trace.trace_json().size());
    baton::v1::RankTrace* out = response.add_traces();
    out->set_rank(rank);
    out->set_trace_json(trace.trace_json());
  }
  if (bytes > kMaxProfileResponseBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the traces of ", entry.answers.size(), " ranks take ", bytes, " bytes, over the ",
        kMaxProfileResponseBytes, " a reply may carry; profile fewer ranks or steps"));
  }
  return response;
}

void ProfileTable::Finish(const std::string& id,
                          absl::StatusOr<baton::v1::ProfileJobResponse> result) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Done done = std::move(it->second.request.done);
  pending_.erase(it);
  done(std::move(result));
}

}  // namespace baton::coordinator
