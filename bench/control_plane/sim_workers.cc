#include "bench/control_plane/sim_workers.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "bench/control_plane/sim_stream.h"
#include "common/time/proto_time.h"

namespace baton::bench {

// One simulated worker daemon: its assignment, its schedule, and its current stream (one
// at a time; a new one only after the last one's OnStreamDone).
class SimWorker final : public SimStream::Owner {
 public:
  SimWorker(SimCluster* cluster, int index)
      : cluster_(cluster),
        options_(cluster->options_),
        index_(index),
        id_(absl::StrCat(options_.id_prefix, index)),
        heartbeat_interval_(options_.heartbeat_interval),
        backoff_(options_.reconnect_options) {}

  // Opens a stream to `address` whose first message is the Register, listing the running
  // assignment if there is one. The worker must have no stream.
  void Connect(const std::string& address) {
    std::vector<baton::v1::AssignmentStatus> running;
    std::shared_ptr<SimStream> stream =
        std::make_shared<SimStream>(this, address, cluster_->channels_.StubFor(address, index_));
    {
      absl::MutexLock lock(&mu_);
      if (running_) {
        baton::v1::AssignmentStatus a;
        a.set_job_id(job_id_);
        a.set_generation(generation_);
        for (const baton::v1::RankInfo& r : ranks_) *a.add_ranks() = r;
        running.push_back(std::move(a));
      }
      stream_ = stream;
    }
    cluster_->OnStreamOpened();
    stream->Start(SimRegister(id_, options_.slots, running));
  }

  // Ends the current stream, if any.
  void Cancel() {
    if (std::shared_ptr<SimStream> stream = Current()) stream->Cancel();
  }

  // If this worker runs an assignment, it goes silent (see SimCluster::SilenceOne) and
  // returns when it last sent a heartbeat.
  std::optional<absl::Time> SilenceIfRunning() {
    absl::MutexLock lock(&mu_);
    if (stream_ == nullptr || silent_ || !running_) return std::nullopt;
    silent_ = true;
    return last_heartbeat_;
  }

  // The address to ask first when finding the leader: the last stream's hint, else the
  // replica it last registered with.
  std::string preferred() const {
    absl::MutexLock lock(&mu_);
    return preferred_;
  }

  // The delay before the next attempt after one failed with `status`.
  absl::Duration NextRetry(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    return RetryDelay(status, options_.reconnect_options, &backoff_);
  }

  absl::Time last_registered() const {
    absl::MutexLock lock(&mu_);
    return last_registered_;
  }

  // Sends what is due at `now`: a heartbeat, a metric point per rank, the ranks' exits.
  void Tick(absl::Time now) {
    std::vector<baton::v1::WorkerMessage> out;
    int64_t points = 0;
    int64_t exits = 0;
    std::shared_ptr<SimStream> stream;
    {
      absl::MutexLock lock(&mu_);
      if (silent_ || !registered_) return;
      stream = stream_;
      if (now >= next_heartbeat_) {
        last_heartbeat_ = now;
        baton::v1::WorkerMessage m;
        *m.mutable_heartbeat()->mutable_time() = ToProto(now);
        m.mutable_heartbeat()->set_seq(++seq_);
        out.push_back(std::move(m));
        next_heartbeat_ = now + heartbeat_interval_;
      }
      if (running_ && now >= next_metric_) {
        points = AppendPointLocked(now, &out);
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
    if (stream != nullptr) stream->Send(std::move(out));
  }

  // The running assignment's ranks exit 0.
  void Finish() {
    std::vector<baton::v1::WorkerMessage> out;
    int64_t exits;
    std::shared_ptr<SimStream> stream;
    {
      absl::MutexLock lock(&mu_);
      if (stream_ == nullptr || silent_ || !running_) return;
      stream = stream_;
      exits = ExitAllLocked(absl::Now(), 0, 0, &out);
    }
    cluster_->Count(&SimCounts::exits_sent, exits);
    stream->Send(std::move(out));
  }

  void OnMessage(SimStream* stream, const baton::v1::CoordinatorMessage& message) override {
    {
      absl::MutexLock lock(&mu_);
      if (silent_ || stream != stream_.get()) return;  // partitioned: it hears nothing either
    }
    std::vector<baton::v1::WorkerMessage> out = Handle(stream, message);
    stream->Send(std::move(out));
  }

  void OnStreamDone(SimStream* stream, const grpc::Status&,
                    std::optional<std::string> hint) override {
    std::shared_ptr<SimStream> ended;  // may be the last reference
    bool silent;
    std::optional<absl::Time> reconnect_at;
    {
      absl::MutexLock lock(&mu_);
      if (stream == stream_.get()) ended = std::move(stream_);
      silent = silent_;
      if (hint.has_value()) {
        preferred_ = *std::move(hint);
      } else if (registered_) {
        preferred_ = stream->address();
      }
      registered_ = false;
      // The stream's end is never an election's (Find's) status: the backoff applies.
      if (options_.reconnect && !silent) reconnect_at = absl::Now() + backoff_.Next();
    }
    ended.reset();  // before the cluster hears of it: Stop() may then destroy this worker
    // The coordinator ends a lost (silent) worker's stream: expected, not a failure.
    cluster_->OnStreamEnded(/*failed=*/!silent && !options_.reconnect, reconnect_at, index_);
  }

 private:
  std::shared_ptr<SimStream> Current() {
    absl::MutexLock lock(&mu_);
    return stream_;
  }

  // One metric point per rank, at the next step; how many.
  int64_t AppendPointLocked(absl::Time now, std::vector<baton::v1::WorkerMessage>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
    }
    out->push_back(std::move(m));
    return static_cast<int64_t>(ranks_.size());
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

  // The stream's first Registered: heartbeats start now, every interval it names (if > 0).
  void OnRegistered(const baton::v1::Registered& registered, absl::Time now) {
    bool first;
    {
      absl::MutexLock lock(&mu_);
      if (registered_) return;  // the agent ignores a second one too
      registered_ = true;
      first = !ever_registered_;
      ever_registered_ = true;
      last_registered_ = now;
      backoff_.Reset();
      if (registered.has_heartbeat_interval() &&
          FromProto(registered.heartbeat_interval()) > absl::ZeroDuration()) {
        heartbeat_interval_ = FromProto(registered.heartbeat_interval());
      }
      next_heartbeat_ = now;  // the agent heartbeats as soon as it is attached
    }
    cluster_->OnRegistered(now, first);
  }

  // Runs the assignment's ranks from `now` (metric points, exits) and appends its
  // AssignmentStarted to `out`.
  void OnStartAssignment(const baton::v1::StartAssignment& req, absl::Time now,
                         std::vector<baton::v1::WorkerMessage>* out) {
    baton::v1::WorkerMessage m;
    baton::v1::AssignmentStarted* started = m.mutable_assignment_started();
    started->set_job_id(req.job_id());
    started->set_generation(req.generation());
    for (const baton::v1::RankInfo& r : req.ranks()) {
      baton::v1::RankInfo* info = started->add_ranks();
      *info = r;
      info->set_pid(100000 + index_ * 64 + r.local_rank());  // fake
    }
    bool first;
    {
      absl::MutexLock lock(&mu_);
      first = !ever_started_;
      ever_started_ = true;
      job_id_ = req.job_id();
      generation_ = req.generation();
      ranks_.assign(started->ranks().begin(), started->ranks().end());
      step_ = 0;
      points_ = 0;
      running_ = true;
      // Workers relay on timers of their own, not in step: spread the first points
      // over one period (worker i at i/N of it), as real workers' would be; from then
      // on one point per rank per period.
      next_metric_ = now + options_.metric_period *
                               (static_cast<double>(index_) / std::max(1, options_.workers));
    }
    out->push_back(std::move(m));
    cluster_->OnStarted(now, first);
  }

  // What this worker answers `message` with.
  std::vector<baton::v1::WorkerMessage> Handle(SimStream* stream,
                                               const baton::v1::CoordinatorMessage& message) {
    const absl::Time now = absl::Now();
    std::vector<baton::v1::WorkerMessage> out;
    switch (message.msg_case()) {
      case baton::v1::CoordinatorMessage::kRegistered:
        OnRegistered(message.registered(), now);
        break;
      case baton::v1::CoordinatorMessage::kHeartbeatAck:
        cluster_->Count(&SimCounts::heartbeat_acks, 1);
        break;
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
        break;  // RequestCheckpoint, ProfileRanks: not simulated
    }
    return out;
  }

  SimCluster* const cluster_;
  const SimOptions& options_;
  const int index_;
  const std::string id_;

  mutable absl::Mutex mu_;
  std::shared_ptr<SimStream> stream_ ABSL_GUARDED_BY(mu_);  // null between streams
  bool registered_ ABSL_GUARDED_BY(mu_) = false;            // on stream_
  bool ever_registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_registered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string preferred_ ABSL_GUARDED_BY(mu_);
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  SimBackoff backoff_ ABSL_GUARDED_BY(mu_);
  bool ever_started_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::RankInfo> ranks_ ABSL_GUARDED_BY(mu_);  // with their fake pids
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t points_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_metric_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

namespace {

LeaderFinder::Options FinderOptions(const SimOptions& options) {
  LeaderFinder::Options finder;
  finder.addresses = options.coordinators;
  finder.service = kWorkerServiceName;
  finder.probe_timeout = options.reconnect_options.probe_timeout;
  return finder;
}

}  // namespace

SimCluster::SimCluster(SimOptions options)
    : options_(std::move(options)),
      channels_(options_.workers_per_channel, options_.reconnect_options),
      finder_(FinderOptions(options_),
              [this](const std::string& address) { return channels_.MakeChannel(address); }) {}

SimCluster::~SimCluster() { Stop(); }

absl::Status SimCluster::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("SimCluster::Start called twice");
    started_ = true;
  }
  if (options_.coordinators.empty()) {
    return absl::InvalidArgumentError("SimOptions.coordinators is empty");
  }
  absl::StatusOr<std::string> leader = finder_.Find();
  if (!leader.ok()) return leader.status();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<SimWorker>(this, i));
  }
  for (const auto& w : workers_) w->Connect(*leader);
  ticker_ = std::thread([this] { TickerLoop(); });
  if (options_.reconnect) reconnector_ = std::thread([this] { ReconnectLoop(); });
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

void SimCluster::ReconnectLoop() {
  constexpr absl::Duration kTick = absl::Milliseconds(10);
  for (;;) {
    std::vector<int> due;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kTick)) return;
      const absl::Time now = absl::Now();
      for (auto it = due_.begin(); it != due_.end();) {
        if (it->second > now) {
          ++it;
          continue;
        }
        due.push_back(it->first);
        it = due_.erase(it);
      }
    }
    if (!due.empty()) ReconnectRound(due);
  }
}

void SimCluster::ReconnectRound(const std::vector<int>& due) {
  // One Find per preferred address among the due workers, as each would make it.
  std::map<std::string, std::vector<int>> by_preferred;
  for (int i : due) by_preferred[workers_[i]->preferred()].push_back(i);
  for (const auto& [preferred, indices] : by_preferred) {
    const absl::StatusOr<std::string> leader = finder_.Find(preferred);
    const absl::Time now = absl::Now();
    for (int i : indices) {
      if (leader.ok()) {
        Count(&SimCounts::reconnect_attempts, 1);
        workers_[i]->Connect(*leader);
        continue;
      }
      if (ElectionUnderway(leader.status())) Count(&SimCounts::election_retries, 1);
      const absl::Time at = now + workers_[i]->NextRetry(leader.status());
      absl::MutexLock lock(&mu_);
      if (!stopping_) due_[i] = at;
    }
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

absl::Status SimCluster::AwaitReregistrations(int64_t n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counts_.reregistrations >= n; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat(counts_.reregistrations, " of ", n, " re-registrations by the deadline"));
  }
  return absl::OkStatus();
}

std::vector<absl::Time> SimCluster::LastRegistrations() const {
  std::vector<absl::Time> times;
  for (const auto& w : workers_) times.push_back(w->last_registered());
  return times;
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
  if (reconnector_.joinable()) reconnector_.join();
  // No stream opens from here on (the reconnects are over); cancel those still open.
  for (const auto& w : workers_) w->Cancel();
  absl::MutexLock lock(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_streams_ == 0; };
  mu_.Await(absl::Condition(&all_done));  // gRPC must be done with a stream before it goes
}

SimCounts SimCluster::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void SimCluster::OnRegistered(absl::Time when, bool first) {
  absl::MutexLock lock(&mu_);
  if (first) {
    ++counts_.registered;
    return;
  }
  ++counts_.reregistrations;
  counts_.last_reregistration = std::max(counts_.last_reregistration, when);
}

void SimCluster::OnStarted(absl::Time when, bool first) {
  absl::MutexLock lock(&mu_);
  if (first) ++counts_.started;
  counts_.last_start_received = std::max(counts_.last_start_received, when);
}

void SimCluster::OnStreamOpened() {
  absl::MutexLock lock(&mu_);
  ++open_streams_;
}

void SimCluster::OnStreamEnded(bool failed, std::optional<absl::Time> reconnect_at, int index) {
  absl::MutexLock lock(&mu_);
  --open_streams_;
  if (stopping_) return;
  if (failed) ++counts_.failed_streams;
  if (reconnect_at.has_value()) {
    ++counts_.streams_lost;
    due_[index] = *reconnect_at;
  }
}

void SimCluster::Count(int64_t SimCounts::*counter, int64_t n) {
  absl::MutexLock lock(&mu_);
  counts_.*counter += n;
}

}  // namespace baton::bench
