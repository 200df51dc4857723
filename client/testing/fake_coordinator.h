#pragma once

// FakeCoordinator: a scripted JobService + ClusterService for the CLI's tests, served
// in-process on 127.0.0.1:0 (FakeCoordinatorServer). It honours the filters the CLI
// sends (ListJobs states/limit, GetLogs after_seq/tail/since) on the jobs and log lines
// a test gives it, and answers GetVersion and ListQueues with what the test set (by
// default: no queue file). Thread-safe (gRPC's sync server threads).

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/job_service.grpc.pb.h"

namespace baton::cli {

// One scripted WatchJob call: these updates, then this status.
struct WatchCall {
  std::vector<baton::v1::JobUpdate> updates;
  grpc::Status end = grpc::Status::OK;
};

class FakeCoordinator final : public baton::v1::JobService::Service,
                              public baton::v1::ClusterService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const baton::v1::SubmitJobRequest* request,
                         baton::v1::SubmitJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    submitted_.push_back(request->spec());
    request_ids_.push_back(request->request_id());
    if (!submit_failures_.empty()) {
      grpc::Status failure = submit_failures_.front();
      submit_failures_.pop_front();
      return failure;
    }
    if (!submit_error_.ok()) return submit_error_;
    baton::v1::Job* job = response->mutable_job();
    job->set_id("j-000001");
    *job->mutable_spec() = request->spec();
    job->set_state(baton::v1::JOB_STATE_QUEUED);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const baton::v1::GetJobRequest* request,
                      baton::v1::Job* response) override {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", request->job_id(), " not found"));
    }
    *response = it->second;
    return grpc::Status::OK;
  }

  // The jobs in id order, filtered by `states` and cut at `limit`; one job per page, the
  // token being the index of the next one among the filtered jobs.
  grpc::Status ListJobs(grpc::ServerContext*, const baton::v1::ListJobsRequest* request,
                        baton::v1::ListJobsResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++list_calls_;
    list_requests_.push_back(*request);
    std::vector<const baton::v1::Job*> matching;
    for (const auto& [id, job] : jobs_) {
      if (!request->states().empty() &&
          std::find(request->states().begin(), request->states().end(), job.state()) ==
              request->states().end()) {
        continue;
      }
      matching.push_back(&job);
    }
    if (request->limit() > 0 && matching.size() > static_cast<size_t>(request->limit())) {
      matching.resize(request->limit());
    }
    size_t index = 0;
    if (!request->page_token().empty()) index = std::stoul(request->page_token());
    if (index >= matching.size()) return grpc::Status::OK;
    *response->add_jobs() = *matching[index];
    if (index + 1 < matching.size()) response->set_next_page_token(std::to_string(index + 1));
    return grpc::Status::OK;
  }
  std::vector<baton::v1::ListJobsRequest> list_requests() {
    absl::MutexLock lock(&mu_);
    return list_requests_;
  }
  int list_calls() {
    absl::MutexLock lock(&mu_);
    return list_calls_;
  }

  grpc::Status CancelJob(grpc::ServerContext*, const baton::v1::CancelJobRequest* request,
                         baton::v1::Job* response) override {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
    if (it->second.state() == baton::v1::JOB_STATE_SUCCEEDED) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job is already SUCCEEDED");
    }
    it->second.set_state(baton::v1::JOB_STATE_CANCELLED);
    *response = it->second;
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext*, const baton::v1::WatchJobRequest* request,
                        grpc::ServerWriter<baton::v1::JobUpdate>* writer) override {
    WatchCall call;
    {
      absl::MutexLock lock(&mu_);
      watch_after_seqs_.push_back(request->after_seq());
      if (watch_script_.empty()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "script exhausted");
      }
      call = watch_script_.front();
      watch_script_.pop_front();
    }
    for (const baton::v1::JobUpdate& u : call.updates) writer->Write(u);
    return call.end;
  }

  grpc::Status GetLogs(grpc::ServerContext*, const baton::v1::GetLogsRequest* request,
                       grpc::ServerWriter<baton::v1::LogLine>* writer) override {
    std::vector<baton::v1::LogLine> lines;
    grpc::Status end = grpc::Status::OK;
    {
      absl::MutexLock lock(&mu_);
      logs_requests_.push_back(*request);
      for (const auto& line : logs_) {
        if (line.seq() <= request->after_seq()) continue;
        if (request->has_since() && (line.time().seconds() < request->since().seconds() ||
                                     (line.time().seconds() == request->since().seconds() &&
                                      line.time().nanos() < request->since().nanos()))) {
          continue;
        }
        lines.push_back(line);
      }
      if (request->tail() > 0 && lines.size() > static_cast<size_t>(request->tail())) {
        lines.erase(lines.begin(), lines.end() - request->tail());
      }
      if (logs_breaks_ > 0) {
        --logs_breaks_;
        lines.resize(std::min<size_t>(lines.size(), 1));
        end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
      }
    }
    for (const auto& line : lines) writer->Write(line);
    return end;
  }

  grpc::Status ListWorkers(grpc::ServerContext*, const baton::v1::ListWorkersRequest*,
                           baton::v1::ListWorkersResponse* response) override {
    auto* w = response->add_workers();
    w->set_id("w-a");
    w->set_host("10.0.0.5");
    w->mutable_resources()->set_slots(4);
    w->set_state(baton::v1::WORKER_STATE_READY);
    return grpc::Status::OK;
  }

  grpc::Status ProfileJob(grpc::ServerContext*, const baton::v1::ProfileJobRequest* request,
                          baton::v1::ProfileJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    profile_requests_.push_back(*request);
    if (!profile_status_.ok()) return profile_status_;
    *response = profile_response_;
    return grpc::Status::OK;
  }

  grpc::Status GetVersion(grpc::ServerContext*, const baton::v1::GetVersionRequest*,
                          baton::v1::GetVersionResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (!version_status_.ok()) return version_status_;
    *response = version_;
    return grpc::Status::OK;
  }
  void SetVersion(baton::v1::GetVersionResponse version, grpc::Status status = grpc::Status::OK) {
    absl::MutexLock lock(&mu_);
    version_ = std::move(version);
    version_status_ = std::move(status);
  }

  grpc::Status ListQueues(grpc::ServerContext*, const baton::v1::ListQueuesRequest*,
                          baton::v1::ListQueuesResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (!queues_status_.ok()) return queues_status_;
    *response = queues_;
    return grpc::Status::OK;
  }
  // What ListQueues answers: `queues` when `status` is OK, else `status` (e.g.
  // UNIMPLEMENTED, as a coordinator that predates queues).
  void SetQueues(baton::v1::ListQueuesResponse queues, grpc::Status status = grpc::Status::OK) {
    absl::MutexLock lock(&mu_);
    queues_ = std::move(queues);
    queues_status_ = std::move(status);
  }

  void AddJob(const baton::v1::Job& job) {
    absl::MutexLock lock(&mu_);
    jobs_[job.id()] = job;
  }
  void ScriptProfile(baton::v1::ProfileJobResponse response, grpc::Status status) {
    absl::MutexLock lock(&mu_);
    profile_response_ = std::move(response);
    profile_status_ = std::move(status);
  }
  std::vector<baton::v1::ProfileJobRequest> profile_requests() {
    absl::MutexLock lock(&mu_);
    return profile_requests_;
  }
  void ScriptWatch(std::vector<WatchCall> calls) {
    absl::MutexLock lock(&mu_);
    watch_script_.assign(calls.begin(), calls.end());
  }
  void FailSubmit(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    submit_error_ = status;
  }
  // The next SubmitJob calls fail with these, in order.
  void FailNextSubmits(std::vector<grpc::Status> failures) {
    absl::MutexLock lock(&mu_);
    submit_failures_.assign(failures.begin(), failures.end());
  }
  std::vector<std::string> request_ids() {
    absl::MutexLock lock(&mu_);
    return request_ids_;
  }
  void SetLogs(std::vector<baton::v1::LogLine> lines, int breaks) {
    absl::MutexLock lock(&mu_);
    logs_ = std::move(lines);
    logs_breaks_ = breaks;
  }
  std::vector<int64_t> watch_after_seqs() {
    absl::MutexLock lock(&mu_);
    return watch_after_seqs_;
  }
  std::vector<baton::v1::JobSpec> submitted() {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  std::vector<baton::v1::GetLogsRequest> logs_requests() {
    absl::MutexLock lock(&mu_);
    return logs_requests_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, baton::v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  baton::v1::ProfileJobResponse profile_response_ ABSL_GUARDED_BY(mu_);
  grpc::Status profile_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::vector<baton::v1::ProfileJobRequest> profile_requests_ ABSL_GUARDED_BY(mu_);
  std::deque<WatchCall> watch_script_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> watch_after_seqs_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::JobSpec> submitted_ ABSL_GUARDED_BY(mu_);
  grpc::Status submit_error_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::deque<grpc::Status> submit_failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> request_ids_ ABSL_GUARDED_BY(mu_);
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::ListJobsRequest> list_requests_ ABSL_GUARDED_BY(mu_);
  baton::v1::GetVersionResponse version_ ABSL_GUARDED_BY(mu_);
  grpc::Status version_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  baton::v1::ListQueuesResponse queues_ ABSL_GUARDED_BY(mu_);
  grpc::Status queues_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::vector<baton::v1::LogLine> logs_ ABSL_GUARDED_BY(mu_);
  int logs_breaks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::GetLogsRequest> logs_requests_ ABSL_GUARDED_BY(mu_);
};

// Serves `fake` (both services) on 127.0.0.1:0 and stores the port in `*port`; null if the
// server did not start.
inline std::unique_ptr<grpc::Server> ServeFakeCoordinator(FakeCoordinator& fake, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(static_cast<baton::v1::JobService::Service*>(&fake));
  builder.RegisterService(static_cast<baton::v1::ClusterService::Service*>(&fake));
  return builder.BuildAndStart();
}

}  // namespace baton::cli
