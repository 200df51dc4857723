#include "worker/worker_daemon.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/health/health_port.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/metrics_http.h"
#include "common/port_file.h"
#include "worker/agent/lease.h"
#include "worker/agent/outbox.h"
#include "worker/host/peer_probe.h"
#include "worker/metrics.h"
#include "worker/process/child_reaper.h"
#include "worker/process/lease_fence.h"
#include "worker/process/posix_process_launcher.h"
#include "worker/process/rank_cgroups.h"

namespace baton::worker {

// Everything the daemon runs, in the order it is built (and, reversed, destroyed): the
// exposer before the supervisor and the agent its collectables read, the health port
// before the agent whose lease its check reads.
struct WorkerDaemon::Parts {
  ChildRegistry children;
  std::optional<OrphanReaper> reaper;
  std::unique_ptr<ProbeListener> probe;
  std::unique_ptr<LeaseFence> fence;
  std::unique_ptr<RankCgroups> cgroups;  // Null: the fallback (shims, KillOrphans).
  std::unique_ptr<PosixProcessLauncher> posix_launcher;
  std::unique_ptr<StandbyLauncher> launcher;
  std::unique_ptr<Outbox> outbox;
  Supervisor* supervisor_for_metrics = nullptr;  // Set before anything scrapes.
  std::shared_ptr<WorkerMetrics> metrics;
  std::unique_ptr<MetricsListener> listener;
  std::unique_ptr<Supervisor> supervisor;
  std::unique_ptr<Agent> agent;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;  // Held weakly.
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<HealthPort> health;
};

WorkerDaemon::WorkerDaemon(WorkerDaemonOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock), parts_(std::make_unique<Parts>()) {}

WorkerDaemon::~WorkerDaemon() {
  if (started_ && !shut_down_) Shutdown(options_.supervisor.default_stop_grace);
}

absl::Status WorkerDaemon::Start() {
  Parts& p = *parts_;
  p.reaper.emplace(&p.children);
  p.reaper->Start();
  absl::StatusOr<std::unique_ptr<ProbeListener>> probe = ProbeListener::Start(options_.probe_port);
  if (!probe.ok()) {
    return absl::Status(probe.status().code(),
                        absl::StrCat("--probe_port: ", probe.status().message()));
  }
  p.probe = *std::move(probe);
  options_.agent.probe_port = p.probe->port();
  // The lease every rank's shim enforces on its own, even if this daemon hangs.
  absl::StatusOr<std::unique_ptr<LeaseFence>> fence = LeaseFence::Create();
  if (!fence.ok()) return fence.status();
  p.fence = *std::move(fence);
  // A cgroup per rank where this process may make them (else the shims and KillOrphans).
  absl::StatusOr<std::unique_ptr<RankCgroups>> cgroups = RankCgroups::Create();
  if (cgroups.ok()) {
    p.cgroups = *std::move(cgroups);
    BATON_LOG(INFO) << "ranks run in cgroups under " << p.cgroups->ranks_dir();
    // Hidden from ranks, so none can move itself out of its cgroup.
    options_.supervisor.secret_files.push_back(p.cgroups->own_dir());
  } else {
    BATON_LOG(WARNING) << "no cgroup per rank (" << cgroups.status().message()
                       << "): a rank's processes are tracked by its shim, and what escapes "
                          "a shim that dies is killed as the worker's orphan";
  }
  p.posix_launcher =
      std::make_unique<PosixProcessLauncher>(&p.children, p.fence.get(), p.cgroups.get());
  p.launcher = std::make_unique<StandbyLauncher>(options_.standby, p.posix_launcher.get(), clock_);
  if (absl::Status s = p.launcher->Start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("standby trainers: ", s.message()));
  }
  p.outbox = std::make_unique<Outbox>(OutboxOptions(), clock_);
  p.metrics = std::make_shared<WorkerMetrics>(
      WorkerMetricsOptions(), clock_,
      [&p](const std::string& job_id, int64_t generation, int32_t rank) {
        const std::optional<RankState> state =
            p.supervisor_for_metrics->GetRankState(job_id, generation, rank);
        return state.has_value() && *state != RankState::kExited;
      });
  p.listener = std::make_unique<MetricsListener>(p.metrics.get(), p.outbox.get());
  p.supervisor = std::make_unique<Supervisor>(options_.supervisor, p.launcher.get(), clock_,
                                              p.listener.get());
  p.supervisor_for_metrics = p.supervisor.get();
  p.agent = std::make_unique<Agent>(options_.agent, p.supervisor.get(), p.outbox.get(), clock_,
                                    p.metrics.get());
  RETURN_IF_ERROR(p.supervisor->Start());
  Supervisor* supervisor = p.supervisor.get();
  p.collectables = {
      std::make_shared<StandbyMetrics>(p.launcher.get()),
      std::make_shared<LeaseMetrics>(
          &p.agent->lease(), [supervisor] { return supervisor->lease_expirations(); }, clock_),
      std::make_shared<SupervisorMetrics>(
          SupervisorMetrics::Counters{
              [supervisor] { return supervisor->illegal_rank_transitions(); },
              [supervisor] { return supervisor->dropped_log_lines(); },
              [supervisor] { return supervisor->capped_rank_logs(); }},
          p.cgroups != nullptr)};
  RETURN_IF_ERROR(StartMetrics());
  if (!options_.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthPort>> port = HealthPort::Start(options_.health_listen);
    if (!port.ok()) {
      return absl::Status(port.status().code(),
                          absl::StrCat("--health_listen: ", port.status().message()));
    }
    p.health = *std::move(port);
    const Lease* lease = &p.agent->lease();
    Clock* clock = clock_;
    p.health->SetCheck("baton.v1.WorkerService", [lease, clock] {
      return lease->duration() > absl::ZeroDuration() && lease->Valid(clock->Now());
    });
  }
  RETURN_IF_ERROR(p.agent->Start());
  started_ = true;
  return absl::OkStatus();
}

absl::Status WorkerDaemon::StartMetrics() {
  Parts& p = *parts_;
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> served =
      ServeMetrics(options_.metrics_listen, p.metrics);
  if (!served.ok()) {
    // Training does not depend on it: logged, and the scrape target shows down.
    BATON_LOG(ERROR) << served.status() << "; running without a metrics endpoint";
    return absl::OkStatus();
  }
  p.exposer = *std::move(served);
  const int port = p.exposer->GetListeningPorts().front();
  BATON_LOG(INFO) << "metrics on port " << port << " (/metrics)";
  for (const auto& c : p.collectables) p.exposer->RegisterCollectable(c);
  if (!options_.metrics_port_file.empty()) {
    if (absl::Status s = WritePortFile(options_.metrics_port_file, port); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--metrics_port_file: ", s.message()));
    }
  }
  return absl::OkStatus();
}

bool WorkerDaemon::Drain(const std::string& why, absl::Time deadline) {
  parts_->agent->Drain(why);
  // The coordinator stops this worker's processes once they checkpointed; an assignment
  // is forgotten once its exits were reported.
  return parts_->supervisor->AwaitIdle(deadline);
}

void WorkerDaemon::EndDrain() { parts_->supervisor->EndIdleWait(); }

size_t WorkerDaemon::assignment_count() const { return parts_->supervisor->assignment_count(); }

void WorkerDaemon::Shutdown(absl::Duration grace) {
  shut_down_ = true;
  if (parts_->supervisor != nullptr) parts_->supervisor->Shutdown(grace);
  if (parts_->agent != nullptr) parts_->agent->Stop();
}

}  // namespace baton::worker
