#include "client/cli.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
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
#include "client/command_table.h"
#include "client/completion.h"
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

absl::Status UsageError(const std::string& message) { return absl::InvalidArgumentError(message); }

std::string CommandRef(const std::string& command) {
  return command.empty() ? "'baton'" : absl::StrCat("'baton ", command, "'");
}

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

std::string FormatName(OutputFormat format) {
  for (const NamedFormat& f : kFormats) {
    if (f.format == format) return f.name;
  }
  return "?";
}

// -o/--output's value into `format`.
absl::Status ParseOutputFormat(const std::string& value, OutputFormat& format) {
  for (const NamedFormat& f : kFormats) {
    if (value == f.name) {
      format = f.format;
      return absl::OkStatus();
    }
  }
  return UsageError(
      absl::StrCat("-o/--output must be table, wide, json, yaml or name, not '", value, "'"));
}

// --color's value into `mode`.
absl::Status ParseColorMode(const std::string& value, ColorMode& mode) {
  if (value == "auto") {
    mode = ColorMode::kAuto;
  } else if (value == "always") {
    mode = ColorMode::kAlways;
  } else if (value == "never") {
    mode = ColorMode::kNever;
  } else {
    return UsageError(absl::StrCat("--color must be auto, always or never, not '", value, "'"));
  }
  return absl::OkStatus();
}

// --since's value: a duration ago (logs.since_ago) or an RFC 3339 time (logs.since_time).
absl::Status ParseSince(const std::string& value, LogsArgs& logs) {
  absl::Duration ago;
  absl::Time when;
  std::string error;
  if (absl::ParseDuration(value, &ago) && ago > absl::ZeroDuration()) {
    logs.since_ago = ago;
  } else if (absl::ParseTime(absl::RFC3339_full, value, &when, &error)) {
    logs.since_time = when;
  } else {
    return UsageError(
        absl::StrCat("--since must be a duration such as 10m or 2h, or an RFC 3339 time such as "
                     "2024-05-01T12:00:00Z, not '",
                     value, "'"));
  }
  return absl::OkStatus();
}

// --for's value (any case) into `condition`.
absl::Status ParseWaitCondition(const std::string& value, WaitCondition& condition) {
  static constexpr std::pair<const char*, WaitCondition> kConditions[] = {
      {"succeeded", WaitCondition::kSucceeded},
      {"failed", WaitCondition::kFailed},
      {"cancelled", WaitCondition::kCancelled},
      {"ended", WaitCondition::kEnded},
      {"running", WaitCondition::kRunning}};
  const std::string name = absl::AsciiStrToLower(value);
  for (const auto& [n, c] : kConditions) {
    if (name == n) {
      condition = c;
      return absl::OkStatus();
    }
  }
  return UsageError(absl::StrCat("--for: unknown condition '", value,
                                 "'; allowed: succeeded, failed, cancelled, ended, running"));
}

// An integer flag's value in [lo, hi] into `out`; false (and `out` untouched) if it is not
// one.
template <typename T>
bool ParseIntIn(const std::string& value, T lo, T hi, T& out) {
  T parsed;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < lo || parsed > hi) return false;
  out = parsed;
  return true;
}

// A duration flag's value in (0, max] into `out`; false (and `out` untouched) if it is not
// one.
bool ParseDurationUpTo(const std::string& value, absl::Duration max, absl::Duration& out) {
  absl::Duration parsed;
  if (!absl::ParseDuration(value, &parsed) || parsed <= absl::ZeroDuration() || parsed > max) {
    return false;
  }
  out = parsed;
  return true;
}

// --coordinator, --context, --ca, --token_file (each needs a value) and --insecure.
absl::Status ApplyConnectionFlag(const std::string& name, const std::string& value,
                                 Invocation& inv) {
  if (name == "insecure") {
    inv.insecure = true;
  } else if (name == "coordinator") {
    if (value.empty()) {
      return UsageError("--coordinator needs HOST:PORT (or several, comma-separated)");
    }
    inv.coordinator = value;
  } else {
    if (value.empty()) return UsageError(absl::StrCat("--", name, " needs a value"));
    (name == "context" ? inv.context : name == "ca" ? inv.ca : inv.token_file) = value;
  }
  return absl::OkStatus();
}

// Stores one flag's value into `inv`; `command` is null before the command word.
absl::Status ApplyFlag(const FlagSpec& flag, const std::string& value, const CommandSpec* command,
                       Invocation& inv, bool& help) {
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  const std::string& name = flag.name;
  if (name == "help") {
    help = true;
  } else if (name == "coordinator" || name == "context" || name == "ca" || name == "token_file" ||
             name == "insecure") {
    return ApplyConnectionFlag(name, value, inv);
  } else if (name == "output") {
    return ParseOutputFormat(value, inv.format);
  } else if (name == "color") {
    return ParseColorMode(value, inv.color);
  } else if (name == "state") {
    return ParseStates(value, inv.jobs.states);
  } else if (name == "limit") {
    if (!ParseIntIn(value, 1, kMaxInt, inv.jobs.limit)) {
      return UsageError(absl::StrCat("--limit must be a number >= 1, not '", value, "'"));
    }
  } else if (name == "tail") {
    if (!ParseIntIn(value, 1, 100000, inv.logs.tail)) {
      return UsageError(absl::StrCat("--tail must be in [1, 100000], not '", value, "'"));
    }
  } else if (name == "since") {
    return ParseSince(value, inv.logs);
  } else if (name == "timestamps") {
    inv.logs.timestamps = true;
  } else if (name == "for") {
    return ParseWaitCondition(value, inv.wait.condition);
  } else if (name == "set") {
    if (value.find('=') == std::string::npos) {
      return UsageError(
          absl::StrCat("--set needs PATH=VALUE (e.g. --set workers.min=2), not '", value, "'"));
    }
    inv.submit.overrides.push_back(value);
  } else if (name == "wait") {
    inv.submit.wait = true;
  } else if (name == "rank") {
    if (!ParseIntIn(value, 0, kMaxInt, inv.logs.rank)) {
      return UsageError(absl::StrCat("--rank must be a rank number >= 0, not '", value, "'"));
    }
    inv.profile.rank = inv.logs.rank;
  } else if (name == "steps") {
    if (!ParseIntIn<int64_t>(value, 1, 1000, inv.profile.steps)) {
      return UsageError(absl::StrCat("--steps must be in [1, 1000], not '", value, "'"));
    }
  } else if (name == "out") {
    if (value.empty()) return UsageError("--out needs a FILE");
    inv.profile.out = value;
  } else if (name == "timeout" && command != nullptr && command->name == "wait") {
    if (!ParseDurationUpTo(value, absl::InfiniteDuration(), inv.wait.timeout)) {
      return UsageError(
          absl::StrCat("--timeout must be a duration > 0 such as 30s or 10m, not '", value, "'"));
    }
  } else if (name == "timeout") {
    if (!ParseDurationUpTo(value, absl::Hours(1), inv.profile.timeout)) {
      return UsageError(absl::StrCat(
          "--timeout must be a duration in (0, 1h] such as 30s or 5m, not '", value, "'"));
    }
  } else if (name == "follow") {
    inv.logs.follow = true;
  } else if (name == "reason") {
    inv.cordon.reason = value;
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
  if (command->name == "cordon" || command->name == "uncordon") {
    inv.cordon.worker_id = positionals[0];
  }
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
        return UsageError(
            absl::StrCat("--", flag->name, " needs a value (", flag->value_name, ")"));
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
  std::string out =
      absl::StrCat("Usage: baton ", command->name, command->args.empty() ? "" : " " + command->args,
                   command->flags.empty() ? "" : " [FLAGS]", "\n\n", command->summary, ".\n\n",
                   command->description, "\n");
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
  absl::StatusOr<Connection> conn =
      ResolveConnection(ConnectionInputsOf(inv, env), kDefaultCoordinator);
  absl::StatusOr<CoordinatorChannel> channel =
      conn.ok() ? OpenChannel(*conn, MessageSizeArgs())
                : absl::StatusOr<CoordinatorChannel>(conn.status());
  if (!channel.ok()) {
    if (inv.command == "version" && inv.format == OutputFormat::kTable) {
      out << "Client: " << kVersion << "\n";
    }
    err << "baton: " << channel.status().message() << "\n";
    // UNAVAILABLE: none of several coordinator addresses leads.
    return absl::IsUnavailable(channel.status()) ? kExitUnreachable : kExitUsage;
  }
  ctx.coordinator = channel->address;
  ctx.format = inv.format;
  ctx.tty = env.stdout_is_tty;
  ctx.color = UseColor(inv.color, env);
  std::unique_ptr<baton::v1::JobService::Stub> jobs =
      baton::v1::JobService::NewStub(channel->channel);
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster =
      baton::v1::ClusterService::NewStub(channel->channel);
  ctx.jobs = jobs.get();
  ctx.cluster = cluster.get();

  if (inv.command == "submit") return Submit(ctx, inv.submit);
  if (inv.command == "jobs") return ListJobs(ctx, inv.jobs);
  if (inv.command == "describe") return Describe(ctx, inv.job_id);
  if (inv.command == "logs") return Logs(ctx, inv.logs);
  if (inv.command == "cancel") return Cancel(ctx, inv.job_id);
  if (inv.command == "workers") return ListWorkers(ctx);
  if (inv.command == "queues") return ListQueues(ctx);
  if (inv.command == "profile") return Profile(ctx, inv.profile);
  if (inv.command == "cordon") return Cordon(ctx, inv.cordon, /*cordon=*/true);
  if (inv.command == "uncordon") return Cordon(ctx, inv.cordon, /*cordon=*/false);
  if (inv.command == "wait") return Wait(ctx, inv.wait);
  if (inv.command == "version") return Version(ctx);
  err << "baton: unknown command '" << inv.command << "'\n";
  return kExitUsage;
}

}  // namespace baton::cli
