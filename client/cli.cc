#include "client/cli.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "common/spec/message_limits.h"
#include "common/version.h"

namespace baton::cli {
namespace {

// gRPC's message size limit of the CLI's channel (common/spec/message_limits.h).
grpc::ChannelArguments MessageSizeArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  return args;
}

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

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"coordinator", "", "HOST:PORT",
       absl::StrCat("Coordinator address. Default: $BATON_COORDINATOR, else the context's, "
                    "else ",
                    kDefaultCoordinator, ".")},
      {"context", "", "NAME",
       "Context of the config file ($BATON_CONFIG, else ~/.config/baton/config.yaml) to use: "
       "coordinator address, CA and token. Default: $BATON_CONTEXT, else its "
       "current_context."},
      {"ca", "", "FILE",
       "CA certificate (PEM) the coordinator's TLS certificate must chain to. Default: the "
       "context's."},
      {"token_file", "", "FILE",
       "File holding your bearer token. Default: $BATON_TOKEN (the token itself), else the "
       "context's."},
      {"insecure", "", "",
       "Plaintext instead of TLS ($BATON_INSECURE=1); only to a loopback coordinator."},
      {"output", "o", "FORMAT",
       "Output format: 'table' (default, for people), 'wide' (the table with more columns), "
       "'json' (protobuf JSON with snake_case field names and zero values, one document per "
       "command; `logs` prints one LogLine per line), 'yaml' (the same document as YAML) or "
       "'name' (one id per line, for scripts). Not every command has every format."},
      {"color", "", "WHEN",
       "Colour state words: 'auto' (default: when stdout is a terminal and $NO_COLOR is "
       "unset or empty), 'always' or 'never'."},
      {"help", "h", "", "Show help for baton or for a command."},
  };
  return *flags;
}

const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"submit",
       "FILE",
       1,
       "Submit a job described by a YAML file",
       "Reads the job file (YAML, one baton.v1.JobSpec; relative paths are resolved against\n"
       "the file's directory), applies --set overrides, submits it and prints the job id.\n"
       "The coordinator validates the spec (e.g. that trainer.data_dir holds the dataset).\n"
       "\n"
       "With --wait, watches the job until it ends: state changes are printed as lines and a\n"
       "progress line (step/total, loss, accuracy, samples/s, ETA, state) is redrawn in place\n"
       "on a terminal; when output is not a terminal it is printed as a plain line at most\n"
       "every 2 seconds. A broken watch is resumed where it stopped. At the end the result\n"
       "(state, steps, loss, accuracy, wall time) is printed; the exit status is 0 only if\n"
       "the job SUCCEEDED. Interrupting the watch (Ctrl-C) does not cancel the job.",
       {{"set", "", "PATH=VALUE",
         "Override a field before submitting; repeatable. VALUE is YAML: "
         "--set workers.min=2, --set trainer.hidden=[64,32], --set env.FOO=bar."},
        {"wait", "w", "", "Watch the job until it ends; exit 0 only if it SUCCEEDED."}},
       {"baton submit mnist.yaml",
        "baton submit mnist.yaml --set workers.min=1 --set trainer.lr=0.1 --wait",
        "JOB=$(baton submit job.yaml) && baton logs \"$JOB\" -f"}},
      {"jobs",
       "",
       0,
       "List jobs, newest first",
       "Columns: ID, NAME, STATE, WORKERS (workers in use / requested range), GEN\n"
       "(rendezvous generation), STEP (rank 0's latest step / budget.max_steps), AGE;\n"
       "-o wide adds OWNER, WORLD (ranks), MASTER (rendezvous address), LOSS and SAMPLES/S.",
       {{"state", "", "STATES",
         "Only jobs in these states, comma-separated or repeated: queued, rendezvous, "
         "running, restarting, succeeded, failed, cancelled (any case)."},
        {"limit", "", "N", "At most N jobs (the newest)."}},
       {"baton jobs", "baton jobs -o json", "baton jobs --state running,queued --limit 10 -o wide",
        "baton jobs --state failed -o name"}},
      {"describe",
       "JOB",
       1,
       "Show one job in detail",
       "Prints the job's spec summary, state and message, generation, rendezvous master\n"
       "address, ranks (RANK WORKER LOCAL PID EXIT), result and every event.",
       {},
       {"baton describe j-000007", "baton describe j-000007 -o json",
        "baton describe j-000007 -o yaml"}},
      {"logs",
       "JOB",
       1,
       "Print a job's process output",
       "Prints the lines the job's processes wrote to stdout/stderr. Without --rank every\n"
       "line is prefixed with \"[rank N] \". With -f, keeps printing new lines until the job\n"
       "ends, resuming where it stopped if the connection breaks.",
       {{"rank", "", "N", "Only rank N's output (no prefix)."},
        {"follow", "f", "", "Keep streaming until the job is finished."},
        {"tail", "", "N", "Only the last N lines written so far (then, with -f, every new one)."},
        {"since", "", "WHEN",
         "Only lines written since WHEN: a duration ago (10m, 2h, 1h30m) or an RFC 3339 "
         "time (2024-05-01T12:00:00Z)."},
        {"timestamps", "", "", "Prefix each line with the time it was written (RFC 3339, UTC)."}},
       {"baton logs j-000007", "baton logs j-000007 --rank 0 -f",
        "baton logs j-000007 --tail 20 -f", "baton logs j-000007 --since 10m --timestamps"}},
      {"cancel",
       "JOB",
       1,
       "Cancel a job",
       "Stops the job's processes (SIGTERM, then SIGKILL after a grace period) and marks it\n"
       "CANCELLED. Cancelling a finished job is an error.",
       {},
       {"baton cancel j-000007"}},
      {"workers",
       "",
       0,
       "List the cluster's workers",
       "Columns: ID, HOST, SLOTS, USED (slots in use), STATE (READY or LOST),\n"
       "LAST-HEARTBEAT, JOBS (jobs with processes on the worker).",
       {},
       {"baton workers", "baton --coordinator 10.0.0.1:7070 workers"}},
      {"profile",
       "JOB",
       1,
       "Record a step profile of a running job",
       "Asks every rank of a RUNNING job of the built-in trainer (or only --rank) to record\n"
       "its next --steps optimizer steps (each phase: data, forward, backward, the all-reduce\n"
       "of each gradient bucket, optimizer, checkpoint saves) and writes their Chrome traces\n"
       "merged into one file: one process per rank (\"rank R\") on one wall-clock time axis,\n"
       "so the ranks' steps and collectives line up. Open it in https://ui.perfetto.dev or\n"
       "chrome://tracing. The ranks go on training meanwhile; the command returns once every\n"
       "rank sent its trace, or fails after --timeout naming the ranks that did not. Command\n"
       "jobs cannot be profiled; a job must have made its first step.",
       {{"steps", "", "N", "Optimizer steps to record, 1..1000 (default 5)."},
        {"rank", "", "R", "Only rank R (default: every rank)."},
        {"out", "", "FILE", "Where to write the merged trace (default: JOB-profile.json)."},
        {"timeout", "", "DURATION",
         "How long to wait for every rank's trace, e.g. 30s or 5m; at most 1h (default: 2m, "
         "longer for slow steps)."}},
       {"baton profile j-000007", "baton profile j-000007 --steps 20 --rank 0 --out rank0.json"}},
      {"wait",
       "JOB",
       1,
       "Wait until a job meets a condition",
       "Watches the job until --for holds and prints its state line (\"j-000007 SUCCEEDED\").\n"
       "A broken watch is resumed where it stopped. Exit status: 0 the condition holds; 3 the\n"
       "job ended in a state that cannot meet it (e.g. FAILED for --for succeeded, or any end\n"
       "before RUNNING for --for running); 5 --timeout ran out; 4 the coordinator could not be\n"
       "reached.",
       {{"for", "", "CONDITION",
         "succeeded (default), failed, cancelled, ended (any of the three) or running."},
        {"timeout", "", "DURATION", "Give up after this long, e.g. 30s or 10m (default: never)."}},
       {"baton wait j-000007", "baton wait j-000007 --for running --timeout 5m",
        "baton wait j-000007 --for ended -o json"}},
      {"version",
       "",
       0,
       "Print the client's and the coordinator's versions",
       "Prints the client's release, the coordinator's release and the worker protocol it\n"
       "speaks. If the coordinator cannot be reached, prints the client's and exits 4.",
       {},
       {"baton version", "baton version -o json"}},
      {"completion",
       "SHELL",
       1,
       "Print a shell completion script (bash or zsh)",
       "Completes commands, flags, output formats and job ids (with `baton jobs -o name`).\n"
       "Load it in the current shell (in ~/.bashrc or, after compinit, ~/.zshrc), or install\n"
       "it for every bash:\n"
       "  source <(baton completion bash)\n"
       "  source <(baton completion zsh)\n"
       "  baton completion bash > /etc/bash_completion.d/baton",
       {},
       {"baton completion bash", "baton completion zsh"}},
      {"help", "[COMMAND]", -1, "Explain baton or one command", "", {}, {"baton help submit"}},
  };
  return *commands;
}

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, absl::string_view name,
                         bool is_short) {
  for (const FlagSpec& f : flags) {
    if ((is_short ? f.short_name : f.name) == name && !name.empty()) return &f;
  }
  return nullptr;
}

std::string FlagSynopsis(const FlagSpec& f) {
  std::string s = f.short_name.empty() ? "    " : absl::StrCat("-", f.short_name, ", ");
  absl::StrAppend(&s, "--", f.name);
  if (!f.value_name.empty()) absl::StrAppend(&s, " ", f.value_name);
  return s;
}

// "  -o, --output FORMAT         Output format: ..." with the help wrapped at 88 columns.
std::string RenderFlags(const std::vector<FlagSpec>& flags) {
  constexpr size_t kHelpColumn = 31;
  constexpr size_t kWidth = 88;
  std::string out;
  for (const FlagSpec& f : flags) {
    std::string line = absl::StrFormat("  %-28s ", FlagSynopsis(f));
    for (absl::string_view word : absl::StrSplit(f.help, ' ', absl::SkipEmpty())) {
      if (line.size() > kHelpColumn && line.size() + 1 + word.size() > kWidth) {
        absl::StrAppend(&out, line, "\n");
        line = std::string(kHelpColumn, ' ');
      } else if (line.size() > kHelpColumn) {
        line.push_back(' ');
      }
      absl::StrAppend(&line, word);
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

absl::Status UsageError(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

std::string CommandRef(const std::string& command) {
  return command.empty() ? "'baton'" : absl::StrCat("'baton ", command, "'");
}

struct NamedState {
  const char* name;
  baton::v1::JobState state;
};
constexpr NamedState kStateNames[] = {
    {"queued", baton::v1::JOB_STATE_QUEUED},       {"rendezvous", baton::v1::JOB_STATE_RENDEZVOUS},
    {"running", baton::v1::JOB_STATE_RUNNING},     {"restarting", baton::v1::JOB_STATE_RESTARTING},
    {"succeeded", baton::v1::JOB_STATE_SUCCEEDED}, {"failed", baton::v1::JOB_STATE_FAILED},
    {"cancelled", baton::v1::JOB_STATE_CANCELLED},
};

// --state running,QUEUED -> the JobStates, appended to `states`.
absl::Status ParseStates(const std::string& value, std::vector<baton::v1::JobState>& states) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
    const NamedState* found = nullptr;
    for (const NamedState& s : kStateNames) {
      if (name == s.name) found = &s;
    }
    if (found == nullptr) {
      std::vector<std::string> allowed;
      for (const NamedState& s : kStateNames) allowed.push_back(s.name);
      return UsageError(absl::StrCat("--state: unknown state '", part,
                                     "'; allowed: ", absl::StrJoin(allowed, ", ")));
    }
    if (std::find(states.begin(), states.end(), found->state) == states.end()) {
      states.push_back(found->state);
    }
  }
  return absl::OkStatus();
}

struct NamedFormat {
  const char* name;
  OutputFormat format;
};
constexpr NamedFormat kFormats[] = {{"table", OutputFormat::kTable},
                                    {"wide", OutputFormat::kWide},
                                    {"json", OutputFormat::kJson},
                                    {"yaml", OutputFormat::kYaml},
                                    {"name", OutputFormat::kName}};

std::string FormatName(OutputFormat format) {
  for (const NamedFormat& f : kFormats) {
    if (f.format == format) return f.name;
  }
  return "?";
}

// The -o formats `command` prints; empty: it ignores -o.
std::vector<OutputFormat> SupportedFormats(const std::string& command) {
  using F = OutputFormat;
  if (command == "logs") return {F::kTable, F::kJson};
  if (command == "profile" || command == "version") return {F::kTable, F::kJson, F::kYaml};
  if (command == "help" || command == "completion") return {};
  return {F::kTable, F::kWide, F::kJson, F::kYaml, F::kName};
}

// Stores one flag's value into `inv`; `command` is null before the command word.
absl::Status ApplyFlag(const FlagSpec& flag, const std::string& value, const CommandSpec* command,
                       Invocation& inv, bool& help) {
  if (flag.name == "help") {
    help = true;
  } else if (flag.name == "coordinator") {
    if (value.empty()) return UsageError("--coordinator needs HOST:PORT");
    inv.coordinator = value;
  } else if (flag.name == "context" || flag.name == "ca" || flag.name == "token_file") {
    if (value.empty()) return UsageError(absl::StrCat("--", flag.name, " needs a value"));
    (flag.name == "context" ? inv.context : flag.name == "ca" ? inv.ca : inv.token_file) = value;
  } else if (flag.name == "insecure") {
    inv.insecure = true;
  } else if (flag.name == "output") {
    const NamedFormat* found = nullptr;
    for (const NamedFormat& f : kFormats) {
      if (value == f.name) found = &f;
    }
    if (found == nullptr) {
      return UsageError(
          absl::StrCat("-o/--output must be table, wide, json, yaml or name, not '", value, "'"));
    }
    inv.format = found->format;
  } else if (flag.name == "color") {
    if (value == "auto") {
      inv.color = ColorMode::kAuto;
    } else if (value == "always") {
      inv.color = ColorMode::kAlways;
    } else if (value == "never") {
      inv.color = ColorMode::kNever;
    } else {
      return UsageError(absl::StrCat("--color must be auto, always or never, not '", value, "'"));
    }
  } else if (flag.name == "state") {
    return ParseStates(value, inv.jobs.states);
  } else if (flag.name == "limit") {
    int limit;
    if (!absl::SimpleAtoi(value, &limit) || limit < 1) {
      return UsageError(absl::StrCat("--limit must be a number >= 1, not '", value, "'"));
    }
    inv.jobs.limit = limit;
  } else if (flag.name == "tail") {
    int tail;
    if (!absl::SimpleAtoi(value, &tail) || tail < 1 || tail > 100000) {
      return UsageError(absl::StrCat("--tail must be in [1, 100000], not '", value, "'"));
    }
    inv.logs.tail = tail;
  } else if (flag.name == "since") {
    absl::Duration ago;
    absl::Time when;
    std::string error;
    if (absl::ParseDuration(value, &ago) && ago > absl::ZeroDuration()) {
      inv.logs.since_ago = ago;
    } else if (absl::ParseTime(absl::RFC3339_full, value, &when, &error)) {
      inv.logs.since_time = when;
    } else {
      return UsageError(
          absl::StrCat("--since must be a duration such as 10m or 2h, or an RFC 3339 time such as "
                       "2024-05-01T12:00:00Z, not '",
                       value, "'"));
    }
  } else if (flag.name == "timestamps") {
    inv.logs.timestamps = true;
  } else if (flag.name == "for") {
    static constexpr std::pair<const char*, WaitCondition> kConditions[] = {
        {"succeeded", WaitCondition::kSucceeded},
        {"failed", WaitCondition::kFailed},
        {"cancelled", WaitCondition::kCancelled},
        {"ended", WaitCondition::kEnded},
        {"running", WaitCondition::kRunning}};
    const std::string name = absl::AsciiStrToLower(value);
    bool found = false;
    for (const auto& [n, condition] : kConditions) {
      if (name == n) {
        inv.wait.condition = condition;
        found = true;
      }
    }
    if (!found) {
      return UsageError(absl::StrCat("--for: unknown condition '", value,
                                     "'; allowed: succeeded, failed, cancelled, ended, running"));
    }
  } else if (flag.name == "set") {
    if (value.find('=') == std::string::npos) {
      return UsageError(absl::StrCat("--set needs PATH=VALUE (e.g. --set workers.min=2), not '",
                                     value, "'"));
    }
    inv.submit.overrides.push_back(value);
  } else if (flag.name == "wait") {
    inv.submit.wait = true;
  } else if (flag.name == "rank") {
    int rank;
    if (!absl::SimpleAtoi(value, &rank) || rank < 0) {
      return UsageError(absl::StrCat("--rank must be a rank number >= 0, not '", value, "'"));
    }
    inv.logs.rank = rank;
    inv.profile.rank = rank;
  } else if (flag.name == "steps") {
    int64_t steps;
    if (!absl::SimpleAtoi(value, &steps) || steps < 1 || steps > 1000) {
      return UsageError(absl::StrCat("--steps must be in [1, 1000], not '", value, "'"));
    }
    inv.profile.steps = steps;
  } else if (flag.name == "out") {
    if (value.empty()) return UsageError("--out needs a FILE");
    inv.profile.out = value;
  } else if (flag.name == "timeout" && command != nullptr && command->name == "wait") {
    absl::Duration timeout;
    if (!absl::ParseDuration(value, &timeout) || timeout <= absl::ZeroDuration()) {
      return UsageError(
          absl::StrCat("--timeout must be a duration > 0 such as 30s or 10m, not '", value, "'"));
    }
    inv.wait.timeout = timeout;
  } else if (flag.name == "timeout") {
    absl::Duration timeout;
    if (!absl::ParseDuration(value, &timeout) || timeout <= absl::ZeroDuration() ||
        timeout > absl::Hours(1)) {
      return UsageError(absl::StrCat(
          "--timeout must be a duration in (0, 1h] such as 30s or 5m, not '", value, "'"));
    }
    inv.profile.timeout = timeout;
  } else if (flag.name == "follow") {
    inv.logs.follow = true;
  }
  return absl::OkStatus();
}

void SilenceGrpcLogging() {
  // gRPC's own log lines (connection failures, ...) are debug output: the CLI reports
  // errors itself, in one line.
  gpr_set_log_function([](gpr_log_func_args*) {});
}

ConnectionInputs ConnectionInputsOf(const Invocation& inv, const CliEnvironment& env) {
  ConnectionInputs in;
  in.coordinator_flag = inv.coordinator;
  in.context_flag = inv.context;
  in.ca_flag = inv.ca;
  in.token_file_flag = inv.token_file;
  in.insecure_flag = inv.insecure;
  in.coordinator_env = env.coordinator_env;
  in.context_env = env.context_env;
  in.config_env = env.config_env;
  in.token_env = env.token_env;
  in.insecure_env = env.insecure_env;
  in.xdg_config_home = env.xdg_config_home;
  in.home = env.home;
  return in;
}

// What the parsed tokens ask for: help, or `command` with its positional arguments.
absl::StatusOr<Invocation> CompleteInvocation(const CommandSpec* command,
                                              const std::vector<std::string>& positionals,
                                              bool help, Invocation inv) {
  if (command != nullptr && command->name == "help") {
    if (positionals.size() > 1) return UsageError("'baton help' takes at most one command");
    inv.command = "help";
    if (!positionals.empty()) {
      if (FindCommand(positionals[0]) == nullptr) {
        return UsageError(absl::StrCat("unknown command '", positionals[0], "'"));
      }
      inv.help_topic = positionals[0];
    }
    return inv;
  }
  if (help) {
    inv.command = "help";
    inv.help_topic = command != nullptr ? command->name : "";
    return inv;
  }
  if (command == nullptr) return UsageError("missing command");
  inv.command = command->name;
  if (static_cast<int>(positionals.size()) != command->positionals) {
    if (command->positionals == 0) {
      return UsageError(absl::StrCat(CommandRef(command->name), " takes no arguments, got '",
                                     positionals[0], "'"));
    }
    return UsageError(absl::StrCat(CommandRef(command->name), " needs ", command->args,
                                   positionals.empty() ? "" : " (exactly one)"));
  }
  if (command->name == "submit") inv.submit.file = positionals[0];
  if (command->name == "logs") inv.logs.job_id = positionals[0];
  if (command->name == "profile") inv.profile.job_id = positionals[0];
  if (command->name == "describe" || command->name == "cancel") inv.job_id = positionals[0];
  if (command->name == "wait") inv.wait.job_id = positionals[0];
  if (command->name == "completion") {
    if (positionals[0] != "bash" && positionals[0] != "zsh") {
      return UsageError(
          absl::StrCat("'baton completion' needs bash or zsh, not '", positionals[0], "'"));
    }
    inv.shell = positionals[0];
  }
  const std::vector<OutputFormat> formats = SupportedFormats(command->name);
  if (!formats.empty() && std::find(formats.begin(), formats.end(), inv.format) == formats.end()) {
    std::vector<std::string> names;
    for (OutputFormat f : formats) names.push_back(FormatName(f));
    return UsageError(absl::StrCat("-o ", FormatName(inv.format), " is not supported by ",
                                   CommandRef(command->name), " (use ", absl::StrJoin(names, ", "),
                                   ")"));
  }
  return inv;
}

}  // namespace

absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  const CommandSpec* command = nullptr;
  std::vector<std::string> positionals;
  bool help = false;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (!flags_done && tok == "--") {
      flags_done = true;
      continue;
    }
    const bool is_flag = !flags_done && tok.size() > 1 && tok[0] == '-';
    if (!is_flag) {
      if (command == nullptr) {
        command = FindCommand(tok);
        if (command == nullptr) {
          return UsageError(absl::StrCat("unknown command '", tok, "'"));
        }
      } else {
        positionals.push_back(tok);
      }
      continue;
    }
    const bool is_long = tok.rfind("--", 0) == 0;
    std::string name = tok.substr(is_long ? 2 : 1);
    std::string value;
    const size_t eq = name.find('=');
    const bool has_inline_value = eq != std::string::npos;
    if (has_inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* flag = FindFlag(GlobalFlags(), name, !is_long);
    if (flag == nullptr && command != nullptr) flag = FindFlag(command->flags, name, !is_long);
    if (flag == nullptr) {
      return UsageError(absl::StrCat("unknown flag ", is_long ? "--" : "-", name, " for ",
                                     CommandRef(command != nullptr ? command->name : "")));
    }
    if (flag->value_name.empty()) {
      if (has_inline_value) return UsageError(absl::StrCat("--", flag->name, " takes no value"));
    } else if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat("--", flag->name, " needs a value (", flag->value_name, ")"));
      }
      value = args[++i];
    }
    if (absl::Status s = ApplyFlag(*flag, value, command, inv, help); !s.ok()) return s;
  }

  return CompleteInvocation(command, positionals, help, std::move(inv));
}

std::string HelpText(const std::string& command_name) {
  const CommandSpec* command = FindCommand(command_name);
  if (command == nullptr || command->name == "help") {
    std::string out =
        "baton: submit and watch elastic training jobs on a Baton cluster.\n"
        "\n"
        "Usage: baton [--context NAME] [--coordinator HOST:PORT] [-o FORMAT] COMMAND [ARGS]\n"
        "             [FLAGS]\n"
        "\n"
        "Commands:\n";
    for (const CommandSpec& c : Commands()) {
      absl::StrAppend(&out, absl::StrFormat("  %-11s %s\n", c.name, c.summary));
    }
    absl::StrAppend(&out, "\nGlobal flags (anywhere on the line):\n", RenderFlags(GlobalFlags()),
                    "\nExamples:\n");
    for (const std::string& e : HelpExamples("")) absl::StrAppend(&out, "  ", e, "\n");
    absl::StrAppend(&out,
                    "\nRun 'baton help COMMAND' for a command's flags and examples.\n"
                    "\nExit status:\n"
                    "  0  success (wait: the condition holds)\n"
                    "  1  the command failed (an error from the coordinator, including a\n"
                    "     rejected token or a denied permission; an invalid job file)\n"
                    "  2  usage error\n"
                    "  3  the job failed or was cancelled (submit --wait), or ended without\n"
                    "     meeting wait --for\n"
                    "  4  the coordinator could not be reached or did not answer\n"
                    "  5  wait --timeout ran out\n");
    return out;
  }
  std::string out = absl::StrCat("Usage: baton ", command->name,
                                  command->args.empty() ? "" : " " + command->args,
                                  command->flags.empty() ? "" : " [FLAGS]", "\n\n",
                                  command->summary, ".\n\n", command->description, "\n");
  if (!command->flags.empty()) absl::StrAppend(&out, "\nFlags:\n", RenderFlags(command->flags));
  absl::StrAppend(&out, "\nGlobal flags:\n", RenderFlags(GlobalFlags()), "\nExamples:\n");
  for (const std::string& e : command->examples) absl::StrAppend(&out, "  ", e, "\n");
  return out;
}

std::vector<std::string> HelpExamples(const std::string& command_name) {
  const CommandSpec* command = FindCommand(command_name);
  if (command == nullptr || command->name == "help") {
    return {
        "baton submit mnist.yaml --wait",    "baton jobs --state running,queued",
        "baton describe j-000007",           "baton wait j-000007 --timeout 1h",
        "baton profile j-000007 --steps 10", "BATON_COORDINATOR=head:7070 baton workers -o json",
        "source <(baton completion bash)"};
  }
  return command->examples;
}

namespace {

// Words of a bash `case` pattern: "--a|--b|-c".
std::string CasePattern(const std::vector<std::string>& words) { return absl::StrJoin(words, "|"); }

std::vector<std::string> FlagWords(const std::vector<FlagSpec>& flags, bool with_value) {
  std::vector<std::string> words;
  for (const FlagSpec& f : flags) {
    if (with_value != !f.value_name.empty()) continue;
    words.push_back("--" + f.name);
    if (!f.short_name.empty()) words.push_back("-" + f.short_name);
  }
  return words;
}

std::string BashCompletion() {
  std::vector<std::string> commands;
  std::vector<std::string> value_flags = FlagWords(GlobalFlags(), true);
  for (const CommandSpec& c : Commands()) {
    commands.push_back(c.name);
    for (const std::string& w : FlagWords(c.flags, true)) {
      if (std::find(value_flags.begin(), value_flags.end(), w) == value_flags.end()) {
        value_flags.push_back(w);
      }
    }
  }
  std::vector<std::string> global_flags;
  for (const FlagSpec& f : GlobalFlags()) global_flags.push_back("--" + f.name);
  std::string per_command;
  std::string job_commands;
  for (const CommandSpec& c : Commands()) {
    std::vector<std::string> flags;
    for (const FlagSpec& f : c.flags) flags.push_back("--" + f.name);
    if (!flags.empty()) {
      absl::StrAppend(&per_command, "      ", c.name, ") flags=\"", absl::StrJoin(flags, " "),
                      " $flags\" ;;\n");
    }
    if (c.args == "JOB") absl::StrAppend(&job_commands, job_commands.empty() ? "" : "|", c.name);
  }
  std::vector<std::string> state_names;
  for (const NamedState& st : kStateNames) state_names.push_back(st.name);
  std::vector<std::string> format_names;
  for (const NamedFormat& f : kFormats) format_names.push_back(f.name);

  std::string out = absl::StrCat(
      "# bash completion for baton (generated by `baton completion bash`).\n"
      "#   source <(baton completion bash)\n"
      "# Words split on purpose (COMPREPLY=($(compgen ...))); value flags listed twice on "
      "purpose.\n"
      "# shellcheck disable=SC2207,SC2221,SC2222\n"
      "\n"
      "# _baton_job_ids BATON [FLAG...]: the ids of the jobs, from `BATON FLAG... jobs -o name`\n"
      "# (BATON: the word the line starts with; an alias is expanded).\n"
      "_baton_job_ids() {\n"
      "  local bin=\"$1\"\n"
      "  shift\n"
      "  if [[ -n \"${BASH_ALIASES[$bin]:-}\" ]]; then\n"
      "    # shellcheck disable=SC2086 # an alias may hold flags\n"
      "    command ${BASH_ALIASES[$bin]} \"$@\" jobs -o name --color never 2>/dev/null\n"
      "  else\n"
      "    command \"$bin\" \"$@\" jobs -o name --color never 2>/dev/null\n"
      "  fi\n"
      "}\n"
      "\n"
      "_baton() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\"\n"
      "  ((COMP_CWORD > 0)) && prev=\"${COMP_WORDS[COMP_CWORD - 1]}\"\n"
      "  local cmd=\"\" w i\n"
      "  local -a conn=()\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    case \"$w\" in\n"
      "      --coordinator|--context|--ca|--token_file)\n"
      "        conn+=(\"$w\" \"${COMP_WORDS[i + 1]}\"); ((i++)) ;;\n"
      "      --coordinator=*|--context=*|--ca=*|--token_file=*|--insecure) conn+=(\"$w\") ;;\n"
      "      ",
      CasePattern(value_flags),
      ") ((i++)) ;;\n"
      "      -*) ;;\n"
      "      *) [[ -z $cmd ]] && cmd=\"$w\" ;;\n"
      "    esac\n"
      "  done\n"
      "  case \"$prev\" in\n"
      "    -o|--output) COMPREPLY=($(compgen -W \"",
      absl::StrJoin(format_names, " "),
      "\" -- \"$cur\")); return ;;\n"
      "    --color) COMPREPLY=($(compgen -W \"auto always never\" -- \"$cur\")); return ;;\n"
      "    --for) COMPREPLY=($(compgen -W \"succeeded failed cancelled ended running\" -- "
      "\"$cur\")); return ;;\n"
      "    --state) COMPREPLY=($(compgen -W \"",
      absl::StrJoin(state_names, " "),
      "\" -- \"$cur\")); return ;;\n"
      "    --ca|--token_file|--out) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
      "    ",
      CasePattern(value_flags),
      ") COMPREPLY=(); return ;;\n"
      "  esac\n"
      "  local flags=\"",
      absl::StrJoin(global_flags, " "),
      "\"\n"
      "  if [[ -z $cmd ]]; then\n"
      "    if [[ $cur == -* ]]; then\n"
      "      COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
      "    else\n"
      "      COMPREPLY=($(compgen -W \"",
      absl::StrJoin(commands, " "),
      "\" -- \"$cur\"))\n"
      "    fi\n"
      "    return\n"
      "  fi\n"
      "  if [[ $cur == -* ]]; then\n"
      "    case \"$cmd\" in\n",
      per_command,
      "    esac\n"
      "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"$cmd\" in\n"
      "    ",
      job_commands,
      ") COMPREPLY=($(compgen -W \"$(_baton_job_ids \"${COMP_WORDS[0]}\" \"${conn[@]}\")\" -- "
      "\"$cur\")) ;;\n"
      "    submit) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
      "    completion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")) ;;\n"
      "    help) COMPREPLY=($(compgen -W \"",
      absl::StrJoin(commands, " "),
      "\" -- \"$cur\")) ;;\n"
      "    *) COMPREPLY=() ;;\n"
      "  esac\n"
      "}\n"
      "\n"
      "complete -F _baton baton\n");
  return out;
}

}  // namespace

std::string CompletionScript(const std::string& shell) {
  if (shell == "bash") return BashCompletion();
  if (shell == "zsh") {
    // zsh runs the bash function through its bashcompinit emulation.
    return absl::StrCat(
        "# zsh completion for baton (generated by `baton completion zsh`): the bash\n"
        "# completion through bashcompinit. In ~/.zshrc, after compinit:\n"
        "#   source <(baton completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n"
        "\n",
        BashCompletion());
  }
  return "";
}

bool UseColor(ColorMode mode, const CliEnvironment& env) {
  switch (mode) {
    case ColorMode::kAlways:
      return true;
    case ColorMode::kNever:
      return false;
    case ColorMode::kAuto:
      break;
  }
  return env.stdout_is_tty && env.no_color.empty();
}

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           const CliEnvironment& env) {
  absl::StatusOr<Invocation> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    err << "baton: " << parsed.status().message() << "\n"
        << "Run 'baton help' for usage.\n";
    return kExitUsage;
  }
  const Invocation& inv = *parsed;
  if (inv.command == "help") {
    out << HelpText(inv.help_topic);
    return kExitOk;
  }
  if (inv.command == "completion") {
    out << CompletionScript(inv.shell);
    return kExitOk;
  }

  SilenceGrpcLogging();
  CommandContext ctx;
  ctx.out = &out;
  ctx.err = &err;
  absl::StatusOr<Connection> conn = ResolveConnection(ConnectionInputsOf(inv, env),
                                                     kDefaultCoordinator);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      conn.ok() ? OpenChannel(*conn, MessageSizeArgs())
                : absl::StatusOr<std::shared_ptr<grpc::Channel>>(conn.status());
  if (!channel.ok()) {
    if (inv.command == "version" && inv.format == OutputFormat::kTable) {
      out << "Client: " << kVersion << "\n";
    }
    err << "baton: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  ctx.coordinator = conn->coordinator;
  ctx.format = inv.format;
  ctx.tty = env.stdout_is_tty;
  ctx.color = UseColor(inv.color, env);
  std::unique_ptr<baton::v1::JobService::Stub> jobs = baton::v1::JobService::NewStub(*channel);
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster =
      baton::v1::ClusterService::NewStub(*channel);
  ctx.jobs = jobs.get();
  ctx.cluster = cluster.get();

  if (inv.command == "submit") return Submit(ctx, inv.submit);
  if (inv.command == "jobs") return ListJobs(ctx, inv.jobs);
  if (inv.command == "describe") return Describe(ctx, inv.job_id);
  if (inv.command == "logs") return Logs(ctx, inv.logs);
  if (inv.command == "cancel") return Cancel(ctx, inv.job_id);
  if (inv.command == "workers") return ListWorkers(ctx);
  if (inv.command == "profile") return Profile(ctx, inv.profile);
  if (inv.command == "wait") return Wait(ctx, inv.wait);
  if (inv.command == "version") return Version(ctx);
  err << "baton: unknown command '" << inv.command << "'\n";
  return kExitUsage;
}

}  // namespace baton::cli
