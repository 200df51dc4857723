// Fuzz target: the Coordinator driven by arbitrary sequences of worker messages from three
// fake workers, as the WorkerService would deliver them, interleaved with submits,
// cancels, stream ends, clock advances with reconciles, and coordinator restarts over the
// same SQLite file (in a scratch directory). The input is a program: each step is an
// opcode byte and its operands (ByteReader below); messages name real job ids and
// generations (the current one or a neighbour) so that they reach deep states, and one
// opcode sends a WorkerMessage decoded from raw bytes.
// Invariants after every step: no crash, no halt (the store never fails here), every job
// in a legal state and every transition it recorded legal, no worker with more slots used
// than it has; at the end, memory equals what a restart reloads from the file.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/protocol_version.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/jobs/job_state.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/fake_channel.h"
#include "coordinator/testing/job_snapshot.h"
#include "tools/fuzz/fuzz_check.h"
#include "tools/fuzz/scratch_file.h"

namespace baton::coordinator {
namespace {

using baton::v1::CoordinatorMessage;
using baton::v1::WorkerMessage;

constexpr int kWorkers = 3;
constexpr int kMaxSteps = 200;

// Reads the fuzz input front to back; past its end every read is 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t Byte() { return done() ? 0 : data_[at_++]; }
  // In [0, n), n > 0.
  int Below(int n) { return Byte() % n; }
  // Up to `max` bytes, the count read first.
  std::string Bytes(size_t max) {
    std::string out(std::min<size_t>(Byte(), max), '\0');
    for (char& c : out) c = static_cast<char>(Byte());
    return out;
  }

 private:
  const uint8_t* const data_;
  const size_t size_;
  size_t at_ = 0;
};

struct FakeWorker {
  std::string id;
  int slots = 1;
  std::shared_ptr<FakeChannel> channel;
  uint64_t session = 0;
};

class Harness {
 public:
  explicit Harness(std::string path) : path_(std::move(path)) {
    for (int i = 0; i < kWorkers; ++i) {
      workers_[i].id = absl::StrCat("w", i + 1);
      workers_[i].slots = 1 + i % 2;
    }
    Open();
  }

  // One step of the program; false once the input is spent.
  bool Step(ByteReader& in);
  void CheckInvariants() const;
  // Memory equals a JobManager loaded from the same file.
  void CheckReload() const;

 private:
  void Open();
  void Connect(FakeWorker& worker, ByteReader& in);
  void Submit(ByteReader& in);
  // A message about a job the worker may run, with the job id and generation filled in.
  WorkerMessage JobMessage(const FakeWorker& worker, ByteReader& in);
  void FillJobMessage(WorkerMessage& msg, const FakeWorker& worker, ByteReader& in);
  // The job id and generation a message names: a known job (or an unknown id) and its
  // current generation or a neighbour.
  std::pair<std::string, int64_t> PickJob(ByteReader& in) const;
  // The latest StartAssignment `worker` got for `job_id`, if any.
  const CoordinatorMessage* LatestStart(const FakeWorker& worker, const std::string& job_id) const;

  const std::string path_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Coordinator> coordinator_;
  FakeWorker workers_[kWorkers];
  // ProfileJob calls accepted and answered (across restarts: a restart drops the rest).
  int profile_requests_ = 0;
  int profile_answers_ = 0;
};

void Harness::Open() {
  coordinator_.reset();
  registry_.reset();
  jobs_.reset();
  store_.reset();
  auto store = Store::Open(path_);
  FUZZ_CHECK(store.ok());
  store_ = std::move(*store);
  jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
  FUZZ_CHECK(jobs_->Load().ok());
  registry_ = std::make_unique<WorkerRegistry>(&clock_);
  coordinator_ = std::make_unique<Coordinator>(jobs_.get(), registry_.get(), &clock_,
                                               CoordinatorOptions());
  FUZZ_CHECK(coordinator_->Recover().ok());
  for (FakeWorker& worker : workers_) worker.channel.reset();
}

std::pair<std::string, int64_t> Harness::PickJob(ByteReader& in) const {
  const std::vector<baton::v1::Job> jobs = jobs_->List({}, 0);
  const int pick = in.Below(static_cast<int>(jobs.size()) + 1);
  const int64_t delta = in.Below(4) - 1;  // -1, 0, +1 or +2.
  if (pick == static_cast<int>(jobs.size())) return {"j-999999", 1 + delta};
  return {jobs[pick].id(), jobs[pick].generation() + delta};
}

const CoordinatorMessage* Harness::LatestStart(const FakeWorker& worker,
                                               const std::string& job_id) const {
  if (worker.channel == nullptr) return nullptr;
  for (auto it = worker.channel->sent.rbegin(); it != worker.channel->sent.rend(); ++it) {
    if (it->has_start_assignment() && it->start_assignment().job_id() == job_id) return &*it;
  }
  return nullptr;
}

void Harness::Connect(FakeWorker& worker, ByteReader& in) {
  static constexpr uint32_t kVersions[] = {kProtocolVersion, kProtocolVersion, 2, 1, 0, 99};
  baton::v1::Register reg;
  reg.set_worker_id(in.Below(8) == 0 ? "" : worker.id);
  reg.set_hostname(worker.id + ".local");
  // A worker's slots never change across its sessions here: one that came back with fewer
  // while its processes still ran would rightly be reported over-committed. 0 and -1 are
  // refused.
  const int slots = in.Below(8);
  reg.mutable_resources()->set_slots(slots == 0 ? 0 : slots == 1 ? -1 : worker.slots);
  reg.set_protocol_version(kVersions[in.Below(6)]);
  reg.set_draining(in.Below(8) == 0);
  reg.set_probe_port(in.Below(2) * 7000);
  const auto [job_id, generation] = PickJob(in);
  if (const CoordinatorMessage* start = LatestStart(worker, job_id); start && in.Below(2)) {
    baton::v1::AssignmentStatus* status = reg.add_assignments();  // Re-attach after a restart.
    status->set_job_id(job_id);
    status->set_generation(start->start_assignment().generation());
    *status->mutable_ranks() = start->start_assignment().ranks();
  }
  auto channel = std::make_shared<FakeChannel>();
  const absl::StatusOr<uint64_t> session =
      coordinator_->OnWorkerConnected(reg, "10.0.0." + worker.id.substr(1), channel);
  if (!session.ok()) return;
  worker.channel = std::move(channel);
  worker.session = *session;
}

void Harness::Submit(ByteReader& in) {
  baton::v1::JobSpec spec;
  spec.set_name(in.Below(16) == 0 ? "Not_A_Name" : "fuzz-job");
  if (in.Below(2)) {
    spec.mutable_command()->add_argv("/bin/true");
  } else {  // The built-in trainer: resizes, checkpoint requests, profiles.
    spec.mutable_trainer()->set_model("mlp");
    spec.mutable_trainer()->set_dataset("synthetic");
    spec.mutable_trainer()->set_batch_size(8);
    spec.mutable_budget()->set_max_steps(1000);
    spec.set_checkpoint_dir("/shared/ckpt");
  }
  spec.mutable_workers()->set_min(in.Below(4));
  if (in.Below(2)) spec.mutable_workers()->set_max(in.Below(4));
  spec.set_slots_per_worker(1 + in.Below(2));
  spec.mutable_restart_policy()->set_max_infra_restarts(in.Below(3));
  spec.mutable_restart_policy()->set_max_user_restarts(in.Below(3));
  (void)coordinator_->SubmitJob(spec, in.Below(4) == 0 ? "request-1" : "");
}

void Harness::FillJobMessage(WorkerMessage& msg, const FakeWorker& worker, ByteReader& in) {
  static constexpr const char* kReasons[] = {"PortUnavailable", "PeerUnreachable", "LeaseExpired",
                                             "LaunchFailed",    "InvalidAssignment", "Bogus"};
  const auto [job_id, generation] = PickJob(in);
  const int rank = in.Below(5) - 1;
  switch (in.Below(7)) {
    case 0: {
      auto* m = msg.mutable_port_reserved();
      m->set_job_id(job_id);
      m->set_generation(generation);
      m->set_port(in.Below(2) * 29500);
      break;
    }
    case 1: {  // Acknowledge the latest start (or a made-up one).
      auto* m = msg.mutable_assignment_started();
      m->set_job_id(job_id);
      m->set_generation(generation);
      if (const CoordinatorMessage* start = LatestStart(worker, job_id)) {
        m->set_generation(start->start_assignment().generation() + (in.Below(4) == 0));
        *m->mutable_ranks() = start->start_assignment().ranks();
      } else {
        m->add_ranks()->set_rank(rank);
      }
      for (auto& r : *m->mutable_ranks()) r.set_pid(1000 + r.rank());
      break;
    }
    case 2: {
      auto* m = msg.mutable_process_exited();
      m->set_job_id(job_id);
      m->set_generation(generation);
      m->set_rank(rank);
      m->mutable_exit()->set_exit_code(in.Below(3) - 1);
      m->mutable_exit()->set_signal(in.Below(4) == 0 ? 9 : 0);
      break;
    }
    case 3: {
      auto* m = msg.mutable_metrics();
      m->set_job_id(job_id);
      auto* point = m->add_points();
      point->set_generation(generation);
      point->set_rank(rank);
      point->set_step(in.Byte() * 10 - 5);
      (*point->mutable_values())["loss"] = in.Byte() / 16.0;
      break;
    }
    case 4: {
      auto* m = msg.mutable_logs();
      m->set_job_id(job_id);
      auto* line = m->add_lines();
      line->set_generation(generation);
      line->set_rank(rank);
      line->set_text(in.Bytes(32));
      break;
    }
    case 5: {  // Answer the latest profile request (or a made-up one).
      auto* m = msg.mutable_profile_trace();
      m->set_job_id(job_id);
      m->set_generation(generation);
      m->set_request_id("p1-0");
      m->set_rank(rank);
      const auto asked = worker.channel ? worker.channel->Of(CoordinatorMessage::kProfileRanks)
                                        : std::vector<CoordinatorMessage>();
      if (!asked.empty() && in.Below(4) != 0) {
        const baton::v1::ProfileRanks& p = asked.back().profile_ranks();
        m->set_job_id(p.job_id());
        m->set_generation(p.generation());
        m->set_request_id(p.request_id());
        if (p.ranks_size() > 0) m->set_rank(p.ranks(in.Below(p.ranks_size())));
      }
      if (in.Below(4) == 0) {
        m->set_error("fuzz");
      } else {
        m->set_trace_json(in.Bytes(16));
      }
      break;
    }
    default: {
      auto* m = msg.mutable_assignment_failed();
      m->set_job_id(job_id);
      m->set_generation(generation);
      m->set_reason(kReasons[in.Below(6)]);
      break;
    }
  }
}

bool Harness::Step(ByteReader& in) {
  static constexpr absl::Duration kAdvances[] = {
      absl::Milliseconds(10), absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(5),
      absl::Seconds(31),      absl::Seconds(61),       absl::Minutes(10)};
  if (in.done()) return false;
  const int op = in.Below(11);
  FakeWorker& worker = workers_[in.Below(kWorkers)];
  WorkerMessage msg;
  switch (op) {
    case 0: Connect(worker, in); break;
    case 1: Submit(in); break;
    case 2: (void)coordinator_->CancelJob(PickJob(in).first, "fuzz"); break;
    case 3: coordinator_->OnWorkerDisconnected(worker.id, worker.session); break;
    case 4: coordinator_->OnWorkerDraining(worker.id, "fuzz"); break;
    case 5:
      clock_.Advance(kAdvances[in.Below(7)]);
      coordinator_->ReconcileOnce();
      break;
    case 6: Open(); break;  // A coordinator restart: memory from the file only.
    case 7:  // Anything at all the transport could deliver.
      if (!msg.ParseFromString(in.Bytes(64))) break;
      coordinator_->OnWorkerMessage(worker.id, worker.session, msg);
      break;
    case 8:
      msg.mutable_heartbeat()->set_seq(in.Byte());
      coordinator_->OnWorkerMessage(worker.id, worker.session, msg);
      break;
    case 9: {  // `baton profile`: each request is answered at most once.
      baton::v1::ProfileJobRequest request;
      request.set_job_id(PickJob(in).first);
      request.set_steps(in.Below(4) == 0 ? 0 : 1 + in.Below(3));
      if (in.Below(2)) request.add_ranks(in.Below(4) - 1);
      auto answers = std::make_shared<int>(0);
      if (coordinator_
              ->ProfileJob(request,
                           [this, answers](absl::StatusOr<baton::v1::ProfileJobResponse>) {
                             FUZZ_CHECK(++*answers == 1);
                             ++profile_answers_;
                           })
              .ok()) {
        ++profile_requests_;
      }
      break;
    }
    default:
      FillJobMessage(msg, worker, in);
      coordinator_->OnWorkerMessage(worker.id, worker.session, msg);
      break;
  }
  return true;
}

void Harness::CheckInvariants() const {
  FUZZ_CHECK(coordinator_->halted().ok());
  for (const auto& [id, job] : SnapshotJobs(*jobs_)) {
    JobState state;
    FUZZ_CHECK(JobStateFromProto(job.state(), &state).ok());
    for (const baton::v1::JobEvent& event : job.events()) {
      if (event.from_state() == baton::v1::JOB_STATE_UNSPECIFIED) continue;
      JobState from, to;
      FUZZ_CHECK(JobStateFromProto(event.from_state(), &from).ok());
      FUZZ_CHECK(JobStateFromProto(event.to_state(), &to).ok());
      FUZZ_CHECK(CheckTransition(from, to).ok());
    }
  }
  for (const baton::v1::Worker& worker : coordinator_->ListWorkers()) {
    FUZZ_CHECK(worker.used_slots() <= worker.resources().slots());
  }
  FUZZ_CHECK(coordinator_->profiles_in_flight() <= ProfileTable::kDefaultMaxPending);
  FUZZ_CHECK(profile_answers_ <= profile_requests_);
}

void Harness::CheckReload() const {
  auto disk = Store::Open(path_);
  FUZZ_CHECK(disk.ok());
  FakeClock clock;
  JobManager reloaded(disk->get(), &clock);
  FUZZ_CHECK(reloaded.Load().ok());
  const auto memory = SnapshotJobs(*jobs_);
  const auto stored = SnapshotJobs(reloaded);
  FUZZ_CHECK(memory.size() == stored.size());
  for (const auto& [id, job] : memory) {
    FUZZ_CHECK(stored.count(id) == 1);
    FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(stored.at(id), job));
  }
}

}  // namespace
}  // namespace baton::coordinator

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::coordinator;
  const std::string path = baton::fuzz::EmptyScratchSubdir("coordinator") + "/state.db";
  ByteReader in(data, size);
  Harness harness(path);
  for (int step = 0; step < kMaxSteps && harness.Step(in); ++step) harness.CheckInvariants();
  harness.CheckReload();
  return 0;
}
