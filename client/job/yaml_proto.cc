#include "client/job/yaml_proto.h"

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace baton::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;

std::string JoinPath(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

// "a mapping", "'two'", ... for "expected X, got <Describe>".
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      // Quoted scalars carry the non-specific tag "!": they are strings in YAML.
      if (node.Tag() == "!") return absl::StrCat("the quoted string \"", node.Scalar(), "\"");
      return absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// A scalar written without quotes or explicit tag (YAML's "plain" style).
bool IsPlainScalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() == "?";
}

bool IsNumberText(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E') {
      return false;
    }
  }
  return true;
}

bool IsIntegerText(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!absl::ascii_isdigit(s[i])) return false;
  }
  return true;
}

// Converts YAML nodes into one message tree; remembers the source for errors.
class Converter {
 public:
  explicit Converter(const YamlSource& source) : source_(source) {}

  absl::Status ConvertMessage(const YAML::Node& node, const std::string& path, Message* msg) {
    if (node.IsNull()) return absl::OkStatus();
    if (!node.IsMap()) return Error(node, path, Expected("a mapping", node));
    const Descriptor* desc = msg->GetDescriptor();
    std::set<int> seen_fields;
    std::map<const OneofDescriptor*, const FieldDescriptor*> seen_oneofs;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        return Error(key, path, absl::StrCat("field names must be scalars, got ", Describe(key)));
      }
      const std::string name = key.Scalar();
      const std::string field_path = JoinPath(path, name);
      const FieldDescriptor* field = desc->FindFieldByName(name);
      if (field == nullptr) {
        return Error(key, field_path,
                     absl::StrCat("unknown field; allowed: ", AllowedFields(desc)));
      }
      if (!seen_fields.insert(field->number()).second) {
        return Error(key, field_path, "is set twice; set each field once");
      }
      if (const OneofDescriptor* oneof = field->real_containing_oneof()) {
        auto [prev, inserted] = seen_oneofs.emplace(oneof, field);
        if (!inserted) {
          return Error(key, field_path,
                       absl::StrCat("'", prev->second->name(), "' is already set; ",
                                    OneofMembers(oneof), " are alternatives (oneof ",
                                    oneof->name(), "): set only one"));
        }
      }
      RETURN_IF_ERROR(ConvertField(value, field_path, field, msg));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ConvertField(const YAML::Node& node, const std::string& path,
                            const FieldDescriptor* field, Message* msg) {
    const Reflection* refl = msg->GetReflection();
    if (field->is_map()) {
      if (node.IsNull()) return absl::OkStatus();
      if (!node.IsMap()) return Error(node, path, Expected("a mapping", node));
      const FieldDescriptor* key_field = field->message_type()->map_key();
      const FieldDescriptor* value_field = field->message_type()->map_value();
      std::set<std::string> seen_keys;
      for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;
        if (!key.IsScalar()) {
          return Error(key, path, absl::StrCat("keys must be scalars, got ", Describe(key)));
        }
        const std::string entry_path = JoinPath(path, key.Scalar());
        if (!seen_keys.insert(key.Scalar()).second) {
          return Error(key, entry_path, "is set twice; set each key once");
        }
        Message* entry = refl->AddMessage(msg, field);
        RETURN_IF_ERROR(ConvertSingular(key, entry_path, key_field, entry, /*add=*/false));
        RETURN_IF_ERROR(ConvertSingular(it->second, entry_path, value_field, entry,
                                        /*add=*/false, /*null_ok=*/false));
      }
      return absl::OkStatus();
    }
    if (field->is_repeated()) {
      if (node.IsNull()) return absl::OkStatus();
      if (!node.IsSequence()) return Error(node, path, Expected("a sequence", node));
      for (size_t i = 0; i < node.size(); ++i) {
        RETURN_IF_ERROR(ConvertSingular(node[i], absl::StrCat(path, "[", i, "]"), field, msg,
                                        /*add=*/true, /*null_ok=*/false));
      }
      return absl::OkStatus();
    }
    return ConvertSingular(node, path, field, msg, /*add=*/false);
  }

  // Sets (or, with `add`, appends to) one value of `field`. A null node leaves a scalar
  // unset when `null_ok`, and is an error otherwise (sequence elements, map values).
  absl::Status ConvertSingular(const YAML::Node& node, const std::string& path,
                               const FieldDescriptor* field, Message* msg, bool add,
                               bool null_ok = true) {
    const Reflection* refl = msg->GetReflection();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Message* sub = add ? refl->AddMessage(msg, field) : refl->MutableMessage(msg, field);
      return ConvertSubmessage(node, path, sub);
    }
    if (node.IsNull()) {
      if (null_ok) return absl::OkStatus();
      return Error(node, path, absl::StrCat(Expected(TypeName(field), node),
                                            field->type() == FieldDescriptor::TYPE_STRING
                                                ? " (write '' for an empty string)"
                                                : ""));
    }
    if (!node.IsScalar()) return Error(node, path, Expected(TypeName(field), node));
    const std::string& text = node.Scalar();

#define BATON_SET_OR_ADD(Type, value) \
  (add ? refl->Add##Type(msg, field, value) : refl->Set##Type(msg, field, value))

    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: {
        ASSIGN_OR_RETURN(int64_t v, ParseInteger<int64_t>(node, path, field));
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return Error(node, path, absl::StrCat(text, " is out of range for int32"));
        }
        BATON_SET_OR_ADD(Int32, static_cast<int32_t>(v));
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        ASSIGN_OR_RETURN(int64_t v, ParseInteger<int64_t>(node, path, field));
        BATON_SET_OR_ADD(Int64, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        ASSIGN_OR_RETURN(uint64_t v, ParseInteger<uint64_t>(node, path, field));
        if (v > std::numeric_limits<uint32_t>::max()) {
          return Error(node, path, absl::StrCat(text, " is out of range for uint32"));
        }
        BATON_SET_OR_ADD(UInt32, static_cast<uint32_t>(v));
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        ASSIGN_OR_RETURN(uint64_t v, ParseInteger<uint64_t>(node, path, field));
        BATON_SET_OR_ADD(UInt64, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        ASSIGN_OR_RETURN(double v, ParseDouble(node, path, field));
        BATON_SET_OR_ADD(Double, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_FLOAT: {
        ASSIGN_OR_RETURN(double v, ParseDouble(node, path, field));
        BATON_SET_OR_ADD(Float, static_cast<float>(v));
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool v;
        if (IsPlainScalar(node) && (text == "true" || text == "True" || text == "TRUE")) {
          v = true;
        } else if (IsPlainScalar(node) &&
                   (text == "false" || text == "False" || text == "FALSE")) {
          v = false;
        } else {
          return Error(node, path, Expected("true or false", node));
        }
        BATON_SET_OR_ADD(Bool, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        BATON_SET_OR_ADD(String, text);
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const EnumValueDescriptor* v = field->enum_type()->FindValueByName(text);
        if (v == nullptr) {
          std::vector<std::string> names;
          for (int i = 0; i < field->enum_type()->value_count(); ++i) {
            names.push_back(field->enum_type()->value(i)->name());
          }
          return Error(node, path, absl::StrCat(Expected(TypeName(field), node), "; allowed: ",
                                                absl::StrJoin(names, ", ")));
        }
        BATON_SET_OR_ADD(Enum, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;  // handled above
    }
#undef BATON_SET_OR_ADD
    return absl::OkStatus();
  }

  // Well-known types written as scalars; every other message as a mapping.
  absl::Status ConvertSubmessage(const YAML::Node& node, const std::string& path, Message* msg) {
    const std::string& type = msg->GetDescriptor()->full_name();
    const bool is_duration = type == "google.protobuf.Duration";
    const bool is_timestamp = type == "google.protobuf.Timestamp";
    if (!is_duration && !is_timestamp) return ConvertMessage(node, path, msg);
    if (node.IsNull()) return absl::OkStatus();
    absl::Duration since_epoch;
    if (is_duration) {
      if (!node.IsScalar() || !absl::ParseDuration(node.Scalar(), &since_epoch)) {
        return Error(node, path, Expected("a duration such as 90s or 1h30m", node));
      }
    } else {
      absl::Time t;
      std::string err;
      if (!node.IsScalar() || !absl::ParseTime(absl::RFC3339_full, node.Scalar(), &t, &err)) {
        return Error(node, path,
                     Expected("an RFC 3339 time such as 2024-05-01T12:00:00Z", node));
      }
      since_epoch = t - absl::UnixEpoch();
    }
    const int64_t nanos = absl::ToInt64Nanoseconds(since_epoch);
    int64_t seconds = nanos / 1000000000;
    int32_t sub = static_cast<int32_t>(nanos % 1000000000);
    if (is_timestamp && sub < 0) {  // Timestamp nanos are always non-negative
      sub += 1000000000;
      --seconds;
    }
    const Descriptor* desc = msg->GetDescriptor();
    msg->GetReflection()->SetInt64(msg, desc->FindFieldByName("seconds"), seconds);
    msg->GetReflection()->SetInt32(msg, desc->FindFieldByName("nanos"), sub);
    return absl::OkStatus();
  }

  template <typename Int>
  absl::StatusOr<Int> ParseInteger(const YAML::Node& node, const std::string& path,
                                   const FieldDescriptor* field) {
    Int v;
    const std::string& text = node.Scalar();
    if (!IsPlainScalar(node) || !IsIntegerText(text) ||
        (!std::numeric_limits<Int>::is_signed && text[0] == '-')) {
      return Error(node, path, Expected(TypeName(field), node));
    }
    if (!absl::SimpleAtoi(text, &v)) {
      return Error(node, path, absl::StrCat(text, " is out of range for ",
                                            field->cpp_type_name()));
    }
    return v;
  }

  absl::StatusOr<double> ParseDouble(const YAML::Node& node, const std::string& path,
                                     const FieldDescriptor* field) {
    const std::string& text = node.Scalar();
    if (IsPlainScalar(node)) {
      const std::string lower = absl::AsciiStrToLower(text);
      if (lower == ".inf" || lower == "+.inf") return std::numeric_limits<double>::infinity();
      if (lower == "-.inf") return -std::numeric_limits<double>::infinity();
      if (lower == ".nan") return std::numeric_limits<double>::quiet_NaN();
      double v;
      if (IsNumberText(text) && absl::SimpleAtod(text, &v)) return v;
    }
    return Error(node, path, Expected(TypeName(field), node));
  }

  static std::string TypeName(const FieldDescriptor* field) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return "an integer";
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return "a non-negative integer";
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return "a number";
      case FieldDescriptor::CPPTYPE_BOOL:
        return "true or false";
      case FieldDescriptor::CPPTYPE_STRING:
        return "a string";
      case FieldDescriptor::CPPTYPE_ENUM:
        return absl::StrCat("one of ", field->enum_type()->name());
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return "a mapping";
    }
    return "a value";
  }

  static std::string Expected(const std::string& what, const YAML::Node& got) {
    return absl::StrCat("expected ", what, ", got ", Describe(got));
  }

  static std::string AllowedFields(const Descriptor* desc) {
    std::vector<std::string> names;
    for (int i = 0; i < desc->field_count(); ++i) names.push_back(desc->field(i)->name());
    return absl::StrJoin(names, ", ");
  }

  static std::string OneofMembers(const OneofDescriptor* oneof) {
    std::vector<std::string> names;
    for (int i = 0; i < oneof->field_count(); ++i) {
      names.push_back(absl::StrCat("'", oneof->field(i)->name(), "'"));
    }
    return absl::StrJoin(names, " and ");
  }

  absl::Status Error(const YAML::Node& node, const std::string& path,
                     const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(FormatLocation(source_, node.Mark()), ": ",
                                                   path.empty() ? "" : path + ": ", problem));
  }

  const YamlSource& source_;
};

}  // namespace

std::string FormatLocation(const YamlSource& source, const YAML::Mark& mark) {
  if (!source.has_positions || mark.is_null()) return source.name;
  return absl::StrCat(source.name, ":", mark.line + 1, ":", mark.column + 1);
}

absl::Status YamlToMessage(const YAML::Node& node, const YamlSource& source,
                           google::protobuf::Message* message) {
  try {
    return Converter(source).ConvertMessage(node, "", message);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatLocation(source, e.mark), ": invalid YAML: ", e.msg));
  }
}

}  // namespace baton::cli
