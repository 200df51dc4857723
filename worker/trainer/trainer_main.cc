// baton-trainer: Baton's built-in data-parallel trainer, one process per rank.
//
// The worker daemon starts it with the torchrun environment and the flags below; the
// environment, metric lines, checkpoint and exit codes are specified in contract.h.
// This file only wires flags and environment into the trainer libraries.

#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "worker/trainer/communicator.h"
#include "worker/trainer/contract.h"
#include "worker/trainer/gloo_communicator.h"
#include "worker/trainer/data/idx_dataset.h"
#include "worker/trainer/launch_env.h"
#include "worker/trainer/metrics_writer.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/trainer.h"

// Contract flags: names are used by the worker daemon (see contract.h).
ABSL_FLAG(std::string, model, "mlp", "Model; only \"mlp\".");
ABSL_FLAG(std::string, dataset, "mnist", "Dataset format; only \"mnist\" (IDX files).");
ABSL_FLAG(std::string, data_dir, "", "Directory with train-*-ubyte and optional t10k-*-ubyte.");
ABSL_FLAG(int64_t, batch_size, 64, "Samples per rank per step.");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum in [0, 1).");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initialisation and data order.");
ABSL_FLAG(std::string, hidden, "256,128", "Comma-separated hidden layer widths.");
ABSL_FLAG(int64_t, log_every, 10, "Steps between metric lines.");
ABSL_FLAG(int32_t, threads, 1, "Intra-op threads.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0 = no limit).");
ABSL_FLAG(int64_t, max_epochs, 0, "Stop after this many epochs (0 = no limit).");
ABSL_FLAG(std::string, checkpoint_dir, "", "Rank 0 writes final.pt here (created).");
// Optional tuning.
ABSL_FLAG(absl::Duration, rendezvous_timeout, absl::Minutes(5),
          "How long to wait for all ranks to join.");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Minutes(5),
          "How long one all-reduce may take before the run fails.");

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

void InstallSignalHandlers() {
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = OnStopSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  action.sa_handler = OnGraceExpired;
  ::sigaction(SIGALRM, &action, nullptr);
  // A vanished metrics reader must surface as EPIPE, not kill the process.
  action.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &action, nullptr);
}

// absl::ParseCommandLine exits(1) with several lines on a bad flag; the contract wants
// exit code 2 and one line, so parse "--name=value" / "--name value" ourselves.
absl::Status ParseFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "--helpfull") {
      absl::ParseCommandLine(argc, argv);  // Prints usage and exits.
    }
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", argv[i], "'"));
    }
    std::string name(arg);
    std::string value;
    if (const size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " has no value"));
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": ", error));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainerOptions> OptionsFromFlags() {
  if (absl::GetFlag(FLAGS_model) != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model=", absl::GetFlag(FLAGS_model), " is not supported (only mlp)"));
  }
  if (absl::GetFlag(FLAGS_dataset) != "mnist") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset=", absl::GetFlag(FLAGS_dataset), " is not supported (only mnist)"));
  }
  if (absl::GetFlag(FLAGS_data_dir).empty()) {
    return absl::InvalidArgumentError("--data_dir is required");
  }
  if (absl::GetFlag(FLAGS_threads) < 1) {
    return absl::InvalidArgumentError("--threads must be >= 1");
  }
  TrainerOptions options;
  ASSIGN_OR_RETURN(options.hidden, ParseHiddenWidths(absl::GetFlag(FLAGS_hidden)));
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.lr = absl::GetFlag(FLAGS_lr);
  options.momentum = absl::GetFlag(FLAGS_momentum);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.max_epochs = absl::GetFlag(FLAGS_max_epochs);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  RETURN_IF_ERROR(ValidateTrainerOptions(options));
  return options;
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(const LaunchEnv& env) {
  if (env.world_size == 1) return std::unique_ptr<Communicator>(new LocalCommunicator());
  GlooOptions gloo;
  gloo.rank = env.rank;
  gloo.world_size = env.world_size;
  gloo.master_addr = env.master_addr;
  gloo.master_port = env.master_port;
  gloo.store_prefix = absl::StrCat("baton/", env.job_id, "/", env.generation);
  gloo.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  gloo.collective_timeout = absl::GetFlag(FLAGS_collective_timeout);
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr) {
    gloo.interface = iface;
  }
  return ConnectGloo(gloo);
}

absl::Status Run(int argc, char** argv, absl::Time process_start) {
  RETURN_IF_ERROR(ParseFlags(argc, argv));
  ASSIGN_OR_RETURN(const TrainerOptions options, OptionsFromFlags());
  ASSIGN_OR_RETURN(const LaunchEnv env, LaunchEnvFromProcess());
  ASSIGN_OR_RETURN(MetricsWriter metrics, MetricsWriter::ForFd(env.metrics_fd));
  at::set_num_threads(absl::GetFlag(FLAGS_threads));

  // Data before rendezvous: a bad --data_dir fails fast instead of after the others joined.
  ASSIGN_OR_RETURN(const MnistSplits data, LoadMnistDir(absl::GetFlag(FLAGS_data_dir)));
  ASSIGN_OR_RETURN(const std::unique_ptr<Communicator> comm, Connect(env));
  std::cout << absl::StrFormat(
                   "baton-trainer: rank %d/%d job '%s' generation %d: %d train, %d test samples",
                   env.rank, env.world_size, env.job_id, env.generation, data.train.size(),
                   data.test.has_value() ? data.test->size() : 0)
            << std::endl;

  TrainerContext context;
  context.train = &data.train;
  context.test = data.test.has_value() ? &*data.test : nullptr;
  context.comm = comm.get();
  context.metrics = &metrics;
  context.clock = RealClock::Get();
  context.log = &std::cout;
  context.stop = &g_stop_requested;
  Trainer trainer(options, context);
  ASSIGN_OR_RETURN(const TrainResult result, trainer.Run());

  const std::string eval = result.eval_accuracy.has_value()
                               ? absl::StrFormat("%.4f", *result.eval_accuracy)
                               : std::string("nan");
  std::cout << absl::StrFormat("%s: steps=%d loss=%.4f accuracy=%.4f eval_accuracy=%s wall_s=%.2f",
                               result.stopped ? "stopped" : "done", result.steps, result.loss,
                               result.accuracy, eval,
                               absl::ToDoubleSeconds(absl::Now() - process_start))
            << std::endl;
  if (!result.checkpoint_path.empty()) {
    std::cout << "checkpoint: " << result.checkpoint_path << std::endl;
  }
  if (result.stopped) {
    return absl::CancelledError(absl::StrCat("stopped by signal after ", result.steps, " steps"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace baton::trainer

int main(int argc, char** argv) {
  const absl::Time start = absl::Now();
  absl::SetProgramUsageMessage("Baton's built-in data-parallel trainer (one process per rank).");
  baton::trainer::InstallSignalHandlers();
  absl::Status status;
  try {
    status = baton::trainer::Run(argc, argv, start);
  } catch (const std::exception& e) {  // Nothing should escape; this is the last boundary.
    status = absl::InternalError(e.what());
  }
  if (status.ok()) return baton::trainer::kExitOk;
  // One line: LibTorch messages carry a backtrace after the first newline.
  const absl::string_view message = status.message();
  std::cerr << "baton-trainer: " << absl::StatusCodeToString(status.code()) << ": "
            << message.substr(0, message.find('\n')) << std::endl;
  return baton::trainer::ExitCodeForStatus(status);
}
