#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/job.pb.h"

namespace baton::worker {

// The argv that runs the built-in trainer for `trainer` and `budget`: trainer_path, then
// every TrainerSpec field of TrainerSpecWithDefaults(trainer) as "--<field>=<value>" in
// field order (common/spec/trainer_spec.h: TrainerSpecFlags), then --max_steps=, --max_epochs=
// and --checkpoint_dir= (flag names from common/spec/trainer_spec_defaults.h). Every flag is
// passed, set or not, so baton-trainer's own flag defaults never apply to a job: an unset
// field gets the table's default here, as at submit (a spec from before a field existed
// included), and a required field left empty (model, dataset) reaches the trainer empty
// and is rejected there.
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
