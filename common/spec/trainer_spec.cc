#include "common/spec/trainer_spec.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/spec/trainer_rules.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace baton {
namespace {

using baton::v1::TrainerSpec;
namespace ts = ::baton::trainer_spec;

// What data_dir must hold for a dataset.
enum class DirRule {
  kNone,          // synthetic: no directory at all.
  kFiles,         // Every file in `files` (in data_dir or one of `alt_subdirs`).
  kSubdirectory,  // At least one sub-directory (image_folder: one per class).
};
struct DatasetRule {
  absl::string_view name;  // One of trainer_spec::kDatasets.
  DirRule rule;
  std::vector<absl::string_view> files;        // kFiles: must exist.
  std::vector<absl::string_view> alt_subdirs;  // kFiles: also accepted under these.
};
const std::vector<DatasetRule>& DatasetRules() {
  static const auto* rules = new std::vector<DatasetRule>{
      {"mnist", DirRule::kFiles, {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}, {}},
      {"cifar10", DirRule::kFiles, {"data_batch_1.bin"}, {"cifar-10-batches-bin"}},
      {"image_folder", DirRule::kSubdirectory, {}, {}},
      {"tokens", DirRule::kFiles, {"train.bin"}, {}},
      {"synthetic", DirRule::kNone, {}, {}},
  };
  return *rules;
}

// The rule of `dataset`, or null for a name the table does not allow.
const DatasetRule* FindDatasetRule(absl::string_view dataset) {
  for (const DatasetRule& rule : DatasetRules()) {
    if (rule.name == dataset) return &rule;
  }
  return nullptr;
}

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

bool IsReadableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), R_OK) == 0;
}

bool HasSubdirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// The files of a kFiles dataset, in `dir` or one of its alternative sub-directories.
absl::Status CheckDatasetFiles(const std::string& dir, const DatasetRule& dataset) {
  const std::string field = ts::SpecPath(ts::kDataDir);
  std::vector<std::string> roots = {dir};
  for (absl::string_view sub : dataset.alt_subdirs) roots.push_back(absl::StrCat(dir, "/", sub));
  for (const std::string& root : roots) {
    const bool complete = std::all_of(
        dataset.files.begin(), dataset.files.end(),
        [&](absl::string_view file) { return IsReadableFile(absl::StrCat(root, "/", file)); });
    if (complete) return absl::OkStatus();
  }
  for (absl::string_view file : dataset.files) {
    if (!IsReadableFile(absl::StrCat(dir, "/", file))) {
      return Invalid(field,
                     absl::StrCat(dir, " has no readable file ", file, "; the ", dataset.name,
                                  " dataset needs ", absl::StrJoin(dataset.files, ", ")));
    }
  }
  return Invalid(field, absl::StrCat(dir, " lacks the ", dataset.name, " files"));
}

// What the file system says of a data_dir that ts::CheckDataDir accepted.
absl::Status CheckDataDirContents(const std::string& dir, const DatasetRule& dataset) {
  const std::string field = ts::SpecPath(ts::kDataDir);
  if (dataset.rule == DirRule::kNone) return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return Invalid(field, absl::StrCat(dir, " is not accessible (", std::strerror(errno),
                                       "); must be a readable directory"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Invalid(field, absl::StrCat(dir, " is not a directory; must be a readable directory"));
  }
  if (access(dir.c_str(), R_OK | X_OK) != 0) {
    return Invalid(field, absl::StrCat(dir, " is not readable (", std::strerror(errno),
                                       "); must be a readable directory"));
  }
  if (dataset.rule == DirRule::kSubdirectory) {
    if (HasSubdirectory(dir)) return absl::OkStatus();
    return Invalid(field, absl::StrCat(dir, " has no sub-directory; the ", dataset.name,
                                       " dataset needs one directory of images per class"));
  }
  return CheckDatasetFiles(dir, dataset);
}

// Check(field, value, "trainer.<name>").
template <typename Field, typename Value>
absl::Status CheckSpec(const Field& field, const Value& value) {
  return ts::Check(field, value, ts::SpecPath(field));
}

constexpr ts::Naming kSpec = ts::Naming::kSpec;

// model, dataset, data_dir, batch_size, lr, momentum, hidden, log_every, threads.
absl::Status ValidateBasics(const TrainerSpec& t) {
  RETURN_IF_ERROR(CheckSpec(ts::kModel, t.model()));
  RETURN_IF_ERROR(CheckSpec(ts::kDataset, t.dataset()));
  if (FindDatasetRule(t.dataset()) == nullptr) {
    return absl::InternalError(absl::StrCat("no data_dir rule for dataset ", t.dataset()));
  }
  RETURN_IF_ERROR(ts::CheckDataDir(t.dataset(), t.data_dir(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kBatchSize, t.batch_size()));
  RETURN_IF_ERROR(CheckSpec(ts::kLr, t.lr()));
  RETURN_IF_ERROR(CheckSpec(ts::kMomentum, t.momentum()));
  const std::vector<int64_t> hidden(t.hidden().begin(), t.hidden().end());
  RETURN_IF_ERROR(CheckSpec(ts::kHidden, hidden));
  RETURN_IF_ERROR(CheckSpec(ts::kLogEvery, t.log_every()));
  return CheckSpec(ts::kThreads, t.threads());
}

// Numerics and optimisation, from precision to base_batch.
absl::Status ValidateNumericsAndOptimisation(const TrainerSpec& t) {
  RETURN_IF_ERROR(CheckSpec(ts::kPrecision, t.precision()));
  RETURN_IF_ERROR(CheckSpec(ts::kAccumulationSteps, t.accumulation_steps()));
  RETURN_IF_ERROR(CheckSpec(ts::kBucketCapMb, t.bucket_cap_mb()));
  RETURN_IF_ERROR(CheckSpec(ts::kGradCompression, t.grad_compression()));
  RETURN_IF_ERROR(CheckSpec(ts::kMaxGradNorm, t.max_grad_norm()));
  RETURN_IF_ERROR(CheckSpec(ts::kOptimizer, t.optimizer()));
  RETURN_IF_ERROR(CheckSpec(ts::kWeightDecay, t.weight_decay()));
  RETURN_IF_ERROR(ts::CheckNesterov(t.nesterov(), t.optimizer(), t.momentum(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kAdamBeta1, t.adam_beta1()));
  RETURN_IF_ERROR(CheckSpec(ts::kAdamBeta2, t.adam_beta2()));
  RETURN_IF_ERROR(CheckSpec(ts::kAdamEps, t.adam_eps()));
  RETURN_IF_ERROR(CheckSpec(ts::kLrSchedule, t.lr_schedule()));
  RETURN_IF_ERROR(CheckSpec(ts::kWarmupSteps, t.warmup_steps()));
  RETURN_IF_ERROR(CheckSpec(ts::kLrStepSize, t.lr_step_size()));
  RETURN_IF_ERROR(ts::CheckLrStepSize(t.lr_schedule(), t.lr_step_size(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kLrGamma, t.lr_gamma()));
  RETURN_IF_ERROR(CheckSpec(ts::kMinLr, t.min_lr()));
  return CheckSpec(ts::kBaseBatch, t.base_batch());
}

// Data and model fields, then which models fit which data.
absl::Status ValidateDataAndModel(const TrainerSpec& t) {
  RETURN_IF_ERROR(CheckSpec(ts::kLoaderThreads, t.loader_threads()));
  RETURN_IF_ERROR(CheckSpec(ts::kPrefetchBatches, t.prefetch_batches()));
  RETURN_IF_ERROR(CheckSpec(ts::kImageSize, t.image_size()));
  RETURN_IF_ERROR(CheckSpec(ts::kContextLength, t.context_length()));
  RETURN_IF_ERROR(CheckSpec(ts::kSyntheticSamples, t.synthetic_samples()));
  RETURN_IF_ERROR(CheckSpec(ts::kNumClasses, t.num_classes()));
  RETURN_IF_ERROR(CheckSpec(ts::kGptLayers, t.gpt_layers()));
  RETURN_IF_ERROR(CheckSpec(ts::kGptHeads, t.gpt_heads()));
  RETURN_IF_ERROR(CheckSpec(ts::kGptWidth, t.gpt_width()));
  RETURN_IF_ERROR(ts::CheckGptWidth(t.gpt_width(), t.gpt_heads(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kVocabSize, t.vocab_size()));
  RETURN_IF_ERROR(ts::CheckTorchscriptPath(t.model(), t.torchscript_path(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kTask, t.task()));
  RETURN_IF_ERROR(CheckSpec(ts::kActivationCheckpointing, t.activation_checkpointing()));
  RETURN_IF_ERROR(ts::CheckActivationCheckpointing(t.activation_checkpointing(), t.model(), kSpec));
  return ts::CheckModelFitsDataset(t.model(), t.task(), t.dataset(), kSpec);
}

// An integer field without presence: zero means unset.
template <typename Int>
Int OrDefault(Int value, const ts::IntField& field) {
  return value == 0 ? static_cast<Int>(field.default_value) : value;
}
// A real field without presence: zero means unset.
double OrDefault(double value, const ts::RealField& field) {
  return value == 0 ? field.default_value : value;
}
// A choice without presence: empty means unset; required choices stay empty.
void FillChoice(std::string* value, const ts::ChoiceField& field) {
  if (value->empty() && !field.required) *value = std::string(field.default_value);
}

// The value of `field` in `t` as flag text.
std::string FlagValue(const google::protobuf::Message& t,
                      const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& r = *t.GetReflection();
  if (field.is_repeated()) {
    std::vector<int64_t> values;
    for (int i = 0; i < r.FieldSize(t, &field); ++i) {
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        values.push_back(r.GetRepeatedInt32(t, &field, i));
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
        values.push_back(r.GetRepeatedInt64(t, &field, i));
      }
    }
    return ts::ListText(values);
  }
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r.GetInt32(t, &field));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(r.GetInt64(t, &field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(r.GetUInt64(t, &field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return ts::RealText(r.GetDouble(t, &field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return r.GetBool(t, &field) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_STRING:
      return r.GetString(t, &field);
    default: {
      std::string text;
      google::protobuf::TextFormat::PrintFieldValueToString(t, &field, -1, &text);
      return text;
    }
  }
}

// Fields whose default is the proto's zero need no filling.
static_assert(ts::kDataDir.default_value.empty() && ts::kTorchscriptPath.default_value.empty() &&
              ts::kSampleLog.default_value.empty() && !ts::kNesterov.default_value &&
              ts::kZeroStage.default_value == 0 && !ts::kZeroOffloadOptimizer.default_value);

}  // namespace

TrainerSpec TrainerSpecWithDefaults(TrainerSpec t) {
  FillChoice(t.mutable_model(), ts::kModel);
  FillChoice(t.mutable_dataset(), ts::kDataset);
  t.set_batch_size(OrDefault(t.batch_size(), ts::kBatchSize));
  t.set_lr(OrDefault(t.lr(), ts::kLr));
  if (!t.has_momentum()) t.set_momentum(ts::kMomentum.default_value);
  if (t.seed() == 0) t.set_seed(ts::kSeed.default_value);
  if (t.hidden_size() == 0) {
    for (int64_t width : ts::kHidden.default_value) t.add_hidden(static_cast<int32_t>(width));
  }
  t.set_log_every(OrDefault(t.log_every(), ts::kLogEvery));
  t.set_threads(OrDefault(t.threads(), ts::kThreads));
  FillChoice(t.mutable_precision(), ts::kPrecision);
  t.set_accumulation_steps(OrDefault(t.accumulation_steps(), ts::kAccumulationSteps));
  t.set_bucket_cap_mb(OrDefault(t.bucket_cap_mb(), ts::kBucketCapMb));
  FillChoice(t.mutable_grad_compression(), ts::kGradCompression);
  t.set_max_grad_norm(OrDefault(t.max_grad_norm(), ts::kMaxGradNorm));
  FillChoice(t.mutable_optimizer(), ts::kOptimizer);
  t.set_weight_decay(OrDefault(t.weight_decay(), ts::kWeightDecay));
  if (!t.has_adam_beta1()) t.set_adam_beta1(ts::kAdamBeta1.default_value);
  if (!t.has_adam_beta2()) t.set_adam_beta2(ts::kAdamBeta2.default_value);
  if (!t.has_adam_eps()) t.set_adam_eps(ts::kAdamEps.default_value);
  FillChoice(t.mutable_lr_schedule(), ts::kLrSchedule);
  t.set_warmup_steps(OrDefault(t.warmup_steps(), ts::kWarmupSteps));
  t.set_lr_step_size(OrDefault(t.lr_step_size(), ts::kLrStepSize));
  if (!t.has_lr_gamma()) t.set_lr_gamma(ts::kLrGamma.default_value);
  t.set_min_lr(OrDefault(t.min_lr(), ts::kMinLr));
  t.set_base_batch(OrDefault(t.base_batch(), ts::kBaseBatch));
  t.set_loader_threads(OrDefault(t.loader_threads(), ts::kLoaderThreads));
  t.set_prefetch_batches(OrDefault(t.prefetch_batches(), ts::kPrefetchBatches));
  if (t.image_size() == 0 && t.dataset() == "image_folder") {
    t.set_image_size(static_cast<int32_t>(ts::kImageFolderImageSize));
  }
  t.set_image_size(OrDefault(t.image_size(), ts::kImageSize));
  t.set_context_length(OrDefault(t.context_length(), ts::kContextLength));
  t.set_synthetic_samples(OrDefault(t.synthetic_samples(), ts::kSyntheticSamples));
  t.set_num_classes(OrDefault(t.num_classes(), ts::kNumClasses));
  t.set_gpt_layers(OrDefault(t.gpt_layers(), ts::kGptLayers));
  t.set_gpt_heads(OrDefault(t.gpt_heads(), ts::kGptHeads));
  t.set_gpt_width(OrDefault(t.gpt_width(), ts::kGptWidth));
  t.set_vocab_size(OrDefault(t.vocab_size(), ts::kVocabSize));
  FillChoice(t.mutable_task(), ts::kTask);
  t.set_checkpoint_every(OrDefault(t.checkpoint_every(), ts::kCheckpointEvery));
  t.set_eval_every(OrDefault(t.eval_every(), ts::kEvalEvery));
  t.set_keep_checkpoints(OrDefault(t.keep_checkpoints(), ts::kKeepCheckpoints));
  t.set_snapshot_every(OrDefault(t.snapshot_every(), ts::kSnapshotEvery));
  t.set_global_batch(OrDefault(t.global_batch(), ts::kGlobalBatch));
  FillChoice(t.mutable_activation_checkpointing(), ts::kActivationCheckpointing);
  baton::v1::PipelineSpec& pipeline = *t.mutable_pipeline();
  pipeline.set_stages(OrDefault(pipeline.stages(), ts::kPipelineStages));
  pipeline.set_micro_batches(OrDefault(pipeline.micro_batches(), ts::kPipelineMicroBatches));
  FillChoice(pipeline.mutable_schedule(), ts::kPipelineSchedule);
  return t;
}

std::vector<TrainerSpecLeaf> TrainerSpecLeaves() {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor& descriptor = *TrainerSpec::descriptor();
  std::vector<TrainerSpecLeaf> leaves;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
      leaves.push_back({field->name(), absl::StrCat("trainer.", field->name()), nullptr, field});
      continue;
    }
    const google::protobuf::Descriptor& nested = *field->message_type();
    for (int j = 0; j < nested.field_count(); ++j) {
      const FieldDescriptor* sub = nested.field(j);
      leaves.push_back({absl::StrCat(field->name(), "_", sub->name()),
                        absl::StrCat("trainer.", field->name(), ".", sub->name()), field, sub});
    }
  }
  return leaves;
}

std::vector<std::string> TrainerSpecFlags(const TrainerSpec& t) {
  std::vector<std::string> flags;
  for (const TrainerSpecLeaf& leaf : TrainerSpecLeaves()) {
    const google::protobuf::Message& holder =
        leaf.parent != nullptr ? t.GetReflection()->GetMessage(t, leaf.parent) : t;
    flags.push_back(absl::StrCat("--", leaf.flag_name, "=", FlagValue(holder, *leaf.field)));
  }
  return flags;
}

absl::Status CheckTrainerSpecPaths(const TrainerSpec& t) {
  if (const DatasetRule* rule = FindDatasetRule(t.dataset()); rule != nullptr) {
    RETURN_IF_ERROR(CheckDataDirContents(t.data_dir(), *rule));
  }
  if (t.model() == "torchscript" && !IsReadableFile(t.torchscript_path())) {
    return Invalid(ts::SpecPath(ts::kTorchscriptPath),
                   absl::StrCat(t.torchscript_path(), " is not a readable file"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTrainerSpec(const TrainerSpec& t) {
  RETURN_IF_ERROR(ValidateBasics(t));
  RETURN_IF_ERROR(ValidateNumericsAndOptimisation(t));
  RETURN_IF_ERROR(ValidateDataAndModel(t));
  RETURN_IF_ERROR(CheckSpec(ts::kCheckpointEvery, t.checkpoint_every()));
  RETURN_IF_ERROR(CheckSpec(ts::kEvalEvery, t.eval_every()));
  RETURN_IF_ERROR(CheckSpec(ts::kKeepCheckpoints, t.keep_checkpoints()));
  RETURN_IF_ERROR(CheckSpec(ts::kSnapshotEvery, t.snapshot_every()));
  RETURN_IF_ERROR(CheckSpec(ts::kGlobalBatch, t.global_batch()));
  RETURN_IF_ERROR(CheckSpec(ts::kZeroStage, t.zero().stage()));
  RETURN_IF_ERROR(ts::CheckZeroCombination(t.zero().stage(), t.zero().offload_optimizer(),
                                           t.grad_compression(), kSpec));
  RETURN_IF_ERROR(CheckSpec(ts::kPipelineStages, t.pipeline().stages()));
  RETURN_IF_ERROR(CheckSpec(ts::kPipelineMicroBatches, t.pipeline().micro_batches()));
  RETURN_IF_ERROR(CheckSpec(ts::kPipelineSchedule, t.pipeline().schedule()));
  RETURN_IF_ERROR(ts::CheckPipeline(
      {t.pipeline().stages(), t.pipeline().micro_batches(), t.model(), t.gpt_layers(),
       t.hidden_size() + 1, t.batch_size(), t.zero().stage(), t.activation_checkpointing(),
       t.precision(), t.accumulation_steps(), t.grad_compression()},
      kSpec));
  // The trainer refuses it too: a job that passed submit would fail at launch.
  return ts::CheckSampleLog(t.sample_log(), t.pipeline().stages(), kSpec);
}

}  // namespace baton
