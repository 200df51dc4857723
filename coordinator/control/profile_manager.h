#pragma once

// `baton profile`: JobService.ProfileJob -> ProfileRanks to the ranks' workers ->
// ProfileTrace back -> the reply. The plan (which ranks, from which step, until when) is
// PlanProfile's (policy/profile_plan.h); the requests in flight are the ProfileTable's.
//
// Threading: not thread-safe; the coordinator's event loop is its only caller.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "baton/v1/job_service.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "coordinator/control/control_context.h"
#include "coordinator/control/profile_table.h"

namespace baton::coordinator {

class ProfileManager {
 public:
  // `ctx` must outlive this object.
  explicit ProfileManager(ControlContext* ctx);

  // Validates the request, sends ProfileRanks to the workers of the asked ranks and returns
  // OK; `done` is then called exactly once, later, with every rank's trace or the failure
  // (ProfileTable's contract; also UNAVAILABLE if the generation ends or a worker of a
  // missing rank is lost, see CheckProfiles). On an error returned here `done` is never
  // called: INVALID_ARGUMENT (steps outside [1, kMaxProfileSteps], a rank outside [0,
  // world), a timeout outside (0, kMaxProfileTimeout]), NOT_FOUND, FAILED_PRECONDITION (not
  // RUNNING, a command job, no step reported yet by this generation, a worker older than
  // protocol version 4), RESOURCE_EXHAUSTED (the table is full), UNAVAILABLE (halted, or a
  // worker is not connected).
  absl::Status ProfileJob(const baton::v1::ProfileJobRequest& request, ProfileTable::Done done);
  // A worker's ProfileTrace: into the table (a foreign one is refused, a stale one logged
  // and dropped).
  void OnProfileTrace(const std::string& worker_id, const baton::v1::ProfileTrace& trace);
  // Each reconcile: expires profiles past their deadline and fails those whose generation
  // is no longer RUNNING or whose missing ranks' worker is not connected.
  void CheckProfiles();
  // Fails every profile in flight with `status` (the coordinator halted).
  void FailAll(const absl::Status& status) { profiles_.FailAll(status); }
  // Profiles in flight.
  size_t in_flight() const { return profiles_.size(); }

 private:
  ControlContext* const ctx_;
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  ProfileTable profiles_;
};

}  // namespace baton::coordinator
