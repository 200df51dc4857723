#pragma once

// The `baton` subcommands as plain functions: each takes a CommandContext (output streams,
// stubs, options) and its arguments, prints to the context's streams and returns the
// process exit code. Tests call them directly against an in-process fake server.
//
// Exit codes: 0 success; 1 the command failed (RPC error, invalid job file, watched job
// did not succeed); 2 usage errors (reported by the argument parser, never here).
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
#include "common/time/clock.h"
#include "baton/v1/job_service.grpc.pb.h"

namespace baton::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

enum class OutputFormat { kTable, kJson };

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

struct LogsArgs {
  std::string job_id;
  int rank = -1;  // -1: all ranks, each line prefixed with "[rank N] "
  bool follow = false;
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

// Parses FILE (+ overrides) locally, submits it, prints the job id (JSON: the Job). With
// `wait`, then watches it (see client/render/progress.h), prints the result and returns 0 only if
// the job SUCCEEDED; otherwise prints "baton: job ID STATE: message" and returns 1. In
// JSON mode --wait prints only the final Job.
int Submit(const CommandContext& ctx, const SubmitArgs& args);
// Table of jobs, newest first (JSON: ListJobsResponse).
int ListJobs(const CommandContext& ctx);
// One job in detail (JSON: Job).
int Describe(const CommandContext& ctx, const std::string& job_id);
// Process output (JSON: one LogLine per line). With `follow`, streams until the job is
// terminal, resuming after the last seen seq if the stream breaks.
int Logs(const CommandContext& ctx, const LogsArgs& args);
// Cancels a job (JSON: the Job).
int Cancel(const CommandContext& ctx, const std::string& job_id);
// Table of workers (JSON: ListWorkersResponse).
int ListWorkers(const CommandContext& ctx);
// Records `steps` optimizer steps of a RUNNING built-in-trainer job's ranks (all, or
// `rank`) through JobService.ProfileJob, merges their Chrome traces into one file
// (client/profile/trace_merge.h) and prints where it wrote it (JSON: {"job_id",
// "generation", "ranks", "file"}). The call's deadline is args.timeout (else the
// coordinator's longest, 1 h: it answers by its own default) + ctx.rpc_timeout.
int Profile(const CommandContext& ctx, const ProfileArgs& args);

// The one-line explanation for an UNAVAILABLE status: the last ": "-separated part of the
// gRPC message ("Connection refused"), or "unavailable" when it is empty. Exposed for tests.
std::string ShortUnavailableReason(const std::string& grpc_message);

}  // namespace baton::cli
