#include "worker/trainer/checkpoint/checkpoint_codec.h"

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

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"

namespace baton::trainer {
namespace {

constexpr char kFormat[] = "baton-checkpoint-v1";

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

void SetRngStates(const DecodedCheckpoint& d) {
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

absl::StatusOr<DecodedCheckpoint> DecodeDict(const c10::IValue& root) {
  if (!root.isGenericDict()) return Corrupt("not a pickled dict");
  const c10::impl::GenericDict dict = root.toGenericDict();
  DecodedCheckpoint d;
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

// ---- applying to the live state -------------------------------------------------------

// FAILED_PRECONDITION unless `d` fits `state` exactly.
absl::Status CheckFits(const DecodedCheckpoint& d, const TrainingState& state) {
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

}  // namespace

absl::StatusOr<std::vector<char>> EncodeTrainingState(const TrainingState& state) {
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

absl::StatusOr<DecodedCheckpoint> ReadCheckpointFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<char> bytes, ReadFileBytes(path));
  RETURN_IF_ERROR(VerifySealedArchive(absl::string_view(bytes.data(), bytes.size())));
  try {
    return DecodeDict(torch::jit::pickle_load(bytes));
  } catch (const std::exception& e) {
    return Corrupt(e.what());
  }
}

absl::Status ApplyCheckpoint(const DecodedCheckpoint& d, TrainingState& state, bool restore_rng) {
  RETURN_IF_ERROR(CheckFits(d, state));
  try {
    {
      c10::NoGradGuard no_grad;
      for (auto& [name, live] : state.tensors) live.copy_(d.model.at(name));
    }
    if (state.optimizer != nullptr) LoadOptimizerState(d.optimizer_bytes, *state.optimizer);
    if (restore_rng) SetRngStates(d);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("restoring the checkpoint: ", e.what()));
  }
  state.progress = d.progress;
  return absl::OkStatus();
}

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

}  // namespace baton::trainer
