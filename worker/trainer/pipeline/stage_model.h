#pragma once

// A model split into pipeline stages: stage s of S runs a contiguous part of the model's
// layers on what the previous stage produced.
//   GPT: stage 0 the embeddings (wte + wpe), then each stage a contiguous run of blocks
//        (SplitLayers), the last stage ln_f and the tied output projection (wte again).
//   MLP: each stage a contiguous run of the Linear layers (ReLU after each but the last).
// Chaining the stages' Forward is bit-identical to the whole model's forward.
//
// Ownership: every rank builds the whole model from the job's seed (so every stage starts
// with exactly the single-process weights) and a stage holds it, but trains only its own
// parameters (Parameters()); the others take memory and are never read. A parameter used by
// two stages (GPT's tied wte: the first and the last) is held by both; their gradients are
// summed between the two (TiedPeer, executor.h), so both copies take the same steps.
//
// Threading: none of its own; one training thread per stage.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/trainer/models/gpt.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer::pipeline {

// [begin, end) of a model's layers (GPT blocks, MLP Linear layers).
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Splits `layers` into `stages` contiguous runs as evenly as possible (the first
// layers % stages stages get one more). INVALID_ARGUMENT unless 1 <= stages <= layers.
absl::StatusOr<std::vector<LayerRange>> SplitLayers(int64_t layers, int stages);

class StageModel {
 public:
  virtual ~StageModel() = default;

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }

  // The first stage: the model's inputs for a micro-batch (MLP features, GPT tokens); any
  // other: the previous stage's output. Returns this stage's output (the last stage: the
  // model's logits). Records autograd history when grad mode is on. Throws c10::Error as
  // the model does.
  virtual at::Tensor Forward(const at::Tensor& input) = 0;

  // The parameters this stage trains (its optimizer's), in the model's order.
  virtual std::vector<at::Tensor> Parameters() const = 0;

  // Parameters this stage shares with stage TiedPeer() (empty, and -1, if none): the same
  // list, in the same order, on both.
  virtual std::vector<at::Tensor> TiedParameters() const { return {}; }
  virtual int TiedPeer() const { return -1; }

 protected:
  StageModel(int stage, int stages) : stage_(stage), stages_(stages) {}

 private:
  const int stage_;
  const int stages_;
};

// Stage `stage` of `stages` of `model`. INVALID_ARGUMENT for a stage out of range or more
// stages than layers (blocks, Linear layers).
absl::StatusOr<std::unique_ptr<StageModel>> MakeGptStage(Gpt model, int stage, int stages);
absl::StatusOr<std::unique_ptr<StageModel>> MakeMlpStage(Mlp model, int stage, int stages);

}  // namespace baton::trainer::pipeline
