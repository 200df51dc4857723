#pragma once

// Defaults and validation of a TrainerSpec (proto/baton/v1/job.proto), both read from the
// table in common/spec/trainer_spec_defaults.h (and the rules between fields in
// common/spec/trainer_rules.h). The coordinator applies them at submit (through
// WithDefaults/ValidateJobSpec in common/spec/job_spec.h); the worker applies the defaults
// again before it turns a spec into baton-trainer flags (worker/supervisor/trainer_args.h), so a
// spec stored before a field existed still gets the field's default, not the trainer's.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "baton/v1/job.pb.h"
#include "google/protobuf/descriptor.h"

namespace baton {

// Returns `t` with every unset field set to its table default: scalars without presence
// when zero or empty, fields with presence (momentum, adam_beta1, adam_beta2, adam_eps,
// lr_gamma) when absent (an explicit 0 is kept), hidden when empty. Not filled: the
// required model and dataset, and image_size except for dataset "image_folder"
// (kImageFolderImageSize; for other datasets 0 lets the trainer pick the dataset's
// default). Idempotent; never fails.
baton::v1::TrainerSpec TrainerSpecWithDefaults(baton::v1::TrainerSpec t);

// Checks a spec that already went through TrainerSpecWithDefaults. Returns OK or
// INVALID_ARGUMENT "trainer.<field>: <what is wrong>; <what is allowed>", reporting only
// the first violation, in this order:
//   model, dataset, data_dir, batch_size, lr, momentum, hidden (count, then each width in
//   order), log_every, threads, precision, accumulation_steps, bucket_cap_mb,
//   grad_compression, max_grad_norm, optimizer, weight_decay, nesterov, adam_beta1,
//   adam_beta2, adam_eps, lr_schedule, warmup_steps, lr_step_size, lr_gamma, min_lr,
//   base_batch, loader_threads, prefetch_batches, image_size, context_length,
//   synthetic_samples, num_classes, gpt_layers, gpt_heads, gpt_width (also: divisible by
//   gpt_heads), vocab_size, torchscript_path, task, activation_checkpointing (also:
//   "blocks" only for resnet18, resnet50 and gpt), then model/dataset compatibility
//   (reported on trainer.dataset for a language model on image data, on trainer.model
//   for a classifier on token data), checkpoint_every, keep_checkpoints, snapshot_every, global_batch
//   (its range only; ValidateJobSpec checks it against the world sizes), zero.stage and
//   zero.offload_optimizer (offload needs stage 1 or 2; stage 2 refuses grad_compression),
//   and the pipeline fields (CheckPipeline).
// Ranges come from the table; the rules between fields are common/spec/trainer_rules.h's,
// which baton-trainer applies too. data_dir: for "synthetic" it must be empty; otherwise an
// absolute path. torchscript_path (model "torchscript" only): an absolute path. Touches no
// file system (see CheckTrainerSpecPaths). Thread-safe.
absl::Status ValidateTrainerSpec(const baton::v1::TrainerSpec& t);

// The file system checks of a valid spec, which may block (a hung network mount): data_dir
// is a readable directory holding the dataset's files (mnist train-images-idx3-ubyte and
// train-labels-idx1-ubyte; cifar10 data_batch_1.bin, in the directory or its
// cifar-10-batches-bin/; tokens train.bin; image_folder at least one sub-directory, one per
// class); torchscript_path is a readable file. INVALID_ARGUMENT naming the field.
// Thread-safe.
absl::Status CheckTrainerSpecPaths(const baton::v1::TrainerSpec& t);

// One TrainerSpec setting as baton-trainer sees it: a field of TrainerSpec, or a field of
// one of its message fields (TrainerSpec.zero, a ZeroSpec), whose flag is
// "<message field>_<field>" ("zero_stage") and whose path is "trainer.zero.stage".
struct TrainerSpecLeaf {
  std::string flag_name;  // "batch_size", "zero_stage".
  std::string spec_path;  // "trainer.batch_size", "trainer.zero.stage".
  const google::protobuf::FieldDescriptor* parent = nullptr;  // The message field, or null.
  const google::protobuf::FieldDescriptor* field = nullptr;   // Never null.
};

// Every TrainerSpec setting, in field-number order (a message field's fields in theirs, at
// the message field's place): one per entry of trainer_spec::TrainerSpecFields(), in order.
std::vector<TrainerSpecLeaf> TrainerSpecLeaves();

// Every setting of `t` (TrainerSpecLeaves), in that order, as a baton-trainer flag
// "--<flag_name>=<value>": integers in decimal, doubles as
// trainer_spec::RealText, booleans "true"/"false", strings as they are, repeated integers
// (hidden) comma-separated. Every field is included, set or not, so pass a spec that went
// through TrainerSpecWithDefaults. Fields of any other type (none today; the table test
// forbids them) are printed in protobuf text format.
std::vector<std::string> TrainerSpecFlags(const baton::v1::TrainerSpec& t);

}  // namespace baton
