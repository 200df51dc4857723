// `baton profile`: JobService.ProfileJob -> ProfileRanks to the ranks' workers ->
// ProfileTrace back -> the reply (see Coordinator::ProfileJob and ProfileTable).

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/control/coordinator.h"

namespace baton::coordinator {

absl::Status Coordinator::ProfileJob(const baton::v1::ProfileJobRequest& request,
                                     ProfileTable::Done done) {
  RETURN_IF_ERROR(halted_);
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
  ASSIGN_OR_RETURN(const JobState state, jobs_->State(request.job_id()));
  const baton::v1::Job& job = *jobs_->Peek(request.job_id());
  if (state != JobState::kRunning) {
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
  const auto rt = runtime_.find(job.id());
  if (rt == runtime_.end() || !rt->second.last_step.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " generation ", job.generation(),
                     " has not reported a step yet; retry once it trains"));
  }
  const int32_t world = job.ranks_size();
  std::map<int32_t, std::string> rank_workers;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (request.ranks().empty()) rank_workers[r.rank()] = r.worker_id();
  }
  for (int32_t rank : request.ranks()) {
    if (rank < 0 || rank >= world) {
      return absl::InvalidArgumentError(absl::StrCat("ranks: ", rank,
                                                     " is outside the allowed range [0, ", world,
                                                     ") of job ", job.id(), "'s world size"));
    }
    for (const baton::v1::RankInfo& r : job.ranks()) {
      if (r.rank() == rank) rank_workers[rank] = r.worker_id();
    }
  }
  // Every worker asked must be connected and speak version 4.
  std::map<std::string, std::vector<int32_t>> by_worker;
  for (const auto& [rank, worker] : rank_workers) by_worker[worker].push_back(rank);
  for (const auto& [worker, ranks] : by_worker) {
    if (!workers_->IsConnected(worker)) {
      return absl::UnavailableError(
          absl::StrCat("worker ", worker, " (ranks of job ", job.id(), ") is not connected"));
    }
    const uint32_t version = workers_->ProtocolVersion(worker);
    if (version < kProfileProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker, " speaks protocol version ", version, "; profiling needs version ",
          kProfileProtocolVersion, " or newer (upgrade the worker)"));
    }
  }
  // Every rank records the same steps: a window starting far enough ahead of the newest
  // reported step for the metrics' delay and the request's way to each rank.
  const absl::Duration step_time = rt->second.stall.MedianStepTime();
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
  const int64_t start_step = *rt->second.last_step + log_every + lead;
  if (!request.has_timeout()) {
    // Slow steps: twice the expected time to the window's end, if that is longer.
    const int64_t steps_to_end = start_step - *rt->second.last_step + request.steps();
    timeout = std::clamp(2 * step_time * steps_to_end, kDefaultProfileTimeout, kMaxProfileTimeout);
  }
  ProfileTable::Request pending;
  pending.job_id = job.id();
  pending.generation = job.generation();
  pending.rank_workers = rank_workers;
  pending.deadline = clock_->Now() + timeout;
  pending.done = std::move(done);
  ASSIGN_OR_RETURN(const std::string id, profiles_.Add(std::move(pending)));
  BATON_LOG(INFO) << "profile " << id << " of job " << job.id() << " generation "
                  << job.generation() << ": " << request.steps() << " steps of "
                  << rank_workers.size() << " rank(s) from step " << start_step;
  std::set<std::string> unsent;
  for (const auto& [worker, ranks] : by_worker) {
    baton::v1::CoordinatorMessage msg;
    baton::v1::ProfileRanks* p = msg.mutable_profile_ranks();
    p->set_job_id(job.id());
    p->set_generation(job.generation());
    p->set_request_id(id);
    for (int32_t rank : ranks) p->add_ranks(rank);
    p->set_steps(request.steps());
    *p->mutable_timeout() = ToProto(timeout);
    p->set_start_step(start_step);
    if (!Send(worker, msg)) unsent.insert(worker);
  }
  if (!unsent.empty()) {
    // Answered through `done`: the request is in the table already.
    profiles_.FailWhere(
        [&](const std::string& job_id, int64_t, const std::map<int32_t, std::string>& missing) {
          for (const auto& [rank, worker] : missing) {
            if (job_id == job.id() && unsent.count(worker) > 0) {
              return absl::UnavailableError(
                  absl::StrCat("cannot send the profile request to worker ", worker));
            }
          }
          return absl::OkStatus();
        });
  }
  return absl::OkStatus();
}

void Coordinator::OnProfileTrace(const std::string& worker_id,
                                 const baton::v1::ProfileTrace& trace) {
  if (absl::Status s = profiles_.OnTrace(worker_id, trace); absl::IsPermissionDenied(s)) {
    RefuseReport(worker_id, "profile_trace", absl::StrCat("a profile trace: ", s.message()));
  } else if (!s.ok()) {
    BATON_LOG(INFO) << "ProfileTrace from worker " << worker_id << " dropped: " << s;
  }
}

void Coordinator::CheckProfiles() {
  profiles_.ExpireDue();
  profiles_.FailWhere([this](const std::string& job_id, int64_t generation,
                             const std::map<int32_t, std::string>& missing) -> absl::Status {
    const baton::v1::Job* job = jobs_->Peek(job_id);
    if (job == nullptr || job->generation() != generation ||
        job->state() != baton::v1::JOB_STATE_RUNNING) {
      return absl::UnavailableError(
          absl::StrCat("job ", job_id, " generation ", generation,
                       " is no longer running; retry on its current generation"));
    }
    for (const auto& [rank, worker] : missing) {
      if (!workers_->IsConnected(worker)) {
        return absl::UnavailableError(absl::StrCat("worker ", worker, " was lost"));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace baton::coordinator
