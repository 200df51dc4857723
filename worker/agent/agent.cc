#include "worker/agent/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "common/assignment_failure.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/protocol_version.h"
#include "common/spec/message_limits.h"
#include "common/time/proto_time.h"
#include "worker/host/peer_probe.h"
#include "worker/host/reserve_port.h"

namespace baton::worker {
namespace {

// When a stream ends, how long the writer may take to finish the Write in progress before
// the call is cancelled under it.
constexpr absl::Duration kWriterFinishTimeout = absl::Seconds(1);

std::shared_ptr<grpc::Channel> MakeChannel(const AgentOptions& options,
                                           const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // Our own backoff paces attempts; keep gRPC's reconnect backoff from adding more.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.backoff.initial)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.backoff.max)));
  return grpc::CreateCustomChannel(
      address,
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials(),
      args);
}

LeaderFinder::Options FinderOptions(const AgentOptions& options) {
  LeaderFinder::Options finder;
  finder.addresses = options.coordinators;
  finder.service = kWorkerServiceName;
  finder.probe_timeout = options.leader_probe_timeout;
  return finder;
}

}  // namespace

Agent::Agent(AgentOptions options, Supervisor* supervisor, Outbox* outbox, Clock* clock,
             WorkerMetrics* metrics)
    : options_(std::move(options)),
      supervisor_(supervisor),
      outbox_(outbox),
      clock_(clock),
      metrics_(metrics),
      coordinators_(FinderOptions(options_),
                    [this](const std::string& address) { return MakeChannel(options_, address); }),
      heartbeat_interval_(options_.heartbeat_interval),
      reports_(supervisor),
      profiles_(options_.profile, supervisor, clock,
                [outbox](baton::v1::WorkerMessage reply) { outbox->PushReply(std::move(reply)); }) {
}

Agent::~Agent() { Stop(); }

absl::Status Agent::Start() {
  starter_.Start();
  checker_.Start();
  session_thread_ = std::thread([this] { SessionLoop(); });
  writer_thread_ = std::thread([this] { WriterLoop(); });
  return absl::OkStatus();
}

void Agent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  starter_.Stop();  // Launches still queued see stopping_ and fail.
  checker_.Stop();
  outbox_->Wake();
  {
    // The writer's final flush ends with a half-close; the coordinator then reads what is
    // still in flight and ends the call, which ends the session. Cancelling the call instead
    // would drop those messages. Whatever is left after stop_flush_timeout is cancelled.
    absl::MutexLock lock(&mu_);
    auto flushed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return writer_done_ && (!half_closed_ || context_ == nullptr);
    };
    if (writer_thread_.joinable()) {
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&flushed),
                                clock_->Now() + options_.stop_flush_timeout);
    }
    if (context_ != nullptr) context_->TryCancel();
  }
  outbox_->Wake();
  if (writer_thread_.joinable()) writer_thread_.join();
  if (session_thread_.joinable()) session_thread_.join();
}

// ---------------------------------------------------------------------------------------
// Session thread.
// ---------------------------------------------------------------------------------------

void Agent::SessionLoop() {
  Backoff backoff(options_.backoff);
  for (;;) {
    const absl::Status status = RunSession(backoff);
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    const absl::Duration delay =
        ElectionUnderway(status) ? options_.election_retry : backoff.Next();
    BATON_LOG(WARNING) << "connection to the coordinator ended: " << status << "; reconnecting in "
                       << delay;
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping_), clock_->Now() + delay);
    if (stopping_) return;
  }
}

absl::Status Agent::RunSession(Backoff& backoff) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
  }
  absl::StatusOr<std::string> address = coordinators_.Find(preferred_coordinator_);
  if (!address.ok()) return address.status();
  grpc::ClientContext context;
  bool registered = false;
  const absl::Status status = FromGrpcStatus(Converse(*address, context, backoff, registered));
  if (std::optional<std::string> hint = LeaderHint(context)) {
    preferred_coordinator_ = *std::move(hint);
  } else if (registered) {
    preferred_coordinator_ = *address;
  }
  return absl::Status(status.code(), absl::StrCat(*address, ": ", status.message()));
}

grpc::Status Agent::Converse(const std::string& address, grpc::ClientContext& context,
                             Backoff& backoff, bool& registered) {
  std::unique_ptr<baton::v1::WorkerService::Stub> stub =
      baton::v1::WorkerService::NewStub(coordinators_.ChannelTo(address));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
    context_ = &context;
  }
  std::unique_ptr<Stream> stream = stub->Connect(&context);

  const std::vector<baton::v1::AssignmentStatus> snapshot = reports_.Snapshot();
  const baton::v1::WorkerMessage hello = MakeRegister(snapshot);
  baton::v1::CoordinatorMessage message;
  // A connection that brings no Registered within register_timeout is abandoned.
  Clock::Timer register_timeout =
      clock_->After(options_.register_timeout, [this, &address, &context] {
        BATON_LOG(WARNING) << "no Registered from " << address << " within "
                           << options_.register_timeout << "; retrying";
        context.TryCancel();
      });
  const absl::Time register_sent = clock_->Now();
  bool ok = stream->Write(hello) && stream->Read(&message);
  register_timeout.Cancel();
  if (ok && !message.has_registered()) {
    BATON_LOG(ERROR) << "coordinator answered Register with something else than Registered";
    context.TryCancel();  // The call is still open; Finish() would wait for its end.
    ok = false;
  }
  if (ok) {
    // The coordinator has read the Register: everything it listed is delivered.
    reports_.MarkRegistered(snapshot);
    Attach(stream.get(), message.registered(), register_sent, hello.register_().draining());
    backoff.Reset();
    registered = true;
    BATON_LOG(INFO) << "registered with coordinator " << address << " as " << options_.worker_id
                    << " (coordinator protocol " << message.registered().protocol_version() << ", "
                    << snapshot.size() << " assignments listed)";
    while (stream->Read(&message)) Handle(message);
  }

  {
    // Detach; give the writer a moment to finish its current Write on its own (cancelling
    // would hide the coordinator's status), then cancel to unblock it if it is stuck.
    Clock::Timer unblock_writer =
        clock_->After(kWriterFinishTimeout, [&context] { context.TryCancel(); });
    absl::MutexLock lock(&mu_);
    attached_ = nullptr;
    mu_.Await(absl::Condition(
        +[](bool* busy) { return !*busy; }, &writer_busy_));
    context_ = nullptr;
  }
  outbox_->SetConnected(false);
  return stream->Finish();
}

baton::v1::WorkerMessage Agent::MakeRegister(
    const std::vector<baton::v1::AssignmentStatus>& snapshot) const {
  baton::v1::WorkerMessage hello;
  baton::v1::Register* reg = hello.mutable_register_();
  reg->set_worker_id(options_.worker_id);
  reg->set_hostname(options_.hostname);
  reg->set_advertise_host(options_.advertise_host);
  *reg->mutable_resources() = options_.resources;
  reg->set_protocol_version(kProtocolVersion);
  reg->set_probe_port(options_.probe_port);
  for (const auto& a : snapshot) *reg->add_assignments() = a;
  absl::MutexLock lock(&mu_);
  reg->set_draining(draining_);
  return hello;
}

void Agent::Attach(Stream* stream, const baton::v1::Registered& registered,
                   absl::Time register_sent, bool register_said_draining) {
  lease_.OnRegistered(
      register_sent, registered.has_lease() ? FromProto(registered.lease()) : absl::ZeroDuration());
  PublishLease();
  {
    absl::MutexLock lock(&mu_);
    if (registered.has_heartbeat_interval() &&
        FromProto(registered.heartbeat_interval()) > absl::ZeroDuration()) {
      heartbeat_interval_ = FromProto(registered.heartbeat_interval());
    }
    attached_ = stream;
    ++attach_count_;
  }
  const Outbox::Dropped dropped = outbox_->TakeDropped();
  if (dropped.log_lines + dropped.metric_points + dropped.replies > 0) {
    BATON_LOG(WARNING) << "while disconnected, dropped " << dropped.log_lines << " log lines, "
                       << dropped.metric_points << " metric points and " << dropped.replies
                       << " replies (log lines remain in the rank logs)";
  }
  outbox_->SetConnected(true);
  // A Drain() between building the Register and now had its message dropped: resend.
  bool drained_since_register;
  std::string drain_reason;
  {
    absl::MutexLock lock(&mu_);
    drained_since_register = draining_ && !register_said_draining;
    drain_reason = drain_reason_;
  }
  if (drained_since_register) {
    baton::v1::WorkerMessage draining;
    draining.mutable_draining()->set_reason(drain_reason);
    outbox_->PushReply(std::move(draining));
  }
  outbox_->OnReportsPending();  // Let the writer heartbeat and report right away.
}

void Agent::AcceptStart(const baton::v1::StartAssignment& req) {
  BATON_LOG(INFO) << "StartAssignment job " << req.job_id() << " gen " << req.generation() << ": "
                  << req.ranks_size() << " ranks of " << req.world_size();
  const absl::StatusOr<bool> accepted = supervisor_->AcceptAssignment(req);
  if (!accepted.ok()) {
    ReplyFailed(req.job_id(), req.generation(),
                absl::IsInvalidArgument(accepted.status()) ? "InvalidAssignment" : "WorkerShutdown",
                accepted.status());
    return;
  }
  if (!*accepted) return;  // Known: the Supervisor reports it again.
  absl::Status refused;
  std::string reason;
  if (!lease_.Valid(clock_->Now())) {
    reason = "LeaseExpired";
    refused = absl::UnavailableError(absl::StrCat("the worker's lease ran out at ",
                                                  absl::FormatTime(lease_.expiry()),
                                                  "; it starts nothing until it registers again"));
  } else if (!starter_.Post([this, req] { Launch(req); })) {
    reason = "WorkerShutdown";
    refused = absl::UnavailableError("the worker is stopping, or too many launches wait");
  } else {
    return;
  }
  BATON_LOG(ERROR) << "StartAssignment job " << req.job_id() << " gen " << req.generation()
                   << " refused: " << refused;
  (void)supervisor_->FailAssignment(req.job_id(), req.generation(), reason,
                                    std::string(refused.message()));
}

void Agent::Launch(const baton::v1::StartAssignment& req) {
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
  }
  absl::Status s;
  if (stopping) {
    s = supervisor_->FailAssignment(req.job_id(), req.generation(), "WorkerShutdown",
                                    "the worker stopped before the assignment was launched");
  } else if (s = ProbePeers({req.peers().begin(), req.peers().end()}, ProbeTimeout(), clock_);
             !s.ok()) {
    BATON_LOG(ERROR) << "StartAssignment job " << req.job_id() << " gen " << req.generation()
                     << " refused: " << s;
    s = supervisor_->FailAssignment(req.job_id(), req.generation(), "PeerUnreachable",
                                    std::string(s.message()));
  } else {
    s = supervisor_->LaunchAssignment(req.job_id(), req.generation());
    if (s.ok() && metrics_ != nullptr) metrics_->OnAssignmentStarted(req);
  }
  // Reported by the Supervisor either way; FAILED_PRECONDITION: stopped meanwhile.
  if (!s.ok()) {
    BATON_LOG(WARNING) << "job " << req.job_id() << " gen " << req.generation()
                       << " not launched: " << s;
  }
}

void Agent::ReplyFailed(const std::string& job_id, int64_t generation, const std::string& reason,
                        const absl::Status& status) {
  BATON_LOG(ERROR) << "job " << job_id << " gen " << generation << ": " << reason << ": " << status;
  baton::v1::WorkerMessage reply;
  baton::v1::AssignmentFailed* failed = reply.mutable_assignment_failed();
  failed->set_job_id(job_id);
  failed->set_generation(generation);
  failed->set_reason(reason);
  failed->set_code(AssignmentFailureFromReason(reason));
  failed->set_message(std::string(status.message()));
  outbox_->PushReply(std::move(reply));
}

absl::Duration Agent::ProbeTimeout() const {
  // At most half the lease: a peer not reachable for that long counts as cut off, and the
  // launches queued behind this one wait no longer.
  const absl::Duration lease = lease_.duration();
  return lease > absl::ZeroDuration() ? std::min(options_.peer_probe_timeout, lease / 2)
                                      : options_.peer_probe_timeout;
}

void Agent::PublishLease() { supervisor_->SetLeaseExpiry(lease_.expiry()); }

void Agent::Drain(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return;
    draining_ = true;
    drain_reason_ = reason;
  }
  // Dropped if the stream is down right now; the next Register carries draining instead.
  baton::v1::WorkerMessage message;
  message.mutable_draining()->set_reason(reason);
  outbox_->PushReply(std::move(message));
}

void Agent::ReservePort(const baton::v1::ReservePort& req) {
  const absl::StatusOr<int> port = options_.reserve_port();
  if (!port.ok()) {
    ReplyFailed(
        req.job_id(), req.generation(), "PortUnavailable",
        absl::Status(port.status().code(), absl::StrCat("cannot reserve a port for MASTER_PORT: ",
                                                        port.status().message())));
    return;
  }
  baton::v1::WorkerMessage reply;
  baton::v1::PortReserved* reserved = reply.mutable_port_reserved();
  reserved->set_job_id(req.job_id());
  reserved->set_generation(req.generation());
  reserved->set_port(*port);
  outbox_->PushReply(std::move(reply));
}

void Agent::Preflight(const baton::v1::RunPreflight& req) {
  BATON_LOG(INFO) << "RunPreflight job " << req.job_id() << " gen " << req.generation() << ": "
                  << req.send_to_size() << " link(s)";
  const bool posted = checker_.Post([this, req] {
    baton::v1::WorkerMessage reply;
    *reply.mutable_preflight_result() = RunPreflight(req, options_.preflight, clock_);
    outbox_->PushReply(std::move(reply));
  });
  if (posted) return;
  // Answered at once, so that the coordinator need not wait for its timeout.
  baton::v1::WorkerMessage reply;
  baton::v1::PreflightResult* r = reply.mutable_preflight_result();
  r->set_job_id(req.job_id());
  r->set_generation(req.generation());
  r->set_round(req.round());
  for (const baton::v1::Peer& p : req.send_to()) {
    baton::v1::LinkMeasurement* l = r->add_links();
    l->set_peer_worker_id(p.worker_id());
    l->set_error("not measured: the worker is stopping, or too many pre-flight checks wait");
  }
  outbox_->PushReply(std::move(reply));
}

void Agent::Handle(const baton::v1::CoordinatorMessage& message) {
  switch (message.msg_case()) {
    case baton::v1::CoordinatorMessage::kReservePort:
      ReservePort(message.reserve_port());
      return;
    case baton::v1::CoordinatorMessage::kStartAssignment:
      AcceptStart(message.start_assignment());
      return;
    case baton::v1::CoordinatorMessage::kHeartbeatAck:
      lease_.OnAck(message.heartbeat_ack().seq());
      PublishLease();
      return;
    case baton::v1::CoordinatorMessage::kStopAssignment: {
      const baton::v1::StopAssignment& req = message.stop_assignment();
      BATON_LOG(INFO) << "StopAssignment job " << req.job_id() << " gen " << req.generation()
                      << ": " << req.reason();
      std::optional<absl::Duration> grace;
      if (req.has_grace()) grace = FromProto(req.grace());
      const absl::Status s = supervisor_->StopAssignment(req.job_id(), req.generation(), grace,
                                                         req.keep_waiting_ranks());
      if (!s.ok()) BATON_LOG(INFO) << "StopAssignment: " << s;
      return;
    }
    case baton::v1::CoordinatorMessage::kRequestCheckpoint: {
      const baton::v1::RequestCheckpoint& req = message.request_checkpoint();
      BATON_LOG(INFO) << "RequestCheckpoint job " << req.job_id() << " gen " << req.generation()
                      << " rank " << req.rank() << ": " << req.reason();
      const absl::Status s =
          supervisor_->RequestCheckpoint(req.job_id(), req.generation(), req.rank());
      // Not fatal: the coordinator stops the generation after its checkpoint timeout.
      if (!s.ok()) BATON_LOG(WARNING) << "RequestCheckpoint: " << s;
      return;
    }
    case baton::v1::CoordinatorMessage::kProfileRanks: {
      const baton::v1::ProfileRanks& req = message.profile_ranks();
      BATON_LOG(INFO) << "ProfileRanks " << req.request_id() << " job " << req.job_id() << " gen "
                      << req.generation() << ": " << req.ranks_size() << " rank(s), " << req.steps()
                      << " steps";
      profiles_.Start(req);  // Answers every rank, now or from its polls.
      return;
    }
    case baton::v1::CoordinatorMessage::kRunPreflight:
      Preflight(message.run_preflight());
      return;
    case baton::v1::CoordinatorMessage::kRegistered:
      BATON_LOG(WARNING) << "ignoring a second Registered";
      return;
    case baton::v1::CoordinatorMessage::MSG_NOT_SET:
      BATON_LOG(WARNING) << "ignoring an empty or unknown coordinator message";
      return;
  }
}

// ---------------------------------------------------------------------------------------
// Writer thread.
// ---------------------------------------------------------------------------------------

void Agent::WriterLoop() {
  absl::Time next_heartbeat = absl::InfinitePast();
  int64_t seen_attach = 0;
  for (;;) {
    Stream* stream = nullptr;
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
      if (attached_ != nullptr) {
        stream = attached_;
        writer_busy_ = true;
        if (attach_count_ != seen_attach) {  // A new stream: heartbeat right away.
          seen_attach = attach_count_;
          next_heartbeat = absl::InfinitePast();
        }
      }
    }
    bool ok = true;
    if (stream != nullptr) {
      ok = SendPending(stream, &next_heartbeat, /*force_flush=*/stopping);
      if (ok && stopping) ok = stream->WritesDone();  // The final flush: half-close.
      absl::MutexLock lock(&mu_);
      writer_busy_ = false;
      if (ok && stopping) half_closed_ = true;
      if (!ok && context_ != nullptr) context_->TryCancel();
    }
    if (stopping) break;
    // Until there is work, or the clock reaches the next heartbeat or batch flush. Without
    // a working stream, until the next one is attached (which comes with OnReportsPending).
    outbox_->WaitForWork(stream != nullptr && ok
                             ? std::min(next_heartbeat, outbox_->NextFlushTime())
                             : absl::InfiniteFuture());
  }
  absl::MutexLock lock(&mu_);
  writer_done_ = true;
}

bool Agent::SendPending(Stream* stream, absl::Time* next_heartbeat, bool force_flush) {
  for (const baton::v1::WorkerMessage& reply : outbox_->TakeReplies()) {
    if (!stream->Write(reply)) return false;
  }
  const absl::Time now = clock_->Now();
  if (now >= *next_heartbeat) {
    baton::v1::WorkerMessage heartbeat;
    *heartbeat.mutable_heartbeat()->mutable_time() = ToProto(now);
    heartbeat.mutable_heartbeat()->set_seq(lease_.OnHeartbeatSent(now));
    if (!stream->Write(heartbeat)) return false;
    absl::MutexLock lock(&mu_);
    *next_heartbeat = now + heartbeat_interval_;
  }
  outbox_->TakeReportsPending();  // Cleared before reading the state it announces.
  const ReportLedger::PendingReports reports = reports_.GetPending();
  for (const baton::v1::AssignmentFailed& failed : reports.failed) {
    baton::v1::WorkerMessage message;
    *message.mutable_assignment_failed() = failed;
    if (!stream->Write(message)) return false;
    reports_.MarkSent(failed);
  }
  for (const baton::v1::AssignmentStarted& started : reports.started) {
    baton::v1::WorkerMessage message;
    *message.mutable_assignment_started() = started;
    if (!stream->Write(message)) return false;
    reports_.MarkSent(started);
  }
  // A rank's last lines go out before its exit.
  for (const baton::v1::WorkerMessage& batch :
       outbox_->TakeBatches(force_flush || !reports.exited.empty())) {
    if (!stream->Write(batch)) return false;
  }
  for (const baton::v1::ProcessExited& exited : reports.exited) {
    baton::v1::WorkerMessage message;
    *message.mutable_process_exited() = exited;
    if (!stream->Write(message)) return false;
    reports_.MarkSent(exited);
  }
  return true;
}

}  // namespace baton::worker
