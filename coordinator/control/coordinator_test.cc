#include "coordinator/control/coordinator.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "common/protocol_version.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/policy/profile_plan.h"
#include "coordinator/queues/queue_file.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/fake_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

baton::v1::JobSpec CommandSpec(int min_workers, int slots = 1) {
  baton::v1::JobSpec spec;
  spec.set_name("test-job");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(min_workers);
  spec.set_slots_per_worker(slots);
  return spec;
}

// A spec whose restart budgets are `infra` and `user` (the rest default).
baton::v1::JobSpec WithBudgets(baton::v1::JobSpec spec, int infra, int user) {
  spec.mutable_restart_policy()->set_max_infra_restarts(infra);
  spec.mutable_restart_policy()->set_max_user_restarts(user);
  return spec;
}

// The default RestartPolicy's first backoff.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(500);

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(":memory:"); }

  // (Re)creates the domain objects over the store at `path`, as a restart does.
  void Open(const std::string& path) {
    coordinator_.reset();
    workers_.reset();
    jobs_.reset();
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_OK(store);
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    ASSERT_OK(jobs_->Load());
    workers_ = std::make_unique<WorkerRegistry>(&clock_);
    CoordinatorOptions options;
    coordinator_ = std::make_unique<Coordinator>(jobs_.get(), workers_.get(), &clock_, options);
    ASSERT_OK(coordinator_->Recover());
    channels_.clear();
    sessions_.clear();
  }

  baton::v1::Register Reg(const std::string& id, int slots = 1) {
    baton::v1::Register reg;
    reg.set_worker_id(id);
    reg.set_hostname(id + ".local");
    reg.mutable_resources()->set_slots(slots);
    reg.set_protocol_version(kProtocolVersion);
    return reg;
  }

  void Connect(const baton::v1::Register& reg) {
    auto ch = std::make_shared<FakeChannel>();
    absl::StatusOr<uint64_t> session =
        coordinator_->OnWorkerConnected(reg, "10.0.0." + reg.worker_id().substr(1), ch);
    coordinator_->FlushStaged();  // as the daemon's event loop does when it runs dry
    ASSERT_OK(session);
    channels_[reg.worker_id()] = ch;
    sessions_[reg.worker_id()] = *session;
  }

  // Delivers `msg` and, as the daemon's event loop does when it runs dry, writes what it
  // staged (`flush` false: leaves it staged, as within a burst of reports).
  void Send(const std::string& worker, const baton::v1::WorkerMessage& msg, bool flush = true) {
    coordinator_->OnWorkerMessage(worker, sessions_[worker], msg);
    if (flush) coordinator_->FlushStaged();
  }

  void ReservedPort(const std::string& worker, const std::string& job, int64_t gen, int port) {
    baton::v1::WorkerMessage m;
    m.mutable_port_reserved()->set_job_id(job);
    m.mutable_port_reserved()->set_generation(gen);
    m.mutable_port_reserved()->set_port(port);
    Send(worker, m);
  }

  // Acknowledges the latest StartAssignment the worker got, with pid 1000+rank. Every
  // StartAssignment names its job's creation time (the worker's snapshot directories are per
  // job id and creation time).
  void Started(const std::string& worker, bool flush = true) {
    auto starts = channels_[worker]->Of(baton::v1::CoordinatorMessage::kStartAssignment);
    ASSERT_FALSE(starts.empty()) << worker << " got no StartAssignment";
    {
      const auto& m = starts.back();
      EXPECT_TRUE(m.start_assignment().has_job_create_time());
      EXPECT_GT(m.start_assignment().job_create_time().seconds(), 0);
      baton::v1::WorkerMessage out;
      auto* s = out.mutable_assignment_started();
      s->set_job_id(m.start_assignment().job_id());
      s->set_generation(m.start_assignment().generation());
      for (baton::v1::RankInfo r : m.start_assignment().ranks()) {
        r.set_pid(1000 + r.rank());
        *s->add_ranks() = r;
      }
      Send(worker, out, flush);
    }
  }

  // `at`: when the worker saw the exit (ProcessExit.time), unset if InfinitePast.
  void Exited(const std::string& worker, const std::string& job, int64_t gen, int rank, int code,
              int signal = 0, absl::Time at = absl::InfinitePast(), bool flush = true) {
    baton::v1::WorkerMessage m;
    auto* e = m.mutable_process_exited();
    e->set_job_id(job);
    e->set_generation(gen);
    e->set_rank(rank);
    e->mutable_exit()->set_exit_code(signal ? -1 : code);
    e->mutable_exit()->set_signal(signal);
    if (at != absl::InfinitePast()) *e->mutable_exit()->mutable_time() = ToProto(at);
    Send(worker, m, flush);
  }

  // A heartbeat numbered `seq` from `worker`.
  void Heartbeat(const std::string& worker, uint64_t seq) {
    baton::v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_seq(seq);
    Send(worker, hb);
  }

  // Reports a metric point of `rank` at `step`.
  void Metric(const std::string& worker, const std::string& job, int64_t gen, int rank,
              int64_t step, bool flush = true) {
    baton::v1::WorkerMessage m;
    m.mutable_metrics()->set_job_id(job);
    auto* p = m.mutable_metrics()->add_points();
    p->set_generation(gen);
    p->set_rank(rank);
    p->set_step(step);
    (*p->mutable_values())["loss"] = 1.0;
    Send(worker, m, flush);
  }

  // `worker` refuses generation 1 of `job` with AssignmentFailed `reason`.
  // An AssignmentFailed with `reason` only (a worker that does not set its code) or, with
  // `code`, the code only.
  void RefuseAssignment(
      const std::string& worker, const std::string& job, const std::string& reason,
      const std::string& message,
      baton::v1::AssignmentFailureCode code = baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED) {
    baton::v1::WorkerMessage failed;
    failed.mutable_assignment_failed()->set_job_id(job);
    failed.mutable_assignment_failed()->set_generation(1);
    if (code == baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED) {
      failed.mutable_assignment_failed()->set_reason(reason);
    } else {
      failed.mutable_assignment_failed()->set_code(code);
    }
    failed.mutable_assignment_failed()->set_message(message);
    Send(worker, failed);
  }

  // The latest message of one kind sent to `worker`.
  baton::v1::CoordinatorMessage Last(const std::string& worker,
                                     baton::v1::CoordinatorMessage::MsgCase c) {
    auto all = channels_[worker]->Of(c);
    return all.empty() ? baton::v1::CoordinatorMessage() : all.back();
  }

  // Drives a RENDEZVOUS job of generation `gen` to RUNNING: rank 0's worker reserves a
  // port, every worker of the gang starts.
  void CompleteRendezvous(const std::string& id, int64_t gen, int port) {
    const baton::v1::Job& job = *jobs_->Peek(id);
    ASSERT_EQ(job.generation(), gen);
    ReservedPort(job.ranks(0).worker_id(), id, gen, port);
    std::set<std::string> gang;
    for (const auto& r : job.ranks()) gang.insert(r.worker_id());
    for (const std::string& w : gang) Started(w);
    ASSERT_EQ(StateOf(id), JobState::kRunning);
  }

  // Reports every rank of generation `gen` that has not exited as stopped by SIGTERM.
  void StopRest(const std::string& id, int64_t gen) {
    const baton::v1::Job job = *jobs_->Peek(id);
    for (const auto& r : job.ranks()) {
      if (!r.has_exit() && workers_->IsConnected(r.worker_id())) {
        Exited(r.worker_id(), id, gen, r.rank(), 0, /*signal=*/15);
      }
    }
  }

  JobState StateOf(const std::string& job) { return *jobs_->State(job); }

  // The job's workers in its current generation, sorted.
  std::vector<std::string> WorkersOfJob(const std::string& id) {
    std::set<std::string> gang;
    for (const auto& r : jobs_->Peek(id)->ranks()) gang.insert(r.worker_id());
    return {gang.begin(), gang.end()};
  }

  // Submits a 2-worker job (`spec`, default CommandSpec(2)) and drives it to RUNNING on w1, w2.
  std::string RunningJob(std::optional<baton::v1::JobSpec> spec = std::nullopt) {
    Connect(Reg("w1"));
    Connect(Reg("w2"));
    absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(spec.value_or(CommandSpec(2)));
    EXPECT_OK(job);
    ReservedPort("w1", job->id(), 1, 29500);
    Started("w1");
    Started("w2");
    EXPECT_EQ(StateOf(job->id()), JobState::kRunning);
    return job->id();
  }

  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<Coordinator> coordinator_;
  std::map<std::string, std::shared_ptr<FakeChannel>> channels_;
  std::map<std::string, uint64_t> sessions_;
};

TEST_F(CoordinatorTest, AQueueOrPriorityIsRefusedWithoutQueues) {
  baton::v1::JobSpec spec = CommandSpec(1);
  spec.set_queue("team-a");
  EXPECT_THAT(coordinator_->SubmitJob(spec),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("queue: this coordinator has no queues")));
  spec.clear_queue();
  spec.set_priority("high");
  EXPECT_THAT(coordinator_->SubmitJob(spec),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("priority: ")));
}

TEST_F(CoordinatorTest, GangWaitsForMinWorkersThenRendezvousAndRuns) {
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  EXPECT_EQ(job->id(), "j-000001");
  EXPECT_EQ(StateOf(job->id()), JobState::kQueued);

  Connect(Reg("w2"));
  EXPECT_EQ(StateOf(job->id()), JobState::kQueued);  // one worker is not a gang of two
  Connect(Reg("w1"));
  EXPECT_EQ(StateOf(job->id()), JobState::kRendezvous);

  // Rank 0 is on the lowest worker id; only it is asked for a port.
  auto reserve = channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort);
  ASSERT_THAT(reserve, SizeIs(1));
  EXPECT_EQ(reserve[0].reserve_port().generation(), 1);
  EXPECT_THAT(channels_["w2"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(0));

  ReservedPort("w1", job->id(), 1, 29500);
  for (const std::string w : {"w1", "w2"}) {
    auto starts = channels_[w]->Of(baton::v1::CoordinatorMessage::kStartAssignment);
    ASSERT_THAT(starts, SizeIs(1)) << w;
    const baton::v1::StartAssignment& a = starts[0].start_assignment();
    EXPECT_EQ(a.world_size(), 2);
    EXPECT_EQ(a.master_addr(), "10.0.0.1");  // w1's host
    EXPECT_EQ(a.master_port(), 29500);
    ASSERT_EQ(a.ranks_size(), 1);
    EXPECT_EQ(a.ranks(0).rank(), w == "w1" ? 0 : 1);
    EXPECT_EQ(a.ranks(0).group_rank(), w == "w1" ? 0 : 1);
    EXPECT_EQ(a.ranks(0).local_rank(), 0);
  }
  Started("w1");
  EXPECT_EQ(StateOf(job->id()), JobState::kRendezvous);  // w2 not started yet
  Started("w2");
  EXPECT_EQ(StateOf(job->id()), JobState::kRunning);

  Exited("w1", job->id(), 1, 0, 0);
  EXPECT_EQ(StateOf(job->id()), JobState::kRunning);
  Exited("w2", job->id(), 1, 1, 0);
  EXPECT_EQ(StateOf(job->id()), JobState::kSucceeded);

  absl::StatusOr<baton::v1::Job> done = jobs_->Get(job->id());
  ASSERT_OK(done);
  EXPECT_EQ(done->ranks(0).pid(), 1000);
  EXPECT_EQ(done->ranks(1).pid(), 1001);
  std::vector<std::string> reasons;
  for (const auto& e : done->events()) reasons.push_back(e.reason());
  EXPECT_EQ(reasons, (std::vector<std::string>{"Submitted", "Scheduled", "Started", "RankExited",
                                               "RankExited", "Completed"}));
}

// A worker speaks only for its own ranks: w1 cannot report rank 1 (on w2), so the step it
// claims never becomes the generation's progress.
TEST_F(CoordinatorTest, AWorkerCannotReportAnotherWorkersRank) {
  const std::string id = RunningJob();
  clock_.Advance(absl::Seconds(1));
  Metric("w2", id, 1, 1, 50);
  Metric("w1", id, 1, 1, 999);  // forged
  Exited("w2", id, 1, 1, 3, /*signal=*/0, clock_.Now());
  baton::v1::Job job = *jobs_->Get(id);
  ASSERT_EQ(job.restarts().failures_size(), 1);
  EXPECT_EQ(job.restarts().failures(0).step(), 50);
}

TEST_F(CoordinatorTest, FailedRankRestartsAsNextGenerationAfterBackoff) {
  const std::string id = RunningJob();
  clock_.Advance(absl::Seconds(1));
  Metric("w1", id, 1, 0, 40);
  Metric("w2", id, 1, 1, 50);
  // The worker collected the exit 200 ms before its report arrived.
  Exited("w2", id, 1, 1, 3, /*signal=*/0, clock_.Now() - absl::Milliseconds(200));
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  baton::v1::Job job = *jobs_->Get(id);
  EXPECT_THAT(job.message(), HasSubstr("rank 1 on worker w2 exited with code 3"));
  EXPECT_THAT(job.message(), HasSubstr("restart 1 of 3 user-code restarts"));
  EXPECT_EQ(job.restarts().user(), 1);
  EXPECT_EQ(job.restarts().infra(), 0);
  ASSERT_EQ(job.restarts().failures_size(), 1);
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.generation(), 1);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_USER);
  EXPECT_EQ(f.rank(), 1);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(f.step(), 50);  // the generation's highest reported step
  EXPECT_EQ(f.next_generation(), 2);
  EXPECT_EQ(FromProto(f.fail_time()) - FromProto(f.occurred_time()), absl::Milliseconds(200));
  EXPECT_FALSE(f.has_stopped_time());
  // The survivors are told to stop generation 1.
  auto stop = Last("w1", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_EQ(stop.job_id(), id);
  EXPECT_EQ(stop.generation(), 1);

  // Rank 0 stops; still no rendezvous before the backoff elapsed.
  clock_.Advance(absl::Milliseconds(100));
  Exited("w1", id, 1, 0, 0, /*signal=*/15);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_TRUE(jobs_->Peek(id)->restarts().failures(0).has_stopped_time());
  clock_.Advance(kFirstBackoff - absl::Milliseconds(101));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));

  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
  // A fresh port for generation 2, same workers keep their ranks.
  auto reserve = Last("w1", baton::v1::CoordinatorMessage::kReservePort).reserve_port();
  EXPECT_EQ(reserve.generation(), 2);
  CompleteRendezvous(id, 2, 29601);
  job = *jobs_->Get(id);
  EXPECT_EQ(job.generation(), 2);
  EXPECT_EQ(job.master_port(), 29601);
  EXPECT_EQ(job.ranks(0).worker_id(), "w1");
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_FALSE(job.ranks(0).has_exit());
  EXPECT_TRUE(job.restarts().failures(0).has_rendezvous_time());
  EXPECT_TRUE(job.restarts().failures(0).has_running_time());

  // A late report of generation 1 changes nothing; the first step of generation 2 is noted.
  Exited("w2", id, 1, 1, 1);
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  EXPECT_FALSE(jobs_->Peek(id)->ranks(1).has_exit());
  // The step completed 30 ms before its batch of points arrived: that is the first step.
  const absl::Time running = FromProto(job.restarts().failures(0).running_time());
  clock_.Advance(absl::Milliseconds(50));
  baton::v1::WorkerMessage first;
  first.mutable_metrics()->set_job_id(id);
  auto* point = first.mutable_metrics()->add_points();
  point->set_generation(2);
  point->set_step(41);
  *point->mutable_time() = ToProto(running + absl::Milliseconds(20));
  Send("w1", first);
  job = *jobs_->Get(id);
  EXPECT_EQ(FromProto(job.restarts().failures(0).first_step_time()),
            running + absl::Milliseconds(20));
  EXPECT_EQ(job.restarts().failures(0).resumed_step(), 41);
  std::vector<std::string> reasons;
  for (const auto& e : job.events()) reasons.push_back(e.reason());
  EXPECT_EQ(reasons, (std::vector<std::string>{"Submitted", "Scheduled", "Started", "RankExited",
                                               "RankFailed", "RankExited", "GenerationStopped",
                                               "Restarted", "Started", "Resumed"}));

  // The new generation finishes normally.
  Exited("w1", id, 2, 0, 0);
  Exited("w2", id, 2, 1, 0);
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
}

// The peer's exit on the vanished peer (code 4) arrives first; the killed rank's exit,
// which the workers' clocks place earlier, arrives next and becomes the cause. A survivor
// stopped later changes nothing.
TEST_F(CoordinatorTest, FailureIsAttributedToTheEarliestFailedExit) {
  const std::string id = RunningJob();
  const absl::Time killed = clock_.Now() - absl::Milliseconds(300);
  Exited("w1", id, 1, 0, 4, /*signal=*/0, clock_.Now() - absl::Milliseconds(100));
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(jobs_->Peek(id)->restarts().failures(0).cause(), HasSubstr("rank 0"));
  Exited("w2", id, 1, 1, 0, /*signal=*/9, killed);
  const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(f.cause(), "rank 1 on worker w2 was killed by signal 9");
  EXPECT_EQ(f.rank(), 1);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(FromProto(f.occurred_time()), killed);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_USER);
  EXPECT_EQ(jobs_->Peek(id)->restarts().user(), 1);  // still one failure, one restart
}

TEST_F(CoordinatorTest, ALaterExitDoesNotTakeOverTheCause) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 3, /*signal=*/0, clock_.Now() - absl::Milliseconds(100));
  Exited("w1", id, 1, 0, 0, /*signal=*/9, clock_.Now());  // stopped after the failure
  EXPECT_EQ(jobs_->Peek(id)->restarts().failures(0).cause(),
            "rank 1 on worker w2 exited with code 3");
}

TEST_F(CoordinatorTest, SignalledRankIsAUserFailure) {
  Connect(Reg("w1"));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(WithBudgets(CommandSpec(1), 10, 0));
  ASSERT_OK(job);
  CompleteRendezvous(job->id(), 1, 29500);
  Exited("w1", job->id(), 1, 0, 0, /*signal=*/9);
  EXPECT_EQ(StateOf(job->id()), JobState::kFailed);
  const baton::v1::Job done = *jobs_->Get(job->id());
  EXPECT_THAT(done.message(), HasSubstr("killed by signal 9"));
  EXPECT_THAT(done.message(),
              HasSubstr("user-code failure in generation 1 with the restart budget spent (0 of "
                        "0 user-code restarts used since the job last made healthy progress)"));
  ASSERT_EQ(done.restarts().failures_size(), 1);
  EXPECT_EQ(done.restarts().failures(0).failure_class(), baton::v1::FAILURE_CLASS_USER);
  EXPECT_EQ(done.restarts().failures(0).next_generation(), 0);
}

TEST_F(CoordinatorTest, SilentWorkerIsLostOnceItsLeaseCertainlyExpiredAndTooFewWorkersFailTheJob) {
  const std::string id = RunningJob();  // min 2 workers; lease 10 s + margin 1 s
  clock_.Advance(absl::Seconds(3));
  Heartbeat("w1", 1);  // w1 stays alive, w2 goes silent
  clock_.Advance(absl::Seconds(8));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);  // silent for the lease: not yet certain
  clock_.Advance(absl::Milliseconds(1));
  Heartbeat("w1", 2);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("worker w2 lost: its lease expired"));
  EXPECT_EQ(jobs_->Peek(id)->restarts().infra(), 1);
  const baton::v1::Failure& lost = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(lost.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(lost.reason(), "LeaseExpired");
  EXPECT_EQ(lost.reason_code(), baton::v1::FAILURE_REASON_LEASE_EXPIRED);
  // Detected after w2's last sign of life plus the lease and its margin.
  EXPECT_EQ(FromProto(lost.fail_time()) - FromProto(lost.occurred_time()),
            absl::Seconds(11) + absl::Milliseconds(1));
  EXPECT_TRUE(channels_["w2"]->closed);
  EXPECT_FALSE(channels_["w1"]->closed);
  StopRest(id, 1);
  // w2's processes are certainly dead (its lease expired): nothing to wait for there.
  EXPECT_TRUE(jobs_->Peek(id)->restarts().failures(0).has_lease_expired_time());
  // Only w1 is left: the restart waits up to the rendezvous timeout for a second worker.
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(absl::Seconds(10));
    Heartbeat("w1", 3 + i);
  }
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(absl::Seconds(1));
  Heartbeat("w1", 10);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(id)->message(),
              HasSubstr("only 1 of the 2 workers needed (workers.min) were available within 1m"));
}

TEST_F(CoordinatorTest, WorkerLostWithThreeWorkersContinuesOnTwo) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(3);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  EXPECT_EQ(jobs_->Peek(id)->ranks_size(), 3);

  clock_.Advance(absl::Seconds(2));
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  StopRest(id, 1);  // w1 and w3 stop their ranks
  // w2's processes may still run (its stream closed, it may be cut off) until the lease it
  // was last granted, at registration 2 s ago, has certainly expired: 10 s + 1 s margin.
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(absl::Seconds(9) - kFirstBackoff - absl::Milliseconds(1));
  for (const char* w : {"w1", "w3"}) Heartbeat(w, 1);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  {
    const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
    EXPECT_EQ(f.reason(), "WorkerLost");
    EXPECT_EQ(f.reason_code(), baton::v1::FAILURE_REASON_WORKER_LOST);
    EXPECT_EQ(FromProto(f.lease_expired_time()), FromProto(f.fail_time()) + absl::Seconds(9));
    EXPECT_EQ(FromProto(f.stopped_time()), FromProto(f.lease_expired_time()));
  }
  CompleteRendezvous(id, 2, 29501);
  const baton::v1::Job job = *jobs_->Get(id);
  ASSERT_EQ(job.ranks_size(), 2);
  EXPECT_EQ(job.ranks(0).worker_id(), "w1");  // keeps rank 0
  EXPECT_EQ(job.ranks(1).worker_id(), "w3");
  auto start = Last("w3", baton::v1::CoordinatorMessage::kStartAssignment).start_assignment();
  EXPECT_EQ(start.generation(), 2);
  EXPECT_EQ(start.world_size(), 2);
  EXPECT_EQ(job.restarts().infra(), 1);
  EXPECT_EQ(job.restarts().failures(0).worker_id(), "w2");
}

TEST_F(CoordinatorTest, RegisteredGrantsTheLeaseAndHeartbeatsAreAcknowledged) {
  Connect(Reg("w1"));
  const auto registered = Last("w1", baton::v1::CoordinatorMessage::kRegistered).registered();
  EXPECT_EQ(FromProto(registered.lease()), absl::Seconds(10));
  Heartbeat("w1", 41);
  Heartbeat("w1", 42);
  auto acks = channels_["w1"]->Of(baton::v1::CoordinatorMessage::kHeartbeatAck);
  ASSERT_THAT(acks, SizeIs(2));
  EXPECT_EQ(acks[1].heartbeat_ack().seq(), 42);
  const std::vector<baton::v1::Worker> listed = coordinator_->ListWorkers();
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(FromProto(listed[0].lease()), absl::Seconds(10));
  EXPECT_EQ(FromProto(listed[0].lease_renew_time()), clock_.Now());
}

TEST_F(CoordinatorTest, AFailureAfterHealthyProgressStartsTheBudgetOver) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  baton::v1::JobSpec spec = WithBudgets(CommandSpec(2), 3, 1);
  spec.mutable_restart_policy()->set_healthy_steps(30);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 40);
  Exited("w1", id, 1, 0, 1, /*signal=*/9);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(f.step(), 40);
  EXPECT_TRUE(f.healthy_before());
  EXPECT_EQ(jobs_->Peek(id)->restarts().recent_user(), 1);
}

TEST_F(CoordinatorTest, ARankTheOomKillerKilledIsAnInfrastructureFailure) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  baton::v1::WorkerMessage m;
  auto* e = m.mutable_process_exited();
  e->set_job_id(id);
  e->set_generation(1);
  e->set_rank(0);
  e->mutable_exit()->set_exit_code(-1);
  e->mutable_exit()->set_signal(9);
  e->mutable_exit()->set_oom_killed(true);
  Send("w1", m);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Job& job = *jobs_->Peek(id);
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(f.reason(), "OomKilled");
  EXPECT_EQ(f.reason_code(), baton::v1::FAILURE_REASON_OOM_KILLED);
  EXPECT_THAT(f.cause(), HasSubstr("was killed by the kernel's OOM killer (signal 9)"));
  EXPECT_EQ(job.restarts().user(), 0);
  EXPECT_EQ(job.restarts().infra(), 1);
}

TEST_F(CoordinatorTest, AQuiescedCoordinatorLosesNoWorkerWhenItsStreamsClose) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  coordinator_->Quiesce();  // a shutdown begins
  coordinator_->OnWorkerDisconnected("w1", sessions_["w1"]);
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  clock_.Advance(absl::Minutes(1));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 1);
  EXPECT_TRUE(absl::IsUnavailable(coordinator_->SubmitJob(CommandSpec(1)).status()));
  EXPECT_THAT(coordinator_->halted().message(), HasSubstr("shutting down"));
}

TEST_F(CoordinatorTest, WorkersWithoutLeasesGetNoneAndTheirProcessesCountAsStoppedWhenLost) {
  baton::v1::Register old = Reg("w1");
  old.set_protocol_version(2);
  Connect(old);
  Connect(Reg("w2"));
  EXPECT_FALSE(Last("w1", baton::v1::CoordinatorMessage::kRegistered).registered().has_lease());
  Heartbeat("w1", 1);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kHeartbeatAck), SizeIs(0));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(job);
  CompleteRendezvous(job->id(), 1, 29500);
  ASSERT_EQ(jobs_->Peek(job->id())->ranks(0).worker_id(), "w1");
  coordinator_->OnWorkerDisconnected("w1", sessions_["w1"]);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();  // as before leases: no lease to wait for
  EXPECT_EQ(StateOf(job->id()), JobState::kRendezvous);
}

// The split-brain rule with one worker per generation: w1 is cut off with the job's only
// rank; the job moves to w2 only once w1's lease has certainly run out (w1 kills its
// processes when it does), never while w1's rank may still run.
TEST_F(CoordinatorTest, SingleWorkerJobMovesOnlyAfterTheCutOffWorkersLeaseExpired) {
  Connect(Reg("w1"));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(job);
  const std::string id = job->id();
  CompleteRendezvous(id, 1, 29500);
  Connect(Reg("w2"));
  clock_.Advance(absl::Seconds(4));
  Heartbeat("w1", 1);  // its last: then the partition
  for (int i = 0; i < 11; ++i) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w2", i + 1);
    coordinator_->ReconcileOnce();
    ASSERT_EQ(StateOf(id), JobState::kRunning) << "after " << i + 1 << " s of silence";
  }
  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(kFirstBackoff);
  Heartbeat("w2", 20);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->ranks(0).worker_id(), "w2");
  const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(f.reason(), "LeaseExpired");
  EXPECT_EQ(FromProto(f.lease_expired_time()), FromProto(f.occurred_time()) + absl::Seconds(11));
  EXPECT_LE(FromProto(f.lease_expired_time()), FromProto(f.rendezvous_time()));
  // w1 comes back (the partition healed) still listing its old rank as killed: it is
  // fenced as generation 1, and w1 is READY again.
  baton::v1::Register back = Reg("w1");
  auto* a = back.add_assignments();
  a->set_job_id(id);
  a->set_generation(1);
  auto* r = a->add_ranks();
  r->set_rank(0);
  r->mutable_exit()->set_signal(9);
  Connect(back);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
  EXPECT_TRUE(workers_->IsReady("w1"));
}

// A worker cut off from the coordinator but not from its peers: its lease runs out and it
// kills its rank; the peers' collectives fail and their exits reach the coordinator first,
// as a user failure. Once the worker counts as lost, the failure is reattributed to the
// loss that preceded those exits, and the restart is counted as infra.
TEST_F(CoordinatorTest, PeersExitingBecauseAWorkerWasCutOffIsTheLossNotAUserFailure) {
  const std::string id = RunningJob();
  const absl::Time cut = clock_.Now();  // w2's last heartbeat: the partition begins
  clock_.Advance(absl::Milliseconds(3100));
  Heartbeat("w1", 1);
  Exited("w1", id, 1, 0, 4, 0, clock_.Now());  // rank 0: "gloo all-reduce failed"
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(jobs_->Peek(id)->restarts().user(), 1);
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w1", 2 + i);
    coordinator_->ReconcileOnce();  // w2 silent for lease + margin (11 s): lost at the end
  }
  const baton::v1::Job job = *jobs_->Get(id);
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(f.reason(), "LeaseExpired");
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(FromProto(f.occurred_time()), cut);
  EXPECT_EQ(job.restarts().user(), 0);
  EXPECT_EQ(job.restarts().infra(), 1);
  bool reattributed = false;
  for (const auto& e : job.events()) reattributed |= e.reason() == "FailureReattributed";
  EXPECT_TRUE(reattributed);
  clock_.Advance(kFirstBackoff);
  Heartbeat("w1", 20);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);  // min 2 workers: waits for one
}

TEST_F(CoordinatorTest, AGenerationThatLostAWorkerIsStoppedWithoutGrace) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(3);
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(spec);
  ASSERT_OK(job);
  CompleteRendezvous(job->id(), 1, 29500);
  coordinator_->OnWorkerDisconnected("w3", sessions_["w3"]);
  // The survivors wait on w3 inside a collective: SIGKILL at once.
  auto stop = Last("w1", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_EQ(FromProto(stop.grace()), absl::ZeroDuration());
}

TEST_F(CoordinatorTest, AFailedRankLeavesItsPeersTheStopGrace) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 1);
  auto stop = Last("w2", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_EQ(stop.job_id(), id);
  EXPECT_EQ(FromProto(stop.grace()), absl::Seconds(10));
}

// A snapshotting trainer job's survivors are asked to be kept when a rank fails (they
// rejoin the next generation in the same process); a command job's are not (nor anyone's
// after a stall: restart_policy_test). A kept survivor's report ends its part like an exit,
// and says so.
TEST_F(CoordinatorTest, ARankFailureKeepsTheWaitingRanksOfASnapshottingTrainerJob) {
  baton::v1::JobSpec trainer = CommandSpec(2);
  trainer.clear_command();
  trainer.mutable_trainer()->set_model("mlp");
  trainer.mutable_trainer()->set_dataset("mnist");
  trainer.mutable_trainer()->set_data_dir("/data/mnist");
  trainer.mutable_budget()->set_max_steps(100);
  const std::string id = RunningJob(trainer);
  Exited("w1", id, 1, 0, 1);
  auto stop = Last("w2", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_TRUE(stop.keep_waiting_ranks());
  baton::v1::WorkerMessage kept;
  auto* e = kept.mutable_process_exited();
  e->set_job_id(id);
  e->set_generation(1);
  e->set_rank(1);
  e->mutable_exit()->set_kept_for_rejoin(true);
  Send("w2", kept, /*flush=*/true);
  coordinator_->ReconcileOnce();
  const baton::v1::Job job = *jobs_->Get(id);
  EXPECT_TRUE(job.restarts().failures(0).has_stopped_time());
  bool said = false;
  for (const auto& e : job.events()) {
    said |= absl::StrContains(e.message(), "rank 1 on worker w2 was kept alive for the next");
  }
  EXPECT_TRUE(said);
}

TEST_F(CoordinatorTest, NoRanksAreKeptForCommandJobs) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 1);
  EXPECT_FALSE(Last("w2", baton::v1::CoordinatorMessage::kStopAssignment)
                   .stop_assignment()
                   .keep_waiting_ranks());
}

TEST_F(CoordinatorTest, ConnectedWorkerWhoseProcessesIgnoreTheStopHasItsLeaseRevoked) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 3);  // generation 1 fails; w1's rank 0 never exits
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  // Within stop_grace (10 s) + lease (10 s) it is only waited for, heartbeats and all.
  for (int i = 1; i <= 19; ++i) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w1", i);
    Heartbeat("w2", i);
    coordinator_->ReconcileOnce();
  }
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_FALSE(channels_["w1"]->closed);
  clock_.Advance(absl::Seconds(1));
  Heartbeat("w1", 20);
  Heartbeat("w2", 20);
  coordinator_->ReconcileOnce();
  EXPECT_TRUE(channels_["w1"]->closed);
  EXPECT_THAT(channels_["w1"]->close_status.message(), HasSubstr("lease revoked"));
  EXPECT_FALSE(channels_["w2"]->closed);
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  // w1 may not register again until its lease (renewed just now) has run out.
  clock_.Advance(absl::Seconds(10));
  auto ch = std::make_shared<FakeChannel>();
  EXPECT_THAT(coordinator_->OnWorkerConnected(Reg("w1"), "10.0.0.1", ch),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("lease was revoked")));
  Heartbeat("w2", 21);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(absl::Seconds(1));
  Heartbeat("w2", 22);
  coordinator_->ReconcileOnce();  // w1's lease certainly ran out: its processes are dead
  bool revoked_event = false;
  const baton::v1::Job with_events = *jobs_->Get(id);
  for (const auto& e : with_events.events()) revoked_event |= e.reason() == "LeaseRevoked";
  EXPECT_TRUE(revoked_event);
  Connect(Reg("w1"));  // admitted again
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
}

TEST_F(CoordinatorTest, StartAssignmentNamesThePeersAndAnUnreachablePeerFailsTheGeneration) {
  for (const std::string w : {"w1", "w2"}) {
    baton::v1::Register reg = Reg(w);
    reg.set_probe_port(w == "w1" ? 7001 : 7002);
    Connect(reg);
  }
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  ReservedPort("w1", job->id(), 1, 29500);
  auto start = Last("w2", baton::v1::CoordinatorMessage::kStartAssignment).start_assignment();
  ASSERT_THAT(start.peers(), SizeIs(1));
  EXPECT_EQ(start.peers(0).worker_id(), "w1");
  EXPECT_EQ(start.peers(0).host(), "10.0.0.1");
  EXPECT_EQ(start.peers(0).probe_port(), 7001);
  baton::v1::WorkerMessage failed;
  failed.mutable_assignment_failed()->set_job_id(job->id());
  failed.mutable_assignment_failed()->set_generation(1);
  failed.mutable_assignment_failed()->set_reason("PeerUnreachable");
  failed.mutable_assignment_failed()->set_message("cannot reach worker w1 at 10.0.0.1:7001");
  Send("w2", failed);
  EXPECT_EQ(StateOf(job->id()), JobState::kRestarting);
  const baton::v1::Failure& f = jobs_->Peek(job->id())->restarts().failures(0);
  EXPECT_EQ(f.reason(), "PeerUnreachable");
  EXPECT_EQ(f.reason_code(), baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_THAT(f.cause(), HasSubstr("worker w2 could not start its processes: cannot reach "
                                   "worker w1 at 10.0.0.1:7001"));
}

// A worker that refuses the spec's paths names a user error: the job fails at once, with no
// restart (every restart would be refused the same way), and the worker's message is the
// cause `baton describe` shows.
TEST_F(CoordinatorTest, ADataNotFoundRefusalFailsTheJobWithoutARestart) {
  Connect(Reg("w1"));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(job);
  ReservedPort("w1", job->id(), 1, 29500);
  RefuseAssignment("w1", job->id(), "DataNotFound", "trainer.data_dir: /d has no mnist files");
  EXPECT_EQ(StateOf(job->id()), JobState::kFailed);
  absl::StatusOr<baton::v1::Job> record = jobs_->Get(job->id());
  ASSERT_OK(record);
  EXPECT_THAT(record->message(), HasSubstr("worker w1 cannot use the job's data: trainer."));
  EXPECT_EQ(record->restarts().failures_size(), 0);
}

// Decided on AssignmentFailed.code; a worker that leaves it unset is read by its reason.
class PathRefusalTest : public CoordinatorTest,
                        public ::testing::WithParamInterface<baton::v1::AssignmentFailureCode> {};

TEST_P(PathRefusalTest, APathNotAllowedRefusalFailsTheJobWithoutARestart) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  ReservedPort("w1", job->id(), 1, 29500);
  Started("w1");
  RefuseAssignment("w2", job->id(), "PathNotAllowed",
                   "checkpoint_dir: /etc/x is not under an allowed path of this worker",
                   GetParam());
  EXPECT_EQ(StateOf(job->id()), JobState::kFailed);
  absl::StatusOr<baton::v1::Job> record = jobs_->Get(job->id());
  ASSERT_OK(record);
  EXPECT_THAT(record->message(), HasSubstr("worker w2 refused the job's paths: checkpoint_dir: "
                                           "/etc/x is not under an allowed path"));
  ASSERT_GT(record->events_size(), 0);
  EXPECT_EQ(record->events(record->events_size() - 1).reason(), "PathNotAllowed");
  EXPECT_EQ(record->restarts().failures_size(), 0);
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment().generation(), 1);
}

INSTANTIATE_TEST_SUITE_P(CodeOrReason, PathRefusalTest,
                         ::testing::Values(baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED,
                                           baton::v1::ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED));

// Only the failing worker's ranks never started: once the others report their exits the
// next generation starts after the backoff, without waiting for the failing worker's lease.
TEST_F(CoordinatorTest, AnAssignmentFailedWorkerRanNothingSoTheRestartWaitsOnlyForTheOthers) {
  for (const std::string w : {"w1", "w2"}) {
    baton::v1::Register reg = Reg(w);
    reg.set_probe_port(7000);
    Connect(reg);
  }
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  ReservedPort("w1", job->id(), 1, 29500);
  Started("w1");
  baton::v1::WorkerMessage failed;
  failed.mutable_assignment_failed()->set_job_id(job->id());
  failed.mutable_assignment_failed()->set_generation(1);
  failed.mutable_assignment_failed()->set_reason("LaunchFailed");
  failed.mutable_assignment_failed()->set_message("rank 1: fork: Resource temporarily unavailable");
  Send("w2", failed);
  EXPECT_EQ(StateOf(job->id()), JobState::kRestarting);
  EXPECT_TRUE(jobs_->Peek(job->id())->ranks(1).has_exit());   // w2's rank never started
  EXPECT_FALSE(jobs_->Peek(job->id())->ranks(0).has_exit());  // w1's runs until stopped
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment().generation(), 1);
  Exited("w1", job->id(), 1, 0, 0, /*signal=*/15);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(job->id()), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(job->id())->generation(), 2);
  EXPECT_TRUE(workers_->IsConnected("w2"));  // no lease revoked
  CompleteRendezvous(job->id(), 2, 29501);
}

// A ReservePort that fails is reported at once (PortUnavailable), before any StartAssignment:
// nothing of the generation runs anywhere, so it fails without waiting for the rendezvous
// timeout or any process, and the next generation starts after the backoff.
TEST_F(CoordinatorTest, AReservePortFailureFailsTheGenerationAtOnceAndItRestarts) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  ASSERT_EQ(StateOf(job->id()), JobState::kRendezvous);
  const absl::Time start = clock_.Now();
  baton::v1::WorkerMessage failed;
  failed.mutable_assignment_failed()->set_job_id(job->id());
  failed.mutable_assignment_failed()->set_generation(1);
  failed.mutable_assignment_failed()->set_reason("PortUnavailable");
  failed.mutable_assignment_failed()->set_message("socket: Too many open files");
  Send("w1", failed);
  // The clock has not moved: the failure is handled, and the generation counts as stopped.
  ASSERT_EQ(clock_.Now(), start);
  EXPECT_EQ(StateOf(job->id()), JobState::kRestarting);
  baton::v1::Job record = *jobs_->Peek(job->id());
  ASSERT_EQ(record.restarts().failures_size(), 1);
  const baton::v1::Failure& f = record.restarts().failures(0);
  EXPECT_EQ(f.reason(), "PortUnavailable");
  EXPECT_EQ(f.reason_code(), baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(f.worker_id(), "w1");
  EXPECT_THAT(f.cause(), HasSubstr("socket: Too many open files"));
  EXPECT_EQ(FromProto(f.stopped_time()), start);
  EXPECT_THAT(channels_["w2"]->Of(baton::v1::CoordinatorMessage::kStartAssignment), SizeIs(0));
  // The backoff, not the 60 s rendezvous timeout, separates it from the next generation.
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(job->id()), JobState::kRendezvous);
  auto reserve = Last("w1", baton::v1::CoordinatorMessage::kReservePort).reserve_port();
  EXPECT_EQ(reserve.generation(), 2);
  CompleteRendezvous(job->id(), 2, 29502);
}

TEST_F(CoordinatorTest, RestartingJobKeepsItsSlotsFromTheQueueAndBudgetZeroFreesThem) {
  const std::string id = RunningJob();
  absl::StatusOr<baton::v1::Job> next = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(next);
  EXPECT_EQ(StateOf(next->id()), JobState::kQueued);  // both slots busy
  Exited("w2", id, 1, 1, 1);
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(next->id()), JobState::kQueued);  // the restarting job keeps them

  absl::StatusOr<baton::v1::Job> zero = coordinator_->SubmitJob(WithBudgets(CommandSpec(1), 0, 0));
  ASSERT_OK(zero);
  ASSERT_OK(coordinator_->CancelJob(id, ""));
  ASSERT_OK(coordinator_->CancelJob(next->id(), ""));
  coordinator_->ReconcileOnce();
  CompleteRendezvous(zero->id(), 1, 29500);
  const std::string w = jobs_->Peek(zero->id())->ranks(0).worker_id();
  coordinator_->OnWorkerDisconnected(w, sessions_[w]);
  EXPECT_EQ(StateOf(zero->id()), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(zero->id())->message(),
              HasSubstr("infrastructure failure in generation 1 with the restart budget spent "
                        "(0 of 0 infrastructure restarts used since"));
}

TEST_F(CoordinatorTest, BudgetExhaustionFailsWithClassAndCountAndBackoffGrows) {
  const std::string id = [&] {
    Connect(Reg("w1"));
    absl::StatusOr<baton::v1::Job> job =
        coordinator_->SubmitJob(WithBudgets(CommandSpec(1), 10, 2));
    EXPECT_OK(job);
    return job->id();
  }();
  CompleteRendezvous(id, 1, 29500);
  // Generation 1 fails at step 10, generation 2 at step 20: no crash loop.
  Metric("w1", id, 1, 0, 10);
  Exited("w1", id, 1, 0, 1);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  CompleteRendezvous(id, 2, 29501);

  Metric("w1", id, 2, 0, 20);
  Exited("w1", id, 2, 0, 1);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(FromProto(jobs_->Peek(id)->restarts().failures(1).backoff()), 2 * kFirstBackoff);
  clock_.Advance(2 * kFirstBackoff - absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);  // the second backoff is twice the first
  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  CompleteRendezvous(id, 3, 29502);

  Metric("w1", id, 3, 0, 30);
  Exited("w1", id, 3, 0, 1);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  const baton::v1::Job job = *jobs_->Get(id);
  EXPECT_THAT(job.message(), HasSubstr("user-code failure in generation 3 with the restart "
                                       "budget spent (2 of 2 user-code restarts used since"));
  EXPECT_EQ(job.restarts().user(), 2);
  ASSERT_EQ(job.restarts().failures_size(), 3);
  EXPECT_EQ(job.restarts().failures(2).step(), 30);
  EXPECT_EQ(job.events(job.events_size() - 1).reason(), "RestartBudgetExhausted");
}

TEST_F(CoordinatorTest, SameStepTwiceInARowIsACrashLoop) {
  Connect(Reg("w1"));
  absl::StatusOr<baton::v1::Job> submitted =
      coordinator_->SubmitJob(WithBudgets(CommandSpec(1), 10, 10));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 5);
  Exited("w1", id, 1, 0, 1);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  CompleteRendezvous(id, 2, 29501);
  Metric("w1", id, 2, 0, 5);
  Exited("w1", id, 2, 0, 1);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  const baton::v1::Job job = *jobs_->Get(id);
  EXPECT_THAT(job.message(), HasSubstr("crash loop: generations 1 and 2 both failed at step 5"));
  EXPECT_EQ(job.events(job.events_size() - 1).reason(), "CrashLoop");
  EXPECT_EQ(job.restarts().user(), 1);  // far from the budget of 10
  EXPECT_EQ(job.restarts().failures_size(), 2);
}

TEST_F(CoordinatorTest, StalledJobFailsItsGenerationNamingTheRankThatStoppedFirst) {
  // A command job that reports steps (baton.report()) but sends no heartbeat.
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_restart_policy()->mutable_report_stall_floor()->set_seconds(2);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  baton::v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  auto tick = [&](absl::Duration d) {
    clock_.Advance(d);
    Send("w1", hb);
    Send("w2", hb);
    coordinator_->ReconcileOnce();
  };
  // No metrics yet: never a stall, however long it takes.
  tick(absl::Seconds(4));
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  // A report every 100 ms: the timeout is 2 s + 3 x 100 ms after the last progress.
  for (int i = 1; i <= 3; ++i) {
    Metric("w1", id, 1, 0, 10 * i);
    Metric("w2", id, 1, 1, 10 * i);
    tick(absl::Milliseconds(100));
  }
  Metric("w1", id, 1, 0, 40);  // rank 1 stops at step 30 first, then rank 0 at 40
  tick(absl::Milliseconds(2299));
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  tick(absl::Milliseconds(1));
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Job job = *jobs_->Get(id);
  EXPECT_EQ(job.restarts().stall(), 1);
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_STALL);
  EXPECT_EQ(f.rank(), 1);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(f.hang_phase(), "report");
  EXPECT_EQ(f.hang_evidence(), "no-report");
  EXPECT_THAT(f.cause(), HasSubstr("rank 1 on worker w2 stopped first at step 30"));
  EXPECT_THAT(f.cause(), HasSubstr("timeout 2.3s = 2s + 3 x 100ms"));
  EXPECT_EQ(job.events(job.events_size() - 1).reason(), "Stalled");
}

// The built-in trainer's heartbeats (MetricsReport.beats): rank 1 freezes (SIGSTOP), rank 0
// waits for it in a collective and goes on beating. The frozen rank is the one named, as
// soon as it was silent for stall_floor (2 s here); heartbeats never enter the job's
// metric history.
TEST_F(CoordinatorTest, AFrozenRankIsNamedFromItsSilentHeartbeat) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_restart_policy()->mutable_stall_floor()->set_seconds(2);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  baton::v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  int64_t seq = 0;
  // One beat of `rank` on `worker`: at `step`, waiting in collective `coll` or not.
  auto beat = [&](const std::string& worker, int rank, int64_t step, int64_t coll, bool waiting) {
    baton::v1::WorkerMessage m;
    m.mutable_metrics()->set_job_id(id);
    baton::v1::RankBeat* b = m.mutable_metrics()->add_beats();
    b->set_generation(1);
    b->set_rank(rank);
    b->set_seq(++seq);
    b->set_step(step);
    b->set_phase("step");
    b->set_collectives(coll);
    b->set_waiting(waiting);
    (*b->mutable_references())["step"] = ToProto(absl::Milliseconds(10));
    Send(worker, m);
  };
  int64_t step = 0;
  for (int i = 0; i < 20; ++i) {  // two seconds of 10 ms steps, beats every 100 ms
    step += 10;
    beat("w1", 0, step, 4 * step, false);
    beat("w2", 1, step, 4 * step, false);
    clock_.Advance(absl::Milliseconds(100));
    Send("w1", hb);
    Send("w2", hb);
    coordinator_->ReconcileOnce();
  }
  // Rank 1 freezes; rank 0 waits in the next collective. Both workers stay connected.
  for (int i = 1; i <= 18; ++i) {  // rank 1's last beat was 100 ms before
    beat("w1", 0, step, 4 * step + 1, true);
    clock_.Advance(absl::Milliseconds(100));
    Send("w1", hb);
    Send("w2", hb);
    coordinator_->ReconcileOnce();
  }
  EXPECT_EQ(StateOf(id), JobState::kRunning);  // 1.9 s of silence
  clock_.Advance(absl::Milliseconds(100));
  Send("w1", hb);
  Send("w2", hb);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Job job = *jobs_->Get(id);
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_STALL);
  EXPECT_EQ(f.rank(), 1);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(f.hang_evidence(), "silent");
  EXPECT_EQ(f.hang_phase(), "step");
  EXPECT_THAT(f.cause(), HasSubstr("rank 1 on worker w2 sent no heartbeat for 2s"));
  EXPECT_THAT(f.cause(), HasSubstr("rank 0 waits for it in collective #"));
  EXPECT_EQ(FromProto(f.fail_time()) - FromProto(f.occurred_time()), absl::Seconds(2));
  // Beats are not metric points: no step reached the job's result.
  EXPECT_EQ(job.result().steps(), 0);
  // A frozen process cannot act on SIGTERM and the others wait for it: no grace.
  for (const std::string w : {"w1", "w2"}) {
    auto stop = Last(w, baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
    EXPECT_EQ(FromProto(stop.grace()), absl::ZeroDuration()) << w;
  }
}

// A worker whose rank stays slow is left out of the job's next generation when a spare
// exists, with the evidence in a StragglerReplaced event; without a spare it stays.
TEST_F(CoordinatorTest, AStragglerIsReplacedAtTheNextRestartWhenASpareExists) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_command()->set_elastic(true);
  spec.set_checkpoint_dir("/ckpt");
  spec.mutable_workers()->set_max(3);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  // Three workers: all three join. Rank 2 on w3 stays at 3x the others' step time.
  CompleteRendezvous(id, 1, 29500);
  ASSERT_EQ(jobs_->Peek(id)->ranks_size(), 3);
  auto point = [&](const std::string& worker, int rank, int64_t step, double step_s) {
    baton::v1::WorkerMessage m;
    m.mutable_metrics()->set_job_id(id);
    auto* p = m.mutable_metrics()->add_points();
    p->set_generation(1);
    p->set_rank(rank);
    p->set_step(step);
    (*p->mutable_values())["time_step_s"] = step_s;
    Send(worker, m);
  };
  for (int i = 1; i <= 4; ++i) {
    point("w1", 0, 10 * i, 0.1);
    point("w2", 1, 10 * i, 0.1);
    point("w3", 2, 10 * i, 0.3);
  }
  // No spare yet: w3 stays, however slow. Rank 0 fails; the gang restarts on all three.
  Exited("w1", id, 1, 0, 1);
  StopRest(id, 1);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->ranks_size(), 3);
  CompleteRendezvous(id, 2, 29501);
  // A spare arrives; w3's rank straggles again in generation 2, and a rank fails.
  Connect(Reg("w4"));
  for (int i = 5; i <= 8; ++i) {
    for (const auto& [worker, rank, step_s] : std::vector<std::tuple<std::string, int, double>>{
             {"w1", 0, 0.1}, {"w2", 1, 0.1}, {"w3", 2, 0.3}}) {
      baton::v1::WorkerMessage pm;
      pm.mutable_metrics()->set_job_id(id);
      auto* p = pm.mutable_metrics()->add_points();
      p->set_generation(2);
      p->set_rank(rank);
      p->set_step(10 * i);
      (*p->mutable_values())["time_step_s"] = step_s;
      Send(worker, pm);
    }
  }
  Exited("w2", id, 2, 1, 1);
  StopRest(id, 2);
  clock_.Advance(absl::Seconds(2));
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  std::set<std::string> gang;
  for (const auto& r : jobs_->Peek(id)->ranks()) gang.insert(r.worker_id());
  EXPECT_THAT(gang, ::testing::ElementsAre("w1", "w2", "w4"));
  const baton::v1::Job job = *jobs_->Get(id);
  bool replaced = false;
  for (const auto& e : job.events()) {
    if (e.reason() != "StragglerReplaced") continue;
    replaced = true;
    EXPECT_THAT(e.message(), HasSubstr("worker w3 left out of generation 3 as a straggler (rank 2 "
                                       "at 3.00x the median step time of the job's ranks"));
    EXPECT_THAT(e.message(), HasSubstr("not taken back into this job for 10m"));
  }
  EXPECT_TRUE(replaced);
}

// What a holder of some worker's certificate (w3, running nothing of the job) could send
// about another user's job running on w1 and w2: every report is refused and counted, and
// the job is untouched.
TEST_F(CoordinatorTest, AWorkerReportsOnlyForItsOwnAssignments) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  Connect(Reg("w3"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  const baton::v1::Job& gang = *jobs_->Peek(id);
  ASSERT_EQ(gang.state(), baton::v1::JOB_STATE_RENDEZVOUS);
  std::set<std::string> gang_workers;
  for (const auto& r : gang.ranks()) gang_workers.insert(r.worker_id());
  const std::string stranger = gang_workers.count("w3") ? "w1" : "w3";
  ASSERT_EQ(gang_workers.count(stranger), 0u);

  // During the rendezvous: a port it was not asked for, a start that would complete the
  // gang early, a failure that would fail the job.
  ReservedPort(stranger, id, 1, 31337);
  EXPECT_EQ(jobs_->Peek(id)->master_port(), 0);
  const std::string rank0 = jobs_->Peek(id)->ranks(0).worker_id();
  ReservedPort(rank0, id, 1, 29500);
  Started(*gang_workers.begin());
  baton::v1::WorkerMessage started;
  started.mutable_assignment_started()->set_job_id(id);
  started.mutable_assignment_started()->set_generation(1);
  Send(stranger, started);
  EXPECT_EQ(StateOf(id), JobState::kRendezvous) << "the stranger completed the gang";
  RefuseAssignment(stranger, id, "PathNotAllowed", "planted");
  EXPECT_EQ(StateOf(id), JobState::kRendezvous) << "the stranger failed the job";
  Started(*gang_workers.rbegin());
  ASSERT_EQ(StateOf(id), JobState::kRunning);

  // While it runs: log lines, metric points and an exit of ranks it does not run.
  baton::v1::WorkerMessage logs;
  logs.mutable_logs()->set_job_id(id);
  baton::v1::LogLine* line = logs.mutable_logs()->add_lines();
  line->set_generation(1);
  line->set_rank(0);
  line->set_text("planted line");
  Send(stranger, logs);
  Metric(stranger, id, 1, 1, 999);
  Exited(stranger, id, 1, 0, 1);
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  absl::StatusOr<baton::v1::Job> job = jobs_->Get(id);
  ASSERT_OK(job);
  EXPECT_FALSE(job->ranks(0).has_exit());
  EXPECT_NE(job->result().steps(), 999);
  absl::StatusOr<int64_t> logged = store_->LastLogSeq(id);
  ASSERT_OK(logged);
  EXPECT_EQ(*logged, 0) << "the stranger's line was recorded";

  // The rank's own worker is heard.
  Send(rank0, logs);
  logged = store_->LastLogSeq(id);
  ASSERT_OK(logged);
  EXPECT_EQ(*logged, 1);
  EXPECT_THAT(coordinator_->refused_reports(),
              ::testing::UnorderedElementsAre(
                  ::testing::Pair("port_reserved", 1), ::testing::Pair("assignment_started", 1),
                  ::testing::Pair("assignment_failed", 1), ::testing::Pair("logs", 1),
                  ::testing::Pair("metrics", 1), ::testing::Pair("process_exited", 1)));
}

TEST_F(CoordinatorTest, CheckGenerationFencesOldGenerations) {
  baton::v1::Job job;
  job.set_id("j-000001");
  job.set_generation(3);
  EXPECT_OK(Coordinator::CheckGeneration(job, 3));
  EXPECT_THAT(Coordinator::CheckGeneration(job, 2),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("generation 2 is stale; the current generation is 3")));
  EXPECT_THAT(Coordinator::CheckGeneration(job, 4),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("never started")));
}

TEST_F(CoordinatorTest, MessagesOfAnOldGenerationAreRejected) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 1);
  StopRest(id, 1);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  // A stale port reply does not complete generation 2's rendezvous.
  ReservedPort("w1", id, 1, 1111);
  EXPECT_EQ(jobs_->Peek(id)->master_port(), 0);
  CompleteRendezvous(id, 2, 29501);
  // A stale AssignmentStarted is answered with a StopAssignment of its generation.
  baton::v1::WorkerMessage started;
  started.mutable_assignment_started()->set_job_id(id);
  started.mutable_assignment_started()->set_generation(1);
  Send("w2", started);
  auto stop = Last("w2", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_EQ(stop.generation(), 1);
  EXPECT_EQ(stop.reason(), "generation superseded");
  // Stale metrics are not recorded; stale exits change nothing.
  Metric("w1", id, 1, 0, 999);
  EXPECT_NE(jobs_->Peek(id)->result().steps(), 999);
  Exited("w2", id, 1, 1, 1);
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  EXPECT_EQ(jobs_->Peek(id)->restarts().failures_size(), 1);
}

TEST_F(CoordinatorTest, CancelStopsProcessesAndIsFinal) {
  const std::string id = RunningJob();
  absl::StatusOr<baton::v1::Job> job = coordinator_->CancelJob(id, "no longer needed");
  ASSERT_OK(job);
  EXPECT_EQ(job->state(), baton::v1::JOB_STATE_CANCELLED);
  for (const std::string w : {"w1", "w2"}) {
    EXPECT_THAT(channels_[w]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1));
  }
  EXPECT_THAT(coordinator_->CancelJob(id, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  EXPECT_THAT(coordinator_->CancelJob("j-999999", ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("j-999999")));
}

TEST_F(CoordinatorTest, InvalidSpecIsRejectedWithFieldPath) {
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(1);
  EXPECT_THAT(coordinator_->SubmitJob(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workers.max")));
  EXPECT_THAT(jobs_->List({}, 0), SizeIs(0));
}

TEST_F(CoordinatorTest, RejectsUnsupportedProtocolVersion) {
  baton::v1::Register reg = Reg("w1");
  reg.set_protocol_version(kProtocolVersion + 1);
  EXPECT_THAT(coordinator_->OnWorkerConnected(reg, "h", std::make_shared<FakeChannel>()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("protocol version")));
}

// Found by //coordinator/control:coordinator_fuzz: a worker offering 0 or negative slots
// was admitted and reported with more slots used than it had.
TEST_F(CoordinatorTest, RejectsAWorkerWithoutSlots) {
  for (int slots : {0, -1}) {
    baton::v1::Register reg = Reg("w1", slots);
    EXPECT_THAT(
        coordinator_->OnWorkerConnected(reg, "h", std::make_shared<FakeChannel>()),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("register.resources.slots")));
  }
  EXPECT_THAT(coordinator_->ListWorkers(), SizeIs(0));
}

TEST_F(CoordinatorTest, StaleAssignmentReportedOnRegisterIsStopped) {
  baton::v1::Register reg = Reg("w1");
  auto* a = reg.add_assignments();
  a->set_job_id("j-000042");
  a->set_generation(3);
  Connect(reg);
  auto stops = channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment);
  ASSERT_THAT(stops, SizeIs(1));
  EXPECT_EQ(stops[0].stop_assignment().job_id(), "j-000042");
  EXPECT_EQ(stops[0].stop_assignment().generation(), 3);
}

TEST_F(CoordinatorTest, LosingAWorkerWhoseRanksAllFinishedKeepsJobRunning) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 0);
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  Exited("w1", id, 1, 0, 0);
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
}

TEST_F(CoordinatorTest, ReconnectOfWorkerWhoseRanksAllExitedIsHarmless) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 0);
  Connect(Reg("w2"));  // supersedes the old session without listing the finished job
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  Connect(Reg("w1"));  // w1 still has rank 0 running but does not list it: it restarted
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("reconnected without the job's processes"));
  EXPECT_EQ(jobs_->Peek(id)->restarts().infra(), 1);
}

TEST_F(CoordinatorTest, MetricsOfOtherGenerationsAreIgnoredAndRankZeroSetsResult) {
  const std::string id = RunningJob();
  baton::v1::WorkerMessage m;
  m.mutable_metrics()->set_job_id(id);
  auto* old = m.mutable_metrics()->add_points();
  old->set_generation(0);
  old->set_step(99);
  auto* p = m.mutable_metrics()->add_points();
  p->set_generation(1);
  p->set_step(10);
  (*p->mutable_values())["loss"] = 2.0;
  auto* q = m.mutable_metrics()->add_points();
  q->set_generation(1);
  q->set_step(20);
  (*q->mutable_values())["loss"] = 1.5;
  Send("w1", m);
  absl::StatusOr<baton::v1::Job> job = jobs_->Get(id);
  EXPECT_EQ(job->result().steps(), 20);
  EXPECT_EQ(job->result().initial_loss(), 2.0);
  EXPECT_EQ(job->result().final_metrics().at("loss"), 1.5);
}

// A built-in trainer job on min..max workers with a shared checkpoint directory.
baton::v1::JobSpec TrainerJob(int min_workers, int max_workers) {
  baton::v1::JobSpec spec;
  spec.set_name("trainer-job");
  baton::v1::TrainerSpec* t = spec.mutable_trainer();
  t->set_model("mlp");
  t->set_dataset("synthetic");
  t->set_batch_size(8);
  t->set_lr(0.1);
  spec.mutable_workers()->set_min(min_workers);
  spec.mutable_workers()->set_max(max_workers);
  spec.mutable_budget()->set_max_steps(1000);
  spec.set_checkpoint_dir("/shared/ckpt");
  return spec;
}

TEST_F(CoordinatorTest, DrainingWorkerCheckpointsThenTheJobContinuesWithoutIt) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  for (int rank = 0; rank < 3; ++rank) Metric("w" + std::to_string(rank + 1), id, 1, rank, 10);

  baton::v1::WorkerMessage draining;
  draining.mutable_draining()->set_reason("received SIGTERM");
  Send("w2", draining);
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(jobs_->Get(id)->events().rbegin()->reason(), "Draining");
  // Rank 0 (on w1) is asked for a checkpoint; nothing is stopped yet.
  const auto request =
      Last("w1", baton::v1::CoordinatorMessage::kRequestCheckpoint).request_checkpoint();
  EXPECT_EQ(request.job_id(), id);
  EXPECT_EQ(request.generation(), 1);
  EXPECT_EQ(request.rank(), 0);
  for (const std::string w : {"w1", "w2", "w3"}) {
    EXPECT_THAT(channels_[w]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(0)) << w;
  }
  // w2 stays connected but gets no new work.
  for (const baton::v1::Worker& w : coordinator_->ListWorkers()) {
    EXPECT_EQ(w.state(),
              w.id() == "w2" ? baton::v1::WORKER_STATE_DRAINING : baton::v1::WORKER_STATE_READY)
        << w.id();
  }

  // Rank 0 checkpointed at its step boundary and exited 75: the others are stopped.
  clock_.Advance(absl::Milliseconds(300));
  Exited("w1", id, 1, 0, 75);
  for (const std::string w : {"w2", "w3"}) {
    EXPECT_THAT(channels_[w]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1)) << w;
  }
  StopRest(id, 1);
  // No backoff for a planned resize: the next generation rendezvouses at once, without w2.
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29501);
  const baton::v1::Job job = *jobs_->Get(id);
  ASSERT_EQ(job.ranks_size(), 2);
  EXPECT_EQ(job.ranks(0).worker_id(), "w1");
  EXPECT_EQ(job.ranks(1).worker_id(), "w3");
  EXPECT_EQ(job.restarts().planned(), 1);
  EXPECT_EQ(job.restarts().infra() + job.restarts().user() + job.restarts().stall(), 0);
  ASSERT_THAT(job.restarts().failures(), SizeIs(1));
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_PLANNED);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(f.step(), 10);
  EXPECT_EQ(f.next_generation(), 2);
  EXPECT_THAT(f.cause(), HasSubstr("worker w2 leaves: it is draining (received SIGTERM)"));
  EXPECT_EQ(FromProto(f.stopped_time()) - FromProto(f.fail_time()), absl::Milliseconds(300));

  // A new job does not land on the draining worker, though it has a free slot.
  absl::StatusOr<baton::v1::Job> other = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(other);
  EXPECT_EQ(StateOf(other->id()), JobState::kQueued);
}

TEST_F(CoordinatorTest, CheckpointThatNeverComesStopsTheGenerationAfterTheTimeout) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(1, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 3);
  baton::v1::WorkerMessage draining;
  draining.mutable_draining();
  Send("w2", draining);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  // Both workers keep heartbeating; rank 0 never exits.
  baton::v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  clock_.Advance(CoordinatorOptions().checkpoint_timeout - absl::Milliseconds(1));
  for (const std::string w : {"w1", "w2"}) Send(w, heartbeat);
  coordinator_->ReconcileOnce();
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(0));
  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1));
  EXPECT_EQ(jobs_->Get(id)->events().rbegin()->reason(), "CheckpointTimeout");
  StopRest(id, 1);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->ranks_size(), 1);  // w1 alone
}

TEST_F(CoordinatorTest, ProtocolVersionOneWorkerIsStoppedInsteadOfAskedToCheckpoint) {
  baton::v1::Register old = Reg("w1");
  old.set_protocol_version(1);
  Connect(old);
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(1, 2));
  ASSERT_OK(submitted);
  CompleteRendezvous(submitted->id(), 1, 29500);
  baton::v1::WorkerMessage draining;
  draining.mutable_draining();
  Send("w2", draining);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRequestCheckpoint), SizeIs(0));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1));
}

TEST_F(CoordinatorTest, WorkerReconnectingWhileDrainingIsDrainingAndMovesItsJobs) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  ASSERT_EQ(jobs_->Peek(id)->ranks(0).worker_id(), "w1");
  // w1 reconnects, still running its rank, and says it drains.
  baton::v1::Register again = Reg("w1");
  again.set_draining(true);
  auto* a = again.add_assignments();
  a->set_job_id(id);
  a->set_generation(1);
  *a->add_ranks() = jobs_->Peek(id)->ranks(0);
  Connect(again);
  EXPECT_FALSE(workers_->IsReady("w1"));
  EXPECT_TRUE(workers_->IsConnected("w1"));
  // A command job cannot checkpoint on request: stopped at once, then placed on w2.
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1));
  StopRest(id, 1);
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->ranks(0).worker_id(), "w2");
}

TEST_F(CoordinatorTest, WorkerJoiningARunningTrainerJobBelowMaxGrowsIt) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  // A worker that joins before the generation trained a step does not resize it yet.
  Connect(Reg("w3"));
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  Metric("w1", id, 1, 0, 20);
  Metric("w2", id, 1, 1, 20);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(jobs_->Get(id)->events().rbegin()->reason(), "ScalingUp");
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kRequestCheckpoint).request_checkpoint().rank(), 0);
  Exited("w1", id, 1, 0, 75);
  StopRest(id, 1);
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29501);
  const baton::v1::Job job = *jobs_->Get(id);
  ASSERT_EQ(job.ranks_size(), 3);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.ranks(r).worker_id(), "w" + std::to_string(r + 1));
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_PLANNED);
  EXPECT_EQ(f.cause(), "worker w3 can join: growing from 2 to 3 workers");
  EXPECT_EQ(f.worker_id(), "w3");
  // At max now: another worker does not resize it again.
  Metric("w1", id, 2, 0, 21);
  Connect(Reg("w4"));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);
}

TEST_F(CoordinatorTest, QueuedJobsTakeNewWorkersAndCommandJobsDoNotGrow) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  baton::v1::JobSpec command = CommandSpec(2);
  command.mutable_workers()->set_max(3);
  absl::StatusOr<baton::v1::Job> cmd = coordinator_->SubmitJob(command);
  ASSERT_OK(cmd);
  CompleteRendezvous(cmd->id(), 1, 29500);
  Metric("w1", cmd->id(), 1, 0, 5);
  // A queued job waiting for one worker gets the new one; the command job never grows.
  absl::StatusOr<baton::v1::Job> queued = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(queued);
  Connect(Reg("w3"));
  EXPECT_EQ(StateOf(queued->id()), JobState::kRendezvous);
  Connect(Reg("w4"));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(cmd->id()), JobState::kRunning);
}

// A command job with command.elastic: it checkpoints on request like the built-in trainer.
baton::v1::JobSpec ElasticCommandJob(int min_workers, int max_workers) {
  baton::v1::JobSpec spec = CommandSpec(min_workers);
  spec.mutable_command()->set_elastic(true);
  spec.mutable_workers()->set_max(max_workers);
  spec.set_checkpoint_dir("/shared/ckpt");
  return spec;
}

TEST_F(CoordinatorTest, ElasticCommandJobCheckpointsWhenItsWorkerDrains) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(ElasticCommandJob(2, 3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  for (int rank = 0; rank < 3; ++rank) Metric("w" + std::to_string(rank + 1), id, 1, rank, 7);

  baton::v1::WorkerMessage draining;
  draining.mutable_draining()->set_reason("received SIGTERM");
  Send("w3", draining);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  // Rank 0 is asked (the worker sends SIGUSR1); nothing is stopped before it exits.
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kRequestCheckpoint).request_checkpoint().rank(), 0);
  for (const std::string w : {"w1", "w2", "w3"}) {
    EXPECT_THAT(channels_[w]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(0)) << w;
  }
  Exited("w1", id, 1, 0, 75);  // checkpointed: the planned end of the generation
  for (const std::string w : {"w2", "w3"}) {
    EXPECT_THAT(channels_[w]->Of(baton::v1::CoordinatorMessage::kStopAssignment), SizeIs(1)) << w;
  }
  StopRest(id, 1);
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29501);
  const baton::v1::Job job = *jobs_->Get(id);
  ASSERT_EQ(job.ranks_size(), 2);
  EXPECT_EQ(job.restarts().planned(), 1);
  EXPECT_EQ(job.restarts().infra() + job.restarts().user() + job.restarts().stall(), 0);
  EXPECT_EQ(job.restarts().failures(0).failure_class(), baton::v1::FAILURE_CLASS_PLANNED);
  EXPECT_EQ(job.restarts().failures(0).step(), 7);
}

TEST_F(CoordinatorTest, ElasticCommandJobGrowsOntoAJoiningWorker) {
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(ElasticCommandJob(2, 3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 4);
  Connect(Reg("w3"));
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(jobs_->Get(id)->events().rbegin()->reason(), "ScalingUp");
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRequestCheckpoint), SizeIs(1));
  Exited("w1", id, 1, 0, 75);
  StopRest(id, 1);
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29501);
  EXPECT_EQ(jobs_->Get(id)->ranks_size(), 3);
}

TEST_F(CoordinatorTest, ElasticCommandJobWithoutACheckpointDirIsRejected) {
  baton::v1::JobSpec spec = ElasticCommandJob(1, 2);
  spec.clear_checkpoint_dir();
  EXPECT_THAT(coordinator_->SubmitJob(spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("checkpoint_dir: is required when command.elastic is true")));
}

class RestartTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    path_ = std::string(getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    Open(path_);
  }
  std::string path_;
};

TEST_F(RestartTest, RunningJobReattachesWhenWorkersReportBack) {
  const std::string id = RunningJob();
  Open(path_);  // the coordinator restarts
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  for (const std::string w : {"w1", "w2"}) {
    baton::v1::Register reg = Reg(w);
    auto* a = reg.add_assignments();
    a->set_job_id(id);
    a->set_generation(1);
    auto* r = a->add_ranks();
    r->set_rank(w == "w1" ? 0 : 1);
    r->set_pid(4242);
    if (w == "w2") {  // it finished while the coordinator was down
      r->mutable_exit()->set_exit_code(0);
    }
    Connect(reg);
  }
  absl::StatusOr<baton::v1::Job> job = jobs_->Get(id);
  EXPECT_EQ(job->state(), baton::v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(job->ranks(1).has_exit());
  bool reattached = false;
  for (const auto& e : job->events()) reattached |= e.reason() == "Reattached";
  EXPECT_TRUE(reattached);
  clock_.Advance(absl::Minutes(5));  // past the reattach timeout: nothing happens any more
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);  // heartbeats stopped meanwhile: w1 lost
  clock_.Advance(absl::Minutes(2));               // and no worker came back for the restart
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kFailed);
}

int CountEvents(const baton::v1::Job& job, const std::string& reason) {
  return static_cast<int>(std::count_if(job.events().begin(), job.events().end(),
                                        [&](const auto& e) { return e.reason() == reason; }));
}

// A burst of rank reports (AssignmentStarted, clean exits) is staged: the coordinator acts
// on it at once, clients see it once written (FlushStaged, or the state change it causes,
// in the same transaction).
TEST_F(RestartTest, RankReportsAreStagedAndWrittenWithTheStateChangeOrFlush) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  ReservedPort("w1", id, 1, 29500);
  Started("w1", /*flush=*/false);
  Started("w2", /*flush=*/false);
  EXPECT_EQ(jobs_->Peek(id)->ranks(1).pid(), 1001);  // the coordinator knows
  EXPECT_EQ(jobs_->Get(id)->ranks(1).pid(), 0);      // clients do not yet
  Started("w3", /*flush=*/false);                    // the last: RUNNING, written with every pid
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  absl::StatusOr<baton::v1::Job> running = jobs_->Get(id);
  ASSERT_OK(running);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(running->ranks(r).pid(), 1000 + r) << r;

  Exited("w1", id, 1, 0, 0, 0, absl::InfinitePast(), /*flush=*/false);
  Exited("w2", id, 1, 1, 0, 0, absl::InfinitePast(), /*flush=*/false);
  EXPECT_FALSE(jobs_->Get(id)->ranks(0).has_exit());
  coordinator_->FlushStaged();
  absl::StatusOr<baton::v1::Job> flushed = jobs_->Get(id);
  EXPECT_TRUE(flushed->ranks(0).has_exit());
  EXPECT_TRUE(flushed->ranks(1).has_exit());
  EXPECT_EQ(CountEvents(*flushed, "RankExited"), 2);

  // The last exit, staged and lost with the coordinator: the restarted coordinator does
  // not know it, and w3 reconnecting without the job (it forgot the assignment once the
  // exit was sent) fails the generation, as for a report lost in flight.
  Exited("w3", id, 1, 2, 0, 0, absl::InfinitePast(), /*flush=*/false);
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);  // the job's end wrote it at once
  EXPECT_EQ(CountEvents(*jobs_->Get(id), "RankExited"), 3);
  Open(path_);
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
}

// The event loop's idle moments write what was staged at most every
// group_commit_interval (10 ms); the reconcile writes it regardless.
TEST_F(CoordinatorTest, IdleGroupCommitIsRateLimited) {
  const std::string id = RunningJob();  // its last report was written just now
  Exited("w1", id, 1, 0, 0, 0, absl::InfinitePast(), /*flush=*/false);
  coordinator_->OnIdle();  // within 10 ms of that write: waits
  EXPECT_FALSE(jobs_->Get(id)->ranks(0).has_exit());
  clock_.Advance(absl::Milliseconds(10));
  coordinator_->OnIdle();  // writes
  EXPECT_TRUE(jobs_->Get(id)->ranks(0).has_exit());
  Metric("w2", id, 1, 1, 5, /*flush=*/false);
  clock_.Advance(absl::Milliseconds(5));
  coordinator_->OnIdle();  // 5 ms later: waits
  EXPECT_EQ(jobs_->staged_jobs(), 1u);
  clock_.Advance(absl::Milliseconds(5));
  coordinator_->OnIdle();  // 10 ms: writes
  EXPECT_EQ(jobs_->staged_jobs(), 0u);
  Metric("w2", id, 1, 1, 6, /*flush=*/false);
  EXPECT_EQ(jobs_->staged_jobs(), 1u);
  coordinator_->ReconcileOnce();  // at once
  EXPECT_EQ(jobs_->staged_jobs(), 0u);
}

TEST_F(RestartTest, AStagedExitLostWithTheCoordinatorRestartsTheGeneration) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 0, 0, absl::InfinitePast(), /*flush=*/false);
  Open(path_);  // the coordinator dies before its loop ran dry
  EXPECT_FALSE(jobs_->Peek(id)->ranks(1).has_exit());
  baton::v1::Register w1 = Reg("w1");  // still runs rank 0
  auto* a = w1.add_assignments();
  a->set_job_id(id);
  a->set_generation(1);
  a->add_ranks()->set_rank(0);
  Connect(w1);
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  Connect(Reg("w2"));  // forgot the assignment once its exit was sent
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_EQ(jobs_->Peek(id)->restarts().failures(0).reason(), "WorkerRestarted");
}

TEST_F(RestartTest, RestartRendezvousInterruptedByARestartIsRequeuedAndCompletes) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 1);
  StopRest(id, 1);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);  // generation 2's rendezvous
  Open(path_);
  EXPECT_EQ(StateOf(id), JobState::kQueued);
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  CompleteRendezvous(id, 3, 29800);
  const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(f.next_generation(), 3);
  EXPECT_TRUE(f.has_running_time());
}

TEST_F(RestartTest, RestartStatsSurviveRestartAndTheRestartCompletes) {
  const std::string id = RunningJob();
  Metric("w2", id, 1, 1, 7);
  Exited("w2", id, 1, 1, 2);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Job before = *jobs_->Get(id);
  Open(path_);  // the coordinator restarts during the backoff
  const baton::v1::Job after = *jobs_->Get(id);
  EXPECT_EQ(after.state(), baton::v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(after.restarts().SerializeAsString(), before.restarts().SerializeAsString());
  EXPECT_EQ(after.restarts().user(), 1);
  EXPECT_EQ(after.restarts().failures(0).step(), 7);
  clock_.Advance(absl::Seconds(20));  // past the stop wait: w1's exit never came
  // The workers come back; w1 still runs rank 0 of generation 1, so it is told to stop it,
  // and generation 2 waits for that exit.
  baton::v1::Register reg = Reg("w1");
  auto* a = reg.add_assignments();
  a->set_job_id(id);
  a->set_generation(1);
  a->add_ranks()->set_rank(0);
  Connect(reg);
  auto stop = Last("w1", baton::v1::CoordinatorMessage::kStopAssignment).stop_assignment();
  EXPECT_EQ(stop.generation(), 1);
  Connect(Reg("w2"));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_FALSE(channels_["w1"]->closed);  // just reconnected: it gets its stop grace
  Exited("w1", id, 1, 0, 0, /*signal=*/15);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29700);
  EXPECT_EQ(jobs_->Get(id)->restarts().failures(0).next_generation(), 2);
}

TEST_F(RestartTest, RunningJobRestartsWhenWorkersDoNotComeBack) {
  const std::string id = RunningJob();
  Open(path_);
  clock_.Advance(absl::Seconds(29));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  clock_.Advance(absl::Seconds(2));
  coordinator_->ReconcileOnce();
  // Whatever lease the old coordinator granted ran out long ago: the processes are dead.
  EXPECT_EQ(StateOf(id), JobState::kRestarting);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("did not report back"));
  const baton::v1::Failure& f = jobs_->Peek(id)->restarts().failures(0);
  EXPECT_EQ(f.reason(), "ReattachTimeout");
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  clock_.Advance(kFirstBackoff);
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  CompleteRendezvous(id, 2, 29600);
}

TEST_F(RestartTest, HistorySurvivesRestart) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 0);
  Exited("w2", id, 1, 1, 0);
  const baton::v1::Job before = *jobs_->Get(id);
  Open(path_);
  const baton::v1::Job after = *jobs_->Get(id);
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  absl::StatusOr<baton::v1::Job> next = coordinator_->SubmitJob(CommandSpec(1));
  EXPECT_EQ(next->id(), "j-000002");  // ids are never reused
}

// ---------------------------------------------------------------------------------------
// `baton profile`: ProfileJob -> ProfileRanks -> ProfileTrace -> the reply.
// ---------------------------------------------------------------------------------------

using ProfileResult = absl::StatusOr<baton::v1::ProfileJobResponse>;

baton::v1::ProfileJobRequest ProfileRequest(const std::string& job, int64_t steps,
                                            std::vector<int32_t> ranks = {}) {
  baton::v1::ProfileJobRequest r;
  r.set_job_id(job);
  r.set_steps(steps);
  for (int32_t rank : ranks) r.add_ranks(rank);
  return r;
}

baton::v1::WorkerMessage TraceOf(const baton::v1::ProfileRanks& asked, int32_t rank,
                                 const std::string& json) {
  baton::v1::WorkerMessage m;
  baton::v1::ProfileTrace* t = m.mutable_profile_trace();
  t->set_job_id(asked.job_id());
  t->set_generation(asked.generation());
  t->set_request_id(asked.request_id());
  t->set_rank(rank);
  t->set_trace_json(json);
  return m;
}

TEST_F(CoordinatorTest, ProfileAsksEachRanksWorkerAndAnswersWithEveryTrace) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  std::optional<ProfileResult> result;
  auto done = [&result](ProfileResult r) { result = std::move(r); };
  // Before the generation's first step its ranks may not handle SIGUSR2 yet.
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 2), done),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not reported a step")));
  Metric("w1", id, 1, 0, 5);

  ASSERT_OK(coordinator_->ProfileJob(ProfileRequest(id, 2), done));
  EXPECT_EQ(coordinator_->profiles_in_flight(), 1u);
  const baton::v1::ProfileRanks asked1 =
      Last("w1", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks();
  const baton::v1::ProfileRanks asked2 =
      Last("w2", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks();
  EXPECT_EQ(asked1.job_id(), id);
  EXPECT_EQ(asked1.generation(), 1);
  EXPECT_EQ(asked1.steps(), 2);
  EXPECT_THAT(asked1.ranks(), ::testing::ElementsAre(0));
  EXPECT_THAT(asked2.ranks(), ::testing::ElementsAre(1));
  EXPECT_EQ(asked1.request_id(), asked2.request_id());
  EXPECT_EQ(FromProto(asked1.timeout()), kDefaultProfileTimeout);
  // No step time known yet: the window starts log_every (10, the default) + 10 steps after
  // the newest reported one.
  EXPECT_EQ(asked1.start_step(), 5 + 10 + 10);
  EXPECT_EQ(asked2.start_step(), 5 + 10 + 10);

  Send("w2", TraceOf(asked2, 1, "{\"r\":1}"));
  EXPECT_FALSE(result.has_value());
  Send("w1", TraceOf(asked1, 0, "{\"r\":0}"));
  ASSERT_TRUE(result.has_value());
  ASSERT_OK(result->status());
  ASSERT_EQ((*result)->traces_size(), 2);
  EXPECT_EQ((*result)->traces(0).trace_json(), "{\"r\":0}");
  EXPECT_EQ((*result)->traces(1).trace_json(), "{\"r\":1}");
  EXPECT_EQ(coordinator_->profiles_in_flight(), 0u);
}

TEST_F(CoordinatorTest, ProfileWindowStartsAheadByTheStepTime) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  // Rank 0 steps every 100 ms (the workers' timestamps).
  for (int step = 1; step <= 4; ++step) {
    baton::v1::WorkerMessage m;
    m.mutable_metrics()->set_job_id(id);
    baton::v1::MetricPoint* p = m.mutable_metrics()->add_points();
    p->set_generation(1);
    p->set_rank(0);
    p->set_step(step);
    *p->mutable_time() = ToProto(clock_.Now() + absl::Milliseconds(100) * step);
    (*p->mutable_values())["loss"] = 1.0;
    Send("w1", m);
  }
  ASSERT_OK(coordinator_->ProfileJob(ProfileRequest(id, 2), [](ProfileResult) {}));
  // log_every (10), then kProfileLeadTime (3 s) of 100 ms steps + 1, after step 4.
  const baton::v1::ProfileRanks asked =
      Last("w2", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks();
  EXPECT_EQ(asked.start_step(), 4 + 10 + 31);
  EXPECT_EQ(FromProto(asked.timeout()), kDefaultProfileTimeout);
}

TEST_F(CoordinatorTest, ProfileOfSlowStepsWaitsLongerByDefault) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  for (int step = 1; step <= 3; ++step) {  // 10 s a step.
    baton::v1::WorkerMessage m;
    m.mutable_metrics()->set_job_id(id);
    baton::v1::MetricPoint* p = m.mutable_metrics()->add_points();
    p->set_generation(1);
    p->set_rank(0);
    p->set_step(step);
    *p->mutable_time() = ToProto(clock_.Now() + absl::Seconds(10) * step);
    (*p->mutable_values())["loss"] = 1.0;
    Send("w1", m);
  }
  ASSERT_OK(coordinator_->ProfileJob(ProfileRequest(id, 2), [](ProfileResult) {}));
  const baton::v1::ProfileRanks asked =
      Last("w1", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks();
  // From step 3: log_every (10) + 3 s of 10 s steps (1) = step 14; its window ends 13 steps
  // after step 3, 130 s: the coordinator waits twice that.
  EXPECT_EQ(asked.start_step(), 14);
  EXPECT_EQ(FromProto(asked.timeout()), absl::Seconds(260));
  // An explicit timeout is kept.
  baton::v1::ProfileJobRequest explicit_timeout = ProfileRequest(id, 2);
  *explicit_timeout.mutable_timeout() = ToProto(absl::Seconds(30));
  ASSERT_OK(coordinator_->ProfileJob(explicit_timeout, [](ProfileResult) {}));
  EXPECT_EQ(
      FromProto(Last("w1", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks().timeout()),
      absl::Seconds(30));
}

TEST_F(CoordinatorTest, ProfileValidatesItsRequest) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  auto done = [](ProfileResult) { ADD_FAILURE() << "a refused profile must not be answered"; };
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 2), done),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("only a RUNNING job")));
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 5);
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 0), done),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("steps: 0 is outside")));
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 1001), done),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[1, 1000]")));
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 2, {2}), done),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ranks: 2 is outside")));
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest("j-999999", 2), done),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  baton::v1::ProfileJobRequest long_timeout = ProfileRequest(id, 2);
  *long_timeout.mutable_timeout() = ToProto(absl::Hours(2));
  EXPECT_THAT(coordinator_->ProfileJob(long_timeout, done),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("timeout")));
  EXPECT_EQ(coordinator_->profiles_in_flight(), 0u);
}

TEST_F(CoordinatorTest, ProfileOfACommandJobNeedsTheBuiltInTrainer) {
  const std::string id = RunningJob();
  Metric("w1", id, 1, 0, 5);
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(id, 2), [](ProfileResult) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("profiling needs the built-in trainer")));
}

TEST_F(CoordinatorTest, ProfileIsNeverSentToAWorkerOlderThanVersion4) {
  baton::v1::Register old = Reg("w1");
  old.set_protocol_version(3);
  Connect(old);
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  CompleteRendezvous(submitted->id(), 1, 29500);
  Metric("w2", submitted->id(), 1, 1, 5);
  EXPECT_THAT(coordinator_->ProfileJob(ProfileRequest(submitted->id(), 2), [](ProfileResult) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("worker w1 speaks protocol version 3")));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kProfileRanks), SizeIs(0));
  EXPECT_THAT(channels_["w2"]->Of(baton::v1::CoordinatorMessage::kProfileRanks), SizeIs(0));
  // Rank 1 alone lives on a current worker.
  ASSERT_OK(
      coordinator_->ProfileJob(ProfileRequest(submitted->id(), 2, {1}), [](ProfileResult) {}));
  EXPECT_THAT(channels_["w2"]->Of(baton::v1::CoordinatorMessage::kProfileRanks), SizeIs(1));
}

TEST_F(CoordinatorTest, ProfileExpiresOrFailsNamingTheMissingRanks) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 2));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  CompleteRendezvous(id, 1, 29500);
  Metric("w1", id, 1, 0, 5);
  std::optional<ProfileResult> expired, lost;
  baton::v1::ProfileJobRequest quick = ProfileRequest(id, 2);
  *quick.mutable_timeout() = ToProto(absl::Seconds(10));
  ASSERT_OK(coordinator_->ProfileJob(quick, [&](ProfileResult r) { expired = std::move(r); }));
  const baton::v1::ProfileRanks asked =
      Last("w1", baton::v1::CoordinatorMessage::kProfileRanks).profile_ranks();
  Send("w1", TraceOf(asked, 0, "{}"));
  clock_.Advance(absl::Seconds(10));
  coordinator_->ReconcileOnce();
  ASSERT_TRUE(expired.has_value());
  EXPECT_THAT(expired->status(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                          HasSubstr("missing: rank 1 on worker w2")));

  ASSERT_OK(coordinator_->ProfileJob(ProfileRequest(id, 2),
                                     [&](ProfileResult r) { lost = std::move(r); }));
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  coordinator_->ReconcileOnce();
  ASSERT_TRUE(lost.has_value());
  EXPECT_THAT(lost->status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 1")));
  EXPECT_EQ(coordinator_->profiles_in_flight(), 0u);
}

// ---- Pre-flight (policy/preflight.h) ------------------------------------------------

// A worker that can take part in pre-flight checks (protocol >= 6, a probe port).
baton::v1::Register Checkable(baton::v1::Register reg) {
  reg.set_probe_port(7000 + std::stoi(reg.worker_id().substr(1)));
  return reg;
}

class PreflightTest : public CoordinatorTest {
 protected:
  // Answers the latest RunPreflight `worker` got: shared memory `shm_ok`, and each link it
  // was asked to measure at `rate(to)` bytes/s over 200 ms.
  void Answer(const std::string& worker, const std::function<double(const std::string&)>& rate,
              bool shm_ok = true) {
    const baton::v1::RunPreflight req =
        Last(worker, baton::v1::CoordinatorMessage::kRunPreflight).run_preflight();
    ASSERT_FALSE(req.job_id().empty()) << worker << " got no RunPreflight";
    baton::v1::WorkerMessage m;
    baton::v1::PreflightResult* r = m.mutable_preflight_result();
    r->set_job_id(req.job_id());
    r->set_generation(req.generation());
    r->set_round(req.round());
    baton::v1::HostCheck* shm = r->add_checks();
    shm->set_name("shm");
    shm->set_ok(shm_ok);
    if (!shm_ok) shm->set_detail("cannot reserve 32 MiB in /dev/shm: No space left on device");
    for (const baton::v1::Peer& p : req.send_to()) {
      baton::v1::LinkMeasurement* l = r->add_links();
      l->set_peer_worker_id(p.worker_id());
      l->set_bytes(static_cast<int64_t>(rate(p.worker_id()) * 0.2));
      *l->mutable_duration() = ToProto(absl::Milliseconds(200));
    }
    Send(worker, m);
  }

  std::vector<std::string> Gang(const std::string& id) {
    std::set<std::string> gang;
    for (const auto& r : jobs_->Peek(id)->ranks()) gang.insert(r.worker_id());
    return {gang.begin(), gang.end()};
  }

  std::vector<std::string> EventReasons(const std::string& id) {
    std::vector<std::string> out;
    const baton::v1::Job job = *jobs_->Get(id);
    for (const auto& e : job.events()) out.push_back(e.reason());
    return out;
  }

  const baton::v1::Worker* FindWorker(const std::vector<baton::v1::Worker>& all,
                                      const std::string& id) {
    for (const auto& w : all) {
      if (w.id() == id) return &w;
    }
    return nullptr;
  }
};

TEST_F(PreflightTest, ASlowHostIsLeftOutMarkedAndRecheckedLater) {
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Checkable(Reg(w)));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(4);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  // The check comes before the port: a ring of the four, each sending to its next two.
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(0));
  const baton::v1::RunPreflight req =
      Last("w1", baton::v1::CoordinatorMessage::kRunPreflight).run_preflight();
  EXPECT_EQ(req.generation(), 1);
  ASSERT_THAT(req.send_to(), SizeIs(2));
  EXPECT_EQ(req.send_to(0).worker_id(), "w2");
  EXPECT_EQ(req.send_to(0).host(), "10.0.0.2");
  EXPECT_EQ(req.send_to(0).probe_port(), 7002);
  EXPECT_EQ(req.send_to(1).worker_id(), "w3");
  EXPECT_EQ(FromProto(req.link_window()), absl::Milliseconds(200));
  // w3's link is throttled (both ways): 2 MB/s against 1 GB/s.
  const auto rate_from = [](const std::string& from) {
    return [from](const std::string& to) { return from == "w3" || to == "w3" ? 2e6 : 1e9; };
  };
  for (const std::string w : {"w1", "w2", "w3"}) Answer(w, rate_from(w));
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);  // w4 has yet to answer
  Answer("w4", rate_from("w4"));
  // Slow in the first round: a second round, at once, must confirm it.
  EXPECT_EQ(Last("w1", baton::v1::CoordinatorMessage::kRunPreflight).run_preflight().round(), 2);
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Answer(w, rate_from(w));
  // Left out: the job goes back to the queue and starts again on the other three, which
  // passed: no further check.
  EXPECT_EQ(StateOf(id), JobState::kQueued);
  const std::vector<baton::v1::Worker> workers = coordinator_->ListWorkers();
  const baton::v1::Worker* w3 = FindWorker(workers, "w3");
  ASSERT_NE(w3, nullptr);
  EXPECT_THAT(w3->unhealthy_reason(),
              AllOf(HasSubstr("pre-flight of job " + id), HasSubstr("slow: sends at best 2 MB/s"),
                    HasSubstr("of the gang's median 1 GB/s")));
  EXPECT_EQ(FromProto(w3->unhealthy_until()), clock_.Now() + absl::Minutes(10));
  EXPECT_TRUE(FindWorker(workers, "w1")->unhealthy_reason().empty());
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w2", "w4"));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(2));
  CompleteRendezvous(id, 2, 29500);
  const std::vector<std::string> reasons = EventReasons(id);
  EXPECT_THAT(reasons, Contains("Preflight"));
  EXPECT_THAT(reasons, Contains("PreflightExcluded"));
  const baton::v1::Job with_events = *jobs_->Get(id);
  for (const auto& e : with_events.events()) {
    if (e.reason() == "Preflight") {
      EXPECT_THAT(e.message(), AllOf(HasSubstr("4 host(s) checked"),
                                     HasSubstr("median bandwidth 1 GB/s"), HasSubstr("w3 slow")));
    }
    if (e.reason() == "PreflightExcluded") {
      EXPECT_THAT(e.message(), HasSubstr("left out w3 (slow"));
    }
  }
  // Once its mark lapses w3 is schedulable again, and the next gang it joins checks it.
  clock_.Advance(absl::Minutes(10));
  EXPECT_TRUE(FindWorker(coordinator_->ListWorkers(), "w3")->unhealthy_reason().empty());
  absl::StatusOr<baton::v1::Job> second = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(second);
  EXPECT_EQ(StateOf(second->id()), JobState::kRendezvous);
  EXPECT_THAT(Gang(second->id()), ElementsAre("w3"));
  EXPECT_EQ(Last("w3", baton::v1::CoordinatorMessage::kRunPreflight).run_preflight().job_id(),
            second->id());
}

TEST_F(PreflightTest, AHostSlowForAMomentIsNotMarkedWhenTheSecondRoundDoesNotConfirmIt) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Checkable(Reg(w)));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  // Round 1: w2 starved of CPU for the window, its links at a fifth of the others'.
  const auto slow_w2 = [](const std::string& from) {
    return [from](const std::string& to) { return from == "w2" || to == "w2" ? 2e8 : 1e9; };
  };
  for (const std::string w : {"w1", "w2", "w3"}) Answer(w, slow_w2(w));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(0));
  // Round 2: all fast. Nobody is marked; the generation goes on to its port.
  for (const std::string w : {"w1", "w2", "w3"}) Answer(w, [](auto&) { return 1e9; });
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
  for (const baton::v1::Worker& w : coordinator_->ListWorkers()) {
    EXPECT_TRUE(w.unhealthy_reason().empty()) << w.id();
  }
  // A late first-round answer changes nothing.
  baton::v1::WorkerMessage late;
  late.mutable_preflight_result()->set_job_id(id);
  late.mutable_preflight_result()->set_generation(1);
  late.mutable_preflight_result()->set_round(1);
  Send("w2", late);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
}

TEST_F(PreflightTest, WorkersOnOneMachineAreNotJudgedOnBandwidth) {
  for (const std::string w : {"w1", "w2", "w3"}) {
    auto ch = std::make_shared<FakeChannel>();
    absl::StatusOr<uint64_t> session =
        coordinator_->OnWorkerConnected(Checkable(Reg(w)), "127.0.0.1", ch);
    ASSERT_OK(session);
    channels_[w] = ch;
    sessions_[w] = *session;
  }
  coordinator_->FlushStaged();
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(3));
  ASSERT_OK(submitted);
  const auto slow_w2 = [](const std::string& from) {
    return [from](const std::string& to) { return from == "w2" || to == "w2" ? 1e6 : 1e9; };
  };
  for (const std::string w : {"w1", "w2", "w3"}) Answer(w, slow_w2(w));
  // One machine's loopback measures its CPUs: no second round, nobody marked.
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(1));
  for (const baton::v1::Worker& w : coordinator_->ListWorkers()) {
    EXPECT_TRUE(w.unhealthy_reason().empty()) << w.id();
  }
}

TEST_F(PreflightTest, AHostTheJobNeedsForItsMinIsKeptWithAWarning) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Checkable(Reg(w)));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(CommandSpec(3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  Answer("w1", [](auto&) { return 1e9; });
  Answer("w2", [](auto&) { return 1e9; });
  Answer(
      "w3", [](auto&) { return 1e9; }, /*shm_ok=*/false);
  // min 3 of 3: nobody can be left out; the generation goes on to its port.
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
  EXPECT_THAT(EventReasons(id), Contains("PreflightWarning"));
  EXPECT_THAT(FindWorker(coordinator_->ListWorkers(), "w3")->unhealthy_reason(),
              HasSubstr("shm: cannot reserve 32 MiB in /dev/shm"));
}

TEST_F(PreflightTest, AWorkerThatDoesNotAnswerFailsAtTheDeadline) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Checkable(Reg(w)));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(3);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  Answer("w1", [](auto&) { return 1e9; });
  Answer("w2", [](auto&) { return 1e9; });
  // w3 hangs: the answers' deadline is the window (200 ms) + connect (2 s) + grace (3 s).
  clock_.Advance(absl::Milliseconds(5199));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
  clock_.Advance(absl::Milliseconds(1));
  coordinator_->ReconcileOnce();  // ends the check: w3 left out, the job requeued...
  coordinator_->ReconcileOnce();  // ...and placed again on w1 and w2
  EXPECT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w2"));
  EXPECT_THAT(FindWorker(coordinator_->ListWorkers(), "w3")->unhealthy_reason(),
              HasSubstr("no pre-flight answer within 5.2s"));
  // Its late answer changes nothing.
  baton::v1::WorkerMessage late;
  late.mutable_preflight_result()->set_job_id(id);
  late.mutable_preflight_result()->set_generation(1);
  Send("w3", late);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
}

TEST_F(PreflightTest, AWorkerJoiningARunningJobIsCheckedWithTheGang) {
  for (const std::string w : {"w1", "w2"}) Connect(Checkable(Reg(w)));
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(TrainerJob(2, 3));
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  Answer("w1", [](auto&) { return 1e9; });
  Answer("w2", [](auto&) { return 1e9; });
  CompleteRendezvous(id, 1, 29500);
  // w3 joins: the scale-up's generation checks all three before its port.
  Connect(Checkable(Reg("w3")));
  Metric("w1", id, 1, 0, 20);
  Metric("w2", id, 1, 1, 20);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  Exited("w1", id, 1, 0, 75);
  StopRest(id, 1);
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
  const baton::v1::RunPreflight req =
      Last("w3", baton::v1::CoordinatorMessage::kRunPreflight).run_preflight();
  EXPECT_EQ(req.generation(), 2);
  ASSERT_THAT(req.send_to(), SizeIs(2));
  EXPECT_EQ(req.send_to(0).worker_id(), "w1");
  for (const std::string w : {"w1", "w2", "w3"}) Answer(w, [](auto&) { return 1e9; });
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(2));
  CompleteRendezvous(id, 2, 29501);
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w2", "w3"));
}

TEST_F(PreflightTest, HostsTheJobMustKeepStayWhileThoseItCanSpareAreLeftOut) {
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Checkable(Reg(w)));
  baton::v1::JobSpec spec = CommandSpec(3);
  spec.mutable_workers()->set_max(4);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  // w3 slow, w4's /dev/shm full: one of them can go (min 3 of 4), the failed one first.
  const auto rate_from = [](const std::string& from) {
    return [from](const std::string& to) { return from == "w3" || to == "w3" ? 2e6 : 1e9; };
  };
  for (int round = 1; round <= 2; ++round) {  // w3 is slow in both
    for (const std::string w : {"w1", "w2", "w3"}) Answer(w, rate_from(w));
    Answer("w4", rate_from("w4"), /*shm_ok=*/false);
  }
  // Both are marked, yet the job restarts at once on w1-w3 (w3 kept, not checked again).
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w2", "w3"));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(2));
  EXPECT_EQ(Last("w1", baton::v1::CoordinatorMessage::kReservePort).reserve_port().generation(), 2);
  const std::vector<std::string> reasons = EventReasons(id);
  EXPECT_THAT(reasons, Contains("PreflightWarning"));
  EXPECT_THAT(reasons, Contains("PreflightExcluded"));
  const std::vector<baton::v1::Worker> workers = coordinator_->ListWorkers();
  EXPECT_THAT(FindWorker(workers, "w3")->unhealthy_reason(), HasSubstr("slow"));
  EXPECT_THAT(FindWorker(workers, "w4")->unhealthy_reason(), HasSubstr("shm: cannot reserve"));
  CompleteRendezvous(id, 2, 29500);
}

TEST_F(PreflightTest, AWorkerLostDuringTheCheckFailsTheGenerationAndLateAnswersChangeNothing) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Checkable(Reg(w)));
  baton::v1::JobSpec spec = CommandSpec(2);
  spec.mutable_workers()->set_max(2);
  absl::StatusOr<baton::v1::Job> submitted = coordinator_->SubmitJob(spec);
  ASSERT_OK(submitted);
  const std::string id = submitted->id();
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w2"));
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  coordinator_->FlushStaged();
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  Answer("w1", [](auto&) { return 1e9; });  // too late: no port is asked for
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(0));
  // No StartAssignment was sent: no rank ran anywhere, so the restart waits for nobody's
  // exit nor for w2's lease, only for the backoff. It places generation 2 on w1 and w3 and
  // checks both (w1 never passed: its check did not end).
  EXPECT_TRUE(jobs_->Peek(id)->ranks(0).has_exit());
  EXPECT_TRUE(jobs_->Peek(id)->ranks(1).has_exit());
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(id)->generation(), 2);
  EXPECT_THAT(Gang(id), ElementsAre("w1", "w3"));
  Answer("w1", [](auto&) { return 1e9; });
  Answer("w3", [](auto&) { return 1e9; });
  CompleteRendezvous(id, 2, 29500);
}

TEST_F(PreflightTest, SkippedByTheSpecAndNotRepeatedOnCheckedWorkers) {
  Connect(Checkable(Reg("w1")));
  Connect(Checkable(Reg("w2")));
  baton::v1::Register old = Reg("w3");
  old.set_protocol_version(5);  // takes no part
  old.set_probe_port(7003);
  Connect(old);
  baton::v1::JobSpec skip = CommandSpec(1);
  skip.mutable_preflight()->set_skip(true);
  absl::StatusOr<baton::v1::Job> skipped = coordinator_->SubmitJob(skip);
  ASSERT_OK(skipped);
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kReservePort), SizeIs(1));
  EXPECT_THAT(channels_["w1"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(0));
  // A job on w2 and the old w3: only w2 is checked (alone: its host, no links).
  absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
  ASSERT_OK(job);
  EXPECT_THAT(Gang(job->id()), ElementsAre("w2", "w3"));
  EXPECT_THAT(channels_["w3"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(0));
  EXPECT_THAT(Last("w2", baton::v1::CoordinatorMessage::kRunPreflight).run_preflight().send_to(),
              SizeIs(0));
  Answer("w2", [](auto&) { return 0.0; });
  CompleteRendezvous(job->id(), 1, 29500);
  // A restart on the same workers starts without a check.
  Exited("w2", job->id(), 1, 0, 1);
  StopRest(job->id(), 1);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(job->id()), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(job->id())->generation(), 2);
  EXPECT_THAT(channels_["w2"]->Of(baton::v1::CoordinatorMessage::kRunPreflight), SizeIs(1));
  CompleteRendezvous(job->id(), 2, 29501);
}

TEST_F(RestartTest, ACordonKeepsAWorkerOutOfNewGangsAndSurvivesARestart) {
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  EXPECT_THAT(coordinator_->CordonWorker("w9", "typo", "ops"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker 'w9' is unknown")));
  EXPECT_THAT(coordinator_->CordonWorker("w1", std::string(300, 'x'), "ops"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reason: 300 bytes")));
  absl::StatusOr<baton::v1::Worker> cordoned =
      coordinator_->CordonWorker("w1", "NIC errors, ticket 42", "ops");
  ASSERT_OK(cordoned);
  EXPECT_EQ(cordoned->cordon().reason(), "NIC errors, ticket 42");
  EXPECT_EQ(cordoned->cordon().by(), "ops");
  EXPECT_EQ(FromProto(cordoned->cordon().time()), clock_.Now());
  // A one-worker job lands on w2; a second waits although w1 is free.
  absl::StatusOr<baton::v1::Job> first = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(first);
  EXPECT_THAT(jobs_->Peek(first->id())->ranks(0).worker_id(), "w2");
  absl::StatusOr<baton::v1::Job> second = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(second);
  EXPECT_EQ(StateOf(second->id()), JobState::kQueued);
  // The coordinator restarts: the cordon is read back and applies when w1 reconnects (the
  // first job, requeued by the restart, goes back to w2).
  Open(path_);
  Connect(Reg("w1"));
  Connect(Reg("w2"));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(jobs_->Peek(first->id())->ranks(0).worker_id(), "w2");
  EXPECT_EQ(StateOf(second->id()), JobState::kQueued);
  std::vector<baton::v1::Worker> workers = coordinator_->ListWorkers();
  ASSERT_THAT(workers, SizeIs(2));
  EXPECT_EQ(workers[0].id(), "w1");
  EXPECT_EQ(workers[0].cordon().reason(), "NIC errors, ticket 42");
  EXPECT_FALSE(workers[1].has_cordon());
  // Uncordoned: durable too, and the waiting job starts on w1 at once.
  absl::StatusOr<baton::v1::Worker> back = coordinator_->UncordonWorker("w1");
  ASSERT_OK(back);
  EXPECT_FALSE(back->has_cordon());
  EXPECT_EQ(StateOf(second->id()), JobState::kRendezvous);
  EXPECT_EQ(jobs_->Peek(second->id())->ranks(0).worker_id(), "w1");
  EXPECT_OK(coordinator_->UncordonWorker("w1"));  // idempotent
  Open(path_);
  Connect(Reg("w1"));
  EXPECT_FALSE(coordinator_->ListWorkers()[0].has_cordon());
}

// --- Sharing a cluster (SharingManager) ---

// Queues a and b lend each other within cohort c (2 slots each); solo (1 slot) is alone
// and only bob's.
constexpr char kQueueFile[] = R"(default_queue: a
priority_classes:
  - {name: low, value: 0}
  - {name: high, value: 100}
queues:
  - {name: a, cohort: c, quota: {slots: 2}, users: ["*"]}
  - {name: b, cohort: c, quota: {slots: 2}, users: ["*"]}
  - {name: solo, quota: {slots: 1}, users: [bob], max_priority: low}
)";

QueueSet ParsedQueues(const std::string& text) {
  absl::StatusOr<QueueSet> set = ParseQueueFile(text, "queues.yaml");
  EXPECT_OK(set);
  return set.ok() ? *set : QueueSet();
}

baton::v1::JobSpec InQueue(baton::v1::JobSpec spec, const std::string& queue,
                           const std::string& priority = "") {
  spec.set_queue(queue);
  spec.set_priority(priority);
  return spec;
}

class SharingTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    coordinator_->SetQueues(ParsedQueues(kQueueFile));
  }

  baton::v1::Job Described(const std::string& id) {
    baton::v1::Job job = *jobs_->Get(id);
    coordinator_->DescribeQueueing(&job);
    return job;
  }

  const baton::v1::QueueStatus& Queue(const baton::v1::ListQueuesResponse& all,
                                      const std::string& name) {
    for (const baton::v1::QueueStatus& q : all.queues()) {
      if (q.name() == name) return q;
    }
    ADD_FAILURE() << "no queue " << name;
    return all.queues(0);
  }
};

TEST_F(SharingTest, SubmitResolvesTheQueueAndPriorityOrSaysWhichFieldIsWrong) {
  absl::StatusOr<baton::v1::Job> job =
      coordinator_->SubmitJob(InQueue(CommandSpec(1), "b", "high"), "", "alice");
  ASSERT_OK(job);
  EXPECT_EQ(job->queueing().queue(), "b");
  EXPECT_EQ(job->queueing().priority(), 100);
  EXPECT_EQ(jobs_->Get(job->id())->queueing().priority(), 100);  // stored with the job
  EXPECT_THAT(jobs_->Get(job->id())->events(0).message(), HasSubstr("in b at priority 100"));
  absl::StatusOr<baton::v1::Job> by_default = coordinator_->SubmitJob(CommandSpec(1), "", "alice");
  ASSERT_OK(by_default);
  EXPECT_EQ(by_default->queueing().queue(), "a");
  EXPECT_EQ(by_default->queueing().priority(), 0);
  EXPECT_EQ(coordinator_->SubmitJob(InQueue(CommandSpec(1), "a", "-7"))->queueing().priority(), -7);

  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(1), "nope"), "", "alice"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("queue: ")));
  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(1), "solo"), "", "alice"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "queue: user 'alice' may not submit to queue solo"));
  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(1), "a", "urgent"), "", "alice"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority: ")));
  EXPECT_OK(coordinator_->SubmitJob(InQueue(CommandSpec(1), "solo"), "", "bob"));
  // A gang larger than the queue can ever hold is refused at once.
  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(2), "solo"), "", "bob"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "workers.min: the job needs 2 slots (2 workers x 1), more than queue solo "
                       "can ever hold (its quota: 1 slot): it would never start"));
  EXPECT_OK(coordinator_->SubmitJob(InQueue(CommandSpec(4), "a"), "", "bob"));  // the cohort's 4
  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(5), "a"), "", "bob"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("(its cohort c's quotas: 4 slots)")));
  baton::v1::JobSpec rigid = InQueue(CommandSpec(3), "a");
  rigid.set_preemptible(false);
  EXPECT_THAT(coordinator_->SubmitJob(rigid, "", "bob"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("(its quota: 2 slots; a job that is not preemptible does not "
                                 "borrow)")));
  // solo caps its jobs' priority: bob cannot jump his queue.
  EXPECT_THAT(coordinator_->SubmitJob(InQueue(CommandSpec(1), "solo", "high"), "", "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "priority: 100 is above queue solo's max_priority (0); the queue file "
                       "sets it"));
}

TEST_F(SharingTest, AQueueNeverGoesBeyondItsQuotaAndTheWaitingJobSaysWhy) {
  for (const std::string w : {"w1", "w2", "w3"}) Connect(Reg(w));
  const std::string first =
      coordinator_->SubmitJob(InQueue(CommandSpec(1), "solo"), "", "bob")->id();
  const std::string second =
      coordinator_->SubmitJob(InQueue(CommandSpec(1), "solo"), "", "bob")->id();
  EXPECT_EQ(StateOf(first), JobState::kRendezvous);
  EXPECT_EQ(StateOf(second), JobState::kQueued);  // two workers are idle
  const baton::v1::Job waiting = Described(second);
  EXPECT_EQ(waiting.queueing().position(), 1);
  EXPECT_THAT(waiting.queueing().pending_reason(),
              AllOf(HasSubstr("needs 1 slot (1 worker x 1)"),
                    HasSubstr("queue solo at 1/1 slots of its quota")));
  const baton::v1::ListQueuesResponse queues = coordinator_->ListQueues();
  EXPECT_TRUE(queues.configured());
  EXPECT_EQ(queues.default_queue(), "a");
  ASSERT_THAT(queues.priority_classes(), SizeIs(2));
  EXPECT_EQ(queues.priority_classes(0).name(), "high");
  const baton::v1::QueueStatus& solo = Queue(queues, "solo");
  EXPECT_EQ(solo.used().slots(), 1);
  EXPECT_EQ(solo.nominal().slots(), 1);
  EXPECT_EQ(solo.pending_jobs(), 1);
  EXPECT_EQ(solo.admitted_jobs(), 1);
  EXPECT_THAT(solo.users(), ElementsAre("bob"));

  // The first ends: the second starts.
  CompleteRendezvous(first, 1, 29500);
  Exited(jobs_->Peek(first)->ranks(0).worker_id(), first, 1, 0, 0);
  EXPECT_EQ(StateOf(first), JobState::kSucceeded);
  EXPECT_EQ(StateOf(second), JobState::kRendezvous);
  EXPECT_EQ(Described(second).queueing().position(), 0);
}

TEST_F(SharingTest, AHigherPriorityJobShrinksAnElasticJobToItsMinInsteadOfWaiting) {
  coordinator_->SetQueues(ParsedQueues(R"(queues:
  - {name: a, quota: {slots: 4}, users: ["*"]}
)"));
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Reg(w));
  const std::string elastic = coordinator_->SubmitJob(InQueue(TrainerJob(2, 4), "a", "0"))->id();
  CompleteRendezvous(elastic, 1, 29500);
  ASSERT_EQ(jobs_->Peek(elastic)->ranks_size(), 4);
  for (int rank = 0; rank < 4; ++rank) Metric("w" + std::to_string(rank + 1), elastic, 1, rank, 10);

  const std::string urgent = coordinator_->SubmitJob(InQueue(CommandSpec(2), "a", "5"))->id();
  EXPECT_EQ(StateOf(urgent), JobState::kQueued);
  EXPECT_EQ(StateOf(elastic), JobState::kRestarting);
  const baton::v1::Job shrinking = *jobs_->Get(elastic);
  EXPECT_EQ(shrinking.events().rbegin()->reason(), "Shrinking");
  const baton::v1::Failure& f = *shrinking.restarts().failures().rbegin();
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_PLANNED);
  EXPECT_THAT(f.released_workers(), ElementsAre("w4", "w3"));
  EXPECT_EQ(f.max_next_workers(), 2);
  EXPECT_THAT(f.cause(), HasSubstr("to job " + urgent + ": shrinking from 4 to 2 workers"));
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kRequestCheckpoint).request_checkpoint().rank(), 0);
  baton::v1::Job waiting = Described(urgent);
  EXPECT_THAT(waiting.queueing().making_room(),
              ElementsAre(elastic + " (shrinks from 4 to 2 workers)"));
  EXPECT_THAT(waiting.queueing().pending_reason(), HasSubstr("room is being made"));

  // Rank 0 checkpointed: the elastic job continues on w1, w2; the urgent job takes w3, w4.
  Exited("w1", elastic, 1, 0, 75);
  StopRest(elastic, 1);
  ASSERT_EQ(StateOf(elastic), JobState::kRendezvous);
  ASSERT_EQ(StateOf(urgent), JobState::kRendezvous);
  EXPECT_THAT(WorkersOfJob(elastic), ElementsAre("w1", "w2"));
  EXPECT_THAT(WorkersOfJob(urgent), ElementsAre("w3", "w4"));
  const baton::v1::Job shrunk = *jobs_->Get(elastic);
  EXPECT_EQ(shrunk.restarts().planned(), 1);
  EXPECT_EQ(shrunk.restarts().infra() + shrunk.restarts().user() + shrunk.restarts().stall(), 0);
  EXPECT_EQ(Queue(coordinator_->ListQueues(), "a").shrinks(), 1);

  // Once the urgent job ended, nothing waits: the elastic job grows back within the quota.
  CompleteRendezvous(elastic, 2, 29501);
  Metric("w1", elastic, 2, 0, 11);
  CompleteRendezvous(urgent, 1, 29502);
  Exited("w3", urgent, 1, 0, 0);
  Exited("w4", urgent, 1, 1, 0);
  ASSERT_EQ(StateOf(urgent), JobState::kSucceeded);
  EXPECT_EQ(StateOf(elastic), JobState::kRestarting);
  EXPECT_EQ(jobs_->Get(elastic)->events().rbegin()->reason(), "ScalingUp");
}

TEST_F(SharingTest, AReclaimPreemptsTheBorrowerWhichWaitsAndResumesFromItsCheckpoint) {
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Reg(w));
  // b borrows a's idle quota: 4 workers where its own is 2.
  const std::string borrower = coordinator_->SubmitJob(InQueue(TrainerJob(4, 4), "b"))->id();
  CompleteRendezvous(borrower, 1, 29500);
  for (int rank = 0; rank < 4; ++rank) Metric("w" + std::to_string(rank + 1), borrower, 1, rank, 7);
  EXPECT_TRUE(Described(borrower).queueing().borrowing());
  const baton::v1::QueueStatus b = Queue(coordinator_->ListQueues(), "b");
  EXPECT_EQ(b.used().slots(), 4);
  EXPECT_EQ(b.borrowed().slots(), 2);

  // a wants its own quota back.
  const std::string owner = coordinator_->SubmitJob(InQueue(CommandSpec(2), "a"))->id();
  EXPECT_EQ(StateOf(owner), JobState::kQueued);
  ASSERT_EQ(StateOf(borrower), JobState::kRestarting);
  EXPECT_EQ(jobs_->Get(borrower)->events().rbegin()->reason(), "Preempted");
  EXPECT_THAT(Described(owner).queueing().making_room(),
              ElementsAre(borrower + " (preempted: reclaim)"));
  EXPECT_EQ(
      Last("w1", baton::v1::CoordinatorMessage::kRequestCheckpoint).request_checkpoint().rank(), 0);

  // Rank 0 checkpointed and exited; once every rank stopped the borrower is back in its
  // queue, and the owner's job runs.
  Exited("w1", borrower, 1, 0, 75);
  StopRest(borrower, 1);
  EXPECT_EQ(StateOf(borrower), JobState::kQueued);
  EXPECT_EQ(StateOf(owner), JobState::kRendezvous);
  const baton::v1::Job preempted = Described(borrower);
  EXPECT_EQ(preempted.events().rbegin()->reason(), "Requeued");
  EXPECT_THAT(preempted.events().rbegin()->message(),
              AllOf(HasSubstr("stopped at step 7"), HasSubstr("resumes from its checkpoint")));
  EXPECT_EQ(preempted.queueing().preemptions(), 1);
  EXPECT_EQ(preempted.restarts().planned(), 1);
  EXPECT_EQ(
      preempted.restarts().infra() + preempted.restarts().user() + preempted.restarts().stall(),
      0);  // not a failure: no budget spent
  EXPECT_EQ(preempted.queueing().position(), 1);
  EXPECT_FALSE(preempted.queueing().pending_reason().empty());
  EXPECT_EQ(Queue(coordinator_->ListQueues(), "b").preemptions(), 1);

  // The owner's job ends: the borrower is admitted again, its restart record continuing.
  CompleteRendezvous(owner, 1, 29501);
  Exited(jobs_->Peek(owner)->ranks(0).worker_id(), owner, 1, 0, 0);
  Exited(jobs_->Peek(owner)->ranks(1).worker_id(), owner, 1, 1, 0);
  ASSERT_EQ(StateOf(borrower), JobState::kRendezvous);
  const baton::v1::Job back = *jobs_->Get(borrower);
  EXPECT_EQ(back.generation(), 2);
  const baton::v1::Failure& f = *back.restarts().failures().rbegin();
  EXPECT_EQ(f.reason(), "Preempted");
  EXPECT_EQ(f.next_generation(), 2);
  EXPECT_TRUE(f.has_rendezvous_time());
}

TEST_F(SharingTest, ANonPreemptibleJobIsNeverPreempted) {
  coordinator_->SetQueues(ParsedQueues(R"(queues:
  - {name: a, quota: {slots: 2}, users: ["*"]}
)"));
  for (const std::string w : {"w1", "w2"}) Connect(Reg(w));
  baton::v1::JobSpec spec = InQueue(TrainerJob(2, 2), "a", "0");
  spec.set_preemptible(false);
  const std::string rigid = coordinator_->SubmitJob(spec)->id();
  CompleteRendezvous(rigid, 1, 29500);
  // It outranks the running job, which a preemptible job would make room by.
  const std::string urgent = coordinator_->SubmitJob(InQueue(CommandSpec(2), "a", "9"))->id();
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(rigid), JobState::kRunning);
  EXPECT_EQ(StateOf(urgent), JobState::kQueued);
  EXPECT_THAT(Described(urgent).queueing().making_room(), SizeIs(0));
}

TEST_F(SharingTest, ANonPreemptibleJobNeitherStartsNorGrowsOnBorrowedQuota) {
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Reg(w));
  baton::v1::JobSpec spec = InQueue(TrainerJob(1, 4), "a");
  spec.set_preemptible(false);
  const std::string id = coordinator_->SubmitJob(spec)->id();
  CompleteRendezvous(id, 1, 29500);
  EXPECT_THAT(WorkersOfJob(id), SizeIs(2));  // a's own 2 slots, though b's 2 are idle
  Metric("w1", id, 1, 0, 3);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);  // and it does not grow onto them
  EXPECT_FALSE(Described(id).queueing().borrowing());
}

TEST_F(SharingTest, ARunningJobGrowsOnlyWithinItsQueuesQuota) {
  for (const std::string w : {"w1", "w2", "w3", "w4"}) Connect(Reg(w));
  coordinator_->SetQueues(ParsedQueues(R"(queues:
  - {name: a, quota: {slots: 2}, users: ["*"]}
)"));
  const std::string id = coordinator_->SubmitJob(InQueue(TrainerJob(1, 4), "a"))->id();
  CompleteRendezvous(id, 1, 29500);
  EXPECT_THAT(WorkersOfJob(id), ElementsAre("w1", "w2"));  // the quota, not workers.max
  Metric("w1", id, 1, 0, 3);
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);  // two idle workers, no room in the quota

  // A failure's restart takes no more workers than the failed generation had.
  Exited("w2", id, 1, 1, 1);
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  StopRest(id, 1);
  clock_.Advance(kFirstBackoff);
  coordinator_->ReconcileOnce();
  ASSERT_EQ(StateOf(id), JobState::kRendezvous);
  EXPECT_THAT(WorkersOfJob(id), SizeIs(2));
  CompleteRendezvous(id, 2, 29501);
  Metric("w1", id, 2, 0, 4);

  // A reload that raises the quota lets it grow by what the quota allows.
  coordinator_->SetQueues(ParsedQueues(R"(queues:
  - {name: a, quota: {slots: 3}, users: ["*"]}
)"));
  ASSERT_EQ(StateOf(id), JobState::kRestarting);
  const baton::v1::Failure f = *jobs_->Peek(id)->restarts().failures().rbegin();
  EXPECT_EQ(f.reason(), "ScalingUp");
  EXPECT_EQ(f.max_next_workers(), 3);
}

TEST_F(SharingTest, AmongEqualPrioritiesTheUserWhoUsedLessGoesFirst) {
  coordinator_->SetQueues(ParsedQueues(R"(default_queue: a
queues:
  - {name: a, quota: {slots: 1}, users: ["*"]}
)"));
  Connect(Reg("w1"));
  const std::string first = coordinator_->SubmitJob(CommandSpec(1), "", "alice")->id();
  CompleteRendezvous(first, 1, 29500);
  // alice holds the queue's slot for an hour (her usage decays, by half a day later).
  for (int i = 1; i <= 720; ++i) {  // heartbeating within its lease
    clock_.Advance(absl::Seconds(5));
    Heartbeat("w1", i);
    coordinator_->ReconcileOnce();
  }
  ASSERT_EQ(StateOf(first), JobState::kRunning);
  const std::string alices = coordinator_->SubmitJob(CommandSpec(1), "", "alice")->id();
  const std::string bobs = coordinator_->SubmitJob(CommandSpec(1), "", "bob")->id();
  EXPECT_EQ(Described(bobs).queueing().position(), 1);  // submitted later, used less
  EXPECT_EQ(Described(alices).queueing().position(), 2);
  Exited("w1", first, 1, 0, 0);
  EXPECT_EQ(StateOf(bobs), JobState::kRendezvous);
  EXPECT_EQ(StateOf(alices), JobState::kQueued);
}

}  // namespace
}  // namespace baton::coordinator
