#include "coordinator/control/control_context.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/time/proto_time.h"
#include "coordinator/control/job_ranks.h"

namespace baton::coordinator {

ControlContext::ControlContext(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                               CoordinatorOptions options)
    : jobs_(jobs), workers_(workers), clock_(clock), options_(options) {}

const JobRuntime* ControlContext::FindRuntime(const std::string& job_id) const {
  auto it = runtime_.find(job_id);
  return it == runtime_.end() ? nullptr : &it->second;
}

std::vector<std::string> ControlContext::RuntimeJobIds() const {
  std::vector<std::string> ids;
  ids.reserve(runtime_.size());
  for (const auto& [id, rt] : runtime_) ids.push_back(id);
  return ids;
}

bool ControlContext::Ok(const absl::Status& status, const char* what) {
  if (status.ok()) return true;
  if (!jobs_->store_error().ok()) {
    Halt(jobs_->store_error());
  } else {
    // A broken invariant (e.g. an illegal transition): the change is abandoned whole.
    BATON_LOG(ERROR) << what << " refused: " << status;
    ++refused_changes_[what];
  }
  return false;
}

void ControlContext::Halt(const absl::Status& cause) {
  if (!halted_.ok()) return;
  halted_ = absl::UnavailableError(
      absl::StrCat("the coordinator stopped: its state store failed (", cause.message(),
                   "); it serves nothing more until restarted, and recovers from disk then"));
  BATON_LOG(ERROR) << halted_.message();
  if (on_halt_) on_halt_(halted_);
}

void ControlContext::Quiesce() {
  if (!halted_.ok()) return;
  halted_ = absl::UnavailableError(
      "the coordinator is shutting down; it serves nothing more (with replicas, the next "
      "leader serves)");
}

bool ControlContext::Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg) {
  // Nothing leaves a halted coordinator: the change behind it may not be on disk.
  return halted_.ok() && workers_->Send(worker_id, msg);
}

void ControlContext::SendStop(const std::string& worker_id, const std::string& job_id,
                              int64_t generation, const std::string& reason,
                              std::optional<absl::Duration> grace, bool keep_waiting) {
  baton::v1::CoordinatorMessage msg;
  baton::v1::StopAssignment* stop = msg.mutable_stop_assignment();
  stop->set_job_id(job_id);
  stop->set_generation(generation);
  *stop->mutable_grace() = ToProto(grace.value_or(options_.stop_grace));
  stop->set_reason(reason);
  stop->set_keep_waiting_ranks(keep_waiting);
  Send(worker_id, msg);
}

void ControlContext::StopProcesses(const baton::v1::Job& job, const std::string& reason,
                                   std::optional<absl::Duration> grace, bool keep_waiting) {
  for (const std::string& w : WorkersOf(job)) {
    // A lost worker stops them itself.
    SendStop(w, job.id(), job.generation(), reason, grace, keep_waiting);
  }
}

void ControlContext::Fail(const std::string& job_id, const std::string& reason,
                          const std::string& message, const baton::v1::Job* record) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || IsTerminal(*state)) return;
  BATON_LOG(WARNING) << "job " << job_id << " failed: " << message;
  if (!Ok(jobs_->Transition(job_id, JobState::kFailed, reason, message, record), "fail")) return;
  StopProcesses(*jobs_->Peek(job_id), message);
  runtime_.erase(job_id);
}

const baton::v1::Job* ControlContext::ActiveJob(const std::string& job_id,
                                                int64_t generation) const {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return nullptr;
  const baton::v1::Job* job = jobs_->Peek(job_id);
  return job->generation() == generation ? job : nullptr;
}

bool ControlContext::Fenced(const std::string& worker_id, const std::string& job_id,
                            int64_t generation, const char* what) const {
  const baton::v1::Job* job = jobs_->Peek(job_id);
  if (job == nullptr) {
    BATON_LOG(WARNING) << what << " from worker " << worker_id << " about unknown job " << job_id
                       << "; ignored";
    return true;
  }
  absl::Status s = CheckGeneration(*job, generation);
  if (s.ok()) return false;
  BATON_LOG(INFO) << what << " from worker " << worker_id << " rejected: " << s;
  return true;
}

std::map<std::string, int> ControlContext::UsedSlots(const std::string& except_job) const {
  std::map<std::string, int> used;
  for (const std::string& id :
       jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning, JobState::kRestarting})) {
    if (id == except_job) continue;
    const baton::v1::Job& job = *jobs_->Peek(id);
    for (const baton::v1::RankInfo& r : job.ranks()) ++used[r.worker_id()];
  }
  return used;
}

std::vector<WorkerCapacity> ControlContext::FreeCapacity(const std::string& except_job) const {
  const std::map<std::string, int> used = UsedSlots(except_job);
  std::vector<WorkerCapacity> capacity;
  for (const std::string& w : workers_->ReadyWorkers()) {
    // Left out of new gangs: until re-checked, or until an operator uncordons it.
    if (workers_->IsUnhealthy(w) || workers_->IsCordoned(w)) continue;
    auto u = used.find(w);
    capacity.push_back({w, workers_->Slots(w) - (u == used.end() ? 0 : u->second)});
  }
  return capacity;
}

void ControlContext::RefuseReport(const std::string& worker_id, const std::string& kind,
                                  const std::string& why) {
  ++refused_reports_[kind];
  if (refusals_logged_.size() >= kMaxRefusalLogKeys ||
      !refusals_logged_.emplace(worker_id, kind).second) {
    return;
  }
  BATON_LOG(WARNING) << "worker " << worker_id << " reported " << why << ": refused (further such "
                     << kind
                     << " reports of this worker are only counted, in "
                        "baton_coordinator_worker_reports_refused_total)";
}

absl::Status CheckGeneration(const baton::v1::Job& job, int64_t generation) {
  if (generation == job.generation()) return absl::OkStatus();
  if (generation < job.generation()) {
    return absl::AbortedError(absl::StrCat("job ", job.id(), " generation ", generation,
                                           " is stale; the current generation is ",
                                           job.generation()));
  }
  return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " generation ", generation,
                                                    " was never started; the current "
                                                    "generation is ",
                                                    job.generation()));
}

}  // namespace baton::coordinator
