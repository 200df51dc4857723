#include "coordinator/control/coordinator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/control/job_ranks.h"

namespace baton::coordinator {

Coordinator::Coordinator(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                         CoordinatorOptions options)
    : ctx_(jobs, workers, clock, options),
      recovery_(&ctx_,
                [this](baton::v1::Job job, const std::vector<std::string>& worker_ids,
                       const std::string& reason) {
                  rendezvous_.StartRendezvous(std::move(job), worker_ids, reason);
                }),
      rendezvous_(&ctx_, &recovery_),
      profiles_(&ctx_),
      sharing_(&ctx_, &recovery_,
               [this](baton::v1::Job job, const std::vector<std::string>& worker_ids,
                      const std::string& reason) {
                 rendezvous_.StartRendezvous(std::move(job), worker_ids, reason);
               }),
      jobs_(jobs),
      workers_(workers),
      clock_(clock) {
  ctx_.SetHaltHandler([this](const absl::Status& halted) {
    profiles_.FailAll(halted);
    if (on_halt_) on_halt_(halted);
  });
}

namespace {

// The store's meta key of the cordons (a serialised WorkerCordons).
constexpr char kCordonsKey[] = "worker_cordons";
constexpr int kMaxCordons = 10000;
constexpr size_t kMaxCordonReason = 256;

}  // namespace

absl::Status Coordinator::Recover() {
  absl::StatusOr<std::string> stored = jobs_->ReadMeta(kCordonsKey);
  if (stored.ok()) {
    baton::v1::WorkerCordons cordons;
    if (!cordons.ParseFromString(*stored)) {
      return absl::DataLossError("the stored worker cordons do not parse");
    }
    for (const baton::v1::WorkerCordon& c : cordons.cordons()) workers_->SetCordon(c);
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  return rendezvous_.Recover();
}

absl::StatusOr<baton::v1::Worker> Coordinator::CordonWorker(const std::string& worker_id,
                                                            const std::string& reason,
                                                            const std::string& by) {
  RETURN_IF_ERROR(ctx_.halted());
  if (!workers_->Known(worker_id) && !workers_->IsCordoned(worker_id)) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is unknown: `baton workers` lists the workers"));
  }
  if (reason.size() > kMaxCordonReason) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason: ", reason.size(), " bytes is too long; at most ", kMaxCordonReason));
  }
  if (!workers_->IsCordoned(worker_id) &&
      static_cast<int>(workers_->cordons().size()) >= kMaxCordons) {
    return absl::ResourceExhaustedError(
        absl::StrCat(kMaxCordons, " workers are cordoned already; uncordon some first"));
  }
  baton::v1::WorkerCordon cordon;
  cordon.set_worker_id(worker_id);
  cordon.set_reason(reason);
  cordon.set_by(by);
  *cordon.mutable_time() = ToProto(clock_->Now());
  std::map<std::string, baton::v1::WorkerCordon> next = workers_->cordons();
  next[worker_id] = cordon;
  RETURN_IF_ERROR(SaveCordons(next));
  workers_->SetCordon(cordon);
  BATON_LOG(INFO) << "worker " << worker_id << " cordoned by " << by << ": " << reason;
  return ShownWorker(worker_id);
}

absl::StatusOr<baton::v1::Worker> Coordinator::UncordonWorker(const std::string& worker_id) {
  RETURN_IF_ERROR(ctx_.halted());
  if (!workers_->Known(worker_id) && !workers_->IsCordoned(worker_id)) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is unknown: `baton workers` lists the workers"));
  }
  if (workers_->IsCordoned(worker_id)) {
    std::map<std::string, baton::v1::WorkerCordon> next = workers_->cordons();
    next.erase(worker_id);
    RETURN_IF_ERROR(SaveCordons(next));
    workers_->ClearCordon(worker_id);
    BATON_LOG(INFO) << "worker " << worker_id << " uncordoned";
    rendezvous_.Schedule();  // its slots may start waiting jobs
  }
  return ShownWorker(worker_id);
}

absl::Status Coordinator::SaveCordons(const std::map<std::string, baton::v1::WorkerCordon>& all) {
  baton::v1::WorkerCordons cordons;
  for (const auto& [id, c] : all) *cordons.add_cordons() = c;
  const absl::Status s = jobs_->WriteMeta(kCordonsKey, cordons.SerializeAsString());
  if (!s.ok() && !jobs_->store_error().ok()) ctx_.Halt(jobs_->store_error());
  return s;
}

baton::v1::Worker Coordinator::ShownWorker(const std::string& worker_id) const {
  for (baton::v1::Worker& w : ListWorkers()) {
    if (w.id() == worker_id) return w;
  }
  baton::v1::Worker unseen;  // cordoned, not connected since this coordinator started
  unseen.set_id(worker_id);
  if (auto c = workers_->cordons().find(worker_id); c != workers_->cordons().end()) {
    *unseen.mutable_cordon() = c->second;
  }
  return unseen;
}

absl::StatusOr<baton::v1::Job> Coordinator::SubmitJob(baton::v1::JobSpec spec,
                                                      const std::string& request_id,
                                                      const std::string& owner) {
  RETURN_IF_ERROR(ctx_.halted());
  baton::v1::JobQueueing queueing;
  if (sharing_.enabled()) {
    ASSIGN_OR_RETURN(queueing, sharing_.Resolve(spec, owner));
  } else if (!spec.queue().empty() || !spec.priority().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.queue().empty() ? "priority" : "queue",
        ": this coordinator has no queues; it starts jobs first come, first served (leave "
        "queue and priority unset, or start it with --queue_file)"));
  }
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(std::move(spec), request_id, owner, queueing);
  if (!job.ok()) {
    if (!jobs_->store_error().ok()) ctx_.Halt(jobs_->store_error());
    return job.status();  // e.g. INVALID_ARGUMENT: the caller's to fix, not ours to log
  }
  rendezvous_.Schedule();
  // Return the state after scheduling (it may already be in RENDEZVOUS).
  absl::StatusOr<baton::v1::Job> now = jobs_->GetWithoutEvents(job->id());
  if (now.ok()) sharing_.Describe(&*now);
  return now;
}

void Coordinator::SetQueues(QueueSet set) {
  sharing_.SetQueues(std::move(set));
  rendezvous_.SetScheduler([this] { sharing_.Schedule(); });
  rendezvous_.Schedule();
}

absl::StatusOr<baton::v1::Job> Coordinator::CancelJob(const std::string& job_id,
                                                      const std::string& reason) {
  RETURN_IF_ERROR(ctx_.halted());
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok()) return state.status();
  if (IsTerminal(*state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already finished (", JobStateName(*state), "); nothing to cancel"));
  }
  const std::string message =
      reason.empty() ? std::string("cancelled by user") : absl::StrCat("cancelled: ", reason);
  absl::Status s = jobs_->Transition(job_id, JobState::kCancelled, "Cancelled", message);
  if (!ctx_.Ok(s, "cancel")) return s;
  ctx_.StopProcesses(*jobs_->Peek(job_id), message);
  ctx_.ForgetRuntime(job_id);
  rendezvous_.Schedule();  // freed slots
  return jobs_->GetWithoutEvents(job_id);
}

std::vector<baton::v1::Worker> Coordinator::ListWorkers() const {
  std::vector<baton::v1::Worker> list = workers_->List();
  const std::map<std::string, int> used = ctx_.UsedSlots();
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
  RETURN_IF_ERROR(ctx_.halted());
  if (reg.worker_id().empty()) {
    return absl::InvalidArgumentError("register.worker_id: must not be empty");
  }
  if (reg.resources().slots() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("register.resources.slots: worker ", reg.worker_id(), " offers ",
                     reg.resources().slots(), " slots; must be at least 1"));
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
  *ack.mutable_registered()->mutable_heartbeat_interval() =
      ToProto(ctx_.options().heartbeat_interval);
  if (workers_->HasLease(reg.worker_id())) {
    *ack.mutable_registered()->mutable_lease() = ToProto(workers_->lease().lease);
  }
  ctx_.Send(reg.worker_id(), ack);
  rendezvous_.Reattach(reg.worker_id(), reg);
  if (reg.draining()) recovery_.MoveJobsOff(reg.worker_id(), "it reconnected while draining");
  rendezvous_.Schedule();
  return session;
}

void Coordinator::OnWorkerMessage(const std::string& worker_id, uint64_t session,
                                  const baton::v1::WorkerMessage& msg) {
  if (!ctx_.halted().ok() || !workers_->IsCurrent(worker_id, session)) return;
  switch (msg.msg_case()) {
    case baton::v1::WorkerMessage::kHeartbeat:
      if (workers_->Heartbeat(worker_id, session)) {
        baton::v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_seq(msg.heartbeat().seq());
        ctx_.Send(worker_id, ack);
      }
      break;
    case baton::v1::WorkerMessage::kPortReserved:
      rendezvous_.OnPortReserved(worker_id, msg.port_reserved());
      break;
    case baton::v1::WorkerMessage::kAssignmentStarted:
      rendezvous_.OnAssignmentStarted(worker_id, msg.assignment_started());
      break;
    case baton::v1::WorkerMessage::kProcessExited: {
      const baton::v1::ProcessExited& e = msg.process_exited();
      rendezvous_.OnProcessExited(worker_id, e.job_id(), e.generation(), e.rank(), e.exit());
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
      rendezvous_.OnAssignmentFailed(worker_id, msg.assignment_failed());
      break;
    case baton::v1::WorkerMessage::kProfileTrace:
      profiles_.OnProfileTrace(worker_id, msg.profile_trace());
      break;
    case baton::v1::WorkerMessage::kPreflightResult:
      rendezvous_.OnPreflightResult(worker_id, msg.preflight_result());
      break;
    case baton::v1::WorkerMessage::kRegister:
      BATON_LOG(WARNING) << "worker " << worker_id << " sent Register twice; ignored";
      break;
    case baton::v1::WorkerMessage::MSG_NOT_SET:
      break;
  }
}

void Coordinator::OnWorkerDraining(const std::string& worker_id, const std::string& reason) {
  if (!ctx_.halted().ok() || !workers_->SetDraining(worker_id))
    return;  // already draining (or gone)
  const std::string why = reason.empty() ? std::string("it is draining")
                                         : absl::StrCat("it is draining (", reason, ")");
  BATON_LOG(INFO) << "worker " << worker_id << ": " << why;
  recovery_.MoveJobsOff(worker_id, why);
  rendezvous_.Schedule();
}

void Coordinator::OnWorkerDisconnected(const std::string& worker_id, uint64_t session) {
  if (!workers_->Disconnect(worker_id, session) || !ctx_.halted().ok()) return;
  recovery_.HandleWorkerLost(worker_id, baton::v1::FAILURE_REASON_WORKER_LOST, "its stream closed",
                             clock_->Now());
  rendezvous_.Schedule();  // the job's other workers are free again
}

void Coordinator::FlushStaged() {
  if (!ctx_.halted().ok()) return;
  last_flush_ = clock_->Now();
  ctx_.Ok(jobs_->Flush(), "flush staged");
}

void Coordinator::OnIdle() {
  if (clock_->Now() - last_flush_ < ctx_.options().group_commit_interval) return;
  FlushStaged();
}

void Coordinator::ReconcileOnce() {
  FlushStaged();
  if (!ctx_.halted().ok()) return;
  for (const std::string& id : workers_->ExpireLeases()) {
    const LeaseOptions& lease = workers_->lease();
    recovery_.HandleWorkerLost(id, baton::v1::FAILURE_REASON_LEASE_EXPIRED,
                               absl::StrCat("its lease expired: no heartbeat for more than ",
                                            absl::FormatDuration(lease.lease + lease.margin),
                                            " (lease ", absl::FormatDuration(lease.lease),
                                            " + margin ", absl::FormatDuration(lease.margin),
                                            "); partitioned or down, its processes are stopped"),
                               workers_->LastHeartbeat(id));
  }
  const absl::Time now = clock_->Now();
  for (const std::string& id : ctx_.RuntimeJobIds()) {
    absl::StatusOr<JobState> state = jobs_->State(id);
    if (!state.ok() || IsTerminal(*state)) {
      ctx_.ForgetRuntime(id);
      continue;
    }
    if (rendezvous_.CheckTimeouts(id, *state, now)) continue;
    if (*state == JobState::kRunning) recovery_.CheckStall(id, now);
  }
  profiles_.CheckProfiles();
  // Restarts before scheduling: a restarting job keeps its claim on its workers.
  for (const std::string& id : jobs_->JobsIn({JobState::kRestarting})) {
    recovery_.MaybeRestart(id);
  }
  rendezvous_.Schedule();
  // A little retention work each pass keeps every pass short.
  ctx_.Ok(jobs_->Prune(/*max_jobs=*/2), "prune");
  jobs_->PumpStreams();  // history to watchers whose clients keep up
}

}  // namespace baton::coordinator
