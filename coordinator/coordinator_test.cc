#include "coordinator/coordinator.h"

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/protocol_version.h"
#include "common/status_matchers.h"
#include "coordinator/job_manager.h"
#include "coordinator/store/store.h"
#include "coordinator/worker_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// Records what the coordinator sends to one worker.
class FakeChannel : public WorkerChannel {
 public:
  bool Send(const baton::v1::CoordinatorMessage& msg) override {
    if (closed) return false;
    sent.push_back(msg);
    return true;
  }
  void Close(const absl::Status& status) override {
    closed = true;
    close_status = status;
  }
  // Messages of one kind, in order.
  std::vector<baton::v1::CoordinatorMessage> Of(baton::v1::CoordinatorMessage::MsgCase c) const {
    std::vector<baton::v1::CoordinatorMessage> out;
    for (const auto& m : sent) {
      if (m.msg_case() == c) out.push_back(m);
    }
    return out;
  }

  std::vector<baton::v1::CoordinatorMessage> sent;
  bool closed = false;
  absl::Status close_status;
};

baton::v1::JobSpec CommandSpec(int min_workers, int slots = 1) {
  baton::v1::JobSpec spec;
  spec.set_name("test-job");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(min_workers);
  spec.set_slots_per_worker(slots);
  return spec;
}

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
    ASSERT_OK(session);
    channels_[reg.worker_id()] = ch;
    sessions_[reg.worker_id()] = *session;
  }

  void Send(const std::string& worker, const baton::v1::WorkerMessage& msg) {
    coordinator_->OnWorkerMessage(worker, sessions_[worker], msg);
  }

  void ReservedPort(const std::string& worker, const std::string& job, int64_t gen, int port) {
    baton::v1::WorkerMessage m;
    m.mutable_port_reserved()->set_job_id(job);
    m.mutable_port_reserved()->set_generation(gen);
    m.mutable_port_reserved()->set_port(port);
    Send(worker, m);
  }

  // Acknowledges every StartAssignment the worker got, with pid 1000+rank.
  void Started(const std::string& worker) {
    for (const auto& m : channels_[worker]->Of(baton::v1::CoordinatorMessage::kStartAssignment)) {
      baton::v1::WorkerMessage out;
      auto* s = out.mutable_assignment_started();
      s->set_job_id(m.start_assignment().job_id());
      s->set_generation(m.start_assignment().generation());
      for (baton::v1::RankInfo r : m.start_assignment().ranks()) {
        r.set_pid(1000 + r.rank());
        *s->add_ranks() = r;
      }
      Send(worker, out);
    }
  }

  void Exited(const std::string& worker, const std::string& job, int64_t gen, int rank,
              int code, int signal = 0) {
    baton::v1::WorkerMessage m;
    auto* e = m.mutable_process_exited();
    e->set_job_id(job);
    e->set_generation(gen);
    e->set_rank(rank);
    e->mutable_exit()->set_exit_code(signal ? -1 : code);
    e->mutable_exit()->set_signal(signal);
    Send(worker, m);
  }

  JobState StateOf(const std::string& job) { return *jobs_->State(job); }

  // Submits a 2-worker job and drives it to RUNNING on w1, w2.
  std::string RunningJob() {
    Connect(Reg("w1"));
    Connect(Reg("w2"));
    absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(CommandSpec(2));
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

TEST_F(CoordinatorTest, FailedRankFailsJobAndStopsTheOthers) {
  const std::string id = RunningJob();
  Exited("w2", id, 1, 1, 3);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  absl::StatusOr<baton::v1::Job> job = jobs_->Get(id);
  EXPECT_THAT(job->message(), HasSubstr("rank 1 on worker w2 exited with code 3"));
  auto stops = channels_["w1"]->Of(baton::v1::CoordinatorMessage::kStopAssignment);
  ASSERT_THAT(stops, SizeIs(1));
  EXPECT_EQ(stops[0].stop_assignment().job_id(), id);
}

TEST_F(CoordinatorTest, SignalledRankIsAFailure) {
  const std::string id = RunningJob();
  Exited("w1", id, 1, 0, 0, /*signal=*/9);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("killed by signal 9"));
}

TEST_F(CoordinatorTest, HeartbeatTimeoutLosesWorkerAndFailsItsJob) {
  const std::string id = RunningJob();
  clock_.Advance(absl::Seconds(3));
  baton::v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  Send("w1", hb);  // w1 stays alive, w2 goes silent
  clock_.Advance(absl::Seconds(3));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("worker w2 lost"));
  EXPECT_TRUE(channels_["w2"]->closed);
  EXPECT_FALSE(channels_["w1"]->closed);
}

TEST_F(CoordinatorTest, DisconnectFailsJobAndFreesSlotsForTheQueue) {
  const std::string id = RunningJob();
  absl::StatusOr<baton::v1::Job> next = coordinator_->SubmitJob(CommandSpec(1));
  ASSERT_OK(next);
  EXPECT_EQ(StateOf(next->id()), JobState::kQueued);  // both slots busy
  coordinator_->OnWorkerDisconnected("w2", sessions_["w2"]);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_EQ(StateOf(next->id()), JobState::kRendezvous);  // w1 is free again
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
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("reconnected without the job's processes"));
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
  EXPECT_EQ(StateOf(id), JobState::kFailed);  // heartbeats stopped meanwhile
}

TEST_F(RestartTest, RunningJobFailsWhenWorkersDoNotComeBack) {
  const std::string id = RunningJob();
  Open(path_);
  clock_.Advance(absl::Seconds(29));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  clock_.Advance(absl::Seconds(2));
  coordinator_->ReconcileOnce();
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_THAT(jobs_->Get(id)->message(), HasSubstr("did not report back"));
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

}  // namespace
}  // namespace baton::coordinator
