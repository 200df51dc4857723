#include "client/command_table.h"

#include "absl/strings/str_cat.h"
#include "client/cli.h"

namespace baton::cli {

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"coordinator", "", "HOST:PORT",
       absl::StrCat("Coordinator address, or its replicas' addresses separated by commas (the "
                    "CLI dials the one that leads). Default: $BATON_COORDINATOR, else the "
                    "context's, else ",
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
       "-o wide adds OWNER, WORLD (ranks), MASTER (rendezvous address), LOSS and SAMPLES/S.\n"
       "On a shared cluster (see 'baton queues') QUEUE, PRIO (priority) and POS (a waiting\n"
       "job's place in its queue, 1 = next) follow STATE.",
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
       "address, ranks (RANK WORKER LOCAL PID EXIT), result and every event. On a shared\n"
       "cluster also its queue and priority and, while it waits, its position in the queue,\n"
       "why it waits and which jobs shrink or are preempted to make room for it.",
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
       "LAST-HEARTBEAT, JOBS (jobs with processes on the worker), HEALTH (ok; cordoned, with\n"
       "the reason; or unhealthy: a job's pre-flight check found the host slow or failing,\n"
       "with what it measured and when it is checked again).",
       {},
       {"baton workers", "baton --coordinator 10.0.0.1:7070 workers"}},
      {"queues",
       "",
       0,
       "List the cluster's queues with their quotas and usage",
       "On a shared cluster (a coordinator started with --queue_file), one row per queue:\n"
       "NAME, COHORT (queues that lend each other idle quota), QUOTA (its nominal quota),\n"
       "USED (what its admitted jobs hold), BORROWED (the part of USED beyond QUOTA, lent by\n"
       "its cohort and taken back when a lender needs it), PENDING and ADMITTED (its jobs\n"
       "waiting and running), PREEMPTED (its jobs preempted since the coordinator started).\n"
       "Quantities are slots, and GPUs where a queue has them. -o wide adds SHRUNK (its\n"
       "elastic jobs shrunk to make room) and USERS (who may submit to it). Then the default\n"
       "queue (for a job file without 'queue:') and the priority classes, highest first (a\n"
       "job file's 'priority:' is a class name or an integer). Why a job waits: 'baton\n"
       "describe JOB'. A coordinator without a queue file starts jobs first come, first\n"
       "served, and says so.",
       {},
       {"baton queues", "baton queues -o wide", "baton queues -o json"}},
      {"cordon",
       "WORKER",
       1,
       "Keep a worker out of new jobs",
       "The worker gets no new gangs until 'baton uncordon'; jobs already on it run on (to\n"
       "move them off, drain the worker: SIGTERM, or 'kubectl drain' its node). The cordon is\n"
       "durable (it survives a coordinator restart) and shows in 'baton workers' (HEALTH) with\n"
       "its reason, who set it and when. Admins only.",
       {{"reason", "", "TEXT", "Why (shown in 'baton workers'; at most 256 bytes)."}},
       {"baton cordon w-7 --reason 'NIC errors, ticket 4711'"}},
      {"uncordon",
       "WORKER",
       1,
       "Let a cordoned worker take new jobs again",
       "Lifts 'baton cordon': waiting jobs may start on the worker at once. A worker that is\n"
       "not cordoned is left as it is. Admins only.",
       {},
       {"baton uncordon w-7"}},
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

// The -o formats `command` prints; empty: it ignores -o.
std::vector<OutputFormat> SupportedFormats(const std::string& command) {
  using F = OutputFormat;
  if (command == "logs") return {F::kTable, F::kJson};
  if (command == "profile" || command == "version") return {F::kTable, F::kJson, F::kYaml};
  if (command == "help" || command == "completion") return {};
  return {F::kTable, F::kWide, F::kJson, F::kYaml, F::kName};
}

}  // namespace baton::cli
