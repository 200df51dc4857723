#include "coordinator/ha/replica.h"

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics_http.h"
#include "common/status_macros.h"
#include "coordinator/store/etcd_store.h"

namespace baton::coordinator {
namespace {

// The store's calls wait this long for etcd (a commit that cannot finish halts the
// coordinator anyway); the election's are bounded by its renewal period.
constexpr absl::Duration kStoreCallTimeout = absl::Seconds(5);

absl::StatusOr<std::shared_ptr<EtcdKv>> ConnectEtcd(const ReplicaOptions& options,
                                                    absl::Duration call_timeout) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.etcd_tls.ca.empty()) {
    ASSIGN_OR_RETURN(credentials, MakeChannelCredentials({false, options.etcd_tls}));
  }
  std::vector<EtcdEndpoint> endpoints;
  for (const std::string& e : options.etcd.endpoints) {
    endpoints.push_back({e, grpc::CreateChannel(e, credentials)});
  }
  EtcdKv::Options kv;
  kv.call_timeout = call_timeout;
  return std::make_shared<EtcdKv>(std::move(endpoints), kv);
}

void ExitOnLost(const absl::Status& why) {
  std::fprintf(stderr, "baton-coordinator: %s; exiting\n", std::string(why.message()).c_str());
  std::_Exit(1);
}

}  // namespace

CoordinatorReplica::CoordinatorReplica(ReplicaOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

CoordinatorReplica::~CoordinatorReplica() { Shutdown(); }

absl::Status CoordinatorReplica::Start() {
  const std::string listen_host = HostOfAddress(options_.server.listen);
  if (options_.advertise.empty() &&
      (listen_host.empty() || listen_host == "0.0.0.0" || listen_host == "::")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--advertise_address (HOST:PORT this replica is dialled at) is required with "
        "--store=etcd://... when --listen (",
        options_.server.listen, ") is a wildcard address: standbys name it in redirects"));
  }
  RETURN_IF_ERROR(ValidateElectionOptions(options_.election, options_.server.lease.lease));
  const TransportSecurity& security = options_.server.security;
  if (security.insecure) {
    RETURN_IF_ERROR(CheckLoopbackOnly(options_.server.listen, "--listen"));
    credentials_ = grpc::InsecureServerCredentials();
  } else {
    ASSIGN_OR_RETURN(credentials_, MakeServerCredentials(security));
  }
  ASSIGN_OR_RETURN(store_kv_, ConnectEtcd(options_, kStoreCallTimeout));
  ASSIGN_OR_RETURN(std::shared_ptr<EtcdKv> election_kv,
                   ConnectEtcd(options_, options_.election.renew_every));
  StandbyServerOptions standby;
  standby.listen = options_.server.listen;
  standby.health_listen = options_.server.health_listen;
  standby.self = options_.advertise;
  standby.leader = [this] {
    const LeaderElection* election = election_ready_.load();
    return election == nullptr ? std::string() : election->leader();
  };
  ASSIGN_OR_RETURN(standby_, StandbyServer::Start(std::move(standby), credentials_));
  port_ = standby_->port();
  health_port_ = standby_->health_port();
  // A specific --listen host with an OS-picked port: that host and the bound port.
  std::string self = options_.advertise;
  if (self.empty()) {
    self = absl::StrCat(options_.server.listen.substr(0, options_.server.listen.rfind(':')), ":",
                        port_);
    standby_->set_self(self);
  }
  election_ = std::make_unique<LeaderElection>(
      std::move(election_kv),
      LeaderElectionOptions{options_.etcd.store.prefix + "leader", self, options_.election},
      clock_);
  election_ready_.store(election_.get());
  RETURN_IF_ERROR(ServeStandbyMetrics());
  BATON_LOG(INFO) << "baton-coordinator " << self << ": standby on port " << port_
                  << ", campaigning on " << options_.etcd.store.prefix << "leader";
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status CoordinatorReplica::ServeStandbyMetrics() {
  if (options_.server.metrics_listen.empty()) return absl::OkStatus();
  standby_metrics_ = std::make_shared<StandbyMetrics>(
      [election = election_.get()] { return election->etcd_errors(); });
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
      ServeMetrics(options_.server.metrics_listen, standby_metrics_);
  if (!exposer.ok()) {
    // As the coordinator does: training does not depend on the metrics endpoint.
    BATON_LOG(ERROR) << exposer.status() << "; serving without a metrics endpoint";
    return absl::OkStatus();
  }
  exposer_ = *std::move(exposer);
  metrics_port_ = exposer_->GetListeningPorts().front();
  return absl::OkStatus();
}

void CoordinatorReplica::Run() {
  absl::StatusOr<EtcdFence> fence = election_->Campaign();
  if (!fence.ok()) return;  // stopped
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
  }
  // Renew from the start: loading the state takes time, and the lease runs meanwhile.
  election_->KeepLeading(options_.on_lost ? options_.on_lost : ExitOnLost);
  standby_->Shutdown();
  if (absl::Status s = Lead(*fence); !s.ok()) {
    BATON_LOG(ERROR) << "won the election but cannot serve: " << s;
    election_->Resign().IgnoreError();
    (options_.on_lost ? options_.on_lost : ExitOnLost)(s);
  }
}

absl::Status CoordinatorReplica::Lead(const EtcdFence& fence) {
  ServerOptions server = options_.server;
  // The standby's ports, now free: workers and probes keep dialling the same address.
  const std::string host = HostOfAddress(server.listen);
  server.listen =
      absl::StrCat(host.find(':') != std::string::npos ? "[" + host + "]" : host, ":", port_);
  // The standby's metrics endpoint goes on serving, the leader's metrics now (stopping
  // and rebinding an endpoint takes seconds).
  server.metrics_listen.clear();
  server.metrics.election_errors = [election = election_.get()] { return election->etcd_errors(); };
  if (health_port_ != 0) {
    server.health_listen =
        absl::StrCat(HostOfAddress(options_.server.health_listen), ":", health_port_);
  }
  server.open_store = [kv = store_kv_, fence, etcd = options_.etcd.store](
                          const std::string& path) -> absl::StatusOr<std::unique_ptr<Store>> {
    // Only the history (points, lines) is local; its own file, never the SQLite store's.
    const std::string dir = path.substr(0, path.rfind('/'));
    ASSIGN_OR_RETURN(std::unique_ptr<Store> local, Store::Open(dir + "/history.db"));
    return EtcdStore::Open(kv, fence, std::move(local), etcd);
  };
  auto coordinator = std::make_unique<CoordinatorServer>(std::move(server), clock_);
  RETURN_IF_ERROR(coordinator->Start());
  if (exposer_ != nullptr) {
    exposer_->RegisterCollectable(coordinator->metrics());
    exposer_->RemoveCollectable(standby_metrics_);
  }
  absl::MutexLock lock(&mu_);
  server_ = std::move(coordinator);
  return absl::OkStatus();
}

bool CoordinatorReplica::halted() const {
  absl::MutexLock lock(&mu_);
  return server_ != nullptr && server_->halted();
}

absl::Status CoordinatorReplica::ReloadTokens() {
  absl::MutexLock lock(&mu_);
  return server_ == nullptr ? absl::OkStatus() : server_->ReloadTokens();
}

absl::Status CoordinatorReplica::ReloadQueues() {
  absl::MutexLock lock(&mu_);
  return server_ == nullptr ? absl::OkStatus() : server_->ReloadQueues();
}

void CoordinatorReplica::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // A leader keeps renewing until it has stopped deciding and serving: its lease must not
  // run out (and a standby lead) while it still acts. Then it resigns.
  if (election_ != nullptr) election_->StopCampaign();
  if (thread_.joinable()) thread_.join();
  std::unique_ptr<CoordinatorServer> server;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(server_);
  }
  if (server != nullptr) server->Shutdown();  // quiesces first, then closes the streams
  exposer_.reset();                           // no scrape reaches the server after this
  server.reset();
  if (standby_ != nullptr) standby_->Shutdown();
  if (election_ != nullptr) {
    if (absl::Status s = election_->Resign(); !s.ok()) {
      BATON_LOG(WARNING) << "resigning: " << s << "; a standby leads once the lease expires";
    }
  }
}

}  // namespace baton::coordinator
