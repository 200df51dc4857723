#pragma once

#include <grpcpp/grpcpp.h>

#include "baton/v1/job_service.grpc.pb.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "coordinator/auth/access_policy.h"
#include "coordinator/auth/authenticator.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/server/event_loop.h"
#include "coordinator/server/user_streams.h"

namespace baton::coordinator {

// gRPC glue, callback API. Each handler converts the request, posts one call into the
// domain objects on the event loop, and finishes the RPC with the converted status.
// No handler blocks a gRPC thread. All pointers must outlive the services.
//
// Every JobService and ClusterService call is authenticated first (Authenticator: the
// bearer token; UNAUTHENTICATED without a valid one) and then checked against the
// AccessPolicy (PERMISSION_DENIED); jobs are returned with env values hidden from callers
// who are neither their owner nor an admin.

// What the user-facing services check callers against.
struct CallerChecks {
  const Authenticator* auth;
  const AccessPolicy* policy;
  UserStreams* streams;  // Bounds and ends the callers' WatchJob/GetLogs streams.
};

class JobServiceImpl final : public baton::v1::JobService::CallbackService {
 public:
  // SubmitJob validates the spec syntactically only (ValidateJobSpec): a spec's paths are
  // the workers' to check (their file systems, their --allowed_paths), never probed here.
  JobServiceImpl(EventLoop* loop, Coordinator* coordinator, JobManager* jobs, CallerChecks checks)
      : loop_(loop), coordinator_(coordinator), jobs_(jobs), checks_(checks) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const baton::v1::SubmitJobRequest* req,
                                      baton::v1::SubmitJobResponse* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const baton::v1::GetJobRequest* req,
                                   baton::v1::Job* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const baton::v1::ListJobsRequest* req,
                                     baton::v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const baton::v1::CancelJobRequest* req,
                                      baton::v1::Job* resp) override;
  grpc::ServerWriteReactor<baton::v1::JobUpdate>* WatchJob(
      grpc::CallbackServerContext* ctx, const baton::v1::WatchJobRequest* req) override;
  grpc::ServerWriteReactor<baton::v1::LogLine>* GetLogs(
      grpc::CallbackServerContext* ctx, const baton::v1::GetLogsRequest* req) override;
  // Who may cancel a job may profile it (it signals the job's processes). Finished once
  // every asked rank answered (Coordinator::ProfileJob).
  grpc::ServerUnaryReactor* ProfileJob(grpc::CallbackServerContext* ctx,
                                       const baton::v1::ProfileJobRequest* req,
                                       baton::v1::ProfileJobResponse* resp) override;

 private:
  // SubmitJob's part on the loop.
  absl::Status Submit(grpc::CallbackServerContext* ctx, const baton::v1::SubmitJobRequest* req,
                      const Principal& caller, baton::v1::SubmitJobResponse* resp);

  EventLoop* const loop_;
  Coordinator* const coordinator_;
  JobManager* const jobs_;
  const CallerChecks checks_;
};

class ClusterServiceImpl final : public baton::v1::ClusterService::CallbackService {
 public:
  ClusterServiceImpl(EventLoop* loop, Coordinator* coordinator, CallerChecks checks)
      : loop_(loop), coordinator_(coordinator), checks_(checks) {}

  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx,
                                        const baton::v1::ListWorkersRequest* req,
                                        baton::v1::ListWorkersResponse* resp) override;
  // Any authenticated caller may ask (no read permission needed).
  grpc::ServerUnaryReactor* GetVersion(grpc::CallbackServerContext* ctx,
                                       const baton::v1::GetVersionRequest* req,
                                       baton::v1::GetVersionResponse* resp) override;
  // Admins only (AccessPolicy::CanManageWorkers); the cordon records who asked.
  grpc::ServerUnaryReactor* CordonWorker(grpc::CallbackServerContext* ctx,
                                         const baton::v1::CordonWorkerRequest* req,
                                         baton::v1::Worker* resp) override;
  grpc::ServerUnaryReactor* UncordonWorker(grpc::CallbackServerContext* ctx,
                                           const baton::v1::UncordonWorkerRequest* req,
                                           baton::v1::Worker* resp) override;
  grpc::ServerUnaryReactor* ListQueues(grpc::CallbackServerContext* ctx,
                                       const baton::v1::ListQueuesRequest* req,
                                       baton::v1::ListQueuesResponse* resp) override;

 private:
  EventLoop* const loop_;
  Coordinator* const coordinator_;
  const CallerChecks checks_;
};

class WorkerServiceImpl final : public baton::v1::WorkerService::CallbackService {
 public:
  // With `require_certificate`, a worker registers only under a name of its verified
  // client certificate (CheckWorkerIdentity).
  WorkerServiceImpl(EventLoop* loop, Coordinator* coordinator, bool require_certificate)
      : loop_(loop), coordinator_(coordinator), require_certificate_(require_certificate) {}

  grpc::ServerBidiReactor<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;

 private:
  EventLoop* const loop_;
  Coordinator* const coordinator_;
  const bool require_certificate_;
};

// "127.0.0.1" from a gRPC peer string like "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000".
std::string HostFromPeer(const std::string& peer);

}  // namespace baton::coordinator
