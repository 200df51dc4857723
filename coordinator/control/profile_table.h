#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job_service.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"

namespace baton::coordinator {

// The profiles in flight (JobService.ProfileJob): for each, the ranks asked and the worker
// of each, the traces that arrived, its deadline and the reply to finish.
//
// Contract: every request added is finished exactly once, through its `done`: OK with every
// asked rank's trace in rank order once the last one arrived; INTERNAL if a rank answered
// with an error (naming it); RESOURCE_EXHAUSTED if the traces together exceed
// kMaxProfileResponseBytes; DEADLINE_EXCEEDED (ExpireDue) or UNAVAILABLE/ABORTED (Fail,
// FailWhere) naming the ranks still missing. `done` runs after the request left the table,
// so it may add another.
//
// Bounded: at most `max_pending` requests are in flight (Add answers RESOURCE_EXHAUSTED
// beyond), and each waits until its deadline at most (the caller runs ExpireDue regularly).
//
// Threading: not thread-safe; the coordinator's event loop owns it.
class ProfileTable {
 public:
  using Done = std::function<void(absl::StatusOr<baton::v1::ProfileJobResponse>)>;

  static constexpr size_t kDefaultMaxPending = 16;

  struct Request {
    std::string job_id;
    int64_t generation = 0;
    // Every asked rank and the worker that runs it. Must not be empty.
    std::map<int32_t, std::string> rank_workers;
    absl::Time deadline = absl::InfiniteFuture();
    Done done;
  };

  // `clock` must outlive the table.
  explicit ProfileTable(const Clock* clock, size_t max_pending = kDefaultMaxPending);

  // Adds a request and returns its id (1-64 of [A-Za-z0-9._-], unique in this process and,
  // as it includes the time, across restarts). RESOURCE_EXHAUSTED (naming the bound) when
  // max_pending requests are in flight; INVALID_ARGUMENT for a request without ranks or
  // without `done`. On error `done` is not called.
  absl::StatusOr<std::string> Add(Request request);

  // One rank's answer, from `worker_id`. NOT_FOUND for an unknown request (finished,
  // expired, or from before a coordinator restart); PERMISSION_DENIED if the rank was not
  // asked of that worker, or the job/generation differ; ALREADY_EXISTS for a second answer
  // of a rank. Otherwise OK, and the request finishes if it was the last rank missing.
  absl::Status OnTrace(const std::string& worker_id, const baton::v1::ProfileTrace& trace);

  // Finishes every request whose deadline is at or before now with DEADLINE_EXCEEDED
  // naming the missing ranks. Returns how many.
  int ExpireDue();

  // Finishes every request for which `pred(job_id, generation, missing rank -> worker)`
  // returns a non-OK status with that status (its message gets the missing ranks appended).
  using Check = std::function<absl::Status(const std::string& job_id, int64_t generation,
                                           const std::map<int32_t, std::string>& missing)>;
  void FailWhere(const Check& check);

  // Finishes every request with `status` (the coordinator halts).
  void FailAll(const absl::Status& status);

  size_t size() const { return pending_.size(); }
  size_t max_pending() const { return max_pending_; }

 private:
  struct Entry {
    Request request;
    std::map<int32_t, baton::v1::ProfileTrace> answers;  // by rank
  };

  // The asked ranks without an answer, with their workers.
  static std::map<int32_t, std::string> Missing(const Entry& entry);
  // `status` with " (missing: rank 1 on worker w2, ...)" appended.
  static absl::Status WithMissing(const absl::Status& status, const Entry& entry);
  // Every rank answered: the response, or the first rank's error, or the size bound.
  static absl::StatusOr<baton::v1::ProfileJobResponse> Result(const Entry& entry);
  // Removes `id` and calls its done with `result`.
  void Finish(const std::string& id, absl::StatusOr<baton::v1::ProfileJobResponse> result);

  const Clock* const clock_;
  const size_t max_pending_;
  uint64_t next_id_ = 1;
  std::map<std::string, Entry> pending_;  // by request id; size() <= max_pending_
};

}  // namespace baton::coordinator
