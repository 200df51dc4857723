#include "worker/trainer/trainer_flags.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "baton/v1/job.pb.h"
#include "common/spec/job_spec.h"
#include "common/spec/trainer_spec.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;
using google::protobuf::FieldDescriptor;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Parses `args` (after a program name) into the flags and builds the options.
absl::StatusOr<FlagOptions> FromArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "baton-trainer");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  RETURN_IF_ERROR(ParseFlags(static_cast<int>(argv.size()), argv.data()));
  return OptionsFromFlags();
}

// The smallest valid standalone run: the defaults, synthetic data, one step.
const std::vector<std::string>& BaseArgs() {
  static const auto* args = new std::vector<std::string>{"--dataset=synthetic", "--max_steps=1"};
  return *args;
}

// What the trainer makes of the base run with `flag` set to `value`.
absl::Status TrainerVerdict(absl::string_view flag, absl::string_view value) {
  absl::FlagSaver restore_flags;
  std::vector<std::string> args = BaseArgs();
  args.push_back(absl::StrCat("--", flag, "=", value));
  return FromArgs(args).status();
}

// A valid trainer job of the same run, after defaults.
baton::v1::JobSpec BaseSpec() {
  baton::v1::JobSpec spec;
  spec.set_name("agree");
  spec.mutable_trainer()->set_model("mlp");
  spec.mutable_trainer()->set_dataset("synthetic");
  spec.mutable_workers()->set_min(1);
  spec.mutable_budget()->set_max_steps(1);
  return WithDefaults(spec);
}

// Sets a scalar TrainerSpec field from flag text; false when the proto type cannot hold it
// (e.g. an int32 field and a value beyond int32).
bool SetField(google::protobuf::Message& t, const FieldDescriptor& field, const std::string& text) {
  const google::protobuf::Reflection& r = *t.GetReflection();
  int64_t i = 0;
  double d = 0;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      if (!absl::SimpleAtoi(text, &i) || i < std::numeric_limits<int32_t>::min() ||
          i > std::numeric_limits<int32_t>::max()) {
        return false;
      }
      r.SetInt32(&t, &field, static_cast<int32_t>(i));
      return true;
    case FieldDescriptor::CPPTYPE_INT64:
      if (!absl::SimpleAtoi(text, &i)) return false;
      r.SetInt64(&t, &field, i);
      return true;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      if (!absl::SimpleAtod(text, &d)) return false;
      r.SetDouble(&t, &field, d);
      return true;
    case FieldDescriptor::CPPTYPE_STRING:
      r.SetString(&t, &field, text);
      return true;
    default:
      return false;
  }
}

// The TrainerSpec setting whose flag is `name`.
std::optional<TrainerSpecLeaf> LeafOf(absl::string_view name) {
  for (const TrainerSpecLeaf& leaf : TrainerSpecLeaves()) {
    if (leaf.flag_name == name) return leaf;
  }
  return std::nullopt;
}

// What submit makes of the base job with TrainerSpec field `name` set to `text`
// (a list as comma-separated text); nullopt when the proto cannot hold the value.
std::optional<absl::Status> SpecVerdict(absl::string_view name, const std::string& text) {
  baton::v1::JobSpec spec = BaseSpec();
  baton::v1::TrainerSpec& trainer = *spec.mutable_trainer();
  const std::optional<TrainerSpecLeaf> leaf = LeafOf(name);
  if (!leaf.has_value()) return absl::NotFoundError(absl::StrCat("no field ", name));
  google::protobuf::Message& t =
      leaf->parent != nullptr ? *trainer.GetReflection()->MutableMessage(&trainer, leaf->parent)
                              : trainer;
  const FieldDescriptor* field = leaf->field;
  if (field->is_repeated()) {
    t.GetReflection()->ClearField(&t, field);
    for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(part, &v) || v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max()) {
        return std::nullopt;
      }
      t.GetReflection()->AddInt32(&t, field, static_cast<int32_t>(v));
    }
  } else if (!SetField(t, *field, text)) {
    return std::nullopt;
  }
  return ValidateJobSpec(spec);
}

// Values just outside what `field` allows, as flag text.
std::vector<std::string> OutOfRange(const ts::AnyField& entry) {
  return std::visit(
      [](const auto* f) -> std::vector<std::string> {
        using Field = std::decay_t<decltype(*f)>;
        std::vector<std::string> out;
        if constexpr (std::is_same_v<Field, ts::IntField>) {
          out.push_back(absl::StrCat(f->min - 1));
          if (f->max < ts::kInt64Max) out.push_back(absl::StrCat(f->max + 1));
        } else if constexpr (std::is_same_v<Field, ts::RealField>) {
          out.push_back(ts::RealText(f->lo_closed ? f->lo - 0.001 : f->lo));
          if (std::isfinite(f->hi)) {
            out.push_back(ts::RealText(f->hi_closed ? f->hi * 1.001 : f->hi));
          }
          out.push_back("nan");
          out.push_back("inf");
        } else if constexpr (std::is_same_v<Field, ts::ChoiceField>) {
          out.push_back("no-such-choice");
        } else if constexpr (std::is_same_v<Field, ts::ListField>) {
          out.push_back(ts::ListText(std::vector<int64_t>(f->max_count + 1, f->min)));
          out.push_back(ts::ListText({f->min, f->max + 1}));
        }
        return out;
      },
      entry);
}

// Every field's out-of-range values are rejected by submit and by baton-trainer alike,
// each naming the field; both accept the defaults. A new field checked on one side only
// fails here.
TEST(TrainerFlagsTest, SubmitAndTrainerRejectTheSameValues) {
  ASSERT_OK(ValidateJobSpec(BaseSpec()));
  {
    absl::FlagSaver restore_flags;
    ASSERT_OK(FromArgs(BaseArgs()));
  }
  for (const ts::AnyField& entry : ts::TrainerSpecFields()) {
    const std::string name(ts::FieldName(entry));
    for (const std::string& bad : OutOfRange(entry)) {
      SCOPED_TRACE(absl::StrCat(name, "=", bad));
      const std::optional<absl::Status> spec = SpecVerdict(name, bad);
      if (spec.has_value()) {
        EXPECT_THAT(*spec, StatusIs(absl::StatusCode::kInvalidArgument,
                                    StartsWith(LeafOf(name)->spec_path)));
      }
      EXPECT_THAT(TrainerVerdict(name, bad),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--" + name)));
    }
  }
}

// Pipeline flags: the same rules as at submit, including what the pipeline loop does not
// support (fp16, accumulation); a valid pipeline is accepted.
TEST(TrainerFlagsTest, PipelineRules) {
  {
    absl::FlagSaver restore_flags;
    EXPECT_THAT(FromArgs({"--dataset=synthetic", "--max_steps=1", "--pipeline_stages=2"}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "--pipeline_micro_batches: 1 is fewer than the 2 stages; must be >= "
                         "--pipeline_stages"));
  }
  {
    absl::FlagSaver restore_flags;
    EXPECT_THAT(FromArgs({"--dataset=synthetic", "--max_steps=1", "--pipeline_stages=2",
                          "--pipeline_micro_batches=4", "--precision=fp16"}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "--precision: 'fp16' is not supported with pipeline parallelism "
                         "(--pipeline_stages 2); allowed: fp32"));
  }
  {
    absl::FlagSaver restore_flags;
    EXPECT_THAT(FromArgs({"--dataset=synthetic", "--max_steps=1", "--pipeline_stages=2",
                          "--pipeline_micro_batches=4", "--accumulation_steps=2"}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--accumulation_steps: 2 is not supported with pipeline")));
  }
  {
    absl::FlagSaver restore_flags;
    absl::StatusOr<FlagOptions> pipeline =
        FromArgs({"--dataset=synthetic", "--max_steps=1", "--pipeline_stages=2",
                  "--pipeline_micro_batches=4"});
    ASSERT_OK(pipeline);
    EXPECT_EQ(pipeline->trainer.pipeline_stages, 2);
  }
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> options =
      FromArgs({"--dataset=synthetic", "--max_steps=1", "--pipeline_micro_batches=4",
                "--pipeline_schedule=gpipe"});
  ASSERT_OK(options);
  EXPECT_EQ(options->trainer.pipeline_stages, 1);
  EXPECT_EQ(options->trainer.pipeline_micro_batches, 4);
  EXPECT_EQ(options->trainer.pipeline_schedule, "gpipe");
}

// ZeRO combinations that cannot work are rejected by both, naming the field: offload
// without a sharded stage, stage 2 with gradient compression.
TEST(TrainerFlagsTest, ZeroCombinationsThatCannotWorkAreRejectedByBoth) {
  baton::v1::JobSpec offload = BaseSpec();
  offload.mutable_trainer()->mutable_zero()->set_offload_optimizer(true);
  EXPECT_THAT(ValidateJobSpec(WithDefaults(offload)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trainer.zero.offload_optimizer: true needs trainer.zero.stage "
                                 "1 or 2")));
  EXPECT_THAT(TrainerVerdict("zero_offload_optimizer", "true"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--zero_offload_optimizer: true needs --zero_stage 1 or 2")));
  {
    absl::FlagSaver restore_flags;
    std::vector<std::string> args = BaseArgs();
    args.push_back("--zero_stage=2");
    args.push_back("--grad_compression=bf16");
    EXPECT_THAT(FromArgs(args).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--zero_stage: 2 cannot be combined with "
                                   "--grad_compression=bf16")));
  }
  baton::v1::JobSpec spec = BaseSpec();
  spec.mutable_trainer()->mutable_zero()->set_stage(2);
  spec.mutable_trainer()->set_grad_compression("fp16");
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trainer.zero.stage: 2 cannot be combined with "
                                 "trainer.grad_compression=fp16")));
  EXPECT_OK(SpecVerdict("zero_stage", "2").value());
  EXPECT_OK(TrainerVerdict("zero_stage", "2"));
  EXPECT_OK(SpecVerdict("zero_stage", "1").value());
  EXPECT_OK(TrainerVerdict("zero_stage", "1"));
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> options =
      FromArgs({"--dataset=synthetic", "--max_steps=1", "--zero_stage=1"});
  ASSERT_OK(options);
  EXPECT_EQ(options->trainer.zero_stage, 1);
  EXPECT_FALSE(options->trainer.zero_offload_optimizer);
}

// The example: the two validators used to disagree (1..1000 at submit, >= 1 in
// the trainer).
TEST(TrainerFlagsTest, KeepCheckpointsBeyondTheTablesRangeIsRejectedByBoth) {
  EXPECT_THAT(SpecVerdict("keep_checkpoints", "5000").value(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trainer.keep_checkpoints: 5000 is out of range; must be 1..1000"));
  EXPECT_THAT(TrainerVerdict("keep_checkpoints", "5000"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--keep_checkpoints: 5000 is out of range; must be 1..1000"));
  EXPECT_OK(SpecVerdict("keep_checkpoints", "1000").value());
  EXPECT_OK(TrainerVerdict("keep_checkpoints", "1000"));
}

TEST(TrainerFlagsTest, BudgetFlagsUseTheTable) {
  EXPECT_THAT(TrainerVerdict("max_steps", "-1"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--max_steps: -1")));
  EXPECT_THAT(TrainerVerdict("max_epochs", "3000000000"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--max_epochs: ")));
  absl::FlagSaver restore_flags;
  EXPECT_THAT(FromArgs({"--dataset=synthetic"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_epochs")));
}

// Every TrainerSpec field (and the budget and checkpoint_dir) is a flag whose default is
// the table's.
TEST(TrainerFlagsTest, EveryFieldIsAFlagWithTheTablesDefault) {
  for (const ts::AnyField& entry : ts::TrainerSpecFields()) {
    const std::string name(ts::FieldName(entry));
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    const std::string want = ts::DefaultText(entry);
    if (std::holds_alternative<const ts::RealField*>(entry)) {
      double got = 0;
      ASSERT_TRUE(absl::SimpleAtod(flag->DefaultValue(), &got)) << name;
      EXPECT_EQ(got, std::get<const ts::RealField*>(entry)->default_value) << name;
    } else {
      EXPECT_EQ(flag->DefaultValue(), want) << name;
    }
  }
  for (const ts::IntField* budget : {&ts::kMaxSteps, &ts::kMaxEpochs}) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(budget->name);
    ASSERT_NE(flag, nullptr) << budget->name;
    EXPECT_EQ(flag->DefaultValue(), absl::StrCat(budget->default_value));
  }
  ASSERT_NE(absl::FindCommandLineFlag(ts::kCheckpointDir.name), nullptr);
}

// The options a flag set builds carry the flags' values.
TEST(TrainerFlagsTest, BuildsOptionsFromFlags) {
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> options =
      FromArgs({"--dataset=synthetic", "--max_steps=5", "--keep_checkpoints=7", "--hidden=64,32",
                "--precision=bf16", "--threads=2", "--image_size=48", "--momentum=0"});
  ASSERT_OK(options);
  EXPECT_EQ(options->trainer.keep_checkpoints, 7);
  EXPECT_EQ(options->trainer.max_steps, 5);
  EXPECT_EQ(options->trainer.model.hidden, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(options->trainer.step.precision, Precision::kBf16);
  EXPECT_EQ(options->trainer.optimizer.momentum, 0);
  EXPECT_EQ(options->threads, 2);
  EXPECT_EQ(options->data.dataset, "synthetic");
  EXPECT_EQ(options->data.image_size, 48);
}

TEST(TrainerFlagsTest, ActivationCheckpointingNeedsAModelWithBlocks) {
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> gpt = FromArgs(
      {"--model=gpt", "--dataset=synthetic", "--max_steps=1", "--activation_checkpointing=blocks"});
  ASSERT_OK(gpt);
  EXPECT_EQ(gpt->trainer.model.activation_checkpointing, "blocks");
  EXPECT_THAT(FromArgs({"--model=mlp", "--dataset=synthetic", "--max_steps=1",
                        "--activation_checkpointing=blocks"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("--activation_checkpointing: 'blocks' is not supported by "
                                  "--model=mlp")));
  EXPECT_THAT(FromArgs({"--model=gpt", "--dataset=synthetic", "--max_steps=1",
                        "--activation_checkpointing=layers"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--activation_checkpointing: 'layers' is not supported; allowed: none, "
                       "blocks"));
}

TEST(TrainerFlagsTest, ParseErrorsAreOneLineNamingTheFlag) {
  absl::FlagSaver restore_flags;
  EXPECT_THAT(FromArgs({"--no_such_flag=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag --no_such_flag"));
  EXPECT_THAT(FromArgs({"--batch_size=abc"}),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--batch_size=abc: ")));
  EXPECT_THAT(FromArgs({"stray"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unexpected argument 'stray'"));
  EXPECT_THAT(FromArgs({"--max_steps"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "flag --max_steps has no value"));
  EXPECT_THAT(FromArgs({"--max_steps=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--data_dir")));
}

// Every contract flag (the Budget and JobSpec ones too) carries its entry's help text and
// default.
TEST(TrainerFlagsTest, EveryFlagHasItsEntrysHelpAndDefault) {
  for (const ts::AnyField& entry : ts::TrainerFlagFields()) {
    const std::string name(ts::FieldName(entry));
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    EXPECT_FALSE(ts::FieldHelp(entry).empty()) << name;
    EXPECT_EQ(flag->Help(), ts::FieldHelp(entry)) << name;
    if (!std::holds_alternative<const ts::RealField*>(entry)) {
      EXPECT_EQ(flag->DefaultValue(), ts::DefaultText(entry)) << name;
    }
  }
}

// Every contract flag fills at least one member of FlagOptions (ForEachFlagOption), so a
// new entry with a flag but no option fails here; and no integer entry allows a value its
// member cannot hold (OptionsFromFlags narrows after the table's check).
TEST(TrainerFlagsTest, EveryFlagReachesTheOptionsAndFitsItsMember) {
  std::set<std::string> filled;
  FlagOptions options;
  ForEachFlagOption(options, [&](const auto& field, auto& member) {
    filled.insert(std::string(field.name));
    using Field = std::decay_t<decltype(field)>;
    using Member = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<Field, ts::IntField>) {
      EXPECT_GE(field.min, std::numeric_limits<Member>::min()) << field.name;
      EXPECT_LE(field.max, std::numeric_limits<Member>::max()) << field.name;
    }
  });
  for (const ts::AnyField& entry : ts::TrainerFlagFields()) {
    EXPECT_EQ(filled.count(std::string(ts::FieldName(entry))), 1u)
        << ts::FieldName(entry) << " reaches no option";
  }
  EXPECT_EQ(filled.size(), ts::TrainerFlagFields().size());
}

// The defaults of a flag run are the options' own defaults (those of the option structs,
// which read the table too), except the budget the base run sets.
TEST(TrainerFlagsTest, DefaultFlagsBuildDefaultOptions) {
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> options = FromArgs(BaseArgs());
  ASSERT_OK(options);
  const TrainerOptions defaults;
  EXPECT_EQ(options->trainer.batch_size, defaults.batch_size);
  EXPECT_EQ(options->trainer.model.hidden, defaults.model.hidden);
  EXPECT_EQ(options->trainer.optimizer.lr, defaults.optimizer.lr);
  EXPECT_EQ(options->trainer.step.precision, defaults.step.precision);
  EXPECT_EQ(options->trainer.step.reducer.compression, defaults.step.reducer.compression);
  EXPECT_EQ(options->trainer.pipeline_schedule, defaults.pipeline_schedule);
  EXPECT_EQ(options->trainer.max_steps, 1);
  EXPECT_EQ(options->data.seed, options->trainer.seed);
  EXPECT_EQ(options->data.vocab_size, options->trainer.model.vocab_size);
  EXPECT_FALSE(options->data.synthetic_tokens);
  EXPECT_EQ(options->threads, ts::kThreads.default_value);
}

TEST(TrainerFlagsTest, LanguageModelsGetSyntheticTokens) {
  absl::FlagSaver restore_flags;
  absl::StatusOr<FlagOptions> options =
      FromArgs({"--model=gpt", "--dataset=synthetic", "--max_steps=1"});
  ASSERT_OK(options);
  EXPECT_TRUE(options->data.synthetic_tokens);
}

}  // namespace
}  // namespace baton::trainer
