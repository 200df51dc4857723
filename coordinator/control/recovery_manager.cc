#include "coordinator/control/recovery_manager.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/spec/job_spec.h"
#include "common/time/proto_time.h"
#include "coordinator/control/job_ranks.h"
#include "coordinator/policy/attribution.h"
#include "coordinator/policy/failure_reason.h"
#include "coordinator/policy/rank_assignment.h"
#include "coordinator/policy/restart_policy.h"
#include "coordinator/policy/scale_up.h"
#include "coordinator/policy/scheduler.h"
#include "coordinator/policy/straggler_replacement.h"

namespace baton::coordinator {

RecoveryManager::RecoveryManager(ControlContext* ctx, StartRendezvousFn start_rendezvous)
    : ctx_(ctx),
      jobs_(ctx->jobs()),
      workers_(ctx->workers()),
      clock_(ctx->clock()),
      options_(ctx->options()),
      start_rendezvous_(std::move(start_rendezvous)) {}

void RecoveryManager::FailGeneration(const std::string& job_id,
                                     baton::v1::FailureClass failure_class,
                                     baton::v1::FailureReason reason, const std::string& cause,
                                     std::optional<int32_t> rank, const std::string& worker_id,
                                     absl::Time occurred, const std::string& reason_name) {
  const std::string name =
      reason_name.empty() ? std::string(FailureReasonName(reason)) : reason_name;
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return;
  FailWith(job_id, NewFailure(*jobs_->Peek(job_id), ctx_->Runtime(job_id), failure_class, reason,
                              name, cause, rank, worker_id, occurred));
}

void RecoveryManager::FailWith(const std::string& job_id, baton::v1::Failure failure) {
  const std::string name = failure.reason();
  const baton::v1::FailureReason reason = failure.reason_code();
  baton::v1::Job job = *jobs_->Peek(job_id);
  JobRuntime& rt = ctx_->Runtime(job_id);
  const RestartDecision d = DecideRestart(&job, std::move(failure));
  if (d.kind != RestartDecision::Kind::kRestart) {
    ctx_->Fail(job_id, d.reason, d.message, &job);
    return;
  }
  BATON_LOG(WARNING) << "job " << job_id << ": " << d.message;
  if (job.state() == baton::v1::JOB_STATE_RENDEZVOUS && job.master_port() == 0) {
    // No StartAssignment was sent yet (the pre-flight check or the port's reservation was
    // under way): no rank of the generation runs anywhere, so none is waited for, not even
    // a lost worker's.
    for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
      if (r.has_exit()) continue;
      r.mutable_exit()->set_exit_code(-1);  // never started
      *r.mutable_exit()->mutable_time() = ToProto(clock_->Now());
    }
  }
  if (!ctx_->Ok(jobs_->Transition(job_id, JobState::kRestarting, name, d.message, &job),
                "restart")) {
    return;
  }
  ResetForNextGeneration(rt, clock_->Now());
  // The survivors of a lost worker wait on it inside a collective: no step can finish, so
  // a grace would only delay the restart; so do a hung generation's ranks (a frozen
  // process cannot act on SIGTERM, the others wait for it). Ranks that wait for the next
  // generation instead (the built-in trainer with snapshots) are kept by their workers where
  // the failure left them unharmed: they rejoin it in the same process.
  const bool no_grace = IsWorkerLoss(reason) || reason == baton::v1::FAILURE_REASON_STALLED;
  ctx_->StopProcesses(job, d.message,
                      no_grace ? std::optional<absl::Duration>(absl::ZeroDuration()) : std::nullopt,
                      KeepsWaitingRanks(job.spec(), reason, d.backoff));
  MaybeRestart(job_id);  // with zero backoff and no live process, right away
}

void RecoveryManager::Resize(const std::string& job_id, baton::v1::FailureReason reason,
                             const std::string& cause, const std::string& worker_id,
                             const std::vector<std::string>& released, int max_next_workers) {
  const std::string name(FailureReasonName(reason));
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || !IsActive(*state)) return;
  baton::v1::Job job = *jobs_->Peek(job_id);
  const int64_t generation = job.generation();
  JobRuntime& rt = ctx_->Runtime(job_id);
  const absl::Time now = clock_->Now();
  baton::v1::Failure failure = NewFailure(job, rt, baton::v1::FAILURE_CLASS_PLANNED, reason, name,
                                          cause, std::nullopt, worker_id, now);
  for (const std::string& w : released) failure.add_released_workers(w);
  failure.set_max_next_workers(max_next_workers);
  if (reason == baton::v1::FAILURE_REASON_PREEMPTED) {
    job.mutable_queueing()->set_preemptions(job.queueing().preemptions() + 1);
  }
  RecordPlannedRestart(&job, std::move(failure));

  // Rank 0 saves the state at a step boundary first, if it can be asked to.
  const baton::v1::RankInfo* rank0 = nullptr;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.rank() == 0) rank0 = &r;
  }
  const bool ask =
      *state == JobState::kRunning && CheckpointsOnRequest(job.spec()) && rank0 != nullptr &&
      !rank0->has_exit() && workers_->IsConnected(rank0->worker_id()) &&
      workers_->ProtocolVersion(rank0->worker_id()) >= kCheckpointRequestProtocolVersion;
  const std::string message = absl::StrCat(
      "generation ", generation, " resizes (planned): ", cause,
      ask ? "; rank 0 checkpoints at its next step boundary first" : "; stopping its processes");
  BATON_LOG(INFO) << "job " << job_id << ": " << message;
  if (!ctx_->Ok(jobs_->Transition(job_id, JobState::kRestarting, name, message, &job), "resize")) {
    return;
  }
  ResetForNextGeneration(rt, clock_->Now());
  if (ask) {
    baton::v1::CoordinatorMessage msg;
    baton::v1::RequestCheckpoint* req = msg.mutable_request_checkpoint();
    req->set_job_id(job_id);
    req->set_generation(generation);
    req->set_rank(0);
    req->set_reason(cause);
    ctx_->Send(rank0->worker_id(), msg);
    rt.checkpoint_deadline = now + options_.checkpoint_timeout;
  } else {
    ctx_->StopProcesses(job, message);
  }
  MaybeRestart(job_id);
}

void RecoveryManager::MoveJobsOff(const std::string& worker_id, const std::string& why) {
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    if (!HasLiveRanksOn(*jobs_->Peek(id), worker_id)) continue;
    Resize(id, baton::v1::FAILURE_REASON_DRAINING,
           absl::StrCat("worker ", worker_id, " leaves: ", why), worker_id);
  }
}

void RecoveryManager::MaybeScaleUp(const ScaleUpAllowance& allowance) {
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning})) {
    const baton::v1::Job& job = *jobs_->Peek(id);
    const baton::v1::JobSpec& spec = job.spec();
    ScaleUpFacts facts;
    facts.checkpoints_on_request = CheckpointsOnRequest(spec);
    facts.current = WorkersOf(job);
    facts.max_workers = MaxWorkers(spec);
    facts.slots_per_worker = SlotsPerWorker(spec);
    if (!facts.checkpoints_on_request ||
        static_cast<int>(facts.current.size()) >= facts.max_workers) {
      continue;  // Before gathering the rest.
    }
    const JobRuntime& rt = ctx_->Runtime(id);
    facts.training = rt.last_step.has_value() && rt.awaiting_workers.empty();
    facts.current_ready = std::all_of(facts.current.begin(), facts.current.end(),
                                      [&](const std::string& w) { return workers_->IsReady(w); });
    facts.free = WithoutBenched(ctx_->FreeCapacity(id), rt.benched, clock_->Now());
    std::vector<std::string> joining = DecideScaleUp(facts);
    int cap = 0;  // the next generation's workers at most (0: workers.max)
    if (allowance) {
      const int allowed = allowance(job, static_cast<int>(joining.size()));
      if (allowed < static_cast<int>(joining.size())) joining.resize(std::max(allowed, 0));
      cap = static_cast<int>(facts.current.size() + joining.size());
    }
    if (joining.empty()) continue;
    const size_t grown = facts.current.size() + joining.size();
    Resize(
        id, baton::v1::FAILURE_REASON_SCALING_UP,
        absl::StrCat("worker", joining.size() > 1 ? "s " : " ", absl::StrJoin(joining, ", "),
                     " can join: growing from ", facts.current.size(), " to ", grown, " workers"),
        joining.front(), {}, cap);
  }
}

void RecoveryManager::HandleWorkerLost(const std::string& worker_id,
                                       baton::v1::FailureReason reason, const std::string& why,
                                       absl::Time occurred) {
  BATON_LOG(WARNING) << "worker " << worker_id << " lost: " << why;
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous, JobState::kRunning})) {
    if (!HasLiveRanksOn(*jobs_->Peek(id), worker_id)) continue;
    if (ctx_->Runtime(id).awaiting_workers.count(worker_id) > 0) continue;  // not back yet anyway
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

void RecoveryManager::CheckStall(const std::string& job_id, absl::Time now) {
  JobRuntime& rt = ctx_->Runtime(job_id);
  rt.stall.StartIfUnset(now);  // a job this coordinator recovered: judged from now
  StallDetector::Workers workers;
  workers.last_heard = [this](const std::string& w) { return workers_->LastHeartbeat(w); };
  workers.heartbeat_interval = ctx_->options().heartbeat_interval;
  const baton::v1::Job& job = *jobs_->Peek(job_id);
  std::optional<StallDetector::Stall> stall = rt.stall.Check(job, now, workers);
  if (!stall.has_value()) return;
  baton::v1::Failure f =
      NewFailure(job, rt, baton::v1::FAILURE_CLASS_STALL, baton::v1::FAILURE_REASON_STALLED,
                 std::string(FailureReasonName(baton::v1::FAILURE_REASON_STALLED)), stall->cause,
                 stall->rank, stall->worker_id, stall->since);
  f.set_hang_phase(stall->phase);
  f.set_hang_evidence(stall->evidence);
  FailWith(job_id, std::move(f));
}

baton::v1::Failure RecoveryManager::NewFailure(
    const baton::v1::Job& job, const JobRuntime& rt, baton::v1::FailureClass failure_class,
    baton::v1::FailureReason reason, const std::string& reason_name, const std::string& cause,
    std::optional<int32_t> rank, const std::string& worker_id, absl::Time occurred) const {
  baton::v1::Failure f;
  f.set_generation(job.generation());
  f.set_failure_class(failure_class);
  f.set_reason(reason_name);
  f.set_reason_code(reason);
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

void RecoveryManager::MaybeRestart(const std::string& job_id) {
  absl::StatusOr<JobState> state = jobs_->State(job_id);
  if (!state.ok() || *state != JobState::kRestarting) return;
  if (StillStopping(job_id)) return;
  baton::v1::Job job = *jobs_->Peek(job_id);
  const int64_t generation = job.generation();
  baton::v1::Failure* f = LastFailure(&job);
  if (f == nullptr || f->generation() != generation || f->next_generation() != generation + 1) {
    ctx_->Fail(job_id, "RestartFailed",
               absl::StrCat("restarting generation ", generation, " without a recorded failure"));
    return;
  }
  absl::Time lease_expired = absl::InfinitePast();
  const bool all_stopped = GenerationStopped(job, &lease_expired);
  if (!AwaitCheckpoint(job, all_stopped)) return;
  if (!f->has_stopped_time() && !NoteStopped(&job, f, lease_expired)) return;
  if (f->reason_code() == baton::v1::FAILURE_REASON_PREEMPTED) {
    Requeue(job_id);
    return;
  }
  const absl::Time restart_at =
      std::max(FromProto(f->fail_time()) + FromProto(f->backoff()), FromProto(f->stopped_time()));
  if (clock_->Now() < restart_at) return;  // DecideNextGeneration's first rule, before placing
  PlaceNextGeneration(std::move(job), restart_at);
}

bool RecoveryManager::StillStopping(const std::string& job_id) const {
  const baton::v1::Job& current = *jobs_->Peek(job_id);
  const auto& failures = current.restarts().failures();
  if (failures.empty() || failures.rbegin()->has_stopped_time() ||
      failures.rbegin()->generation() != current.generation()) {
    return false;
  }
  const JobRuntime* rt = ctx_->FindRuntime(job_id);
  if (rt != nullptr && rt->checkpoint_deadline != absl::InfiniteFuture()) return false;
  const baton::v1::Failure& f = *failures.rbegin();
  absl::Time unused = absl::InfinitePast();
  return clock_->Now() < FromProto(f.fail_time()) + StopWait(f) &&
         !GenerationStopped(current, &unused);
}

bool RecoveryManager::NoteStopped(baton::v1::Job* job, baton::v1::Failure* f,
                                  absl::Time lease_expired) {
  const absl::Time now = clock_->Now();
  const int64_t generation = job->generation();
  const absl::Duration stop_wait = StopWait(*f);
  const StopDecision stop = DecideStop(StopFactsOf(*job, FromProto(f->fail_time()), stop_wait));
  for (const StoppingRank& r : stop.revoke) {
    if (!RevokeLease(*job, r, stop_wait)) return false;
  }
  if (!stop.stopped) return false;
  *f->mutable_stopped_time() = ToProto(now);
  if (lease_expired != absl::InfinitePast()) {
    *f->mutable_lease_expired_time() = ToProto(std::min(lease_expired, now));
  }
  const std::string what =
      stop.all_stopped ? absl::StrCat("every process of generation ", generation, " stopped",
                                      lease_expired != absl::InfinitePast()
                                          ? " (a lost worker's lease expired, so its processes did)"
                                          : "")
                       : absl::StrCat("not every process of generation ", generation,
                                      " reported its exit within ", absl::FormatDuration(stop_wait),
                                      " on workers without leases; restarting anyway");
  return ctx_->Ok(jobs_->Update(*job, {NewEvent("GenerationStopped", what)}), "generation stopped");
}

void RecoveryManager::PlaceNextGeneration(baton::v1::Job job, absl::Time restart_at) {
  const absl::Time now = clock_->Now();
  const baton::v1::JobSpec& spec = job.spec();
  PendingJob pending;
  pending.job_id = job.id();
  pending.min_workers = spec.workers().min();
  pending.max_workers = MaxWorkers(spec);
  pending.slots_per_worker = SlotsPerWorker(spec);
  // A shrink's released workers are another job's now; a shrink, a capped scale-up or a
  // coordinator with queues (growing is admission's call) caps the gang.
  const baton::v1::Failure& last = *LastFailure(&job);
  if (last.max_next_workers() > 0) {
    pending.max_workers = std::min(pending.max_workers, last.max_next_workers());
  } else if (hold_gang_size_) {
    pending.max_workers =
        std::min(pending.max_workers,
                 std::max(pending.min_workers, static_cast<int>(WorkersOf(job).size())));
  }
  std::map<std::string, absl::Time>& benched = ctx_->Runtime(job.id()).benched;
  std::vector<WorkerCapacity> all = ctx_->FreeCapacity(job.id());
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](const WorkerCapacity& w) {
                             return std::find(last.released_workers().begin(),
                                              last.released_workers().end(),
                                              w.worker_id) != last.released_workers().end();
                           }),
            all.end());
  // Workers left out as stragglers stay out for their cool-down, and a worker that
  // straggles now is left out when a spare can take its place; both only while the job
  // still gets workers.min without them.
  std::vector<WorkerCapacity> capacity = WithoutBenched(all, benched, now);
  std::vector<SlowWorker> slow;
  for (const auto& [rank, ratio] : jobs_->Stragglers(job.id())) {
    for (const baton::v1::RankInfo& r : job.ranks()) {
      if (r.rank() == rank) slow.push_back({r.worker_id(), rank, ratio});
    }
  }
  const std::vector<StragglerReplacement> replaced =
      StragglersToReplace(slow, WorkersOf(job), capacity, pending.slots_per_worker,
                          jobs_->options().straggler_threshold, jobs_->options().slowdown_window);
  for (const StragglerReplacement& r : replaced) {
    capacity.erase(
        std::remove_if(capacity.begin(), capacity.end(),
                       [&](const WorkerCapacity& w) { return w.worker_id == r.worker_id; }),
        capacity.end());
  }
  std::vector<std::string> gang = PlaceRestart(WorkersOf(job), pending, capacity);
  if (gang.empty()) gang = PlaceRestart(WorkersOf(job), pending, all);
  switch (DecideNextGeneration({now, restart_at, options_.rendezvous_timeout, !gang.empty()})) {
    case NextGeneration::kWait:
      return;  // for workers
    case NextGeneration::kFail: {
      const auto available = std::count_if(
          capacity.begin(), capacity.end(),
          [&](const WorkerCapacity& w) { return w.free_slots >= pending.slots_per_worker; });
      ctx_->Fail(job.id(), "NotEnoughWorkers",
                 absl::StrCat("cannot restart after generation ", job.generation(),
                              " failed: only ", available, " of the ", pending.min_workers,
                              " workers needed (workers.min) were available within ",
                              absl::FormatDuration(options_.rendezvous_timeout)));
      return;
    }
    case NextGeneration::kRendezvous:
      break;
  }
  for (const StragglerReplacement& r : replaced) {
    if (std::find(gang.begin(), gang.end(), r.worker_id) != gang.end()) continue;
    benched[r.worker_id] = now + options_.straggler_cooldown;
    const std::string message = absl::StrCat(
        "worker ", r.worker_id, " left out of generation ", job.generation() + 1,
        " as a straggler (", r.evidence, "), a spare taking its place; not taken back into ",
        "this job for ", absl::FormatDuration(options_.straggler_cooldown),
        " unless it is needed for workers.min");
    BATON_LOG(INFO) << "job " << job.id() << ": " << message;
    if (!ctx_->Ok(jobs_->RecordEvent(job.id(), "StragglerReplaced", message), "straggler")) return;
  }
  // Stored by the rendezvous' transition.
  *LastFailure(&job)->mutable_rendezvous_time() = ToProto(now);
  start_rendezvous_(std::move(job), gang, "Restarted");
}

void RecoveryManager::Requeue(const std::string& job_id) {
  const baton::v1::Job& job = *jobs_->Peek(job_id);
  const baton::v1::Failure& f = *job.restarts().failures().rbegin();
  // Rank 0's latest report: the step it checkpointed at, when it was asked to.
  const int64_t step = std::max<int64_t>(job.result().steps(), f.has_step() ? f.step() : 0);
  const std::string message =
      absl::StrCat("generation ", job.generation(), " stopped",
                   step > 0 ? absl::StrCat(" at step ", step) : std::string(),
                   " (preempted: ", f.cause(), "); waits in queue ", job.queueing().queue(),
                   " and resumes from its checkpoint when admitted again");
  BATON_LOG(INFO) << "job " << job_id << ": " << message;
  if (!ctx_->Ok(jobs_->Transition(job_id, JobState::kQueued, "Requeued", message), "requeue")) {
    return;
  }
  ResetForNextGeneration(ctx_->Runtime(job_id), clock_->Now());
}

bool RecoveryManager::AwaitCheckpoint(const baton::v1::Job& job, bool all_stopped) {
  JobRuntime& rt = ctx_->Runtime(job.id());
  if (rt.checkpoint_deadline == absl::InfiniteFuture()) return true;
  // Waiting for rank 0's checkpoint: its exit (or any other) ends the wait.
  const bool any_exited = std::any_of(job.ranks().begin(), job.ranks().end(),
                                      [](const baton::v1::RankInfo& r) { return r.has_exit(); });
  if (!any_exited && !all_stopped && clock_->Now() < rt.checkpoint_deadline) return false;
  const bool timed_out = !any_exited && !all_stopped;
  const std::string why =
      timed_out
          ? absl::StrCat("rank 0 did not checkpoint within ",
                         absl::FormatDuration(options_.checkpoint_timeout),
                         "; stopping generation ", job.generation(), " anyway")
          : absl::StrCat("generation ", job.generation(), " checkpointed for a planned resize");
  if (timed_out &&
      !ctx_->Ok(jobs_->RecordEvent(job.id(), "CheckpointTimeout", why), "checkpoint")) {
    return false;
  }
  rt.checkpoint_deadline = absl::InfiniteFuture();
  ctx_->StopProcesses(job, why);
  return true;
}

absl::Duration RecoveryManager::StopWait(const baton::v1::Failure& f) const {
  absl::Duration wait = options_.stop_grace + workers_->lease().lease;
  if (f.failure_class() == baton::v1::FAILURE_CLASS_PLANNED) wait += options_.checkpoint_timeout;
  return wait;
}

bool RecoveryManager::GenerationStopped(const baton::v1::Job& job,
                                        absl::Time* lease_expired) const {
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.has_exit()) continue;
    if (!workers_->ProcessesStopped(r.worker_id())) return false;
    *lease_expired = std::max(*lease_expired, workers_->LeaseExpiry(r.worker_id()));
  }
  return true;
}

StopFacts RecoveryManager::StopFactsOf(const baton::v1::Job& job, absl::Time failed_at,
                                       absl::Duration stop_wait) const {
  StopFacts facts;
  facts.now = clock_->Now();
  facts.failed_at = failed_at;
  facts.stop_wait = stop_wait;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    const std::string& w = r.worker_id();
    StoppingRank rank;
    rank.rank = r.rank();
    rank.worker = w;
    rank.exited = r.has_exit();
    rank.processes_stopped = workers_->ProcessesStopped(w);
    rank.connected = workers_->IsConnected(w);
    rank.leased = workers_->HasLease(w);
    rank.connected_since = workers_->ConnectedSince(w);
    facts.ranks.push_back(std::move(rank));
  }
  return facts;
}

bool RecoveryManager::RevokeLease(const baton::v1::Job& job, const StoppingRank& rank,
                                  absl::Duration waited) {
  const std::string why =
      absl::StrCat("rank ", rank.rank, " of job ", job.id(), " generation ", job.generation(),
                   " did not exit within ", absl::FormatDuration(waited), " of the stop");
  if (!ctx_->Ok(jobs_->RecordEvent(job.id(), "LeaseRevoked",
                                   absl::StrCat("worker ", rank.worker, ": ", why,
                                                "; the next generation starts once its lease ran "
                                                "out, which kills its processes")),
                "lease revoked")) {
    return false;
  }
  BATON_LOG(WARNING) << "revoking the lease of worker " << rank.worker << ": " << why;
  workers_->Revoke(rank.worker, why);
  return true;
}

bool RecoveryManager::ReattributeFailure(const std::string& job_id, int32_t rank,
                                         const std::string& worker_id,
                                         const baton::v1::ProcessExit& exit,
                                         const std::string& what) {
  const baton::v1::Job& current = *jobs_->Peek(job_id);
  // Checked on the record before copying it: most exits of a stopping generation change
  // nothing.
  if (!ExitPrecedesRecordedFailure(current, exit)) return true;
  baton::v1::Job job = current;
  const std::string message = ReattributeToExit(&job, rank, worker_id, exit, what);
  return ctx_->Ok(jobs_->Update(job, {NewEvent("FailureReattributed", message)}),
                  "reattribute failure");
}

bool RecoveryManager::ReattributeToLoss(const std::string& job_id, const std::string& worker_id,
                                        baton::v1::FailureReason reason, const std::string& cause,
                                        absl::Time occurred) {
  baton::v1::Job job = *jobs_->Peek(job_id);
  const std::string message = ReattributeToWorkerLoss(&job, worker_id, reason, cause, occurred);
  if (message.empty()) return true;
  return ctx_->Ok(jobs_->Update(job, {NewEvent("FailureReattributed", message)}),
                  "reattribute to loss");
}

bool RecoveryManager::NoteFirstStep(const std::string& job_id, int64_t step, absl::Time at) {
  // Checked on the record before copying it: this runs for every metrics report, and a
  // job's copy grows with its ranks.
  const baton::v1::Job& current = *jobs_->Peek(job_id);
  const auto& failures = current.restarts().failures();
  if (failures.empty() || failures.rbegin()->next_generation() != current.generation() ||
      failures.rbegin()->has_first_step_time()) {
    return true;
  }
  baton::v1::Job job = current;
  baton::v1::Failure* f = LastFailure(&job);
  // The worker's time of the step (not when its batch of points arrived), but never later
  // than now nor before the generation ran (clocks of other machines may differ).
  absl::Time when = std::min(at, clock_->Now());
  if (f->has_running_time()) when = std::max(when, FromProto(f->running_time()));
  *f->mutable_first_step_time() = ToProto(when);
  f->set_resumed_step(step);
  baton::v1::JobEvent event = NewEvent(
      "Resumed", absl::StrCat("generation ", job.generation(), " reported step ", step,
                              " (generation ", f->generation(), " failed at ", StepText(*f), ")"));
  return ctx_->Ok(jobs_->Update(job, {std::move(event)}), "first step");
}

}  // namespace baton::coordinator
