#pragma once

// baton-trainer's contract flags (contract/contract.h): one per TrainerSpec field, named like it,
// plus --max_steps, --max_epochs and --checkpoint_dir. Each flag is defined from its entry in
// the table in common/spec/trainer_spec_defaults.h (its type from the entry's kind, its
// default, its --help text), the table submit validates against, so a value the coordinator
// accepts is one the trainer accepts and vice versa; the rules between flags are submit's
// too (common/spec/trainer_rules.h). The worker passes every flag; the defaults only serve
// standalone runs. The tuning flags (--device, --cpu_backend, ...) live in trainer_main.cc.
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
// not parse>". --help/-help/--helpfull print usage to stdout and exit 1, as
// absl::ParseCommandLine does (--help: baton-trainer's own flags, the contract flags and
// trainer_main.cc's; --helpfull: absl's too). ParseCommandLine itself is not used for the
// rest: it would exit 1 with several lines on a bad flag, the contract wants exit code 2
// and one line.
absl::Status ParseFlags(int argc, char** argv);

// What the contract flags configure.
struct FlagOptions {
  TrainerOptions trainer;
  DataOptions data;
  int64_t threads = trainer_spec::kThreads.default_value;  // Intra-op threads (--threads).
};

// Calls visit(entry, member) for every member of FlagOptions a contract flag fills: --threads,
// the TrainerOptions members (ForEachTableOption), then the data options. Some flags fill
// two members (seed, context_length, vocab_size).
template <typename Visit>
void ForEachFlagOption(FlagOptions& o, Visit&& visit) {
  namespace ts = ::baton::trainer_spec;
  visit(ts::kThreads, o.threads);
  ForEachTableOption(o.trainer, visit);
  visit(ts::kDataset, o.data.dataset);
  visit(ts::kDataDir, o.data.data_dir);
  visit(ts::kImageSize, o.data.image_size);
  visit(ts::kContextLength, o.data.context_length);
  visit(ts::kSyntheticSamples, o.data.synthetic_samples);
  visit(ts::kNumClasses, o.data.num_classes);
  visit(ts::kVocabSize, o.data.vocab_size);
  visit(ts::kSeed, o.data.seed);
}

// Builds the options from the contract flags (ForEachFlagOption), checking each flag against
// its table entry as it goes ("--<flag>: <value> is out of range; must be ..." / "is not
// supported; allowed: ..."; --hidden must parse), then the rules between flags
// (ValidateTrainerOptions, then data_dir required unless the dataset is synthetic). Errors:
// INVALID_ARGUMENT naming the flag, the first one found.
absl::StatusOr<FlagOptions> OptionsFromFlags();

}  // namespace baton::trainer
