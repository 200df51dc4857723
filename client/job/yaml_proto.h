#pragma once

// Generic YAML -> protobuf conversion driven by the message's descriptor, so new proto
// fields need no new parsing code.
//
// Mapping of YAML onto a message (field names are the proto names, e.g. `data_dir`):
//   message                       mapping (null: the message is set, empty)
//   int32/int64/uint32/uint64     plain integer scalar (decimal, in range); not quoted
//   double/float                  plain number, or .inf / -.inf / .nan
//   bool                          plain true / false
//   string/bytes                  any scalar, taken verbatim
//   enum                          the value's name, e.g. STREAM_STDOUT
//   google.protobuf.Duration      string accepted by absl::ParseDuration, e.g. 90s, 1h30m
//   google.protobuf.Timestamp     RFC 3339, e.g. 2024-05-01T12:00:00Z
//   repeated                      sequence (null: empty)
//   map<K, V>                     mapping; keys converted as K, values as V
// A null singular scalar (`key:` or `key: ~`) leaves the field unset. Setting a proto3
// `optional` field, even to 0, gives it presence. Two members of one oneof, a repeated
// key or an unknown field name are errors.
//
// Errors are INVALID_ARGUMENT: "<source>:<line>:<column>: <field path>: <problem>", e.g.
//   "job.yaml:4:8: workers.min: expected an integer, got 'two'". Field paths use dots and
//   [index] for sequence elements. Line and column are 1-based; nodes without a position
//   (built in code, not parsed) are reported as "<source>: ...".

#include <string>

#include <google/protobuf/message.h>
#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"

namespace baton::cli {

// Where the YAML came from, for error messages.
struct YamlSource {
  // A file name, or e.g. "--set workers.min=two".
  std::string name;
  // Whether node positions (line:column) mean something to the user.
  bool has_positions = true;
};

// Merges `node` into `message` (fields not in `node` are left as they are). On error,
// `message` may be partially filled. Never throws.
absl::Status YamlToMessage(const YAML::Node& node, const YamlSource& source,
                           google::protobuf::Message* message);

// "line:column: " style location prefix for `mark` ("<name>:<l>:<c>" or "<name>").
std::string FormatLocation(const YamlSource& source, const YAML::Mark& mark);

}  // namespace baton::cli
