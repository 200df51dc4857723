#include "worker/agent/agent.h"

#include <signal.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/agent/outbox.h"
#include "worker/host/peer_probe.h"
#include "worker/host/reserve_port.h"
#include "worker/process/posix_process_launcher.h"
#include "worker/supervisor/supervisor.h"
#include "worker/testing/black_hole.h"
#include "worker/testing/fake_coordinator.h"
#include "worker/testing/fake_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using baton::v1::CoordinatorMessage;
using baton::v1::WorkerMessage;

// The agent and its supervisor run on simulated time: a test moves the clock once the code it
// drives waits on it (FakeClock::AwaitTimerAt), so every timeout, backoff and heartbeat below
// is exact. Processes and the network are real.
//
// A constant reconnect backoff, unlike every other period here, so that a timer due at
// Now() + kBackoff is the session thread waiting to reconnect.
constexpr absl::Duration kBackoff = absl::Seconds(7);

CoordinatorMessage StartCommand(const std::string& job_id, const std::string& script) {
  CoordinatorMessage m;
  baton::v1::StartAssignment* a = m.mutable_start_assignment();
  a->set_job_id(job_id);
  a->set_generation(1);
  a->set_world_size(1);
  a->set_master_addr("127.0.0.1");
  a->set_master_port(29500);
  baton::v1::CommandSpec* c = a->mutable_spec()->mutable_command();
  c->add_argv("/bin/sh");
  c->add_argv("-c");
  c->add_argv(script);
  baton::v1::RankInfo* r = a->add_ranks();
  r->set_rank(0);
  r->set_local_world_size(1);
  r->set_worker_id("w-agent-test");
  return m;
}

CoordinatorMessage StopCommand(const std::string& job_id) {
  CoordinatorMessage m;
  m.mutable_stop_assignment()->set_job_id(job_id);
  m.mutable_stop_assignment()->mutable_grace()->set_seconds(10);
  m.mutable_stop_assignment()->set_reason("test");
  return m;
}

// A Register listing `job_id` whose rank 0 satisfies `pred`.
FakeCoordinator::Predicate RegisterListing(const std::string& job_id,
                                           std::function<bool(const baton::v1::RankInfo&)> pred) {
  return [job_id, pred](const WorkerMessage& m) {
    if (!m.has_register_()) return false;
    for (const auto& a : m.register_().assignments()) {
      if (a.job_id() == job_id && a.ranks_size() == 1 && pred(a.ranks(0))) return true;
    }
    return false;
  };
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override { BecomeSubreaper(); }

  void StartWorker(const std::string& address) {
    SupervisorOptions so;
    so.work_dir = MakeTestDir("agent");
    so.base_env = {"PATH=/usr/bin:/bin"};
    supervisor_ = std::make_unique<Supervisor>(so, launcher_, &clock_, &outbox_);
    ASSERT_TRUE(supervisor_->Start().ok());
    AgentOptions ao;
    ao.coordinators = {address};
    ao.worker_id = "w-agent-test";
    ao.hostname = "host-1";
    ao.advertise_host = "10.1.2.3";
    ao.resources.set_slots(2);
    ao.resources.set_cpu_cores(4);
    ao.peer_probe_timeout = peer_probe_timeout_;
    ao.reserve_port = reserve_port_;
    ao.preflight.shm_dir = MakeTestDir("shm");
    ao.preflight.shm_bytes = 1 << 20;
    ao.backoff.initial = kBackoff;
    ao.backoff.max = kBackoff;
    ao.backoff.jitter = 0;
    agent_ = std::make_unique<Agent>(ao, supervisor_.get(), &outbox_, &clock_);
    ASSERT_TRUE(agent_->Start().ok());
  }

  // Once the session thread waits out the reconnect backoff, lets it pass.
  void PassBackoff() {
    ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kBackoff));
    clock_.Advance(kBackoff);
  }

  // The heartbeat the writer sends when the clock reaches `at` (it waits for it first).
  std::optional<WorkerMessage> HeartbeatAt(absl::Time at) {
    if (!clock_.AwaitTimerAt(at)) return std::nullopt;
    clock_.Advance(at - clock_.Now());
    return coordinator_->Next([at](const WorkerMessage& m) {
      return m.has_heartbeat() && FromProto(m.heartbeat().time()) == at;
    });
  }

  void TearDown() override {
    // Fake processes end only when told to.
    fake_launcher_.ReleaseLaunches();
    for (size_t i = 0; fake_launcher_.process(i) != nullptr; ++i) {
      baton::v1::ProcessExit killed;
      killed.set_exit_code(-1);
      killed.set_signal(SIGKILL);
      fake_launcher_.process(i)->Exit(killed);
    }
    if (supervisor_ != nullptr) supervisor_->Shutdown(absl::ZeroDuration());
    if (agent_ != nullptr) agent_->Stop();
  }

  // Declared before the worker so it outlives it.
  std::unique_ptr<FakeCoordinator> coordinator_ = std::make_unique<FakeCoordinator>();
  FakeClock clock_;
  PosixProcessLauncher posix_launcher_;
  FakeProcessLauncher fake_launcher_;
  ProcessLauncher* launcher_ = &posix_launcher_;  // Set before StartWorker().
  std::function<absl::StatusOr<int>()> reserve_port_ = ReserveTcpPort;
  Outbox outbox_{OutboxOptions(), &clock_};
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<Agent> agent_;
  absl::Duration peer_probe_timeout_ = absl::Seconds(5);
};

TEST_F(AgentTest, RegistersWithResourcesThenHeartbeatsAtTheCoordinatorsInterval) {
  coordinator_->set_heartbeat_interval(absl::Seconds(3));
  StartWorker(coordinator_->address());
  std::optional<WorkerMessage> reg = coordinator_->Next(WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->register_().worker_id(), "w-agent-test");
  EXPECT_EQ(reg->register_().hostname(), "host-1");
  EXPECT_EQ(reg->register_().advertise_host(), "10.1.2.3");
  EXPECT_EQ(reg->register_().protocol_version(), kProtocolVersion);
  EXPECT_EQ(reg->register_().resources().slots(), 2);
  EXPECT_EQ(reg->register_().resources().cpu_cores(), 4);
  EXPECT_EQ(reg->register_().assignments_size(), 0);
  // The first heartbeat goes out at once, then one every 3 s of the clock (the worker's own
  // interval is 1 s).
  const absl::Time start = clock_.Now();
  std::optional<WorkerMessage> first = coordinator_->Next(WorkerMessage::kHeartbeat);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(FromProto(first->heartbeat().time()), start);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(HeartbeatAt(start + i * absl::Seconds(3)).has_value()) << i;
  }
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kHeartbeat, absl::ZeroDuration()).has_value());
}

TEST_F(AgentTest, AnswersReservePort) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  CoordinatorMessage m;
  m.mutable_reserve_port()->set_job_id("j-port");
  m.mutable_reserve_port()->set_generation(3);
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->Send(m); }));
  std::optional<WorkerMessage> reply = coordinator_->Next(WorkerMessage::kPortReserved);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->port_reserved().job_id(), "j-port");
  EXPECT_EQ(reply->port_reserved().generation(), 3);
  EXPECT_GT(reply->port_reserved().port(), 0);
}

TEST_F(AgentTest, AnswersRunPreflightWithItsLinksAndHostChecks) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  absl::StatusOr<int> closed = ReserveTcpPort();  // nothing listens there
  ASSERT_TRUE(closed.ok());
  CoordinatorMessage m;
  baton::v1::RunPreflight* req = m.mutable_run_preflight();
  req->set_job_id("j-pre");
  req->set_generation(2);
  baton::v1::Peer* peer = req->add_send_to();
  peer->set_worker_id("w-gone");
  peer->set_host("127.0.0.1");
  peer->set_probe_port(*closed);
  *req->mutable_link_window() = ToProto(absl::Milliseconds(100));
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->Send(m); }));
  std::optional<WorkerMessage> reply = coordinator_->Next(WorkerMessage::kPreflightResult);
  ASSERT_TRUE(reply.has_value());
  const baton::v1::PreflightResult& r = reply->preflight_result();
  EXPECT_EQ(r.job_id(), "j-pre");
  EXPECT_EQ(r.generation(), 2);
  ASSERT_EQ(r.links_size(), 1);
  EXPECT_EQ(r.links(0).peer_worker_id(), "w-gone");
  EXPECT_THAT(r.links(0).error(), ::testing::HasSubstr("refused"));
  ASSERT_EQ(r.checks_size(), 1);  // no GPUs registered: shared memory only
  EXPECT_EQ(r.checks(0).name(), "shm");
  EXPECT_TRUE(r.checks(0).ok()) << r.checks(0).detail();
}

TEST_F(AgentTest, RunsAnAssignmentAndRelaysStartMetricsLogsAndExit) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_->Send(StartCommand(
        "j-run", "echo '{\"step\":3,\"loss\":0.5}' >&$BATON_METRICS_FD; echo hello; exit 4"));
  }));

  std::optional<WorkerMessage> started = coordinator_->Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->assignment_started().job_id(), "j-run");
  ASSERT_EQ(started->assignment_started().ranks_size(), 1);
  EXPECT_GT(started->assignment_started().ranks(0).pid(), 0);

  std::optional<WorkerMessage> exited = coordinator_->Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_id(), "j-run");
  EXPECT_EQ(exited->process_exited().generation(), 1);
  EXPECT_EQ(exited->process_exited().rank(), 0);
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 4);

  // Sent before the exit, so already recorded.
  std::optional<WorkerMessage> metrics =
      coordinator_->Next(WorkerMessage::kMetrics, absl::ZeroDuration());
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(metrics->metrics().job_id(), "j-run");
  ASSERT_EQ(metrics->metrics().points_size(), 1);
  EXPECT_EQ(metrics->metrics().points(0).step(), 3);
  EXPECT_EQ(metrics->metrics().points(0).values().at("loss"), 0.5);
  std::optional<WorkerMessage> logs =
      coordinator_->Next(WorkerMessage::kLogs, absl::ZeroDuration());
  ASSERT_TRUE(logs.has_value());
  EXPECT_EQ(logs->logs().job_id(), "j-run");
  ASSERT_EQ(logs->logs().lines_size(), 1);
  EXPECT_EQ(logs->logs().lines(0).text(), "hello");
  EXPECT_EQ(logs->logs().lines(0).seq(), 0);

  // Reported exits are forgotten.
  EXPECT_TRUE(WaitUntil([&] { return supervisor_->assignment_count() == 0; }));
}

TEST_F(AgentTest, ReconnectsAfterTheStreamBreaksAndListsTheRunningAssignment) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(
      WaitUntil([&] { return coordinator_->Send(StartCommand("j-long", "exec sleep 1000")); }));
  std::optional<WorkerMessage> started = coordinator_->Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const int pid = started->assignment_started().ranks(0).pid();

  coordinator_->BreakStream();
  // The worker reconnects once the backoff passed on the clock, not before.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kBackoff));
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kRegister, absl::ZeroDuration()).has_value());
  clock_.Advance(kBackoff);
  std::optional<WorkerMessage> reg =
      coordinator_->Next(RegisterListing("j-long", [&](const baton::v1::RankInfo& r) {
        return r.pid() == pid && !r.has_exit() && r.worker_id() == "w-agent-test";
      }));
  ASSERT_TRUE(reg.has_value());
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->registrations() == 2; }));

  ASSERT_TRUE(WaitUntil([&] { return coordinator_->Send(StopCommand("j-long")); }));
  std::optional<WorkerMessage> exited = coordinator_->Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
  EXPECT_TRUE(ProcessGone(pid));
}

TEST_F(AgentTest, ExitsWhileDisconnectedAreDeliveredByTheNextRegister) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(
      WaitUntil([&] { return coordinator_->Send(StartCommand("j-lost", "exec sleep 1000")); }));
  std::optional<WorkerMessage> started = coordinator_->Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const int pid = started->assignment_started().ranks(0).pid();

  coordinator_->set_accept_registrations(false);
  coordinator_->BreakStream();
  PassBackoff();
  // A new Register means the old stream is gone: nothing can be reported until one is
  // accepted.
  ASSERT_TRUE(coordinator_
                  ->Next(RegisterListing("j-lost",
                                         [&](const baton::v1::RankInfo& r) {
                                           return r.pid() == pid && !r.has_exit();
                                         }))
                  .has_value());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(
      WaitUntil([&] { return supervisor_->GetRankState("j-lost", 1, 0) == RankState::kExited; }));
  auto killed = [](const baton::v1::RankInfo& r) {
    return r.has_exit() && r.exit().exit_code() == -1 && r.exit().signal() == SIGKILL;
  };
  // Rejected Registers carry the exit; the worker keeps it until a Register is accepted.
  PassBackoff();
  ASSERT_TRUE(coordinator_->Next(RegisterListing("j-lost", killed)).has_value());
  EXPECT_EQ(supervisor_->assignment_count(), 1u);
  EXPECT_EQ(coordinator_->registrations(), 1);

  coordinator_->set_accept_registrations(true);
  PassBackoff();
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->registrations() == 2; }));
  EXPECT_TRUE(WaitUntil([&] { return supervisor_->assignment_count() == 0; }));
  // Delivered by the Register, not by a ProcessExited.
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kProcessExited, absl::ZeroDuration()).has_value());
}

TEST_F(AgentTest, RequestCheckpointSignalsTheRankAndItsExitIsReported) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  // Like baton-trainer: SIGUSR1 means "checkpoint and exit 75". Ready once the trap is set.
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_->Send(StartCommand(
        "j-ckpt", "trap 'exit 75' USR1; echo ready; while :; do sleep 0.05; done"));
  }));
  std::optional<WorkerMessage> started = coordinator_->Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  // "ready" waits in the outbox until its batch is due, flush_interval later on the clock.
  const absl::Duration flush = OutboxOptions().flush_interval;
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + flush));
  clock_.Advance(flush);
  ASSERT_TRUE(coordinator_
                  ->Next([](const WorkerMessage& m) {
                    return m.has_logs() && m.logs().lines_size() > 0 &&
                           m.logs().lines(0).text() == "ready";
                  })
                  .has_value());
  CoordinatorMessage request;
  request.mutable_request_checkpoint()->set_job_id("j-ckpt");
  request.mutable_request_checkpoint()->set_generation(1);
  request.mutable_request_checkpoint()->set_rank(0);
  ASSERT_TRUE(coordinator_->Send(request));
  std::optional<WorkerMessage> exited = coordinator_->Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 75);
  EXPECT_EQ(exited->process_exited().exit().signal(), 0);
}

TEST_F(AgentTest, ProfileRanksIsAnsweredWithAProfileTracePerRank) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_->Send(StartCommand("j-cmd", "while :; do sleep 0.05; done")); }));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  CoordinatorMessage request;
  baton::v1::ProfileRanks* p = request.mutable_profile_ranks();
  p->set_job_id("j-cmd");
  p->set_generation(1);
  p->set_request_id("p1-1");
  p->add_ranks(0);
  p->add_ranks(7);
  p->set_steps(2);
  ASSERT_TRUE(coordinator_->Send(request));
  // Neither rank can be asked (a command job; no rank 7 here): both answered at once.
  for (int rank : {0, 7}) {
    std::optional<WorkerMessage> answer = coordinator_->Next([rank](const WorkerMessage& m) {
      return m.has_profile_trace() && m.profile_trace().rank() == rank;
    });
    ASSERT_TRUE(answer.has_value()) << "rank " << rank;
    EXPECT_EQ(answer->profile_trace().request_id(), "p1-1");
    EXPECT_EQ(answer->profile_trace().job_id(), "j-cmd");
    EXPECT_THAT(
        answer->profile_trace().error(),
        ::testing::HasSubstr(rank == 0 ? "profiling needs the built-in trainer" : "no rank 7"));
  }
}

TEST_F(AgentTest, DrainTellsTheCoordinatorAndEveryLaterRegisterSaysDraining) {
  StartWorker(coordinator_->address());
  std::optional<WorkerMessage> first = coordinator_->Next(WorkerMessage::kRegister);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(first->register_().draining());
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->registrations() == 1; }));
  agent_->Drain("received SIGTERM");
  std::optional<WorkerMessage> draining = coordinator_->Next(WorkerMessage::kDraining);
  ASSERT_TRUE(draining.has_value());
  EXPECT_EQ(draining->draining().reason(), "received SIGTERM");
  agent_->Drain("again");  // idempotent: nothing more is sent
  coordinator_->BreakStream();
  PassBackoff();
  std::optional<WorkerMessage> again = coordinator_->Next(WorkerMessage::kRegister);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->register_().draining());
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kDraining, absl::ZeroDuration()).has_value());
}

TEST_F(AgentTest, ConnectsOnceTheCoordinatorComesUp) {
  const absl::StatusOr<int> port = ReserveTcpPort();
  ASSERT_TRUE(port.ok());
  coordinator_.reset();
  StartWorker(absl::StrCat("127.0.0.1:", *port));  // Nothing listens there yet.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + kBackoff));  // The first attempt failed.
  coordinator_ = std::make_unique<FakeCoordinator>(*port);
  clock_.Advance(kBackoff);
  std::optional<WorkerMessage> reg = coordinator_->Next(WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->register_().worker_id(), "w-agent-test");
}

TEST_F(AgentTest, AConnectionLeftWithoutRegisteredIsAbandonedAfterTheRegisterTimeout) {
  coordinator_->set_answer_registrations(false);
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  const absl::Time deadline = clock_.Now() + AgentOptions().register_timeout;
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));
  coordinator_->set_answer_registrations(true);
  clock_.Advance(deadline - clock_.Now() - absl::Nanoseconds(1));
  EXPECT_EQ(coordinator_->registrations(), 0);
  clock_.Advance(absl::Nanoseconds(1));  // Gives up on the connection, then backs off.
  PassBackoff();
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kRegister).has_value());
  EXPECT_TRUE(WaitUntil([&] { return coordinator_->registrations() == 1; }));
}

}  // namespace
}  // namespace baton::worker

namespace baton::worker {
namespace {

// A command assignment of `job_id` whose rank runs `script`, listing `peers`.
CoordinatorMessage StartWithPeers(const std::string& job_id, const std::string& script,
                                  const std::vector<baton::v1::Peer>& peers) {
  CoordinatorMessage m = StartCommand(job_id, script);
  for (const baton::v1::Peer& p : peers) *m.mutable_start_assignment()->add_peers() = p;
  return m;
}

FakeCoordinator::Predicate ExitOf(const std::string& job_id) {
  return [job_id](const WorkerMessage& m) {
    return m.has_process_exited() && m.process_exited().job_id() == job_id;
  };
}

FakeCoordinator::Predicate FailureOf(const std::string& job_id) {
  return [job_id](const WorkerMessage& m) {
    return m.has_assignment_failed() && m.assignment_failed().job_id() == job_id;
  };
}

TEST_F(AgentTest, HeartbeatsAreNumberedForTheirAcknowledgement) {
  StartWorker(coordinator_->address());
  std::optional<WorkerMessage> a = coordinator_->Next(WorkerMessage::kHeartbeat);
  ASSERT_TRUE(a.has_value());
  std::optional<WorkerMessage> b = HeartbeatAt(clock_.Now() + AgentOptions().heartbeat_interval);
  ASSERT_TRUE(b.has_value());
  EXPECT_GT(a->heartbeat().seq(), 0u);
  EXPECT_GT(b->heartbeat().seq(), a->heartbeat().seq());
}

// The coordinator goes silent (its acknowledgements stop; the stream stays up): once the
// lease runs out the worker kills its processes and reports them killed, and starts no new
// ones until the coordinator acknowledges it again.
TEST_F(AgentTest, ProcessesAreKilledWhenTheLeaseRunsOutAndNothingStartsWithoutOne) {
  coordinator_->set_lease(absl::Seconds(10));
  StartWorker(coordinator_->address());
  const absl::Time start = clock_.Now();  // Register and the first heartbeat were sent at it.
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-lease", "exec sleep 600")));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  coordinator_->set_ack_heartbeats(false);
  ASSERT_EQ(supervisor_->lease_expirations(), 0);
  clock_.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  EXPECT_EQ(supervisor_->lease_expirations(), 0);
  EXPECT_EQ(supervisor_->GetRankState("j-lease", 1, 0), RankState::kRunning);
  clock_.Advance(absl::Nanoseconds(1));  // start + lease: killed before Advance() returns.
  EXPECT_EQ(supervisor_->lease_expirations(), 1);
  EXPECT_EQ(agent_->lease().expiry(), start + absl::Seconds(10));
  std::optional<WorkerMessage> exited = coordinator_->Next(ExitOf("j-lease"));
  ASSERT_TRUE(exited.has_value()) << "the rank outlived the lease";
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGKILL);

  ASSERT_TRUE(coordinator_->Send(StartCommand("j-refused", "exit 0")));
  std::optional<WorkerMessage> refused = coordinator_->Next(FailureOf("j-refused"));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->assignment_failed().reason(), "LeaseExpired");
  EXPECT_EQ(refused->assignment_failed().generation(), 1);

  // Renewed by the next acknowledged heartbeat: one sent after the acknowledgements resume.
  // Its HeartbeatAck precedes, on the stream, anything sent after it was recorded.
  coordinator_->set_ack_heartbeats(true);
  const absl::Time resumed = clock_.Now();
  clock_.Advance(AgentOptions().heartbeat_interval);
  ASSERT_TRUE(coordinator_
                  ->Next([resumed](const WorkerMessage& m) {
                    return m.has_heartbeat() && FromProto(m.heartbeat().time()) > resumed;
                  })
                  .has_value());
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-ok", "exit 0")));
  std::optional<WorkerMessage> done = coordinator_->Next(ExitOf("j-ok"));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->process_exited().exit().exit_code(), 0);
}

TEST_F(AgentTest, AcknowledgedHeartbeatsKeepProcessesRunningPastTheLease) {
  coordinator_->set_lease(absl::Seconds(10));
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-long", "exec sleep 600")));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  // Three leases long, one heartbeat at a time, each acknowledged before the next.
  for (int i = 0; i < 30; ++i) {
    const absl::Time at = clock_.Now() + AgentOptions().heartbeat_interval;
    ASSERT_TRUE(HeartbeatAt(at).has_value()) << i;
    ASSERT_TRUE(WaitUntil([&] { return agent_->lease().expiry() == at + absl::Seconds(10); }))
        << i;
  }
  EXPECT_EQ(supervisor_->lease_expirations(), 0);
  EXPECT_EQ(supervisor_->GetRankState("j-long", 1, 0), RankState::kRunning);
}

TEST_F(AgentTest, UnreachablePeerRefusesTheAssignmentNamingItAndStartsNothing) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  absl::StatusOr<std::unique_ptr<ProbeListener>> reachable = ProbeListener::Start(0);
  ASSERT_TRUE(reachable.ok());
  absl::StatusOr<int> closed = ReserveTcpPort();
  ASSERT_TRUE(closed.ok());
  baton::v1::Peer good, bad;
  good.set_worker_id("w-good");
  good.set_host("127.0.0.1");
  good.set_probe_port((*reachable)->port());
  bad.set_worker_id("w-bad");
  bad.set_host("127.0.0.1");
  bad.set_probe_port(*closed);
  ASSERT_TRUE(coordinator_->Send(StartWithPeers("j-cut", "exit 0", {good, bad})));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-cut"));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->assignment_failed().reason(), "PeerUnreachable");
  EXPECT_THAT(failed->assignment_failed().message(),
              ::testing::HasSubstr(absl::StrCat("worker w-bad at 127.0.0.1:", *closed)));
  EXPECT_THAT(failed->assignment_failed().message(),
              ::testing::Not(::testing::HasSubstr("w-good")));
  EXPECT_TRUE(WaitUntil([&] { return supervisor_->assignment_count() == 0; }));
  // With every peer reachable it starts.
  ASSERT_TRUE(coordinator_->Send(StartWithPeers("j-ok", "exit 0", {good})));
  ASSERT_TRUE(coordinator_->Next(ExitOf("j-ok")).has_value());
}

// A peer that never answers is given at most half the lease, and the running processes keep
// theirs meanwhile.
TEST_F(AgentTest, AProbeOfACutOffPeerDoesNotOutlastHalfTheLease) {
  coordinator_->set_heartbeat_interval(absl::Seconds(3));
  coordinator_->set_lease(absl::Seconds(4));
  peer_probe_timeout_ = absl::Seconds(60);
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-running", "exec sleep 600")));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  testing::BlackHole hole;
  baton::v1::Peer silent;
  silent.set_worker_id("w-silent");
  silent.set_host("127.0.0.1");
  silent.set_probe_port(hole.port());
  ASSERT_TRUE(coordinator_->Send(StartWithPeers("j-cut", "exit 0", {silent})));
  // The starter thread probes for half the lease: 2 s of the clock, not 60.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Seconds(2)));
  clock_.Advance(absl::Seconds(2));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-cut"));
  ASSERT_TRUE(failed.has_value());
  EXPECT_THAT(failed->assignment_failed().message(), ::testing::HasSubstr("no answer within 2s"));
  EXPECT_EQ(supervisor_->lease_expirations(), 0);
  EXPECT_EQ(supervisor_->GetRankState("j-running", 1, 0), RankState::kRunning);
}

// What the writer sent last before Stop() reaches the coordinator: the stream is half-closed
// and ends when the coordinator read everything, rather than cancelled under the last Writes.
TEST_F(AgentTest, StopDeliversTheLastReports) {
  constexpr int kRanks = 8;
  CoordinatorMessage start = StartCommand("j-last", "exec sleep 600");
  start.mutable_start_assignment()->set_world_size(kRanks);
  for (int r = 1; r < kRanks; ++r) {
    *start.mutable_start_assignment()->add_ranks() = start.start_assignment().ranks(0);
    start.mutable_start_assignment()->mutable_ranks(r)->set_rank(r);
  }
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  ASSERT_TRUE(coordinator_->Send(start));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  supervisor_->Shutdown(absl::ZeroDuration());  // As baton-worker stops: processes first.
  agent_->Stop();
  for (int r = 0; r < kRanks; ++r) {
    std::optional<WorkerMessage> exited =
        coordinator_->Next(ExitOf("j-last"), absl::ZeroDuration());
    ASSERT_TRUE(exited.has_value()) << r;
    EXPECT_EQ(exited->process_exited().exit().signal(), SIGKILL);
  }
}

// ---------------------------------------------------------------------------------------
// Failures are reported at once, and spawning never blocks the stream's read thread.
// ---------------------------------------------------------------------------------------

TEST_F(AgentTest, AReservePortThatFailsIsAnsweredWithAssignmentFailed) {
  reserve_port_ = [] { return absl::InternalError("socket: Too many open files"); };
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  CoordinatorMessage m;
  m.mutable_reserve_port()->set_job_id("j-port");
  m.mutable_reserve_port()->set_generation(3);
  ASSERT_TRUE(coordinator_->Send(m));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-port"));
  ASSERT_TRUE(failed.has_value()) << "a failed ReservePort must be reported";
  EXPECT_EQ(failed->assignment_failed().generation(), 3);
  EXPECT_EQ(failed->assignment_failed().reason(), "PortUnavailable");
  EXPECT_THAT(failed->assignment_failed().message(),
              ::testing::HasSubstr("socket: Too many open files"));
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kPortReserved, absl::ZeroDuration()).has_value());
}

TEST_F(AgentTest, ARankThatCannotBeSpawnedFailsTheAssignmentAtOnce) {
  launcher_ = &fake_launcher_;
  fake_launcher_.FailNextLaunch(
      absl::ResourceExhaustedError("fork: Resource temporarily unavailable"));
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-fork", "exit 0")));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-fork"));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->assignment_failed().reason(), "LaunchFailed");
  EXPECT_EQ(failed->assignment_failed().message(),
            "rank 0: fork: Resource temporarily unavailable");
  // Instead of, not besides, a start and an exit.
  EXPECT_TRUE(WaitUntil([&] { return supervisor_->assignment_count() == 0; }));
  EXPECT_FALSE(
      coordinator_->Next(WorkerMessage::kAssignmentStarted, absl::ZeroDuration()).has_value());
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kProcessExited, absl::ZeroDuration()).has_value());
}

TEST_F(AgentTest, AProgramThatCannotBeExecutedFailsTheAssignmentNamingTheError) {
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  CoordinatorMessage start = StartCommand("j-exec", "");
  baton::v1::CommandSpec* command =
      start.mutable_start_assignment()->mutable_spec()->mutable_command();
  command->clear_argv();
  command->add_argv("/nonexistent/baton-no-such-program");
  ASSERT_TRUE(coordinator_->Send(start));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-exec"));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->assignment_failed().reason(), "LaunchFailed");
  EXPECT_THAT(failed->assignment_failed().message(),
              ::testing::AllOf(::testing::HasSubstr("/nonexistent/baton-no-such-program"),
                               ::testing::HasSubstr("No such file or directory")));
  EXPECT_FALSE(coordinator_->Next(WorkerMessage::kProcessExited, absl::ZeroDuration()).has_value());
}

// A launch that blocks (a slow spawn, a standby handoff) holds up neither the stream nor a
// stop: stops sent meanwhile take effect at once, and the late launch of a stopped
// assignment is stopped as soon as its spawn ends.
TEST_F(AgentTest, AStopIsHandledWhileALaunchBlocksAndTheLateLaunchIsStopped) {
  launcher_ = &fake_launcher_;
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-running", "x")));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  std::shared_ptr<FakeProcess> running = fake_launcher_.process(0);

  fake_launcher_.BlockLaunches();
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-slow", "x")));
  ASSERT_TRUE(fake_launcher_.AwaitBlockedLaunch());
  // Commands are handled in order: once the second stop took effect, so did the first.
  ASSERT_TRUE(coordinator_->Send(StopCommand("j-slow")));
  ASSERT_TRUE(coordinator_->Send(StopCommand("j-running")));
  EXPECT_TRUE(WaitUntil([&] { return running->signals() == std::vector<int>{SIGTERM}; }))
      << "the stop waited behind the launch";
  EXPECT_EQ(supervisor_->GetRankState("j-slow", 1, 0), RankState::kStarting);

  fake_launcher_.ReleaseLaunches();
  ASSERT_TRUE(WaitUntil([&] { return fake_launcher_.process(1) != nullptr; }));
  std::shared_ptr<FakeProcess> slow = fake_launcher_.process(1);
  EXPECT_TRUE(WaitUntil([&] { return slow->signals() == std::vector<int>{SIGTERM}; }))
      << "the stopped assignment's process was left running";
  baton::v1::ProcessExit terminated;
  terminated.set_exit_code(-1);
  terminated.set_signal(SIGTERM);
  slow->Exit(terminated);
  std::optional<WorkerMessage> exited = coordinator_->Next(ExitOf("j-slow"));
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
}

// The same for the peer probe, which may take half the lease: a stop during it is handled
// at once (the assignment fails "StopRequested" with the clock still short of the probe's
// timeout), and when the probe ends nothing is spawned.
TEST_F(AgentTest, AStopDuringThePeerProbeIsHandledAtOnceAndTheAssignmentNeverStarts) {
  launcher_ = &fake_launcher_;
  StartWorker(coordinator_->address());
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kHeartbeat).has_value());  // registered
  testing::BlackHole hole;
  baton::v1::Peer silent;
  silent.set_worker_id("w-silent");
  silent.set_host("127.0.0.1");
  silent.set_probe_port(hole.port());
  ASSERT_TRUE(coordinator_->Send(StartWithPeers("j-probe", "x", {silent})));
  const absl::Time probe_deadline = clock_.Now() + peer_probe_timeout_;
  ASSERT_TRUE(clock_.AwaitTimerAt(probe_deadline));  // The probe waits on the clock.
  ASSERT_TRUE(coordinator_->Send(StopCommand("j-probe")));
  std::optional<WorkerMessage> failed = coordinator_->Next(FailureOf("j-probe"));
  ASSERT_TRUE(failed.has_value()) << "the stop waited behind the probe";
  EXPECT_EQ(failed->assignment_failed().reason(), "StopRequested");
  EXPECT_LT(clock_.Now(), probe_deadline);

  clock_.Advance(probe_deadline - clock_.Now());
  // Launches run in order: once the next one started, the probe's launch is over.
  ASSERT_TRUE(coordinator_->Send(StartCommand("j-after", "x")));
  ASSERT_TRUE(coordinator_->Next(WorkerMessage::kAssignmentStarted).has_value());
  ASSERT_EQ(fake_launcher_.requests().size(), 1u);  // j-after's only
  EXPECT_NE(fake_launcher_.requests()[0].working_dir.find("/jobs/j-after/"), std::string::npos);
  EXPECT_FALSE(coordinator_->Next(FailureOf("j-probe"), absl::ZeroDuration()).has_value());
}

}  // namespace
}  // namespace baton::worker
