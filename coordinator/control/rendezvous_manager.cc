#include "coordinator/control/rendezvous_manager.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/assignment_failure.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/spec/job_spec.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/control/job_ranks.h"
#include "coordinator/policy/preflight.h"
#include "coordinator/policy/rank_assignment.h"
#include "coordinator/policy/restart_policy.h"
#include "coordinator/policy/scheduler.h"

namespace baton::coordinator {

RendezvousManager::RendezvousManager(ControlContext* ctx, RecoveryManager* recovery)
    : ctx_(ctx),
      recovery_(recovery),
      jobs_(ctx->jobs()),
      workers_(ctx->workers()),
      clock_(ctx->clock()),
      options_(ctx->options()) {}

absl::Status RendezvousManager::Recover() {
  for (const std::string& id : jobs_->JobsIn({JobState::kRendezvous})) {
    RETURN_IF_ERROR(jobs_->Transition(id, JobState::kQueued, "CoordinatorRestarted",
                                      "coordinator restarted during rendezvous; requeued"));
  }
  const absl::Time deadline = clock_->Now() + options_.reattach_timeout;
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning})) {
    JobRuntime& rt = ctx_->Runtime(id);
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

void RendezvousManager::Schedule() {
  if (scheduler_) {
    scheduler_();
    return;
  }
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
    for (const Placement& p : coordinator::Schedule(queue, ctx_->FreeCapacity())) {
      StartRendezvous(*jobs_->Peek(p.job_id), p.worker_ids, "Scheduled");
    }
  }
  recovery_->MaybeScaleUp();  // with what the queue left
}

void RendezvousManager::StartRendezvous(baton::v1::Job job,
                                        const std::vector<std::string>& worker_ids,
                                        const std::string& reason) {
  const std::string job_id = job.id();
  const int slots = SlotsPerWorker(job.spec());
  job.set_generation(job.generation() + 1);
  // A restart's rendezvous that was requeued (coordinator restart) continues here.
  baton::v1::Failure* restart = LastFailure(&job);
  if (restart != nullptr && restart->next_generation() != 0 && !restart->has_running_time()) {
    restart->set_next_generation(job.generation());
    // A preempted job admitted again: its wait in the queue ends here.
    if (!restart->has_rendezvous_time()) {
      *restart->mutable_rendezvous_time() = ToProto(clock_->Now());
    }
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
  if (!ctx_->Ok(
          jobs_->Transition(job_id, JobState::kRendezvous, reason,
                            absl::StrCat("generation ", job.generation(), ": ", job.ranks_size(),
                                         " ranks on workers ", absl::StrJoin(worker_ids, ", ")),
                            &job),
          "start rendezvous")) {
    return;
  }
  JobRuntime& rt = ctx_->Runtime(job_id);
  ResetForNextGeneration(rt, clock_->Now());
  rt.rendezvous_deadline = clock_->Now() + options_.rendezvous_timeout;
  rt.gang_workers = WorkersOf(job).size();
  if (StartPreflight(job)) return;
  SendReservePort(job);
}

void RendezvousManager::SendReservePort(const baton::v1::Job& job) {
  const std::string& worker = job.ranks(0).worker_id();
  baton::v1::CoordinatorMessage msg;
  msg.mutable_reserve_port()->set_job_id(job.id());
  msg.mutable_reserve_port()->set_generation(job.generation());
  if (!ctx_->Send(worker, msg)) {
    recovery_->FailGeneration(
        job.id(), baton::v1::FAILURE_CLASS_INFRA, baton::v1::FAILURE_REASON_WORKER_LOST,
        absl::StrCat("worker ", worker, " went away before rendezvous"), std::nullopt, worker);
  }
}

bool RendezvousManager::StartPreflight(const baton::v1::Job& job) {
  const baton::v1::Preflight spec = PreflightWithDefaults(job.spec().preflight());
  if (spec.skip()) return false;
  JobRuntime& rt = ctx_->Runtime(job.id());
  std::vector<std::string> participants;
  bool unchecked = false;
  for (const std::string& w : WorkersOf(job)) {
    if (workers_->ProtocolVersion(w) < kPreflightProtocolVersion || workers_->ProbePort(w) == 0) {
      continue;  // cannot take part: judged by its job's own start
    }
    participants.push_back(w);
    unchecked |= rt.preflight_passed.count(w) == 0;
  }
  if (!unchecked) return false;
  PendingPreflight pending;
  pending.participants = std::move(participants);
  pending.started = clock_->Now();
  SendPreflightRound(job, pending);
  rt.preflight = std::move(pending);
  return true;
}

void RendezvousManager::SendPreflightRound(const baton::v1::Job& job, PendingPreflight& p) {
  const baton::v1::Preflight spec = PreflightWithDefaults(job.spec().preflight());
  const std::vector<std::string>& participants = p.participants;
  const std::vector<std::vector<int>> plan = PreflightSendTo(static_cast<int>(participants.size()));
  const absl::Duration window = FromProto(spec.link_window());
  for (size_t i = 0; i < participants.size(); ++i) {
    baton::v1::CoordinatorMessage out;
    baton::v1::RunPreflight* req = out.mutable_run_preflight();
    req->set_job_id(job.id());
    req->set_generation(job.generation());
    *req->mutable_link_window() = ToProto(window);
    *req->mutable_connect_timeout() = ToProto(options_.preflight_connect_timeout);
    req->set_round(p.round);
    for (int j : plan[i]) {
      baton::v1::Peer* p = req->add_send_to();
      p->set_worker_id(participants[j]);
      p->set_host(workers_->Host(participants[j]));
      p->set_probe_port(workers_->ProbePort(participants[j]));
    }
    // A worker gone meanwhile does not answer: it fails at the deadline.
    ctx_->Send(participants[i], out);
  }
  p.deadline =
      clock_->Now() + window + options_.preflight_connect_timeout + options_.preflight_answer_grace;
}

void RendezvousManager::OnPreflightResult(const std::string& worker_id,
                                          const baton::v1::PreflightResult& msg) {
  if (ctx_->Fenced(worker_id, msg.job_id(), msg.generation(), "PreflightResult")) return;
  JobRuntime& rt = ctx_->Runtime(msg.job_id());
  // Ended at its deadline (too late), or the generation failed or was cancelled meanwhile.
  if (!rt.preflight.has_value() ||
      jobs_->Peek(msg.job_id())->state() != baton::v1::JOB_STATE_RENDEZVOUS) {
    return;
  }
  PendingPreflight& p = *rt.preflight;
  if (msg.round() != p.round) return;  // a late answer of the first round
  if (std::find(p.participants.begin(), p.participants.end(), worker_id) == p.participants.end()) {
    ctx_->RefuseReport(worker_id, "preflight_result",
                       absl::StrCat("a pre-flight answer for job ", msg.job_id(), " generation ",
                                    msg.generation(), ", which did not ask this worker"));
    return;
  }
  p.results.emplace(worker_id, msg);  // the first answer counts
  if (p.results.size() == p.participants.size()) FinishPreflight(msg.job_id());
}

void RendezvousManager::FinishPreflight(const std::string& job_id) {
  JobRuntime& rt = ctx_->Runtime(job_id);
  PendingPreflight p = std::move(*rt.preflight);
  rt.preflight.reset();
  const baton::v1::Job job = *jobs_->Peek(job_id);
  const baton::v1::Preflight spec = PreflightWithDefaults(job.spec().preflight());
  const absl::Time now = clock_->Now();
  // Both rounds' answers together: a link counts by the better of its measurements.
  std::map<std::string, baton::v1::PreflightResult> answers = p.earlier;
  for (const auto& [worker, r] : p.results) {
    baton::v1::PreflightResult& merged = answers[worker];
    if (merged.job_id().empty()) {
      merged = r;
      continue;
    }
    for (const baton::v1::LinkMeasurement& l : r.links()) *merged.add_links() = l;
    merged.clear_checks();  // the newest checks of the host
    for (const baton::v1::HostCheck& c : r.checks()) *merged.add_checks() = c;
  }
  // Workers that share a machine have no network between them to judge.
  std::set<std::string> machines;
  for (const std::string& w : p.participants) machines.insert(workers_->Host(w));
  const PreflightVerdict verdict =
      JudgePreflight(p.participants, answers, spec.min_bandwidth_fraction(), now - p.started,
                     /*judge_bandwidth=*/machines.size() >= 3);
  if (p.round == 1 &&
      std::any_of(verdict.hosts.begin(), verdict.hosts.end(),
                  [](const HostVerdict& h) { return h.kind == HostVerdict::Kind::kSlow; })) {
    p.round = 2;
    p.earlier = std::move(p.results);
    p.results.clear();
    SendPreflightRound(job, p);
    rt.preflight = std::move(p);
    return;
  }
  std::vector<std::string> bad;
  for (const HostVerdict& h : verdict.hosts) {
    if (h.kind == HostVerdict::Kind::kOk) {
      rt.preflight_passed.insert(h.worker_id);
      continue;
    }
    bad.push_back(h.worker_id);
    rt.preflight_passed.erase(h.worker_id);
    workers_->MarkUnhealthy(h.worker_id, absl::StrCat("pre-flight of job ", job_id, ": ", h.reason),
                            now + options_.unhealthy_recheck_after);
  }
  const std::vector<std::string> gang = WorkersOf(job);
  const std::vector<const HostVerdict*> leave =
      HostsToLeaveOut(verdict, static_cast<int>(gang.size()), job.spec().workers().min());
  std::vector<baton::v1::JobEvent> events = {
      NewEvent("Preflight", PreflightSummary(verdict, now - p.started))};
  std::vector<std::string> kept;
  for (const std::string& w : bad) {
    if (std::none_of(leave.begin(), leave.end(),
                     [&](const HostVerdict* h) { return h->worker_id == w; })) {
      kept.push_back(w);
      rt.preflight_passed.insert(w);  // accepted for this job: not checked again for it
    }
  }
  if (!kept.empty()) {
    events.push_back(NewEvent(
        "PreflightWarning",
        absl::StrCat("kept ", absl::StrJoin(kept, ", "), " despite the pre-flight: the job needs ",
                     "workers.min = ", job.spec().workers().min(), " of its ", gang.size())));
  }
  if (leave.empty()) {
    if (!ctx_->Ok(jobs_->Update(job, std::move(events)), "preflight passed")) return;
    SendReservePort(job);
    return;
  }
  std::vector<std::string> left;
  std::set<std::string> left_ids;
  for (const HostVerdict* h : leave) {
    left.push_back(absl::StrCat(h->worker_id, " (", h->reason, ")"));
    left_ids.insert(h->worker_id);
  }
  if (!ctx_->Ok(jobs_->Update(job, std::move(events)), "preflight failed")) return;
  if (!ctx_->Ok(jobs_->Transition(job_id, JobState::kQueued, "PreflightExcluded",
                                  absl::StrCat("left out ", absl::StrJoin(left, "; "),
                                               kept.empty() ? "; requeued on the other workers"
                                                            : "; restarting on the others")),
                "preflight requeue")) {
    return;
  }
  if (kept.empty()) return;  // Schedule places it on healthy workers, spares included.
  // Hosts it must keep are marked too, so Schedule would not give them back: the next
  // generation runs on the rest of this gang.
  std::vector<std::string> rest;
  for (const std::string& w : gang) {
    if (left_ids.count(w) == 0) rest.push_back(w);
  }
  StartRendezvous(*jobs_->Peek(job_id), rest, "PreflightExcluded");
}

void RendezvousManager::OnPortReserved(const std::string& worker_id,
                                       const baton::v1::PortReserved& msg) {
  if (ctx_->Fenced(worker_id, msg.job_id(), msg.generation(), "PortReserved")) return;
  baton::v1::Job job = *jobs_->Peek(msg.job_id());
  if (job.state() != baton::v1::JOB_STATE_RENDEZVOUS || job.master_port() != 0) return;
  if (job.ranks(0).worker_id() != worker_id) {  // Only rank 0's worker was asked.
    ctx_->RefuseReport(worker_id, "port_reserved",
                       absl::StrCat("a port for job ", msg.job_id(), " generation ",
                                    msg.generation(), ", whose rank 0 is not on this worker"));
    return;
  }
  job.set_master_addr(workers_->Host(worker_id));
  job.set_master_port(msg.port());
  if (!ctx_->Ok(jobs_->Update(job), "port reserved")) return;
  SendStartAssignments(job);
}

void RendezvousManager::SendStartAssignments(const baton::v1::Job& job) {
  // Each worker's ranks, and the peers it probes, gathered once: a job of N workers costs
  // O(N) here, plus O(N) peers per worker only when the workers have probe ports.
  const std::vector<std::string> workers = WorkersOf(job);
  absl::flat_hash_map<absl::string_view, std::vector<const baton::v1::RankInfo*>> ranks_of;
  for (const baton::v1::RankInfo& r : job.ranks()) ranks_of[r.worker_id()].push_back(&r);
  std::vector<const std::string*> probed;
  for (const std::string& peer : workers) {
    if (workers_->ProbePort(peer) != 0) probed.push_back(&peer);
  }
  for (const std::string& w : workers) {
    baton::v1::CoordinatorMessage out;
    baton::v1::StartAssignment* a = out.mutable_start_assignment();
    a->set_job_id(job.id());
    *a->mutable_job_create_time() = job.create_time();
    a->set_generation(job.generation());
    *a->mutable_spec() = job.spec();
    a->set_world_size(job.ranks_size());
    a->set_master_addr(job.master_addr());
    a->set_master_port(job.master_port());
    for (const baton::v1::RankInfo* r : ranks_of[w]) *a->add_ranks() = *r;
    for (const std::string* peer : probed) {
      if (*peer == w) continue;
      baton::v1::Peer* p = a->add_peers();
      p->set_worker_id(*peer);
      p->set_host(workers_->Host(*peer));
      p->set_probe_port(workers_->ProbePort(*peer));
    }
    if (!ctx_->Send(w, out)) {
      recovery_->FailGeneration(
          job.id(), baton::v1::FAILURE_CLASS_INFRA, baton::v1::FAILURE_REASON_WORKER_LOST,
          absl::StrCat("worker ", w, " went away during rendezvous"), std::nullopt, w);
      return;
    }
  }
}

void RendezvousManager::OnAssignmentStarted(const std::string& worker_id,
                                            const baton::v1::AssignmentStarted& msg) {
  if (ctx_->Fenced(worker_id, msg.job_id(), msg.generation(), "AssignmentStarted")) {
    // Processes of a superseded generation must not run on.
    ctx_->SendStop(worker_id, msg.job_id(), msg.generation(), "generation superseded");
    return;
  }
  const baton::v1::Job* active = ctx_->ActiveJob(msg.job_id(), msg.generation());
  if (active == nullptr) return;
  if (!HasRanksOn(*active, worker_id)) {  // It would count towards the gang's start.
    ctx_->RefuseReport(worker_id, "assignment_started",
                       absl::StrCat("AssignmentStarted for job ", msg.job_id(), " generation ",
                                    msg.generation(), ", which has no rank on this worker"));
    return;
  }
  // The pids are staged, not written one report at a time: at N workers that would be N
  // transactions before the job runs. A restarted coordinator learns them again from the
  // workers' registrations (ReattachAssignments).
  const absl::Status staged = jobs_->Stage(msg.job_id(), [&](baton::v1::Job& job) {
    for (const baton::v1::RankInfo& started : msg.ranks()) {
      for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
        if (r.rank() == started.rank() && r.worker_id() == worker_id) r.set_pid(started.pid());
      }
    }
  });
  if (!ctx_->Ok(staged, "assignment started")) return;
  JobRuntime& rt = ctx_->Runtime(msg.job_id());
  rt.started_workers.insert(worker_id);
  const baton::v1::Job& current = *jobs_->Peek(msg.job_id());
  if (current.state() != baton::v1::JOB_STATE_RENDEZVOUS ||
      rt.started_workers.size() != rt.gang_workers) {
    return;
  }
  baton::v1::Job job = current;
  baton::v1::Failure* f = LastFailure(&job);
  if (f != nullptr && f->next_generation() == job.generation() && !f->has_running_time()) {
    *f->mutable_running_time() = ToProto(clock_->Now());
  }
  if (!ctx_->Ok(jobs_->Transition(msg.job_id(), JobState::kRunning, "Started",
                                  absl::StrCat(job.ranks_size(), " processes running, master ",
                                               job.master_addr(), ":", job.master_port()),
                                  &job),
                "running")) {
    return;
  }
  rt.rendezvous_deadline = absl::InfiniteFuture();
}

void RendezvousManager::OnAssignmentFailed(const std::string& worker_id,
                                           const baton::v1::AssignmentFailed& msg) {
  if (ctx_->Fenced(worker_id, msg.job_id(), msg.generation(), "AssignmentFailed")) return;
  if (!HasRanksOn(*jobs_->Peek(msg.job_id()), worker_id)) {  // It could fail any job.
    ctx_->RefuseReport(
        worker_id, "assignment_failed",
        absl::StrCat("AssignmentFailed (", msg.reason(), ") for job ", msg.job_id(), " generation ",
                     msg.generation(), ", which has no rank on this worker"));
    return;
  }
  const absl::StatusOr<JobState> state = jobs_->State(msg.job_id());
  if (!state.ok() || (!IsActive(*state) && *state != JobState::kRestarting)) return;
  if (!RecordRanksNotStarted(worker_id, msg)) return;
  const baton::v1::AssignmentFailureCode code = CodeOf(msg);
  if (code == baton::v1::ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED ||
      code == baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND) {
    // The spec names a path this worker refuses, or a dataset not there: a user error that
    // no restart would fix.
    ctx_->Fail(msg.job_id(), std::string(AssignmentFailureReason(code)),
               absl::StrCat("worker ", worker_id,
                            code == baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND
                                ? " cannot use the job's data: "
                                : " refused the job's paths: ",
                            msg.message()));
    return;
  }
  if (*state == JobState::kRestarting) {
    recovery_->MaybeRestart(msg.job_id());  // its ranks on that worker count as stopped now
    return;
  }
  // A worker whose own lease expired stopped every process it ran: the generation's other
  // ranks wait on them, as after a lease expiry the coordinator saw.
  const baton::v1::FailureReason reason = code == baton::v1::ASSIGNMENT_FAILURE_LEASE_EXPIRED
                                              ? baton::v1::FAILURE_REASON_LEASE_EXPIRED
                                              : baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED;
  recovery_->FailGeneration(
      msg.job_id(), baton::v1::FAILURE_CLASS_INFRA, reason,
      absl::StrCat("worker ", worker_id, " could not start its processes: ", msg.message()),
      std::nullopt, worker_id, absl::InfinitePast(), msg.reason());
}

bool RendezvousManager::RecordRanksNotStarted(const std::string& worker_id,
                                              const baton::v1::AssignmentFailed& msg) {
  baton::v1::Job job = *jobs_->Peek(msg.job_id());
  // Before the port was reserved no worker was sent its StartAssignment: nothing of the
  // generation runs anywhere. After, the failing worker runs none of its ranks.
  const bool none_sent = job.master_port() == 0;
  std::vector<std::string> ranks;
  for (baton::v1::RankInfo& r : *job.mutable_ranks()) {
    if (r.has_exit() || (!none_sent && r.worker_id() != worker_id)) continue;
    r.mutable_exit()->set_exit_code(-1);  // never started
    *r.mutable_exit()->mutable_time() = ToProto(clock_->Now());
    ranks.push_back(absl::StrCat(r.rank()));
  }
  if (ranks.empty()) return true;
  const std::string what =
      absl::StrCat("generation ", job.generation(), ": rank", ranks.size() > 1 ? "s " : " ",
                   absl::StrJoin(ranks, ", "), " never started (worker ", worker_id, ": ",
                   msg.reason(), none_sent ? ", before any StartAssignment was sent" : "", ")");
  return ctx_->Ok(jobs_->Update(job, {NewEvent("RanksNotStarted", what)}), "ranks not started");
}

void RendezvousManager::OnProcessExited(const std::string& worker_id, const std::string& job_id,
                                        int64_t generation, int32_t rank,
                                        const baton::v1::ProcessExit& exit) {
  if (jobs_->Peek(job_id) == nullptr ||
      ctx_->Fenced(worker_id, job_id, generation, "ProcessExited")) {
    return;
  }
  int index = -1;
  const baton::v1::Job& current = *jobs_->Peek(job_id);
  for (int i = 0; i < current.ranks_size(); ++i) {
    const baton::v1::RankInfo& r = current.ranks(i);
    if (r.rank() == rank && r.worker_id() == worker_id) index = i;
  }
  if (index < 0) {
    ctx_->RefuseReport(worker_id, "process_exited",
                       absl::StrCat("the exit of job ", job_id, " rank ", rank, " generation ",
                                    generation, ", which does not run on this worker"));
    return;
  }
  if (current.ranks(index).has_exit()) return;  // already recorded
  const std::string what =
      absl::StrCat("rank ", rank, " on worker ", worker_id, " ", DescribeExit(exit));
  // Staged like the pids, so that N ranks ending costs one transaction: what acts on an
  // exit (a failure, the job's end) writes the job with it first. An exit 0 still staged
  // when the coordinator dies is lost (the worker forgot it once sent) and the generation
  // restarts from its checkpoint: the same outcome as a report still in flight; the window
  // is short, since the event loop writes staged changes when it runs dry (at most every
  // group_commit_interval, 10 ms) and at every reconcile (100 ms).
  if (!ctx_->Ok(jobs_->Stage(
                    job_id,
                    [&](baton::v1::Job& job) { *job.mutable_ranks(index)->mutable_exit() = exit; },
                    {NewEvent("RankExited", what)}),
                "rank exited")) {
    return;
  }
  const baton::v1::Job& job = *jobs_->Peek(job_id);

  const JobState state = *jobs_->State(job_id);
  if (state == JobState::kRestarting) {
    if (!recovery_->ReattributeFailure(job_id, rank, worker_id, exit, what)) return;
    recovery_->MaybeRestart(job_id);  // an expected exit of the failed generation
    // Requeued (preempted) or restarted on fewer workers: what it left may start jobs.
    if (*jobs_->State(job_id) != JobState::kRestarting) Schedule();
    return;
  }
  if (!IsActive(state)) return;
  if (ExitFailed(exit)) {
    // The kernel's OOM killer acts on the host's memory, which other jobs share: not the
    // job's code (its budget is infra's).
    recovery_->FailGeneration(
        job_id, exit.oom_killed() ? baton::v1::FAILURE_CLASS_INFRA : baton::v1::FAILURE_CLASS_USER,
        exit.oom_killed() ? baton::v1::FAILURE_REASON_OOM_KILLED
                          : baton::v1::FAILURE_REASON_RANK_FAILED,
        what, rank, worker_id, exit.has_time() ? FromProto(exit.time()) : absl::InfinitePast());
    Schedule();
    return;
  }
  const bool all_done = std::all_of(
      job.ranks().begin(), job.ranks().end(),
      [](const baton::v1::RankInfo& r) { return r.has_exit() && !ExitFailed(r.exit()); });
  if (all_done && state == JobState::kRunning) {
    if (!ctx_->Ok(jobs_->Transition(job_id, JobState::kSucceeded, "Completed",
                                    absl::StrCat("all ", job.ranks_size(), " ranks exited 0")),
                  "succeeded")) {
      return;
    }
    ctx_->ForgetRuntime(job_id);
    Schedule();
  }
}

void RendezvousManager::Reattach(const std::string& worker_id, const baton::v1::Register& reg) {
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
    const baton::v1::Job* active = ctx_->ActiveJob(a.job_id(), a.generation());
    if (active == nullptr) {
      // Unknown, finished or superseded: its processes must not run on.
      ctx_->SendStop(worker_id, a.job_id(), a.generation(), "job is not running this generation");
      continue;
    }
    reported.insert(a.job_id());
    JobRuntime& rt = ctx_->Runtime(a.job_id());
    std::vector<baton::v1::JobEvent> events;
    const bool all_back =
        rt.awaiting_workers.count(worker_id) > 0 && rt.awaiting_workers.size() == 1;
    if (all_back) {
      events.push_back(
          NewEvent("Reattached", "every worker reported its processes after the restart"));
    }
    // Staged, as at AssignmentStarted: the N re-registrations of a restart or a failover
    // cost one transaction per burst, not one per worker (a coordinator that stops before
    // it is written learns the pids again the same way).
    const absl::Status staged = jobs_->Stage(
        a.job_id(),
        [&](baton::v1::Job& job) {
          for (const baton::v1::RankInfo& r : a.ranks()) {
            for (baton::v1::RankInfo& mine : *job.mutable_ranks()) {
              if (mine.rank() == r.rank() && mine.worker_id() == worker_id) mine.set_pid(r.pid());
            }
          }
        },
        std::move(events));
    if (!ctx_->Ok(staged, "reattach")) return;
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

void RendezvousManager::FailJobsWithoutProcesses(const std::string& worker_id,
                                                 const std::set<std::string>& reported) {
  for (const std::string& id : jobs_->JobsIn({JobState::kRunning, JobState::kRendezvous})) {
    if (reported.count(id) > 0) continue;
    const baton::v1::Job& job = *jobs_->Peek(id);
    // A worker forgets an assignment once its ranks' exits were reported.
    if (!HasLiveRanksOn(job, worker_id)) continue;
    JobRuntime& rt = ctx_->Runtime(id);
    if (job.state() == baton::v1::JOB_STATE_RENDEZVOUS &&
        rt.started_workers.count(worker_id) == 0) {
      continue;  // its StartAssignment is still to come (or is in flight)
    }
    recovery_->FailGeneration(
        id, baton::v1::FAILURE_CLASS_INFRA, baton::v1::FAILURE_REASON_WORKER_RESTARTED,
        absl::StrCat("worker ", worker_id, " reconnected without the job's processes"),
        std::nullopt, worker_id);
  }
}

void RendezvousManager::ForgetStoppedRanks(const std::string& worker_id,
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
    if (!ctx_->Ok(jobs_->Update(job, {NewEvent("RanksGone", what)}), "ranks gone")) return;
    recovery_->MaybeRestart(id);
  }
}

bool RendezvousManager::CheckTimeouts(const std::string& job_id, JobState state, absl::Time now) {
  JobRuntime& rt = ctx_->Runtime(job_id);
  if (state == JobState::kRendezvous && rt.preflight.has_value() && now >= rt.preflight->deadline) {
    FinishPreflight(job_id);
    return true;
  }
  if (state == JobState::kRendezvous && now >= rt.rendezvous_deadline) {
    ctx_->Fail(job_id, "RendezvousTimeout",
               absl::StrCat("rendezvous did not complete within ",
                            absl::FormatDuration(options_.rendezvous_timeout)));
    return true;
  }
  if (state == JobState::kRunning && now >= rt.reattach_deadline) {
    // Their leases ran out long ago: their processes are stopped, the job restarts.
    const std::string missing = absl::StrJoin(rt.awaiting_workers, ", ");
    const std::string first = *rt.awaiting_workers.begin();
    rt.awaiting_workers.clear();
    rt.reattach_deadline = absl::InfiniteFuture();
    recovery_->FailGeneration(
        job_id, baton::v1::FAILURE_CLASS_INFRA, baton::v1::FAILURE_REASON_REATTACH_TIMEOUT,
        absl::StrCat("coordinator restarted and workers ", missing, " did not report back within ",
                     absl::FormatDuration(options_.reattach_timeout)),
        std::nullopt, first);
    return true;
  }
  return false;
}

}  // namespace baton::coordinator
