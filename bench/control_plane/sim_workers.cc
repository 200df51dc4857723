#include "bench/control_plane/sim_workers.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "common/protocol_version.h"
#include "common/time/proto_time.h"

namespace baton::bench {

struct SimTransport {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<baton::v1::WorkerService::Stub>> stubs;
};

// One simulated worker daemon: one Connect stream. Writes go out one at a time from a
// queue (the callback API allows one outstanding write per stream); reads are always armed.
class SimWorker final
    : public grpc::ClientBidiReactor<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage> {
 public:
  SimWorker(SimCluster* cluster, int index)
      : cluster_(cluster),
        options_(cluster->options_),
        index_(index),
        id_(absl::StrCat(options_.id_prefix, index)),
        heartbeat_interval_(options_.heartbeat_interval) {}

  // Opens the stream with Register as its first message.
  void Start(baton::v1::WorkerService::Stub* stub) {
    stub->async()->Connect(&context_, this);
    baton::v1::WorkerMessage hello;
    baton::v1::Register* reg = hello.mutable_register_();
    reg->set_worker_id(id_);
    reg->set_hostname(id_);
    reg->set_advertise_host("127.0.0.1");
    reg->mutable_resources()->set_slots(options_.slots);
    reg->mutable_resources()->set_cpu_cores(options_.slots);
    reg->set_protocol_version(kProtocolVersion);
    reg->set_probe_port(0);  // none: peers skip probing this worker (StartAssignment.peers)
    Send({std::move(hello)});
    StartRead(&in_);
    // Held until Stop(): OnDone (after which no write may be started) cannot come while the
    // ticker or FinishAll may still write from outside a reaction.
    AddHold();
    StartCall();
  }

  // Ends the stream; OnDone follows once gRPC is done with it. Call once, after Start(),
  // when nothing writes from outside a reaction any more.
  void CancelAndRelease() {
    context_.TryCancel();
    RemoveHold();
  }

  // If this worker runs an assignment, it goes silent (see SimCluster::SilenceOne) and
  // returns when it last sent a heartbeat.
  std::optional<absl::Time> SilenceIfRunning() {
    absl::MutexLock lock(&mu_);
    if (dead_ || silent_ || !running_) return std::nullopt;
    silent_ = true;
    return last_heartbeat_;
  }

  // Sends what is due at `now`: a heartbeat, a metric point per rank, the ranks' exits.
  void Tick(absl::Time now) {
    std::vector<baton::v1::WorkerMessage> out;
    int64_t points = 0;
    int64_t exits = 0;
    {
      absl::MutexLock lock(&mu_);
      if (dead_ || silent_ || !registered_) return;
      if (now >= next_heartbeat_) {
        last_heartbeat_ = now;
        baton::v1::WorkerMessage m;
        *m.mutable_heartbeat()->mutable_time() = ToProto(now);
        m.mutable_heartbeat()->set_seq(++seq_);
        out.push_back(std::move(m));
        next_heartbeat_ = now + heartbeat_interval_;
      }
      if (running_ && now >= next_metric_) {
        step_ += options_.steps_per_point;
        ++points_;
        baton::v1::WorkerMessage m;
        baton::v1::MetricsReport* report = m.mutable_metrics();
        report->set_job_id(job_id_);
        for (const baton::v1::RankInfo& r : ranks_) {
          baton::v1::MetricPoint* p = report->add_points();
          *p->mutable_time() = ToProto(now);
          p->set_generation(generation_);
          p->set_rank(r.rank());
          p->set_step(step_);
          (*p->mutable_values())["loss"] = 1.0 / static_cast<double>(step_);
          ++points;
        }
        out.push_back(std::move(m));
        next_metric_ = now + options_.metric_period;
        if (options_.exit_after_points > 0 && points_ >= options_.exit_after_points) {
          exits = ExitAllLocked(now, /*exit_code=*/0, /*signal=*/0, &out);
        }
      }
    }
    if (points > 0) cluster_->Count(&SimCounts::metric_points_sent, points);
    if (exits > 0) cluster_->Count(&SimCounts::exits_sent, exits);
    if (!out.empty() && out.front().has_heartbeat()) {
      cluster_->Count(&SimCounts::heartbeats_sent, 1);
    }
    Send(std::move(out));
  }

  // The running assignment's ranks exit 0.
  void Finish() {
    std::vector<baton::v1::WorkerMessage> out;
    int64_t exits;
    {
      absl::MutexLock lock(&mu_);
      if (dead_ || silent_ || !running_) return;
      exits = ExitAllLocked(absl::Now(), 0, 0, &out);
    }
    cluster_->Count(&SimCounts::exits_sent, exits);
    Send(std::move(out));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool silent;
      {
        absl::MutexLock lock(&mu_);
        dead_ = true;
        silent = silent_;
      }
      // The coordinator ends a lost (silent) worker's stream: expected, not a failure.
      if (!silent) cluster_->OnStreamEnded();
      return;
    }
    Handle(in_);
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        dead_ = true;
        writing_ = false;
        pending_.clear();
        return;
      }
      if (pending_.empty()) {
        writing_ = false;
        return;
      }
      out_ = std::move(pending_.front());
      pending_.pop_front();
    }
    StartWrite(&out_);
  }

  void OnDone(const grpc::Status&) override { cluster_->OnDone(); }

 private:
  // Queues `messages` in order and starts a write if none is in flight.
  void Send(std::vector<baton::v1::WorkerMessage> messages) {
    {
      absl::MutexLock lock(&mu_);
      if (dead_ || messages.empty()) return;
      for (baton::v1::WorkerMessage& m : messages) pending_.push_back(std::move(m));
      if (writing_) return;
      writing_ = true;
      out_ = std::move(pending_.front());
      pending_.pop_front();
    }
    StartWrite(&out_);
  }

  // Appends a ProcessExited per rank of the running assignment to `out` and ends it;
  // returns how many.
  int64_t ExitAllLocked(absl::Time now, int exit_code, int signal,
                        std::vector<baton::v1::WorkerMessage>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const baton::v1::RankInfo& r : ranks_) {
      baton::v1::WorkerMessage m;
      baton::v1::ProcessExited* e = m.mutable_process_exited();
      e->set_job_id(job_id_);
      e->set_generation(generation_);
      e->set_rank(r.rank());
      e->mutable_exit()->set_exit_code(exit_code);
      e->mutable_exit()->set_signal(signal);
      *e->mutable_exit()->mutable_time() = ToProto(now);
      out->push_back(std::move(m));
    }
    running_ = false;
    return static_cast<int64_t>(ranks_.size());
  }

  // The first Registered: heartbeats start now, every interval it names (if > 0).
  void OnRegistered(const baton::v1::Registered& registered, absl::Time now) {
    {
      absl::MutexLock lock(&mu_);
      if (registered_) return;  // the agent ignores a second one too
      registered_ = true;
      if (registered.has_heartbeat_interval() &&
          FromProto(registered.heartbeat_interval()) > absl::ZeroDuration()) {
        heartbeat_interval_ = FromProto(registered.heartbeat_interval());
      }
      next_heartbeat_ = now;  // the agent heartbeats as soon as it is attached
    }
    cluster_->OnRegistered();
  }

  // Runs the assignment's ranks from `now` (metric points, exits) and appends its
  // AssignmentStarted to `out`.
  void OnStartAssignment(const baton::v1::StartAssignment& req, absl::Time now,
                         std::vector<baton::v1::WorkerMessage>* out) {
    bool first;
    {
      absl::MutexLock lock(&mu_);
      first = !ever_started_;
      ever_started_ = true;
      job_id_ = req.job_id();
      generation_ = req.generation();
      ranks_.assign(req.ranks().begin(), req.ranks().end());
      step_ = 0;
      points_ = 0;
      running_ = true;
      // Workers relay on timers of their own, not in step: spread the first points
      // over one period (worker i at i/N of it), as real workers' would be; from then
      // on one point per rank per period.
      next_metric_ = now + options_.metric_period *
                               (static_cast<double>(index_) / std::max(1, options_.workers));
    }
    baton::v1::WorkerMessage m;
    baton::v1::AssignmentStarted* started = m.mutable_assignment_started();
    started->set_job_id(req.job_id());
    started->set_generation(req.generation());
    for (const baton::v1::RankInfo& r : req.ranks()) {
      baton::v1::RankInfo* info = started->add_ranks();
      *info = r;
      info->set_pid(100000 + index_ * 64 + r.local_rank());  // fake
    }
    out->push_back(std::move(m));
    cluster_->OnStarted(now, first);
  }

  void Handle(const baton::v1::CoordinatorMessage& message) {
    const absl::Time now = absl::Now();
    std::vector<baton::v1::WorkerMessage> out;
    {
      absl::MutexLock lock(&mu_);
      if (silent_) return;  // partitioned: it hears nothing either
    }
    switch (message.msg_case()) {
      case baton::v1::CoordinatorMessage::kRegistered:
        OnRegistered(message.registered(), now);
        return;
      case baton::v1::CoordinatorMessage::kHeartbeatAck:
        cluster_->Count(&SimCounts::heartbeat_acks, 1);
        return;
      case baton::v1::CoordinatorMessage::kReservePort: {
        baton::v1::WorkerMessage m;
        baton::v1::PortReserved* r = m.mutable_port_reserved();
        r->set_job_id(message.reserve_port().job_id());
        r->set_generation(message.reserve_port().generation());
        r->set_port(20000 + index_ % 10000);  // never bound: nothing dials it
        out.push_back(std::move(m));
        break;
      }
      case baton::v1::CoordinatorMessage::kStartAssignment:
        OnStartAssignment(message.start_assignment(), now, &out);
        break;
      case baton::v1::CoordinatorMessage::kStopAssignment: {
        const baton::v1::StopAssignment& req = message.stop_assignment();
        cluster_->Count(&SimCounts::stops_received, 1);
        int64_t exits = 0;
        {
          absl::MutexLock lock(&mu_);
          if (running_ && req.job_id() == job_id_ &&
              (req.generation() == 0 || req.generation() == generation_)) {
            exits = ExitAllLocked(now, 0, /*signal=*/15, &out);  // SIGTERM
          }
        }
        if (exits > 0) cluster_->Count(&SimCounts::exits_sent, exits);
        break;
      }
      default:
        return;  // RequestCheckpoint, ProfileRanks: not simulated
    }
    Send(std::move(out));
  }

  SimCluster* const cluster_;
  const SimOptions& options_;
  const int index_;
  const std::string id_;
  grpc::ClientContext context_;
  baton::v1::CoordinatorMessage in_;  // touched by read reactions only
  baton::v1::WorkerMessage out_;      // the write in flight

  absl::Mutex mu_;
  std::deque<baton::v1::WorkerMessage> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool ever_started_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::RankInfo> ranks_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t points_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_metric_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

SimCluster::SimCluster(SimOptions options)
    : options_(std::move(options)), transport_(std::make_unique<SimTransport>()) {}

SimCluster::~SimCluster() { Stop(); }

absl::Status SimCluster::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("SimCluster::Start called twice");
    started_ = true;
  }
  const int per_channel = std::max(1, options_.workers_per_channel);
  const int channels = (options_.workers + per_channel - 1) / per_channel;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    // A connection of its own per channel: no sharing of subchannels between channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("baton.sim_channel", c);
    transport_->channels.push_back(
        grpc::CreateCustomChannel(options_.coordinator, grpc::InsecureChannelCredentials(), args));
    transport_->stubs.push_back(baton::v1::WorkerService::NewStub(transport_->channels.back()));
  }
  for (int i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<SimWorker>(this, i));
  }
  for (int i = 0; i < options_.workers; ++i) {
    workers_[i]->Start(transport_->stubs[i / per_channel].get());
  }
  ticker_ = std::thread([this] { TickerLoop(); });
  return absl::OkStatus();
}

void SimCluster::TickerLoop() {
  constexpr absl::Duration kTick = absl::Milliseconds(20);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kTick)) return;
    }
    const absl::Time now = absl::Now();
    for (const auto& w : workers_) w->Tick(now);
  }
}

absl::Status SimCluster::AwaitRegistered(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return counts_.registered == options_.workers || counts_.failed_streams > 0;
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (counts_.failed_streams > 0) {
    return absl::UnavailableError(
        absl::StrCat(counts_.failed_streams, " worker stream(s) ended before registering; ",
                     counts_.registered, " of ", options_.workers, " registered"));
  }
  if (counts_.registered < options_.workers) {
    return absl::DeadlineExceededError(absl::StrCat(counts_.registered, " of ", options_.workers,
                                                    " workers registered by the deadline"));
  }
  return absl::OkStatus();
}

absl::Status SimCluster::AwaitStarted(int n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counts_.started >= n; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat(counts_.started, " of ", n, " workers got a StartAssignment by the deadline"));
  }
  return absl::OkStatus();
}

absl::Status SimCluster::AwaitStopped(int64_t n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counts_.stops_received >= n; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(counts_.stops_received, " of ", n,
                                                    " StopAssignments received by the deadline"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SimCluster::Silenced> SimCluster::SilenceOne() {
  for (size_t i = workers_.size(); i-- > 0;) {
    if (std::optional<absl::Time> last = workers_[i]->SilenceIfRunning()) {
      return Silenced{static_cast<int>(i), *last};
    }
  }
  return absl::FailedPreconditionError("no simulated worker runs an assignment");
}

void SimCluster::FinishAll() {
  for (const auto& w : workers_) w->Finish();
}

void SimCluster::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  for (const auto& w : workers_) w->CancelAndRelease();
  absl::MutexLock lock(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ == static_cast<int>(workers_.size());
  };
  mu_.Await(absl::Condition(&all_done));  // gRPC must be done with a reactor before it goes
}

SimCounts SimCluster::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void SimCluster::OnRegistered() {
  absl::MutexLock lock(&mu_);
  ++counts_.registered;
}

void SimCluster::OnStarted(absl::Time when, bool first) {
  absl::MutexLock lock(&mu_);
  if (first) ++counts_.started;
  counts_.last_start_received = std::max(counts_.last_start_received, when);
}

void SimCluster::OnStreamEnded() {
  absl::MutexLock lock(&mu_);
  if (!stopping_) ++counts_.failed_streams;
}

void SimCluster::OnDone() {
  absl::MutexLock lock(&mu_);
  ++done_;
}

void SimCluster::Count(int64_t SimCounts::*counter, int64_t n) {
  absl::MutexLock lock(&mu_);
  counts_.*counter += n;
}

}  // namespace baton::bench
