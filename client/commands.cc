#include "client/commands.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/command_support.h"
#include "client/job/job_file.h"
#include "client/profile/trace_merge.h"
#include "client/render/output.h"
#include "client/render/progress.h"
#include "client/render/views.h"
#include "common/time/proto_time.h"
#include "common/version.h"
#include "google/protobuf/struct.pb.h"

namespace baton::cli {

using baton::v1::Job;
using baton::v1::JobUpdate;
using baton::v1::LogLine;

std::string RandomRequestId() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrFormat("%08x", random());
  return id;
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
    return ReportError(ctx, status,
                       {"watching job " + submitted.id() + " failed", submitted.id(), ""});
  }

  // The final state with its result; the last snapshot if the coordinator went away.
  const Job final_job = FetchJobOr(ctx, submitted.id(), tracker.job());
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

int Cordon(const CommandContext& ctx, const CordonArgs& args, bool cordon) {
  baton::v1::Worker worker;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  grpc::Status status;
  if (cordon) {
    baton::v1::CordonWorkerRequest request;
    request.set_worker_id(args.worker_id);
    request.set_reason(args.reason);
    status = ctx.cluster->CordonWorker(&call, request, &worker);
  } else {
    baton::v1::UncordonWorkerRequest request;
    request.set_worker_id(args.worker_id);
    status = ctx.cluster->UncordonWorker(&call, request, &worker);
  }
  if (!status.ok()) {
    return ReportError(
        ctx, status,
        {absl::StrCat("cannot ", cordon ? "cordon" : "uncordon", " worker ", args.worker_id), "",
         ""});
  }
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, worker);
  if (ctx.format == OutputFormat::kName) {
    *ctx.out << worker.id() << "\n";
    return kExitOk;
  }
  *ctx.out << "worker " << worker.id() << (worker.has_cordon() ? " cordoned" : " uncordoned")
           << "\n";
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
    *ctx.err << "baton: " << what << ": " << NeutraliseControls(merged.status().message()) << "\n";
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

int ListQueues(const CommandContext& ctx) {
  baton::v1::ListQueuesRequest request;
  baton::v1::ListQueuesResponse response;
  grpc::ClientContext call;
  SetDeadline(&call, ctx.rpc_timeout);
  const grpc::Status status = ctx.cluster->ListQueues(&call, request, &response);
  // A coordinator that predates queues has no ListQueues, and no queues either.
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    *ctx.err << "baton: cannot list queues: the coordinator at " << ctx.coordinator
             << " predates queues (it has no ListQueues): it starts jobs first come, "
                "first served\n";
    return kExitFailure;
  }
  if (!status.ok()) return ReportError(ctx, status, {"cannot list queues", "", ""});
  if (IsDocumentFormat(ctx.format)) return PrintDocument(ctx, response);
  if (ctx.format == OutputFormat::kName) {
    for (const auto& q : response.queues()) *ctx.out << q.name() << "\n";
    return kExitOk;
  }
  *ctx.out << RenderQueues(response, StyleOf(ctx));
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

// What `baton wait` saw of the job.
struct WaitWatch {
  ProgressTracker tracker;
  bool seen = false;       // at least one update: tracker's state is the job's
  bool timed_out = false;  // --timeout ran out first
};

// Whether `baton wait` can stop watching: the condition holds or the job ended.
bool WaitDone(const WaitArgs& args, const WaitWatch& watch) {
  const baton::v1::JobState state = watch.tracker.job().state();
  return watch.seen && (ConditionMet(args.condition, state) || IsTerminal(state));
}

// One WatchJob call of `baton wait`, after the last seen seq, until WaitDone or the stream
// ends; `deadline` (if `has_timeout`) is the call's. Sets `progressed` when an update came.
// OK once WaitDone; else the stream's status, UNAVAILABLE if it ended OK before that.
grpc::Status WatchOnce(const CommandContext& ctx, const WaitArgs& args, bool has_timeout,
                       absl::Time deadline, WaitWatch& watch, bool* progressed) {
  grpc::ClientContext call;
  if (has_timeout) SetDeadline(&call, deadline - ctx.clock->Now());
  baton::v1::WatchJobRequest request;
  request.set_job_id(args.job_id);
  request.set_after_seq(watch.tracker.last_seq());
  std::unique_ptr<grpc::ClientReaderInterface<JobUpdate>> reader =
      ctx.jobs->WatchJob(&call, request);
  JobUpdate update;
  while (!WaitDone(args, watch) && reader->Read(&update)) {
    *progressed = watch.seen = true;
    watch.tracker.Apply(update);
  }
  if (WaitDone(args, watch)) {
    call.TryCancel();
    reader->Finish();
    return grpc::Status::OK;
  }
  grpc::Status status = reader->Finish();
  if (status.ok()) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the watch ended before the job did");
  }
  return status;
}

// Watches the job (resumed like RunResumable, the backoff cut to the time left) until
// WaitDone or --timeout runs out (watch.timed_out): kExitOk. When the watch fails, reports
// it and returns its exit code.
int WatchUntilDone(const CommandContext& ctx, const WaitArgs& args, WaitWatch& watch) {
  const bool has_timeout = args.timeout > absl::ZeroDuration();
  const absl::Time deadline =
      has_timeout ? ctx.clock->Now() + args.timeout : absl::InfiniteFuture();
  int failures = 0;
  absl::Duration backoff = ctx.retry.initial_backoff;
  while (!WaitDone(args, watch)) {
    if (ctx.clock->Now() >= deadline) {
      watch.timed_out = true;
      break;
    }
    bool progressed = false;
    const grpc::Status status = WatchOnce(ctx, args, has_timeout, deadline, watch, &progressed);
    if (status.ok()) break;
    // The only deadline on the call is --timeout's.
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && has_timeout) {
      watch.timed_out = true;
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
  return kExitOk;
}

// `baton wait`'s state line (or document, or id), flushed.
int PrintWaitResult(const CommandContext& ctx, const Job& job) {
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
  return kExitOk;
}

}  // namespace

int Wait(const CommandContext& ctx, const WaitArgs& args) {
  Job initial;
  initial.set_id(args.job_id);
  WaitWatch watch{ProgressTracker(initial)};
  if (const int rc = WatchUntilDone(ctx, args, watch); rc != kExitOk) return rc;

  Job job = watch.tracker.job();
  // The final record, with its message; the watched snapshot if that fails.
  if (IsTerminal(job.state())) job = FetchJobOr(ctx, args.job_id, std::move(job));
  if (const int rc = PrintWaitResult(ctx, job); rc != kExitOk) return rc;
  if (watch.timed_out) {
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
