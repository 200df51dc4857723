#include "common/job_spec.h"

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
#include "common/status_macros.h"

namespace baton {
namespace {

using baton::v1::CommandSpec;
using baton::v1::JobSpec;
using baton::v1::TrainerSpec;

constexpr int kDefaultBatchSize = 64;
constexpr double kDefaultLr = 0.05;
constexpr double kDefaultMomentum = 0.9;
constexpr uint64_t kDefaultSeed = 1;
constexpr int kDefaultHidden[] = {256, 128};
constexpr int kDefaultLogEvery = 10;
constexpr int kDefaultThreads = 1;
constexpr int kDefaultSlotsPerWorker = 1;

// Built-in trainer's choices.
constexpr absl::string_view kModels[] = {"mlp"};
struct Dataset {
  absl::string_view name;
  std::vector<absl::string_view> files;  // must exist in data_dir
};
const std::vector<Dataset>& Datasets() {
  static const auto* datasets = new std::vector<Dataset>{
      {"mnist", {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}},
  };
  return *datasets;
}

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

absl::Status CheckDataDir(const std::string& dir, const Dataset& dataset) {
  constexpr absl::string_view kField = "trainer.data_dir";
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
  for (absl::string_view file : dataset.files) {
    const std::string path = absl::StrCat(dir, "/", file);
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        access(path.c_str(), R_OK) != 0) {
      return Invalid(kField,
                     absl::StrCat(dir, " has no readable file ", file, "; the ", dataset.name,
                                  " dataset needs ", JoinNames(dataset.files)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat(value, " is out of range; must be ", lo, "..", hi));
}

absl::Status ValidateTrainer(const TrainerSpec& t) {
  if (std::find(std::begin(kModels), std::end(kModels), t.model()) == std::end(kModels)) {
    return Invalid("trainer.model",
                   absl::StrCat("'", t.model(), "' is not supported; allowed: ",
                                JoinNames(kModels)));
  }
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

}  // namespace

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
  }
  return spec;
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
  return absl::OkStatus();
}

}  // namespace baton
