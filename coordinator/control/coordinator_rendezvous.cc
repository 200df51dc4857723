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
#include "coordinator/control/coordinator.h"
#include "coordinator/policy/rank_assignment.h"
#include "coordinator/policy/restart_policy.h"
#include "coordinator/policy/scale_up.h"
#include "coordinator/policy/scheduler.h"

namespace baton::coordinator {

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
    ScaleUpFacts facts;
    facts.checkpoints_on_request = CheckpointsOnRequest(spec);
    facts.current = WorkersOf(job);
    facts.max_workers = MaxWorkers(spec);
    facts.slots_per_worker = SlotsPerWorker(spec);
    if (!facts.checkpoints_on_request ||
        static_cast<int>(facts.current.size()) >= facts.max_workers) {
      continue;  // Before gathering the rest.
    }
    const Runtime& rt = runtime_[id];
    facts.training = rt.last_step.has_value() && rt.awaiting_workers.empty();
    facts.current_ready = std::all_of(facts.current.begin(), facts.current.end(),
                                      [&](const std::string& w) { return workers_->IsReady(w); });
    facts.free = FreeCapacity(id);
    const std::vector<std::string> joining = DecideScaleUp(facts);
    if (joining.empty()) continue;
    const size_t grown = facts.current.size() + joining.size();
    Resize(id, "ScalingUp",
           absl::StrCat("worker", joining.size() > 1 ? "s " : " ", absl::StrJoin(joining, ", "),
                        " can join: growing from ", facts.current.size(), " to ", grown,
                        " workers"),
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
  rt.gang_workers = WorkersOf(job).size();
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
  if (job.state() != baton::v1::JOB_STATE_RENDEZVOUS || job.master_port() != 0) return;
  if (job.ranks(0).worker_id() != worker_id) {  // Only rank 0's worker was asked.
    RefuseReport(worker_id, "port_reserved",
                 absl::StrCat("a port for job ", msg.job_id(), " generation ",
                              msg.generation(), ", whose rank 0 is not on this worker"));
    return;
  }
  job.set_master_addr(workers_->Host(worker_id));
  job.set_master_port(msg.port());
  if (!Ok(jobs_->Update(job), "port reserved")) return;
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
  if (!HasRanksOn(*active, worker_id)) {  // It would count towards the gang's start.
    RefuseReport(worker_id, "assignment_started",
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
  if (!Ok(staged, "assignment started")) return;
  Runtime& rt = runtime_[msg.job_id()];
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
  if (!Ok(jobs_->Transition(msg.job_id(), JobState::kRunning, "Started",
                            absl::StrCat(job.ranks_size(), " processes running, master ",
                                         job.master_addr(), ":", job.master_port()),
                            &job),
          "running")) {
    return;
  }
  rt.rendezvous_deadline = absl::InfiniteFuture();
}

void Coordinator::OnAssignmentFailed(const std::string& worker_id,
                                     const baton::v1::AssignmentFailed& msg) {
  if (Fenced(worker_id, msg.job_id(), msg.generation(), "AssignmentFailed")) return;
  if (!HasRanksOn(*jobs_->Peek(msg.job_id()), worker_id)) {  // It could fail any job.
    RefuseReport(worker_id, "assignment_failed",
                 absl::StrCat("AssignmentFailed (", msg.reason(), ") for job ", msg.job_id(),
                              " generation ", msg.generation(),
                              ", which has no rank on this worker"));
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
    Fail(msg.job_id(), std::string(AssignmentFailureReason(code)),
         absl::StrCat("worker ", worker_id,
                      code == baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND
                          ? " cannot use the job's data: "
                          : " refused the job's paths: ",
                      msg.message()));
    return;
  }
  if (*state == JobState::kRestarting) {
    MaybeRestart(msg.job_id());  // its ranks on that worker count as stopped now
    return;
  }
  FailGeneration(msg.job_id(), baton::v1::FAILURE_CLASS_INFRA,
                 msg.reason().empty() ? std::string("AssignmentFailed") : msg.reason(),
                 absl::StrCat("worker ", worker_id, " could not start its processes: ",
                              msg.message()),
                 std::nullopt, worker_id);
}

bool Coordinator::RecordRanksNotStarted(const std::string& worker_id,
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
  const std::string what = absl::StrCat(
      "generation ", job.generation(), ": rank", ranks.size() > 1 ? "s " : " ",
      absl::StrJoin(ranks, ", "), " never started (worker ", worker_id, ": ", msg.reason(),
      none_sent ? ", before any StartAssignment was sent" : "", ")");
  return Ok(jobs_->Update(job, {NewEvent("RanksNotStarted", what)}), "ranks not started");
}

void Coordinator::OnProcessExited(const std::string& worker_id, const std::string& job_id,
                                  int64_t generation, int32_t rank,
                                  const baton::v1::ProcessExit& exit) {
  if (jobs_->Peek(job_id) == nullptr || Fenced(worker_id, job_id, generation, "ProcessExited")) {
    return;
  }
  int index = -1;
  const baton::v1::Job& current = *jobs_->Peek(job_id);
  for (int i = 0; i < current.ranks_size(); ++i) {
    const baton::v1::RankInfo& r = current.ranks(i);
    if (r.rank() == rank && r.worker_id() == worker_id) index = i;
  }
  if (index < 0) {
    RefuseReport(worker_id, "process_exited",
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
  if (!Ok(jobs_->Stage(
              job_id,
              [&](baton::v1::Job& job) { *job.mutable_ranks(index)->mutable_exit() = exit; },
              {NewEvent("RankExited", what)}),
          "rank exited")) {
    return;
  }
  const baton::v1::Job& job = *jobs_->Peek(job_id);

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

}  // namespace baton::coordinator
