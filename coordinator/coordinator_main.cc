// baton-coordinator: accepts jobs, gangs workers, runs rendezvous, supervises training.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/time/clock.h"
#include "coordinator/ha/etcd_target.h"
#include "coordinator/ha/replica.h"
#include "coordinator/policy/election.h"
#include "coordinator/queues/queue_file.h"
#include "coordinator/server/server.h"

namespace {

// Every flag's default is the option's (server.h and the options it holds), so neither
// restates the other. Flags only the daemon has (ports files, the metrics address, which
// the library leaves off) keep theirs here.
const baton::coordinator::ServerOptions& Defaults() {
  static const auto* const defaults = new baton::coordinator::ServerOptions();
  return *defaults;
}

// --command_job_roles' default: AccessOptions::command_roles, comma-separated.
std::string DefaultCommandRoles() {
  std::vector<std::string> names;
  for (baton::coordinator::Role role : Defaults().access.command_roles) {
    names.emplace_back(baton::coordinator::RoleName(role));
  }
  return absl::StrJoin(names, ",");
}

}  // namespace

ABSL_FLAG(std::string, listen, Defaults().listen,
          "gRPC address to serve on (HOST:PORT). Port 0 picks a free port; the bound port is "
          "logged and written to --port_file.");
ABSL_FLAG(std::string, tls_cert, "",
          "The coordinator's TLS certificate chain (PEM). Its subjectAltNames must cover the "
          "names and addresses workers and users dial (tools/certs.sh --coordinator-san).");
ABSL_FLAG(std::string, tls_key, "", "The private key of --tls_cert (PEM).");
ABSL_FLAG(std::string, ca, "",
          "The cluster CA (PEM). Workers must present a certificate it signed, and register "
          "under that certificate's name (CN or DNS SAN).");
ABSL_FLAG(std::string, token_file, "",
          "The users' bearer tokens as '<sha256 hex of token> <user> <role>' lines (roles: "
          "viewer, submitter, admin; tools/certs.sh makes it). Required with TLS. Re-read on "
          "SIGHUP.");
ABSL_FLAG(std::string, queue_file, "",
          "Share the cluster through queues: a YAML file of queues (quotas in slots and GPUs, "
          "cohorts that lend idle quota, who may submit), priority classes and the default "
          "queue (docs/ARCHITECTURE.md, 'Sharing a cluster'). Jobs are then admitted by "
          "priority and fair share, with backfill, and preempted (after a checkpoint) or "
          "shrunk to make room. Empty: first come, first served. Re-read on SIGHUP; a file "
          "with an error keeps the previous queues.");
ABSL_FLAG(std::string, command_job_roles, DefaultCommandRoles(),
          "Roles that may submit `command` jobs (any program on the workers) and trainer jobs "
          "with trainer.torchscript_path (a TorchScript module is code), e.g. 'admin'. "
          "Empty: nobody.");
ABSL_FLAG(int, max_streams_per_user, Defaults().streams.max_per_user,
          "Open watch and log streams (`baton watch`, `baton logs -f`, --wait) one user may "
          "hold at once; more are refused with RESOURCE_EXHAUSTED (1..100000).");
ABSL_FLAG(int, max_jobs_per_user, Defaults().max_jobs_per_user,
          "Jobs one user may have that have not ended (queued, running or restarting); more "
          "submits are refused with RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(int, max_streams, Defaults().streams.max_total,
          "Open watch and log streams of all users together; more are refused with "
          "RESOURCE_EXHAUSTED (1..1000000).");
ABSL_FLAG(std::string, health_listen, "",
          "Plaintext address (HOST:PORT) serving only grpc.health.v1, with the same statuses as "
          "--listen, for probes that cannot speak TLS (Kubernetes gRPC probes). Empty: none.");
ABSL_FLAG(bool, insecure, false,
          "Serve plaintext instead of TLS. Only allowed when --listen is a loopback address "
          "(127.0.0.1, [::1], localhost). Without --token_file every caller is then an "
          "anonymous admin: for a single-user machine only.");
ABSL_FLAG(std::string, state_dir, Defaults().state_dir,
          "Directory for the coordinator's SQLite state (jobs, events, metrics, logs). "
          "Restarting with the same directory loses nothing.");
ABSL_FLAG(std::string, store, "sqlite",
          "Where the state lives: 'sqlite' (one file in --state_dir; one coordinator) or "
          "'etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?max_txn_ops=N&max_request_bytes=N]' "
          "(jobs and events in etcd under /PREFIX/, default 'baton'; metric points and log "
          "lines in --state_dir): then several coordinators may run on the same etcd, one "
          "leads and the others stand by, answering UNAVAILABLE with the leader's address, "
          "and take over within about --election_ttl of losing it. The limits are etcd's "
          "--max-txn-ops and --max-request-bytes (default: etcd's defaults).");
ABSL_FLAG(std::string, advertise_address, "",
          "With --store=etcd://: this replica's address as workers and clients dial it "
          "(HOST:PORT, e.g. $(POD_IP):7070). Required there.");
ABSL_FLAG(std::string, etcd_ca, "",
          "With --store=etcd://: the CA (PEM) etcd's server certificates chain to; set means "
          "TLS to etcd. Empty: plaintext (loopback or a trusted network only).");
ABSL_FLAG(std::string, etcd_cert, "",
          "With --etcd_ca: this coordinator's client certificate for etcd (PEM), if etcd "
          "requires one (--client-cert-auth).");
ABSL_FLAG(std::string, etcd_key, "", "The private key of --etcd_cert (PEM).");
ABSL_FLAG(absl::Duration, election_ttl, baton::coordinator::ElectionOptions().ttl,
          "With --store=etcd://: the etcd lease of the leader key. A dead leader is replaced "
          "after about this long; a leader that cannot renew it for this long less 0.5s "
          "stops (exits). Shorter fails over faster; longer rides out slower etcd answers. "
          "At least 2s and below --worker_lease.");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound gRPC port is written here (atomically) once serving.");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:7071",
          "Prometheus metrics address (HOST:PORT), served at /metrics. Empty: no metrics "
          "endpoint. Port 0 picks a free port; it is logged and written to "
          "--metrics_port_file. If it cannot be bound the coordinator logs an error and "
          "serves without it.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, the bound metrics port is written here (atomically) once serving.");
ABSL_FLAG(absl::Duration, heartbeat_interval, Defaults().coordinator.heartbeat_interval,
          "How often workers must send heartbeats.");
ABSL_FLAG(absl::Duration, worker_lease, Defaults().lease.lease,
          "Worker lease. A worker kills its training processes when the coordinator has not "
          "acknowledged a heartbeat for this long (a partition, a dead coordinator); the "
          "coordinator counts a worker not heard from for this long plus "
          "--worker_lease_margin as lost, its processes as stopped, and only then starts "
          "its jobs' next generation elsewhere. Longer rides out longer coordinator outages "
          "and network blips without stopping training; shorter recovers faster from a "
          "partitioned or dead host. Keep it well above --heartbeat_interval and a "
          "coordinator restart.");
ABSL_FLAG(absl::Duration, worker_lease_margin, Defaults().lease.margin,
          "Added to --worker_lease before the coordinator counts a silent worker's lease as "
          "certainly expired: the worker noticing the expiry and its processes dying.");
ABSL_FLAG(absl::Duration, rendezvous_timeout, Defaults().coordinator.rendezvous_timeout,
          "A job whose processes have not all started this long after scheduling fails.");
ABSL_FLAG(absl::Duration, reattach_timeout, Defaults().coordinator.reattach_timeout,
          "After a restart, how long running jobs wait for their workers to report back.");
ABSL_FLAG(absl::Duration, history_retention, Defaults().retention.history_max_age,
          "Metric points and log lines older than this are deleted from the state.");
ABSL_FLAG(int64_t, max_points_per_job, Defaults().retention.max_points_per_job,
          "Newest metric points kept per job (0: no limit); older ones are deleted.");
ABSL_FLAG(int64_t, max_log_bytes_per_job, Defaults().retention.max_log_bytes_per_job,
          "Newest log lines kept per job, up to this many bytes of text (0: no limit).");
ABSL_FLAG(absl::Duration, job_retention, Defaults().retention.job_retention,
          "A finished job (row, events, points, logs) is deleted this long after it ended "
          "('inf': never).");
ABSL_FLAG(absl::Duration, store_stall_limit, Defaults().store_stall_limit,
          "A state store call running longer than this (a hung mount or dying disk under "
          "--state_dir) stops the coordinator (exit 1), to be restarted where its state is "
          "reachable.");
ABSL_FLAG(absl::Duration, stop_grace, Defaults().coordinator.stop_grace,
          "Time between SIGTERM and SIGKILL when stopping a job's processes.");
ABSL_FLAG(absl::Duration, checkpoint_timeout, Defaults().coordinator.checkpoint_timeout,
          "A planned resize (a worker drains or joins) asks rank 0 to checkpoint at its next "
          "step boundary first; after this long without its exit the generation is stopped "
          "anyway (losing the steps since its last checkpoint).");
ABSL_FLAG(std::string, check_queue_file, "",
          "Only check this queue file (as --queue_file would read it), print what it "
          "defines or the error (file:line:col, field, what is allowed), and exit 0 or 1. "
          "Check an edited file before a rollout or a SIGHUP.");
ABSL_FLAG(absl::Duration, fair_share_half_life, Defaults().coordinator.fair_share_half_life,
          "With --queue_file: the half-life of a user's recorded usage (slot-seconds), by which "
          "fair share orders the waiting jobs of one queue's users.");
ABSL_FLAG(absl::Duration, unhealthy_recheck_after, Defaults().coordinator.unhealthy_recheck_after,
          "A worker a job's pre-flight check found slow or failing gets no new gangs for this "
          "long; then the next gang it joins checks it again (`baton workers` shows the mark).");

namespace {

// ServerOptions from the flags; INVALID_ARGUMENT naming the flags that conflict.
absl::StatusOr<baton::coordinator::ServerOptions> OptionsFromFlags() {
  baton::coordinator::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.security.insecure = absl::GetFlag(FLAGS_insecure);
  options.health_listen = absl::GetFlag(FLAGS_health_listen);
  options.security.tls = {absl::GetFlag(FLAGS_ca), absl::GetFlag(FLAGS_tls_cert),
                          absl::GetFlag(FLAGS_tls_key)};
  if (!options.security.insecure && options.security.tls.ca.empty()) {
    return absl::InvalidArgumentError(
        "--ca (the cluster CA that signs worker certificates) is required with TLS");
  }
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.queue_file = absl::GetFlag(FLAGS_queue_file);
  options.access.command_roles.clear();
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_command_job_roles), ',', absl::SkipEmpty())) {
    absl::StatusOr<baton::coordinator::Role> role = baton::coordinator::ParseRole(name);
    if (!role.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--command_job_roles: ", role.status().message()));
    }
    options.access.command_roles.insert(*role);
  }
  options.max_jobs_per_user = absl::GetFlag(FLAGS_max_jobs_per_user);
  if (options.max_jobs_per_user < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_jobs_per_user=", options.max_jobs_per_user,
                     " is negative; allowed: 0 (no "
                     "limit) or more"));
  }
  options.streams.max_per_user = absl::GetFlag(FLAGS_max_streams_per_user);
  options.streams.max_total = absl::GetFlag(FLAGS_max_streams);
  if (options.streams.max_per_user < 1 || options.streams.max_per_user > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_streams_per_user=", options.streams.max_per_user,
                     " is out of range; allowed: 1..100000"));
  }
  if (options.streams.max_total < 1 || options.streams.max_total > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_streams=", options.streams.max_total,
                                                   " is out of range; allowed: 1..1000000"));
  }
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.coordinator.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.lease.lease = absl::GetFlag(FLAGS_worker_lease);
  options.lease.margin = absl::GetFlag(FLAGS_worker_lease_margin);
  if (options.lease.lease <= 2 * options.coordinator.heartbeat_interval ||
      options.lease.margin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker_lease (", absl::FormatDuration(options.lease.lease),
                     ") must exceed twice --heartbeat_interval (",
                     absl::FormatDuration(options.coordinator.heartbeat_interval),
                     "), and --worker_lease_margin must be >= 0"));
  }
  options.coordinator.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  options.coordinator.reattach_timeout = absl::GetFlag(FLAGS_reattach_timeout);
  options.coordinator.stop_grace = absl::GetFlag(FLAGS_stop_grace);
  options.coordinator.checkpoint_timeout = absl::GetFlag(FLAGS_checkpoint_timeout);
  options.coordinator.unhealthy_recheck_after = absl::GetFlag(FLAGS_unhealthy_recheck_after);
  options.coordinator.fair_share_half_life = absl::GetFlag(FLAGS_fair_share_half_life);
  options.retention.history_max_age = absl::GetFlag(FLAGS_history_retention);
  options.retention.max_points_per_job = absl::GetFlag(FLAGS_max_points_per_job);
  options.retention.max_log_bytes_per_job = absl::GetFlag(FLAGS_max_log_bytes_per_job);
  options.retention.job_retention = absl::GetFlag(FLAGS_job_retention);
  options.store_stall_limit = absl::GetFlag(FLAGS_store_stall_limit);
  if (options.store_stall_limit <= absl::Seconds(1)) {
    return absl::InvalidArgumentError("--store_stall_limit must be more than 1s");
  }
  if (options.retention.history_max_age <= absl::ZeroDuration() ||
      options.retention.job_retention <= absl::ZeroDuration() ||
      options.retention.max_points_per_job < 0 || options.retention.max_log_bytes_per_job < 0) {
    return absl::InvalidArgumentError(
        "--history_retention and --job_retention must be > 0, --max_points_per_job and "
        "--max_log_bytes_per_job >= 0");
  }
  return options;
}

// Writes the bound gRPC port to --port_file (for scripts and tests).
absl::Status WritePortFile(int port) {
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (port_file.empty()) return absl::OkStatus();
  if (absl::Status s = baton::WritePortFile(port_file, port); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--port_file: ", s.message()));
  }
  return absl::OkStatus();
}

// Writes the bound metrics port to --metrics_port_file.
absl::Status WriteMetricsPortFile(const baton::coordinator::CoordinatorServer& server) {
  const std::string metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  if (!metrics_port_file.empty() && server.metrics_port() != 0) {
    if (absl::Status s = baton::WritePortFile(metrics_port_file, server.metrics_port()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--metrics_port_file: ", s.message()));
    }
  }
  return absl::OkStatus();
}

// Replica options from the flags, for --store=etcd://.
absl::StatusOr<baton::coordinator::ReplicaOptions> ReplicaOptionsFromFlags(
    baton::coordinator::ServerOptions server, baton::coordinator::EtcdTarget etcd) {
  baton::coordinator::ReplicaOptions options;
  options.server = std::move(server);
  options.etcd = std::move(etcd);
  options.etcd_tls = {absl::GetFlag(FLAGS_etcd_ca), absl::GetFlag(FLAGS_etcd_cert),
                      absl::GetFlag(FLAGS_etcd_key)};
  if (options.etcd_tls.ca.empty() &&
      !(options.etcd_tls.cert.empty() && options.etcd_tls.key.empty())) {
    return absl::InvalidArgumentError("--etcd_cert and --etcd_key need --etcd_ca");
  }
  options.advertise = absl::GetFlag(FLAGS_advertise_address);
  options.election.ttl = absl::GetFlag(FLAGS_election_ttl);
  return options;
}

// --store=etcd://: a replica, standby or leader, until SIGINT/SIGTERM (SIGHUP re-reads the
// tokens of a leader). Exits 1 if its coordinator halted.
int RunReplica(baton::coordinator::ServerOptions server, baton::coordinator::EtcdTarget etcd,
               const sigset_t& stop_signals) {
  absl::StatusOr<baton::coordinator::ReplicaOptions> options =
      ReplicaOptionsFromFlags(std::move(server), std::move(etcd));
  if (!options.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  baton::coordinator::CoordinatorReplica replica(*std::move(options), baton::RealClock::Get());
  absl::Status s = replica.Start();
  if (s.ok()) s = WritePortFile(replica.port());
  const std::string metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  if (s.ok() && !metrics_port_file.empty() && replica.metrics_port() != 0) {
    s = baton::WritePortFile(metrics_port_file, replica.metrics_port());
  }
  if (!s.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  int sig = 0;
  while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
    if (absl::Status reload = replica.ReloadTokens(); !reload.ok()) {
      BATON_LOG(ERROR) << "SIGHUP: " << reload << "; the previous tokens stay in force";
    }
    if (absl::Status reload = replica.ReloadQueues(); !reload.ok()) {
      BATON_LOG(ERROR) << "SIGHUP: " << reload << "; the previous queues stay in force";
    }
  }
  const bool halted = replica.halted();
  if (!halted) BATON_LOG(INFO) << "signal " << sig << ": shutting down";
  replica.Shutdown();
  return halted ? 1 : 0;
}

// --check_queue_file: 0 if `path` is a valid queue file (printing its queues), else 1.
int CheckQueueFile(const std::string& path) {
  absl::StatusOr<baton::coordinator::QueueSet> set = baton::coordinator::ReadQueueFile(path);
  if (!set.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n", std::string(set.status().message()).c_str());
    return 1;
  }
  std::printf("%s: %zu queue(s), %zu priority class(es), default queue '%s'\n", path.c_str(),
              set->queues.size(), set->priority_classes.size(), set->default_queue.c_str());
  for (const baton::coordinator::QueueConfig& q : set->queues) {
    std::printf("  %s: cohort '%s', quota %lld slots, %lld GPUs\n", q.name.c_str(),
                q.cohort.c_str(), static_cast<long long>(q.nominal.slots),
                static_cast<long long>(q.nominal.gpus));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The Baton coordinator daemon.\n\n"
      "Usage: baton-coordinator --tls_cert=F --tls_key=F --ca=F --token_file=F\n"
      "                         [--listen=0.0.0.0:7070] [--state_dir=DIR] [--port_file=F]\n"
      "                         [--metrics_listen=0.0.0.0:7071]\n"
      "       baton-coordinator --insecure --listen=127.0.0.1:7070 ...   (plaintext, "
      "loopback only)\n\n"
      "Serves baton.v1.JobService and ClusterService (for the `baton` CLI: bearer tokens), "
      "WorkerService (for baton-worker daemons: client certificates from --ca), "
      "grpc.health.v1 (open to all) and server reflection. tools/certs.sh makes the CA, "
      "certificates and tokens. SIGHUP re-reads --token_file and --queue_file.");
  absl::ParseCommandLine(argc, argv);
  if (const std::string path = absl::GetFlag(FLAGS_check_queue_file); !path.empty()) {
    return CheckQueueFile(path);
  }

  // Block the stop signals in every thread; main waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<baton::coordinator::ServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  // A store that cannot commit stops the coordinator: memory must never run ahead of disk.
  options->on_halt = [](const absl::Status& why) {
    std::fprintf(stderr, "baton-coordinator: %s\n", std::string(why.message()).c_str());
    kill(getpid(), SIGTERM);  // wakes the sigwait below; the exit status says it failed
  };
  // A store stuck in the kernel holds the event loop: no graceful shutdown is possible.
  options->on_store_stuck = [](const absl::Status& why) {
    std::fprintf(stderr, "baton-coordinator: %s; exiting\n", std::string(why.message()).c_str());
    std::_Exit(1);
  };
  absl::StatusOr<std::optional<baton::coordinator::EtcdTarget>> etcd =
      baton::coordinator::ParseStoreFlag(absl::GetFlag(FLAGS_store));
  if (!etcd.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n", std::string(etcd.status().message()).c_str());
    return 2;
  }
  if (etcd->has_value()) return RunReplica(*std::move(options), **std::move(etcd), stop_signals);
  baton::coordinator::CoordinatorServer server(*options, baton::RealClock::Get());
  absl::Status s = server.Start();
  if (s.ok()) s = WritePortFile(server.port());
  if (s.ok()) s = WriteMetricsPortFile(server);
  if (!s.ok()) {
    std::fprintf(stderr, "baton-coordinator: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  int sig = 0;
  while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
    if (absl::Status reload = server.ReloadTokens(); reload.ok()) {
      BATON_LOG(INFO) << "SIGHUP: re-read the token file";
    } else {
      BATON_LOG(ERROR) << "SIGHUP: " << reload << "; the previous tokens stay in force";
    }
    if (absl::Status reload = server.ReloadQueues(); !reload.ok()) {
      BATON_LOG(ERROR) << "SIGHUP: " << reload << "; the previous queues stay in force";
    }
  }
  const bool halted = server.halted();
  if (!halted) BATON_LOG(INFO) << "signal " << sig << ": shutting down";
  server.Shutdown();
  return halted ? 1 : 0;
}
