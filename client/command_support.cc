#include "client/command_support.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/render/output.h"

namespace baton::cli {

using baton::v1::Job;
using baton::v1::JobUpdate;

void SetDeadline(grpc::ClientContext* call, absl::Duration timeout) {
  call->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

std::string FirstLine(const std::string& s) {
  return NeutraliseControls(s.substr(0, s.find('\n')));
}

std::string ShortUnavailableReason(const std::string& grpc_message) {
  std::string reason = FirstLine(grpc_message);
  const size_t sep = reason.rfind(": ");
  if (sep != std::string::npos) reason = reason.substr(sep + 2);
  if (reason.empty()) return "unavailable";
  if (reason.size() > 80) reason = reason.substr(0, 77) + "...";
  return reason;
}

int ReportError(const CommandContext& ctx, const grpc::Status& status,
                const ErrorSubject& subject) {
  const std::string message = FirstLine(status.error_message());
  std::ostream& err = *ctx.err;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (absl::StrContains(message, " is a standby; ")) {  // coordinator/ha/standby_server.h
        err << "baton: " << message << ". Dial the leader, or give every replica in "
            << "--coordinator (comma-separated) so that the CLI finds it.\n";
        return kExitUnreachable;
      }
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

int PrintJson(const CommandContext& ctx, const google::protobuf::Message& message, bool multiline) {
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
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the watch ended before the job finished");
    }
    return status;
  });
}

Job FetchJobOr(const CommandContext& ctx, const std::string& job_id, Job fallback) {
  baton::v1::GetJobRequest get;
  get.set_job_id(job_id);
  Job fetched;
  grpc::ClientContext get_call;
  SetDeadline(&get_call, ctx.rpc_timeout);
  if (ctx.jobs->GetJob(&get_call, get, &fetched).ok()) return fetched;
  return fallback;
}

}  // namespace baton::cli
