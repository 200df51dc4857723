#pragma once

// baton-trainer's contract flags (contract/contract.h): one per TrainerSpec field, named like it,
// plus --max_steps, --max_epochs and --checkpoint_dir. Each flag's default, and the values
// it allows, come from the table in common/spec/trainer_spec_defaults.h, the same one submit
// validates against, so a value the coordinator accepts is one the trainer accepts and
// vice versa. The worker passes every flag; the defaults only serve standalone runs.
// The tuning flags (--device, --cpu_backend, ...) live in trainer_main.cc.
//
// The flags are process-wide (absl flags); these functions are not thread-safe.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/trainer_spec_defaults.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/trainer_options.h"

namespace baton::trainer {

// Sets flags from "--name=value", "--name value", "-name=value" arguments (argv[0] is the
// program). Errors, each INVALID_ARGUMENT with one line: "unexpected argument '<arg>'",
// "flag --<name> has no value", "unknown flag --<name>", "--<name>=<value>: <why it does
// not parse>". --help/--helpfull print usage and exit (absl::ParseCommandLine's contract:
// absl would exit 1 with several lines on a bad flag, the contract wants exit code 2 and
// one line).
absl::Status ParseFlags(int argc, char** argv);

// What the contract flags configure.
struct FlagOptions {
  TrainerOptions trainer;
  DataOptions data;
  int64_t threads = trainer_spec::kThreads.default_value;  // Intra-op threads (--threads).
};

// Checks every contract flag against the table ("--<flag>: <value> is out of range; must
// be ..." / "is not supported; allowed: ...") and the rules between flags (data_dir
// required unless the dataset is synthetic; those of ValidateTrainerOptions), then builds
// the options. Errors: INVALID_ARGUMENT naming the flag.
absl::StatusOr<FlagOptions> OptionsFromFlags();

}  // namespace baton::trainer
