#pragma once

// The `baton` command line: a small argument parser (abseil flags has no subcommands),
// help texts, and RunCli, which wires a parsed invocation to the command functions in
// client/commands.h.
//
// Grammar:  baton [GLOBAL FLAGS] COMMAND [ARGS and FLAGS in any order]
//   * flags are `--name VALUE`, `--name=VALUE` or a short alias (`-o json`, `-f`);
//   * global flags (--coordinator, --context, --ca, --token_file, --insecure, -o/--output,
//     -h/--help) may appear anywhere, command
//     flags only after the command; `--` ends flags;
//   * `baton help [COMMAND]`, `baton --help` and `baton COMMAND --help` print help to stdout
//     and exit 0; usage errors print one line plus a hint to stderr and exit 2.

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"
#include "client/config/connection.h"

namespace baton::cli {

inline constexpr char kDefaultCoordinator[] = "localhost:7070";

// A parsed command line.
struct Invocation {
  // "submit", "jobs", "describe", "logs", "cancel", "workers", "profile" or "help".
  std::string command;
  // For "help": the command to explain ("" for the overview).
  std::string help_topic;
  // --coordinator, --context, --ca, --token_file, --insecure ("" / false: not given).
  std::string coordinator;
  std::string context;
  std::string ca;
  std::string token_file;
  bool insecure = false;
  OutputFormat format = OutputFormat::kTable;
  // The single positional of describe/cancel (JOB).
  std::string job_id;
  SubmitArgs submit;
  LogsArgs logs;
  ProfileArgs profile;
};

// Parses `args` (argv without the program name). Usage errors are INVALID_ARGUMENT with a
// one-line message, e.g. "unknown flag --wiat for 'baton submit'".
absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args);

// The overview (`baton --help`) or one command's help with its flags and examples.
// An unknown `command` gives the overview.
std::string HelpText(const std::string& command = "");

// What RunCli takes from the process environment.
struct CliEnvironment {
  // $BATON_COORDINATOR ("" if unset).
  std::string coordinator_env;
  // Whether stdout is a terminal.
  bool stdout_is_tty = false;
  // $BATON_CONTEXT, $BATON_CONFIG, $BATON_TOKEN, $BATON_INSECURE, $XDG_CONFIG_HOME, $HOME.
  std::string context_env, config_env, token_env, insecure_env, xdg_config_home, home;
};

// Parses, then runs the command against the coordinator (client/config/connection.h:
// flags, else environment, else the config file's context, else localhost:7070). Returns
// the process exit code (0, 1, or 2 for usage errors).
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           const CliEnvironment& env);

}  // namespace baton::cli
