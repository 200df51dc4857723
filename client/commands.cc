#include "client/commands.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/job/job_file.h"
#include "client/profile/trace_merge.h"
#include "client/render/output.h"
#include "client/render/progress.h"
#include "client/render/views.h"
#include "common/time/proto_time.h"
#include "common/version.h"
#include "google/protobuf/struct.pb.h"

namespace baton::cli {
namespace {

using baton::v1::Job;
using baton::v1::JobUpdate;
using baton::v1::LogLine;

void SetDeadline(grpc::ClientContext* call, absl::Duration timeout) {
  call->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

// The first line of a message from the coordinator (it may quote job data: names, paths,
// a rank's words), fit for a terminal.
std::string FirstLine(const std::string& s) {
  return NeutraliseControls(s.substr(0, s.find('\n')));
}

// What an error is about, to pick the message.
struct ErrorSubject {
  std::string what;      // e.g. "cannot cancel job j-1"
  std::string job_id;    // NOT_FOUND means "job ... not found"
  std::string job_file;  // INVALID_ARGUMENT means "invalid job file ..."
};

int ReportError(const CommandContext& ctx, const grpc::Status& status,
                const ErrorSubject& subject) {
  const std::string message = FirstLine(status.error_message());
  std::ostream& err = *ctx.err;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      err << "baton: cannot reach the coordinator at " << ctx.coordinator << " ("
          << ShortUnavailableReason(message)
          << "); is baton-coordinator running? Set --coordinator or BATON_COORDINATOR (and "
             "for TLS --ca or --context).\n";
      return kExitUnreachable;
    case grpc::StatusCode::UNAUTHENTICATED:
      err << "baton: the coordinator did not accept your credentials (" << message << ")\n";
      return kExitFailure;
    case grpc::StatusCode::PERMISSION_DENIED:
      err << "baton: not allowed: " << message << "\n";
      return kExitFailure;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      err << "baton: the coordinator at " << ctx.coordinator << " did not answer within "
          << HumanDuration(ctx.rpc_timeout) << " (" << subject.what << ")\n";
      return kExitUnreachable;
    case grpc::StatusCode::NOT_FOUND:
      if (!subject.job_id.empty()) {
        err << "baton: job " << subject.job_id << " not found\n";
        return kExitFailure;
      }
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      if (!subject.job_file.empty()) {
        err << "baton: invalid job file " << subject.job_file << ": " << message << "\n";
        return kExitFailure;
      }
      break;
    default:
      break;
  }
  err << "baton: " << subject.what << ": "
      << (message.empty() ? absl::StrCat("error code ", status.error_code()) : message) << "\n";
  return kExitFailure;
}

// Prints `message` as one JSON document (multi-line) or line (compact).
int PrintJson(const CommandContext& ctx, const google::protobuf::Message& message,
              bool multiline = true) {
  absl::StatusOr<std::string> json = ToJson(message, multiline);
  if (!json.ok()) {
    *ctx.err << "baton: " << json.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << *json << "\n";
  return kExitOk;
}

bool IsDocumentFormat(OutputFormat format) {
  return format == OutputFormat::kJson || format == OutputFormat::kYaml;
}

// Prints `message` as the JSON or YAML document (-o json / -o yaml).
int PrintDocument(const CommandContext& ctx, const google::protobuf::Message& message) {
  if (ctx.format == OutputFormat::kJson) return PrintJson(ctx, message);
  absl::StatusOr<std::string> yaml = ToYaml(message);
  if (!yaml.ok()) {
    *ctx.err << "baton: " << yaml.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << *yaml;
  return kExitOk;
}

TableStyle StyleOf(const CommandContext& ctx) {
  return {ctx.format == OutputFormat::kWide, ctx.color};
}

}  // namespace

std::string RandomRequestId() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrFormat("%08x", random());
  return id;
}

namespace {

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
                        ProgressTracker& tracker, ProgressPrinter* printer) {
  return RunResumable(ctx, [&](bool* progressed) {
    grpc::ClientContext call;  // no deadline: a watch lasts as long as the job
    baton::v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_after_seq(tracker.last_seq());
    std::unique_ptr<grpc::ClientReaderInterface<JobUpdate>> reader =
        ctx.jobs->WatchJob(&call, request);
    JobUpdate update;
    while (reader->Read(&update)) {
      *progressed = true;
      tracker.Apply(update);
      if (printer != nullptr) printer->OnUpdate(tracker, update);
    }
    grpc::Status status = reader->Finish();
    if (status.ok() && !IsTerminal(tracker.job().state())) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the watch ended before the job finished");
    }
    return status;
  });
}

}  // namespace

std::string ShortUnavailableReason(const std::string& grpc_message) {
  std::string reason = FirstLine(grpc_message);
  const size_t sep = reason.rfind(": ");
  if (sep != std::string::npos) reason = reason.substr(sep + 2);
  if (reason.empty()) return "unavailable";
  if (reason.size() > 80) reason = reason.substr(0, 77) + "...";
  return reason;
}

int Submit(const CommandContext& ctx, const SubmitArgs& args) {
  absl::StatusOr<baton::v1::JobSpec> spec = ParseJobFile(args.file, args.overrides);
  if (!spec.ok()) {
    const std::string message(spec.status().message());
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) {
      *ctx.err << "baton: " << message << "\n";
    } else if (absl::StartsWith(message, args.file)) {  // "FILE:line:col: ..."
      *ctx.err << "baton: invalid job file " << message << "\n";
    } else {
      *ctx.err << "baton: invalid job file " << args.file << ": " << message << "\n";
    }
    return kExitFailure;
  }

  baton::v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  // Retrying with the same request_id cannot create the job twice.
  request.set_request_id(ctx.new_request_id());
  baton::v1::SubmitJobResponse response;
  grpc::Status status = RunResumable(ctx, [&](bool*) {
    grpc::ClientContext call;
    SetDeadline(&call, ctx.rpc_timeout);
    return ctx.jobs->SubmitJob(&call, request, &response);
  });
  if (!status.ok()) {
    return ReportError(ctx, status, {"cannot submit " + args.file, "", args.file});
  }
  const Job& submitted = response.job();
  const bool json = IsDocumentFormat(ctx.format);
  if (json && !args.wait) return PrintDocument(ctx, submitted);
  if (!json) *ctx.out << submitted.id() << "\n" << std::flush;
  if (!args.wait) return kExitOk;

  ProgressTracker tracker(submitted);
  std::unique_ptr<ProgressPrinter> printer;
  if (!json) {
    printer = std::make_unique<ProgressPrinter>(*ctx.out, ctx.tty, *ctx.clock, ctx.tz);
  }
  status = WatchToEnd(ctx, submitted.id(), tracker, printer.get());
  if (printer) printer->Finish();
  if (!status.ok()) {
    return ReportError(ctx, status, {"watching job " + submitted.id() + " failed",
                                     submitted.id(), ""});
  }

  // The final state with its result; the last snapshot if the coordinator went away.
  Job final_job = tracker.job();
  {
    baton::v1::GetJobRequest get;
    get.set_job_id(submitted.id());
    Job fetched;
    grpc::ClientContext get_call;
    SetDeadline(&get_call, ctx.rpc_timeout);
    if (ctx.jobs->GetJob(&get_call, get, &fetched).ok()) final_job = std::move(fetched);
  }
  if (json) {
    if (PrintDocument(ctx, final_job) != kExitOk) return kExitFailure;
  } else {
    *ctx.out << RenderResult(final_job);
  }
  if (final_job.state() == baton::v1::JOB_STATE_SUCCEEDED) return kExitOk;
  *ctx.err << "baton: job " << final_job.id() << " " << JobStateName(final_job.state());
  if (!final_job.message().empty()) *ctx.err << ": " << FirstLine(final_job.message());
  *ctx.err << "\n";
  return IsTerminal(final_job.state()) ? kExitJobNotSuccessful : kExitFailure;
}

int ListJobs(const CommandContext& ctx, const ListJobsArgs& args) {
  baton::v1::ListJobsRequest request;
  for (baton::v1::JobState state : args.states) request.add_states(state);
  request.set_limit(args.limit);
  baton::v1::ListJobsResponse response;  // every page's jobs
  do {
    baton::v1::ListJobsResponse page;
    grpc::ClientContext call;
    SetDeadline(&call, ctx.rpc_timeout);
    grpc::Status status = ctx.jobs->ListJobs(&call, request, &page);
    if (!status.ok()) return ReportError(ctx, status, {"cannot list jobs", "", ""});
    if (!page.next_page_token().empty() && page.next_page_token() == request.page_token()) {
      *ctx.err << "baton: cannot list jobs: the coordinator returned the same page twice\n";
      return kExitFailure;
    }
    for (Job& job : *page.mutable_jobs()) *response.add_jobs() = std::move(job);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, response);
  if (ctx.format == OutputFormat::kName) {
    for (const Job& job : response.jobs()) *ctx.out << job.id() << "\n";
    return kExitOk;
  }
  *ctx.out << RenderJobsTable(response, ctx.clock->Now(), StyleOf(ctx));
  return kExitOk;
}

int Describe(const CommandContext& ctx, const std::string& job_id) {
  baton::v1::GetJobRequest request;
  request.set_job_id(job_id);
  Job job;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  grpc::Status status = ctx.jobs->GetJob(&call, request, &job);
  if (!status.ok()) {
    return ReportError(ctx, status, {"cannot describe job " + job_id, job_id, ""});
  }
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, job);
  if (ctx.format == OutputFormat::kName) {
    *ctx.out << job.id() << "\n";
    return kExitOk;
  }
  *ctx.out << RenderJobDescription(job, ctx.clock->Now(), ctx.tz, ctx.color);
  return kExitOk;
}

int Logs(const CommandContext& ctx, const LogsArgs& args) {
  int64_t last_seq = 0;
  int exit_code = kExitOk;
  absl::Time since = args.since_time;
  if (args.since_ago > absl::ZeroDuration()) since = ctx.clock->Now() - args.since_ago;
  auto attempt = [&](bool* progressed) {
    grpc::ClientContext call;
    if (!args.follow) SetDeadline(&call, ctx.logs_timeout);
    baton::v1::GetLogsRequest request;
    request.set_job_id(args.job_id);
    request.set_rank(args.rank);
    request.set_after_seq(last_seq);
    request.set_follow(args.follow);
    // A resumed follow continues after the last line it printed: the tail was taken.
    if (last_seq == 0) request.set_tail(args.tail);
    if (since != absl::InfinitePast()) *request.mutable_since() = ToProto(since);
    std::unique_ptr<grpc::ClientReaderInterface<LogLine>> reader =
        ctx.jobs->GetLogs(&call, request);
    LogLine line;
    while (reader->Read(&line)) {
      *progressed = true;
      last_seq = std::max(last_seq, line.seq());
      if (ctx.format == OutputFormat::kJson) {
        if (PrintJson(ctx, line, /*multiline=*/false) != kExitOk) exit_code = kExitFailure;
        continue;
      }
      std::string text = line.text();
      if (!text.empty() && text.back() == '\n') text.pop_back();
      if (args.timestamps) *ctx.out << FormatRfc3339Utc(line.time()) << " ";
      if (args.rank < 0) *ctx.out << "[rank " << line.rank() << "] ";
      // A job's output must not drive the user's terminal.
      *ctx.out << (ctx.tty ? NeutraliseControls(text) : text) << "\n";
      // Followed lines reach a pipe or file as they come (`baton logs -f JOB | grep`).
      if (args.follow) ctx.out->flush();
    }
    ctx.out->flush();
    return reader->Finish();
  };
  grpc::Status status;
  if (args.follow) {
    status = RunResumable(ctx, attempt);
  } else {
    bool progressed = false;
    status = attempt(&progressed);
  }
  if (!status.ok()) {
    return ReportError(ctx, status, {"cannot get logs of job " + args.job_id, args.job_id, ""});
  }
  return exit_code;
}

int Cancel(const CommandContext& ctx, const std::string& job_id) {
  baton::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason("cancelled with `baton cancel`");
  Job job;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  grpc::Status status = ctx.jobs->CancelJob(&call, request, &job);
  if (!status.ok()) {
    return ReportError(ctx, status, {"cannot cancel job " + job_id, job_id, ""});
  }
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, job);
  if (ctx.format == OutputFormat::kName) {
    *ctx.out << job.id() << "\n";
    return kExitOk;
  }
  if (job.state() == baton::v1::JOB_STATE_CANCELLED) {
    *ctx.out << "job " << job_id << " cancelled\n";
  } else {
    *ctx.out << "job " << job_id << ": cancel requested (state " << JobStateName(job.state())
             << ")\n";
  }
  return kExitOk;
}

int Profile(const CommandContext& ctx, const ProfileArgs& args) {
  baton::v1::ProfileJobRequest request;
  request.set_job_id(args.job_id);
  request.set_steps(args.steps);
  if (args.rank >= 0) request.add_ranks(args.rank);
  if (args.timeout > absl::ZeroDuration()) {
    request.mutable_timeout()->set_seconds(absl::ToInt64Seconds(args.timeout));
    request.mutable_timeout()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(args.timeout % absl::Seconds(1))));
  }
  baton::v1::ProfileJobResponse response;
  grpc::ClientContext call;
  SetDeadline(&call, (args.timeout > absl::ZeroDuration() ? args.timeout : absl::Hours(1)) +
                         ctx.rpc_timeout);
  const grpc::Status status = ctx.jobs->ProfileJob(&call, request, &response);
  const std::string what = "cannot profile job " + args.job_id;
  if (!status.ok()) {
    // The coordinator's own answers about the ranks (not the transport's) say what is missing.
    const std::string message = FirstLine(status.error_message());
    if ((status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
        (absl::StrContains(message, "missing:") || absl::StrContains(message, "job "))) {
      *ctx.err << "baton: " << what << ": " << message << "\n";
      return kExitFailure;
    }
    return ReportError(ctx, status, {what, args.job_id, ""});
  }
  std::vector<RankTraceJson> traces;
  std::vector<int32_t> ranks;
  for (const baton::v1::RankTrace& t : response.traces()) {
    traces.push_back({t.rank(), t.trace_json()});
    ranks.push_back(t.rank());
  }
  absl::StatusOr<std::string> merged =
      MergeChromeTraces(traces, response.job_id(), response.generation());
  if (!merged.ok()) {
    *ctx.err << "baton: " << what << ": " << NeutraliseControls(merged.status().message())
             << "\n";
    return kExitFailure;
  }
  const std::string file = args.out.empty() ? args.job_id + "-profile.json" : args.out;
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << *merged;
    out.close();
    if (!out) {
      *ctx.err << "baton: " << what << ": cannot write " << file << "\n";
      return kExitFailure;
    }
  }
  if (ctx.format == OutputFormat::kJson) {
    google::protobuf::Struct summary;
    auto& fields = *summary.mutable_fields();
    fields["job_id"].set_string_value(response.job_id());
    fields["generation"].set_number_value(static_cast<double>(response.generation()));
    auto* list = fields["ranks"].mutable_list_value();
    for (int32_t rank : ranks) list->add_values()->set_number_value(rank);
    fields["file"].set_string_value(file);
    return PrintDocument(ctx, summary);
  }
  *ctx.out << "wrote the trace of " << args.steps << " steps of job " << response.job_id()
           << " generation " << response.generation() << ", rank"
           << (ranks.size() == 1 ? " " : "s ") << absl::StrJoin(ranks, ",") << ", to " << file
           << "\nopen it in https://ui.perfetto.dev or chrome://tracing\n";
  return kExitOk;
}

int ListWorkers(const CommandContext& ctx) {
  baton::v1::ListWorkersRequest request;
  baton::v1::ListWorkersResponse response;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  grpc::Status status = ctx.cluster->ListWorkers(&call, request, &response);
  if (!status.ok()) return ReportError(ctx, status, {"cannot list workers", "", ""});
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, response);
  if (ctx.format == OutputFormat::kName) {
    for (const auto& w : response.workers()) *ctx.out << w.id() << "\n";
    return kExitOk;
  }
  *ctx.out << RenderWorkersTable(response, ctx.clock->Now(), StyleOf(ctx));
  return kExitOk;
}

namespace {

bool ConditionMet(WaitCondition condition, baton::v1::JobState state) {
  switch (condition) {
    case WaitCondition::kSucceeded:
      return state == baton::v1::JOB_STATE_SUCCEEDED;
    case WaitCondition::kFailed:
      return state == baton::v1::JOB_STATE_FAILED;
    case WaitCondition::kCancelled:
      return state == baton::v1::JOB_STATE_CANCELLED;
    case WaitCondition::kEnded:
      return IsTerminal(state);
    case WaitCondition::kRunning:
      return state == baton::v1::JOB_STATE_RUNNING;
  }
  return false;
}

// "succeed", "fail", "be cancelled", "end", "run", for messages.
std::string ConditionVerb(WaitCondition condition) {
  switch (condition) {
    case WaitCondition::kSucceeded:
      return "succeed";
    case WaitCondition::kFailed:
      return "fail";
    case WaitCondition::kCancelled:
      return "be cancelled";
    case WaitCondition::kEnded:
      return "end";
    case WaitCondition::kRunning:
      return "run";
  }
  return "";
}

}  // namespace

int Wait(const CommandContext& ctx, const WaitArgs& args) {
  const bool has_timeout = args.timeout > absl::ZeroDuration();
  const absl::Time deadline =
      has_timeout ? ctx.clock->Now() + args.timeout : absl::InfiniteFuture();
  Job initial;
  initial.set_id(args.job_id);
  ProgressTracker tracker(initial);
  bool seen = false;  // at least one update: tracker's state is the job's
  bool timed_out = false;
  int failures = 0;
  absl::Duration backoff = ctx.retry.initial_backoff;
  auto done = [&] {
    const baton::v1::JobState state = tracker.job().state();
    return seen && (ConditionMet(args.condition, state) || IsTerminal(state));
  };
  while (!done()) {
    if (ctx.clock->Now() >= deadline) {
      timed_out = true;
      break;
    }
    bool progressed = false;
    grpc::ClientContext call;
    if (has_timeout) SetDeadline(&call, deadline - ctx.clock->Now());
    baton::v1::WatchJobRequest request;
    request.set_job_id(args.job_id);
    request.set_after_seq(tracker.last_seq());
    std::unique_ptr<grpc::ClientReaderInterface<JobUpdate>> reader =
        ctx.jobs->WatchJob(&call, request);
    JobUpdate update;
    while (!done() && reader->Read(&update)) {
      progressed = seen = true;
      tracker.Apply(update);
    }
    if (done()) {
      call.TryCancel();
      reader->Finish();
      break;
    }
    grpc::Status status = reader->Finish();
    if (status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the watch ended before the job did");
    }
    // The only deadline on the call is --timeout's.
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && has_timeout) {
      timed_out = true;
      break;
    }
    if (progressed) {
      failures = 0;
      backoff = ctx.retry.initial_backoff;
    }
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        ++failures > ctx.retry.max_attempts) {
      return ReportError(ctx, status, {"watching job " + args.job_id + " failed", args.job_id, ""});
    }
    ctx.sleep(has_timeout
                  ? std::min(backoff, std::max(deadline - ctx.clock->Now(), absl::ZeroDuration()))
                  : backoff);
    backoff = std::min(backoff * 2, ctx.retry.max_backoff);
  }

  Job job = tracker.job();
  if (IsTerminal(job.state())) {
    // The final record, with its message; the watched snapshot if that fails.
    baton::v1::GetJobRequest get;
    get.set_job_id(args.job_id);
    Job fetched;
    grpc::ClientContext get_call;
    SetDeadline(&get_call, ctx.rpc_timeout);
    if (ctx.jobs->GetJob(&get_call, get, &fetched).ok()) job = std::move(fetched);
  }
  if (IsDocumentFormat(ctx.format)) {
    if (const int rc = PrintDocument(ctx, job); rc != kExitOk) return rc;
  } else if (ctx.format == OutputFormat::kName) {
    *ctx.out << job.id() << "\n";
  } else {
    *ctx.out << job.id() << " " << ColorState(JobStateName(job.state()), ctx.color);
    if (!job.message().empty()) *ctx.out << ": " << FirstLine(job.message());
    *ctx.out << "\n";
  }
  ctx.out->flush();
  if (timed_out) {
    *ctx.err << "baton: timed out after " << HumanDuration(args.timeout) << " waiting for job "
             << args.job_id << " to " << ConditionVerb(args.condition) << " (it is "
             << JobStateName(job.state()) << ")\n";
    return kExitTimeout;
  }
  if (ConditionMet(args.condition, job.state())) return kExitOk;
  *ctx.err << "baton: job " << args.job_id << " ended " << JobStateName(job.state())
           << "; it will not " << ConditionVerb(args.condition) << "\n";
  return kExitJobNotSuccessful;
}

int Version(const CommandContext& ctx) {
  baton::v1::GetVersionRequest request;
  baton::v1::GetVersionResponse response;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  const grpc::Status status = ctx.cluster->GetVersion(&call, request, &response);
  // An older coordinator (before 0.15) has no GetVersion.
  const bool unknown = status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
  const bool known = status.ok();
  if (IsDocumentFormat(ctx.format)) {
    google::protobuf::Struct doc;
    auto& fields = *doc.mutable_fields();
    (*fields["client"].mutable_struct_value()->mutable_fields())["version"].set_string_value(
        kVersion);
    if (known) {
      auto& server = *fields["server"].mutable_struct_value()->mutable_fields();
      server["version"].set_string_value(response.version());
      server["protocol_version"].set_number_value(response.protocol_version());
      server["min_worker_protocol_version"].set_number_value(
          response.min_worker_protocol_version());
    } else {
      fields["server"].set_null_value(google::protobuf::NULL_VALUE);
    }
    if (const int rc = PrintDocument(ctx, doc); rc != kExitOk) return rc;
  } else {
    *ctx.out << "Client: " << kVersion << "\n";
    if (known) {
      *ctx.out << "Server: " << response.version() << " (worker protocol "
               << response.protocol_version() << ", accepts workers from protocol "
               << response.min_worker_protocol_version() << ")\n";
    } else if (unknown) {
      *ctx.out << "Server: unknown (a coordinator older than 0.15)\n";
    }
  }
  ctx.out->flush();
  if (known || unknown) return kExitOk;
  return ReportError(ctx, status, {"cannot get the coordinator's version", "", ""});
}

}  // namespace baton::cli
