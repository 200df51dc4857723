#pragma once

// The `baton` command line: a small argument parser (abseil flags has no subcommands),
// help texts, and RunCli, which wires a parsed invocation to the command functions in
// client/commands.h.
//
// Grammar:  baton [GLOBAL FLAGS] COMMAND [ARGS and FLAGS in any order]
//   * flags are `--name VALUE`, `--name=VALUE` or a short alias (`-o json`, `-f`);
//   * global flags (--coordinator, --context, --ca, --token_file, --insecure, -o/--output,
//     --color, -h/--help) may appear anywhere, command flags only after the command; `--`
//     ends flags;
//   * `baton help [COMMAND]`, `baton --help` and `baton COMMAND --help` print help to stdout
//     and exit 0; usage errors print one line plus a hint to stderr and exit 2 (the exit
//     codes are listed in client/commands.h).

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"
#include "client/config/connection.h"

namespace baton::cli {

inline constexpr char kDefaultCoordinator[] = "localhost:7070";

// --color: colour state words always, never, or (auto) when stdout is a terminal and
// $NO_COLOR is unset or empty.
enum class ColorMode { kAuto, kAlways, kNever };

// A parsed command line.
struct Invocation {
  // "submit", "jobs", "describe", "logs", "cancel", "workers", "queues", "cordon",
  // "uncordon", "profile", "wait", "version", "completion" or "help".
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
  ColorMode color = ColorMode::kAuto;
  // The single positional of describe/cancel (JOB).
  std::string job_id;
  SubmitArgs submit;
  ListJobsArgs jobs;
  LogsArgs logs;
  ProfileArgs profile;
  WaitArgs wait;
  CordonArgs cordon;  // cordon, uncordon
  // The positional of `completion`: "bash" or "zsh".
  std::string shell;
};

// Parses `args` (argv without the program name). Usage errors are INVALID_ARGUMENT with a
// one-line message, e.g. "unknown flag --wiat for 'baton submit'".
absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args);

// The overview (`baton --help`) or one command's help with its flags and examples.
// An unknown `command` gives the overview.
std::string HelpText(const std::string& command = "");

// The example invocations of `command`'s help ("" for the overview's), one shell line
// each, as HelpText prints them.
std::vector<std::string> HelpExamples(const std::string& command = "");

// What RunCli takes from the process environment.
struct CliEnvironment {
  // $BATON_COORDINATOR ("" if unset).
  std::string coordinator_env;
  // Whether stdout is a terminal.
  bool stdout_is_tty = false;
  // $NO_COLOR ("" if unset): non-empty turns colour off unless --color=always.
  std::string no_color;
  // $BATON_CONTEXT, $BATON_CONFIG, $BATON_TOKEN, $BATON_INSECURE, $XDG_CONFIG_HOME, $HOME.
  std::string context_env, config_env, token_env, insecure_env, xdg_config_home, home;
};

// Whether to colour state words: --color always, never, or (auto) when stdout is a
// terminal and $NO_COLOR is empty.
bool UseColor(ColorMode mode, const CliEnvironment& env);

// Parses, then runs the command against the coordinator (client/config/connection.h:
// flags, else environment, else the config file's context, else localhost:7070). Returns
// the process exit code (kExit* of client/commands.h).
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           const CliEnvironment& env);

}  // namespace baton::cli
