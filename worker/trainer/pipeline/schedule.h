#pragma once

// Pipeline schedules as pure functions: for stage `stage` of `stages`, the ordered list of
// what it does with `micro_batches` micro-batches in one training step. The executor
// (executor.h) runs such a list with a Communicator; schedule_test.cc simulates all stages'
// lists together (every receive waits for its send) to show they cannot deadlock.
//
// Actions, per micro-batch mb:
//   kRecvActivation(mb)  the previous stage's output for mb (not on the first stage)
//   kForward(mb)         this stage's layers on it; keeps its input and output for backward
//   kSendActivation(mb)  the output to the next stage (not on the last stage)
//   kRecvGradient(mb)    the gradient of the output from the next stage (not on the last)
//   kBackward(mb)        backward from the output (the last stage: from the loss / M)
//   kSendGradient(mb)    the gradient of the input to the previous stage (not on the first)
// Activations flow from stage s to s + 1 and gradients from s + 1 to s, each in micro-batch
// order, so a pair of neighbours' transfers in one direction are all of one kind and match
// in FIFO order.
//
// Schedules:
//   kGpipe: every forward, then every backward (in micro-batch order). Each stage keeps the
//     activations of all M micro-batches until its backwards.
//   k1F1B (PipeDream-flush / Megatron's non-interleaved schedule): stage s first runs
//     min(S - s - 1, M) warm-up forwards, then alternates one forward and one backward, then
//     drains the remaining backwards. Same bubble as GPipe, but at most S - s micro-batches'
//     activations are alive on stage s at once.
// Both have the same bubble: with equal stage times, each stage idles (S - 1) of the
// (M + S - 1) slots a step takes: BubbleFraction.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer::pipeline {

enum class ScheduleKind { kGpipe, k1F1B };

// "gpipe" or "1f1b"; INVALID_ARGUMENT naming the allowed values otherwise.
absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name);
std::string ScheduleKindName(ScheduleKind kind);

struct Action {
  enum class Type {
    kRecvActivation,
    kForward,
    kSendActivation,
    kRecvGradient,
    kBackward,
    kSendGradient
  };
  Type type;
  int micro_batch;

  bool operator==(const Action& other) const {
    return type == other.type && micro_batch == other.micro_batch;
  }
};

// "F3", "B0", "RA2" (receive activation), "SA2", "RG1", "SG1": for messages and tests.
std::string ActionName(const Action& action);

// Stage `stage`'s actions for one step. INVALID_ARGUMENT unless 1 <= stages,
// 0 <= stage < stages and micro_batches >= 1.
absl::StatusOr<std::vector<Action>> StageActions(ScheduleKind kind, int stage, int stages,
                                                 int micro_batches);

// The idle fraction of a step with equal stage times and free transfers:
// (S - 1) / (M + S - 1). 0 for one stage.
double BubbleFraction(int stages, int micro_batches);

}  // namespace baton::trainer::pipeline
