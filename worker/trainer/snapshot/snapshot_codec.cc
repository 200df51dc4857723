#include "worker/trainer/snapshot/snapshot_codec.h"

#include <ATen/Functions.h>
#include <c10/core/ScalarType.h>

#include <cstring>
#include <exception>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

constexpr absl::string_view kMagic = "BSNAP001";
constexpr size_t kAlign = 64;
constexpr size_t kPrefix = 8 + sizeof(uint64_t);  // Magic and header length.

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The dtypes a snapshot may hold (those of parameters, buffers, optimizer state and RNG
// states), by their ScalarType number.
bool AllowedDtype(int64_t code) {
  switch (static_cast<c10::ScalarType>(code)) {
    case c10::kByte:
    case c10::kChar:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong:
    case c10::kHalf:
    case c10::kFloat:
    case c10::kDouble:
    case c10::kBool:
    case c10::kBFloat16:
      return code >= 0 && code < static_cast<int64_t>(c10::ScalarType::NumOptions);
    default:
      return false;
  }
}

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("not a whole in-memory snapshot: ", what));
}

bool HasSpace(absl::string_view s) {
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

// One "t" line, decoded and checked against the buffer.
struct TensorLine {
  std::string part, key, sub;
  at::Tensor tensor;
};

absl::StatusOr<TensorLine> ParseTensorLine(const std::vector<absl::string_view>& f,
                                           absl::string_view bytes, size_t data_start) {
  // t part key sub dtype ndim dims... offset
  if (f.size() < 7) return Corrupt("a tensor line is short");
  TensorLine line{std::string(f[1]), std::string(f[2]), std::string(f[3]), {}};
  int64_t dtype = 0, ndim = 0;
  if (!absl::SimpleAtoi(f[4], &dtype) || !AllowedDtype(dtype)) {
    return Corrupt(absl::StrCat("tensor ", line.key, " has dtype ", f[4]));
  }
  if (!absl::SimpleAtoi(f[5], &ndim) || ndim < 0 || ndim > 16 ||
      f.size() != static_cast<size_t>(7 + ndim)) {
    return Corrupt(absl::StrCat("tensor ", line.key, " has a bad shape"));
  }
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (int64_t i = 0; i < ndim; ++i) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(f[6 + i], &d) || d < 0 || d > (int64_t{1} << 40)) {
      return Corrupt(absl::StrCat("tensor ", line.key, " has a bad dimension"));
    }
    numel *= static_cast<uint64_t>(d);
    if (numel > (uint64_t{1} << 40))
      return Corrupt(absl::StrCat("tensor ", line.key, " is too large"));
    dims.push_back(d);
  }
  uint64_t offset = 0;
  if (!absl::SimpleAtoi(f.back(), &offset)) return Corrupt("a bad offset");
  const auto type = static_cast<c10::ScalarType>(dtype);
  const uint64_t nbytes = numel * c10::elementSize(type);
  if (offset < data_start || offset > bytes.size() || nbytes > bytes.size() - offset) {
    return Corrupt(absl::StrCat("tensor ", line.key, " lies outside the snapshot"));
  }
  line.tensor = at::empty(dims, at::TensorOptions().dtype(type));
  if (nbytes > 0) std::memcpy(line.tensor.data_ptr(), bytes.data() + offset, nbytes);
  return line;
}

}  // namespace

absl::StatusOr<SnapshotImage> SnapshotImage::Plan(const TrainingState& state,
                                                  HostStaging* staging) {
  const TrainingProgress& p = state.progress;
  if (p.step < 0) return absl::InvalidArgumentError("negative step");
  const std::string optimizer_type = OptimizerType(state.optimizer);
  if (optimizer_type == "other") {
    return absl::InvalidArgumentError(
        "the optimizer's state cannot be snapshotted: snapshots hold SGD's and AdamW's");
  }
  SnapshotImage image;
  image.step_ = p.step;
  image.staging_ = staging;
  std::string text =
      absl::StrFormat("progress %d %d %d %d %d %a %d\n", p.step, p.epoch, p.batch_in_epoch,
                      p.samples_seen, p.world_size, p.scaler_scale, p.scaler_growth_tracker);
  std::vector<std::pair<std::string, at::Tensor>> parts;  // Line prefix -> tensor.
  absl::flat_hash_set<std::string> names;
  for (const auto& [name, tensor] : state.tensors) {
    if (name.empty()) return absl::InvalidArgumentError("empty tensor name");
    if (HasSpace(name)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor name \"", name, "\" has whitespace"));
    }
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" is undefined"));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name \"", name, "\""));
    }
    parts.emplace_back(absl::StrCat("model ", name, " -"), tensor.detach());
  }
  int64_t optimizer_params = 0;
  if (state.optimizer != nullptr) {
    optimizer_params = OptimizerParamCount(*state.optimizer);
    const auto live = LiveOptimizerState(*state.optimizer);
    for (size_t i = 0; i < live.size(); ++i) {
      for (const auto& [key, tensor] : live[i]) {
        parts.emplace_back(absl::StrCat("opt ", i, " ", key), tensor);
      }
    }
  }
  absl::StrAppend(&text, "optimizer ", optimizer_type, " ", optimizer_params, "\n");
  parts.emplace_back("rng_cpu - -", CpuRngState());
  const std::vector<at::Tensor> cuda = CudaRngStates();
  for (size_t i = 0; i < cuda.size(); ++i)
    parts.emplace_back(absl::StrCat("rng_cuda ", i, " -"), cuda[i]);
  at::Tensor extra = at::empty({static_cast<int64_t>(p.rng_extra.size())}, at::kByte);
  if (!p.rng_extra.empty()) std::memcpy(extra.data_ptr(), p.rng_extra.data(), p.rng_extra.size());
  parts.emplace_back("rng_extra - -", extra);

  // Offsets depend on the header's length, which depends on the offsets' digits: lay out
  // with a bound on the header first (each offset printed with 20 digits at most).
  std::vector<std::string> lines;
  size_t text_bound = text.size();
  for (const auto& [prefix, tensor] : parts) {
    std::string line =
        absl::StrCat("t ", prefix, " ", static_cast<int>(tensor.scalar_type()), " ", tensor.dim());
    for (int64_t d : tensor.sizes()) absl::StrAppend(&line, " ", d);
    text_bound += line.size() + 1 + 20 + 1;
    lines.push_back(std::move(line));
  }
  size_t offset = AlignUp(kPrefix + text_bound);
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor t = staging != nullptr ? staging->Stage(parts[i].second) : parts[i].second;
    const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
    absl::StrAppend(&text, lines[i], " ", offset, "\n");
    image.parts_.push_back(Part{t, offset, bytes});
    offset = AlignUp(offset + bytes);
  }
  image.size_ = offset;
  image.header_ = std::string(kMagic);
  const uint64_t length = text.size();
  image.header_.append(reinterpret_cast<const char*>(&length), sizeof(length));
  image.header_ += text;
  return image;
}

void SnapshotImage::WriteTo(char* dst) const {
  if (staging_ != nullptr) staging_->Wait();
  std::memcpy(dst, header_.data(), header_.size());
  for (const Part& part : parts_) {
    if (part.bytes == 0) continue;
    const at::Tensor& t = part.tensor;
    if (t.device().is_cpu() && t.is_contiguous()) {
      std::memcpy(dst + part.offset, t.data_ptr(), part.bytes);
    } else {
      at::from_blob(dst + part.offset, t.sizes(), at::TensorOptions().dtype(t.scalar_type()))
          .copy_(t);
    }
  }
}

absl::StatusOr<DecodedCheckpoint> DecodeSnapshot(absl::string_view bytes) {
  if (bytes.size() < kPrefix || bytes.substr(0, kMagic.size()) != kMagic) {
    return Corrupt("no snapshot header");
  }
  uint64_t length = 0;
  std::memcpy(&length, bytes.data() + kMagic.size(), sizeof(length));
  if (length > bytes.size() - kPrefix) return Corrupt("the header runs past the end");
  const absl::string_view text = bytes.substr(kPrefix, length);
  const size_t data_start = kPrefix + length;
  DecodedCheckpoint d;
  bool have_progress = false, have_optimizer = false, have_rng = false, have_extra = false;
  try {
    for (absl::string_view raw : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      const std::vector<absl::string_view> f = absl::StrSplit(raw, ' ');
      if (f[0] == "progress") {
        TrainingProgress& p = d.progress;
        if (f.size() != 8 || !absl::SimpleAtoi(f[1], &p.step) ||
            !absl::SimpleAtoi(f[2], &p.epoch) || !absl::SimpleAtoi(f[3], &p.batch_in_epoch) ||
            !absl::SimpleAtoi(f[4], &p.samples_seen) || !absl::SimpleAtoi(f[5], &p.world_size) ||
            !absl::SimpleAtoi(f[7], &p.scaler_growth_tracker) || p.step < 0) {
          return Corrupt("a bad progress line");
        }
        char* end = nullptr;
        const std::string scale(f[6]);
        p.scaler_scale = std::strtod(scale.c_str(), &end);
        if (end != scale.c_str() + scale.size()) return Corrupt("a bad loss scale");
        have_progress = true;
      } else if (f[0] == "optimizer") {
        if (f.size() != 3 || !absl::SimpleAtoi(f[2], &d.optimizer_params) ||
            d.optimizer_params < 0 || d.optimizer_params > (int64_t{1} << 24)) {
          return Corrupt("a bad optimizer line");
        }
        d.optimizer_type = std::string(f[1]);
        d.optimizer_state.resize(d.optimizer_params);
        have_optimizer = true;
      } else if (f[0] == "t") {
        ASSIGN_OR_RETURN(TensorLine line, ParseTensorLine(f, bytes, data_start));
        if (line.part == "model") {
          if (!d.model.emplace(line.key, std::move(line.tensor)).second) {
            return Corrupt(absl::StrCat("tensor ", line.key, " twice"));
          }
          d.model_order.push_back(line.key);
        } else if (line.part == "opt") {
          size_t index = 0;
          if (!have_optimizer || !absl::SimpleAtoi(line.key, &index) ||
              index >= d.optimizer_state.size()) {
            return Corrupt("optimizer state of an unknown parameter");
          }
          if (!d.optimizer_state[index].emplace(line.sub, std::move(line.tensor)).second) {
            return Corrupt("optimizer state twice");
          }
        } else if (line.part == "rng_cpu") {
          d.rng_cpu = std::move(line.tensor);
          have_rng = true;
        } else if (line.part == "rng_cuda") {
          d.rng_cuda.push_back(std::move(line.tensor));
        } else if (line.part == "rng_extra") {
          if (line.tensor.scalar_type() != at::kByte || line.tensor.dim() != 1) {
            return Corrupt("rng_extra is not bytes");
          }
          d.progress.rng_extra.assign(static_cast<const char*>(line.tensor.data_ptr()),
                                      line.tensor.numel());
          have_extra = true;
        } else {
          return Corrupt(absl::StrCat("unknown part ", line.part));
        }
      } else {
        return Corrupt("an unknown header line");
      }
    }
  } catch (const std::exception& e) {
    return Corrupt(e.what());
  }
  if (!have_progress || !have_optimizer || !have_rng || !have_extra) {
    return Corrupt("a part is missing");
  }
  return d;
}

}  // namespace baton::trainer
