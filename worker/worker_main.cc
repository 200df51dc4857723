// baton-worker: the per-machine daemon. Registers this machine's resources with the
// coordinator, runs and supervises the training processes of its assignments, and relays
// their exits, metrics and log lines. main() only wires flags -> options -> Start() -> wait
// for SIGINT/SIGTERM -> Stop().

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics_http.h"
#include "common/port_file.h"
#include "worker/agent/agent.h"
#include "worker/host/host_address.h"
#include "worker/metrics.h"
#include "worker/agent/outbox.h"
#include "worker/host/peer_probe.h"
#include "worker/process/posix_process_launcher.h"
#include "worker/supervisor/rank_env.h"
#include "worker/process/standby_launcher.h"
#include "common/protocol_version.h"
#include "worker/agent/resources.h"
#include "worker/supervisor/supervisor.h"
#include "worker/supervisor/trainer_args.h"
#include "worker/agent/worker_identity.h"

extern char** environ;

ABSL_FLAG(std::string, coordinator, "localhost:7070",
          "Coordinator WorkerService address, HOST:PORT.");
ABSL_FLAG(std::string, work_dir, "./baton-worker",
          "Directory for this worker's state (worker_id) and the ranks' directories "
          "(jobs/<job>/gen-<g>/rank-<r>/ with stdout.log and stderr.log). Created if missing.");
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
ABSL_FLAG(absl::Duration, standby_refill_delay, absl::Seconds(5),
          "A used standby is replaced this long after the last trainer launch, so its "
          "start-up does not compete with the ranks just launched.");
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
ABSL_FLAG(absl::Duration, peer_probe_timeout, absl::Seconds(5),
          "How long a worker waits for its peers' probe ports before it refuses to start a "
          "job's processes.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "Heartbeat period; the coordinator's Registered message may override it.");
ABSL_FLAG(absl::Duration, stop_grace, absl::Seconds(10),
          "SIGTERM -> SIGKILL grace when a StopAssignment carries none, and on shutdown.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "On SIGTERM (Kubernetes eviction, preemption) the worker drains: it tells the "
          "coordinator, which has each of its jobs checkpoint at the next step boundary and "
          "continue on the other workers, and exits once its processes ended and their exits "
          "were reported, or after this long. SIGINT, a second SIGTERM or 0 stops at once. "
          "Keep it below the pod's terminationGracePeriodSeconds minus --stop_grace.");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:7072",
          "Prometheus metrics address (HOST:PORT), served at /metrics. Empty: no metrics "
          "endpoint. Port 0 picks a free port; it is logged and written to "
          "--metrics_port_file. If it cannot be bound the worker logs an error and runs "
          "without it.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, the bound metrics port is written here (atomically) once serving.");
ABSL_FLAG(std::string, worker_id, "",
          "Worker identity. Default: read from <work_dir>/worker_id, created (random) on "
          "first start, so restarts keep the identity.");

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

// The address to advertise and the interface ranks use, from --advertise_host, --interface
// and the route to the coordinator (see the flags). An unusable --interface is an error; a
// route that cannot be found (the coordinator's name does not resolve yet) leaves both to
// the defaults: the coordinator uses the peer address, Gloo and NCCL their own choice.
absl::StatusOr<HostAddress> NetworkIdentity() {
  HostAddress identity;
  if (const std::string name = absl::GetFlag(FLAGS_interface); !name.empty()) {
    absl::StatusOr<HostAddress> found = AddressOf(name);
    if (!found.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--interface=", name, ": ", found.status().message()));
    }
    identity = *found;
  } else {
    absl::StatusOr<HostAddress> route = RouteTo(absl::GetFlag(FLAGS_coordinator));
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
// ends the drain: supervisor->AwaitIdle() returns at once.
class SecondSignalWatcher {
 public:
  SecondSignalWatcher(const sigset_t& signals, Supervisor* supervisor)
      : thread_([this, signals, supervisor] {
          int signo = 0;
          sigwait(&signals, &signo);
          if (done_.load()) return;
          BATON_LOG(INFO) << "second stop signal (" << strsignal(signo) << "); ending the drain";
          supervisor->EndIdleWait();
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

int Run() {
  // Block the stop signals in every thread (threads inherit the mask); main sigwait()s them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::error_code ec;
  std::filesystem::create_directories(absl::GetFlag(FLAGS_work_dir), ec);
  const std::string work_dir =
      std::filesystem::canonical(absl::GetFlag(FLAGS_work_dir), ec).string();
  if (ec) {
    BATON_LOG(ERROR) << "--work_dir " << absl::GetFlag(FLAGS_work_dir) << ": " << ec.message();
    return 1;
  }
  std::string worker_id = absl::GetFlag(FLAGS_worker_id);
  if (worker_id.empty()) {
    absl::StatusOr<std::string> id = LoadOrCreateWorkerId(work_dir);
    if (!id.ok()) {
      BATON_LOG(ERROR) << id.status();
      return 1;
    }
    worker_id = *id;
  }
  const char* path_env = std::getenv("PATH");
  std::string trainer = "baton-trainer";
  absl::StatusOr<std::string> found =
      ResolveTrainerPath(absl::GetFlag(FLAGS_trainer), SelfExe(), path_env ? path_env : "");
  if (found.ok()) {
    trainer = *found;
  } else {
    BATON_LOG(WARNING) << found.status() << "; jobs using the built-in trainer will fail";
  }
  const baton::v1::Resources resources =
      DetectResources(absl::GetFlag(FLAGS_slots), ResourceProbe());
  absl::StatusOr<HostAddress> network = NetworkIdentity();
  if (!network.ok()) {
    BATON_LOG(ERROR) << network.status();
    return 1;
  }

  SupervisorOptions supervisor_options;
  supervisor_options.work_dir = work_dir;
  supervisor_options.trainer_path = trainer;
  for (char** e = environ; *e != nullptr; ++e) supervisor_options.base_env.push_back(*e);
  // Gloo and NCCL bind to the interface other hosts reach this one on (their defaults
  // resolve the hostname, often to a loopback address that no peer can dial).
  if (!network->interface.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
      if (std::getenv(name) == nullptr) {
        supervisor_options.base_env.push_back(absl::StrCat(name, "=", network->interface));
      }
    }
  }
  supervisor_options.default_stop_grace = absl::GetFlag(FLAGS_stop_grace);

  AgentOptions agent_options;
  agent_options.coordinator = absl::GetFlag(FLAGS_coordinator);
  agent_options.worker_id = worker_id;
  agent_options.hostname = Hostname();
  agent_options.advertise_host = network->address;
  agent_options.resources = resources;
  agent_options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  agent_options.peer_probe_timeout = absl::GetFlag(FLAGS_peer_probe_timeout);
  absl::StatusOr<std::unique_ptr<ProbeListener>> probe =
      ProbeListener::Start(absl::GetFlag(FLAGS_probe_port));
  if (!probe.ok()) {
    BATON_LOG(ERROR) << "--probe_port: " << probe.status();
    return 1;
  }
  agent_options.probe_port = (*probe)->port();

  Clock* clock = RealClock::Get();
  PosixProcessLauncher posix_launcher;
  StandbyLauncherOptions standby_options;
  standby_options.trainer_path = trainer;
  standby_options.standbys = !found.ok() ? 0
                             : absl::GetFlag(FLAGS_standby_trainers) < 0
                                 ? resources.slots()
                                 : absl::GetFlag(FLAGS_standby_trainers);
  RankEnvInput standby_env;  // What a rank of a job without spec.env gets.
  standby_env.base_env = supervisor_options.base_env;
  standby_options.env = BuildRankEnv(standby_env);
  standby_options.refill_delay = absl::GetFlag(FLAGS_standby_refill_delay);
  StandbyLauncher launcher(standby_options, &posix_launcher, clock);
  if (absl::Status s = launcher.Start(); !s.ok()) {
    BATON_LOG(ERROR) << "standby trainers: " << s;
    return 1;
  }
  // Served next to WorkerMetrics; the launcher outlives the exposer (declared first).
  auto standby_metrics = std::make_shared<StandbyMetrics>(&launcher);
  Outbox outbox(OutboxOptions(), clock);
  Supervisor* supervisor_for_metrics = nullptr;  // Set below, before anything scrapes.
  auto metrics = std::make_shared<WorkerMetrics>(
      WorkerMetricsOptions(), clock,
      [&supervisor_for_metrics](const std::string& job_id, int64_t generation, int32_t rank) {
        const std::optional<RankState> state =
            supervisor_for_metrics->GetRankState(job_id, generation, rank);
        return state.has_value() && *state != RankState::kExited;
      });
  MetricsListener listener(metrics.get(), &outbox);
  Supervisor supervisor(supervisor_options, &launcher, clock, &listener);
  supervisor_for_metrics = &supervisor;
  Agent agent(agent_options, &supervisor, &outbox, clock, metrics.get());
  if (absl::Status s = supervisor.Start(); !s.ok()) {
    BATON_LOG(ERROR) << s;
    return 1;
  }
  auto lease_metrics = std::make_shared<LeaseMetrics>(
      &agent.lease(), [&supervisor] { return supervisor.lease_expirations(); }, clock);
  auto supervisor_metrics = std::make_shared<SupervisorMetrics>(
      [&supervisor] { return supervisor.illegal_rank_transitions(); });
  // Destroyed before the supervisor and the agent: scrapes read both.
  std::unique_ptr<prometheus::Exposer> exposer;
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen); !listen.empty()) {
    // Training does not depend on the metrics endpoint: a taken port is logged (and the
    // scrape target shows down), the worker still runs.
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> served = ServeMetrics(listen, metrics);
    if (served.ok()) {
      exposer = *std::move(served);
      const int port = exposer->GetListeningPorts().front();
      BATON_LOG(INFO) << "metrics on port " << port << " (/metrics)";
      exposer->RegisterCollectable(standby_metrics);
      exposer->RegisterCollectable(lease_metrics);
      exposer->RegisterCollectable(supervisor_metrics);
      const std::string port_file = absl::GetFlag(FLAGS_metrics_port_file);
      if (!port_file.empty()) {
        if (absl::Status s = WritePortFile(port_file, port); !s.ok()) {
          BATON_LOG(ERROR) << "--metrics_port_file: " << s;
          return 1;
        }
      }
    } else {
      BATON_LOG(ERROR) << served.status() << "; running without a metrics endpoint";
    }
  }
  if (absl::Status s = agent.Start(); !s.ok()) {
    BATON_LOG(ERROR) << s;
    return 1;
  }
  BATON_LOG(INFO) << "baton-worker " << worker_id << " (protocol " << kProtocolVersion
                  << ") work_dir " << work_dir << ", " << resources.slots() << " slots, "
                  << resources.gpus_size() << " GPUs, " << resources.cpu_cores()
                  << " CPUs, trainer " << trainer << ", coordinator " << agent_options.coordinator;
  for (const baton::v1::Gpu& gpu : resources.gpus()) {
    BATON_LOG(INFO) << "GPU " << gpu.index() << ": " << gpu.name() << ", "
                    << (gpu.memory_bytes() >> 20) << " MiB";
  }

  int signo = 0;
  sigwait(&stop_signals, &signo);
  const absl::Duration drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  if (signo == SIGTERM && drain_timeout > absl::ZeroDuration()) {
    BATON_LOG(INFO) << "received SIGTERM; draining for up to " << drain_timeout
                    << " (SIGINT or another SIGTERM stops at once)";
    agent.Drain("received SIGTERM");
    bool drained;
    {
      SecondSignalWatcher second_signal(stop_signals, &supervisor);
      // The coordinator stops this worker's processes once they checkpointed; an assignment
      // is forgotten once its exits were reported.
      drained = supervisor.AwaitIdle(clock->Now() + drain_timeout);
    }
    if (drained) {
      BATON_LOG(INFO) << "drained";
    } else {
      BATON_LOG(WARNING) << "drain ended with " << supervisor.assignment_count()
                         << " assignment(s) left";
    }
  }
  BATON_LOG(INFO) << "received " << strsignal(signo) << "; stopping all training processes"
                  << " (grace " << absl::GetFlag(FLAGS_stop_grace) << ")";
  // Processes first, while the stream is up, so their exits reach the coordinator.
  supervisor.Shutdown(absl::GetFlag(FLAGS_stop_grace));
  agent.Stop();
  BATON_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace baton::worker

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The Baton worker daemon: one per machine. Connects to the coordinator, runs the "
      "training processes it assigns and relays their exits, metrics and logs.\n"
      "  baton-worker --coordinator=HOST:PORT [--work_dir=DIR] [--slots=N]");
  absl::ParseCommandLine(argc, argv);
  return baton::worker::Run();
}
