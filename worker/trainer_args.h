#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/baton/v1/job.pb.h"

namespace baton::worker {

// The argv that runs the built-in trainer for `trainer` and `budget` (flag names from
// worker/trainer/contract.h): trainer_path, then one --<field>=<value> per set TrainerSpec
// field in field order (hidden as --hidden=a,b,c; nesterov as --nesterov=true), then
// --max_steps=, --max_epochs= and --checkpoint_dir=.
// Only fields that are set are passed, so the trainer's own defaults apply otherwise:
// scalars when non-zero / non-empty / true, fields with presence (momentum, adam_beta1,
// adam_beta2, adam_eps, lr_gamma) when present, so an explicit 0 is passed;
// `checkpoint_dir` when non-empty. Doubles use the shortest text that parses back to the
// same value.
std::vector<std::string> TrainerArgv(const std::string& trainer_path,
                                     const baton::v1::TrainerSpec& trainer,
                                     const baton::v1::Budget& budget,
                                     const std::string& checkpoint_dir);

// Locates baton-trainer: `flag_value` if non-empty (used as given), else `baton-trainer` in the
// directory of `self_exe`, else `<that dir>/trainer/baton-trainer` (Bazel's bazel-bin layout),
// else `baton-trainer` on `path_env`. Errors: NOT_FOUND listing the places tried.
absl::StatusOr<std::string> ResolveTrainerPath(const std::string& flag_value,
                                               const std::string& self_exe,
                                               const std::string& path_env);

}  // namespace baton::worker
