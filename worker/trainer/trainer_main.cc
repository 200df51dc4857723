// baton-trainer: Baton's built-in data-parallel trainer, one process per rank.
//
// The worker daemon starts it with the torchrun environment and the flags below; the
// environment, metric lines, checkpoint and exit codes are specified in contract/contract.h.
// This file only wires flags and environment into the trainer libraries. With
// BATON_REJOIN_FD a rank whose peer was lost stays for the next generation
// (contract/rejoin_protocol.h): the loop in Run.
//
// `baton-trainer --standby` is a warm standby (contract/standby_protocol.h): it waits on stdin for
// the argv, environment and working directory of a launch and then runs as if exec'd with
// them, without paying for LibTorch's static initialisation on the restart path.

#include <ATen/Parallel.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cpus.h"
#include "common/status_macros.h"
#include "common/time/clock.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/process_group.h"
#include "worker/trainer/contract/contract.h"
#include "worker/trainer/contract/launch_env.h"
#include "worker/trainer/contract/lease_page.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/contract/rejoin_protocol.h"
#include "worker/trainer/contract/standby_protocol.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/device/host_allocator.h"
#include "worker/trainer/profile/profiler.h"
#include "worker/trainer/progress/heartbeat.h"
#include "worker/trainer/progress/progress_tracker.h"
#include "worker/trainer/progress/tracked_communicator.h"
#include "worker/trainer/trainer.h"
#include "worker/trainer/trainer_flags.h"

// The contract flags (one per TrainerSpec field, --max_steps, --max_epochs,
// --checkpoint_dir) are defined in trainer_flags.cc.
// Optional tuning (not part of TrainerSpec).
ABSL_FLAG(std::string, device, "auto", "auto (CUDA if a GPU is visible), cpu or cuda.");
ABSL_FLAG(absl::Duration, rendezvous_timeout, absl::Minutes(5),
          "How long to wait for all ranks to join.");
ABSL_FLAG(std::string, cpu_backend, "auto",
          "Collectives between CPU ranks: shm (shared memory; every rank on this host), gloo "
          "(TCP, any hosts), hierarchical (shared memory inside each host, Gloo between one "
          "leader per host) or auto (shm when every rank is on one host; hierarchical when "
          "ranks are on several hosts and some host has more than one; else gloo; where "
          "shared memory turns out unusable, gloo). Hosts: see BATON_HOST_KEY.");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Minutes(5),
          "How long one all-reduce may take before the run fails.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Milliseconds(100),
          "How often the rank writes a heartbeat line on BATON_METRICS_FD (its phase of "
          "training, step and collectives, from a thread of its own: the coordinator's hang "
          "detection); 0 = none.");
ABSL_FLAG(std::string, shm_comm_thread, "auto",
          "Shared-memory collectives (--cpu_backend shm or hierarchical): run them on a "
          "communication thread per rank, overlapping backward (on), or on the training "
          "thread when it waits for them (off). auto: on when the CPUs this process may use "
          "hold every local rank's --threads plus one more per rank, else off (then the "
          "thread would only compete with training for a core); pipeline jobs: on.");
ABSL_FLAG(std::string, profile_dir, "",
          "Step profiling: on SIGUSR2, record a window of optimizer steps (the phases, each "
          "bucket's all-reduce, checkpoints) and write it to <dir>/trace-<id>-rank<R>.json as "
          "a Chrome trace; <dir>/profile-request may say id=, steps= and start_step= "
          "(worker/trainer/profile/profiler.h). Empty: SIGUSR2 is ignored.");
ABSL_FLAG(int64_t, profile_steps, 20,
          "Steps of a profiling window when the request does not say (1..10000).");

namespace baton::trainer {
namespace {

// Set by the first SIGTERM/SIGINT; the loop stops before its next step. If the process has
// not exited kGraceSeconds later (e.g. it is blocked on a peer), SIGALRM ends it; a second
// signal ends it at once.
std::atomic<bool> g_stop_requested{false};
constexpr unsigned kGraceSeconds = 5;

extern "C" void OnStopSignal(int /*sig*/) {
  if (g_stop_requested.exchange(true)) ::_exit(kExitTerminated);
  ::alarm(kGraceSeconds);
}

extern "C" void OnGraceExpired(int /*sig*/) { ::_exit(kExitTerminated); }

// Set by SIGUSR1: rank 0 checkpoints at the next step boundary and exits kExitCheckpointed.
std::atomic<bool> g_checkpoint_requested{false};

extern "C" void OnCheckpointSignal(int /*sig*/) { g_checkpoint_requested.store(true); }

// With --profile_dir: SIGUSR2 asks for a profiling window (Profiler::Request only stores an
// atomic flag, which a signal handler may do).
std::atomic<Profiler*> g_profiler{nullptr};

extern "C" void OnProfileSignal(int /*sig*/) {
  if (Profiler* profiler = g_profiler.load(); profiler != nullptr) profiler->Request();
}

void InstallSignalHandlers() {
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = OnStopSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  action.sa_handler = OnGraceExpired;
  ::sigaction(SIGALRM, &action, nullptr);
  action.sa_handler = OnCheckpointSignal;
  ::sigaction(SIGUSR1, &action, nullptr);
  action.sa_handler = OnProfileSignal;
  ::sigaction(SIGUSR2, &action, nullptr);
  // A vanished metrics reader, or a peer gone while Gloo writes to its socket, must surface
  // as EPIPE, not kill the process.
  action.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &action, nullptr);
}

// --shm_comm_thread as ProcessGroupOptions::shm_collectives_on_waiter.
absl::StatusOr<bool> ShmCollectivesOnWaiter(const LaunchEnv& env, int threads,
                                            bool point_to_point) {
  const std::string mode = absl::GetFlag(FLAGS_shm_comm_thread);
  if (mode == "on") return false;
  if (mode == "off") return true;
  if (mode != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--shm_comm_thread '", mode, "' is not one of auto, on, off"));
  }
  return !point_to_point && !UseCommunicationThread(UsableCpus(), env.local_world_size, threads);
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(const LaunchEnv& env,
                                                      const c10::Device& device, int threads,
                                                      bool point_to_point) {
  ProcessGroupOptions options;
  ASSIGN_OR_RETURN(options.shm_collectives_on_waiter,
                   ShmCollectivesOnWaiter(env, threads, point_to_point));
  options.device = device;
  options.point_to_point = point_to_point;
  options.rendezvous.rank = env.rank;
  options.rendezvous.world_size = env.world_size;
  options.rendezvous.master_addr = env.master_addr;
  options.rendezvous.master_port = env.master_port;
  options.rendezvous.store_prefix = absl::StrCat("baton/", env.job_id, "/", env.generation);
  options.rendezvous.timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  options.collective_timeout = absl::GetFlag(FLAGS_collective_timeout);
  ASSIGN_OR_RETURN(options.cpu_backend, ParseCpuBackend(absl::GetFlag(FLAGS_cpu_backend)));
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr) {
    options.gloo_interface = iface;
  }
  if (const char* key = std::getenv(kEnvHostKey); key != nullptr) options.host_key = key;
  return JoinProcessGroup(options);
}

// The process's peak resident set size so far (VmHWM in /proc/self/status) in MiB, or -1
// where that cannot be read.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmHWM:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    int64_t kib = 0;
    if (absl::ConsumeSuffix(&rest, "kB") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) {
      return static_cast<double>(kib) / 1024.0;
    }
    return -1;
  }
  return -1;
}

// With --profile_dir: a profiler that SIGUSR2 asks for a window of steps, published to the
// signal handler (g_profiler); null without. INVALID_ARGUMENT for a bad --profile_dir or
// --profile_steps.
absl::StatusOr<std::unique_ptr<Profiler>> StartProfiler(const LaunchEnv& env) {
  const std::string dir = absl::GetFlag(FLAGS_profile_dir);
  if (dir.empty()) return std::unique_ptr<Profiler>();
  const int64_t steps = absl::GetFlag(FLAGS_profile_steps);
  if (steps < 1 || steps > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--profile_steps=", steps, " is outside 1..10000"));
  }
  ProfilerOptions profile;
  profile.dir = dir;
  profile.rank = env.rank;
  profile.job_id = env.job_id;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) profile.host = host;
  profile.default_steps = steps;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--profile_dir=", dir, " is not a directory"));
  }
  auto profiler = std::make_unique<Profiler>(profile, *RealClock::Get());
  g_profiler.store(profiler.get());
  std::cout << "baton-trainer: profiling on SIGUSR2 into " << dir << std::endl;
  return profiler;
}

// The run's last lines: how it ended ("done: steps=... peak_rss_mib=...") and the checkpoint
// it saved, if any.
void PrintResult(const TrainResult& result, absl::Time process_start) {
  const std::string eval = result.eval_accuracy.has_value()
                               ? absl::StrFormat("%.4f", *result.eval_accuracy)
                               : std::string("nan");
  std::cout << absl::StrFormat(
                   "%s: steps=%d loss=%.4f accuracy=%.4f eval_accuracy=%s skipped=%d wall_s=%.2f "
                   "peak_rss_mib=%.1f",
                   result.stopped        ? "stopped"
                   : result.checkpointed ? "checkpointed"
                                         : "done",
                   result.steps, result.loss, result.accuracy, eval, result.skipped_steps,
                   absl::ToDoubleSeconds(absl::Now() - process_start), PeakRssMib())
            << std::endl;
  if (!result.checkpoint_path.empty()) {
    std::cout << "checkpoint: " << result.checkpoint_path << std::endl;
  }
}

// BATON_REJOIN_FD (rejoin_protocol.h), nullopt when unset. INVALID_ARGUMENT when malformed.
absl::StatusOr<std::optional<int>> RejoinFd() {
  const char* value = std::getenv(kEnvRejoinFd);
  if (value == nullptr || *value == '\0') return std::optional<int>();
  int fd = -1;
  if (!absl::SimpleAtoi(value, &fd) || fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", kEnvRejoinFd, "='", value, "' is not an fd"));
  }
  return std::optional<int>(fd);
}

// What a rank keeps across the generations it takes part in (rejoin_protocol.h).
struct RankProcess {
  FlagOptions flags;
  c10::Device device = c10::kCPU;
  MetricsWriter* metrics = nullptr;
  const LeasePage* lease = nullptr;
  const Dataset* train = nullptr;
  const Dataset* test = nullptr;
  Profiler* profiler = nullptr;
  ProgressTracker* progress = nullptr;
  absl::Duration fault_epoch_delay = absl::ZeroDuration();
  int fault_hang_rank = 0;
  int64_t fault_hang_step = 0;
};

// One generation of this rank: the rendezvous under `env`, then the training run.
absl::StatusOr<TrainResult> RunGeneration(const RankProcess& p, const LaunchEnv& env) {
  ASSIGN_OR_RETURN(const std::unique_ptr<Communicator> comm,
                   Connect(env, p.device, static_cast<int>(p.flags.threads),
                           p.flags.trainer.pipeline_stages > 1));
  std::cout << absl::StrFormat(
                   "baton-trainer: rank %d/%d job '%s' generation %d on %s (%s): %d train, %d "
                   "test samples",
                   env.rank, env.world_size, env.job_id, env.generation, p.device.str(),
                   comm->backend(), p.train->size(), p.test != nullptr ? p.test->size() : 0)
            << std::endl;
  TrackedCommunicator tracked(comm.get(), p.progress);
  TrainerContext context;
  context.train = p.train;
  context.test = p.test;
  context.comm = &tracked;
  context.progress = p.progress;
  context.fault_epoch_delay = p.fault_epoch_delay;
  context.fault_hang_rank = p.fault_hang_rank;
  context.fault_hang_step = p.fault_hang_step;
  context.metrics = p.metrics;
  context.clock = RealClock::Get();
  context.log = &std::cout;
  context.stop = &g_stop_requested;
  context.checkpoint_request = &g_checkpoint_requested;
  context.generation = env.generation;
  context.job_id = env.job_id;
  context.profiler = p.profiler;
  context.lease = p.lease;
  if (const char* dir = std::getenv(kEnvSnapshotDir); dir != nullptr && *dir != '\0') {
    context.snapshot_dir = dir;
    if (env.local_rank == 0) context.snapshot_writer = absl::StrCat("rank", env.rank);
  }
  Trainer trainer(p.flags.trainer, context);
  return trainer.Run();
}

// The exit code of a run that did not fail: kExitOk or kExitCheckpointed.
absl::StatusOr<int> Run(int argc, char** argv, absl::Time process_start) {
  RETURN_IF_ERROR(ParseFlags(argc, argv));
  RankProcess p;
  ASSIGN_OR_RETURN(p.flags, OptionsFromFlags());
  ASSIGN_OR_RETURN(LaunchEnv env, LaunchEnvFromProcess());
  ASSIGN_OR_RETURN(const std::optional<int> rejoin_fd, RejoinFd());
  ASSIGN_OR_RETURN(MetricsWriter metrics, MetricsWriter::ForFd(env.metrics_fd));
  p.metrics = &metrics;
  if (const char* delay = std::getenv(kEnvFaultEpochDelay); delay != nullptr && *delay != '\0') {
    if (!absl::ParseDuration(delay, &p.fault_epoch_delay) ||
        p.fault_epoch_delay < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", kEnvFaultEpochDelay,
                                                     "='", delay, "' is not a duration"));
    }
  }
  if (const char* hang = std::getenv(kEnvFaultHang); hang != nullptr && *hang != '\0') {
    const std::vector<std::string> parts = absl::StrSplit(hang, ':');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &p.fault_hang_rank) ||
        !absl::SimpleAtoi(parts[1], &p.fault_hang_step) || p.fault_hang_step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", kEnvFaultHang, "='", hang, "' is not RANK:STEP"));
    }
  }
  // From the start: a rank stuck in its startup (data, rendezvous, restore) says so too.
  ProgressTracker progress(RealClock::Get());
  p.progress = &progress;
  const Heartbeat heartbeat(&progress, RealClock::Get(), env.metrics_fd,
                            absl::GetFlag(FLAGS_heartbeat_interval));
  // The second fencing layer (the shim is the first): checked before every step.
  ASSIGN_OR_RETURN(const std::optional<LeasePage> lease, LeasePage::FromEnvironment());
  p.lease = lease.has_value() ? &*lease : nullptr;
  at::set_num_threads(static_cast<int>(p.flags.threads));
  ASSIGN_OR_RETURN(p.device, ResolveDevice(absl::GetFlag(FLAGS_device), env.local_rank));

  // Data before rendezvous: a bad --data_dir fails fast instead of after the others joined.
  ASSIGN_OR_RETURN(const std::unique_ptr<Dataset> train, OpenDataset(p.flags.data, Split::kTrain));
  ASSIGN_OR_RETURN(const std::unique_ptr<Dataset> test, OpenDataset(p.flags.data, Split::kTest));
  p.train = train.get();
  p.test = test.get();
  // Before the rendezvous: a request sent once this is logged covers the first steps.
  ASSIGN_OR_RETURN(const std::unique_ptr<Profiler> profiler, StartProfiler(env));
  p.profiler = profiler.get();
  // Destroyed before `profiler`: the signal handler stops seeing it first.
  struct ForgetProfiler {
    ~ForgetProfiler() { g_profiler.store(nullptr); }
  } forget_profiler;

  while (true) {
    absl::StatusOr<TrainResult> result = RunGeneration(p, env);
    if (result.ok()) {
      PrintResult(*result, process_start);
      if (result->stopped) {
        return absl::CancelledError(
            absl::StrCat("stopped by signal after ", result->steps, " steps"));
      }
      return result->checkpointed ? kExitCheckpointed : kExitOk;
    }
    // A peer lost: with BATON_REJOIN_FD this process stays for the next generation (on CPUs:
    // a GPU rank's communicator and device after a peer's loss are not proven reusable).
    if (!rejoin_fd.has_value() || !RejoinableFailure(result.status()) || p.device.is_cuda() ||
        g_stop_requested.load()) {
      return result.status();
    }
    std::cout << "baton-trainer: generation " << env.generation << " lost a peer ("
              << result.status().message().substr(0, result.status().message().find('\n'))
              << "); waiting for the next generation on " << kEnvRejoinFd << " (this process stays)"
              << std::endl;
    progress.Park();  // no heartbeats of a generation this process has left
    AnnounceWaiting(*rejoin_fd, env.generation);
    ASSIGN_OR_RETURN(std::optional<LaunchEnv> next, ReadRejoin(*rejoin_fd, env, &g_stop_requested));
    if (!next.has_value()) return result.status();  // In no further generation.
    env = *std::move(next);
    progress.Begin(TrainingPhase::kStartup);
    ExportRejoinEnv(env);
    std::cout << "baton-trainer: rejoining as rank " << env.rank << "/" << env.world_size
              << " of generation " << env.generation << std::endl;
  }
}

}  // namespace
}  // namespace baton::trainer

namespace {

// Ends the process without running static destructors: LibTorch's and Gloo's take hundreds
// of milliseconds (thread pools, process-group teardown) that a restarting gang would wait
// for. Everything that matters is already durable: checkpoints are fsynced, metric lines
// written with write(2), and the streams are flushed here.
[[noreturn]] void Exit(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  absl::Time start = absl::Now();
  if (argc == 2 && absl::string_view(argv[1]) == baton::trainer::kStandbyFlag) {
    // A warm standby (contract/standby_protocol.h): static initialisation is done; say so, wait for
    // the launch this process stands in for, then run exactly as if exec'd with it.
    baton::trainer::SignalStandbyLoaded(0);
    absl::StatusOr<std::optional<baton::trainer::StandbyRequest>> request =
        baton::trainer::ReadStandbyRequest(0);
    if (absl::IsFailedPrecondition(request.status())) {  // Could not confine itself.
      std::cerr << "baton-worker: " << request.status().message() << std::endl;  // As cold.
      Exit(127);
    }
    if (!request.ok()) {
      std::cerr << "baton-trainer: " << request.status() << std::endl;
      Exit(baton::trainer::kExitInternal);
    }
    if (!request->has_value()) Exit(baton::trainer::kExitOk);  // Released unused.
    start = absl::Now();
    if (absl::Status s = baton::trainer::ApplyStandbyRequest(**request); !s.ok()) {
      std::cerr << "baton-worker: " << s.message() << std::endl;  // As a failed cold launch.
      Exit(127);
    }
    // Lives for the rest of the process, like the argv of a fresh exec.
    static std::vector<std::string>* const args =
        new std::vector<std::string>(std::move((*request)->argv));
    static std::vector<char*>* const arg_ptrs = new std::vector<char*>();
    for (std::string& a : *args) arg_ptrs->push_back(a.data());
    arg_ptrs->push_back(nullptr);
    argc = static_cast<int>(args->size());
    argv = arg_ptrs->data();
  }
  // With the rank's own environment (a standby has just taken it on), which may tune malloc.
  baton::trainer::KeepFreedHostMemory(std::getenv);
  absl::SetProgramUsageMessage("Baton's built-in data-parallel trainer (one process per rank).");
  baton::trainer::InstallSignalHandlers();
  absl::Status status;
  try {
    absl::StatusOr<int> exit_code = baton::trainer::Run(argc, argv, start);
    if (exit_code.ok()) Exit(*exit_code);
    status = exit_code.status();
  } catch (const std::exception& e) {  // Nothing should escape; this is the last boundary.
    status = absl::InternalError(e.what());
  }
  if (status.ok()) return baton::trainer::kExitOk;
  // One line: LibTorch messages carry a backtrace after the first newline.
  const absl::string_view message = status.message();
  std::cerr << "baton-trainer: " << absl::StatusCodeToString(status.code()) << ": "
            << message.substr(0, message.find('\n')) << std::endl;
  Exit(baton::trainer::ExitCodeForStatus(status));
}
