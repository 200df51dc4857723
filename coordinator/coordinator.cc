#include "coordinator/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/rank_assignment.h"
#include "coordinator/restart_policy.h"
#include "coordinator/scheduler.h"

namespace baton::coordinator {
namespace {

bool IsActive(JobState s) {
  return s == JobState::kRendezvous || s == JobState::kRunning;
}

std::string DescribeExit(const baton::v1::ProcessExit& exit) {
  if (exit.signal() != 0) return absl::StrCat("was killed by signal ", exit.signal());
  return absl::StrCat("exited with code ", exit.exit_code());
}

bool Failed(const baton::v1::ProcessExit& exit) {
  return exit.signal() != 0 || exit.exit_code() != 0;
}

// A non-state event for JobManager::Update.
baton::v1::JobEvent Event(const std::string& reason, const std::string& message) {
  baton::v1::JobEvent event;
  event.set_reason(reason);
  event.set_message(message);
  return event;
}

}  // namespace

Coordinator::Coordinator(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                         CoordinatorOptions options)
    : jobs_(jobs), workers_(workers), clock_(clock), options_(options) {}

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
                                                      const std::string& request_id) {
  RETURN_IF_ERROR(halted_);
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(std::move(spec), request_id);
  if (!job.ok()) {
    if (!jobs_->store_error().ok()) Halt(jobs_->store_error());
    return job.status();  // e.g. INVALID_ARGUMENT: the caller's to fix, not ours to log
  }
  Schedule();
  // Return the state after scheduling (it may already be in RENDEZVOUS).
  absl::StatusOr<baton::v1::Job> now = jobs_->Get(job->id());
  if (now.ok()) now->clear_events();
  return now;
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
  absl::StatusOr<baton::v1::Job> job = jobs_->Get(job_id);
  if (job.ok()) job->clear_events();
  return job;
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
          Event("Reattached", "every worker reported its processes after the restart"));
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
    if (!Ok(jobs_->Update(job, {Event("RanksGone", what)}), "ranks gone")) return;
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
    case baton::v1::WorkerMessage::kLogs: {
      const baton::v1::LogsReport& l = msg.logs();
      if (!jobs_->State(l.job_id()).ok()) break;
      Ok(jobs_->AddLogs(l.job_id(), {l.lines().begin(), l.lines().end()}), "add logs");
      break;
    }
    case baton::v1::WorkerMessage::kDraining:
      OnWorkerDraining(worker_id, msg.draining().reason());
      break;
    case baton::v1::WorkerMessage::kAssignmentFailed:
      OnAssignmentFailed(worker_id, msg.assignment_failed());
      break;
    case baton::v1::WorkerMessage::kRegister:
      BATON_LOG(WARNING) << "worker " << worker_id << " sent Register twice; ignored";
      break;
    case baton::v1::WorkerMessage::MSG_NOT_SET:
      break;
  }
}

void Coordinator::OnMetrics(const std::string& worker_id, const baton::v1::MetricsReport& m) {
  absl::StatusOr<JobState> state = jobs_->State(m.job_id());
  if (!state.ok()) return;
  const baton::v1::Job& job = *jobs_->Peek(m.job_id());
  std::vector<baton::v1::MetricPoint> points;
  absl::Status rejected;
  int rejected_count = 0;
  for (const baton::v1::MetricPoint& p : m.points()) {
    absl::Status s = CheckGeneration(job, p.generation());
    if (s.ok()) {
      points.push_back(p);
    } else {
      rejected = s;
      ++rejected_count;
    }
  }
  if (rejected_count > 0) {
    BATON_LOG(INFO) << "metrics from worker " << worker_id << ": " << rejected_count
                    << " point(s) rejected: " << rejected;
  }
  if (!points.empty() && !IsTerminal(*state)) {
    int64_t first = points.front().step();
    absl::Time first_time = absl::InfiniteFuture();
    Runtime& rt = runtime_[m.job_id()];
    for (const baton::v1::MetricPoint& p : points) {
      first = std::min(first, p.step());
      if (p.has_time()) first_time = std::min(first_time, FromProto(p.time()));
      rt.last_step = std::max(rt.last_step.value_or(p.step()), p.step());
    }
    rt.stall.Note(points, clock_->Now());
    if (!NoteFirstStep(m.job_id(), first, first_time)) return;
  }
  Ok(jobs_->AddMetrics(m.job_id(), points), "add metrics");
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

void Coordinator::ReconcileOnce() {
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

void Coordinator::Schedule() {
  std::vector<PendingJob> queue;
  for (const std::string& id : jobs_->JobsIn({JobState::kQueued})) {
    const baton::v1::JobSpec& spec = jobs_->Peek(id)->spec();
    PendingJob p;
    p.job_id = id;
    p.min_workers = spec.workers().min();
    p.max_workers = MaxWorkers(spec);
    p.slots_per_worker = SlotsPerWorker(spec);
    queue.push_back(p);
  }
  if (!queue.empty()) {
    for (const Placement& p : coordinator::Schedule(queue, FreeCapacity())) {
      StartRendezvous(*jobs_->Peek(p.job_id), p.worker_ids, "Scheduled");
    }
  }
  MaybeScaleUp();  // with what the queue left
}

void Coordinator::MaybeScaleUp() {
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning})) {
    const baton::v1::Job& job = *jobs_->Peek(id);
    const baton::v1::JobSpec& spec = job.spec();
    // Only the built-in trainer checkpoints on request, so only it grows without losing
    // steps; other programs keep their size until their next restart.
    if (!spec.has_trainer()) continue;
    const std::vector<std::string> current = WorkersOf(job);
    if (static_cast<int>(current.size()) >= MaxWorkers(spec)) continue;
    const Runtime& rt = runtime_[id];
    // A generation resizes only once it is training: not while it restores or re-attaches.
    if (!rt.last_step.has_value() || !rt.awaiting_workers.empty()) continue;
    if (std::any_of(current.begin(), current.end(),
                    [&](const std::string& w) { return !workers_->IsReady(w); })) {
      continue;  // a restart or a drain of this job is about to happen anyway
    }
    std::vector<std::string> joining;
    for (const WorkerCapacity& w : FreeCapacity(id)) {
      if (w.free_slots >= SlotsPerWorker(spec) &&
          std::find(current.begin(), current.end(), w.worker_id) == current.end()) {
        joining.push_back(w.worker_id);
      }
    }
    if (joining.empty()) continue;
    const size_t grown = std::min(current.size() + joining.size(),
                                  static_cast<size_t>(MaxWorkers(spec)));
    joining.resize(grown - current.size());
    Resize(id, "ScalingUp",
           absl::StrCat("worker", joining.size() > 1 ? "s " : " ", absl::StrJoin(joining, ", "),
                        " can join: growing from ", current.size(), " to ", grown, " workers"),
           joining.front());
  }
}

void Coordinator::StartRendezvous(baton::v1::Job job, const std::vector<std::string>& worker_ids,
                                  const std::string& reason) {
  const std::string job_id = job.id();
  const int slots = SlotsPerWorker(job.spec());
  job.set_generation(job.generation() + 1);
  // A restart's rendezvous that was requeued (coordinator restart) continues here.
  baton::v1::Failure* restart = LastFailure(&job);
  if (restart != nullptr && restart->next_generation() != 0 && !restart->has_running_time()) {
    restart->set_next_generation(job.generation());
  }
  job.clear_ranks();
  job.clear_master_addr();
  job.set_master_port(0);
  for (const RankSlot& s : AssignRanks(worker_ids, slots)) {
    baton::v1::RankInfo* r = job.add_ranks();
    r->set_rank(s.rank);
    r->set_local_rank(s.local_rank);
    r->set_local_world_size(s.local_world_size);
    r->set_group_rank(s.group_rank);
    r->set_worker_id(s.worker_id);
  }
  if (!Ok(jobs_->Transition(job_id, JobState::kRendezvous, reason,
                            absl::StrCat("generation ", job.generation(), ": ", job.ranks_size(),
                                         " ranks on workers ", absl::StrJoin(worker_ids, ", ")),
                            &job),
          "start rendezvous")) {
    return;
  }
  Runtime& rt = runtime_[job_id];
  rt = Runtime();
  rt.rendezvous_deadline = clock_->Now() + options_.rendezvous_timeout;
  baton::v1::CoordinatorMessage msg;
  msg.mutable_reserve_port()->set_job_id(job_id);
  msg.mutable_reserve_port()->set_generation(job.generation());
  if (!Send(worker_ids.front(), msg)) {
    FailGeneration(job_id, baton::v1::FAILURE_CLASS_INFRA, "WorkerLost",
                   absl::StrCat("worker ", worker_ids.front(), " went away before rendezvous"),
                   std::nullopt, worker_ids.front());
  }
}

void Coordinator::OnPortReserved(const std::string& worker_id,
                                 const baton::v1::PortReserved& msg) {
  if (Fenced(worker_id, msg.job_id(), msg.generation(), "PortReserved")) return;
  baton::v1::Job job = *jobs_->Peek(msg.job_id());
  if (job.state() != baton::v1::JOB_STATE_RENDEZVOUS ||
      job.master_port() != 0 || job.ranks(0).worker_id() != worker_id) {
    return;
  }
  job.set_master_addr(workers_->Host(worker_id));
  job.set_master_port(msg.port());
  if (!Ok(jobs_->Update(job), "port reserved")) return;
  for (const std::string& w : WorkersOf(job)) {
    baton::v1::CoordinatorMessage out;
    baton::v1::StartAssignment* a = out.mutable_start_assignment();
    a->set_job_id(job.id());
    a->set_generation(job.generation());
    *a->mutable_spec() = job.spec();
    a->set_world_size(job.ranks_size());
    a->set_master_addr(job.master_addr());
    a->set_master_port(job.master_port());
    for (const baton::v1::RankInfo& r : job.ranks()) {
      if (r.worker_id() == w) *a->add_ranks() = r;
    }
    for (const std::string& peer : WorkersOf(job)) {
      if (peer == w || workers_->ProbePort(peer) == 0) continue;
      baton::v1::Peer* p = a->add_peers();
      p->set_worker_id(peer);
      p->set_host(workers_->Host(peer));
      p->set_probe_port(workers_->ProbePort(peer));
    }
    if (!Send(w, out)) {
      FailGeneration(job.id(), baton::v1::FAILURE_CLASS_INFRA, "WorkerLost",
                     absl::StrCat("worker ", w, " went away during rendezvous"), std::nullopt, w);
      return;
    }
  }
}

void Coordinator::OnAssignmentStarted(const std::string& worker_id,
                                      const baton::v1::AssignmentStarted& msg) {
  if (Fenced(worker_id, msg.job_id(), msg.generation(), "AssignmentStarted")) {
    // Processes of a superseded generation must not run on.
    SendStop(worker_id, msg.job_id(), msg.generation(), "generation superseded");
    return;
  }
  const baton::v1::Job* active = ActiveJob(msg.job_id(), msg.generation());
  if (active == nullptr) return;
  baton::v1::Job job = *active;
  for (const baton::v1::RankInfo& started : msg.ranks()) {
    for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
      if (r.rank() == started.rank() && r.worker_id() == worker_id) r.set_pid(started.pid());
    }
  }
  Runtime& rt = runtime_[msg.job_id()];
  std::set<std::string> started = rt.started_workers;
  started.insert(worker_id);
  if (job.state() != baton::v1::JOB_STATE_RENDEZVOUS || started.size() != WorkersOf(job).size()) {
    if (Ok(jobs_->Update(job), "assignment started")) rt.started_workers = std::move(started);
    return;
  }
  baton::v1::Failure* f = LastFailure(&job);
  if (f != nullptr && f->next_generation() == job.generation() && !f->has_running_time()) {
    *f->mutable_running_time() = ToProto(clock_->Now());
  }
  if (!Ok(jobs_->Transition(msg.job_id(), JobState::kRunning, "Started",
                            absl::StrCat(job.ranks_size(), " processes running, master ",
                                         job.master_addr(), ":", job.master_port()),
                            &job),
          "running")) {
    return;
  }
  rt.started_workers = std::move(started);
  rt.rendezvous_deadline = absl::InfiniteFuture();
}

void Coordinator::OnAssignmentFailed(const std::string& worker_id,
                                     const baton::v1::AssignmentFailed& msg) {
  if (Fenced(worker_id, msg.job_id(), msg.generation(), "AssignmentFailed")) return;
  if (ActiveJob(msg.job_id(), msg.generation()) == nullptr) return;
  FailGeneration(msg.job_id(), baton::v1::FAILURE_CLASS_INFRA,
                 msg.reason().empty() ? std::string("AssignmentFailed") : msg.reason(),
                 absl::StrCat("worker ", worker_id, " could not start its processes: ",
                              msg.message()),
                 std::nullopt, worker_id);
}

void Coordinator::OnProcessExited(const std::string& worker_id, const std::string& job_id,
                                  int64_t generation, int32_t rank,
                                  const baton::v1::ProcessExit& exit) {
  if (jobs_->Peek(job_id) == nullptr || Fenced(worker_id, job_id, generation, "ProcessExited")) {
    return;
  }
  baton::v1::Job job = *jobs_->Peek(job_id);
  baton::v1::RankInfo* info = nullptr;
  for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
    if (r.rank() == rank && r.worker_id() == worker_id) info = &r;
  }
  if (info == nullptr || info->has_exit()) return;  // unknown or already recorded
  *info->mutable_exit() = exit;
  const std::string what =
      absl::StrCat("rank ", rank, " on worker ", worker_id, " ", DescribeExit(exit));
  if (!Ok(jobs_->Update(job, {Event("RankExited", what)}), "rank exited")) return;

  const JobState state = *jobs_->State(job_id);
  if (state == JobState::kRestarting) {
    if (!ReattributeFailure(job_id, rank, worker_id, exit, what)) return;
    MaybeRestart(job_id);  // an expected exit of the failed generation
    return;
  }
  if (!IsActive(state)) return;
  if (Failed(exit)) {
    FailGeneration(job_id, baton::v1::FAILURE_CLASS_USER, "RankFailed", what, rank, worker_id,
                   exit.has_time() ? FromProto(exit.time()) : absl::InfinitePast());
    Schedule();
    return;
  }
  const bool all_done = std::all_of(job.ranks().begin(), job.ranks().end(),
                                    [](const baton::v1::RankInfo& r) {
                                      return r.has_exit() && !Failed(r.exit());
                                    });
  if (all_done && state == JobState::kRunning) {
    if (!Ok(jobs_->Transition(job_id, JobState::kSucceeded, "Completed",
                              absl::StrCat("all ", job.ranks_size(), " ranks exited 0")),
            "succeeded")) {
      return;
    }
    runtime_.erase(job_id);
    Schedule();
  }
}

void Coordinator::Fail(const std::string& job_id, const std::string& reason,
                       const std::string& message, const baton::v1::Job* record) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || IsTerminal(*state)) return;
  BATON_LOG(WARNING) << "job " << job_id << " failed: " << message;
  if (!Ok(jobs_->Transition(job_id, JobState::kFailed, reason, message, record), "fail")) return;
  StopProcesses(*jobs_->Peek(job_id), message);
  runtime_.erase(job_id);
}

void Coordinator::FailGeneration(const std::string& job_id,
                                 baton::v1::FailureClass failure_class,
                                 const std::string& reason, const std::string& cause,
                                 std::optional<int32_t> rank, const std::string& worker_id,
                                 absl::Time occurred) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return;
  baton::v1::Job job = *jobs_->Peek(job_id);
  Runtime& rt = runtime_[job_id];
  const RestartDecision d = DecideRestart(
      &job, NewFailure(job, rt, failure_class, reason, cause, rank, worker_id, occurred));
  if (d.kind != RestartDecision::Kind::kRestart) {
    Fail(job_id, d.reason, d.message, &job);
    return;
  }
  BATON_LOG(WARNING) << "job " << job_id << ": " << d.message;
  if (!Ok(jobs_->Transition(job_id, JobState::kRestarting, reason, d.message, &job), "restart")) {
    return;
  }
  rt = Runtime();
  // The survivors of a lost worker wait on it inside a collective: no step can finish, so
  // a grace would only delay the restart.
  const bool peer_lost = reason == "WorkerLost" || reason == "LeaseExpired";
  StopProcesses(job, d.message,
                peer_lost ? std::optional<absl::Duration>(absl::ZeroDuration()) : std::nullopt);
  MaybeRestart(job_id);  // with zero backoff and no live process, right away
}

void Coordinator::Resize(const std::string& job_id, const std::string& reason,
                         const std::string& cause, const std::string& worker_id) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return;
  baton::v1::Job job = *jobs_->Peek(job_id);
  const int64_t generation = job.generation();
  Runtime& rt = runtime_[job_id];
  const absl::Time now = clock_->Now();
  RecordPlannedRestart(&job, NewFailure(job, rt, baton::v1::FAILURE_CLASS_PLANNED, reason, cause,
                                        std::nullopt, worker_id, now));

  // Rank 0 saves the state at a step boundary first, if it can be asked to.
  const baton::v1::RankInfo* rank0 = nullptr;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.rank() == 0) rank0 = &r;
  }
  const bool ask = *state == JobState::kRunning && job.spec().has_trainer() &&
                   rank0 != nullptr && !rank0->has_exit() &&
                   workers_->IsConnected(rank0->worker_id()) &&
                   workers_->ProtocolVersion(rank0->worker_id()) >=
                       kCheckpointRequestProtocolVersion;
  const std::string message =
      absl::StrCat("generation ", generation, " resizes (planned): ", cause,
                   ask ? "; rank 0 checkpoints at its next step boundary first"
                       : "; stopping its processes");
  BATON_LOG(INFO) << "job " << job_id << ": " << message;
  if (!Ok(jobs_->Transition(job_id, JobState::kRestarting, reason, message, &job), "resize")) {
    return;
  }
  rt = Runtime();
  if (ask) {
    baton::v1::CoordinatorMessage msg;
    baton::v1::RequestCheckpoint* req = msg.mutable_request_checkpoint();
    req->set_job_id(job_id);
    req->set_generation(generation);
    req->set_rank(0);
    req->set_reason(cause);
    Send(rank0->worker_id(), msg);
    rt.checkpoint_deadline = now + options_.checkpoint_timeout;
  } else {
    StopProcesses(job, message);
  }
  MaybeRestart(job_id);
}

baton::v1::Failure Coordinator::NewFailure(const baton::v1::Job& job, const Runtime& rt,
                                           baton::v1::FailureClass failure_class,
                                           const std::string& reason, const std::string& cause,
                                           std::optional<int32_t> rank,
                                           const std::string& worker_id,
                                           absl::Time occurred) const {
  baton::v1::Failure f;
  f.set_generation(job.generation());
  f.set_failure_class(failure_class);
  f.set_reason(reason);
  f.set_cause(cause);
  if (rank.has_value()) f.set_rank(*rank);
  f.set_worker_id(worker_id);
  if (rt.last_step.has_value()) f.set_step(*rt.last_step);
  const absl::Time now = clock_->Now();
  *f.mutable_fail_time() = ToProto(now);
  // Clocks of other machines may run ahead: never after the detection.
  if (occurred != absl::InfinitePast()) {
    *f.mutable_occurred_time() = ToProto(std::min(occurred, now));
  }
  return f;
}

void Coordinator::MaybeRestart(const std::string& job_id) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || *state != JobState::kRestarting) return;
  baton::v1::Job job = *jobs_->Peek(job_id);
  const int64_t generation = job.generation();
  baton::v1::Failure* f = LastFailure(&job);
  if (f == nullptr || f->generation() != generation || f->next_generation() != generation + 1) {
    Fail(job_id, "RestartFailed",
         absl::StrCat("restarting generation ", generation, " without a recorded failure"));
    return;
  }
  const absl::Time now = clock_->Now();
  const absl::Time failed_at = FromProto(f->fail_time());
  absl::Time lease_expired = absl::InfinitePast();
  const bool all_stopped = GenerationStopped(job, &lease_expired);
  if (!AwaitCheckpoint(job, all_stopped)) return;
  if (!f->has_stopped_time()) {
    absl::Duration stop_wait = options_.stop_grace + workers_->lease().lease;
    if (f->failure_class() == baton::v1::FAILURE_CLASS_PLANNED) {
      stop_wait += options_.checkpoint_timeout;
    }
    if (!all_stopped) {
      if (now < failed_at + stop_wait) return;
      // Never a new generation beside a live one: wait for leases to run out, revoking
      // those of connected workers whose processes ignore the stop. Only workers without
      // leases (protocol < 3) are given up on.
      if (!RevokeUnstopped(job, stop_wait)) return;
    }
    *f->mutable_stopped_time() = ToProto(now);
    if (lease_expired != absl::InfinitePast()) {
      *f->mutable_lease_expired_time() = ToProto(std::min(lease_expired, now));
    }
    const std::string what =
        all_stopped
            ? absl::StrCat("every process of generation ", generation, " stopped",
                           lease_expired != absl::InfinitePast()
                               ? " (a lost worker's lease expired, so its processes did)"
                               : "")
            : absl::StrCat("not every process of generation ", generation,
                           " reported its exit within ", absl::FormatDuration(stop_wait),
                           " on workers without leases; restarting anyway");
    if (!Ok(jobs_->Update(job, {Event("GenerationStopped", what)}), "generation stopped")) {
      return;
    }
  }
  const absl::Time restart_at =
      std::max(failed_at + FromProto(f->backoff()), FromProto(f->stopped_time()));
  if (now < restart_at) return;

  const baton::v1::JobSpec& spec = job.spec();
  PendingJob pending;
  pending.job_id = job_id;
  pending.min_workers = spec.workers().min();
  pending.max_workers = MaxWorkers(spec);
  pending.slots_per_worker = SlotsPerWorker(spec);
  const std::vector<WorkerCapacity> capacity = FreeCapacity(job_id);
  const std::vector<std::string> gang = PlaceRestart(WorkersOf(job), pending, capacity);
  if (gang.empty()) {
    if (now < restart_at + options_.rendezvous_timeout) return;  // wait for workers
    const auto available = std::count_if(
        capacity.begin(), capacity.end(),
        [&](const WorkerCapacity& w) { return w.free_slots >= pending.slots_per_worker; });
    Fail(job_id, "NotEnoughWorkers",
         absl::StrCat("cannot restart after generation ", generation, " failed: only ",
                      available, " of the ", pending.min_workers,
                      " workers needed (workers.min) were available within ",
                      absl::FormatDuration(options_.rendezvous_timeout)));
    return;
  }
  *f->mutable_rendezvous_time() = ToProto(now);  // stored by StartRendezvous' transition
  StartRendezvous(std::move(job), gang, "Restarted");
}

bool Coordinator::AwaitCheckpoint(const baton::v1::Job& job, bool all_stopped) {
  Runtime& rt = runtime_[job.id()];
  if (rt.checkpoint_deadline == absl::InfiniteFuture()) return true;
  // Waiting for rank 0's checkpoint: its exit (or any other) ends the wait.
  const bool any_exited = std::any_of(job.ranks().begin(), job.ranks().end(),
                                      [](const baton::v1::RankInfo& r) { return r.has_exit(); });
  if (!any_exited && !all_stopped && clock_->Now() < rt.checkpoint_deadline) return false;
  const bool timed_out = !any_exited && !all_stopped;
  const std::string why =
      timed_out ? absl::StrCat("rank 0 did not checkpoint within ",
                               absl::FormatDuration(options_.checkpoint_timeout),
                               "; stopping generation ", job.generation(), " anyway")
                : absl::StrCat("generation ", job.generation(),
                               " checkpointed for a planned resize");
  if (timed_out && !Ok(jobs_->RecordEvent(job.id(), "CheckpointTimeout", why), "checkpoint")) {
    return false;
  }
  rt.checkpoint_deadline = absl::InfiniteFuture();
  StopProcesses(job, why);
  return true;
}

bool Coordinator::GenerationStopped(const baton::v1::Job& job, absl::Time* lease_expired) const {
  bool all = true;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.has_exit()) continue;
    if (!workers_->ProcessesStopped(r.worker_id())) {
      all = false;
    } else {
      *lease_expired = std::max(*lease_expired, workers_->LeaseExpiry(r.worker_id()));
    }
  }
  return all;
}

bool Coordinator::RevokeUnstopped(const baton::v1::Job& job, absl::Duration waited) {
  bool waiting = false;
  std::set<std::string> revoked;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    const std::string& w = r.worker_id();
    if (r.has_exit() || workers_->ProcessesStopped(w)) continue;
    if (!workers_->IsConnected(w)) {
      waiting = true;  // lost: its lease is still running out
    } else if (workers_->HasLease(w)) {
      waiting = true;
      // A worker that (re)connected since was asked to stop then: give it as long.
      if (clock_->Now() < workers_->ConnectedSince(w) + waited) continue;
      if (!revoked.insert(w).second) continue;
      const std::string why = absl::StrCat("rank ", r.rank(), " of job ", job.id(), " generation ",
                                           job.generation(), " did not exit within ",
                                           absl::FormatDuration(waited), " of the stop");
      if (!Ok(jobs_->RecordEvent(job.id(), "LeaseRevoked",
                                 absl::StrCat("worker ", w, ": ", why,
                                              "; the next generation starts once its lease ran "
                                              "out, which kills its processes")),
              "lease revoked")) {
        return false;
      }
      BATON_LOG(WARNING) << "revoking the lease of worker " << w << ": " << why;
      workers_->Revoke(w, why);
    }
  }
  return !waiting;
}

bool Coordinator::ReattributeFailure(const std::string& job_id, int32_t rank,
                                     const std::string& worker_id,
                                     const baton::v1::ProcessExit& exit,
                                     const std::string& what) {
  baton::v1::Job job = *jobs_->Peek(job_id);
  baton::v1::Failure* f = LastFailure(&job);
  if (f == nullptr || f->generation() != job.generation() ||
      f->failure_class() != baton::v1::FAILURE_CLASS_USER || !f->has_occurred_time() ||
      !Failed(exit) || !exit.has_time() ||
      FromProto(exit.time()) >= FromProto(f->occurred_time())) {
    return true;
  }
  baton::v1::JobEvent event = Event(
      "FailureReattributed", absl::StrCat("generation ", f->generation(), " failed first at ",
                                          what, " (reported after: ", f->cause(), ")"));
  f->set_cause(what);
  f->set_rank(rank);
  f->set_worker_id(worker_id);
  *f->mutable_occurred_time() = exit.time();
  return Ok(jobs_->Update(job, {std::move(event)}), "reattribute failure");
}

bool Coordinator::ReattributeToLoss(const std::string& job_id, const std::string& worker_id,
                                    const std::string& reason, const std::string& cause,
                                    absl::Time occurred) {
  baton::v1::Job job = *jobs_->Peek(job_id);
  baton::v1::Failure* f = LastFailure(&job);
  if (f == nullptr || f->generation() != job.generation() ||
      f->failure_class() != baton::v1::FAILURE_CLASS_USER || !f->has_occurred_time() ||
      occurred >= FromProto(f->occurred_time()) ||
      std::none_of(job.ranks().begin(), job.ranks().end(),
                   [&](const baton::v1::RankInfo& r) { return r.worker_id() == worker_id; })) {
    return true;
  }
  baton::v1::JobEvent event = Event(
      "FailureReattributed", absl::StrCat("generation ", f->generation(), " failed first at ",
                                          cause, " (its peers' exits followed: ", f->cause(), ")"));
  baton::v1::RestartStats* stats = job.mutable_restarts();
  if (f->next_generation() != 0) {
    stats->set_user(stats->user() - 1);
    stats->set_infra(stats->infra() + 1);
  }
  f->set_failure_class(baton::v1::FAILURE_CLASS_INFRA);
  f->set_reason(reason);
  f->set_cause(cause);
  f->clear_rank();
  f->set_worker_id(worker_id);
  *f->mutable_occurred_time() = ToProto(occurred);
  return Ok(jobs_->Update(job, {std::move(event)}), "reattribute to loss");
}

bool Coordinator::NoteFirstStep(const std::string& job_id, int64_t step, absl::Time at) {
  baton::v1::Job job = *jobs_->Peek(job_id);
  baton::v1::Failure* f = LastFailure(&job);
  if (f == nullptr || f->next_generation() != job.generation() || f->has_first_step_time()) {
    return true;
  }
  // The worker's time of the step (not when its batch of points arrived), but never later
  // than now nor before the generation ran (clocks of other machines may differ).
  absl::Time when = std::min(at, clock_->Now());
  if (f->has_running_time()) when = std::max(when, FromProto(f->running_time()));
  *f->mutable_first_step_time() = ToProto(when);
  f->set_resumed_step(step);
  baton::v1::JobEvent event =
      Event("Resumed", absl::StrCat("generation ", job.generation(), " reported step ", step,
                                    " (generation ", f->generation(), " failed at ",
                                    StepText(*f), ")"));
  return Ok(jobs_->Update(job, {std::move(event)}), "first step");
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
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (std::find(out.begin(), out.end(), r.worker_id()) == out.end()) {
      out.push_back(r.worker_id());
    }
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
  if (on_halt_) on_halt_(halted_);
}

}  // namespace baton::coordinator
