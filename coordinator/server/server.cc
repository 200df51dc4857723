#include "coordinator/server/server.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/spec/message_limits.h"
#include "common/status_macros.h"

namespace baton::coordinator {
namespace {

}  // namespace

CoordinatorServer::CoordinatorServer(ServerOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::ZeroDuration()); }

absl::Status CoordinatorServer::Start() {
  RETURN_IF_ERROR(OpenState());
  loop_ = std::make_unique<EventLoop>();
  metrics_ = std::make_shared<CoordinatorMetrics>(options_.metrics, loop_.get(), jobs_.get(),
                                                  coordinator_.get(), clock_);
  RETURN_IF_ERROR(Serve());
  coordinator_->SetHaltHandler([this](const absl::Status& why) { Halt(why, options_.on_halt); });
  loop_->Every(options_.reconcile_period, [c = coordinator_.get()] { c->ReconcileOnce(); });
  ServeMetrics();
  BATON_LOG(INFO) << "baton-coordinator listening on port " << port_ << ", state in "
                  << options_.state_dir;
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
  jobs_ = std::make_unique<JobManager>(store_.get(), clock_, job_options);
  RETURN_IF_ERROR(jobs_->Load());
  workers_ = std::make_unique<WorkerRegistry>(clock_, options_.lease);
  coordinator_ = std::make_unique<Coordinator>(jobs_.get(), workers_.get(), clock_,
                                               options_.coordinator);
  return coordinator_->Recover();
}

absl::Status CoordinatorServer::Serve() {
  job_service_ = std::make_unique<JobServiceImpl>(loop_.get(), coordinator_.get(), jobs_.get());
  cluster_service_ = std::make_unique<ClusterServiceImpl>(loop_.get(), coordinator_.get());
  worker_service_ = std::make_unique<WorkerServiceImpl>(loop_.get(), coordinator_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
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
  server_->GetHealthCheckService()->SetServingStatus("baton.v1.JobService", true);
  server_->GetHealthCheckService()->SetServingStatus("baton.v1.WorkerService", true);
  return absl::OkStatus();
}

void CoordinatorServer::Halt(const absl::Status& why,
                             const std::function<void(const absl::Status&)>& handler) {
  halted_ = true;
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);  // all
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
