#include "worker/trainer/contract/metrics_line.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace baton::worker {

absl::StatusOr<baton::v1::MetricPoint> ParseMetricsLine(absl::string_view line) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &object);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics line is not a JSON object: ", status.ToString()));
  }
  baton::v1::MetricPoint point;
  for (const auto& [key, value] : object.fields()) {
    if (key == "step") {
      const double step = value.number_value();
      if (value.kind_case() != google::protobuf::Value::kNumberValue || step < 0 ||
          step != std::floor(step) || step > 9.0e18) {
        return absl::InvalidArgumentError("metrics line: \"step\" must be a non-negative integer");
      }
      point.set_step(static_cast<int64_t>(step));
    } else if (value.kind_case() == google::protobuf::Value::kNumberValue) {
      (*point.mutable_values())[key] = value.number_value();
    }
  }
  return point;
}

}  // namespace baton::worker
