#include "worker/trainer/pipeline/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace baton::trainer::pipeline {

absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name) {
  if (name == "gpipe") return ScheduleKind::kGpipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline schedule '", name, "' is not one of gpipe, 1f1b"));
}

std::string ScheduleKindName(ScheduleKind kind) {
  return kind == ScheduleKind::kGpipe ? "gpipe" : "1f1b";
}

std::string ActionName(const Action& action) {
  const char* name = "?";
  switch (action.type) {
    case Action::Type::kRecvActivation:
      name = "RA";
      break;
    case Action::Type::kForward:
      name = "F";
      break;
    case Action::Type::kSendActivation:
      name = "SA";
      break;
    case Action::Type::kRecvGradient:
      name = "RG";
      break;
    case Action::Type::kBackward:
      name = "B";
      break;
    case Action::Type::kSendGradient:
      name = "SG";
      break;
  }
  return absl::StrCat(name, action.micro_batch);
}

namespace {

// A forward with its transfers.
void AddForward(int mb, bool first, bool last, std::vector<Action>& out) {
  if (!first) out.push_back({Action::Type::kRecvActivation, mb});
  out.push_back({Action::Type::kForward, mb});
  if (!last) out.push_back({Action::Type::kSendActivation, mb});
}

// A backward with its transfers.
void AddBackward(int mb, bool first, bool last, std::vector<Action>& out) {
  if (!last) out.push_back({Action::Type::kRecvGradient, mb});
  out.push_back({Action::Type::kBackward, mb});
  if (!first) out.push_back({Action::Type::kSendGradient, mb});
}

}  // namespace

absl::StatusOr<std::vector<Action>> StageActions(ScheduleKind kind, int stage, int stages,
                                                 int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("no schedule for stage ", stage, " of ", stages,
                                                   " with ", micro_batches, " micro-batches"));
  }
  const bool first = stage == 0;
  const bool last = stage == stages - 1;
  const int m = micro_batches;
  std::vector<Action> out;
  if (kind == ScheduleKind::kGpipe) {
    for (int mb = 0; mb < m; ++mb) AddForward(mb, first, last, out);
    for (int mb = 0; mb < m; ++mb) AddBackward(mb, first, last, out);
    return out;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int mb = 0; mb < warmup; ++mb) AddForward(mb, first, last, out);
  for (int i = 0; i < m - warmup; ++i) {
    AddForward(warmup + i, first, last, out);
    AddBackward(i, first, last, out);
  }
  for (int mb = m - warmup; mb < m; ++mb) AddBackward(mb, first, last, out);
  return out;
}

double BubbleFraction(int stages, int micro_batches) {
  if (stages <= 1 || micro_batches < 1) return 0.0;
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace baton::trainer::pipeline
