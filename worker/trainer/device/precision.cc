#include "worker/trainer/device/precision.h"

#include "absl/strings/str_cat.h"
#include "worker/trainer/device/compat.h"

namespace baton::trainer {

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name.empty() || name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision=", name, " is not one of fp32, bf16, fp16"));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

PrecisionPlan PlanPrecision(Precision precision, c10::DeviceType device) {
  PrecisionPlan plan;
  plan.precision = precision;
  plan.device = device;
  if (precision == Precision::kFp32) return plan;
  plan.dtype = precision == Precision::kBf16 ? c10::kBFloat16 : c10::kHalf;
  plan.loss_scaling = precision == Precision::kFp16;
  plan.autocast = compat::AutocastSupported(device, plan.dtype);
  if (!plan.autocast) {
    plan.note = absl::StrCat("precision ", PrecisionName(precision), ": LibTorch ",
                             compat::kTorchMajor, ".", compat::kTorchMinor, " has no ",
                             c10::DeviceTypeName(device), " autocast to ",
                             c10::toString(plan.dtype), "; the forward pass runs in float32",
                             plan.loss_scaling ? " (loss scaling stays on)" : "");
  }
  return plan;
}

AutocastScope::AutocastScope(const PrecisionPlan& plan) {
  if (!plan.autocast) return;
  active_ = true;
  device_ = plan.device;
  previous_enabled_ = compat::IsAutocastEnabled(device_);
  previous_dtype_ = compat::GetAutocastDtype(device_);
  compat::SetAutocastDtype(device_, plan.dtype);
  compat::SetAutocastEnabled(device_, true);
  compat::EnterAutocast();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  compat::LeaveAutocast();
  compat::SetAutocastEnabled(device_, previous_enabled_);
  compat::SetAutocastDtype(device_, previous_dtype_);
}

}  // namespace baton::trainer
