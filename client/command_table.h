#pragma once

// The CLI's command table: every command with its arguments, flags, help and examples, the
// global flags, and the value sets of -o/--output and --state. Parsing and help (cli.h) and
// the completion scripts (completion.h) are generated from it, so none of them lists a
// command or a flag of its own.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"
#include "client/commands.h"

namespace baton::cli {

struct FlagSpec {
  std::string name;        // long name, without "--"
  std::string short_name;  // one letter without "-", or ""
  std::string value_name;  // "" for boolean flags
  std::string help;
};

struct CommandSpec {
  std::string name;
  std::string args;  // positional synopsis, e.g. "FILE"
  int positionals;   // exact count (help: 0 or 1)
  std::string summary;
  std::string description;
  std::vector<FlagSpec> flags;
  std::vector<std::string> examples;
};

// The flags every command takes, then every command, in help order.
const std::vector<FlagSpec>& GlobalFlags();
const std::vector<CommandSpec>& Commands();
// The command named `name`; null if there is none.
const CommandSpec* FindCommand(absl::string_view name);

// --state's values.
struct NamedState {
  const char* name;
  baton::v1::JobState state;
};
inline constexpr NamedState kStateNames[] = {
    {"queued", baton::v1::JOB_STATE_QUEUED},       {"rendezvous", baton::v1::JOB_STATE_RENDEZVOUS},
    {"running", baton::v1::JOB_STATE_RUNNING},     {"restarting", baton::v1::JOB_STATE_RESTARTING},
    {"succeeded", baton::v1::JOB_STATE_SUCCEEDED}, {"failed", baton::v1::JOB_STATE_FAILED},
    {"cancelled", baton::v1::JOB_STATE_CANCELLED},
};

// -o/--output's values.
struct NamedFormat {
  const char* name;
  OutputFormat format;
};
inline constexpr NamedFormat kFormats[] = {{"table", OutputFormat::kTable},
                                           {"wide", OutputFormat::kWide},
                                           {"json", OutputFormat::kJson},
                                           {"yaml", OutputFormat::kYaml},
                                           {"name", OutputFormat::kName}};

// The -o formats `command` prints; empty: it ignores -o.
std::vector<OutputFormat> SupportedFormats(const std::string& command);

}  // namespace baton::cli
