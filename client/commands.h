#pragma once

// The `baton` subcommands as plain functions: each takes a CommandContext (output streams,
// stubs, options) and its arguments, prints to the context's streams and returns the
// process exit code. Tests call them directly against an in-process fake server.
//
// Exit codes (also in `baton --help` and README.md):
//   0  success (for `wait`: the condition was met);
//   1  the command failed: an error from the coordinator (NOT_FOUND, PERMISSION_DENIED,
//      UNAUTHENTICATED: a bad or missing token, ...), an invalid job file, a local error;
//   2  usage error (reported by the argument parser, never here);
//   3  the job ended in a state that does not count as success: `submit --wait` of a job
//      that FAILED or was CANCELLED, `wait` on a job that ended without meeting --for;
//   4  the coordinator could not be reached or did not answer (UNAVAILABLE,
//      DEADLINE_EXCEEDED), after the retries of resumable calls;
//   5  `wait --timeout` ran out before the condition was met.
//
// Errors are one line on `err`, without gRPC debug strings:
//   baton: cannot reach the coordinator at HOST:PORT (<reason>); is baton-coordinator
//     running? Set --coordinator or BATON_COORDINATOR.           (UNAVAILABLE)
//   baton: invalid job file FILE: <message>                       (INVALID_ARGUMENT)
//   baton: job j-000123 not found                                 (NOT_FOUND)
//   baton: <what>: <message>                                      (anything else)

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "common/time/clock.h"

namespace baton::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitJobNotSuccessful = 3;
inline constexpr int kExitUnreachable = 4;
inline constexpr int kExitTimeout = 5;

// -o/--output. kJson is protobuf JSON with snake_case field names and every field, zero
// values included; kYaml the same document as YAML; kWide the table with more columns;
// kName one resource id per line, for scripts.
enum class OutputFormat { kTable, kWide, kYaml, kJson, kName };

// 32 random hex digits, e.g. for SubmitJobRequest.request_id.
std::string RandomRequestId();

// How a broken watch / follow stream is resumed: on UNAVAILABLE (or a stream that ends
// before the job is terminal) the call is retried up to `max_attempts` times in a row,
// sleeping initial_backoff, 2x, 4x ... capped at max_backoff. Receiving any message resets
// the count.
struct RetryPolicy {
  int max_attempts = 6;
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(8);
};

// Everything a command needs. Pointers are not owned and must outlive the call.
struct CommandContext {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  baton::v1::JobService::StubInterface* jobs = nullptr;
  baton::v1::ClusterService::StubInterface* cluster = nullptr;
  // host:port the stubs talk to, for messages.
  std::string coordinator;
  OutputFormat format = OutputFormat::kTable;
  // Whether `out` is a terminal (progress redrawn in place).
  bool tty = false;
  // Whether to colour state words with ANSI escapes (--color, NO_COLOR and `tty`, decided
  // by the caller).
  bool color = false;
  const Clock* clock = RealClock::Get();
  absl::TimeZone tz = absl::LocalTimeZone();
  // Deadline of each unary RPC.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Deadline of a non-follow GetLogs stream.
  absl::Duration logs_timeout = absl::Seconds(60);
  RetryPolicy retry;
  std::function<void(absl::Duration)> sleep = [](absl::Duration d) { absl::SleepFor(d); };
  // A fresh SubmitJobRequest.request_id (one per submit command; its retries reuse it).
  std::function<std::string()> new_request_id = RandomRequestId;
};

struct SubmitArgs {
  std::string file;
  std::vector<std::string> overrides;  // "PATH=VALUE"
  bool wait = false;
};

struct ListJobsArgs {
  // Only jobs in these states (empty: all).
  std::vector<baton::v1::JobState> states;
  // At most this many jobs (0: no limit).
  int limit = 0;
};

struct LogsArgs {
  std::string job_id;
  int rank = -1;  // -1: all ranks, each line prefixed with "[rank N] "
  bool follow = false;
  // > 0: only the last `tail` stored lines (then, with `follow`, every new one).
  int tail = 0;
  // Only lines written at or after `since_time`, or, if `since_ago` > 0, at or after
  // ctx.clock->Now() - since_ago. Both unset: every line.
  absl::Time since_time = absl::InfinitePast();
  absl::Duration since_ago = absl::ZeroDuration();
  // Prefix each line with its LogLine.time in RFC 3339 UTC.
  bool timestamps = false;
};

// What `baton wait --for` waits for.
enum class WaitCondition { kSucceeded, kFailed, kCancelled, kEnded, kRunning };

struct WaitArgs {
  std::string job_id;
  WaitCondition condition = WaitCondition::kSucceeded;
  // Zero: no timeout.
  absl::Duration timeout = absl::ZeroDuration();
};

struct CordonArgs {
  std::string worker_id;
  std::string reason;
};

struct ProfileArgs {
  std::string job_id;
  int64_t steps = 5;  // 1..1000
  int rank = -1;      // -1: every rank
  // Where the merged trace goes; "": <job id>-profile.json in the working directory.
  std::string out;
  // How long the coordinator waits for every rank's trace (ProfileJobRequest.timeout);
  // zero: the coordinator's default (2 minutes, longer for slow steps).
  absl::Duration timeout = absl::ZeroDuration();
};

// Every command prints per ctx.format: JSON and YAML print the named document, name the
// resources' ids, wide the table with more columns (commands without a wider view print
// their table).
//
// Parses FILE (+ overrides) locally, submits it, prints the job id (JSON: the Job). With
// `wait`, then watches it (see client/render/progress.h), prints the result and returns 0 only if
// the job SUCCEEDED; otherwise prints "baton: job ID STATE: message" and returns
// kExitJobNotSuccessful (FAILED, CANCELLED). In JSON/YAML mode --wait prints only the final Job.
int Submit(const CommandContext& ctx, const SubmitArgs& args);
// Table of jobs, newest first (JSON: ListJobsResponse), filtered by state and limited
// (ListJobsRequest.states/limit).
int ListJobs(const CommandContext& ctx, const ListJobsArgs& args = {});
// One job in detail (JSON: Job).
int Describe(const CommandContext& ctx, const std::string& job_id);
// Process output (JSON: one LogLine per line), optionally only the last `tail` lines and
// those written since a time (GetLogsRequest.tail/since), each prefixed with its time with
// `timestamps`. With `follow`, streams until the job is terminal, resuming after the last
// seen seq if the stream breaks (the resumed call does not send `tail` again).
int Logs(const CommandContext& ctx, const LogsArgs& args);
// Cancels a job (JSON: the Job).
int Cancel(const CommandContext& ctx, const std::string& job_id);
// Table of workers (JSON: ListWorkersResponse).
int ListWorkers(const CommandContext& ctx);
// Table of the queues of a shared cluster with the default queue and the priority classes
// (JSON: ListQueuesResponse; name: the queues' names). A coordinator without a queue file
// is said so in one line (exit 0; JSON: `configured` false). One that predates queues
// (no ListQueues: UNIMPLEMENTED) is reported as such, exit 1.
int ListQueues(const CommandContext& ctx);
// Watches a job (WatchJob, resumed like submit --wait) until `args.condition` holds, the
// job ends without meeting it, or `args.timeout` (measured on ctx.clock) runs out. Prints
// the final state line "j-000007 SUCCEEDED" (with ": message" when there is one; JSON/YAML:
// the Job; name: the id). Returns 0 when the condition holds, kExitJobNotSuccessful when
// the job reached a terminal state that cannot meet it, kExitTimeout on timeout.
int Wait(const CommandContext& ctx, const WaitArgs& args);
// The client's release (common/version.h) and the coordinator's (ClusterService.GetVersion:
// release, worker protocol range). When the coordinator cannot be reached, still prints
// the client's and returns kExitUnreachable; an older coordinator without GetVersion shows
// as "unknown".
int Version(const CommandContext& ctx);
// Records `steps` optimizer steps of a RUNNING built-in-trainer job's ranks (all, or
// `rank`) through JobService.ProfileJob, merges their Chrome traces into one file
// (client/profile/trace_merge.h) and prints where it wrote it (JSON: {"job_id",
// "generation", "ranks", "file"}). The call's deadline is args.timeout (else the
// coordinator's longest, 1 h: it answers by its own default) + ctx.rpc_timeout.
int Profile(const CommandContext& ctx, const ProfileArgs& args);
// `baton cordon` (cordon = true) and `baton uncordon`: the worker as the coordinator
// returns it.
int Cordon(const CommandContext& ctx, const CordonArgs& args, bool cordon);

// The one-line explanation for an UNAVAILABLE status: the last ": "-separated part of the
// gRPC message ("Connection refused"), or "unavailable" when it is empty. Exposed for tests.
std::string ShortUnavailableReason(const std::string& grpc_message);

}  // namespace baton::cli
