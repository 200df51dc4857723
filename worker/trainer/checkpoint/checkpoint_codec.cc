#include "worker/trainer/checkpoint/checkpoint_codec.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <c10/util/string_utils.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"
#include "worker/trainer/checkpoint/pickle_scan.h"

namespace baton::trainer {
namespace {

constexpr char kFormat[] = "baton-checkpoint-v2";
// Written by Baton before the optimizer state became plain tensors: that state is a
// TorchScript archive, and loading one runs LibTorch's TorchScript importer (code).
constexpr char kFormatV1[] = "baton-checkpoint-v1";

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
constexpr char kKeyOptimizerState[] = "optimizer_state";
constexpr char kKeyRngCpu[] = "rng_cpu";
constexpr char kKeyRngCuda[] = "rng_cuda";
constexpr char kKeyRngExtra[] = "rng_extra";

// The names each optimizer keeps per parameter (torch/optim/sgd.h, adamw.h). "step" is a
// 0-d int64 tensor; the others are shaped and typed like the parameter.
constexpr char kMomentumBuffer[] = "momentum_buffer";
constexpr char kStep[] = "step";
constexpr char kExpAvg[] = "exp_avg";
constexpr char kExpAvgSq[] = "exp_avg_sq";
constexpr char kMaxExpAvgSq[] = "max_exp_avg_sq";

// The key of a parameter in Optimizer::state(): the TensorImpl's address, as a string in
// LibTorch 1.13 and as a pointer in later versions.
template <typename StateMap>
typename StateMap::key_type StateKey(const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    return c10::guts::to_string(param.unsafeGetTensorImpl());
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

// Every parameter of `optimizer`, in param-group order (the order of "optimizer_state").
std::vector<at::Tensor> OptimizerParams(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> params;
  for (const auto& group : optimizer.param_groups()) {
    params.insert(params.end(), group.params().begin(), group.params().end());
  }
  return params;
}

}  // namespace

// ---- the state's parts (checkpoint_codec.h) -----------------------------------------------

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

std::vector<std::vector<std::pair<std::string, at::Tensor>>> LiveOptimizerState(
    const torch::optim::Optimizer& optimizer) {
  using StateMap = std::decay_t<decltype(optimizer.state())>;
  const std::string type = OptimizerType(&optimizer);
  const StateMap& states = optimizer.state();
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> out;
  for (const at::Tensor& param : OptimizerParams(optimizer)) {
    std::vector<std::pair<std::string, at::Tensor>> entry;
    const auto it = states.find(StateKey<StateMap>(param));
    const auto add_defined = [&entry](const char* name, const at::Tensor& t) {
      if (t.defined()) entry.emplace_back(name, t.detach());
    };
    if (it != states.end() && type == "sgd") {
      const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
      add_defined(kMomentumBuffer, s.momentum_buffer());
    } else if (it != states.end() && type == "adamw") {
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      entry.emplace_back(kStep, at::scalar_tensor(s.step(), at::kLong));
      add_defined(kExpAvg, s.exp_avg());
      add_defined(kExpAvgSq, s.exp_avg_sq());
      add_defined(kMaxExpAvgSq, s.max_exp_avg_sq());
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// Generators: CPU always, CUDA when this LibTorch has it. (Context::defaultGenerator has
// the same signature in LibTorch 1.13 and 2.x; the CUDA hooks' getter was renamed.)
at::Tensor CpuRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

std::vector<at::Tensor> CudaRngStates() {
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

namespace {

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

// "optimizer_state": per parameter of `optimizer` (SGD or AdamW, param-group order), its
// state as name -> tensor, empty while it has none (before its first step).
c10::List<c10::Dict<std::string, at::Tensor>> ExportOptimizerState(
    const torch::optim::Optimizer& optimizer) {
  c10::List<c10::Dict<std::string, at::Tensor>> out;
  for (const auto& parameter_state : LiveOptimizerState(optimizer)) {
    c10::Dict<std::string, at::Tensor> entry;
    for (const auto& [name, tensor] : parameter_state) entry.insert(name, Compact(tensor));
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

void SetRngStates(const at::Tensor& cpu, const std::vector<at::Tensor>& cuda) {
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(cpu);
  }
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (cuda.empty() || !hooks.hasCUDA()) return;
  const int n = std::min<int>(hooks.getNumGPUs(), static_cast<int>(cuda.size()));
  if (n != static_cast<int>(cuda.size()) || n != hooks.getNumGPUs()) {
    BATON_LOG(WARNING) << "checkpoint holds " << cuda.size()
                       << " CUDA generator states, this process sees " << hooks.getNumGPUs()
                       << " devices: restoring the first " << n;
  }
  for (int i = 0; i < n; ++i) {
    at::Generator gen = at::globalContext().defaultGenerator(
        c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(cuda[i]);
  }
}

namespace {

// ---- decoding -------------------------------------------------------------------------

// A file's bytes to LibTorch's ZIP reader, never past their end: miniz reads wherever a
// crafted central directory points, and LibTorch's own memory adapters copy without a
// check (a heap overflow checkpoint_contents_fuzz found). A read past the end returns
// fewer bytes, which miniz reports as a corrupt archive.
class BoundedReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BoundedReader(const char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* const data_;
  const size_t size_;
};

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
  if (format.isString() && format.toStringRef() == kFormatV1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint format ", kFormatV1,
        " (an earlier Baton) keeps the optimizer state as a "
        "TorchScript archive, and loading one runs TorchScript's importer, so whoever can "
        "write the checkpoint directory could run code in the trainer; this trainer reads ",
        kFormat, " only. Finish the job with the Baton that wrote it, or start it again"));
  }
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
    if (!d.model.emplace(entry.key().toStringRef(), entry.value().toTensor()).second) {
      return Corrupt("\"model\" names a tensor twice");
    }
    d.model_order.push_back(entry.key().toStringRef());
  }

  ASSIGN_OR_RETURN(c10::IValue type, Field(dict, kKeyOptimizerType));
  if (!type.isString()) return Corrupt("\"optimizer_type\" is not a str");
  d.optimizer_type = type.toStringRef();
  ASSIGN_OR_RETURN(d.optimizer_params, IntField(dict, kKeyOptimizerParams));
  ASSIGN_OR_RETURN(c10::IValue optimizer_state, Field(dict, kKeyOptimizerState));
  if (!optimizer_state.isList()) return Corrupt("\"optimizer_state\" is not a list");
  for (const c10::IValue& entry : optimizer_state.toListRef()) {
    if (!entry.isGenericDict()) return Corrupt("\"optimizer_state\" holds a non-dict");
    absl::flat_hash_map<std::string, at::Tensor>& decoded = d.optimizer_state.emplace_back();
    for (const auto& item : entry.toGenericDict()) {
      if (!item.key().isString() || !item.value().isTensor()) {
        return Corrupt("\"optimizer_state\" is not a list of dicts of str -> Tensor");
      }
      decoded.emplace(item.key().toStringRef(), item.value().toTensor());
    }
  }

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

// FAILED_PRECONDITION unless `saved` (a checkpoint's "optimizer_state") is state the live
// `optimizer` of `type` could have: one entry per parameter, only that optimizer's names,
// each tensor shaped and typed like its parameter, a non-negative step for AdamW.
absl::Status CheckOptimizerStateFits(
    const std::vector<absl::flat_hash_map<std::string, at::Tensor>>& saved,
    const torch::optim::Optimizer& optimizer, const std::string& type) {
  const std::vector<at::Tensor> params = OptimizerParams(optimizer);
  if (saved.size() != params.size()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint has optimizer state for ",
                                                      saved.size(),
                                                      " parameters, the job's "
                                                      "optimizer has ",
                                                      params.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const auto bad = [&](absl::string_view what) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint optimizer state of parameter ", i, ": ", what));
    };
    for (const auto& [name, t] : saved[i]) {
      const bool like_param = type == "sgd"
                                  ? name == kMomentumBuffer
                                  : name == kExpAvg || name == kExpAvgSq || name == kMaxExpAvgSq;
      if (type == "adamw" && name == kStep) {
        if (t.dim() != 0 || t.scalar_type() != at::kLong || t.item<int64_t>() < 0) {
          return bad("\"step\" is not a non-negative 0-d int64 tensor");
        }
      } else if (!like_param) {
        return bad(absl::StrCat("\"", name, "\" is not ", type, " state"));
      } else if (t.sizes() != params[i].sizes() || t.scalar_type() != params[i].scalar_type()) {
        return bad(absl::StrCat("\"", name, "\" is ", c10::toString(t.scalar_type()),
                                c10::str(t.sizes()), ", the parameter ",
                                c10::toString(params[i].scalar_type()),
                                c10::str(params[i].sizes())));
      }
    }
    if (type == "adamw" && !saved[i].empty() &&
        (!saved[i].contains(kStep) || !saved[i].contains(kExpAvg) ||
         !saved[i].contains(kExpAvgSq))) {
      return bad("AdamW state needs \"step\", \"exp_avg\" and \"exp_avg_sq\"");
    }
  }
  return absl::OkStatus();
}

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
    RETURN_IF_ERROR(CheckOptimizerStateFits(d.optimizer_state, *state.optimizer, type));
  }
  return absl::OkStatus();
}

// Replaces the per-parameter state of `optimizer` (of `type`) with `saved`, checked by
// CheckOptimizerStateFits, on each parameter's device; the hyperparameters stay the live
// ones.
void LoadOptimizerState(const std::vector<absl::flat_hash_map<std::string, at::Tensor>>& saved,
                        torch::optim::Optimizer& optimizer, const std::string& type) {
  using StateMap = std::decay_t<decltype(optimizer.state())>;
  StateMap& states = optimizer.state();
  const std::vector<at::Tensor> params = OptimizerParams(optimizer);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto key = StateKey<StateMap>(params[i]);
    const auto& entry = saved[i];
    if (entry.empty()) {
      states.erase(key);
      continue;
    }
    const auto on_device = [&](const char* name) {
      const auto it = entry.find(name);
      return it == entry.end() ? at::Tensor()
                               : it->second.to(params[i].device(), /*non_blocking=*/false,
                                               /*copy=*/true);
    };
    if (type == "sgd") {
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(on_device(kMomentumBuffer));
      states[key] = std::move(state);
    } else {
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(entry.at(kStep).item<int64_t>());
      state->exp_avg(on_device(kExpAvg));
      state->exp_avg_sq(on_device(kExpAvgSq));
      state->max_exp_avg_sq(on_device(kMaxExpAvgSq));
      states[key] = std::move(state);
    }
  }
}

// A checkpoint's parts; EncodeTrainingState and EncodeDecodedCheckpoint fill them from the
// live state or from a decoded one.
struct CheckpointParts {
  c10::Dict<std::string, at::Tensor> model;
  std::string optimizer_type;
  int64_t optimizer_params = 0;
  c10::List<c10::Dict<std::string, at::Tensor>> optimizer_state;
  at::Tensor rng_cpu;
  c10::List<at::Tensor> rng_cuda;
};

// The sealed archive of `parts` with the counters of `p`. May throw c10::Error.
absl::StatusOr<std::vector<char>> SealParts(const TrainingProgress& p, CheckpointParts parts) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert(kKeyFormat, std::string(kFormat));
  dict.insert(kKeyStep, p.step);
  dict.insert(kKeyEpoch, p.epoch);
  dict.insert(kKeyBatchInEpoch, p.batch_in_epoch);
  dict.insert(kKeySamplesSeen, p.samples_seen);
  dict.insert(kKeyWorldSize, p.world_size);
  dict.insert(kKeyScalerScale, p.scaler_scale);
  dict.insert(kKeyScalerGrowthTracker, p.scaler_growth_tracker);
  dict.insert(kKeyModel, std::move(parts.model));
  dict.insert(kKeyOptimizerType, std::move(parts.optimizer_type));
  dict.insert(kKeyOptimizerParams, parts.optimizer_params);
  dict.insert(kKeyOptimizerState, std::move(parts.optimizer_state));
  dict.insert(kKeyRngCpu, std::move(parts.rng_cpu));
  dict.insert(kKeyRngCuda, std::move(parts.rng_cuda));
  dict.insert(kKeyRngExtra, BytesToTensor(p.rng_extra.data(), p.rng_extra.size()));
  std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  if (absl::Status s = SealArchive(bytes); !s.ok()) {
    return absl::InternalError(absl::StrCat("sealing the checkpoint: ", s.message()));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::vector<char>> EncodeTrainingState(const TrainingState& state) {
  const TrainingProgress& p = state.progress;
  if (p.step < 0) return absl::InvalidArgumentError("negative step");
  try {
    CheckpointParts parts;
    for (const auto& [name, tensor] : state.tensors) {
      if (name.empty()) return absl::InvalidArgumentError("empty tensor name");
      if (!tensor.defined()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" is undefined"));
      }
      if (parts.model.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name \"", name, "\""));
      }
      parts.model.insert(name, Compact(tensor));
    }
    parts.optimizer_type = OptimizerType(state.optimizer);
    if (parts.optimizer_type == "other") {
      return absl::InvalidArgumentError(
          "the optimizer's state cannot be saved: checkpoints hold SGD's and AdamW's");
    }
    if (state.optimizer != nullptr) {
      parts.optimizer_state = ExportOptimizerState(*state.optimizer);
      parts.optimizer_params = OptimizerParamCount(*state.optimizer);
    }
    parts.rng_cpu = CpuRngState();
    for (const at::Tensor& t : CudaRngStates()) parts.rng_cuda.push_back(t);
    return SealParts(p, std::move(parts));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serialising the checkpoint: ", e.what()));
  }
}

absl::StatusOr<std::vector<char>> EncodeDecodedCheckpoint(const DecodedCheckpoint& d) {
  if (d.progress.step < 0) return absl::InvalidArgumentError("negative step");
  if (d.optimizer_type != "sgd" && d.optimizer_type != "adamw" && d.optimizer_type != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the optimizer's state cannot be saved: checkpoints hold SGD's and AdamW's, not \"",
        d.optimizer_type, "\""));
  }
  if (d.model_order.size() != d.model.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model_order names ", d.model_order.size(),
                                                   " tensors, the model has ", d.model.size()));
  }
  try {
    CheckpointParts parts;
    for (const std::string& name : d.model_order) {
      auto it = d.model.find(name);
      if (it == d.model.end() || parts.model.contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("model_order names \"", name, "\" twice or not in the model"));
      }
      if (!it->second.defined()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" is undefined"));
      }
      parts.model.insert(name, Compact(it->second));
    }
    parts.optimizer_type = d.optimizer_type;
    parts.optimizer_params = d.optimizer_params;
    for (const auto& state : d.optimizer_state) {
      std::vector<std::string> names;
      for (const auto& [name, tensor] : state) names.push_back(name);
      std::sort(names.begin(), names.end());
      c10::Dict<std::string, at::Tensor> entry;
      for (const std::string& name : names) entry.insert(name, Compact(state.at(name)));
      parts.optimizer_state.push_back(std::move(entry));
    }
    // Copies, as EncodeTrainingState's are: the pickler memoizes a tensor held elsewhere,
    // and the file would differ from a synchronous save's by that.
    parts.rng_cpu = d.rng_cpu.clone();
    for (const at::Tensor& t : d.rng_cuda) parts.rng_cuda.push_back(t.clone());
    return SealParts(d.progress, std::move(parts));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serialising the checkpoint: ", e.what()));
  }
}

absl::StatusOr<DecodedCheckpoint> ReadCheckpointFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<char> bytes, ReadFileBytes(path));
  return DecodeCheckpoint(bytes);
}

absl::StatusOr<DecodedCheckpoint> DecodeCheckpoint(const std::vector<char>& bytes) {
  RETURN_IF_ERROR(VerifySealedArchive(absl::string_view(bytes.data(), bytes.size())));
  try {
    // torch::jit::pickle_load, with the file read through BoundedReader and the pickle's
    // lengths and memo indices checked before the unpickler, which allocates by them,
    // reads it (pickle_scan.h).
    caffe2::serialize::PyTorchStreamReader reader(
        std::make_shared<BoundedReader>(bytes.data(), bytes.size()));
    const auto [pickle, size] = reader.getRecord("data.pkl");
    RETURN_IF_ERROR(
        CheckPickleBounds(absl::string_view(static_cast<const char*>(pickle.get()), size)));
    return DecodeDict(torch::jit::readArchiveAndTensors(
        "data", /*pickle_prefix=*/"", /*tensor_prefix=*/"", /*type_resolver=*/c10::nullopt,
        /*obj_loader=*/c10::nullopt, /*device=*/c10::nullopt, reader));
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
    if (state.optimizer != nullptr) {
      LoadOptimizerState(d.optimizer_state, *state.optimizer, OptimizerType(state.optimizer));
    }
    if (restore_rng) SetRngStates(d.rng_cpu, d.rng_cuda);
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
