#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/baton/v1/job.pb.h"

namespace baton::worker {

// The argv that runs the built-in trainer for `trainer` and `budget` (flag names from
// worker/trainer/contract.h):
//   [trainer_path, --model=, --dataset=, --data_dir=, --batch_size=, --lr=, --momentum=,
//    --seed=, --hidden=a,b,c, --log_every=, --threads=, --max_steps=, --max_epochs=,
//    --checkpoint_dir=]
// Only fields that are set (non-zero, non-empty; momentum: present, so an explicit 0 is
// passed) are passed, so the trainer's own defaults apply otherwise; `checkpoint_dir` is passed when non-empty. Doubles use the shortest text
// that parses back to the same value.
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
