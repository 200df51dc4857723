#include "client/cli.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/spec/message_limits.h"
#include "baton/v1/job_service.grpc.pb.h"

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
                    "else ", kDefaultCoordinator, ".")},
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
       "Output format: 'table' (default, for people) or 'json' (protobuf JSON, one document "
       "per command; `logs` prints one LogLine per line)."},
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
       "(rendezvous generation), STEP (rank 0's latest step / budget.max_steps), AGE.",
       {},
       {"baton jobs", "baton jobs -o json"}},
      {"describe",
       "JOB",
       1,
       "Show one job in detail",
       "Prints the job's spec summary, state and message, generation, rendezvous master\n"
       "address, ranks (RANK WORKER LOCAL PID EXIT), result and every event.",
       {},
       {"baton describe j-000007", "baton describe j-000007 -o json"}},
      {"logs",
       "JOB",
       1,
       "Print a job's process output",
       "Prints the lines the job's processes wrote to stdout/stderr. Without --rank every\n"
       "line is prefixed with \"[rank N] \". With -f, keeps printing new lines until the job\n"
       "ends, resuming where it stopped if the connection breaks.",
       {{"rank", "", "N", "Only rank N's output (no prefix)."},
        {"follow", "f", "", "Keep streaming until the job is finished."}},
       {"baton logs j-000007", "baton logs j-000007 --rank 0 -f"}},
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

// Stores one flag's value into `inv`.
absl::Status ApplyFlag(const FlagSpec& flag, const std::string& value, Invocation& inv,
                       bool& help) {
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
    if (value == "table") {
      inv.format = OutputFormat::kTable;
    } else if (value == "json") {
      inv.format = OutputFormat::kJson;
    } else {
      return UsageError(absl::StrCat("-o/--output must be 'table' or 'json', not '", value, "'"));
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
    if (absl::Status s = ApplyFlag(*flag, value, inv, help); !s.ok()) return s;
  }

  return CompleteInvocation(command, positionals, help, std::move(inv));
}

std::string HelpText(const std::string& command_name) {
  const CommandSpec* command = FindCommand(command_name);
  if (command == nullptr || command->name == "help") {
    std::string out =
        "baton: submit and watch elastic training jobs on a Baton cluster.\n"
        "\n"
        "Usage: baton [--context NAME] [--coordinator HOST:PORT] [-o table|json] COMMAND [ARGS]\n"
        "             [FLAGS]\n"
        "\n"
        "Commands:\n";
    for (const CommandSpec& c : Commands()) {
      absl::StrAppend(&out, absl::StrFormat("  %-10s %s\n", c.name, c.summary));
    }
    absl::StrAppend(&out, "\nGlobal flags (anywhere on the line):\n", RenderFlags(GlobalFlags()),
                    "\nExamples:\n"
                    "  baton submit mnist.yaml --wait\n"
                    "  baton jobs\n"
                    "  baton describe j-000007\n"
                    "  baton profile j-000007 --steps 10\n"
                    "  BATON_COORDINATOR=head:7070 baton workers -o json\n"
                    "\nRun 'baton help COMMAND' for a command's flags and examples.\n"
                    "Exit status: 0 success, 1 failure, 2 usage error.\n");
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
    err << "baton: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  ctx.coordinator = conn->coordinator;
  ctx.format = inv.format;
  ctx.tty = env.stdout_is_tty;
  std::unique_ptr<baton::v1::JobService::Stub> jobs = baton::v1::JobService::NewStub(*channel);
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster =
      baton::v1::ClusterService::NewStub(*channel);
  ctx.jobs = jobs.get();
  ctx.cluster = cluster.get();

  if (inv.command == "submit") return Submit(ctx, inv.submit);
  if (inv.command == "jobs") return ListJobs(ctx);
  if (inv.command == "describe") return Describe(ctx, inv.job_id);
  if (inv.command == "logs") return Logs(ctx, inv.logs);
  if (inv.command == "cancel") return Cancel(ctx, inv.job_id);
  if (inv.command == "workers") return ListWorkers(ctx);
  if (inv.command == "profile") return Profile(ctx, inv.profile);
  err << "baton: unknown command '" << inv.command << "'\n";
  return kExitUsage;
}

}  // namespace baton::cli
