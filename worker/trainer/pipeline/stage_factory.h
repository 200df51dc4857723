#pragma once

// Builds this rank's pipeline stage of the job's model (TrainerSpec's model fields): the
// whole built-in model from the seed (so every stage starts from exactly the single-process
// weights), then the stage (stage_model.h), and the parameters no stage of this rank uses
// are released (their storage replaced by an empty tensor), so a rank keeps about 1/S of
// the parameters after setup. Only "mlp" and "gpt" can be split.

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/models/model.h"
#include "worker/trainer/pipeline/stage_model.h"

namespace baton::trainer::pipeline {

struct BuiltStage {
  std::unique_ptr<StageModel> stage;
  // The stage's parameters (stage->Parameters()) under the whole model's names.
  NamedTensors named;
  int64_t model_numel = 0;  // Parameter elements of the whole model.
  int64_t stage_numel = 0;  // Of this stage (tied ones counted on both of their stages).
  // The first stage's input: "mlp" flattens each sample ([B, ...] -> [B, features]).
  bool flatten_input = false;
};

// INVALID_ARGUMENT for a model that cannot be split (naming model), one that does not fit
// the data (as MakeModel), or a stage out of range. `options.seed` seeds the weights.
absl::StatusOr<BuiltStage> BuildStage(const ModelOptions& options, const DatasetInfo& data,
                                      int stage, int stages, const c10::Device& device);

}  // namespace baton::trainer::pipeline
