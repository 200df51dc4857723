// baton-worker: the per-machine daemon. Registers this machine's resources with the
// coordinator, runs and supervises the training processes of its assignments, and relays
// their exits, metrics and log lines (WorkerDaemon, worker_daemon.h). main() only maps
// flags -> WorkerDaemonOptions -> Start() -> waits for SIGINT/SIGTERM -> Drain/Shutdown.

#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/net/coordinator_addresses.h"
#include "common/private_file.h"
#include "common/protocol_version.h"
#include "common/security/tls.h"
#include "common/status_macros.h"
#include "common/time/clock.h"
#include "worker/agent/agent.h"
#include "worker/agent/resources.h"
#include "worker/agent/worker_identity.h"
#include "worker/host/host_address.h"
#include "worker/process/standby_launcher.h"
#include "worker/supervisor/rank_env.h"
#include "worker/supervisor/supervisor.h"
#include "worker/supervisor/trainer_args.h"
#include "worker/worker_daemon.h"

extern char** environ;

namespace {

// Flags take their defaults from the options they set (supervisor.h, agent.h,
// standby_launcher.h), so neither restates the other. Flags only the daemon has keep theirs
// here.
const baton::worker::SupervisorOptions& SupervisorDefaults() {
  static const auto* const defaults = new baton::worker::SupervisorOptions();
  return *defaults;
}
const baton::worker::AgentOptions& AgentDefaults() {
  static const auto* const defaults = new baton::worker::AgentOptions();
  return *defaults;
}
const baton::worker::StandbyLauncherOptions& StandbyDefaults() {
  static const auto* const defaults = new baton::worker::StandbyLauncherOptions();
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::string, coordinator, "localhost:7070",
          "Coordinator WorkerService address, HOST:PORT; or the addresses of its replicas, "
          "comma-separated, when it runs as several (the worker connects to the one that "
          "leads, as its grpc.health.v1 tells).");
ABSL_FLAG(std::string, work_dir, "./baton-worker",
          "Directory for this worker's state (worker_id) and the ranks' directories "
          "(jobs/<job>/gen-<g>/rank-<r>/ with stdout.log and stderr.log). Created if missing.");
ABSL_FLAG(std::vector<std::string>, allowed_paths, {},
          "Comma-separated absolute directories a job's checkpoint_dir, command.working_dir, "
          "trainer.data_dir and trainer.sample_log may lie under (e.g. a shared checkpoint "
          "file system), besides the job's own directory <work_dir>/jobs/<job>, which is "
          "always allowed. Paths are resolved on this machine (symlinks followed, '..' "
          "applied); anything else fails the job with PathNotAllowed. Under --work_dir a "
          "job may only use its own directory.");
ABSL_FLAG(bool, confine_ranks, SupervisorDefaults().confine_ranks,
          "Confine every rank started by fork/exec with Landlock (Linux >= 5.13): it cannot "
          "read or write anything under --work_dir (other jobs' directories, the worker's "
          "files) but its own job's directory. Without Landlock in the kernel ranks run "
          "unconfined (logged once).");
ABSL_FLAG(std::string, snapshot_root, "",
          "Directory holding each job's in-memory snapshots of its training state "
          "(<dir>/<job>, kept across the job's restarts so that a restarted gang resumes from "
          "the newest step a survivor holds; removed 10 minutes after the job's last rank here "
          "ended). Default: <work_dir>/snapshots. Best on a memory file system (a tmpfs; on "
          "Kubernetes an emptyDir with medium Memory); not below /dev/shm while ranks are "
          "confined. 'none': no snapshots.");
ABSL_FLAG(int64_t, max_rank_log_bytes, SupervisorDefaults().max_rank_log_bytes,
          "Bytes each rank's stdout.log and stderr.log may keep on this worker's disk; then a "
          "marker line says the rest was not kept (>= 1).");
ABSL_FLAG(int, max_rank_log_lines_per_second, SupervisorDefaults().max_rank_log_lines_per_second,
          "Lines of each rank's stdout and of its stderr relayed to the coordinator per "
          "second; more are dropped, and a marker line says how many (>= 1).");
ABSL_FLAG(int, slots, 0,
          "Training slots (one process each) offered to the coordinator. 0: one per NVIDIA "
          "GPU, or 1 without GPUs.");
ABSL_FLAG(std::string, trainer, "",
          "Path of baton-trainer, run for jobs using the built-in trainer. Default: "
          "baton-trainer next to this binary, then <this dir>/trainer/baton-trainer, then "
          "$PATH.");
ABSL_FLAG(int, standby_trainers, -1,
          "Warm standby baton-trainer processes kept started (LibTorch loaded) so that a "
          "(re)started rank of the built-in trainer skips about a second of start-up. -1: one "
          "per slot; 0: none (every rank is fork+exec'd).");
ABSL_FLAG(absl::Duration, standby_refill_delay, StandbyDefaults().refill_delay,
          "A used standby is replaced this long after the last trainer launch, so its "
          "start-up does not compete with the ranks just launched.");
ABSL_FLAG(bool, standby_idle_priority, StandbyDefaults().idle_priority,
          "Start standby trainers under SCHED_IDLE, so that loading LibTorch takes only CPU "
          "time the ranks leave idle; the rank a standby becomes runs at the worker's "
          "priority. Needs CAP_SYS_NICE (to set a standby back at handoff); without it, "
          "standbys start at the worker's priority.");
ABSL_FLAG(std::string, advertise_host, "",
          "Address other workers reach this one at (MASTER_ADDR when it runs rank 0). Empty: "
          "the address of --interface if set, else the source address of this host's route "
          "to the coordinator (what its network sees), else the address the coordinator "
          "sees this worker connect from.");
ABSL_FLAG(std::string, interface, "",
          "Network interface for training traffic between hosts: ranks get "
          "GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME set to it (unless the worker's "
          "environment or the job's env sets them). Empty: the interface of the route to "
          "the coordinator.");
ABSL_FLAG(int, probe_port, 0,
          "TCP port of the reachability probe listener (all interfaces): before starting a "
          "job's processes, every worker of the job connects to the others' probe ports at "
          "their advertised addresses, so an unreachable address fails the job's generation "
          "at once, naming it, instead of hanging its rendezvous. 0: a free port.");
ABSL_FLAG(absl::Duration, peer_probe_timeout, AgentDefaults().peer_probe_timeout,
          "How long a worker waits for its peers' probe ports before it refuses to start a "
          "job's processes.");
ABSL_FLAG(absl::Duration, heartbeat_interval, AgentDefaults().heartbeat_interval,
          "Heartbeat period; the coordinator's Registered message may override it.");
ABSL_FLAG(absl::Duration, stop_grace, SupervisorDefaults().default_stop_grace,
          "SIGTERM -> SIGKILL grace when a StopAssignment carries none, and on shutdown.");
ABSL_FLAG(absl::Duration, rejoin_timeout, SupervisorDefaults().rejoin_timeout,
          "Healthy ranks of the built-in trainer stay alive when a peer fails: a rank that lost "
          "a peer waits (its BATON_REJOIN_FD), and when the coordinator stops its generation "
          "asking to keep waiting ranks, this worker keeps it and the job's next generation "
          "here takes it over in the same process (no restart, no reload). How long a stopped "
          "rank may take to say it waits (it is not signalled meanwhile), and how long a kept "
          "process waits for its next generation before it is let go. 0: never.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "On SIGTERM (Kubernetes eviction, preemption) the worker drains: it tells the "
          "coordinator, which has each of its jobs checkpoint at the next step boundary and "
          "continue on the other workers, and exits once its processes ended and their exits "
          "were reported, or after this long. SIGINT, a second SIGTERM or 0 stops at once. "
          "Keep it below the pod's terminationGracePeriodSeconds minus --stop_grace.");
ABSL_FLAG(std::string, health_listen, "",
          "Plaintext address (HOST:PORT) answering grpc.health.v1.Health/Check only, for "
          "Kubernetes' gRPC probes: service \"\" is SERVING while the daemon runs, "
          "\"baton.v1.WorkerService\" while this worker holds a lease from the coordinator "
          "(registered, heartbeats acknowledged). Empty: none.");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:7072",
          "Prometheus metrics address (HOST:PORT), served at /metrics. Empty: no metrics "
          "endpoint. Port 0 picks a free port; it is logged and written to "
          "--metrics_port_file. If it cannot be bound the worker logs an error and runs "
          "without it.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, the bound metrics port is written here (atomically) once serving.");
ABSL_FLAG(std::string, worker_id, "",
          "Worker identity. With TLS it must be a name of --tls_cert (default: its subject "
          "CN). With --insecure the default is read from <work_dir>/worker_id, created "
          "(random) on first start, so restarts keep the identity.");
ABSL_FLAG(std::string, ca, "", "The cluster CA (PEM) the coordinator's certificate must chain to.");
ABSL_FLAG(std::string, tls_cert, "",
          "This worker's certificate (PEM), signed by the cluster CA; the coordinator lets "
          "it register only under the certificate's name (tools/certs.sh --worker ID).");
ABSL_FLAG(std::string, tls_key, "", "The private key of --tls_cert (PEM).");
ABSL_FLAG(bool, insecure, false,
          "Talk plaintext to the coordinator instead of TLS. Only allowed when --coordinator "
          "is a loopback address.");

namespace baton::worker {
namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  return ::gethostname(buf, sizeof(buf) - 1) == 0 ? std::string(buf) : "unknown";
}

// --coordinator's addresses; INVALID_ARGUMENT naming the flag if it is malformed.
absl::StatusOr<std::vector<std::string>> CoordinatorAddresses() {
  absl::StatusOr<std::vector<std::string>> addresses =
      ParseCoordinatorAddresses(absl::GetFlag(FLAGS_coordinator));
  if (!addresses.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator: ", addresses.status().message()));
  }
  return addresses;
}

// The address to advertise and the interface ranks use, from --advertise_host, --interface
// and the route to `coordinator` (the first of --coordinator: replicas share a network; see
// the flags). An unusable --interface is an error; a route that cannot be found (the
// coordinator's name does not resolve yet) leaves both to the defaults: the coordinator
// uses the peer address, Gloo and NCCL their own choice.
absl::StatusOr<HostAddress> NetworkIdentity(const std::string& coordinator) {
  HostAddress identity;
  if (const std::string name = absl::GetFlag(FLAGS_interface); !name.empty()) {
    absl::StatusOr<HostAddress> found = AddressOf(name);
    if (!found.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--interface=", name, ": ", found.status().message()));
    }
    identity = *found;
  } else {
    absl::StatusOr<HostAddress> route = RouteTo(coordinator);
    if (route.ok()) {
      identity = *route;
    } else {
      BATON_LOG(WARNING) << "cannot tell which address other hosts reach this one at: "
                         << route.status()
                         << "; advertising the address the coordinator sees (set "
                            "--advertise_host and --interface to choose)";
    }
  }
  if (const std::string host = absl::GetFlag(FLAGS_advertise_host); !host.empty()) {
    identity.address = host;
  }
  BATON_LOG(INFO) << "advertising "
                  << (identity.address.empty() ? "the peer address" : identity.address)
                  << ", training traffic on "
                  << (identity.interface.empty() ? "the default interface" : identity.interface);
  return identity;
}

// While it lives, a second SIGINT or SIGTERM (blocked in every thread, so left to sigwait)
// ends the drain: WorkerDaemon::Drain returns at once.
class SecondSignalWatcher {
 public:
  SecondSignalWatcher(const sigset_t& signals, WorkerDaemon* daemon)
      : thread_([this, signals, daemon] {
          int signo = 0;
          sigwait(&signals, &signo);
          if (done_.load()) return;
          BATON_LOG(INFO) << "second stop signal (" << strsignal(signo) << "); ending the drain";
          daemon->EndDrain();
        }) {}
  // Ends the thread with a signal of its own.
  ~SecondSignalWatcher() {
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// What the worker learns about itself before it starts: where it works, who it is, its
// trainer, resources and network identity.
struct Self {
  std::string work_dir;
  std::string worker_id;
  std::string trainer = "baton-trainer";
  bool trainer_found = false;
  baton::v1::Resources resources;
  HostAddress network;
  std::vector<std::string> coordinators;  // --coordinator's addresses
  std::string snapshot_root;              // Resolved; empty: none.
};

// --snapshot_root, made 0700 and resolved: empty for 'none'. FAILED_PRECONDITION for a root
// below /dev/shm with confined ranks: Landlock grants a confined rank the hidden root's
// ancestors' entries as they were at its start, so the shared-memory segments its gang
// makes later in /dev/shm would be out of its reach.
absl::StatusOr<std::string> SnapshotRoot(const std::string& work_dir) {
  std::string root = absl::GetFlag(FLAGS_snapshot_root);
  if (root == "none") return std::string();
  if (root.empty()) root = work_dir + "/snapshots";
  if (root[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--snapshot_root: \"", root, "\" is not an absolute path (or 'none')"));
  }
  RETURN_IF_ERROR(MakePrivateDirs(root));
  std::error_code ec;
  const std::string real = std::filesystem::canonical(root, ec).string();
  if (ec)
    return absl::FailedPreconditionError(
        absl::StrCat("--snapshot_root ", root, ": ", ec.message()));
  if (absl::GetFlag(FLAGS_confine_ranks) &&
      (real == "/dev/shm" || absl::StartsWith(real, "/dev/shm/"))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--snapshot_root ", real,
        " is below /dev/shm: confined ranks could then not create "
        "shared-memory segments there; use another tmpfs mount (or --confine_ranks=false)"));
  }
  return real;
}

absl::StatusOr<Self> DiscoverSelf() {
  Self self;
  ASSIGN_OR_RETURN(self.coordinators, CoordinatorAddresses());
  for (const std::string& root : absl::GetFlag(FLAGS_allowed_paths)) {
    if (root.empty() || root[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("--allowed_paths: \"", root, "\" is not an absolute path"));
    }
  }
  RETURN_IF_ERROR(MakePrivateDirs(absl::GetFlag(FLAGS_work_dir)));  // 0700 if created.
  std::error_code ec;
  self.work_dir = std::filesystem::canonical(absl::GetFlag(FLAGS_work_dir), ec).string();
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--work_dir ", absl::GetFlag(FLAGS_work_dir), ": ", ec.message()));
  }
  ASSIGN_OR_RETURN(self.snapshot_root, SnapshotRoot(self.work_dir));
  if (struct statfs fs; !self.snapshot_root.empty() &&
                        ::statfs(self.snapshot_root.c_str(), &fs) == 0 &&
                        fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC) {
    // Measured (bench/README.md, goodput): on ext4 the snapshots cost a 2-rank MLP job 13 %
    // of its steps, on a tmpfs 3 % (writeback and write faults on the shared mapping).
    BATON_LOG(WARNING) << "--snapshot_root " << self.snapshot_root
                       << " is not on a memory file system: in-memory snapshots will cost "
                          "training several times more there; mount a tmpfs (on Kubernetes an "
                          "emptyDir with medium Memory) and point --snapshot_root at it";
  }
  self.worker_id = absl::GetFlag(FLAGS_worker_id);
  if (self.worker_id.empty() && !absl::GetFlag(FLAGS_insecure)) {
    ASSIGN_OR_RETURN(self.worker_id, CertificateCommonName(absl::GetFlag(FLAGS_tls_cert)));
  }
  if (self.worker_id.empty()) {
    ASSIGN_OR_RETURN(self.worker_id, LoadOrCreateWorkerId(self.work_dir));
  }
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> found =
      ResolveTrainerPath(absl::GetFlag(FLAGS_trainer), SelfExe(), path_env ? path_env : "");
  if (found.ok()) {
    self.trainer = *found;
    self.trainer_found = true;
  } else {
    BATON_LOG(WARNING) << found.status() << "; jobs using the built-in trainer will fail";
  }
  self.resources = DetectResources(absl::GetFlag(FLAGS_slots), ResourceProbe());
  ASSIGN_OR_RETURN(self.network, NetworkIdentity(self.coordinators.front()));
  return self;
}

SupervisorOptions SupervisorOptionsFor(const Self& self) {
  SupervisorOptions options;
  options.work_dir = self.work_dir;
  options.trainer_path = self.trainer;
  options.allowed_paths = absl::GetFlag(FLAGS_allowed_paths);
  options.confine_ranks = absl::GetFlag(FLAGS_confine_ranks);
  options.snapshot_root = self.snapshot_root;
  // What a rank could pose as this worker with: hidden from every confined rank.
  for (const std::string& file :
       {absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_ca)}) {
    if (file.empty()) continue;
    options.secret_files.push_back(std::filesystem::absolute(file).string());
  }
  for (char** e = environ; *e != nullptr; ++e) options.base_env.push_back(*e);
  // Gloo and NCCL bind to the interface other hosts reach this one on (their defaults
  // resolve the hostname, often to a loopback address that no peer can dial).
  if (!self.network.interface.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
      if (std::getenv(name) == nullptr) {
        options.base_env.push_back(absl::StrCat(name, "=", self.network.interface));
      }
    }
  }
  options.default_stop_grace = absl::GetFlag(FLAGS_stop_grace);
  options.rejoin_timeout = std::max(absl::ZeroDuration(), absl::GetFlag(FLAGS_rejoin_timeout));
  options.max_rank_log_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_rank_log_bytes));
  options.max_rank_log_lines_per_second =
      std::max(1, absl::GetFlag(FLAGS_max_rank_log_lines_per_second));
  // Each assignment gets GPUs of its own (two jobs on one worker must not both use GPU
  // LOCAL_RANK), where there is one per slot.
  options.devices = SlotDevices(self.resources.gpus_size(), self.resources.slots(),
                                std::getenv("CUDA_VISIBLE_DEVICES"));
  if (self.resources.gpus_size() > 0 && options.devices.empty()) {
    BATON_LOG(WARNING) << self.resources.slots() << " slots but fewer GPUs visible: jobs on "
                       << "this worker share GPUs by LOCAL_RANK";
  }
  return options;
}

// The coordinator channel's security from --insecure/--ca/--tls_cert/--tls_key; plaintext
// only if every one of `coordinators` is a loopback address.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CoordinatorCredentials(
    const std::vector<std::string>& coordinators) {
  TransportSecurity security;
  security.insecure = absl::GetFlag(FLAGS_insecure);
  if (security.insecure) {
    for (const std::string& address : coordinators) {
      RETURN_IF_ERROR(CheckLoopbackOnly(address, "--coordinator"));
    }
    return grpc::InsecureChannelCredentials();
  }
  security.tls = {absl::GetFlag(FLAGS_ca), absl::GetFlag(FLAGS_tls_cert),
                  absl::GetFlag(FLAGS_tls_key)};
  if (security.tls.cert.empty()) {
    return absl::InvalidArgumentError(
        "a worker needs --tls_cert and --tls_key (its certificate from the cluster CA: "
        "tools/certs.sh --worker ID), or --insecure to a loopback coordinator");
  }
  return MakeChannelCredentials(security);
}

AgentOptions AgentOptionsFor(const Self& self) {
  AgentOptions options;
  options.coordinators = self.coordinators;
  options.worker_id = self.worker_id;
  options.hostname = Hostname();
  options.advertise_host = self.network.address;
  options.resources = self.resources;
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.peer_probe_timeout = absl::GetFlag(FLAGS_peer_probe_timeout);
  options.preflight.registered_gpus = self.resources.gpus_size();
  options.preflight.detect_gpus = [] { return DetectGpus(ResourceProbe()); };
  return options;
}

StandbyLauncherOptions StandbyOptionsFor(const Self& self, const SupervisorOptions& supervisor) {
  StandbyLauncherOptions options;
  options.trainer_path = self.trainer;
  options.standbys = !self.trainer_found ? 0
                     : absl::GetFlag(FLAGS_standby_trainers) < 0
                         ? self.resources.slots()
                         : absl::GetFlag(FLAGS_standby_trainers);
  RankEnvInput env;  // What a rank of a job without spec.env gets.
  env.base_env = supervisor.base_env;
  options.env = BuildRankEnv(env);
  options.refill_delay = absl::GetFlag(FLAGS_standby_refill_delay);
  options.idle_priority = absl::GetFlag(FLAGS_standby_idle_priority);
  return options;
}

// Waits for SIGINT/SIGTERM; on SIGTERM (with a drain timeout) drains first. Then stops every
// process, while the stream is up so their exits reach the coordinator, and the agent.
void AwaitStop(const sigset_t& stop_signals, WorkerDaemon& daemon, const Clock* clock) {
  int signo = 0;
  sigwait(&stop_signals, &signo);
  const absl::Duration drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  if (signo == SIGTERM && drain_timeout > absl::ZeroDuration()) {
    BATON_LOG(INFO) << "received SIGTERM; draining for up to " << drain_timeout
                    << " (SIGINT or another SIGTERM stops at once)";
    bool drained;
    {
      SecondSignalWatcher second_signal(stop_signals, &daemon);
      drained = daemon.Drain("received SIGTERM", clock->Now() + drain_timeout);
    }
    if (drained) {
      BATON_LOG(INFO) << "drained";
    } else {
      BATON_LOG(WARNING) << "drain ended with " << daemon.assignment_count()
                         << " assignment(s) left";
    }
  }
  BATON_LOG(INFO) << "received " << strsignal(signo) << "; stopping all training processes"
                  << " (grace " << absl::GetFlag(FLAGS_stop_grace) << ")";
  daemon.Shutdown(absl::GetFlag(FLAGS_stop_grace));
  BATON_LOG(INFO) << "stopped";
}

int Run() {
  // Block the stop signals in every thread (threads inherit the mask); main sigwait()s them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<Self> self = DiscoverSelf();
  if (!self.ok()) {
    BATON_LOG(ERROR) << self.status();
    return 1;
  }
  // A child subreaper: whatever escapes a shim (or, as PID 1 in a container, any orphan)
  // becomes our child and the daemon's reaper thread reaps it. SIGCHLD is blocked in every
  // thread from here on (none was started yet), for the reaper's sigwait.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, nullptr);

  WorkerDaemonOptions options;
  options.supervisor = SupervisorOptionsFor(*self);
  options.agent = AgentOptionsFor(*self);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      CoordinatorCredentials(self->coordinators);
  if (!credentials.ok()) {
    BATON_LOG(ERROR) << credentials.status();
    return 1;
  }
  options.agent.credentials = *std::move(credentials);
  options.standby = StandbyOptionsFor(*self, options.supervisor);
  options.probe_port = absl::GetFlag(FLAGS_probe_port);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  options.health_listen = absl::GetFlag(FLAGS_health_listen);
  const std::string coordinator = absl::StrJoin(options.agent.coordinators, ",");

  Clock* clock = RealClock::Get();
  WorkerDaemon daemon(std::move(options), clock);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    BATON_LOG(ERROR) << s;
    return 1;
  }
  const baton::v1::Resources& resources = self->resources;
  BATON_LOG(INFO) << "baton-worker " << self->worker_id << " (protocol " << kProtocolVersion
                  << ") work_dir " << self->work_dir << ", " << resources.slots() << " slots, "
                  << resources.gpus_size() << " GPUs, " << resources.cpu_cores()
                  << " CPUs, trainer " << self->trainer << ", coordinator " << coordinator;
  for (const baton::v1::Gpu& gpu : resources.gpus()) {
    BATON_LOG(INFO) << "GPU " << gpu.index() << ": " << gpu.name() << ", "
                    << (gpu.memory_bytes() >> 20) << " MiB";
  }
  AwaitStop(stop_signals, daemon, clock);
  return 0;
}

}  // namespace
}  // namespace baton::worker

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The Baton worker daemon: one per machine. Connects to the coordinator, runs the "
      "training processes it assigns and relays their exits, metrics and logs.\n"
      "  baton-worker --coordinator=HOST:PORT[,HOST:PORT...] --ca=CA.crt --tls_cert=ID.crt "
      "--tls_key=ID.key\n"
      "               [--work_dir=DIR] [--slots=N]\n"
      "  baton-worker --coordinator=127.0.0.1:PORT --insecure ...   (plaintext, loopback "
      "only)");
  absl::ParseCommandLine(argc, argv);
  return baton::worker::Run();
}
