// baton-trainer: Baton's built-in data-parallel trainer, one process per rank.
//
// The worker daemon starts it with the torchrun environment and the flags below; the
// environment, metric lines, checkpoint and exit codes are specified in contract.h.
// This file only wires flags and environment into the trainer libraries.
//
// `baton-trainer --standby` is a warm standby (standby_protocol.h): it waits on stdin for
// the argv, environment and working directory of a launch and then runs as if exec'd with
// them, without paying for LibTorch's static initialisation on the restart path.

#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "worker/trainer/communicator.h"
#include "worker/trainer/contract.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/device.h"
#include "worker/trainer/gradient_reducer.h"
#include "worker/trainer/launch_env.h"
#include "worker/trainer/metrics_writer.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/models/model.h"
#include "worker/trainer/precision.h"
#include "worker/trainer/process_group.h"
#include "worker/trainer/standby_protocol.h"
#include "worker/trainer/trainer.h"

// Contract flags: one per TrainerSpec field, same names and defaults (see contract.h and
// proto/baton/v1/job.proto); the worker daemon passes the fields a job sets.
ABSL_FLAG(std::string, model, "mlp", "mlp, resnet18, resnet50, gpt or torchscript.");
ABSL_FLAG(std::string, dataset, "mnist", "mnist, cifar10, image_folder, tokens or synthetic.");
ABSL_FLAG(std::string, data_dir, "", "Directory with the dataset's files (not for synthetic).");
ABSL_FLAG(int64_t, batch_size, 64, "Samples per rank per micro-batch.");
ABSL_FLAG(double, lr, 0.05, "Base learning rate.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum in [0, 1).");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initialisation, data order and augmentation.");
ABSL_FLAG(std::string, hidden, "256,128", "Comma-separated MLP hidden layer widths.");
ABSL_FLAG(int64_t, log_every, 10, "Steps between metric lines.");
ABSL_FLAG(int32_t, threads, 1, "Intra-op threads.");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, bf16 (autocast) or fp16 (autocast + dynamic loss scaling).");
ABSL_FLAG(int64_t, accumulation_steps, 1, "Micro-batches per optimizer step.");
ABSL_FLAG(double, bucket_cap_mb, 25, "Gradient all-reduce bucket size in MiB.");
ABSL_FLAG(std::string, grad_compression, "none", "none, bf16 or fp16 gradient all-reduce.");
ABSL_FLAG(double, max_grad_norm, 0, "Clip gradients to this global L2 norm (0 = off).");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd or adamw.");
ABSL_FLAG(double, weight_decay, 0, "L2 (sgd) or decoupled (adamw) weight decay.");
ABSL_FLAG(bool, nesterov, false, "Nesterov momentum (sgd).");
ABSL_FLAG(double, adam_beta1, 0.9, "AdamW beta1.");
ABSL_FLAG(double, adam_beta2, 0.999, "AdamW beta2.");
ABSL_FLAG(double, adam_eps, 1e-8, "AdamW epsilon.");
ABSL_FLAG(std::string, lr_schedule, "constant", "constant, cosine or step.");
ABSL_FLAG(int64_t, warmup_steps, 0, "Linear warmup steps.");
ABSL_FLAG(int64_t, lr_step_size, 0, "step schedule: steps between decays.");
ABSL_FLAG(double, lr_gamma, 0.1, "step schedule: decay factor.");
ABSL_FLAG(double, min_lr, 0, "cosine schedule: final lr.");
ABSL_FLAG(int64_t, base_batch, 0, "Linear scaling rule reference batch (0 = off).");
ABSL_FLAG(int32_t, loader_threads, 2, "Background loader threads per rank.");
ABSL_FLAG(int32_t, prefetch_batches, 4, "Batches prepared ahead per rank.");
ABSL_FLAG(int64_t, image_size, 0,
          "Image side (0 = the dataset's default: 224 image_folder, 32 synthetic).");
ABSL_FLAG(int64_t, context_length, 128, "Sequence length (tokens / gpt).");
ABSL_FLAG(int64_t, synthetic_samples, 8192, "synthetic: training samples.");
ABSL_FLAG(int64_t, num_classes, 10, "synthetic: classes.");
ABSL_FLAG(int64_t, gpt_layers, 4, "gpt: layers.");
ABSL_FLAG(int64_t, gpt_heads, 4, "gpt: attention heads.");
ABSL_FLAG(int64_t, gpt_width, 256, "gpt: embedding width.");
ABSL_FLAG(int64_t, vocab_size, 50304, "gpt / tokens: vocabulary size.");
ABSL_FLAG(std::string, torchscript_path, "", "torchscript: the module file.");
ABSL_FLAG(std::string, task, "classification", "torchscript: classification or language_model.");
ABSL_FLAG(int64_t, checkpoint_every, 0, "Steps between checkpoints (0 = only at the end).");
ABSL_FLAG(int32_t, keep_checkpoints, 3, "Step checkpoints to keep.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0 = no limit).");
ABSL_FLAG(int64_t, max_epochs, 0, "Stop after this many epochs (0 = no limit).");
ABSL_FLAG(std::string, checkpoint_dir, "", "Checkpoints and final.pt go here (created).");
ABSL_FLAG(int64_t, global_batch, 0,
          "Samples per optimizer step over all ranks, kept whatever the world size (0 = "
          "--batch_size per rank). --batch_size is then the largest micro-batch; the "
          "accumulation steps are derived, and a resized gang resumes exactly.");
ABSL_FLAG(std::string, sample_log, "",
          "Append each step's sample ids to <this>.<rank> (one line: generation step rank "
          "ids), to audit which data was trained on across restarts.");
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

// INVALID_ARGUMENT "--flag=value is not one of ..." unless value is in `allowed`.
absl::Status CheckOneOf(const char* flag, const std::string& value,
                        std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (value == a) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not one of ", absl::StrJoin(allowed, ", ")));
}

bool IsLanguageModel() {
  return absl::GetFlag(FLAGS_model) == "gpt" ||
         (absl::GetFlag(FLAGS_model) == "torchscript" &&
          absl::GetFlag(FLAGS_task) == "language_model");
}

absl::StatusOr<DataOptions> DataOptionsFromFlags() {
  RETURN_IF_ERROR(CheckOneOf(kFlagDataset, absl::GetFlag(FLAGS_dataset),
                             {"mnist", "cifar10", "image_folder", "tokens", "synthetic"}));
  DataOptions data;
  data.dataset = absl::GetFlag(FLAGS_dataset);
  data.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data.dataset != "synthetic" && data.data_dir.empty()) {
    return absl::InvalidArgumentError("--data_dir is required");
  }
  data.image_size = absl::GetFlag(FLAGS_image_size);
  data.context_length = absl::GetFlag(FLAGS_context_length);
  data.synthetic_samples = absl::GetFlag(FLAGS_synthetic_samples);
  data.num_classes = absl::GetFlag(FLAGS_num_classes);
  data.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  data.synthetic_tokens = IsLanguageModel();
  data.seed = absl::GetFlag(FLAGS_seed);
  return data;
}

absl::StatusOr<TrainerOptions> OptionsFromFlags() {
  RETURN_IF_ERROR(CheckOneOf(kFlagModel, absl::GetFlag(FLAGS_model),
                             {"mlp", "resnet18", "resnet50", "gpt", "torchscript"}));
  RETURN_IF_ERROR(
      CheckOneOf(kFlagTask, absl::GetFlag(FLAGS_task), {"classification", "language_model"}));
  RETURN_IF_ERROR(CheckOneOf(kFlagOptimizer, absl::GetFlag(FLAGS_optimizer), {"sgd", "adamw"}));
  RETURN_IF_ERROR(CheckOneOf(kFlagLrSchedule, absl::GetFlag(FLAGS_lr_schedule),
                             {"constant", "cosine", "step"}));
  if (absl::GetFlag(FLAGS_threads) < 1) {
    return absl::InvalidArgumentError("--threads must be >= 1");
  }
  TrainerOptions options;
  ModelOptions& model = options.model;
  model.model = absl::GetFlag(FLAGS_model);
  ASSIGN_OR_RETURN(model.hidden, ParseHiddenWidths(absl::GetFlag(FLAGS_hidden)));
  model.gpt_layers = absl::GetFlag(FLAGS_gpt_layers);
  model.gpt_heads = absl::GetFlag(FLAGS_gpt_heads);
  model.gpt_width = absl::GetFlag(FLAGS_gpt_width);
  model.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  model.context_length = absl::GetFlag(FLAGS_context_length);
  model.torchscript_path = absl::GetFlag(FLAGS_torchscript_path);
  model.task = absl::GetFlag(FLAGS_task);

  OptimizerOptions& optimizer = options.optimizer;
  optimizer.name = absl::GetFlag(FLAGS_optimizer);
  optimizer.lr = absl::GetFlag(FLAGS_lr);
  optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  optimizer.nesterov = absl::GetFlag(FLAGS_nesterov);
  optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  optimizer.adam_beta1 = absl::GetFlag(FLAGS_adam_beta1);
  optimizer.adam_beta2 = absl::GetFlag(FLAGS_adam_beta2);
  optimizer.adam_eps = absl::GetFlag(FLAGS_adam_eps);

  LrScheduleOptions& schedule = options.schedule;
  schedule.kind = absl::GetFlag(FLAGS_lr_schedule);
  schedule.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  schedule.step_size = absl::GetFlag(FLAGS_lr_step_size);
  schedule.gamma = absl::GetFlag(FLAGS_lr_gamma);
  schedule.min_lr = absl::GetFlag(FLAGS_min_lr);
  schedule.base_batch = absl::GetFlag(FLAGS_base_batch);

  TrainStepOptions& step = options.step;
  ASSIGN_OR_RETURN(step.precision, ParsePrecision(absl::GetFlag(FLAGS_precision)));
  step.accumulation_steps = absl::GetFlag(FLAGS_accumulation_steps);
  step.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  step.reducer.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  ASSIGN_OR_RETURN(step.reducer.compression,
                   ParseGradCompression(absl::GetFlag(FLAGS_grad_compression)));

  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.loader_threads = absl::GetFlag(FLAGS_loader_threads);
  options.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.max_epochs = absl::GetFlag(FLAGS_max_epochs);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.global_batch = absl::GetFlag(FLAGS_global_batch);
  options.sample_log = absl::GetFlag(FLAGS_sample_log);
  options.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  options.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  RETURN_IF_ERROR(ValidateTrainerOptions(options));
  return options;
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(const LaunchEnv& env,
                                                      const c10::Device& device) {
  ProcessGroupOptions options;
  options.device = device;
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

// The exit code of a run that did not fail: kExitOk or kExitCheckpointed.
absl::StatusOr<int> Run(int argc, char** argv, absl::Time process_start) {
  RETURN_IF_ERROR(ParseFlags(argc, argv));
  ASSIGN_OR_RETURN(const TrainerOptions options, OptionsFromFlags());
  ASSIGN_OR_RETURN(const DataOptions data_options, DataOptionsFromFlags());
  ASSIGN_OR_RETURN(const LaunchEnv env, LaunchEnvFromProcess());
  ASSIGN_OR_RETURN(MetricsWriter metrics, MetricsWriter::ForFd(env.metrics_fd));
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  ASSIGN_OR_RETURN(const c10::Device device,
                   ResolveDevice(absl::GetFlag(FLAGS_device), env.local_rank));

  // Data before rendezvous: a bad --data_dir fails fast instead of after the others joined.
  ASSIGN_OR_RETURN(const std::unique_ptr<Dataset> train,
                   OpenDataset(data_options, Split::kTrain));
  ASSIGN_OR_RETURN(const std::unique_ptr<Dataset> test, OpenDataset(data_options, Split::kTest));
  ASSIGN_OR_RETURN(const std::unique_ptr<Communicator> comm, Connect(env, device));
  std::cout << absl::StrFormat(
                   "baton-trainer: rank %d/%d job '%s' generation %d on %s (%s): %d train, %d "
                   "test samples",
                   env.rank, env.world_size, env.job_id, env.generation, device.str(),
                   comm->backend(), train->size(), test != nullptr ? test->size() : 0)
            << std::endl;

  TrainerContext context;
  context.train = train.get();
  context.test = test.get();
  context.comm = comm.get();
  context.metrics = &metrics;
  context.clock = RealClock::Get();
  context.log = &std::cout;
  context.stop = &g_stop_requested;
  context.checkpoint_request = &g_checkpoint_requested;
  context.generation = env.generation;
  context.job_id = env.job_id;
  Trainer trainer(options, context);
  ASSIGN_OR_RETURN(const TrainResult result, trainer.Run());

  const std::string eval = result.eval_accuracy.has_value()
                               ? absl::StrFormat("%.4f", *result.eval_accuracy)
                               : std::string("nan");
  std::cout << absl::StrFormat(
                   "%s: steps=%d loss=%.4f accuracy=%.4f eval_accuracy=%s skipped=%d wall_s=%.2f",
                   result.stopped        ? "stopped"
                   : result.checkpointed ? "checkpointed"
                                         : "done",
                   result.steps, result.loss,
                   result.accuracy, eval, result.skipped_steps,
                   absl::ToDoubleSeconds(absl::Now() - process_start))
            << std::endl;
  if (!result.checkpoint_path.empty()) {
    std::cout << "checkpoint: " << result.checkpoint_path << std::endl;
  }
  if (result.stopped) {
    return absl::CancelledError(absl::StrCat("stopped by signal after ", result.steps, " steps"));
  }
  return result.checkpointed ? kExitCheckpointed : kExitOk;
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
    // A warm standby (standby_protocol.h): static initialisation is done; say so, wait for
    // the launch this process stands in for, then run exactly as if exec'd with it.
    baton::trainer::SignalStandbyLoaded(0);
    absl::StatusOr<std::optional<baton::trainer::StandbyRequest>> request =
        baton::trainer::ReadStandbyRequest(0);
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
