#include "worker/trainer/checkpoint/checkpoint_manager.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/trainer_spec_defaults.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "baton-checkpoint-v1";
// File names (see the header).
constexpr char kPrefix[] = "ckpt-";
constexpr char kGenerationInfix[] = "-g";
constexpr char kSuffix[] = ".pt";
constexpr char kStartPrefix[] = "gen-";
constexpr char kStartSuffix[] = ".start";
constexpr char kStartFormat[] = "baton-generation-start-v1";
// Start records of this many of the newest generations are never pruned.
constexpr size_t kStartRecordsKept = 4;

// Keys of the pickled dict (see the header).
constexpr char kKeyFormat[] = "format";
constexpr char kKeyStep[] = "step";
constexpr char kKeyEpoch[] = "epoch";
constexpr char kKeyBatchInEpoch[] = "batch_in_epoch";
constexpr char kKeySamplesSeen[] = "samples_seen";
constexpr char kKeyWorldSize[] = "world_size";
constexpr char kKeyScalerScale[] = "scaler_scale";
constexpr char kKeyScalerGrowthTracker[] = "scaler_growth_tracker";
constexpr char kKeyModel[] = "model";
constexpr char kKeyOptimizerType[] = "optimizer_type";
constexpr char kKeyOptimizerParams[] = "optimizer_params";
constexpr char kKeyOptimizer[] = "optimizer";
constexpr char kKeyRngCpu[] = "rng_cpu";
constexpr char kKeyRngCuda[] = "rng_cuda";
constexpr char kKeyRngExtra[] = "rng_extra";

// A checkpoint file decoded and checked for internal consistency (not yet against the
// live state).
struct Decoded {
  TrainingProgress progress;
  absl::flat_hash_map<std::string, at::Tensor> model;
  std::string optimizer_type;
  int64_t optimizer_params = 0;
  at::Tensor optimizer_bytes;  // uint8, CPU; empty when none.
  at::Tensor rng_cpu;
  std::vector<at::Tensor> rng_cuda;
};

std::string OptimizerType(const torch::optim::Optimizer* optimizer) {
  if (optimizer == nullptr) return "none";
  if (dynamic_cast<const torch::optim::SGD*>(optimizer) != nullptr) return "sgd";
  if (dynamic_cast<const torch::optim::AdamW*>(optimizer) != nullptr) return "adamw";
  return "other";
}

int64_t OptimizerParamCount(const torch::optim::Optimizer& optimizer) {
  int64_t n = 0;
  for (const auto& group : optimizer.param_groups()) n += group.params().size();
  return n;
}

at::Tensor BytesToTensor(const void* data, size_t size) {
  at::Tensor t = at::empty({static_cast<int64_t>(size)}, at::kByte);
  if (size > 0) std::memcpy(t.data_ptr(), data, size);
  return t;
}

std::string TensorToBytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel());
}

// A CPU tensor that owns exactly its elements, so pickling does not write a larger
// storage it is a view of (e.g. a slice of a flat gradient-bucket buffer).
at::Tensor Compact(const at::Tensor& t) {
  at::Tensor c = t.detach().to(at::kCPU).contiguous();
  if (c.storage_offset() != 0 ||
      c.storage().nbytes() != static_cast<size_t>(c.numel()) * c.element_size()) {
    c = c.clone();
  }
  return c;
}

// Generators: CPU always, CUDA when this LibTorch has it. (Context::defaultGenerator has
// the same signature in LibTorch 1.13 and 2.x; the CUDA hooks' getter was renamed.)
at::Tensor GetCpuRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

std::vector<at::Tensor> GetCudaRngStates() {
  std::vector<at::Tensor> states;
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) return states;
  for (int i = 0; i < hooks.getNumGPUs(); ++i) {
    at::Generator gen = at::globalContext().defaultGenerator(
        c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.push_back(gen.get_state());
  }
  return states;
}

void SetRngStates(const Decoded& d) {
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(d.rng_cpu);
  }
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (d.rng_cuda.empty() || !hooks.hasCUDA()) return;
  const int n = std::min<int>(hooks.getNumGPUs(), static_cast<int>(d.rng_cuda.size()));
  if (n != static_cast<int>(d.rng_cuda.size()) || n != hooks.getNumGPUs()) {
    BATON_LOG(WARNING) << "checkpoint holds " << d.rng_cuda.size()
                       << " CUDA generator states, this process sees " << hooks.getNumGPUs()
                       << " devices: restoring the first " << n;
  }
  for (int i = 0; i < n; ++i) {
    at::Generator gen = at::globalContext().defaultGenerator(
        c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(d.rng_cuda[i]);
  }
}

// ---- decoding -------------------------------------------------------------------------

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed checkpoint: ", what));
}

absl::StatusOr<c10::IValue> Field(const c10::impl::GenericDict& dict, const char* key) {
  auto it = dict.find(c10::IValue(std::string(key)));
  if (it == dict.end()) return Corrupt(absl::StrCat("no \"", key, "\""));
  return it->value();
}

absl::StatusOr<int64_t> IntField(const c10::impl::GenericDict& dict, const char* key) {
  ASSIGN_OR_RETURN(c10::IValue v, Field(dict, key));
  if (!v.isInt()) return Corrupt(absl::StrCat("\"", key, "\" is not an int"));
  return v.toInt();
}

absl::StatusOr<at::Tensor> ByteTensorField(const c10::impl::GenericDict& dict, const char* key) {
  ASSIGN_OR_RETURN(c10::IValue v, Field(dict, key));
  if (!v.isTensor() || v.toTensor().scalar_type() != at::kByte || v.toTensor().dim() != 1) {
    return Corrupt(absl::StrCat("\"", key, "\" is not a 1-D uint8 tensor"));
  }
  return v.toTensor();
}

absl::StatusOr<Decoded> DecodeDict(const c10::IValue& root) {
  if (!root.isGenericDict()) return Corrupt("not a pickled dict");
  const c10::impl::GenericDict dict = root.toGenericDict();
  Decoded d;
  ASSIGN_OR_RETURN(c10::IValue format, Field(dict, kKeyFormat));
  if (!format.isString() || format.toStringRef() != kFormat) {
    return Corrupt(absl::StrCat("format is not \"", kFormat, "\""));
  }
  TrainingProgress& p = d.progress;
  ASSIGN_OR_RETURN(p.step, IntField(dict, kKeyStep));
  ASSIGN_OR_RETURN(p.epoch, IntField(dict, kKeyEpoch));
  ASSIGN_OR_RETURN(p.batch_in_epoch, IntField(dict, kKeyBatchInEpoch));
  ASSIGN_OR_RETURN(p.samples_seen, IntField(dict, kKeySamplesSeen));
  ASSIGN_OR_RETURN(p.world_size, IntField(dict, kKeyWorldSize));
  ASSIGN_OR_RETURN(p.scaler_growth_tracker, IntField(dict, kKeyScalerGrowthTracker));
  ASSIGN_OR_RETURN(c10::IValue scale, Field(dict, kKeyScalerScale));
  if (!scale.isDouble()) return Corrupt("\"scaler_scale\" is not a float");
  p.scaler_scale = scale.toDouble();
  ASSIGN_OR_RETURN(at::Tensor extra, ByteTensorField(dict, kKeyRngExtra));
  p.rng_extra = TensorToBytes(extra);

  ASSIGN_OR_RETURN(c10::IValue model, Field(dict, kKeyModel));
  if (!model.isGenericDict()) return Corrupt("\"model\" is not a dict");
  for (const auto& entry : model.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      return Corrupt("\"model\" is not a dict of str -> Tensor");
    }
    d.model.emplace(entry.key().toStringRef(), entry.value().toTensor());
  }

  ASSIGN_OR_RETURN(c10::IValue type, Field(dict, kKeyOptimizerType));
  if (!type.isString()) return Corrupt("\"optimizer_type\" is not a str");
  d.optimizer_type = type.toStringRef();
  ASSIGN_OR_RETURN(d.optimizer_params, IntField(dict, kKeyOptimizerParams));
  ASSIGN_OR_RETURN(d.optimizer_bytes, ByteTensorField(dict, kKeyOptimizer));

  ASSIGN_OR_RETURN(d.rng_cpu, ByteTensorField(dict, kKeyRngCpu));
  ASSIGN_OR_RETURN(c10::IValue cuda, Field(dict, kKeyRngCuda));
  if (!cuda.isList()) return Corrupt("\"rng_cuda\" is not a list");
  for (const c10::IValue& state : cuda.toListRef()) {
    if (!state.isTensor()) return Corrupt("\"rng_cuda\" holds a non-tensor");
    d.rng_cuda.push_back(state.toTensor());
  }
  return d;
}

// Reads, verifies and decodes one file. NOT_FOUND / DATA_LOSS.
absl::StatusOr<Decoded> ReadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<char> bytes, ReadFileBytes(path));
  RETURN_IF_ERROR(VerifySealedArchive(absl::string_view(bytes.data(), bytes.size())));
  try {
    return DecodeDict(torch::jit::pickle_load(bytes));
  } catch (const std::exception& e) {
    return Corrupt(e.what());
  }
}

// ---- applying to the live state -------------------------------------------------------

// FAILED_PRECONDITION unless `d` fits `state` exactly.
absl::Status CheckFits(const Decoded& d, const TrainingState& state) {
  absl::flat_hash_set<std::string> seen;
  for (const auto& [name, live] : state.tensors) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name \"", name, "\""));
    }
    auto it = d.model.find(name);
    if (it == d.model.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint has no tensor \"", name, "\" (model changed?)"));
    }
    const at::Tensor& saved = it->second;
    if (!live.defined() || saved.sizes() != live.sizes() ||
        saved.scalar_type() != live.scalar_type()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor \"", name, "\": checkpoint has ", c10::toString(saved.scalar_type()),
                       c10::str(saved.sizes()), ", model has ",
                       live.defined() ? c10::toString(live.scalar_type()) : "undefined",
                       live.defined() ? c10::str(live.sizes()) : ""));
    }
  }
  if (d.model.size() != state.tensors.size()) {
    std::vector<std::string> extra;
    for (const auto& [name, t] : d.model) {
      if (!seen.contains(name)) extra.push_back(name);
    }
    std::sort(extra.begin(), extra.end());
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint has tensors the model lacks: ", absl::StrJoin(extra, ", ")));
  }
  if (state.optimizer != nullptr) {
    const std::string type = OptimizerType(state.optimizer);
    if (d.optimizer_type != type) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint optimizer is ", d.optimizer_type, ", the job's is ", type));
    }
    const int64_t n = OptimizerParamCount(*state.optimizer);
    if (d.optimizer_params != n) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint optimizer has ", d.optimizer_params, " parameters, the job's has ", n));
    }
  }
  return absl::OkStatus();
}

// Loads per-parameter optimizer state, keeping the live hyperparameters.
void LoadOptimizerState(const at::Tensor& bytes, torch::optim::Optimizer& optimizer) {
  c10::optional<at::Device> device;
  for (const auto& group : optimizer.param_groups()) {
    if (!group.params().empty()) {
      device = group.params().front().device();
      break;
    }
  }
  const at::Tensor contiguous = bytes.contiguous();
  torch::serialize::InputArchive archive;
  archive.load_from(static_cast<const char*>(contiguous.data_ptr()),
                    static_cast<size_t>(contiguous.numel()), device);
  std::vector<std::unique_ptr<torch::optim::OptimizerOptions>> live_options;
  for (const auto& group : optimizer.param_groups()) {
    live_options.push_back(group.options().clone());
  }
  optimizer.load(archive);
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size() && i < live_options.size(); ++i) {
    groups[i].set_options(std::move(live_options[i]));
  }
}

absl::Status Apply(const Decoded& d, TrainingState& state, const RestoreOptions& options) {
  RETURN_IF_ERROR(CheckFits(d, state));
  try {
    {
      c10::NoGradGuard no_grad;
      for (auto& [name, live] : state.tensors) live.copy_(d.model.at(name));
    }
    if (state.optimizer != nullptr) LoadOptimizerState(d.optimizer_bytes, *state.optimizer);
    if (options.restore_rng) SetRngStates(d);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("restoring the checkpoint: ", e.what()));
  }
  state.progress = d.progress;
  return absl::OkStatus();
}

// ---- names, the directory listing and start records ---------------------------------

// A non-empty run of decimal digits.
std::optional<int64_t> ParseNumber(absl::string_view digits) {
  int64_t n;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &n)) {
    return std::nullopt;
  }
  return n;
}

std::string CheckpointName(int64_t step, int64_t generation) {
  if (generation == 0) return absl::StrFormat("%s%08d%s", kPrefix, step, kSuffix);
  return absl::StrFormat("%s%08d%s%d%s", kPrefix, step, kGenerationInfix, generation, kSuffix);
}

std::string StartRecordName(int64_t generation) {
  return absl::StrFormat("%s%08d%s", kStartPrefix, generation, kStartSuffix);
}

// Parses "ckpt-<step>.pt" (generation 0) and "ckpt-<step>-g<generation >= 1>.pt".
std::optional<CheckpointFile> ParseCheckpointName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) {
    return std::nullopt;
  }
  CheckpointFile file;
  if (const size_t g = name.find(kGenerationInfix); g != absl::string_view::npos) {
    const std::optional<int64_t> generation =
        ParseNumber(name.substr(g + std::strlen(kGenerationInfix)));
    if (!generation.has_value() || *generation < 1) return std::nullopt;
    file.generation = *generation;
    name = name.substr(0, g);
  }
  const std::optional<int64_t> step = ParseNumber(name);
  if (!step.has_value()) return std::nullopt;
  file.step = *step;
  return file;
}

// Parses "gen-<generation >= 1>.start".
std::optional<int64_t> ParseStartRecordName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kStartPrefix) || !absl::ConsumeSuffix(&name, kStartSuffix)) {
    return std::nullopt;
  }
  const std::optional<int64_t> generation = ParseNumber(name);
  if (!generation.has_value() || *generation < 1) return std::nullopt;
  return generation;
}

// A generation's start record (see the header).
struct StartRecord {
  int64_t generation = 0;
  int64_t resumed_step = 0;  // Set by ReadStartRecords,
  std::string job;           // like this.
  std::string path;
};

// What an unfinished WriteFileAtomically of a checkpoint or a start record left behind.
struct Temporary {
  int64_t generation = 0;  // Of the file it was to become.
  int64_t pid = 0;         // Of its writer.
  std::string path;
};

// Parses "<checkpoint or start record name><kTemporaryInfix><pid>".
std::optional<Temporary> ParseTemporaryName(absl::string_view name) {
  const size_t infix = name.rfind(kTemporaryInfix);
  if (infix == absl::string_view::npos) return std::nullopt;
  const std::optional<int64_t> pid = ParseNumber(name.substr(infix + std::strlen(kTemporaryInfix)));
  if (!pid.has_value()) return std::nullopt;
  const absl::string_view target = name.substr(0, infix);
  if (const std::optional<CheckpointFile> file = ParseCheckpointName(target)) {
    return Temporary{file->generation, *pid, ""};
  }
  if (const std::optional<int64_t> generation = ParseStartRecordName(target)) {
    return Temporary{*generation, *pid, ""};
  }
  return std::nullopt;
}

// The directory's files that the manager owns, by kind.
struct Listing {
  std::vector<CheckpointFile> checkpoints;  // Ascending by (step, generation).
  std::vector<StartRecord> starts;          // Ascending by generation.
  std::vector<Temporary> temporaries;
};

// An empty listing when `dir` does not exist; INTERNAL when it cannot be read (a fence
// must never pass because the directory was unreadable).
// Start records are listed, not read (ReadStartRecords, ListWithRecords).
absl::StatusOr<Listing> ListDirectory(const std::string& dir) {
  Listing listing;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return listing;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string path = (fs::path(dir) / name).string();
    if (std::optional<CheckpointFile> file = ParseCheckpointName(name)) {
      file->path = path;
      listing.checkpoints.push_back(std::move(*file));
    } else if (const std::optional<int64_t> generation = ParseStartRecordName(name)) {
      listing.starts.push_back(StartRecord{*generation, 0, "", path});
    } else if (std::optional<Temporary> temporary = ParseTemporaryName(name)) {
      temporary->path = path;
      listing.temporaries.push_back(std::move(*temporary));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            [](const CheckpointFile& a, const CheckpointFile& b) {
              return std::tie(a.step, a.generation) < std::tie(b.step, b.generation);
            });
  std::sort(listing.starts.begin(), listing.starts.end(),
            [](const StartRecord& a, const StartRecord& b) { return a.generation < b.generation; });
  return listing;
}

std::string StartRecordText(const std::string& job, int64_t generation, int64_t resumed_step) {
  return absl::StrCat(kStartFormat, "\njob ", job, "\ngeneration ", generation,
                      "\nresumed_step ", resumed_step, "\n");
}

// Fills in every record's resumed_step. A record that vanished since the listing (pruned)
// is dropped. DATA_LOSS naming a record that does not parse; INTERNAL on read errors.
absl::Status ReadStartRecords(std::vector<StartRecord>& starts) {
  std::vector<StartRecord> read;
  for (StartRecord& start : starts) {
    absl::StatusOr<std::vector<char>> bytes = ReadFileBytes(start.path);
    if (absl::IsNotFound(bytes.status())) continue;
    if (!bytes.ok()) return bytes.status();
    const std::vector<absl::string_view> lines =
        absl::StrSplit(absl::string_view(bytes->data(), bytes->size()), '\n');
    absl::string_view job = lines.size() == 5 ? lines[1] : "";
    absl::string_view step = lines.size() == 5 ? lines[3] : "";
    const std::optional<int64_t> resumed_step =
        absl::ConsumePrefix(&step, "resumed_step ") ? ParseNumber(step) : std::nullopt;
    if (lines.size() != 5 || lines[0] != kStartFormat || !absl::ConsumePrefix(&job, "job ") ||
        lines[2] != absl::StrCat("generation ", start.generation) || !resumed_step.has_value() ||
        !lines[4].empty()) {
      return absl::DataLossError(absl::StrCat(
          "malformed start record ", start.path, ": want the four lines \"", kStartFormat,
          "\", \"job <job id>\", \"generation ", start.generation, "\", \"resumed_step <step>\""));
    }
    start.job = std::string(job);
    start.resumed_step = *resumed_step;
    read.push_back(std::move(start));
  }
  starts = std::move(read);
  return absl::OkStatus();
}

// ListDirectory with every start record read (ReadStartRecords): what each fence decision
// needs. Errors as the two.
absl::StatusOr<Listing> ListWithRecords(const std::string& dir) {
  ASSIGN_OR_RETURN(Listing listing, ListDirectory(dir));
  RETURN_IF_ERROR(ReadStartRecords(listing.starts));
  return listing;
}

// The start record that makes `file` stale: one of a newer generation that resumed from an
// earlier step. Null when the file is not stale.
const StartRecord* StaleBy(const CheckpointFile& file, const std::vector<StartRecord>& starts) {
  for (const StartRecord& start : starts) {
    if (start.generation > file.generation && start.resumed_step < file.step) return &start;
  }
  return nullptr;
}

std::string StaleReason(const StartRecord& by) {
  return absl::StrCat("stale: generation ", by.generation, " started from step ", by.resumed_step);
}

// The record that supersedes generation `generation` of `job`: one of a newer generation of
// the job, or, unless `same_job_only`, any record of another job (a later job adopted the
// directory). Null if none. `starts` must have been read (ReadStartRecords).
const StartRecord* SupersededBy(const std::vector<StartRecord>& starts, const std::string& job,
                                int64_t generation, bool same_job_only = false) {
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    if (it->job == job ? it->generation > generation : !same_job_only) return &*it;
  }
  return nullptr;
}

// `what` is refused (or happened) because `newer` has started.
absl::Status Superseded(int64_t generation, const StartRecord& newer, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "generation ", generation, " is superseded by generation ", newer.generation,
      newer.job.empty() ? std::string() : absl::StrCat(" of job ", newer.job), " (", newer.path,
      " exists): ", what));
}

// The pickled Dict[str, Tensor] of the final weights.
absl::StatusOr<std::vector<char>> EncodeWeights(const NamedTensors& tensors,
                                                const std::string& path) {
  try {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      if (dict.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name \"", name, "\""));
      }
      dict.insert(name, Compact(tensor));
    }
    return torch::jit::pickle_save(c10::IValue(dict));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serialising ", path, ": ", e.what()));
  }
}

}  // namespace

absl::StatusOr<CheckpointManager> CheckpointManager::Create(CheckpointManagerOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoint directory is empty");
  namespace ts = ::baton::trainer_spec;
  RETURN_IF_ERROR(ts::Check(ts::kCheckpointEvery, options.checkpoint_every,
                            ts::SpecPath(ts::kCheckpointEvery)));
  RETURN_IF_ERROR(
      ts::Check(ts::kKeepCheckpoints, options.keep, ts::SpecPath(ts::kKeepCheckpoints)));
  if (options.generation < 0) {
    return absl::InvalidArgumentError("checkpoint generation: must be >= 0");
  }
  return CheckpointManager(std::move(options));
}

bool CheckpointManager::ShouldSave(int64_t step) const {
  return options_.checkpoint_every > 0 && step > 0 && step % options_.checkpoint_every == 0;
}

std::string CheckpointManager::PathForStep(int64_t step) const {
  return (fs::path(options_.dir) / CheckpointName(step, options_.generation)).string();
}

absl::StatusOr<std::vector<char>> CheckpointManager::EncodeCheckpoint(
    const TrainingState& state) const {
  const TrainingProgress& p = state.progress;
  if (p.step < 0) return absl::InvalidArgumentError("negative step");
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> model;
    for (const auto& [name, tensor] : state.tensors) {
      if (name.empty()) return absl::InvalidArgumentError("empty tensor name");
      if (!tensor.defined()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" is undefined"));
      }
      if (model.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name \"", name, "\""));
      }
      model.insert(name, Compact(tensor));
    }
    at::Tensor optimizer_bytes = at::empty({0}, at::kByte);
    int64_t optimizer_params = 0;
    if (state.optimizer != nullptr) {
      torch::serialize::OutputArchive archive;
      state.optimizer->save(archive);
      std::ostringstream out;
      archive.save_to(out);
      const std::string s = std::move(out).str();
      optimizer_bytes = BytesToTensor(s.data(), s.size());
      optimizer_params = OptimizerParamCount(*state.optimizer);
    }
    c10::List<at::Tensor> cuda;
    for (const at::Tensor& t : GetCudaRngStates()) cuda.push_back(t);

    c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
    dict.insert(kKeyFormat, std::string(kFormat));
    dict.insert(kKeyStep, p.step);
    dict.insert(kKeyEpoch, p.epoch);
    dict.insert(kKeyBatchInEpoch, p.batch_in_epoch);
    dict.insert(kKeySamplesSeen, p.samples_seen);
    dict.insert(kKeyWorldSize, p.world_size);
    dict.insert(kKeyScalerScale, p.scaler_scale);
    dict.insert(kKeyScalerGrowthTracker, p.scaler_growth_tracker);
    dict.insert(kKeyModel, model);
    dict.insert(kKeyOptimizerType, OptimizerType(state.optimizer));
    dict.insert(kKeyOptimizerParams, optimizer_params);
    dict.insert(kKeyOptimizer, optimizer_bytes);
    dict.insert(kKeyRngCpu, GetCpuRngState());
    dict.insert(kKeyRngCuda, cuda);
    dict.insert(kKeyRngExtra, BytesToTensor(p.rng_extra.data(), p.rng_extra.size()));
    bytes = torch::jit::pickle_save(c10::IValue(dict));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serialising the checkpoint: ", e.what()));
  }
  if (absl::Status s = SealArchive(bytes); !s.ok()) {
    return absl::InternalError(absl::StrCat("sealing the checkpoint: ", s.message()));
  }
  return bytes;
}

absl::StatusOr<std::string> CheckpointManager::CommitCheckpoint(
    int64_t step, const std::vector<char>& sealed) const {
  const std::string path = PathForStep(step);
  RETURN_IF_ERROR(WriteFenced(path, absl::string_view(sealed.data(), sealed.size()),
                              absl::StrCat("refusing to commit ", path)));
  RETURN_IF_ERROR(CheckCommitted(step, path));
  Prune(step);
  return path;
}

absl::Status CheckpointManager::CheckNotSuperseded(absl::string_view what,
                                                   bool same_job_only) const {
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  if (const StartRecord* by =
          SupersededBy(listing.starts, options_.job, options_.generation, same_job_only)) {
    return Superseded(options_.generation, *by, what);
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::WriteFenced(const std::string& path, absl::string_view contents,
                                            absl::string_view refused) const {
  const absl::Status status =
      WriteFileAtomically(path, contents, [&] { return CheckNotSuperseded(refused); });
  if (status.ok() || absl::IsFailedPrecondition(status)) return status;
  // A newer generation's writer removes older writers' temporary files: maybe this one's.
  if (absl::Status fenced = CheckNotSuperseded(refused); absl::IsFailedPrecondition(fenced)) {
    return fenced;
  }
  return status;
}

absl::Status CheckpointManager::CheckCommitted(int64_t step, const std::string& path) const {
  absl::StatusOr<Listing> read = ListWithRecords(options_.dir);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        absl::StrCat("after committing ", path, ": ", read.status().message()));
  }
  const Listing& listing = *read;
  const StartRecord* by_record =
      SupersededBy(listing.starts, options_.job, options_.generation);
  if (by_record == nullptr) return absl::OkStatus();
  const StartRecord newest = *by_record;
  // A newer generation started between the check before the rename and now. If it resumed
  // from an earlier step, the file is a fork it did not adopt: stale, so it goes. (If it
  // resumed from this step or later it may have restored this very file: it stays.)
  std::vector<StartRecord> newer;
  for (const StartRecord& start : listing.starts) {
    if (start.generation > options_.generation) newer.push_back(start);
  }
  std::string outcome = "kept it";
  if (const StartRecord* by = StaleBy(CheckpointFile{step, options_.generation, path}, newer)) {
    std::error_code ec;
    fs::remove(path, ec);
    outcome = ec ? absl::StrCat("cannot remove it (", ec.message(), ")")
                 : absl::StrCat("removed it (", StaleReason(*by), ")");
  }
  return Superseded(options_.generation, newest,
                    absl::StrCat("it started as ", path, " was committed; ", outcome));
}

absl::Status CheckpointManager::RemoveUnlessSuperseded(const std::string& path) const {
  RETURN_IF_ERROR(CheckNotSuperseded(absl::StrCat("refusing to delete ", path)));
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("removing ", path, ": ", ec.message()));
  return absl::OkStatus();
}

void CheckpointManager::Prune(int64_t committed_step) const {
  absl::StatusOr<Listing> listing = ListWithRecords(options_.dir);
  if (listing.ok() && SupersededBy(listing->starts, options_.job, options_.generation)) return;
  if (!listing.ok()) {
    BATON_LOG(WARNING) << "not pruning " << options_.dir << ": " << listing.status().message();
    return;
  }
  const int64_t own = options_.generation;
  std::vector<std::string> remove;
  std::vector<const CheckpointFile*> live;  // Ascending by (step, generation).
  for (const CheckpointFile& file : listing->checkpoints) {
    if (file.generation > own) continue;  // Never a newer generation's (none has started).
    if (StaleBy(file, listing->starts) != nullptr || file.step > committed_step) {
      remove.push_back(file.path);
    } else {
      live.push_back(&file);
    }
  }
  const size_t keep = static_cast<size_t>(options_.keep);
  for (size_t i = 0; i + keep < live.size(); ++i) remove.push_back(live[i]->path);
  for (const Temporary& temporary : listing->temporaries) {
    if (temporary.generation <= own && temporary.pid != ::getpid()) {
      remove.push_back(temporary.path);
    }
  }
  absl::flat_hash_set<std::string> removed;
  auto remove_one = [&](const std::string& path) {
    const absl::Status status = RemoveUnlessSuperseded(path);
    if (status.ok()) {
      removed.insert(path);
    } else {
      BATON_LOG(WARNING) << "pruning: " << status.message();
    }
    return status;
  };
  for (const std::string& path : remove) {
    if (absl::IsFailedPrecondition(remove_one(path))) return;  // Superseded: touch nothing.
  }
  // Start records: the newest kStartRecordsKept stay. An older one goes unless it is the
  // only record left that makes some remaining file stale (one whose deletion failed).
  std::vector<StartRecord> records = listing->starts;  // Those still there.
  for (size_t i = 0; i + kStartRecordsKept < records.size();) {
    std::vector<StartRecord> others = records;
    others.erase(others.begin() + static_cast<ptrdiff_t>(i));
    const bool needed = std::any_of(
        listing->checkpoints.begin(), listing->checkpoints.end(), [&](const CheckpointFile& f) {
          return !removed.contains(f.path) && StaleBy(f, {records[i]}) != nullptr &&
                 StaleBy(f, others) == nullptr;
        });
    const absl::Status status = needed ? absl::OkStatus() : remove_one(records[i].path);
    if (absl::IsFailedPrecondition(status)) return;
    if (!needed && status.ok()) {
      records.erase(records.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

absl::Status CheckpointManager::RecordStart(int64_t resumed_step) const {
  if (resumed_step < 0) return absl::InvalidArgumentError("resumed step must be >= 0");
  if (options_.generation == 0) return absl::OkStatus();
  const std::string path = (fs::path(options_.dir) / StartRecordName(options_.generation)).string();
  const std::string refused = absl::StrCat("refusing to record its start in ", path);
  RETURN_IF_ERROR(CheckNotSuperseded(refused, /*same_job_only=*/true));
  // An earlier job's records: this job adopts the directory (see the header). Its own
  // record, written next, fences that job's writers.
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  std::error_code ec;
  for (const StartRecord& start : listing.starts) {
    if (start.job == options_.job) continue;
    BATON_LOG(INFO) << "job " << options_.job << " adopts " << options_.dir << ": removing job "
                    << start.job << "'s start record " << start.path;
    fs::remove(start.path, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("removing ", start.path, ": ", ec.message()));
    }
  }
  if (fs::exists(path, ec)) {
    BATON_LOG(WARNING) << path << " exists already; it is kept (a generation starts once)";
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(WriteFenced(path, StartRecordText(options_.job, options_.generation, resumed_step),
                              refused));
  // A newer generation's record that appeared just before the rename: this one started
  // after it, so its record must not count (it could make the newer one's files stale).
  absl::Status after =
      CheckNotSuperseded(absl::StrCat("it started as ", path, " was written; removed it again"));
  if (absl::IsFailedPrecondition(after)) fs::remove(path, ec);
  return after;
}

absl::Status CheckpointManager::SaveWeights(const NamedTensors& tensors,
                                            const std::string& path) const {
  ASSIGN_OR_RETURN(const std::vector<char> bytes, EncodeWeights(tensors, path));
  RETURN_IF_ERROR(WriteFenced(path, absl::string_view(bytes.data(), bytes.size()),
                              absl::StrCat("refusing to write ", path)));
  return CheckNotSuperseded(absl::StrCat("it started as ", path, " was written"));
}

absl::StatusOr<std::string> CheckpointManager::Save(const TrainingState& state) const {
  ASSIGN_OR_RETURN(std::vector<char> sealed, EncodeCheckpoint(state));
  return CommitCheckpoint(state.progress.step, sealed);
}

std::vector<CheckpointFile> CheckpointManager::ListCheckpoints() const {
  absl::StatusOr<Listing> listing = ListDirectory(options_.dir);
  if (!listing.ok()) {
    BATON_LOG(WARNING) << listing.status().message();
    return {};
  }
  return std::move(listing->checkpoints);
}

std::vector<int64_t> CheckpointManager::ListSteps() const {
  std::vector<int64_t> steps;
  for (const CheckpointFile& file : ListCheckpoints()) steps.push_back(file.step);
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

absl::Status CheckpointManager::RestoreFrom(const std::string& path, TrainingState& state,
                                            const RestoreOptions& options) const {
  ASSIGN_OR_RETURN(Decoded decoded, ReadCheckpoint(path));
  return Apply(decoded, state, options);
}

absl::StatusOr<RestoredCheckpoint> CheckpointManager::RestoreLatest(
    TrainingState& state, const RestoreOptions& options) const {
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  RestoredCheckpoint result;
  std::vector<const CheckpointFile*> candidates;  // Ascending by (step, generation).
  for (const CheckpointFile& file : listing.checkpoints) {
    if (const StartRecord* by = StaleBy(file, listing.starts)) {
      BATON_LOG(WARNING) << "ignoring checkpoint " << file.path << ": " << StaleReason(*by);
      result.stale.push_back(absl::StrCat(file.path, ": ", StaleReason(*by)));
    } else {
      candidates.push_back(&file);
    }
  }
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const CheckpointFile& file = **it;
    absl::StatusOr<Decoded> decoded = ReadCheckpoint(file.path);
    if (!decoded.ok()) {
      BATON_LOG(WARNING) << "skipping checkpoint " << file.path << ": "
                         << decoded.status().message();
      result.skipped.push_back(absl::StrCat(file.path, ": ", decoded.status().message()));
      continue;
    }
    RETURN_IF_ERROR(Apply(*decoded, state, options));
    result.path = file.path;
    result.step = decoded->progress.step;
    result.generation = file.generation;
    return result;
  }
  return absl::NotFoundError(listing.checkpoints.empty()
                                 ? absl::StrCat("no checkpoint in ", options_.dir)
                                 : absl::StrCat("no valid checkpoint in ", options_.dir, " (",
                                                result.skipped.size(), " corrupt, ",
                                                result.stale.size(), " stale)"));
}

absl::Status SaveWeights(const NamedTensors& tensors, const std::string& path) {
  ASSIGN_OR_RETURN(const std::vector<char> bytes, EncodeWeights(tensors, path));
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()));
}

}  // namespace baton::trainer
