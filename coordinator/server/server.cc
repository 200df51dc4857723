#include "coordinator/server/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/spec/message_limits.h"
#include "common/status_macros.h"
#include "coordinator/auth/reflection_gate.h"
#include "coordinator/queues/queue_file.h"

namespace baton::coordinator {
namespace {

}  // namespace

CoordinatorServer::CoordinatorServer(ServerOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock), user_streams_(options_.streams) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::ZeroDuration()); }

absl::Status CoordinatorServer::Start() {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, PrepareSecurity());
  std::optional<QueueSet> queues;
  if (!options_.queue_file.empty()) {
    ASSIGN_OR_RETURN(queues, ReadQueueFile(options_.queue_file));
  }
  RETURN_IF_ERROR(OpenState());
  if (queues.has_value()) {
    BATON_LOG(INFO) << "queues from " << options_.queue_file << ": " << queues->queues.size()
                    << " queue(s)";
    coordinator_->SetQueues(*std::move(queues));  // before any thread runs
  }
  loop_ = std::make_unique<EventLoop>();
  metrics_ = std::make_shared<CoordinatorMetrics>(options_.metrics, loop_.get(), jobs_.get(),
                                                  coordinator_.get(), clock_);
  RETURN_IF_ERROR(Serve(std::move(credentials)));
  coordinator_->SetHaltHandler([this](const absl::Status& why) { Halt(why, options_.on_halt); });
  loop_->Every(options_.reconcile_period, [c = coordinator_.get()] { c->ReconcileOnce(); });
  // Group commit: the ranks' reports of a burst (N AssignmentStarted, N exits) are written
  // in one transaction once the loop has nothing more to do.
  loop_->WhenIdle([c = coordinator_.get()] { c->OnIdle(); });
  ServeMetrics();
  BATON_LOG(INFO) << "baton-coordinator listening on port " << port_ << ", state in "
                  << options_.state_dir;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CoordinatorServer::PrepareSecurity() {
  access_ = std::make_unique<AccessPolicy>(options_.access);
  if (!options_.token_file.empty()) {
    ASSIGN_OR_RETURN(auth_, Authenticator::FromTokenFile(options_.token_file));
  } else if (options_.security.insecure) {
    auth_ = Authenticator::AllowAll();
  } else {
    return absl::InvalidArgumentError(
        "a TLS coordinator needs --token_file (the users' token hashes; tools/certs.sh "
        "makes one)");
  }
  if (options_.security.insecure) {
    RETURN_IF_ERROR(CheckLoopbackOnly(options_.listen, "--listen"));
    BATON_LOG(WARNING) << "serving plaintext (--insecure) on " << options_.listen
                       << (options_.token_file.empty() ? ", every caller an anonymous admin"
                                                       : "");
    return grpc::InsecureServerCredentials();
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options_.security));
  credentials->SetAuthMetadataProcessor(std::make_shared<ReflectionGate>(auth_.get()));
  return credentials;
}

absl::Status CoordinatorServer::ReloadTokens() {
  if (auth_ == nullptr) return absl::FailedPreconditionError("not started");
  RETURN_IF_ERROR(auth_->Reload());
  const Authenticator* auth = auth_.get();
  if (const int ended = user_streams_.EndRevoked(
          [auth](const std::string& hash) { return auth->Holds(hash); });
      ended > 0) {
    BATON_LOG(INFO) << "ended " << ended << " open stream(s) of revoked tokens";
  }
  return absl::OkStatus();
}

absl::Status CoordinatorServer::ReloadQueues() {
  if (options_.queue_file.empty()) return absl::OkStatus();
  if (loop_ == nullptr) return absl::FailedPreconditionError("not started");
  ASSIGN_OR_RETURN(QueueSet queues, ReadQueueFile(options_.queue_file));
  BATON_LOG(INFO) << "re-read the queue file " << options_.queue_file << ": "
                  << queues.queues.size() << " queue(s)";
  loop_->Post(
      [c = coordinator_.get(), q = std::move(queues)]() mutable { c->SetQueues(std::move(q)); });
  return absl::OkStatus();
}

absl::Status CoordinatorServer::OpenState() {
  // The state directory and the database hold every job's spec, env included: 0700/0600.
  RETURN_IF_ERROR(MakePrivateDirs(options_.state_dir));
  ASSIGN_OR_RETURN(state_lock_, StateDirLock::Acquire(options_.state_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                   options_.open_store(options_.state_dir + "/coordinator.db"));
  store_ = std::make_unique<WatchedStore>(
      std::move(store), clock_, options_.store_stall_limit, [this](const absl::Status& why) {
        BATON_LOG(ERROR) << why.message();
        Halt(why, options_.on_store_stuck ? options_.on_store_stuck : options_.on_halt);
      });
  JobManagerOptions job_options;
  job_options.retention = options_.retention;
  job_options.max_active_jobs_per_owner = options_.max_jobs_per_user;
  jobs_ = std::make_unique<JobManager>(store_.get(), clock_, job_options);
  RETURN_IF_ERROR(jobs_->Load());
  workers_ = std::make_unique<WorkerRegistry>(clock_, options_.lease);
  coordinator_ = std::make_unique<Coordinator>(jobs_.get(), workers_.get(), clock_,
                                               options_.coordinator);
  return coordinator_->Recover();
}

absl::Status CoordinatorServer::Serve(std::shared_ptr<grpc::ServerCredentials> credentials) {
  const CallerChecks checks{auth_.get(), access_.get(), &user_streams_};
  job_service_ =
      std::make_unique<JobServiceImpl>(loop_.get(), coordinator_.get(), jobs_.get(), checks);
  cluster_service_ = std::make_unique<ClusterServiceImpl>(loop_.get(), coordinator_.get(), checks);
  worker_service_ = std::make_unique<WorkerServiceImpl>(loop_.get(), coordinator_.get(),
                                                        !options_.security.insecure);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Reflection (which linking grpc++_reflection adds to every server) only where it can be
  // limited to authenticated callers: behind ReflectionGate on TLS, or where every caller
  // is an admin anyway (--insecure without tokens).
  if (options_.security.insecure && !options_.token_file.empty()) {
    builder.SetOption(WithoutReflection());
  }
  builder.AddListeningPort(options_.listen, std::move(credentials), &port_);
  // gRPC binds with SO_REUSEPORT by default: a second coordinator (another state
  // directory) would then share the port and the kernel would split connections between
  // the two. Refuse a port in use instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Above every message the coordinator sends or accepts (common/spec/message_limits.h): a spec
  // too large is an INVALID_ARGUMENT at submit, never a broken worker stream later.
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(cluster_service_.get());
  builder.RegisterService(worker_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(RpcMetricsInterceptor(metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // Workers keep their streams alive through idle NATs/proxies.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
  }
  RETURN_IF_ERROR(ServeHealth());
  SetHealth("baton.v1.JobService", true);
  SetHealth("baton.v1.WorkerService", true);
  return absl::OkStatus();
}

absl::Status CoordinatorServer::ServeHealth() {
  if (options_.health_listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<HealthPort>> port = HealthPort::Start(options_.health_listen);
  if (!port.ok()) {
    return absl::Status(port.status().code(),
                        absl::StrCat(port.status().message(), " (--health_listen)"));
  }
  health_port_ = *std::move(port);
  return absl::OkStatus();
}

void CoordinatorServer::SetHealth(const std::string& service, bool serving) {
  if (health_port_ != nullptr) health_port_->Set(service, serving);
  if (server_ == nullptr) return;
  if (service.empty()) {
    server_->GetHealthCheckService()->SetServingStatus(serving);  // every service
  } else {
    server_->GetHealthCheckService()->SetServingStatus(service, serving);
  }
}

void CoordinatorServer::Halt(const absl::Status& why,
                             const std::function<void(const absl::Status&)>& handler) {
  halted_ = true;
  SetHealth("", false);
  if (handler) handler(why);
}

void CoordinatorServer::ServeMetrics() {
  if (options_.metrics_listen.empty()) return;
  // Training does not depend on the metrics endpoint: a taken port is logged (and the
  // scrape target shows down), the coordinator still serves.
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
      coordinator::ServeMetrics(options_.metrics_listen, metrics_);
  if (exposer.ok()) {
    exposer_ = *std::move(exposer);
    metrics_port_ = exposer_->GetListeningPorts().front();
    BATON_LOG(INFO) << "metrics on port " << metrics_port_ << " (/metrics)";
  } else {
    BATON_LOG(ERROR) << exposer.status() << "; serving without a metrics endpoint";
  }
}

void CoordinatorServer::Shutdown(absl::Duration grace) {
  exposer_.reset();  // No scrape reaches the loop after this.
  health_port_.reset();
  // Stop deciding before the streams close: the loop runs this before any disconnect the
  // shutdown causes, so no worker counts as lost and no job restarts for it.
  if (loop_ != nullptr && coordinator_ != nullptr) {
    loop_->Post([c = coordinator_.get()] { c->Quiesce(); });
  }
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
    server_->Wait();
    server_.reset();
  }
  if (loop_ != nullptr) loop_->Stop();
}

}  // namespace baton::coordinator
