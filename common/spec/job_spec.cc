#include "common/spec/job_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/spec/global_batch.h"
#include "common/spec/trainer_rules.h"
#include "common/spec/trainer_spec.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"

namespace baton {
namespace {

using baton::v1::CommandSpec;
using baton::v1::JobSpec;
using baton::v1::RestartPolicy;
using baton::v1::TrainerSpec;

constexpr int kDefaultSlotsPerWorker = 1;
// RestartPolicy defaults and limits (job.proto).
constexpr int kDefaultMaxInfraRestarts = 10;
constexpr int kDefaultMaxUserRestarts = 3;
constexpr int kDefaultMaxStallRestarts = 3;
constexpr absl::Duration kDefaultBackoffInitial = absl::Milliseconds(500);
constexpr absl::Duration kDefaultBackoffMax = absl::Seconds(30);
constexpr double kDefaultStallFactor = 3;
constexpr absl::Duration kDefaultStallFloor = absl::Milliseconds(1500);
constexpr absl::Duration kDefaultStallUnlearned = absl::Minutes(10);
constexpr absl::Duration kDefaultReportStallFloor = absl::Seconds(30);
constexpr absl::Duration kMaxStallTimeout = absl::Hours(24 * 7);
constexpr int kMaxRestarts = 1000;
constexpr absl::Duration kMaxBackoff = absl::Hours(1);
constexpr int64_t kDefaultHealthySteps = 100;
constexpr int64_t kMaxHealthySteps = 1'000'000'000;
constexpr absl::Duration kDefaultHealthyTime = absl::Minutes(10);
constexpr absl::Duration kMaxHealthyTime = absl::Hours(24 * 7);
constexpr absl::Duration kMinStallFloor = absl::Seconds(1);
constexpr absl::Duration kDefaultLinkWindow = absl::Milliseconds(200);
constexpr absl::Duration kMinLinkWindow = absl::Milliseconds(50);
constexpr absl::Duration kMaxLinkWindow = absl::Seconds(10);
constexpr double kDefaultMinBandwidthFraction = 0.5;

constexpr absl::string_view kReservedEnvNames[] = {
    "RANK",       "WORLD_SIZE",       "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",   "ROLE_WORLD_SIZE",
    "ROLE_NAME",  "MASTER_ADDR",      "MASTER_PORT",
};
constexpr absl::string_view kReservedEnvPrefixes[] = {"TORCHELASTIC_", "BATON_"};

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
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

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Invalid(field, absl::StrCat(value, " is out of range; must be ", lo, "..", hi));
}

// Runs `check(workers, world)` for every world size the job may run at (workers min..max
// times its slots per worker; both already validated), smallest first, and returns the
// first error. `range` is set to those world sizes as "lo..hi", for messages.
absl::Status CheckEveryWorldSize(
    const JobSpec& spec, std::string* range,
    const std::function<absl::Status(int workers, int slots, int64_t world)>& check) {
  const int slots = SlotsPerWorker(spec);
  const int min = spec.workers().min();
  const int max = MaxWorkers(spec);
  *range = absl::StrCat(int64_t{min} * slots, "..", int64_t{max} * slots);
  for (int workers = min; workers <= max; ++workers) {
    RETURN_IF_ERROR(check(workers, slots, int64_t{workers} * slots));
  }
  return absl::OkStatus();
}

// trainer.global_batch against every world size the job may run at: the split baton-trainer
// makes (global_batch.h) exists for each.
absl::Status ValidateGlobalBatch(const JobSpec& spec) {
  const TrainerSpec& t = spec.trainer();
  const int64_t global = t.global_batch();
  if (global == 0) return absl::OkStatus();  // Its range: ValidateTrainerSpec.
  RETURN_IF_ERROR(
      trainer_spec::CheckGlobalBatch(global, t.accumulation_steps(), trainer_spec::Naming::kSpec));
  std::string range;
  return CheckEveryWorldSize(spec, &range, [&](int workers, int slots, int64_t world) {
    if (SplitGlobalBatch(global, world, /*max_micro_batch=*/global).ok()) return absl::OkStatus();
    return Invalid("trainer.global_batch",
                   absl::StrCat(global, " cannot be split evenly over ", world, " ranks (", workers,
                                " workers x ", slots,
                                " slots), a size the job may run at; use a multiple of "
                                "every world size in ",
                                range));
  });
}

// trainer.pipeline.stages against every world size the job may run at (each world is
// whole pipelines), then whether pipelines run at all yet.
absl::Status ValidatePipelineWorld(const JobSpec& spec) {
  const int64_t stages = spec.trainer().pipeline().stages();
  if (stages <= 1) return absl::OkStatus();  // Its range: ValidateTrainerSpec.
  std::string range;
  return CheckEveryWorldSize(spec, &range, [&](int workers, int slots, int64_t world) {
    if (world % stages == 0) return absl::OkStatus();
    return Invalid(
        "trainer.pipeline.stages",
        absl::StrCat(stages, " does not divide ", world, " ranks (", workers, " workers x ", slots,
                     " slots), a size the job may run at; every "
                     "world size in ",
                     range, " must be a multiple of the stages"));
  });
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

// Variables that make a process load code it was not built with: the dynamic loader's
// (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, ... every LD_*, and GLIBC_TUNABLES, which it
// parses), glibc's iconv modules, CUDA's and NVTX's injection libraries, NCCL's network,
// tuner, profiler and environment plugins, and the OpenMP tools interface.
bool LoadsCode(absl::string_view name) {
  static const char* const kExact[] = {
      "GLIBC_TUNABLES",        "GCONV_PATH",
      "CUDA_INJECTION32_PATH", "CUDA_INJECTION64_PATH",
      "NVTX_INJECTION32_PATH", "NVTX_INJECTION64_PATH",
      "OMP_TOOL_LIBRARIES",    "OMP_TOOL",
  };
  if (absl::StartsWith(name, "LD_")) return true;
  if (absl::StartsWith(name, "NCCL_") && absl::EndsWith(name, "_PLUGIN")) return true;
  for (const char* exact : kExact) {
    if (name == exact) return true;
  }
  return false;
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
    if (spec.has_trainer() && LoadsCode(key)) {
      return Invalid(absl::StrCat("env.", key),
                     "makes the built-in trainer load other code (the dynamic loader's LD_* "
                     "and GLIBC_TUNABLES, GCONV_PATH, CUDA_/NVTX_INJECTION*_PATH, "
                     "NCCL_*_PLUGIN, OMP_TOOL_LIBRARIES); a trainer job may not set it (a "
                     "command job may, with a role allowed to run commands)");
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
  const auto check_timeout = [](const std::string& field, const absl::Duration d,
                                bool zero_allowed) -> absl::Status {
    if ((zero_allowed && d == absl::ZeroDuration()) ||
        (d >= absl::Seconds(1) && d <= kMaxStallTimeout)) {
      return absl::OkStatus();
    }
    return Invalid(field, absl::StrCat(absl::FormatDuration(d), " is out of range; must be ",
                                       zero_allowed ? "0 (off) or " : "", "1s..",
                                       absl::FormatDuration(kMaxStallTimeout)));
  };
  const baton::v1::PhaseTimeouts& phases = p.phase_timeouts();
  for (const auto& [name, d] :
       {std::pair<const char*, const google::protobuf::Duration*>{"startup", &phases.startup()},
        {"step", &phases.step()},
        {"eval", &phases.eval()},
        {"checkpoint", &phases.checkpoint()},
        {"epoch", &phases.epoch()}}) {
    RETURN_IF_ERROR(check_timeout(absl::StrCat("restart_policy.phase_timeouts.", name),
                                  FromProto(*d), /*zero_allowed=*/true));
  }
  RETURN_IF_ERROR(check_timeout("restart_policy.stall_unlearned", FromProto(p.stall_unlearned()),
                                /*zero_allowed=*/false));
  RETURN_IF_ERROR(check_timeout("restart_policy.report_stall_floor",
                                FromProto(p.report_stall_floor()), /*zero_allowed=*/false));
  RETURN_IF_ERROR(check_timeout("restart_policy.output_silence", FromProto(p.output_silence()),
                                /*zero_allowed=*/true));
  RETURN_IF_ERROR(
      CheckRange("restart_policy.healthy_steps", p.healthy_steps(), 0, kMaxHealthySteps));
  const absl::Duration healthy_time = FromProto(p.healthy_time());
  if (healthy_time < absl::ZeroDuration() || healthy_time > kMaxHealthyTime) {
    return Invalid("restart_policy.healthy_time",
                   absl::StrCat(absl::FormatDuration(healthy_time), " is out of range; must be 0..",
                                absl::FormatDuration(kMaxHealthyTime)));
  }
  return absl::OkStatus();
}

// queue (a queue's name or empty), priority (a class name, an integer, or empty). Whether
// the queue and the class exist is the coordinator's to say (its queue file).
absl::Status ValidateSharing(const JobSpec& spec) {
  if (!spec.queue().empty() && !IsValidJobName(spec.queue())) {
    return Invalid("queue", absl::StrCat("'", spec.queue(),
                                         "' is invalid; a queue name: 1-63 characters of "
                                         "[a-z0-9-] starting with a lowercase letter"));
  }
  const std::string& p = spec.priority();
  int value = 0;
  if (!p.empty() && !IsValidJobName(p) &&
      !(absl::SimpleAtoi(p, &value) && value >= -1000000000 && value <= 1000000000)) {
    return Invalid("priority",
                   absl::StrCat("'", p,
                                "' is invalid; a priority class name (the cluster's queue file) "
                                "or an integer in -1000000000..1000000000"));
  }
  return absl::OkStatus();
}

// preflight.link_window, preflight.min_bandwidth_fraction.
absl::Status ValidatePreflight(const baton::v1::Preflight& p) {
  const absl::Duration window = FromProto(p.link_window());
  if (window < kMinLinkWindow || window > kMaxLinkWindow) {
    return Invalid("preflight.link_window",
                   absl::StrCat(absl::FormatDuration(window), " is out of range; must be ",
                                absl::FormatDuration(kMinLinkWindow), "..",
                                absl::FormatDuration(kMaxLinkWindow)));
  }
  const double f = p.min_bandwidth_fraction();
  if (!(f >= 0 && f <= 1)) {
    return Invalid("preflight.min_bandwidth_fraction",
                   absl::StrCat(f, " is out of range; must be 0 (never slow)..1"));
  }
  return absl::OkStatus();
}

// workers.min, workers.max, slots_per_worker.
absl::Status ValidateWorkers(const JobSpec& spec) {
  const int min = spec.workers().min();
  if (min < 1) {
    return Invalid("workers.min", absl::StrCat(min, " is invalid; required, must be >= 1"));
  }
  if (min > kMaxWorkers) {
    return Invalid("workers.min", absl::StrCat(min, " is too large; must be <= ", kMaxWorkers));
  }
  if (spec.workers().has_max()) {
    const int max = spec.workers().max();
    if (max < min) {
      return Invalid("workers.max",
                     absl::StrCat(max, " is less than workers.min (", min, "); must be >= min"));
    }
    if (max > kMaxWorkers) {
      return Invalid("workers.max", absl::StrCat(max, " is too large; must be <= ", kMaxWorkers));
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
  // The job's record lists every rank: bound it (and so the messages that carry it).
  const int64_t workers = spec.workers().has_max() ? spec.workers().max() : min;
  const int64_t ranks = workers * (spec.has_slots_per_worker() ? spec.slots_per_worker() : 1);
  if (ranks > kMaxRanks) {
    return Invalid(spec.workers().has_max() ? "workers.max" : "workers.min",
                   absl::StrCat(workers, " workers x slots_per_worker ",
                                spec.has_slots_per_worker() ? spec.slots_per_worker() : 1, " = ",
                                ranks, " ranks, more than ", kMaxRanks, "; use fewer workers"));
  }
  return absl::OkStatus();
}

// budget.max_steps, budget.max_epochs (ranges from the trainer table), then the trainer's
// need for a limit.
absl::Status ValidateBudget(const JobSpec& spec) {
  namespace ts = ::baton::trainer_spec;
  const auto& budget = spec.budget();
  RETURN_IF_ERROR(ts::Check(ts::kMaxSteps, budget.max_steps(), "budget.max_steps"));
  RETURN_IF_ERROR(ts::Check(ts::kMaxEpochs, budget.max_epochs(), "budget.max_epochs"));
  if (!spec.has_trainer()) return absl::OkStatus();
  return ts::CheckBudget(budget.max_steps(), budget.max_epochs(), ts::Naming::kSpec);
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
  if (!p.has_stall_unlearned()) *p.mutable_stall_unlearned() = ToProto(kDefaultStallUnlearned);
  if (!p.has_report_stall_floor()) {
    *p.mutable_report_stall_floor() = ToProto(kDefaultReportStallFloor);
  }
  if (!p.has_healthy_steps()) p.set_healthy_steps(kDefaultHealthySteps);
  if (!p.has_healthy_time()) *p.mutable_healthy_time() = ToProto(kDefaultHealthyTime);
  return p;
}

baton::v1::Preflight PreflightWithDefaults(baton::v1::Preflight p) {
  if (!p.has_link_window()) *p.mutable_link_window() = ToProto(kDefaultLinkWindow);
  if (!p.has_min_bandwidth_fraction()) p.set_min_bandwidth_fraction(kDefaultMinBandwidthFraction);
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
  *spec.mutable_preflight() = PreflightWithDefaults(spec.preflight());
  if (spec.has_trainer()) *spec.mutable_trainer() = TrainerSpecWithDefaults(spec.trainer());
  return spec;
}

int MaxWorkers(const JobSpec& spec) {
  return spec.workers().has_max() ? spec.workers().max() : spec.workers().min();
}

bool CheckpointsOnRequest(const JobSpec& spec) {
  return spec.has_trainer() || (spec.has_command() && spec.command().elastic());
}

bool IsPreemptible(const JobSpec& spec) { return !spec.has_preemptible() || spec.preemptible(); }

int SlotsPerWorker(const JobSpec& spec) {
  return spec.has_slots_per_worker() ? spec.slots_per_worker() : kDefaultSlotsPerWorker;
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  if (!IsValidJobName(spec.name())) {
    return Invalid(
        "name", absl::StrCat(spec.name().empty() ? "is empty" : "'" + spec.name() + "' is invalid",
                             "; must be 1-63 characters of [a-z0-9-] starting with "
                             "a lowercase letter"));
  }
  switch (spec.program_case()) {
    case JobSpec::kTrainer:
      RETURN_IF_ERROR(ValidateTrainerSpec(spec.trainer()));
      break;
    case JobSpec::kCommand:
      RETURN_IF_ERROR(ValidateCommand(spec.command()));
      break;
    case JobSpec::PROGRAM_NOT_SET:
      return Invalid("program", "set exactly one of 'trainer' or 'command'");
  }

  RETURN_IF_ERROR(ValidateWorkers(spec));
  RETURN_IF_ERROR(ValidateEnv(spec));
  RETURN_IF_ERROR(CheckOptionalAbsolute("checkpoint_dir", spec.checkpoint_dir()));
  if (spec.has_command() && spec.command().elastic() && spec.checkpoint_dir().empty()) {
    return Invalid("checkpoint_dir",
                   "is required when command.elastic is true: a resize has rank 0 save its "
                   "state there and the next generation, possibly on other workers, resumes "
                   "from it; set an absolute path every worker reads (a shared file system)");
  }
  if (spec.has_trainer()) RETURN_IF_ERROR(ValidateGlobalBatch(spec));
  if (spec.has_trainer()) RETURN_IF_ERROR(ValidatePipelineWorld(spec));
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

  RETURN_IF_ERROR(ValidateBudget(spec));
  RETURN_IF_ERROR(ValidateRestartPolicy(spec.restart_policy()));
  RETURN_IF_ERROR(ValidatePreflight(spec.preflight()));
  return ValidateSharing(spec);
}

}  // namespace baton
