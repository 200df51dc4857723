#pragma once

// Numeric precision of the forward pass (--precision).
//
//   fp32  everything in float32.
//   bf16  autocast to bfloat16 (CUDA; CPU where LibTorch supports it, which 1.13 does):
//         matmuls/convolutions run in bfloat16, reductions and losses in float32.
//   fp16  autocast to float16 with dynamic loss scaling (step/grad_scaler.h). CPU float16
//         autocast needs LibTorch >= 2.4; with an older one the forward runs in float32
//         and the loss scaling still applies (PrecisionPlan::note says so).
//
// Parameters, gradients and optimizer state stay float32 in every mode.

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

enum class Precision { kFp32, kBf16, kFp16 };

// "fp32" (or ""), "bf16", "fp16". INVALID_ARGUMENT naming --precision otherwise.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
const char* PrecisionName(Precision precision);

// What a precision means on a device with this LibTorch.
struct PrecisionPlan {
  Precision precision = Precision::kFp32;
  bool autocast = false;                     // Forward under autocast.
  c10::DeviceType device = c10::kCPU;        // Autocast device type.
  c10::ScalarType dtype = c10::kFloat;       // Autocast dtype.
  bool loss_scaling = false;                 // fp16: GradScaler on.
  std::string note;  // Non-empty when the request was weakened (log it once).
};

PrecisionPlan PlanPrecision(Precision precision, c10::DeviceType device);

// Autocast for the forward pass of the current thread, restored on destruction (autocast
// state is thread-local). A no-op when plan.autocast is false. Not movable.
class AutocastScope {
 public:
  explicit AutocastScope(const PrecisionPlan& plan);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_ = c10::kCPU;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::kFloat;
};

}  // namespace baton::trainer
