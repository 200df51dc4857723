#include "coordinator/control/profile_manager.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/policy/profile_plan.h"

namespace baton::coordinator {

ProfileManager::ProfileManager(ControlContext* ctx)
    : ctx_(ctx),
      jobs_(ctx->jobs()),
      workers_(ctx->workers()),
      clock_(ctx->clock()),
      profiles_(ctx->clock()) {}

absl::Status ProfileManager::ProfileJob(const baton::v1::ProfileJobRequest& request,
                                        ProfileTable::Done done) {
  RETURN_IF_ERROR(ctx_->halted());
  RETURN_IF_ERROR(jobs_->State(request.job_id()).status());
  const baton::v1::Job& job = *jobs_->Peek(request.job_id());
  ProfileFacts facts;
  facts.job = &job;
  if (const JobRuntime* rt = ctx_->FindRuntime(job.id()); rt != nullptr) {
    facts.last_step = rt->last_step;
    facts.median_step_time = rt->stall.MedianStepTime();
  }
  for (const baton::v1::RankInfo& r : job.ranks()) {
    facts.workers[r.worker_id()] = {workers_->IsConnected(r.worker_id()),
                                    workers_->ProtocolVersion(r.worker_id())};
  }
  ASSIGN_OR_RETURN(const ProfilePlan plan, PlanProfile(request, facts));
  ProfileTable::Request pending;
  pending.job_id = job.id();
  pending.generation = job.generation();
  pending.rank_workers = plan.rank_workers;
  pending.deadline = clock_->Now() + plan.timeout;
  pending.done = std::move(done);
  ASSIGN_OR_RETURN(const std::string id, profiles_.Add(std::move(pending)));
  BATON_LOG(INFO) << "profile " << id << " of job " << job.id() << " generation "
                  << job.generation() << ": " << request.steps() << " steps of "
                  << plan.rank_workers.size() << " rank(s) from step " << plan.start_step;
  std::set<std::string> unsent;
  for (const auto& [worker, ranks] : plan.by_worker) {
    baton::v1::CoordinatorMessage msg;
    baton::v1::ProfileRanks* p = msg.mutable_profile_ranks();
    p->set_job_id(job.id());
    p->set_generation(job.generation());
    p->set_request_id(id);
    for (int32_t rank : ranks) p->add_ranks(rank);
    p->set_steps(request.steps());
    *p->mutable_timeout() = ToProto(plan.timeout);
    p->set_start_step(plan.start_step);
    if (!ctx_->Send(worker, msg)) unsent.insert(worker);
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

void ProfileManager::OnProfileTrace(const std::string& worker_id,
                                    const baton::v1::ProfileTrace& trace) {
  if (absl::Status s = profiles_.OnTrace(worker_id, trace); absl::IsPermissionDenied(s)) {
    ctx_->RefuseReport(worker_id, "profile_trace", absl::StrCat("a profile trace: ", s.message()));
  } else if (!s.ok()) {
    BATON_LOG(INFO) << "ProfileTrace from worker " << worker_id << " dropped: " << s;
  }
}

void ProfileManager::CheckProfiles() {
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
