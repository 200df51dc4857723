#include "common/spec/trainer_spec.h"

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using baton::v1::TrainerSpec;
using google::protobuf::FieldDescriptor;
using ::testing::ElementsAre;
using ::testing::StartsWith;
namespace ts = ::baton::trainer_spec;

// Whether a table entry's kind can hold the proto field's values.
bool KindFits(const ts::AnyField& entry, const FieldDescriptor& field) {
  const auto type = field.cpp_type();
  if (field.is_repeated()) {
    return std::holds_alternative<const ts::ListField*>(entry) &&
           (type == FieldDescriptor::CPPTYPE_INT32 || type == FieldDescriptor::CPPTYPE_INT64);
  }
  if (std::holds_alternative<const ts::IntField*>(entry)) {
    return type == FieldDescriptor::CPPTYPE_INT32 || type == FieldDescriptor::CPPTYPE_INT64;
  }
  if (std::holds_alternative<const ts::RealField*>(entry)) {
    return type == FieldDescriptor::CPPTYPE_DOUBLE;
  }
  if (std::holds_alternative<const ts::ChoiceField*>(entry) ||
      std::holds_alternative<const ts::TextField*>(entry)) {
    return type == FieldDescriptor::CPPTYPE_STRING;
  }
  if (std::holds_alternative<const ts::BoolField*>(entry)) {
    return type == FieldDescriptor::CPPTYPE_BOOL;
  }
  return std::holds_alternative<const ts::Uint64Field*>(entry) &&
         type == FieldDescriptor::CPPTYPE_UINT64;
}

// A new TrainerSpec field without a table entry (or an entry without a field) fails here.
// A nested message's fields count one by one (TrainerSpecLeaves), with their spec path.
TEST(TrainerSpecTableTest, HasOneEntryPerTrainerSpecFieldInFieldOrder) {
  const std::vector<TrainerSpecLeaf> leaves = TrainerSpecLeaves();
  const absl::Span<const ts::AnyField> table = ts::TrainerSpecFields();
  ASSERT_EQ(table.size(), leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const FieldDescriptor& field = *leaves[i].field;
    EXPECT_EQ(ts::FieldName(table[i]), leaves[i].flag_name) << "entry " << i;
    EXPECT_TRUE(KindFits(table[i], field)) << field.name() << ": the entry's kind does not fit";
    std::visit([&](const auto* f) { EXPECT_EQ(ts::SpecPath(*f), leaves[i].spec_path); }, table[i]);
  }
  EXPECT_EQ(ts::SpecPath(ts::kZeroStage), "trainer.zero.stage");
  EXPECT_EQ(ts::FlagLabel(ts::kZeroStage), "--zero_stage");
}

// Int entries must fit their proto type, defaults must be allowed values (except a
// required choice's, which only a standalone trainer uses; it must still be allowed).
TEST(TrainerSpecTableTest, DefaultsAreAllowedAndRangesFitTheProtoTypes) {
  const std::vector<TrainerSpecLeaf> leaves = TrainerSpecLeaves();
  for (const ts::AnyField& entry : ts::TrainerSpecFields()) {
    const std::string name(ts::FieldName(entry));
    const FieldDescriptor* field = nullptr;
    for (const TrainerSpecLeaf& leaf : leaves) {
      if (leaf.flag_name == name) field = leaf.field;
    }
    ASSERT_NE(field, nullptr) << name;
    std::visit(
        [&](const auto* f) {
          using Field = std::decay_t<decltype(*f)>;
          if constexpr (std::is_same_v<Field, ts::IntField>) {
            EXPECT_OK(ts::Check(*f, f->default_value, name));
            if (field->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
              EXPECT_LE(f->max, ts::kInt32Max) << name;
            }
          } else if constexpr (std::is_same_v<Field, ts::RealField>) {
            EXPECT_OK(ts::Check(*f, f->default_value, name));
          } else if constexpr (std::is_same_v<Field, ts::ChoiceField>) {
            EXPECT_OK(ts::Check(*f, f->default_value, name));
          } else if constexpr (std::is_same_v<Field, ts::ListField>) {
            EXPECT_OK(ts::Check(*f, f->default_value, name));
            EXPECT_LE(f->max, ts::kInt32Max) << name;
          }
        },
        entry);
  }
}

// What TrainerSpecWithDefaults makes of an empty spec is the table's default, field by
// field (required choices stay empty), as flag text.
TEST(TrainerSpecWithDefaultsTest, FillsEveryFieldFromTheTable) {
  const std::vector<std::string> flags = TrainerSpecFlags(TrainerSpecWithDefaults(TrainerSpec()));
  const absl::Span<const ts::AnyField> table = ts::TrainerSpecFields();
  ASSERT_EQ(flags.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    const bool required = std::holds_alternative<const ts::ChoiceField*>(table[i]) &&
                          std::get<const ts::ChoiceField*>(table[i])->required;
    const std::string want = required ? "" : ts::DefaultText(table[i]);
    EXPECT_EQ(flags[i], absl::StrCat("--", ts::FieldName(table[i]), "=", want));
  }
}

TEST(TrainerSpecWithDefaultsTest, KeepsGivenValuesAndExplicitZerosWithPresence) {
  TrainerSpec t;
  t.set_keep_checkpoints(7);
  t.set_momentum(0);
  t.set_lr_gamma(0);
  t.set_dataset("image_folder");
  const TrainerSpec out = TrainerSpecWithDefaults(t);
  EXPECT_EQ(out.keep_checkpoints(), 7);
  EXPECT_TRUE(out.has_momentum());
  EXPECT_EQ(out.momentum(), 0);
  EXPECT_EQ(out.lr_gamma(), 0);
  EXPECT_EQ(out.image_size(), ts::kImageFolderImageSize);
  EXPECT_EQ(TrainerSpecFlags(TrainerSpecWithDefaults(out)), TrainerSpecFlags(out));
}

TEST(TrainerSpecFlagsTest, FormatsEachKind) {
  TrainerSpec t;
  t.set_model("gpt");
  t.set_lr(0.1 + 0.2);
  t.set_seed(18446744073709551615u);
  t.add_hidden(64);
  t.add_hidden(32);
  t.set_nesterov(true);
  t.set_synthetic_samples(int64_t{1} << 31);
  const std::vector<std::string> flags = TrainerSpecFlags(t);
  EXPECT_EQ(flags[0], "--model=gpt");
  EXPECT_EQ(flags[1], "--dataset=");
  EXPECT_EQ(flags[4], "--lr=0.30000000000000004");
  EXPECT_EQ(flags[6], "--seed=18446744073709551615");
  EXPECT_EQ(flags[7], "--hidden=64,32");
  EXPECT_EQ(flags[17], "--nesterov=true");
  EXPECT_EQ(flags[31], "--synthetic_samples=2147483648");
}

// The fields of TrainerSpec.zero and TrainerSpec.pipeline are flags of their own, at their
// message's place (zero's two, then pipeline's three, last).
TEST(TrainerSpecFlagsTest, FlattensTheNestedMessages) {
  TrainerSpec t;
  t.mutable_zero()->set_stage(1);
  t.mutable_pipeline()->set_stages(2);
  t.mutable_pipeline()->set_micro_batches(4);
  t.mutable_pipeline()->set_schedule("gpipe");
  std::vector<std::string> flags = TrainerSpecFlags(t);
  ASSERT_GE(flags.size(), 5u);
  const std::vector<std::string> tail(flags.end() - 5, flags.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"--zero_stage=1", "--zero_offload_optimizer=false",
                                            "--pipeline_stages=2", "--pipeline_micro_batches=4",
                                            "--pipeline_schedule=gpipe"}));
  flags = TrainerSpecFlags(TrainerSpecWithDefaults(TrainerSpec()));
  const std::vector<std::string> defaults(flags.end() - 5, flags.end());
  EXPECT_EQ(defaults, (std::vector<std::string>{"--zero_stage=0", "--zero_offload_optimizer=false",
                                                "--pipeline_stages=1", "--pipeline_micro_batches=1",
                                                "--pipeline_schedule=1f1b"}));
  EXPECT_EQ(ts::SpecPath(ts::kPipelineSchedule), "trainer.pipeline.schedule");
}

TEST(TrainerSpecTableTest, ChecksNameTheLabelTheValueAndWhatIsAllowed) {
  EXPECT_THAT(ts::Check(ts::kKeepCheckpoints, 5000, "trainer.keep_checkpoints"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trainer.keep_checkpoints: 5000 is out of range; must be 1..1000"));
  EXPECT_THAT(ts::Check(ts::kCheckpointEvery, -1, "--checkpoint_every"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--checkpoint_every: -1 is out of range; must be >= 0 (0 = only at the "
                       "end)"));
  EXPECT_THAT(ts::Check(ts::kMomentum, 1, "trainer.momentum"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trainer.momentum: 1 is out of range; must be in [0, 1) (0 = plain SGD)"));
  EXPECT_THAT(ts::Check(ts::kLr, 0, "--lr"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--lr: 0 is out of range; must be a finite number > 0"));
  EXPECT_THAT(ts::Check(ts::kLr, std::numeric_limits<double>::quiet_NaN(), "--lr"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--lr: nan")));
  EXPECT_THAT(ts::Check(ts::kOptimizer, "lamb", "--optimizer"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--optimizer: 'lamb' is not supported; allowed: sgd, adamw"));
  EXPECT_THAT(
      ts::Check(ts::kHidden, std::vector<int64_t>(17, 8), "--hidden"),
      StatusIs(absl::StatusCode::kInvalidArgument, "--hidden: 17 layers is too many; at most 16"));
  EXPECT_THAT(ts::Check(ts::kHidden, std::vector<int64_t>{8, 0}, "--hidden"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--hidden[1]: 0 is out of range; must be 1..65536"));
  EXPECT_OK(ts::Check(ts::kBucketCapMb, 4096, "--bucket_cap_mb"));
  EXPECT_THAT(ts::Check(ts::kBucketCapMb, 0, "--bucket_cap_mb"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--bucket_cap_mb: 0 ")));
}

// Every dataset the table allows has a data_dir rule (else: INTERNAL).
TEST(ValidateTrainerSpecTest, EveryDatasetHasADataDirRule) {
  for (absl::string_view dataset : ts::kDatasets) {
    TrainerSpec t;
    t.set_model("mlp");
    t.set_dataset(std::string(dataset));
    const absl::Status status = ValidateTrainerSpec(TrainerSpecWithDefaults(t));
    EXPECT_NE(status.code(), absl::StatusCode::kInternal) << dataset << ": " << status;
  }
}

// Every flag entry has help text (its --help line), and the flag entries are the
// TrainerSpec ones, then max_steps, max_epochs and checkpoint_dir.
TEST(TrainerSpecTableTest, EveryFlagEntryHasHelp) {
  const absl::Span<const ts::AnyField> spec = ts::TrainerSpecFields();
  const absl::Span<const ts::AnyField> flags = ts::TrainerFlagFields();
  ASSERT_EQ(flags.size(), spec.size() + 3);
  for (size_t i = 0; i < spec.size(); ++i) EXPECT_EQ(flags[i], spec[i]);
  EXPECT_EQ(ts::FieldName(flags[spec.size()]), "max_steps");
  EXPECT_EQ(ts::FieldName(flags[spec.size() + 1]), "max_epochs");
  EXPECT_EQ(ts::FieldName(flags[spec.size() + 2]), "checkpoint_dir");
  for (const ts::AnyField& entry : flags) {
    EXPECT_FALSE(ts::FieldHelp(entry).empty()) << ts::FieldName(entry);
  }
}

}  // namespace
}  // namespace baton
