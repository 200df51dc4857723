#include "client/render/output.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/time/proto_time.h"

namespace baton::cli {

using baton::v1::JobState;
using baton::v1::WorkerState;

std::string Table::Render(const std::string& indent) const {
  std::vector<size_t> widths(headers_.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& cells) {
    if (cells.size() > widths.size()) widths.resize(cells.size(), 0);
    for (size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& cells, bool paint) {
    std::string line = indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string empty;
      const std::string& cell = i < cells.size() ? cells[i] : empty;
      absl::StrAppend(&line, paint && paint_ && i == painted_column_ ? paint_(cell) : cell);
      if (i + 1 < widths.size()) line.append(widths[i] - cell.size() + 3, ' ');
    }
    // Trailing blanks from empty last cells are noise.
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  emit(headers_, false);
  for (const auto& row : rows_) emit(row, true);
  return out;
}

std::string JobStateName(JobState state) {
  switch (state) {
    case baton::v1::JOB_STATE_QUEUED:
      return "QUEUED";
    case baton::v1::JOB_STATE_RENDEZVOUS:
      return "RENDEZVOUS";
    case baton::v1::JOB_STATE_RUNNING:
      return "RUNNING";
    case baton::v1::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case baton::v1::JOB_STATE_FAILED:
      return "FAILED";
    case baton::v1::JOB_STATE_CANCELLED:
      return "CANCELLED";
    case baton::v1::JOB_STATE_RESTARTING:
      return "RESTARTING";
    default:
      break;
  }
  return state == baton::v1::JOB_STATE_UNSPECIFIED ? "-" : absl::StrCat("STATE_", state);
}

std::string WorkerStateName(WorkerState state) {
  switch (state) {
    case baton::v1::WORKER_STATE_READY:
      return "READY";
    case baton::v1::WORKER_STATE_LOST:
      return "LOST";
    case baton::v1::WORKER_STATE_DRAINING:
      return "DRAINING";
    default:
      break;
  }
  return state == baton::v1::WORKER_STATE_UNSPECIFIED ? "-" : absl::StrCat("STATE_", state);
}

std::string ColorState(const std::string& state, bool color) {
  if (!color) return state;
  const char* code = nullptr;
  if (state == "SUCCEEDED" || state == "READY") {
    code = "32";  // green
  } else if (state == "FAILED" || state == "LOST") {
    code = "31";  // red
  } else if (state == "CANCELLED" || state == "DRAINING" || state == "RESTARTING") {
    code = "33";  // yellow
  } else if (state == "RUNNING") {
    code = "36";  // cyan
  } else if (state == "QUEUED" || state == "RENDEZVOUS") {
    code = "34";  // blue
  }
  if (code == nullptr) return state;
  return absl::StrCat("\x1b[", code, "m", state, "\x1b[0m");
}

bool IsTerminal(JobState state) {
  return state == baton::v1::JOB_STATE_SUCCEEDED || state == baton::v1::JOB_STATE_FAILED ||
         state == baton::v1::JOB_STATE_CANCELLED;
}

std::string HumanDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  if (d < absl::Seconds(10)) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  }
  const int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

namespace {
bool IsUnset(const google::protobuf::Timestamp& t) { return t.seconds() == 0 && t.nanos() == 0; }
}  // namespace

std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now) {
  if (IsUnset(t)) return "-";
  absl::Duration age = now - FromProto(t);
  if (age < absl::ZeroDuration()) age = absl::ZeroDuration();
  const int64_t s = absl::ToInt64Seconds(age);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 2 * 3600) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string FormatTimestamp(const google::protobuf::Timestamp& t, absl::TimeZone tz) {
  if (IsUnset(t)) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", FromProto(t), tz);
}

std::string FormatRfc3339Utc(const google::protobuf::Timestamp& t) {
  if (IsUnset(t)) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", FromProto(t), absl::UTCTimeZone());
}

std::string FormatMetric(double v) {
  if (std::isfinite(v) && std::fabs(v) >= 1000) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

std::string FormatPercent(double fraction) {
  return absl::StrFormat("%.1f%%", fraction * 100);
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool multiline) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = multiline;
  // Field names as in the YAML job files and the .proto (snake_case).
  options.preserve_proto_field_names = true;
  // Zero values are data (an exit code of 0, generation 0).
  options.always_print_primitive_fields = true;
  // MessageToJsonString, but with map entries in key order (deterministic serialization),
  // so the same job prints the same document.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) {
      return absl::InternalError("cannot print JSON: the message does not serialize");
    }
  }
  static constexpr char kUrlPrefix[] = "type.googleapis.com";
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kUrlPrefix, google::protobuf::DescriptorPool::generated_pool());
  std::string json;
  const auto status = google::protobuf::util::BinaryToJsonString(
      resolver, absl::StrCat(kUrlPrefix, "/", message.GetDescriptor()->full_name()), binary, &json,
      options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

namespace {

// Whether a plain YAML scalar `s` would be read as something other than the string `s`.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* const kSpecial[] = {
      "true", "false", "null", "~",   "yes",  "no",    "on",   "off", "True", "False", "Null",
      "Yes",  "No",    "On",   "Off", "TRUE", "FALSE", "NULL", "YES", "NO",   "ON",    "OFF"};
  for (const char* special : kSpecial) {
    if (s == special) return true;
  }
  double d;
  if (absl::SimpleAtod(s, &d)) return true;
  return false;
}

// Emits `node` (parsed from JSON) in block style. JSON strings carry the non-specific tag
// "!" (they were quoted), numbers, booleans and null "?".
void EmitYaml(const YAML::Node& node, YAML::Emitter& out) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      if (node.size() == 0) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& kv : node) {
        out << YAML::Key << kv.first.Scalar() << YAML::Value;
        EmitYaml(kv.second, out);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      if (node.size() == 0) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : node) EmitYaml(item, out);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!" && NeedsQuotes(node.Scalar())) {
        out << YAML::DoubleQuoted << node.Scalar();
      } else {
        out << node.Scalar();
      }
      return;
    default:
      out << YAML::Null;
      return;
  }
}

}  // namespace

absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message, /*multiline=*/true);
  if (!json.ok()) return json.status();
  try {
    YAML::Emitter out;
    EmitYaml(YAML::Load(*json), out);
    if (!out.good()) {
      return absl::InternalError(absl::StrCat("cannot print YAML: ", out.GetLastError()));
    }
    return absl::StrCat(out.c_str(), "\n");
  } catch (const YAML::Exception& e) {
    return absl::InternalError(absl::StrCat("cannot print YAML: ", e.what()));
  }
}

std::string NeutraliseControls(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      out.push_back('^');
      out.push_back(static_cast<char>(c ^ 0x40));  // ESC -> ^[, DEL -> ^?
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      absl::StrAppend(&out, absl::StrFormat("<U+%04X>", static_cast<unsigned char>(text[++i])));
    } else if (c >= 0x80 && c <= 0x9f) {
      // A raw C1 byte (not UTF-8): 8-bit terminals read 0x9b as CSI.
      absl::StrAppend(&out, absl::StrFormat("<0x%02X>", c));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void NeutraliseStrings(google::protobuf::Message* message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {  // Map fields too: their entries are messages here.
        for (int i = 0; i < r->FieldSize(*message, f); ++i) {
          NeutraliseStrings(r->MutableRepeatedMessage(message, f, i));
        }
      } else {
        NeutraliseStrings(r->MutableMessage(message, f));
      }
    } else if (f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, f); ++i) {
          r->SetRepeatedString(message, f, i,
                               NeutraliseControls(r->GetRepeatedString(*message, f, i)));
        }
      } else {
        r->SetString(message, f, NeutraliseControls(r->GetString(*message, f)));
      }
    }
  }
}

}  // namespace baton::cli
