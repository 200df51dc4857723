#include "coordinator/policy/profile_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {

namespace {

// Fills plan->rank_workers (the asked ranks, or all) and plan->by_worker. Errors:
// INVALID_ARGUMENT (a rank outside [0, world)), UNAVAILABLE (a worker not connected),
// FAILED_PRECONDITION (a worker older than kProfileProtocolVersion).
absl::Status PlanRanks(const baton::v1::ProfileJobRequest& request, const ProfileFacts& facts,
                       ProfilePlan* plan) {
  const baton::v1::Job& job = *facts.job;
  const int32_t world = job.ranks_size();
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (request.ranks().empty()) plan->rank_workers[r.rank()] = r.worker_id();
  }
  for (int32_t rank : request.ranks()) {
    if (rank < 0 || rank >= world) {
      return absl::InvalidArgumentError(absl::StrCat("ranks: ", rank,
                                                     " is outside the allowed range [0, ", world,
                                                     ") of job ", job.id(), "'s world size"));
    }
    for (const baton::v1::RankInfo& r : job.ranks()) {
      if (r.rank() == rank) plan->rank_workers[rank] = r.worker_id();
    }
  }
  // Every worker asked must be connected and speak version 4.
  for (const auto& [rank, worker] : plan->rank_workers) plan->by_worker[worker].push_back(rank);
  for (const auto& [worker, ranks] : plan->by_worker) {
    const auto it = facts.workers.find(worker);
    const ProfileWorkerFacts w = it == facts.workers.end() ? ProfileWorkerFacts() : it->second;
    if (!w.connected) {
      return absl::UnavailableError(
          absl::StrCat("worker ", worker, " (ranks of job ", job.id(), ") is not connected"));
    }
    if (w.protocol_version < kProfileProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker, " speaks protocol version ", w.protocol_version,
          "; profiling needs version ", kProfileProtocolVersion, " or newer (upgrade the worker)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProfilePlan> PlanProfile(const baton::v1::ProfileJobRequest& request,
                                        const ProfileFacts& facts) {
  if (request.steps() < 1 || request.steps() > kMaxProfileSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "steps: ", request.steps(), " is outside the allowed range [1, ", kMaxProfileSteps, "]"));
  }
  absl::Duration timeout = kDefaultProfileTimeout;  // Unset: see below, once steps are known.
  if (request.has_timeout()) timeout = FromProto(request.timeout());
  if (timeout <= absl::ZeroDuration() || timeout > kMaxProfileTimeout) {
    return absl::InvalidArgumentError(absl::StrCat("timeout: ", absl::FormatDuration(timeout),
                                                   " is outside the allowed range (0, ",
                                                   absl::FormatDuration(kMaxProfileTimeout), "]"));
  }
  const baton::v1::Job& job = *facts.job;
  if (job.state() != baton::v1::JOB_STATE_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " is ",
                                                      baton::v1::JobState_Name(job.state()),
                                                      "; only a RUNNING job can be profiled"));
  }
  if (!job.spec().has_trainer()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " runs a command; profiling needs the built-in trainer"));
  }
  // Before its first step a rank may not have installed its SIGUSR2 handler yet (the
  // signal's default action would kill it); once any rank reported a step, every rank of
  // the generation passed its setup (a step needs them all).
  if (!facts.last_step.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " generation ", job.generation(),
                     " has not reported a step yet; retry once it trains"));
  }
  ProfilePlan plan;
  RETURN_IF_ERROR(PlanRanks(request, facts, &plan));
  // Every rank records the same steps: a window starting far enough ahead of the newest
  // reported step for the metrics' delay and the request's way to each rank.
  const absl::Duration step_time = facts.median_step_time;
  const int64_t lead =
      step_time > absl::ZeroDuration()
          ? std::clamp<int64_t>(absl::ToInt64Milliseconds(kProfileLeadTime) /
                                        std::max<int64_t>(1, absl::ToInt64Milliseconds(step_time)) +
                                    1,
                                1, kMaxProfileLeadSteps)
          : kMaxProfileLeadSteps / 100;
  // Steps are reported every log_every (stored with its default): the ranks may be up to
  // that far past the newest reported step.
  const int64_t log_every = std::max<int64_t>(1, job.spec().trainer().log_every());
  plan.start_step = *facts.last_step + log_every + lead;
  if (!request.has_timeout()) {
    // Slow steps: twice the expected time to the window's end, if that is longer.
    const int64_t steps_to_end = plan.start_step - *facts.last_step + request.steps();
    timeout = std::clamp(2 * step_time * steps_to_end, kDefaultProfileTimeout, kMaxProfileTimeout);
  }
  plan.timeout = timeout;
  return plan;
}

}  // namespace baton::coordinator
