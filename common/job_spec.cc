#include "common/job_spec.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/proto_time.h"
#include "common/status_macros.h"

namespace baton {
namespace {

using baton::v1::CommandSpec;
using baton::v1::JobSpec;
using baton::v1::RestartPolicy;
using baton::v1::TrainerSpec;

constexpr int kDefaultBatchSize = 64;
constexpr double kDefaultLr = 0.05;
constexpr double kDefaultMomentum = 0.9;
constexpr uint64_t kDefaultSeed = 1;
constexpr int kDefaultHidden[] = {256, 128};
constexpr int kDefaultLogEvery = 10;
constexpr int kDefaultThreads = 1;
constexpr int kDefaultSlotsPerWorker = 1;
// Defaults of the TrainerSpec fields added for the data-parallel trainer (job.proto).
constexpr char kDefaultPrecision[] = "fp32";
constexpr int kDefaultAccumulationSteps = 1;
constexpr double kDefaultBucketCapMb = 25;
constexpr char kDefaultGradCompression[] = "none";
constexpr char kDefaultOptimizer[] = "sgd";
constexpr double kDefaultAdamBeta1 = 0.9;
constexpr double kDefaultAdamBeta2 = 0.999;
constexpr double kDefaultAdamEps = 1e-8;
constexpr char kDefaultLrSchedule[] = "constant";
constexpr double kDefaultLrGamma = 0.1;
constexpr int kDefaultLoaderThreads = 2;
constexpr int kDefaultPrefetchBatches = 4;
constexpr int kDefaultImageFolderImageSize = 224;
constexpr int kDefaultContextLength = 128;
constexpr int64_t kDefaultSyntheticSamples = 8192;
constexpr int kDefaultNumClasses = 10;
constexpr int kDefaultGptLayers = 4;
constexpr int kDefaultGptHeads = 4;
constexpr int kDefaultGptWidth = 256;
constexpr int kDefaultVocabSize = 50304;
constexpr char kDefaultTask[] = "classification";
constexpr int kDefaultKeepCheckpoints = 3;
// RestartPolicy defaults and limits (job.proto).
constexpr int kDefaultMaxInfraRestarts = 10;
constexpr int kDefaultMaxUserRestarts = 3;
constexpr int kDefaultMaxStallRestarts = 3;
constexpr absl::Duration kDefaultBackoffInitial = absl::Milliseconds(500);
constexpr absl::Duration kDefaultBackoffMax = absl::Seconds(30);
constexpr double kDefaultStallFactor = 10;
constexpr absl::Duration kDefaultStallFloor = absl::Seconds(30);
constexpr int kMaxRestarts = 1000;
constexpr absl::Duration kMaxBackoff = absl::Hours(1);
constexpr absl::Duration kMinStallFloor = absl::Seconds(1);

// Built-in trainer's choices.
constexpr absl::string_view kModels[] = {"mlp", "resnet18", "resnet50", "gpt", "torchscript"};
constexpr absl::string_view kPrecisions[] = {"fp32", "bf16", "fp16"};
constexpr absl::string_view kGradCompressions[] = {"none", "bf16", "fp16"};
constexpr absl::string_view kOptimizers[] = {"sgd", "adamw"};
constexpr absl::string_view kLrSchedules[] = {"constant", "cosine", "step"};
constexpr absl::string_view kTasks[] = {"classification", "language_model"};

// What data_dir must hold for a dataset.
enum class DirRule {
  kNone,          // synthetic: no directory at all.
  kFiles,         // Every file in `files` (in data_dir or one of `alt_subdirs`).
  kSubdirectory,  // At least one sub-directory (image_folder: one per class).
};
struct Dataset {
  absl::string_view name;
  DirRule rule;
  std::vector<absl::string_view> files;  // kFiles: must exist.
  std::vector<absl::string_view> alt_subdirs;  // kFiles: also accepted under these.
  bool tokens;  // Language-model data (token sequences).
};
const std::vector<Dataset>& Datasets() {
  static const auto* datasets = new std::vector<Dataset>{
      {"mnist", DirRule::kFiles, {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}, {},
       false},
      {"cifar10", DirRule::kFiles, {"data_batch_1.bin"}, {"cifar-10-batches-bin"}, false},
      {"image_folder", DirRule::kSubdirectory, {}, {}, false},
      {"tokens", DirRule::kFiles, {"train.bin"}, {}, true},
      {"synthetic", DirRule::kNone, {}, {}, false},
  };
  return *datasets;
}

// Largest values accepted for the data-parallel trainer's numeric fields.
constexpr int kMaxAccumulationSteps = 1024;
constexpr double kMaxBucketCapMb = 4096;
constexpr int kMaxLoaderThreads = 64;
constexpr int kMaxPrefetchBatches = 1024;
constexpr int kMaxImageSize = 4096;
constexpr int kMaxContextLength = 65536;
constexpr int64_t kMaxSyntheticSamples = int64_t{1} << 31;
constexpr int kMaxNumClasses = 1000000;
constexpr int kMaxGptLayers = 256;
constexpr int kMaxGptHeads = 256;
constexpr int kMaxGptWidth = 65536;
constexpr int kMaxVocabSize = 1 << 24;
constexpr int kMaxKeepCheckpoints = 1000;
constexpr int64_t kMaxBaseBatch = int64_t{1} << 30;

constexpr absl::string_view kReservedEnvNames[] = {
    "RANK",       "WORLD_SIZE",       "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
    "MASTER_PORT",
};
constexpr absl::string_view kReservedEnvPrefixes[] = {"TORCHELASTIC_", "BATON_"};

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// "mlp" / "a, b" for messages.
template <typename Container>
std::string JoinNames(const Container& names) {
  return absl::StrJoin(names, ", ");
}

bool IsLowerAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return IsLowerAlpha(c) || (c >= 'A' && c <= 'Z'); }

// ^[a-z][a-z0-9-]{0,62}$
bool IsValidJobName(absl::string_view name) {
  if (name.empty() || name.size() > 63 || !IsLowerAlpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLowerAlpha(c) || IsDigit(c) || c == '-'; });
}

// ^[A-Za-z_][A-Za-z0-9_]*$
bool IsValidEnvName(absl::string_view name) {
  if (name.empty() || !(IsAlpha(name[0]) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; });
}

bool IsAbsolute(absl::string_view path) { return !path.empty() && path[0] == '/'; }

// A path field that may be empty (meaning "Baton's default") or absolute.
absl::Status CheckOptionalAbsolute(absl::string_view field, const std::string& path) {
  if (path.empty() || IsAbsolute(path)) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat("'", path, "' is relative; must be empty or an absolute path"));
}

bool IsReadableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), R_OK) == 0;
}

bool HasSubdirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

absl::Status CheckDataDir(const std::string& dir, const Dataset& dataset) {
  constexpr absl::string_view kField = "trainer.data_dir";
  if (dataset.rule == DirRule::kNone) {
    if (dir.empty()) return absl::OkStatus();
    return Invalid(kField, absl::StrCat("'", dir, "' is set; must be empty for the ",
                                        dataset.name, " dataset (it reads no files)"));
  }
  if (dir.empty()) {
    return Invalid(kField, "is required; the absolute directory holding the dataset files");
  }
  if (!IsAbsolute(dir)) {
    return Invalid(kField, absl::StrCat("'", dir, "' is relative; must be an absolute path"));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return Invalid(kField, absl::StrCat(dir, " is not accessible (", std::strerror(errno),
                                        "); must be a readable directory"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Invalid(kField, absl::StrCat(dir, " is not a directory; must be a readable directory"));
  }
  if (access(dir.c_str(), R_OK | X_OK) != 0) {
    return Invalid(kField, absl::StrCat(dir, " is not readable (", std::strerror(errno),
                                        "); must be a readable directory"));
  }
  if (dataset.rule == DirRule::kSubdirectory) {
    if (HasSubdirectory(dir)) return absl::OkStatus();
    return Invalid(kField, absl::StrCat(dir, " has no sub-directory; the ", dataset.name,
                                        " dataset needs one directory of images per class"));
  }
  std::vector<std::string> roots = {dir};
  for (absl::string_view sub : dataset.alt_subdirs) roots.push_back(absl::StrCat(dir, "/", sub));
  for (const std::string& root : roots) {
    const bool complete = std::all_of(
        dataset.files.begin(), dataset.files.end(),
        [&](absl::string_view file) { return IsReadableFile(absl::StrCat(root, "/", file)); });
    if (complete) return absl::OkStatus();
  }
  for (absl::string_view file : dataset.files) {
    if (!IsReadableFile(absl::StrCat(dir, "/", file))) {
      return Invalid(kField,
                     absl::StrCat(dir, " has no readable file ", file, "; the ", dataset.name,
                                  " dataset needs ", JoinNames(dataset.files)));
    }
  }
  return Invalid(kField, absl::StrCat(dir, " lacks the ", dataset.name, " files"));
}

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat(value, " is out of range; must be ", lo, "..", hi));
}

template <typename Container>
absl::Status CheckOneOf(absl::string_view field, const std::string& value,
                        const Container& allowed) {
  if (std::find(std::begin(allowed), std::end(allowed), value) != std::end(allowed)) {
    return absl::OkStatus();
  }
  return Invalid(field, absl::StrCat("'", value, "' is not supported; allowed: ",
                                     JoinNames(allowed)));
}

// A finite double in [lo, hi] (or [lo, hi) when !hi_inclusive; (lo, ...] when !lo_inclusive).
absl::Status CheckDouble(absl::string_view field, double value, double lo, bool lo_inclusive,
                         double hi, bool hi_inclusive) {
  const bool ok = std::isfinite(value) && (lo_inclusive ? value >= lo : value > lo) &&
                  (hi_inclusive ? value <= hi : value < hi);
  if (ok) return absl::OkStatus();
  return Invalid(field, absl::StrCat(value, " is out of range; must be in ", lo_inclusive ? "[" : "(",
                                     lo, ", ", hi, hi_inclusive ? "]" : ")"));
}

absl::Status ValidateTrainer(const TrainerSpec& t) {
  RETURN_IF_ERROR(CheckOneOf("trainer.model", t.model(), kModels));
  const Dataset* dataset = nullptr;
  std::vector<absl::string_view> dataset_names;
  for (const Dataset& d : Datasets()) {
    dataset_names.push_back(d.name);
    if (d.name == t.dataset()) dataset = &d;
  }
  if (dataset == nullptr) {
    return Invalid("trainer.dataset",
                   absl::StrCat("'", t.dataset(), "' is not supported; allowed: ",
                                JoinNames(dataset_names)));
  }
  RETURN_IF_ERROR(CheckDataDir(t.data_dir(), *dataset));
  RETURN_IF_ERROR(CheckRange("trainer.batch_size", t.batch_size(), 1, kMaxBatchSize));
  if (!(t.lr() > 0) || !std::isfinite(t.lr())) {
    return Invalid("trainer.lr",
                   absl::StrCat(t.lr(), " is invalid; must be a finite number > 0"));
  }
  if (!(t.momentum() >= 0 && t.momentum() < 1)) {
    return Invalid("trainer.momentum",
                   absl::StrCat(t.momentum(), " is out of range; must be in [0, 1)"));
  }
  if (t.hidden_size() > kMaxHiddenLayers) {
    return Invalid("trainer.hidden", absl::StrCat(t.hidden_size(), " layers is too many; at most ",
                                                  kMaxHiddenLayers));
  }
  for (int i = 0; i < t.hidden_size(); ++i) {
    RETURN_IF_ERROR(CheckRange(absl::StrCat("trainer.hidden[", i, "]"), t.hidden(i), 1,
                               kMaxHiddenWidth));
  }
  if (t.log_every() < 1) {
    return Invalid("trainer.log_every", absl::StrCat(t.log_every(), " is invalid; must be >= 1"));
  }
  RETURN_IF_ERROR(CheckRange("trainer.threads", t.threads(), 1, kMaxTrainerThreads));

  // Numerics.
  RETURN_IF_ERROR(CheckOneOf("trainer.precision", t.precision(), kPrecisions));
  RETURN_IF_ERROR(CheckRange("trainer.accumulation_steps", t.accumulation_steps(), 1,
                             kMaxAccumulationSteps));
  RETURN_IF_ERROR(
      CheckDouble("trainer.bucket_cap_mb", t.bucket_cap_mb(), 0, false, kMaxBucketCapMb, true));
  RETURN_IF_ERROR(CheckOneOf("trainer.grad_compression", t.grad_compression(), kGradCompressions));
  if (!(t.max_grad_norm() >= 0) || !std::isfinite(t.max_grad_norm())) {
    return Invalid("trainer.max_grad_norm",
                   absl::StrCat(t.max_grad_norm(), " is invalid; must be >= 0 (0 = no clipping)"));
  }

  // Optimisation.
  RETURN_IF_ERROR(CheckOneOf("trainer.optimizer", t.optimizer(), kOptimizers));
  if (!(t.weight_decay() >= 0) || !std::isfinite(t.weight_decay())) {
    return Invalid("trainer.weight_decay",
                   absl::StrCat(t.weight_decay(), " is invalid; must be a finite number >= 0"));
  }
  if (t.nesterov() && (t.optimizer() != "sgd" || !(t.momentum() > 0))) {
    return Invalid("trainer.nesterov",
                   "needs optimizer 'sgd' with momentum > 0; unset it or set momentum");
  }
  RETURN_IF_ERROR(CheckDouble("trainer.adam_beta1", t.adam_beta1(), 0, true, 1, false));
  RETURN_IF_ERROR(CheckDouble("trainer.adam_beta2", t.adam_beta2(), 0, true, 1, false));
  if (!(t.adam_eps() >= 0) || !std::isfinite(t.adam_eps())) {
    return Invalid("trainer.adam_eps",
                   absl::StrCat(t.adam_eps(), " is invalid; must be a finite number >= 0"));
  }
  RETURN_IF_ERROR(CheckOneOf("trainer.lr_schedule", t.lr_schedule(), kLrSchedules));
  if (t.warmup_steps() < 0) {
    return Invalid("trainer.warmup_steps",
                   absl::StrCat(t.warmup_steps(), " is negative; must be >= 0"));
  }
  if (t.lr_step_size() < 0 || (t.lr_schedule() == "step" && t.lr_step_size() == 0)) {
    return Invalid("trainer.lr_step_size",
                   absl::StrCat(t.lr_step_size(), " is invalid; must be > 0 for lr_schedule "
                                                  "'step' (and never negative)"));
  }
  if (!(t.lr_gamma() > 0) || !std::isfinite(t.lr_gamma())) {
    return Invalid("trainer.lr_gamma",
                   absl::StrCat(t.lr_gamma(), " is invalid; must be a finite number > 0"));
  }
  if (!(t.min_lr() >= 0) || !std::isfinite(t.min_lr())) {
    return Invalid("trainer.min_lr",
                   absl::StrCat(t.min_lr(), " is invalid; must be a finite number >= 0"));
  }
  RETURN_IF_ERROR(CheckRange("trainer.base_batch", t.base_batch(), 0, kMaxBaseBatch));

  // Data.
  RETURN_IF_ERROR(CheckRange("trainer.loader_threads", t.loader_threads(), 0, kMaxLoaderThreads));
  RETURN_IF_ERROR(
      CheckRange("trainer.prefetch_batches", t.prefetch_batches(), 1, kMaxPrefetchBatches));
  RETURN_IF_ERROR(CheckRange("trainer.image_size", t.image_size(), 0, kMaxImageSize));
  RETURN_IF_ERROR(
      CheckRange("trainer.context_length", t.context_length(), 1, kMaxContextLength));
  RETURN_IF_ERROR(
      CheckRange("trainer.synthetic_samples", t.synthetic_samples(), 1, kMaxSyntheticSamples));
  RETURN_IF_ERROR(CheckRange("trainer.num_classes", t.num_classes(), 2, kMaxNumClasses));

  // Models.
  RETURN_IF_ERROR(CheckRange("trainer.gpt_layers", t.gpt_layers(), 1, kMaxGptLayers));
  RETURN_IF_ERROR(CheckRange("trainer.gpt_heads", t.gpt_heads(), 1, kMaxGptHeads));
  RETURN_IF_ERROR(CheckRange("trainer.gpt_width", t.gpt_width(), 1, kMaxGptWidth));
  if (t.gpt_width() % t.gpt_heads() != 0) {
    return Invalid("trainer.gpt_width", absl::StrCat(t.gpt_width(), " is not divisible by "
                                                     "trainer.gpt_heads (", t.gpt_heads(), ")"));
  }
  RETURN_IF_ERROR(CheckRange("trainer.vocab_size", t.vocab_size(), 2, kMaxVocabSize));
  if (t.model() == "torchscript") {
    if (!IsAbsolute(t.torchscript_path())) {
      return Invalid("trainer.torchscript_path",
                     absl::StrCat("'", t.torchscript_path(),
                                  "' is invalid; model 'torchscript' needs the absolute path "
                                  "of a module saved by torch.jit.script(m).save()"));
    }
    if (!IsReadableFile(t.torchscript_path())) {
      return Invalid("trainer.torchscript_path",
                     absl::StrCat(t.torchscript_path(), " is not a readable file"));
    }
  } else if (!t.torchscript_path().empty()) {
    return Invalid("trainer.torchscript_path", "is set; only model 'torchscript' uses it");
  }
  RETURN_IF_ERROR(CheckOneOf("trainer.task", t.task(), kTasks));
  // Which models fit which data: token datasets feed language models only.
  const bool language_model =
      t.model() == "gpt" || (t.model() == "torchscript" && t.task() == "language_model");
  if (language_model && !dataset->tokens && dataset->name != "synthetic") {
    return Invalid("trainer.dataset",
                   absl::StrCat("'", t.dataset(), "' holds images; the language model needs "
                                                  "'tokens' or 'synthetic'"));
  }
  if (!language_model && dataset->tokens) {
    return Invalid("trainer.model", absl::StrCat("'", t.model(), "' is a classifier; the tokens "
                                                 "dataset needs 'gpt' or 'torchscript' with "
                                                 "task 'language_model'"));
  }

  // Checkpoints.
  if (t.checkpoint_every() < 0) {
    return Invalid("trainer.checkpoint_every",
                   absl::StrCat(t.checkpoint_every(), " is negative; must be >= 0 (0 = only at "
                                                      "the end)"));
  }
  RETURN_IF_ERROR(
      CheckRange("trainer.keep_checkpoints", t.keep_checkpoints(), 1, kMaxKeepCheckpoints));
  return absl::OkStatus();
}

// trainer.global_batch against every world size the job may run at (its workers and
// slots already validated).
absl::Status ValidateGlobalBatch(const JobSpec& spec) {
  const TrainerSpec& t = spec.trainer();
  const int64_t global = t.global_batch();
  if (global == 0) return absl::OkStatus();
  if (global < 0) {
    return Invalid("trainer.global_batch",
                   absl::StrCat(global, " is negative; must be >= 0 (0 = batch_size per rank)"));
  }
  if (t.accumulation_steps() > 1) {
    return Invalid("trainer.accumulation_steps",
                   absl::StrCat(t.accumulation_steps(), " is set with trainer.global_batch, "
                                "which derives the accumulation steps per world size; unset it"));
  }
  const int slots = SlotsPerWorker(spec);
  const int min = spec.workers().min();
  const int max = MaxWorkers(spec);
  for (int workers = min; workers <= max; ++workers) {
    const int64_t world = int64_t{workers} * slots;
    if (global % world != 0) {
      return Invalid("trainer.global_batch",
                     absl::StrCat(global, " cannot be split evenly over ", world, " ranks (",
                                  workers, " workers x ", slots,
                                  " slots), a size the job may run at; use a multiple of "
                                  "every world size in ", int64_t{min} * slots, "..",
                                  int64_t{max} * slots));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCommand(const CommandSpec& c) {
  if (c.argv_size() == 0) {
    return Invalid("command.argv", "is empty; must list the program and its arguments");
  }
  if (c.argv(0).empty()) {
    return Invalid("command.argv[0]", "is empty; must name the program to run");
  }
  return CheckOptionalAbsolute("command.working_dir", c.working_dir());
}

absl::Status ValidateEnv(const JobSpec& spec) {
  std::vector<std::string> keys;
  keys.reserve(spec.env_size());
  for (const auto& [key, value] : spec.env()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    if (!IsValidEnvName(key)) {
      return Invalid(absl::StrCat("env.", key),
                     "is not a valid variable name; must match [A-Za-z_][A-Za-z0-9_]*");
    }
    if (IsReservedEnvName(key)) {
      return Invalid(absl::StrCat("env.", key),
                     "is reserved (Baton sets it for every process); use another name");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRestartPolicy(const RestartPolicy& p) {
  RETURN_IF_ERROR(
      CheckRange("restart_policy.max_infra_restarts", p.max_infra_restarts(), 0, kMaxRestarts));
  RETURN_IF_ERROR(
      CheckRange("restart_policy.max_user_restarts", p.max_user_restarts(), 0, kMaxRestarts));
  RETURN_IF_ERROR(
      CheckRange("restart_policy.max_stall_restarts", p.max_stall_restarts(), 0, kMaxRestarts));
  const absl::Duration backoff_max = FromProto(p.backoff_max());
  if (backoff_max < absl::ZeroDuration() || backoff_max > kMaxBackoff) {
    return Invalid("restart_policy.backoff_max",
                   absl::StrCat(absl::FormatDuration(backoff_max), " is out of range; must be 0..",
                                absl::FormatDuration(kMaxBackoff)));
  }
  const absl::Duration backoff_initial = FromProto(p.backoff_initial());
  if (backoff_initial < absl::ZeroDuration() || backoff_initial > backoff_max) {
    return Invalid("restart_policy.backoff_initial",
                   absl::StrCat(absl::FormatDuration(backoff_initial),
                                " is out of range; must be 0..restart_policy.backoff_max (",
                                absl::FormatDuration(backoff_max), ")"));
  }
  if (!(p.stall_factor() >= 1) || !std::isfinite(p.stall_factor())) {
    return Invalid("restart_policy.stall_factor",
                   absl::StrCat(p.stall_factor(), " is invalid; must be a finite number >= 1"));
  }
  const absl::Duration stall_floor = FromProto(p.stall_floor());
  if (stall_floor < kMinStallFloor) {
    return Invalid("restart_policy.stall_floor",
                   absl::StrCat(absl::FormatDuration(stall_floor), " is too short; must be >= ",
                                absl::FormatDuration(kMinStallFloor)));
  }
  return absl::OkStatus();
}

}  // namespace

RestartPolicy RestartPolicyWithDefaults(RestartPolicy p) {
  if (!p.has_max_infra_restarts()) p.set_max_infra_restarts(kDefaultMaxInfraRestarts);
  if (!p.has_max_user_restarts()) p.set_max_user_restarts(kDefaultMaxUserRestarts);
  if (!p.has_max_stall_restarts()) p.set_max_stall_restarts(kDefaultMaxStallRestarts);
  if (!p.has_backoff_initial()) *p.mutable_backoff_initial() = ToProto(kDefaultBackoffInitial);
  if (!p.has_backoff_max()) *p.mutable_backoff_max() = ToProto(kDefaultBackoffMax);
  if (!p.has_stall_factor()) p.set_stall_factor(kDefaultStallFactor);
  if (!p.has_stall_floor()) *p.mutable_stall_floor() = ToProto(kDefaultStallFloor);
  return p;
}

bool IsReservedEnvName(const std::string& name) {
  for (absl::string_view reserved : kReservedEnvNames) {
    if (name == reserved) return true;
  }
  for (absl::string_view prefix : kReservedEnvPrefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

JobSpec WithDefaults(JobSpec spec) {
  if (!spec.has_slots_per_worker()) spec.set_slots_per_worker(kDefaultSlotsPerWorker);
  if (!spec.workers().has_max()) spec.mutable_workers()->set_max(spec.workers().min());
  *spec.mutable_restart_policy() = RestartPolicyWithDefaults(spec.restart_policy());
  if (spec.has_trainer()) {
    TrainerSpec& t = *spec.mutable_trainer();
    if (t.batch_size() == 0) t.set_batch_size(kDefaultBatchSize);
    if (t.lr() == 0) t.set_lr(kDefaultLr);
    if (!t.has_momentum()) t.set_momentum(kDefaultMomentum);
    if (t.seed() == 0) t.set_seed(kDefaultSeed);
    if (t.hidden_size() == 0) {
      for (int width : kDefaultHidden) t.add_hidden(width);
    }
    if (t.log_every() == 0) t.set_log_every(kDefaultLogEvery);
    if (t.threads() == 0) t.set_threads(kDefaultThreads);
    if (t.precision().empty()) t.set_precision(kDefaultPrecision);
    if (t.accumulation_steps() == 0) t.set_accumulation_steps(kDefaultAccumulationSteps);
    if (t.bucket_cap_mb() == 0) t.set_bucket_cap_mb(kDefaultBucketCapMb);
    if (t.grad_compression().empty()) t.set_grad_compression(kDefaultGradCompression);
    if (t.optimizer().empty()) t.set_optimizer(kDefaultOptimizer);
    if (!t.has_adam_beta1()) t.set_adam_beta1(kDefaultAdamBeta1);
    if (!t.has_adam_beta2()) t.set_adam_beta2(kDefaultAdamBeta2);
    if (!t.has_adam_eps()) t.set_adam_eps(kDefaultAdamEps);
    if (t.lr_schedule().empty()) t.set_lr_schedule(kDefaultLrSchedule);
    if (!t.has_lr_gamma()) t.set_lr_gamma(kDefaultLrGamma);
    if (t.loader_threads() == 0) t.set_loader_threads(kDefaultLoaderThreads);
    if (t.prefetch_batches() == 0) t.set_prefetch_batches(kDefaultPrefetchBatches);
    if (t.image_size() == 0 && t.dataset() == "image_folder") {
      t.set_image_size(kDefaultImageFolderImageSize);
    }
    if (t.context_length() == 0) t.set_context_length(kDefaultContextLength);
    if (t.synthetic_samples() == 0) t.set_synthetic_samples(kDefaultSyntheticSamples);
    if (t.num_classes() == 0) t.set_num_classes(kDefaultNumClasses);
    if (t.gpt_layers() == 0) t.set_gpt_layers(kDefaultGptLayers);
    if (t.gpt_heads() == 0) t.set_gpt_heads(kDefaultGptHeads);
    if (t.gpt_width() == 0) t.set_gpt_width(kDefaultGptWidth);
    if (t.vocab_size() == 0) t.set_vocab_size(kDefaultVocabSize);
    if (t.task().empty()) t.set_task(kDefaultTask);
    if (t.keep_checkpoints() == 0) t.set_keep_checkpoints(kDefaultKeepCheckpoints);
  }
  return spec;
}

int MaxWorkers(const JobSpec& spec) {
  return spec.workers().has_max() ? spec.workers().max() : spec.workers().min();
}

int SlotsPerWorker(const JobSpec& spec) {
  return spec.has_slots_per_worker() ? spec.slots_per_worker() : kDefaultSlotsPerWorker;
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  if (!IsValidJobName(spec.name())) {
    return Invalid("name", absl::StrCat(spec.name().empty() ? "is empty"
                                                             : "'" + spec.name() + "' is invalid",
                                        "; must be 1-63 characters of [a-z0-9-] starting with "
                                        "a lowercase letter"));
  }
  switch (spec.program_case()) {
    case JobSpec::kTrainer:
      RETURN_IF_ERROR(ValidateTrainer(spec.trainer()));
      break;
    case JobSpec::kCommand:
      RETURN_IF_ERROR(ValidateCommand(spec.command()));
      break;
    case JobSpec::PROGRAM_NOT_SET:
      return Invalid("program", "set exactly one of 'trainer' or 'command'");
  }

  const int min = spec.workers().min();
  if (min < 1) {
    return Invalid("workers.min", absl::StrCat(min, " is invalid; required, must be >= 1"));
  }
  if (min > kMaxWorkers) {
    return Invalid("workers.min",
                   absl::StrCat(min, " is too large; must be <= ", kMaxWorkers));
  }
  if (spec.workers().has_max()) {
    const int max = spec.workers().max();
    if (max < min) {
      return Invalid("workers.max", absl::StrCat(max, " is less than workers.min (", min,
                                                 "); must be >= min"));
    }
    if (max > kMaxWorkers) {
      return Invalid("workers.max",
                     absl::StrCat(max, " is too large; must be <= ", kMaxWorkers));
    }
  }
  if (spec.has_slots_per_worker()) {
    const int slots = spec.slots_per_worker();
    if (slots < 1 || slots > kMaxSlotsPerWorker) {
      return Invalid("slots_per_worker",
                     absl::StrCat(slots, slots == 0 ? " (zero slots)" : "",
                                  " is out of range; must be 1..", kMaxSlotsPerWorker));
    }
  }
  RETURN_IF_ERROR(ValidateEnv(spec));
  RETURN_IF_ERROR(CheckOptionalAbsolute("checkpoint_dir", spec.checkpoint_dir()));
  if (spec.has_trainer()) RETURN_IF_ERROR(ValidateGlobalBatch(spec));
  const int max_workers = MaxWorkers(spec);
  if (spec.has_trainer() && spec.trainer().checkpoint_every() > 0 &&
      spec.checkpoint_dir().empty() && max_workers > 1) {
    return Invalid(
        "checkpoint_dir",
        absl::StrCat("is required when the trainer checkpoints (trainer.checkpoint_every ",
                     spec.trainer().checkpoint_every(), ") on up to ", max_workers,
                     " workers: after a failure every rank restores the newest checkpoint, so it "
                     "must be a directory every worker reads (a shared file system); the "
                     "default is each worker's own work_dir"));
  }

  const auto& budget = spec.budget();
  if (budget.max_steps() < 0) {
    return Invalid("budget.max_steps", absl::StrCat(budget.max_steps(),
                                                    " is negative; must be >= 0 (0 = no limit)"));
  }
  if (budget.max_epochs() < 0) {
    return Invalid("budget.max_epochs", absl::StrCat(budget.max_epochs(),
                                                     " is negative; must be >= 0 (0 = no limit)"));
  }
  if (spec.has_trainer() && budget.max_steps() == 0 && budget.max_epochs() == 0) {
    return Invalid("budget", "the trainer needs a limit; set budget.max_steps or "
                             "budget.max_epochs to a value > 0");
  }
  return ValidateRestartPolicy(spec.restart_policy());
}

}  // namespace baton
