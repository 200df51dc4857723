#pragma once

// What the `baton` commands (commands.cc) share; internal to them (and command_support_test):
// the deadline of a call, the one-line error report of a failed call (commands.h's list of
// messages and exit codes), printing a document per -o, the retry loop of a resumable
// streaming call (RetryPolicy), following a job to its end and fetching its final record.
// Every function prints only to ctx's streams and returns an exit code (kExit*) or a
// grpc::Status; none keeps state between calls.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>

#include "absl/time/time.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "client/commands.h"
#include "client/render/progress.h"
#include "client/render/views.h"
#include "google/protobuf/message.h"

namespace baton::cli {

// Sets the deadline of `call` to now + `timeout` (system clock: gRPC's).
void SetDeadline(grpc::ClientContext* call, absl::Duration timeout);

// The first line of a message from the coordinator (it may quote job data: names, paths,
// a rank's words), fit for a terminal.
std::string FirstLine(const std::string& s);

// What an error is about, to pick the message.
struct ErrorSubject {
  std::string what;      // e.g. "cannot cancel job j-1"
  std::string job_id;    // NOT_FOUND means "job ... not found"
  std::string job_file;  // INVALID_ARGUMENT means "invalid job file ..."
};

// Prints the one-line error for a failed call's `status` (commands.h) to ctx.err and
// returns its exit code: kExitUnreachable for UNAVAILABLE and DEADLINE_EXCEEDED, else
// kExitFailure.
int ReportError(const CommandContext& ctx, const grpc::Status& status, const ErrorSubject& subject);

// Prints `message` as one JSON document (multi-line) or line (compact). kExitFailure (and a
// line on ctx.err) if it cannot be converted.
int PrintJson(const CommandContext& ctx, const google::protobuf::Message& message,
              bool multiline = true);

// Whether ctx.format prints a document (-o json or -o yaml) instead of text.
bool IsDocumentFormat(OutputFormat format);

// Prints `message` as the JSON or YAML document (-o json / -o yaml).
int PrintDocument(const CommandContext& ctx, const google::protobuf::Message& message);

// The table options of ctx.format (-o wide) and ctx.color.
TableStyle StyleOf(const CommandContext& ctx);

// Runs `attempt` (one streaming call) until it returns OK or a non-retryable status, or
// UNAVAILABLE more than max_attempts times in a row. `attempt(&progressed)` sets
// `progressed` when it received at least one message, which resets the count and backoff.
template <typename Attempt>
grpc::Status RunResumable(const CommandContext& ctx, Attempt attempt) {
  int failures = 0;
  absl::Duration backoff = ctx.retry.initial_backoff;
  while (true) {
    bool progressed = false;
    grpc::Status status = attempt(&progressed);
    if (status.ok()) return status;
    if (progressed) {
      failures = 0;
      backoff = ctx.retry.initial_backoff;
    }
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        ++failures > ctx.retry.max_attempts) {
      return status;
    }
    ctx.sleep(backoff);
    backoff = std::min(backoff * 2, ctx.retry.max_backoff);
  }
}

// Follows WatchJob until the job is terminal and the stream ended, resuming after the last
// seen seq when it breaks. `printer` may be null (JSON output).
grpc::Status WatchToEnd(const CommandContext& ctx, const std::string& job_id,
                        ProgressTracker& tracker, ProgressPrinter* printer);

// The coordinator's record of `job_id` (GetJob, deadline ctx.rpc_timeout), or `fallback`
// (e.g. the last watched snapshot) if the call fails; reports nothing.
baton::v1::Job FetchJobOr(const CommandContext& ctx, const std::string& job_id,
                          baton::v1::Job fallback);

}  // namespace baton::cli
