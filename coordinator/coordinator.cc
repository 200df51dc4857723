#include "coordinator/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/proto_time.h"
#include "coordinator/rank_assignment.h"
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

// Processes per worker. Stored specs went through WithDefaults, which always sets it;
// the fallback only guards records written by hand.
int SlotsPerWorker(const baton::v1::JobSpec& spec) {
  return spec.has_slots_per_worker() ? spec.slots_per_worker() : 1;
}

bool Failed(const baton::v1::ProcessExit& exit) {
  return exit.signal() != 0 || exit.exit_code() != 0;
}

}  // namespace

Coordinator::Coordinator(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                         CoordinatorOptions options)
    : jobs_(jobs), workers_(workers), clock_(clock), options_(options) {}

absl::Status Coordinator::Recover() {
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous})) {
    absl::Status s = jobs_->Transition(id, JobState::kQueued, "CoordinatorRestarted",
                                       "coordinator restarted during rendezvous; requeued");
    if (!s.ok()) return s;
  }
  const absl::Time deadline = clock_->Now() + options_.reattach_timeout;
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning})) {
    Runtime& rt = runtime_[id];
    for (const std::string& w : WorkersOf(*jobs_->Peek(id))) rt.awaiting_workers.insert(w);
    rt.reattach_deadline = deadline;
    Check(jobs_->RecordEvent(id, "AwaitingWorkers",
                             absl::StrCat("coordinator restarted; waiting up to ",
                                          absl::FormatDuration(options_.reattach_timeout),
                                          " for workers ",
                                          absl::StrJoin(rt.awaiting_workers, ", "),
                                          " to report back")),
          "record event");
  }
  return absl::OkStatus();
}

absl::StatusOr<baton::v1::Job> Coordinator::SubmitJob(baton::v1::JobSpec spec) {
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(std::move(spec));
  if (!job.ok()) return job.status();
  Schedule();
  // Return the state after scheduling (it may already be in RENDEZVOUS).
  absl::StatusOr<baton::v1::Job> now = jobs_->Get(job->id());
  if (now.ok()) now->clear_events();
  return now;
}

absl::StatusOr<baton::v1::Job> Coordinator::CancelJob(const std::string& job_id,
                                                      const std::string& reason) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok()) return state.status();
  if (IsTerminal(*state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already finished (", JobStateName(*state), "); nothing to cancel"));
  }
  const std::string message =
      reason.empty() ? std::string("cancelled by user") : absl::StrCat("cancelled: ", reason);
  absl::Status s = jobs_->Transition(job_id, JobState::kCancelled, "Cancelled", message);
  if (!s.ok()) return s;
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
  if (reg.worker_id().empty()) {
    return absl::InvalidArgumentError("register.worker_id: must not be empty");
  }
  if (reg.protocol_version() < kMinWorkerProtocolVersion ||
      reg.protocol_version() > kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", reg.worker_id(), " speaks protocol version ", reg.protocol_version(),
        "; this coordinator supports ", kMinWorkerProtocolVersion, "..", kProtocolVersion));
  }
  const std::string host = reg.advertise_host().empty() ? peer_host : reg.advertise_host();
  const bool known_lost = !workers_->IsReady(reg.worker_id()) && !workers_->Host(reg.worker_id()).empty();
  const uint64_t session = workers_->Connect(reg, host, std::move(channel));
  BATON_LOG(INFO) << "worker " << reg.worker_id() << " connected from " << host << " ("
                  << reg.resources().slots() << " slots" << (known_lost ? ", reconnect" : "")
                  << ")";
  baton::v1::CoordinatorMessage ack;
  ack.mutable_registered()->set_protocol_version(kProtocolVersion);
  *ack.mutable_registered()->mutable_heartbeat_interval() = ToProto(options_.heartbeat_interval);
  workers_->Send(reg.worker_id(), ack);
  ReattachAssignments(reg.worker_id(), reg);
  Schedule();
  return session;
}

void Coordinator::ReattachAssignments(const std::string& worker_id,
                                      const baton::v1::Register& reg) {
  std::set<std::string> reported;
  for (const baton::v1::AssignmentStatus& a : reg.assignments()) {
    baton::v1::Job* job = ActiveJob(a.job_id(), a.generation());
    if (job == nullptr) {
      // Unknown, finished or superseded: its processes must not run on.
      baton::v1::CoordinatorMessage stop;
      stop.mutable_stop_assignment()->set_job_id(a.job_id());
      stop.mutable_stop_assignment()->set_generation(a.generation());
      *stop.mutable_stop_assignment()->mutable_grace() = ToProto(options_.stop_grace);
      stop.mutable_stop_assignment()->set_reason("job is not running this generation");
      workers_->Send(worker_id, stop);
      continue;
    }
    reported.insert(a.job_id());
    for (const baton::v1::RankInfo& r : a.ranks()) {
      for (baton::v1::RankInfo& mine : *job->mutable_ranks()) {
        if (mine.rank() == r.rank() && mine.worker_id() == worker_id) mine.set_pid(r.pid());
      }
    }
    Check(jobs_->Save(a.job_id()), "save job");
    Runtime& rt = runtime_[a.job_id()];
    rt.started_workers.insert(worker_id);
    if (rt.awaiting_workers.erase(worker_id) > 0 && rt.awaiting_workers.empty()) {
      rt.reattach_deadline = absl::InfiniteFuture();
      Check(jobs_->RecordEvent(a.job_id(), "Reattached",
                               "every worker reported its processes after the restart"),
            "record event");
    }
    for (const baton::v1::RankInfo& r : a.ranks()) {
      if (r.has_exit()) OnProcessExited(worker_id, a.job_id(), a.generation(), r.rank(), r.exit());
    }
  }
  // Active jobs that count on this worker but it does not run them: it restarted and
  // their processes are gone.
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning, JobState::kRendezvous})) {
    if (reported.count(id) > 0) continue;
    const baton::v1::Job& job = *jobs_->Peek(id);
    // A worker forgets an assignment once its ranks' exits were reported.
    if (!HasLiveRanksOn(job, worker_id)) continue;
    Runtime& rt = runtime_[id];
    if (job.state() == baton::v1::JOB_STATE_RENDEZVOUS && rt.started_workers.count(worker_id) == 0) {
      continue;  // its StartAssignment is still to come (or is in flight)
    }
    Fail(id, "WorkerRestarted",
         absl::StrCat("worker ", worker_id, " reconnected without the job's processes"));
  }
}

void Coordinator::OnWorkerMessage(const std::string& worker_id, uint64_t session,
                                  const baton::v1::WorkerMessage& msg) {
  if (!workers_->IsCurrent(worker_id, session)) return;
  switch (msg.msg_case()) {
    case baton::v1::WorkerMessage::kHeartbeat:
      workers_->Heartbeat(worker_id, session);
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
    case baton::v1::WorkerMessage::kMetrics: {
      const baton::v1::MetricsReport& m = msg.metrics();
      absl::StatusOr<JobState> state = jobs_->State(m.job_id());
      const baton::v1::Job* job = jobs_->Peek(m.job_id());
      if (!state.ok() || job == nullptr) break;
      std::vector<baton::v1::MetricPoint> points;
      for (const baton::v1::MetricPoint& p : m.points()) {
        if (p.generation() == job->generation()) points.push_back(p);
      }
      Check(jobs_->AddMetrics(m.job_id(), points), "add metrics");
      break;
    }
    case baton::v1::WorkerMessage::kLogs: {
      const baton::v1::LogsReport& l = msg.logs();
      if (!jobs_->State(l.job_id()).ok()) break;
      Check(jobs_->AddLogs(l.job_id(), {l.lines().begin(), l.lines().end()}), "add logs");
      break;
    }
    case baton::v1::WorkerMessage::kRegister:
      BATON_LOG(WARNING) << "worker " << worker_id << " sent Register twice; ignored";
      break;
    case baton::v1::WorkerMessage::MSG_NOT_SET:
      break;
  }
}

void Coordinator::OnWorkerDisconnected(const std::string& worker_id, uint64_t session) {
  if (!workers_->Disconnect(worker_id, session)) return;
  HandleWorkerLost(worker_id, "its stream closed");
  Schedule();  // the job's other workers are free again
}

void Coordinator::ReconcileOnce() {
  for (const std::string& id : workers_->ExpireHeartbeats(options_.heartbeat_timeout)) {
    HandleWorkerLost(id, absl::StrCat("no heartbeat for more than ",
                                      absl::FormatDuration(options_.heartbeat_timeout)));
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
      Fail(id, "ReattachTimeout",
           absl::StrCat("coordinator restarted and workers ",
                        absl::StrJoin(rt.awaiting_workers, ", "), " did not report back within ",
                        absl::FormatDuration(options_.reattach_timeout)));
    }
  }
  Schedule();
}

void Coordinator::HandleWorkerLost(const std::string& worker_id, const std::string& why) {
  BATON_LOG(WARNING) << "worker " << worker_id << " lost: " << why;
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    if (!HasLiveRanksOn(*jobs_->Peek(id), worker_id)) continue;
    if (runtime_[id].awaiting_workers.count(worker_id) > 0) continue;  // not back yet anyway
    Fail(id, "WorkerLost", absl::StrCat("worker ", worker_id, " lost: ", why));
  }
}

void Coordinator::Schedule() {
  std::vector<PendingJob> queue;
  for (const std::string& id : jobs_->JobsIn({JobState::kQueued})) {
    const baton::v1::JobSpec& spec = jobs_->Peek(id)->spec();
    PendingJob p;
    p.job_id = id;
    p.min_workers = spec.workers().min();
    p.max_workers = spec.workers().has_max() ? spec.workers().max() : spec.workers().min();
    p.slots_per_worker = SlotsPerWorker(spec);
    queue.push_back(p);
  }
  if (queue.empty()) return;
  const std::map<std::string, int> used = UsedSlots();
  std::vector<WorkerCapacity> capacity;
  for (const std::string& w : workers_->ReadyWorkers()) {
    auto u = used.find(w);
    capacity.push_back({w, workers_->Slots(w) - (u == used.end() ? 0 : u->second)});
  }
  for (const Placement& p : coordinator::Schedule(queue, capacity)) {
    StartRendezvous(p.job_id, p.worker_ids);
  }
}

void Coordinator::StartRendezvous(const std::string& job_id,
                                  const std::vector<std::string>& worker_ids) {
  baton::v1::Job* job = jobs_->Mutable(job_id);
  const int slots = SlotsPerWorker(job->spec());
  job->set_generation(job->generation() + 1);
  job->clear_ranks();
  job->clear_master_addr();
  job->set_master_port(0);
  for (const RankSlot& s : AssignRanks(worker_ids, slots)) {
    baton::v1::RankInfo* r = job->add_ranks();
    r->set_rank(s.rank);
    r->set_local_rank(s.local_rank);
    r->set_local_world_size(s.local_world_size);
    r->set_group_rank(s.group_rank);
    r->set_worker_id(s.worker_id);
  }
  Runtime& rt = runtime_[job_id];
  rt = Runtime();
  rt.rendezvous_deadline = clock_->Now() + options_.rendezvous_timeout;
  Check(jobs_->Transition(job_id, JobState::kRendezvous, "Scheduled",
                          absl::StrCat("generation ", job->generation(), ": ",
                                       job->ranks_size(), " ranks on workers ",
                                       absl::StrJoin(worker_ids, ", "))),
        "transition");
  baton::v1::CoordinatorMessage msg;
  msg.mutable_reserve_port()->set_job_id(job_id);
  msg.mutable_reserve_port()->set_generation(job->generation());
  if (!workers_->Send(worker_ids.front(), msg)) {
    Fail(job_id, "WorkerLost", absl::StrCat("worker ", worker_ids.front(),
                                            " went away before rendezvous"));
  }
}

void Coordinator::OnPortReserved(const std::string& worker_id,
                                 const baton::v1::PortReserved& msg) {
  baton::v1::Job* job = ActiveJob(msg.job_id(), msg.generation());
  if (job == nullptr || job->state() != baton::v1::JOB_STATE_RENDEZVOUS ||
      job->master_port() != 0 || job->ranks(0).worker_id() != worker_id) {
    return;
  }
  job->set_master_addr(workers_->Host(worker_id));
  job->set_master_port(msg.port());
  Check(jobs_->Save(msg.job_id()), "save job");
  for (const std::string& w : WorkersOf(*job)) {
    baton::v1::CoordinatorMessage out;
    baton::v1::StartAssignment* a = out.mutable_start_assignment();
    a->set_job_id(job->id());
    a->set_generation(job->generation());
    *a->mutable_spec() = job->spec();
    a->set_world_size(job->ranks_size());
    a->set_master_addr(job->master_addr());
    a->set_master_port(job->master_port());
    for (const baton::v1::RankInfo& r : job->ranks()) {
      if (r.worker_id() == w) *a->add_ranks() = r;
    }
    if (!workers_->Send(w, out)) {
      Fail(job->id(), "WorkerLost", absl::StrCat("worker ", w, " went away during rendezvous"));
      return;
    }
  }
}

void Coordinator::OnAssignmentStarted(const std::string& worker_id,
                                      const baton::v1::AssignmentStarted& msg) {
  baton::v1::Job* job = ActiveJob(msg.job_id(), msg.generation());
  if (job == nullptr) return;
  for (const baton::v1::RankInfo& started : msg.ranks()) {
    for (baton::v1::RankInfo& r : *job->mutable_ranks()) {
      if (r.rank() == started.rank() && r.worker_id() == worker_id) r.set_pid(started.pid());
    }
  }
  Check(jobs_->Save(msg.job_id()), "save job");
  Runtime& rt = runtime_[msg.job_id()];
  rt.started_workers.insert(worker_id);
  if (job->state() == baton::v1::JOB_STATE_RENDEZVOUS &&
      rt.started_workers.size() == WorkersOf(*job).size()) {
    rt.rendezvous_deadline = absl::InfiniteFuture();
    Check(jobs_->Transition(msg.job_id(), JobState::kRunning, "Started",
                            absl::StrCat(job->ranks_size(), " processes running, master ",
                                         job->master_addr(), ":", job->master_port())),
          "transition");
  }
}

void Coordinator::OnProcessExited(const std::string& worker_id, const std::string& job_id,
                                  int64_t generation, int32_t rank,
                                  const baton::v1::ProcessExit& exit) {
  baton::v1::Job* job = jobs_->Mutable(job_id);
  if (job == nullptr || job->generation() != generation) return;
  baton::v1::RankInfo* info = nullptr;
  for (baton::v1::RankInfo& r : *job->mutable_ranks()) {
    if (r.rank() == rank && r.worker_id() == worker_id) info = &r;
  }
  if (info == nullptr || info->has_exit()) return;  // unknown or already recorded
  *info->mutable_exit() = exit;
  Check(jobs_->Save(job_id), "save job");
  const std::string what =
      absl::StrCat("rank ", rank, " on worker ", worker_id, " ", DescribeExit(exit));
  Check(jobs_->RecordEvent(job_id, "RankExited", what), "record event");

  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return;
  if (Failed(exit)) {
    Fail(job_id, "RankFailed", what);
    Schedule();
    return;
  }
  const bool all_done = std::all_of(job->ranks().begin(), job->ranks().end(),
                                    [](const baton::v1::RankInfo& r) {
                                      return r.has_exit() && !Failed(r.exit());
                                    });
  if (all_done && *state == JobState::kRunning) {
    runtime_.erase(job_id);
    Check(jobs_->Transition(job_id, JobState::kSucceeded, "Completed",
                            absl::StrCat("all ", job->ranks_size(), " ranks exited 0")),
          "transition");
    Schedule();
  }
}

void Coordinator::Fail(const std::string& job_id, const std::string& reason,
                       const std::string& message) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || IsTerminal(*state)) return;
  BATON_LOG(WARNING) << "job " << job_id << " failed: " << message;
  Check(jobs_->Transition(job_id, JobState::kFailed, reason, message), "transition");
  StopProcesses(*jobs_->Peek(job_id), message);
  runtime_.erase(job_id);
}

void Coordinator::StopProcesses(const baton::v1::Job& job, const std::string& reason) {
  for (const std::string& w : WorkersOf(job)) {
    baton::v1::CoordinatorMessage msg;
    baton::v1::StopAssignment* stop = msg.mutable_stop_assignment();
    stop->set_job_id(job.id());
    stop->set_generation(job.generation());
    *stop->mutable_grace() = ToProto(options_.stop_grace);
    stop->set_reason(reason);
    workers_->Send(w, msg);  // a lost worker kills its processes itself
  }
}

baton::v1::Job* Coordinator::ActiveJob(const std::string& job_id, int64_t generation) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return nullptr;
  baton::v1::Job* job = jobs_->Mutable(job_id);
  if (job->generation() != generation) return nullptr;
  return job;
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

std::map<std::string, int> Coordinator::UsedSlots() const {
  std::map<std::string, int> used;
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    const baton::v1::Job& job = *jobs_->Peek(id);
    for (const baton::v1::RankInfo& r : job.ranks()) ++used[r.worker_id()];
  }
  return used;
}

void Coordinator::Check(const absl::Status& status, const char* what) {
  if (!status.ok()) BATON_LOG(ERROR) << what << " failed: " << status;
}

}  // namespace baton::coordinator
