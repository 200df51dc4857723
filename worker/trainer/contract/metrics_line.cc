#include "worker/trainer/contract/metrics_line.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/time/proto_time.h"
#include "worker/trainer/contract/contract.h"

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

namespace {

double NonNegative(const baton::v1::MetricPoint& point, const char* key) {
  const auto it = point.values().find(key);
  return it == point.values().end() || !(it->second > 0) ? 0 : it->second;
}

}  // namespace

std::optional<baton::v1::RankBeat> HeartbeatFromPoint(const baton::v1::MetricPoint& point) {
  using trainer::TrainingPhase;
  if (!point.values().contains(trainer::kHeartbeatSeq)) return std::nullopt;
  baton::v1::RankBeat beat;
  beat.set_generation(point.generation());
  beat.set_rank(point.rank());
  beat.set_seq(static_cast<int64_t>(NonNegative(point, trainer::kHeartbeatSeq)));
  beat.set_step(point.step());
  const double code = NonNegative(point, trainer::kHeartbeatPhase);
  beat.set_phase(code == std::floor(code) && code < trainer::kTrainingPhases
                     ? trainer::TrainingPhaseName(static_cast<TrainingPhase>(code))
                     : "unknown");
  *beat.mutable_in_phase() = ToProto(absl::Seconds(NonNegative(point, trainer::kHeartbeatInPhase)));
  beat.set_collectives(static_cast<int64_t>(NonNegative(point, trainer::kHeartbeatCollectives)));
  beat.set_waiting(NonNegative(point, trainer::kHeartbeatWaiting) > 0);
  if (beat.waiting()) {
    *beat.mutable_waited() = ToProto(absl::Seconds(NonNegative(point, trainer::kHeartbeatWaited)));
  }
  for (int p = 0; p < trainer::kTrainingPhases; ++p) {
    const char* name = trainer::TrainingPhaseName(static_cast<TrainingPhase>(p));
    const std::string key =
        absl::StrCat(trainer::kHeartbeatReferencePrefix, name, trainer::kHeartbeatReferenceSuffix);
    const double seconds = NonNegative(point, key.c_str());
    if (seconds > 0) (*beat.mutable_references())[name] = ToProto(absl::Seconds(seconds));
  }
  return beat;
}

}  // namespace baton::worker
