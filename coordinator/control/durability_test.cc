// Durable, then act: a scenario that makes every JobService call that writes (SubmitJob,
// with and without request_id, and CancelJob) and sends every worker message type is run
// once per store commit it makes, with that commit failing. After each injected failure:
//   - the coordinator halted (the halt handler ran once, entry points answer UNAVAILABLE);
//   - memory equals what a restart reloads from the file;
//   - no message reached a worker after the failed commit.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/store.h"
#include "coordinator/store/testing/faulty_store.h"
#include "coordinator/testing/fake_channel.h"
#include "coordinator/testing/job_snapshot.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::google::protobuf::util::MessageDifferencer;

// One coordinator over a FaultyStore on a file, with workers w1..w3 on fake channels.
class Harness {
 public:
  explicit Harness(const std::string& path) : path_(path) {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(path);
    EXPECT_OK(base);
    store_ = std::make_unique<FaultyStore>(std::move(*base));
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    EXPECT_OK(jobs_->Load());
    workers_ = std::make_unique<WorkerRegistry>(&clock_);
    coordinator_ =
        std::make_unique<Coordinator>(jobs_.get(), workers_.get(), &clock_, CoordinatorOptions());
    coordinator_->SetHaltHandler([this](const absl::Status&) { ++halts_; });
  }

  // Fails the n-th commit from now, noting how many messages workers had got by then.
  void FailCommit(int64_t n) {
    store_->FailWrite(n, /*sticky=*/false, [this] { sent_at_failure_ = Sent(); });
  }

  // The scenario. Steps after a halt are no-ops for the coordinator; nothing is asserted
  // here about the path taken, since the failure changes it.
  void Run() {
    for (const std::string w : {"w1", "w2", "w3"}) Connect(w);
    // SubmitJob: a 2-worker job is scheduled at once (RENDEZVOUS).
    const std::string a = Submit(Spec("a", 2), "");
    // PortReserved, AssignmentStarted -> RUNNING.
    const std::string w_a0 = RankWorker(a, 0), w_a1 = RankWorker(a, 1);
    Message(w_a0, [&](auto& m) {
      m.mutable_port_reserved()->set_job_id(a);
      m.mutable_port_reserved()->set_generation(1);
      m.mutable_port_reserved()->set_port(29500);
    });
    for (const std::string& w : {w_a0, w_a1}) Started(w, a, 1);
    // Heartbeat, Metrics (first step), Logs.
    Message(w_a0, [](auto& m) { m.mutable_heartbeat()->set_seq(1); });
    Message(w_a0, [&](auto& m) {
      m.mutable_metrics()->set_job_id(a);
      auto* p = m.mutable_metrics()->add_points();
      p->set_generation(1);
      p->set_rank(0);
      p->set_step(1);
      (*p->mutable_values())["loss"] = 2.0;
    });
    Message(w_a0, [&](auto& m) {
      m.mutable_logs()->set_job_id(a);
      m.mutable_logs()->add_lines()->set_text("hello");
    });
    // SubmitJob with a request_id, retried; CancelJob of it.
    const std::string b = Submit(Spec("b", 1), "req-b");
    Submit(Spec("b", 1), "req-b");
    coordinator_->CancelJob(b, "test").IgnoreError();
    // ProcessExited (a failure): RESTARTING, then the other rank's exit, then the restart.
    Exited(w_a1, a, 1, 1, 3);
    Exited(w_a0, a, 1, 0, 0, 15);
    clock_.Advance(absl::Seconds(5));
    coordinator_->ReconcileOnce();
    // AssignmentFailed for generation 2 (if it started).
    Message(RankWorker(a, 0), [&](auto& m) {
      m.mutable_assignment_failed()->set_job_id(a);
      m.mutable_assignment_failed()->set_generation(2);
      m.mutable_assignment_failed()->set_reason("PortUnavailable");
      m.mutable_assignment_failed()->set_message("no free port");
    });
    // Draining of a worker holding a job; a disconnect; a lease that expires.
    const std::string c = Submit(Spec("c", 1), "");
    Message(RankWorker(c, 0), [](auto& m) { m.mutable_draining()->set_reason("maintenance"); });
    coordinator_->OnWorkerDisconnected("w3", sessions_["w3"]);
    clock_.Advance(absl::Seconds(30));
    coordinator_->ReconcileOnce();
    // A worker re-registers listing a stale assignment.
    baton::v1::Register reg = Reg("w1");
    auto* listed = reg.add_assignments();
    listed->set_job_id(a);
    listed->set_generation(1);
    Connect(reg);
  }

  // Messages every worker got so far.
  int64_t Sent() const {
    int64_t n = 0;
    for (const auto& ch : channels_) n += static_cast<int64_t>(ch->sent.size());
    return n;
  }

  FaultyStore& store() { return *store_; }
  JobManager& jobs() { return *jobs_; }
  Coordinator& coordinator() { return *coordinator_; }
  int halts() const { return halts_; }
  int64_t sent_at_failure() const { return sent_at_failure_; }

 private:
  static baton::v1::JobSpec Spec(const std::string& name, int workers) {
    baton::v1::JobSpec spec;
    spec.set_name(name);
    spec.mutable_command()->add_argv("/bin/true");
    spec.mutable_workers()->set_min(workers);
    return spec;
  }
  static baton::v1::Register Reg(const std::string& id) {
    baton::v1::Register reg;
    reg.set_worker_id(id);
    reg.mutable_resources()->set_slots(1);
    reg.set_protocol_version(kProtocolVersion);
    return reg;
  }
  void Connect(const std::string& id) { Connect(Reg(id)); }
  void Connect(const baton::v1::Register& reg) {
    auto ch = std::make_shared<FakeChannel>();
    channels_.push_back(ch);
    absl::StatusOr<uint64_t> session = coordinator_->OnWorkerConnected(reg, "198.18.0.1", ch);
    coordinator_->FlushStaged();
    if (!session.ok()) return;
    sessions_[reg.worker_id()] = *session;
  }
  std::string Submit(const baton::v1::JobSpec& spec, const std::string& request_id) {
    absl::StatusOr<baton::v1::Job> job = coordinator_->SubmitJob(spec, request_id);
    return job.ok() ? job->id() : "";
  }
  // The worker of `rank` of the job's current generation ("" if none).
  std::string RankWorker(const std::string& job_id, int rank) {
    const baton::v1::Job* job = jobs_->Peek(job_id);
    if (job == nullptr || job->ranks_size() <= rank) return "";
    return job->ranks(rank).worker_id();
  }
  template <typename Fill>
  void Message(const std::string& worker, Fill fill) {
    if (worker.empty()) return;
    baton::v1::WorkerMessage m;
    fill(m);
    coordinator_->OnWorkerMessage(worker, sessions_[worker], m);
    coordinator_->FlushStaged();  // as the daemon's event loop does when it runs dry
  }
  void Started(const std::string& worker, const std::string& job_id, int64_t generation) {
    const baton::v1::Job* job = jobs_->Peek(job_id);
    if (job == nullptr) return;
    Message(worker, [&](auto& m) {
      auto* s = m.mutable_assignment_started();
      s->set_job_id(job_id);
      s->set_generation(generation);
      for (baton::v1::RankInfo r : job->ranks()) {
        if (r.worker_id() != worker) continue;
        r.set_pid(1000 + r.rank());
        *s->add_ranks() = r;
      }
    });
  }
  void Exited(const std::string& worker, const std::string& job_id, int64_t generation, int rank,
              int code, int signal = 0) {
    Message(worker, [&](auto& m) {
      auto* e = m.mutable_process_exited();
      e->set_job_id(job_id);
      e->set_generation(generation);
      e->set_rank(rank);
      e->mutable_exit()->set_exit_code(code);
      e->mutable_exit()->set_signal(signal);
      *e->mutable_exit()->mutable_time() = ToProto(clock_.Now());
    });
  }

  const std::string path_;
  FakeClock clock_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<std::shared_ptr<FakeChannel>> channels_;  // every session's, in order
  std::map<std::string, uint64_t> sessions_;
  int halts_ = 0;
  int64_t sent_at_failure_ = -1;
};

// Every job JobManager holds in memory, by id, as stored (no events: those live in the
// store only).
TEST(DurabilityTest, AFailedCommitChangesNothingAndStopsEverything) {
  const std::string dir = std::string(getenv("TEST_TMPDIR"));
  // A clean run counts the commits the scenario makes.
  int64_t commits = 0;
  {
    Harness clean(dir + "/clean.db");
    clean.Run();
    ASSERT_OK(clean.coordinator().halted());
    commits = clean.store().writes();
    // The clean run took the paths the scenario is about.
    const baton::v1::Job& a = *clean.jobs().Peek("j-000001");
    ASSERT_EQ(a.restarts().failures_size(), 2) << a.DebugString();
    EXPECT_EQ(a.restarts().failures(0).reason(), "RankFailed");
    EXPECT_EQ(a.restarts().failures(1).reason(), "PortUnavailable");
    const baton::v1::Job& c = *clean.jobs().Peek("j-000003");
    ASSERT_GE(c.restarts().failures_size(), 1) << c.DebugString();
    EXPECT_EQ(c.restarts().failures(0).reason(), "Draining");
    EXPECT_EQ(clean.jobs().Peek("j-000002")->state(), baton::v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(clean.jobs().List({}, 0).size(), 3u);  // the retried submit created nothing
  }
  ASSERT_GE(commits, 18) << "the scenario should exercise many commits";

  for (int64_t n = 1; n <= commits; ++n) {
    SCOPED_TRACE(absl::StrCat("commit ", n, " of ", commits, " fails"));
    const std::string path = absl::StrCat(dir, "/fail-", n, ".db");
    Harness h(path);
    h.FailCommit(n);
    h.Run();
    ASSERT_TRUE(h.store().failed());
    EXPECT_EQ(h.halts(), 1);
    EXPECT_EQ(h.coordinator().halted().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(h.Sent(), h.sent_at_failure()) << "a message was sent after the failed commit";
    EXPECT_THAT(h.coordinator().SubmitJob(baton::v1::JobSpec()),
                StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr("store failed")));

    // What a restarted coordinator would load.
    absl::StatusOr<std::unique_ptr<Store>> disk = Store::Open(path);
    ASSERT_OK(disk);
    FakeClock clock;
    JobManager reloaded(disk->get(), &clock);
    ASSERT_OK(reloaded.Load());
    const std::map<std::string, baton::v1::Job> memory = SnapshotJobs(h.jobs());
    const std::map<std::string, baton::v1::Job> stored = SnapshotJobs(reloaded);
    ASSERT_EQ(memory.size(), stored.size());
    for (const auto& [id, job] : memory) {
      ASSERT_EQ(stored.count(id), 1u) << id;
      std::string diff;
      MessageDifferencer differ;
      differ.ReportDifferencesToString(&diff);
      EXPECT_TRUE(differ.Compare(stored.at(id), job)) << id << ": memory differs from disk:\n"
                                                      << diff;
    }
  }
}

}  // namespace
}  // namespace baton::coordinator
