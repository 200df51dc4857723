#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "common/net/coordinator_addresses.h"
#include "common/time/clock.h"
#include "worker/agent/backoff.h"
#include "worker/agent/lease.h"
#include "worker/agent/outbox.h"
#include "worker/agent/profile_collector.h"
#include "worker/agent/report_ledger.h"
#include "worker/agent/serial_executor.h"
#include "worker/host/preflight.h"
#include "worker/host/reserve_port.h"
#include "worker/metrics.h"
#include "worker/supervisor/supervisor.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace baton::worker {

struct AgentOptions {
  // Coordinator addresses (ParseCoordinatorAddresses; at least one): the coordinator's, or
  // its replicas' when it runs as several. With several, each connection attempt goes to
  // the leader (see the Agent's comment).
  std::vector<std::string> coordinators;
  // With several coordinators: the deadline of each leader probe (wall-clock time, as
  // gRPC's deadlines are).
  absl::Duration leader_probe_timeout = absl::Seconds(2);
  // How to reach it: TLS credentials (the cluster CA and this worker's certificate);
  // null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Register fields.
  std::string worker_id;
  std::string hostname;
  std::string advertise_host;
  baton::v1::Resources resources;
  // Port of this worker's ProbeListener (Register.probe_port); 0: none.
  int probe_port = 0;
  // How long the worker waits for its peers' probe ports before it refuses a
  // StartAssignment (AssignmentFailed "PeerUnreachable"); at most half the lease.
  absl::Duration peer_probe_timeout = absl::Seconds(5);
  // Finds a free port for ReservePort (MASTER_PORT); its error is answered with
  // AssignmentFailed "PortUnavailable".
  std::function<absl::StatusOr<int>()> reserve_port = ReserveTcpPort;
  // Heartbeat period until Registered.heartbeat_interval (when set) overrides it.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Delay between connection attempts.
  Backoff::Options backoff;
  // Instead, while the coordinator's replicas hold an election (one answered as a standby,
  // none leads: ElectionUnderway), this delay, so that workers re-attach within a moment of
  // a new leader instead of after a backoff grown during the election.
  absl::Duration election_retry = absl::Milliseconds(200);
  // A connection that brings no Registered within this is abandoned and retried.
  absl::Duration register_timeout = absl::Seconds(10);
  // HTTP/2 keepalive. The ping period matches gRPC servers' default minimum (5 min), so a
  // coordinator with default settings never answers them with GOAWAY "too_many_pings".
  // Setting it also makes gRPC set TCP_USER_TIMEOUT to keepalive_timeout, and since
  // heartbeats keep data in flight, a vanished coordinator host breaks the stream within
  // about keepalive_timeout.
  absl::Duration keepalive_time = absl::Minutes(5);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // On Stop(), how long the final flush may take.
  absl::Duration stop_flush_timeout = absl::Seconds(2);
  // `baton profile` (ProfileRanks): polls and bounds of the ProfileCollector.
  ProfileCollectorOptions profile;
  // RunPreflight: this host's checks (shared memory, GPUs) and its connect timeout.
  PreflightHost preflight;
};

// The worker side of WorkerService.Connect: keeps one bidirectional stream to the coordinator,
// reconnecting with exponential backoff; registers (listing the Supervisor's assignments, so
// exits that happened while disconnected reach the coordinator), heartbeats, executes the
// coordinator's commands on the Supervisor, and sends replies, the reports its ReportLedger
// finds pending in the Supervisor's facts (AssignmentFailed, AssignmentStarted,
// ProcessExited) and the Outbox's batches. A report counts as delivered when its Write
// succeeded; a Register's content when Registered arrived (report_ledger.h).
//
// Lease (worker_service.proto, "Leases"): Registered and each HeartbeatAck renew it; when it
// runs out (no acknowledgement for the lease: a partition, a dead coordinator) the
// Supervisor kills every process at once (Supervisor::SetLeaseExpiry: its own thread keeps
// the time, since the stream's threads may block on a cut network), and StartAssignment is
// refused (AssignmentFailed "LeaseExpired") until a registration grants a new one. Before
// starting processes the worker connects to its peers' probe ports (StartAssignment.peers)
// and refuses (AssignmentFailed "PeerUnreachable") if one cannot be reached.
//
// Failures are reported, never left to a timeout: a command the worker cannot carry out is
// answered with AssignmentFailed at once (worker_service.proto lists the reasons):
// ReservePort ("PortUnavailable"), a refused StartAssignment ("InvalidAssignment",
// "WorkerShutdown") as replies; the rest through the ledger's reports, once none of the
// assignment's processes runs.
//
// Following the leader (common/net/coordinator_addresses.h): with several coordinator
// addresses, each connection attempt first asks their grpc.health.v1 which one reports
// baton.v1.WorkerService SERVING (LeaderFinder), trying first the leader a standby named in
// the last stream's trailing metadata (baton-leader), else the last address the worker
// registered with; if none does, the attempt fails and the reconnect backoff applies. The
// agent keeps one channel per address. With a single address there is no probe.
//
// Time: every timeout, backoff and period (register_timeout, the reconnect backoff, the
// heartbeat, the batch flush, the peer probe, stop_flush_timeout) is measured by the injected
// clock, and every wait ends on an event or on a deadline on that clock; nothing polls.
//
// Threading: three threads. The session thread connects, writes Register, then reads the
// stream and handles each command without blocking: ReservePort, StopAssignment,
// RequestCheckpoint, ProfileRanks (the ProfileCollector writes the request files and
// signals the ranks; its polls answer with ProfileTrace replies) and HeartbeatAck inline,
// RunPreflight by posting it to the checker (a SerialExecutor: the links measured and the
// host checked, about a link window, then a PreflightResult reply; one at a time, at most
// kMaxQueuedPreflights waiting, more answered at once with every link unmeasured),
// and StartAssignment by accepting it into the
// Supervisor (nothing spawned) and posting its launch to the starter. The starter thread
// (a SerialExecutor) launches accepted assignments one at a time, in arrival order: the
// peer probe (up to half the lease), then the spawns (a standby handoff, a fork). So a
// StopAssignment is handled while a probe or a spawn is in progress: an assignment not
// spawned yet then never starts, one being spawned is stopped as soon as its spawns end.
// Neither thread holds mu_ while calling the Supervisor or the stream. The writer thread is
// the only one writing on an established stream: it waits in Outbox::WaitForWork() until
// there is work or its next heartbeat or flush is due, and sends heartbeats, replies,
// reports and batches. mu_ guards the connection state shared by the three. The clock's
// timer callbacks (register timeout, unblocking a stuck writer) only cancel the call. The
// leader probes are gRPC calls with wall-clock deadlines on the session thread: Stop()
// waits for one in progress (at most leader_probe_timeout per address).
class Agent {
 public:
  static constexpr size_t kMaxQueuedPreflights = 16;

  // `supervisor`, `outbox`, `clock` and `metrics` (optional) must outlive the Agent. The
  // Outbox must receive the Supervisor's listener calls (directly or through a
  // MetricsListener). `metrics` learns of every assignment started.
  Agent(AgentOptions options, Supervisor* supervisor, Outbox* outbox, Clock* clock,
        WorkerMetrics* metrics = nullptr);
  ~Agent();  // Stop().

  // Starts the threads and returns; connecting happens in the background.
  absl::Status Start();
  // Fails the assignments waiting for their launch ("WorkerShutdown"; one being probed or
  // spawned finishes first), sends what is pending and half-closes the stream, so that the
  // coordinator reads it all before the call ends (bounded by stop_flush_timeout on the
  // clock, then the call is cancelled); joins the threads. Idempotent.
  void Stop();

  // Tells the coordinator this worker is leaving (SIGTERM): sends Draining now and marks
  // every later Register draining, so a reconnect during the drain says it too. The
  // coordinator then moves the worker's jobs off it (each checkpoints and continues on
  // the other workers) and stops its processes. Idempotent; thread-safe.
  void Drain(const std::string& reason);

  // The lease as this worker holds it (for metrics).
  const Lease& lease() const { return lease_; }

 private:
  using Stream = grpc::ClientReaderWriter<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage>;

  void SessionLoop();
  // One connection, from finding the leader to the end of the stream. Returns why it
  // ended: the stream's final status, naming the address, or the leader probe's error.
  absl::Status RunSession(Backoff& backoff);
  // The stream to `address` on `context`, from connect to its end; its final status.
  // Sets `registered` once Registered arrived.
  grpc::Status Converse(const std::string& address, grpc::ClientContext& context, Backoff& backoff,
                        bool& registered);
  // The Register listing `snapshot`.
  baton::v1::WorkerMessage MakeRegister(
      const std::vector<baton::v1::AssignmentStatus>& snapshot) const;
  // Registered arrived for a Register sent at `register_sent`: takes the lease and the
  // heartbeat interval, and hands `stream` to the writer.
  void Attach(Stream* stream, const baton::v1::Registered& registered, absl::Time register_sent,
              bool register_said_draining);
  // Runs one coordinator command, without blocking. Called on the session thread.
  void Handle(const baton::v1::CoordinatorMessage& message);
  // ReservePort: PortReserved, or AssignmentFailed "PortUnavailable".
  void ReservePort(const baton::v1::ReservePort& req);
  // RunPreflight: posts it to the checker, whose PreflightResult goes out as a reply.
  void Preflight(const baton::v1::RunPreflight& req);

  void WriterLoop();
  // Writes everything that is due; false if the stream broke.
  bool SendPending(Stream* stream, absl::Time* next_heartbeat, bool force_flush);
  // Hands the lease's expiry to the Supervisor, which enforces it.
  void PublishLease();
  // options.peer_probe_timeout, at most half the lease.
  absl::Duration ProbeTimeout() const;
  // StartAssignment on the session thread: accepts it into the Supervisor and posts its
  // launch to the starter, unless it is refused (a malformed request, a worker shutting
  // down, no lease: AssignmentFailed).
  void AcceptStart(const baton::v1::StartAssignment& req);
  // On the starter thread: probes the peers, then spawns the accepted assignment, or fails
  // it ("PeerUnreachable", "WorkerShutdown").
  void Launch(const baton::v1::StartAssignment& req);
  // Queues AssignmentFailed (`reason`, the status's message) as a reply.
  void ReplyFailed(const std::string& job_id, int64_t generation, const std::string& reason,
                   const absl::Status& status);

  const AgentOptions options_;
  Supervisor* const supervisor_;
  Outbox* const outbox_;
  Clock* const clock_;
  WorkerMetrics* const metrics_;  // May be null.
  Lease lease_;
  // The coordinator's addresses and one channel to each.
  LeaderFinder coordinators_;
  // The address to probe first on the next attempt: the last stream's leader hint, else the
  // last address registered with. Session thread only.
  std::string preferred_coordinator_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool writer_done_ ABSL_GUARDED_BY(mu_) = false;
  // The writer's final flush half-closed the stream (Stop() waits for the session to end).
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  // Set by Drain(): Register says draining.
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::string drain_reason_ ABSL_GUARDED_BY(mu_);
  // The connection being set up or in use (nullptr between connections).
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Set once Registered arrived; the writer only writes on an attached stream.
  Stream* attached_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t attach_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool writer_busy_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);

  ReportLedger reports_;       // Over the Supervisor's facts; the session and writer threads.
  ProfileCollector profiles_;  // Sends its ProfileTrace answers as replies.
  std::thread session_thread_;
  std::thread writer_thread_;
  SerialExecutor starter_;
  SerialExecutor checker_{kMaxQueuedPreflights};
};

}  // namespace baton::worker
