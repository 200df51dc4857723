// Fuzz target: what the coordinator does with a submitted JobSpec (job_manager.cc's
// submit: CheckMessageLimits, WithDefaults, ValidateJobSpec) on arbitrary specs. The input
// is a JobSpec in protobuf text format or, when it does not parse as text, in binary.
// Invariants: no crash; WithDefaults is idempotent; every rejection is INVALID_ARGUMENT;
// an accepted spec has at least one worker of at least one slot and min <= max workers.

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "baton/v1/job.pb.h"
#include "common/spec/job_spec.h"
#include "common/spec/message_limits.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

// Text-format errors are expected on most inputs; printing each would swamp the output.
class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// Equal field by field, a NaN equal to a NaN (a spec may carry one; validation refuses it).
bool SameSpec(const baton::v1::JobSpec& a, const baton::v1::JobSpec& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  return differencer.Compare(a, b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  v1::JobSpec spec;
  SilentErrors silent;
  google::protobuf::TextFormat::Parser text;
  text.RecordErrorsTo(&silent);
  if (!text.ParseFromString(bytes, &spec) && !spec.ParseFromString(bytes)) return 0;
  if (!CheckMessageLimits(spec).ok()) return 0;
  const v1::JobSpec with_defaults = WithDefaults(spec);
  FUZZ_CHECK(SameSpec(WithDefaults(with_defaults), with_defaults));
  const absl::Status status = ValidateJobSpec(with_defaults);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(SlotsPerWorker(with_defaults) >= 1 && MaxWorkers(with_defaults) >= 1);
  FUZZ_CHECK(with_defaults.workers().min() <= MaxWorkers(with_defaults));
  return 0;
}
