#include "coordinator/control/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/spec/job_spec.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/policy/rank_assignment.h"
#include "coordinator/policy/restart_policy.h"
#include "coordinator/policy/scheduler.h"

namespace baton::coordinator {

bool Coordinator::Failed(const baton::v1::ProcessExit& exit) {
  return exit.signal() != 0 || exit.exit_code() != 0;
}

std::string Coordinator::DescribeExit(const baton::v1::ProcessExit& exit) {
  if (exit.signal() != 0) return absl::StrCat("was killed by signal ", exit.signal());
  return absl::StrCat("exited with code ", exit.exit_code());
}

Coordinator::Coordinator(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                         CoordinatorOptions options)
    : jobs_(jobs), workers_(workers), clock_(clock), options_(options), profiles_(clock) {}

absl::Status Coordinator::Recover() {
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous})) {
    RETURN_IF_ERROR(jobs_->Transition(id, JobState::kQueued, "CoordinatorRestarted",
                                      "coordinator restarted during rendezvous; requeued"));
  }
  const absl::Time deadline = clock_->Now() + options_.reattach_timeout;
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning})) {
    Runtime& rt = runtime_[id];
    for (const std::string& w : WorkersOf(*jobs_->Peek(id))) rt.awaiting_workers.insert(w);
    rt.reattach_deadline = deadline;
    RETURN_IF_ERROR(jobs_->RecordEvent(
        id, "AwaitingWorkers",
        absl::StrCat("coordinator restarted; waiting up to ",
                     absl::FormatDuration(options_.reattach_timeout), " for workers ",
                     absl::StrJoin(rt.awaiting_workers, ", "), " to report back")));
  }
  return absl::OkStatus();
}

absl::StatusOr<baton::v1::Job> Coordinator::SubmitJob(baton::v1::JobSpec spec,
                                                      const std::string& request_id,
                                                      const std::string& owner) {
  RETURN_IF_ERROR(halted_);
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(std::move(spec), request_id, owner);
  if (!job.ok()) {
    if (!jobs_->store_error().ok()) Halt(jobs_->store_error());
    return job.status();  // e.g. INVALID_ARGUMENT: the caller's to fix, not ours to log
  }
  Schedule();
  // Return the state after scheduling (it may already be in RENDEZVOUS).
  return jobs_->GetWithoutEvents(job->id());
}

absl::StatusOr<baton::v1::Job> Coordinator::CancelJob(const std::string& job_id,
                                                      const std::string& reason) {
  RETURN_IF_ERROR(halted_);
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok()) return state.status();
  if (IsTerminal(*state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already finished (", JobStateName(*state), "); nothing to cancel"));
  }
  const std::string message =
      reason.empty() ? std::string("cancelled by user") : absl::StrCat("cancelled: ", reason);
  absl::Status s = jobs_->Transition(job_id, JobState::kCancelled, "Cancelled", message);
  if (!Ok(s, "cancel")) return s;
  StopProcesses(*jobs_->Peek(job_id), message);
  runtime_.erase(job_id);
  Schedule();  // freed slots
  return jobs_->GetWithoutEvents(job_id);
}

std::vector<baton::v1::Worker> Coordinator::ListWorkers() const {
  std::vector<baton::v1::Worker> list = workers_->List();
  const std::map<std::string, int> used = UsedSlots();
  std::map<std::string, std::vector<std::string>> jobs_by_worker;
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    for (const std::string& w : WorkersOf(*jobs_->Peek(id))) {
      jobs_by_worker[w].push_back(id);
    }
  }
  for (baton::v1::Worker& w : list) {
    auto u = used.find(w.id());
    w.set_used_slots(u == used.end() ? 0 : u->second);
    for (const std::string& j : jobs_by_worker[w.id()]) w.add_job_ids(j);
  }
  return list;
}

absl::StatusOr<uint64_t> Coordinator::OnWorkerConnected(const baton::v1::Register& reg,
                                                        const std::string& peer_host,
                                                        std::shared_ptr<WorkerChannel> channel) {
  RETURN_IF_ERROR(halted_);
  if (reg.worker_id().empty()) {
    return absl::InvalidArgumentError("register.worker_id: must not be empty");
  }
  if (reg.resources().slots() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("register.resources.slots: worker ",
                                                   reg.worker_id(), " offers ",
                                                   reg.resources().slots(),
                                                   " slots; must be at least 1"));
  }
  if (reg.protocol_version() < kMinWorkerProtocolVersion ||
      reg.protocol_version() > kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", reg.worker_id(), " speaks protocol version ", reg.protocol_version(),
        "; this coordinator supports ", kMinWorkerProtocolVersion, "..", kProtocolVersion));
  }
  if (absl::Status admitted = workers_->Admit(reg.worker_id()); !admitted.ok()) {
    return admitted;
  }
  const std::string host = reg.advertise_host().empty() ? peer_host : reg.advertise_host();
  const bool known_lost =
      !workers_->IsConnected(reg.worker_id()) && !workers_->Host(reg.worker_id()).empty();
  const uint64_t session = workers_->Connect(reg, host, std::move(channel));
  BATON_LOG(INFO) << "worker " << reg.worker_id() << " connected from " << host << " ("
                  << reg.resources().slots() << " slots" << (known_lost ? ", reconnect" : "")
                  << (reg.draining() ? ", draining" : "") << ")";
  baton::v1::CoordinatorMessage ack;
  ack.mutable_registered()->set_protocol_version(kProtocolVersion);
  *ack.mutable_registered()->mutable_heartbeat_interval() = ToProto(options_.heartbeat_interval);
  if (workers_->HasLease(reg.worker_id())) {
    *ack.mutable_registered()->mutable_lease() = ToProto(workers_->lease().lease);
  }
  Send(reg.worker_id(), ack);
  ReattachAssignments(reg.worker_id(), reg);
  if (reg.draining()) MoveJobsOff(reg.worker_id(), "it reconnected while draining");
  Schedule();
  return session;
}

void Coordinator::ReattachAssignments(const std::string& worker_id,
                                      const baton::v1::Register& reg) {
  std::set<std::string> reported;  // active jobs the worker listed
  std::set<std::string> listed;    // jobs whose current generation the worker listed
  for (const baton::v1::AssignmentStatus& a : reg.assignments()) {
    const baton::v1::Job* current = jobs_->Peek(a.job_id());
    if (current != nullptr && current->generation() == a.generation()) {
      listed.insert(a.job_id());
      // Exits of a restarting generation still count: its restart waits for them.
      if (current->state() == baton::v1::JOB_STATE_RESTARTING) {
        for (const baton::v1::RankInfo& r : a.ranks()) {
          if (r.has_exit()) {
            OnProcessExited(worker_id, a.job_id(), a.generation(), r.rank(), r.exit());
          }
        }
      }
    }
    const baton::v1::Job* active = ActiveJob(a.job_id(), a.generation());
    if (active == nullptr) {
      // Unknown, finished or superseded: its processes must not run on.
      SendStop(worker_id, a.job_id(), a.generation(), "job is not running this generation");
      continue;
    }
    reported.insert(a.job_id());
    baton::v1::Job job = *active;
    for (const baton::v1::RankInfo& r : a.ranks()) {
      for (baton::v1::RankInfo& mine : *job.mutable_ranks()) {
        if (mine.rank() == r.rank() && mine.worker_id() == worker_id) mine.set_pid(r.pid());
      }
    }
    Runtime& rt = runtime_[a.job_id()];
    std::vector<baton::v1::JobEvent> events;
    const bool all_back = rt.awaiting_workers.count(worker_id) > 0 &&
                          rt.awaiting_workers.size() == 1;
    if (all_back) {
      events.push_back(
          NewEvent("Reattached", "every worker reported its processes after the restart"));
    }
    if (!Ok(jobs_->Update(job, std::move(events)), "reattach")) return;
    rt.started_workers.insert(worker_id);
    rt.awaiting_workers.erase(worker_id);
    if (all_back) rt.reattach_deadline = absl::InfiniteFuture();
    for (const baton::v1::RankInfo& r : a.ranks()) {
      if (r.has_exit()) OnProcessExited(worker_id, a.job_id(), a.generation(), r.rank(), r.exit());
    }
  }
  FailJobsWithoutProcesses(worker_id, reported);
  ForgetStoppedRanks(worker_id, listed);
}

void Coordinator::FailJobsWithoutProcesses(const std::string& worker_id,
                                           const std::set<std::string>& reported) {
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning, JobState::kRendezvous})) {
    if (reported.count(id) > 0) continue;
    const baton::v1::Job& job = *jobs_->Peek(id);
    // A worker forgets an assignment once its ranks' exits were reported.
    if (!HasLiveRanksOn(job, worker_id)) continue;
    Runtime& rt = runtime_[id];
    if (job.state() == baton::v1::JOB_STATE_RENDEZVOUS && rt.started_workers.count(worker_id) == 0) {
      continue;  // its StartAssignment is still to come (or is in flight)
    }
    FailGeneration(id, baton::v1::FAILURE_CLASS_INFRA, "WorkerRestarted",
                   absl::StrCat("worker ", worker_id, " reconnected without the job's processes"),
                   std::nullopt, worker_id);
  }
}

void Coordinator::ForgetStoppedRanks(const std::string& worker_id,
                                     const std::set<std::string>& listed) {
  // A restarting job waits for its processes to stop: those a worker no longer runs did.
  for (const std::string& id : jobs_->JobsIn({JobState::kRestarting})) {
    if (listed.count(id) > 0) continue;
    baton::v1::Job job = *jobs_->Peek(id);
    bool changed = false;
    for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
      if (r.worker_id() != worker_id || r.has_exit()) continue;
      r.mutable_exit()->set_exit_code(-1);  // unknown: it ended while the worker was away
      *r.mutable_exit()->mutable_time() = ToProto(clock_->Now());
      changed = true;
    }
    if (!changed) continue;
    const std::string what = absl::StrCat("worker ", worker_id, " reconnected without generation ",
                                          job.generation(), "'s processes: they ended");
    if (!Ok(jobs_->Update(job, {NewEvent("RanksGone", what)}), "ranks gone")) return;
    MaybeRestart(id);
  }
}

void Coordinator::OnWorkerMessage(const std::string& worker_id, uint64_t session,
                                  const baton::v1::WorkerMessage& msg) {
  if (!halted_.ok() || !workers_->IsCurrent(worker_id, session)) return;
  switch (msg.msg_case()) {
    case baton::v1::WorkerMessage::kHeartbeat:
      if (workers_->Heartbeat(worker_id, session)) {
        baton::v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_seq(msg.heartbeat().seq());
        Send(worker_id, ack);
      }
      break;
    case baton::v1::WorkerMessage::kPortReserved:
      OnPortReserved(worker_id, msg.port_reserved());
      break;
    case baton::v1::WorkerMessage::kAssignmentStarted:
      OnAssignmentStarted(worker_id, msg.assignment_started());
      break;
    case baton::v1::WorkerMessage::kProcessExited: {
      const baton::v1::ProcessExited& e = msg.process_exited();
      OnProcessExited(worker_id, e.job_id(), e.generation(), e.rank(), e.exit());
      break;
    }
    case baton::v1::WorkerMessage::kMetrics:
      OnMetrics(worker_id, msg.metrics());
      break;
    case baton::v1::WorkerMessage::kLogs:
      OnLogs(worker_id, msg.logs());
      break;
    case baton::v1::WorkerMessage::kDraining:
      OnWorkerDraining(worker_id, msg.draining().reason());
      break;
    case baton::v1::WorkerMessage::kAssignmentFailed:
      OnAssignmentFailed(worker_id, msg.assignment_failed());
      break;
    case baton::v1::WorkerMessage::kProfileTrace:
      OnProfileTrace(worker_id, msg.profile_trace());
      break;
    case baton::v1::WorkerMessage::kRegister:
      BATON_LOG(WARNING) << "worker " << worker_id << " sent Register twice; ignored";
      break;
    case baton::v1::WorkerMessage::MSG_NOT_SET:
      break;
  }
}

void Coordinator::OnWorkerDraining(const std::string& worker_id, const std::string& reason) {
  if (!halted_.ok() || !workers_->SetDraining(worker_id)) return;  // already draining (or gone)
  const std::string why = reason.empty() ? std::string("it is draining")
                                         : absl::StrCat("it is draining (", reason, ")");
  BATON_LOG(INFO) << "worker " << worker_id << ": " << why;
  MoveJobsOff(worker_id, why);
  Schedule();
}

void Coordinator::MoveJobsOff(const std::string& worker_id, const std::string& why) {
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    if (!HasLiveRanksOn(*jobs_->Peek(id), worker_id)) continue;
    Resize(id, "Draining", absl::StrCat("worker ", worker_id, " leaves: ", why), worker_id);
  }
}

void Coordinator::OnWorkerDisconnected(const std::string& worker_id, uint64_t session) {
  if (!workers_->Disconnect(worker_id, session) || !halted_.ok()) return;
  HandleWorkerLost(worker_id, "WorkerLost", "its stream closed", clock_->Now());
  Schedule();  // the job's other workers are free again
}

void Coordinator::FlushStaged() {
  if (!halted_.ok()) return;
  last_flush_ = clock_->Now();
  Ok(jobs_->Flush(), "flush staged");
}

void Coordinator::OnIdle() {
  if (clock_->Now() - last_flush_ < options_.group_commit_interval) return;
  FlushStaged();
}

void Coordinator::ReconcileOnce() {
  FlushStaged();
  if (!halted_.ok()) return;
  for (const std::string& id : workers_->ExpireLeases()) {
    const LeaseOptions& lease = workers_->lease();
    HandleWorkerLost(id, "LeaseExpired",
                     absl::StrCat("its lease expired: no heartbeat for more than ",
                                  absl::FormatDuration(lease.lease + lease.margin), " (lease ",
                                  absl::FormatDuration(lease.lease), " + margin ",
                                  absl::FormatDuration(lease.margin),
                                  "); partitioned or down, its processes are stopped"),
                     workers_->LastHeartbeat(id));
  }
  const absl::Time now = clock_->Now();
  for (auto it = runtime_.begin(); it != runtime_.end();) {
    const std::string id = it->first;
    Runtime& rt = it->second;
    ++it;  // Fail() below may erase the entry.
    absl::StatusOr<JobState> state = jobs_->State(id);
    if (!state.ok() || IsTerminal(*state)) {
      runtime_.erase(id);
      continue;
    }
    if (*state == JobState::kRendezvous && now >= rt.rendezvous_deadline) {
      Fail(id, "RendezvousTimeout",
           absl::StrCat("rendezvous did not complete within ",
                        absl::FormatDuration(options_.rendezvous_timeout)));
    } else if (*state == JobState::kRunning && now >= rt.reattach_deadline) {
      // Their leases ran out long ago: their processes are stopped, the job restarts.
      const std::string missing = absl::StrJoin(rt.awaiting_workers, ", ");
      const std::string first = *rt.awaiting_workers.begin();
      rt.awaiting_workers.clear();
      rt.reattach_deadline = absl::InfiniteFuture();
      FailGeneration(id, baton::v1::FAILURE_CLASS_INFRA, "ReattachTimeout",
                     absl::StrCat("coordinator restarted and workers ", missing,
                                  " did not report back within ",
                                  absl::FormatDuration(options_.reattach_timeout)),
                     std::nullopt, first);
    } else if (*state == JobState::kRunning) {
      if (std::optional<StallDetector::Stall> stall = rt.stall.Check(*jobs_->Peek(id), now)) {
        FailGeneration(id, baton::v1::FAILURE_CLASS_STALL, "Stalled", stall->cause, stall->rank,
                       stall->worker_id, stall->since);
      }
    }
  }
  CheckProfiles();
  // Restarts before scheduling: a restarting job keeps its claim on its workers.
  for (const std::string& id : jobs_->JobsIn({JobState::kRestarting})) MaybeRestart(id);
  Schedule();
  // A little retention work each pass keeps every pass short.
  Ok(jobs_->Prune(/*max_jobs=*/2), "prune");
  jobs_->PumpStreams();  // history to watchers whose clients keep up
}

absl::Status Coordinator::CheckGeneration(const baton::v1::Job& job, int64_t generation) {
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

bool Coordinator::Fenced(const std::string& worker_id, const std::string& job_id,
                         int64_t generation, const char* what) {
  const baton::v1::Job* job = jobs_->Peek(job_id);
  if (job == nullptr) {
    BATON_LOG(WARNING) << what << " from worker " << worker_id << " about unknown job "
                       << job_id << "; ignored";
    return true;
  }
  absl::Status s = CheckGeneration(*job, generation);
  if (s.ok()) return false;
  BATON_LOG(INFO) << what << " from worker " << worker_id << " rejected: " << s;
  return true;
}

void Coordinator::HandleWorkerLost(const std::string& worker_id, const std::string& reason,
                                   const std::string& why, absl::Time occurred) {
  BATON_LOG(WARNING) << "worker " << worker_id << " lost: " << why;
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    if (!HasLiveRanksOn(*jobs_->Peek(id), worker_id)) continue;
    if (runtime_[id].awaiting_workers.count(worker_id) > 0) continue;  // not back yet anyway
    FailGeneration(id, baton::v1::FAILURE_CLASS_INFRA, reason,
                   absl::StrCat("worker ", worker_id, " lost: ", why), std::nullopt, worker_id,
                   occurred);
  }
  for (const std::string& id : jobs_->JobsIn({JobState::kRestarting})) {
    if (!ReattributeToLoss(id, worker_id, reason,
                           absl::StrCat("worker ", worker_id, " lost: ", why), occurred)) {
      return;
    }
    MaybeRestart(id);  // its processes may count as stopped now
  }
}

void Coordinator::StopProcesses(const baton::v1::Job& job, const std::string& reason,
                                std::optional<absl::Duration> grace) {
  for (const std::string& w : WorkersOf(job)) {
    SendStop(w, job.id(), job.generation(), reason, grace);  // a lost worker stops them itself
  }
}

void Coordinator::SendStop(const std::string& worker_id, const std::string& job_id,
                           int64_t generation, const std::string& reason,
                           std::optional<absl::Duration> grace) {
  baton::v1::CoordinatorMessage msg;
  baton::v1::StopAssignment* stop = msg.mutable_stop_assignment();
  stop->set_job_id(job_id);
  stop->set_generation(generation);
  *stop->mutable_grace() = ToProto(grace.value_or(options_.stop_grace));
  stop->set_reason(reason);
  Send(worker_id, msg);
}

bool Coordinator::Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg) {
  // Nothing leaves a halted coordinator: the change behind it may not be on disk.
  return halted_.ok() && workers_->Send(worker_id, msg);
}

const baton::v1::Job* Coordinator::ActiveJob(const std::string& job_id, int64_t generation) const {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return nullptr;
  const baton::v1::Job* job = jobs_->Peek(job_id);
  return job->generation() == generation ? job : nullptr;
}

bool Coordinator::HasLiveRanksOn(const baton::v1::Job& job, const std::string& worker_id) {
  return std::any_of(job.ranks().begin(), job.ranks().end(), [&](const baton::v1::RankInfo& r) {
    return r.worker_id() == worker_id && !r.has_exit();
  });
}

std::vector<std::string> Coordinator::WorkersOf(const baton::v1::Job& job) {
  std::vector<std::string> out;
  absl::flat_hash_set<absl::string_view> seen;
  seen.reserve(job.ranks_size());
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (seen.insert(r.worker_id()).second) out.push_back(r.worker_id());
  }
  return out;
}

std::map<std::string, int> Coordinator::UsedSlots(const std::string& except_job) const {
  std::map<std::string, int> used;
  for (const std::string& id :
       jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning, JobState::kRestarting})) {
    if (id == except_job) continue;
    const baton::v1::Job& job = *jobs_->Peek(id);
    for (const baton::v1::RankInfo& r : job.ranks()) ++used[r.worker_id()];
  }
  return used;
}

std::vector<WorkerCapacity> Coordinator::FreeCapacity(const std::string& except_job) const {
  const std::map<std::string, int> used = UsedSlots(except_job);
  std::vector<WorkerCapacity> capacity;
  for (const std::string& w : workers_->ReadyWorkers()) {
    auto u = used.find(w);
    capacity.push_back({w, workers_->Slots(w) - (u == used.end() ? 0 : u->second)});
  }
  return capacity;
}

bool Coordinator::Ok(const absl::Status& status, const char* what) {
  if (status.ok()) return true;
  if (!jobs_->store_error().ok()) {
    Halt(jobs_->store_error());
  } else {
    // A broken invariant (e.g. an illegal transition): the change is abandoned whole.
    BATON_LOG(ERROR) << what << " refused: " << status;
  }
  return false;
}

void Coordinator::Halt(const absl::Status& cause) {
  if (!halted_.ok()) return;
  halted_ = absl::UnavailableError(
      absl::StrCat("the coordinator stopped: its state store failed (", cause.message(),
                   "); it serves nothing more until restarted, and recovers from disk then"));
  BATON_LOG(ERROR) << halted_.message();
  profiles_.FailAll(halted_);
  if (on_halt_) on_halt_(halted_);
}

}  // namespace baton::coordinator
