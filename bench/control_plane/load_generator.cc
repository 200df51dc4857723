// load_generator: control-plane load on a real coordinator. Registers N simulated workers
// (sim_workers.h), submits a `command` job needing all of them, and measures:
//   - submit -> the last StartAssignment received by a simulated worker;
//   - submit -> RUNNING (the time of the coordinator's RUNNING event);
//   - over a steady window (heartbeats every interval, a metric point per rank every
//     --metric_period, M watchers on the job, a CLI-like client listing jobs and workers):
//     the coordinator's CPU seconds per second and RSS (from /proc/<--coordinator_pid>);
//     and, with --metrics, the store's transactions (fsyncs) per second and the share of
//     the event loop they take (baton_coordinator_store_commit*); the latency of the
//     watchers' stream: a metric point's send time -> a watcher received it (p50, p99);
//   - with --lose_worker (N + 1 workers registered, the job needs N): after the window one
//     running worker goes silent (partitioned); the coordinator's RESTARTING and the next
//     generation's RUNNING event times, from the silent worker's last heartbeat;
//   - after every rank reported exit 0: -> SUCCEEDED (or, --end=cancel: -> CANCELLED).
// Prints one "result key=value ..." line. Exit status 0 iff every simulated worker got its
// StartAssignment, the job went RUNNING then SUCCEEDED (CANCELLED, every worker sent its
// StopAssignment), every watcher saw that end and no worker stream broke. Bounded: every wait has a
// deadline.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "bench/control_plane/failover.h"
#include "bench/control_plane/job_watch.h"
#include "bench/control_plane/probes.h"
#include "bench/control_plane/sim_workers.h"
#include "common/grpc_status.h"
#include "common/net/coordinator_addresses.h"

ABSL_FLAG(std::string, coordinator, "",
          "The coordinator (HOST:PORT), plaintext (--insecure). With --failover: its replicas' "
          "addresses, comma-separated.");
ABSL_FLAG(int, workers, 100, "Simulated workers N; the job needs all of them.");
ABSL_FLAG(int, slots, 1, "Slots per worker, and slots_per_worker of the job.");
ABSL_FLAG(int, workers_per_channel, 100, "Worker streams per HTTP/2 connection.");
ABSL_FLAG(int, watchers, 2, "WatchJob streams on the job (at least 1: it times RUNNING).");
ABSL_FLAG(absl::Duration, metric_period, absl::Seconds(10), "A metric point per rank this often.");
ABSL_FLAG(absl::Duration, steady, absl::Seconds(20), "The steady-state window measured.");
ABSL_FLAG(absl::Duration, list_period, absl::Seconds(1),
          "The CLI-like client lists jobs and workers this often during the window.");
ABSL_FLAG(int, coordinator_pid, 0, "The coordinator's pid for CPU and RSS (0: not measured).");
ABSL_FLAG(std::string, end, "finish",
          "How the job ends after the window: 'finish' (every rank exits 0: SUCCEEDED) or "
          "'cancel' (CancelJob: CANCELLED, every worker sent its StopAssignment).");
ABSL_FLAG(std::string, metrics, "",
          "The coordinator's metrics endpoint (127.0.0.1:PORT): store transactions per second "
          "over the window (empty: not measured).");
ABSL_FLAG(std::string, etcd_metrics, "",
          "With a coordinator on etcd: etcd's client address (127.0.0.1:PORT), whose /metrics "
          "give its writes per second over the window (with --failover: during the failover). "
          "Empty: not measured.");
ABSL_FLAG(int, etcd_pid, 0, "etcd's pid for its CPU over the window (0: not measured).");
ABSL_FLAG(bool, lose_worker, false,
          "Register N + 1 workers; after the window one running worker goes silent, and the "
          "time until the coordinator restarts the job on N is measured.");
ABSL_FLAG(std::string, id_prefix, "sim-", "Simulated worker ids are <id_prefix><index>.");
ABSL_FLAG(bool, failover, false,
          "Measure a failover instead (failover.h): N workers run --jobs jobs; the leading "
          "replica is SIGKILLed; a replica serving again, every worker re-registered, every "
          "job re-attached in its generation.");
ABSL_FLAG(std::string, pid_files, "",
          "With --failover: per --coordinator address, in the same order, a file holding that "
          "replica's pid (comma-separated).");
ABSL_FLAG(int, jobs, 1, "With --failover: jobs of --workers / --jobs workers each.");
ABSL_FLAG(absl::Duration, settle, absl::Seconds(2),
          "With --failover: every job RUNNING -> the kill (steady heartbeats).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(120),
          "Deadline of each phase (registration, start, RUNNING, SUCCEEDED).");

namespace baton::bench {
namespace {

// Latencies (ms) of the CLI-like client's calls.
struct ListStats {
  std::vector<double> list_jobs_ms;
  std::vector<double> list_workers_ms;
  int errors = 0;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Counts the READY workers whose id starts with `prefix`.
absl::StatusOr<int> ReadyWorkers(baton::v1::ClusterService::Stub* cluster,
                                 const std::string& prefix) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  baton::v1::ListWorkersResponse resp;
  grpc::Status s = cluster->ListWorkers(&ctx, baton::v1::ListWorkersRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  int ready = 0;
  for (const baton::v1::Worker& w : resp.workers()) {
    if (w.state() == baton::v1::WORKER_STATE_READY && absl::StartsWith(w.id(), prefix)) ++ready;
  }
  return ready;
}

// The flags of one run.
struct RunConfig {
  std::string address;
  int workers = 0;  // N: the job needs all of them
  int watchers = 1;
  absl::Duration timeout;  // of each phase
  int coordinator_pid = 0;
  bool lose_worker = false;
  std::string metrics;       // the coordinator's metrics endpoint; empty: not scraped
  std::string etcd_metrics;  // etcd's client address; empty: not scraped
  int etcd_pid = 0;
  bool cancel = false;  // --end=cancel (else finish)
  absl::Duration steady;
  absl::Duration list_period;
};

// The flags as a RunConfig; nullopt, after the usage line on stderr, without a coordinator,
// workers or a known --end.
std::optional<RunConfig> ConfigFromFlags() {
  RunConfig c;
  c.address = absl::GetFlag(FLAGS_coordinator);
  c.workers = absl::GetFlag(FLAGS_workers);
  c.watchers = std::max(1, absl::GetFlag(FLAGS_watchers));
  c.timeout = absl::GetFlag(FLAGS_timeout);
  c.coordinator_pid = absl::GetFlag(FLAGS_coordinator_pid);
  const std::string end = absl::GetFlag(FLAGS_end);
  if (c.address.empty() || c.workers < 1 || (end != "finish" && end != "cancel")) {
    std::fprintf(stderr,
                 "load_generator: --coordinator, --workers >= 1 and --end=finish|cancel are "
                 "required\n");
    return std::nullopt;
  }
  c.lose_worker = absl::GetFlag(FLAGS_lose_worker);
  c.metrics = absl::GetFlag(FLAGS_metrics);
  c.etcd_metrics = absl::GetFlag(FLAGS_etcd_metrics);
  c.etcd_pid = absl::GetFlag(FLAGS_etcd_pid);
  c.cancel = end == "cancel";
  c.steady = absl::GetFlag(FLAGS_steady);
  c.list_period = absl::GetFlag(FLAGS_list_period);
  return c;
}

// Prints "load_generator: <what>: <status>"; false.
bool Failed(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "load_generator: %s: %s\n", what.c_str(), s.ToString().c_str());
  return false;
}

// The CLI-like client of the steady window: on a thread of its own, lists jobs and workers
// (those whose id starts with `prefix`) every `period` until Stop().
class Lister {
 public:
  // `jobs` and `cluster` must outlive this.
  Lister(baton::v1::JobService::Stub* jobs, baton::v1::ClusterService::Stub* cluster,
         std::string prefix, absl::Duration period)
      : jobs_(jobs), cluster_(cluster), prefix_(std::move(prefix)), period_(period) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Lister() { Stop(); }

  // Ends the listing (the call under way finishes first); the latencies of every call.
  ListStats Stop() {
    {
      absl::MutexLock lock(&mu_);
      over_ = true;
    }
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  void Loop() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&over_), period_)) return;
      }
      grpc::ClientContext list_ctx;
      list_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      baton::v1::ListJobsResponse list_resp;
      absl::Time t0 = absl::Now();
      const bool jobs_ok =
          jobs_->ListJobs(&list_ctx, baton::v1::ListJobsRequest(), &list_resp).ok();
      const double jobs_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      t0 = absl::Now();
      const bool workers_ok = ReadyWorkers(cluster_, prefix_).ok();
      const double workers_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      absl::MutexLock lock(&mu_);
      stats_.list_jobs_ms.push_back(jobs_ms);
      stats_.list_workers_ms.push_back(workers_ms);
      stats_.errors += (jobs_ok ? 0 : 1) + (workers_ok ? 0 : 1);
    }
  }

  baton::v1::JobService::Stub* const jobs_;
  baton::v1::ClusterService::Stub* const cluster_;
  const std::string prefix_;
  const absl::Duration period_;
  absl::Mutex mu_;
  bool over_ ABSL_GUARDED_BY(mu_) = false;
  ListStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The steady window's samples, at its start and its end.
struct SteadyWindow {
  double window_s = 0;
  ProcSample first, last;  // the coordinator's
  double rss_max = 0;
  double self_first = 0, self_last = 0;  // the generator's CPU seconds
  SimCounts counts_first, counts_last;
  CommitSample commits_first, commits_last;
  EtcdSample etcd_first, etcd_last;
  ProcSample etcd_proc_first, etcd_proc_last;
  ListStats lists;
};

// The store's commits from `metrics` (127.0.0.1:PORT), or zeros when it is empty.
absl::StatusOr<CommitSample> ScrapeCommitsIf(const std::string& metrics) {
  if (metrics.empty()) return CommitSample();
  return ScrapeCommits(metrics);
}

// etcd's write counters from `address`, or zeros when it is empty.
absl::StatusOr<EtcdSample> ScrapeEtcdIf(const std::string& address) {
  if (address.empty()) return EtcdSample();
  return ScrapeEtcd(address);
}

// One run: its phases in order on one coordinator, sharing the clients, the simulated
// cluster and the watchers. Each phase but the last returns false once it printed why it
// failed ("load_generator: <what>: <status>").
class LoadRun {
 public:
  explicit LoadRun(const RunConfig& config)
      : config_(config),
        // The clients' own channel, apart from the workers' connections.
        channel_(grpc::CreateChannel(config.address, grpc::InsecureChannelCredentials())),
        jobs_(baton::v1::JobService::NewStub(channel_)),
        cluster_(baton::v1::ClusterService::NewStub(channel_)),
        options_(SimOptionsOf(config)),
        sim_(options_),
        watch_(config.watchers) {}

  // 1. Registers every worker; the coordinator must list them all READY.
  bool Register();
  // 2. Submits a job needing N workers.
  bool Submit();
  // 3. Starts the watchers; waits for N StartAssignments and RUNNING (the first watcher to
  // see it times it, by the coordinator's event time).
  bool AwaitStart();
  // 4. The steady window: heartbeats, metric points, watchers, a client listing.
  bool MeasureSteady();
  // 4b. With --lose_worker: one running worker goes silent; the job restarts on the N others
  // (the spare too).
  bool LoseWorker();
  // 5. Ends the job (EndJob) and prints the result line; the exit status.
  int EndAndReport();

 private:
  static SimOptions SimOptionsOf(const RunConfig& config) {
    SimOptions options;
    options.coordinators = {config.address};
    options.workers = config.lose_worker ? config.workers + 1 : config.workers;  // a spare
    options.slots = absl::GetFlag(FLAGS_slots);
    options.workers_per_channel = absl::GetFlag(FLAGS_workers_per_channel);
    options.metric_period = absl::GetFlag(FLAGS_metric_period);
    options.id_prefix = absl::GetFlag(FLAGS_id_prefix);
    return options;
  }

  // Every rank exits 0 (the job must succeed), or a CancelJob (the job is CANCELLED and
  // every worker is sent its StopAssignment). Every watcher must see it by `deadline`.
  absl::Status EndJob(absl::Time deadline);
  // The "result key=value ..." line.
  void PrintResult(const SimCounts& end, const absl::Status& ended, double finish_to_end_s);

  const RunConfig config_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<baton::v1::JobService::Stub> jobs_;
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_;
  const SimOptions options_;
  SimCluster sim_;
  JobWatch watch_;
  std::unique_ptr<Watchers> watchers_;  // From AwaitStart on.
  std::string job_id_;
  absl::Time register_start_, registered_, submit_time_, running_;
  SimCounts at_start_;
  SteadyWindow window_;
  double detect_s_ = 0, restart_s_ = 0;
};

bool LoadRun::Register() {
  register_start_ = absl::Now();
  if (absl::Status s = sim_.Start(); !s.ok()) return Failed("start", s);
  if (absl::Status s = sim_.AwaitRegistered(register_start_ + config_.timeout); !s.ok()) {
    return Failed("register", s);
  }
  registered_ = absl::Now();
  for (;;) {
    absl::StatusOr<int> ready = ReadyWorkers(cluster_.get(), options_.id_prefix);
    if (ready.ok() && *ready == options_.workers) return true;
    if (absl::Now() > register_start_ + config_.timeout) {
      return Failed("ListWorkers", ready.ok()
                                       ? absl::DeadlineExceededError(absl::StrCat(
                                             *ready, " of ", options_.workers, " workers READY"))
                                       : ready.status());
    }
    absl::SleepFor(absl::Milliseconds(100));  // a poll with a deadline
  }
}

bool LoadRun::Submit() {
  const int n = config_.workers;
  baton::v1::SubmitJobRequest submit;
  baton::v1::JobSpec* spec = submit.mutable_spec();
  spec->set_name("control-plane-bench");
  spec->mutable_command()->add_argv("/bin/true");  // never run: the workers are simulated
  spec->mutable_workers()->set_min(n);
  spec->set_slots_per_worker(options_.slots);
  submit.set_request_id(absl::StrCat("cp-bench-", n, "-", absl::ToUnixNanos(absl::Now())));
  baton::v1::SubmitJobResponse submitted;
  submit_time_ = absl::Now();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(submit_time_ + config_.timeout));
  if (grpc::Status s = jobs_->SubmitJob(&ctx, submit, &submitted); !s.ok()) {
    return Failed("SubmitJob", FromGrpcStatus(s));
  }
  job_id_ = submitted.job().id();
  return true;
}

bool LoadRun::AwaitStart() {
  watchers_ = std::make_unique<Watchers>(jobs_.get(), job_id_, config_.watchers, watch_);
  absl::Status started = sim_.AwaitStarted(config_.workers, submit_time_ + config_.timeout);
  absl::StatusOr<absl::Time> running = watch_.AwaitRunning(submit_time_ + config_.timeout);
  if (!started.ok() || !running.ok()) {
    watchers_->Stop();
    return Failed("start", started.ok() ? running.status() : started);
  }
  running_ = *running;
  at_start_ = sim_.Counts();
  return true;
}

bool LoadRun::MeasureSteady() {
  const int pid = config_.coordinator_pid;
  SteadyWindow& w = window_;
  Lister lister(jobs_.get(), cluster_.get(), options_.id_prefix, config_.list_period);
  const absl::Time window_start = absl::Now();
  w.first = SampleProc(pid);
  w.self_first = SelfCpuSeconds();
  w.counts_first = sim_.Counts();
  absl::StatusOr<CommitSample> commits_first = ScrapeCommitsIf(config_.metrics);
  if (!commits_first.ok()) return Failed("metrics", commits_first.status());
  w.commits_first = *commits_first;
  absl::StatusOr<EtcdSample> etcd_first = ScrapeEtcdIf(config_.etcd_metrics);
  if (!etcd_first.ok()) return Failed("etcd metrics", etcd_first.status());
  w.etcd_first = *etcd_first;
  w.etcd_proc_first = SampleProc(config_.etcd_pid);
  watch_.MeasureLatency(true);
  w.rss_max = w.first.rss_mib;
  while (absl::Now() < window_start + config_.steady) {
    absl::SleepFor(std::min(absl::Seconds(1), window_start + config_.steady - absl::Now()));
    w.rss_max = std::max(w.rss_max, SampleProc(pid).rss_mib);
  }
  w.last = SampleProc(pid);
  w.etcd_proc_last = SampleProc(config_.etcd_pid);
  w.self_last = SelfCpuSeconds();
  w.counts_last = sim_.Counts();
  w.window_s = absl::ToDoubleSeconds(absl::Now() - window_start);
  watch_.MeasureLatency(false);
  absl::StatusOr<CommitSample> commits_last = ScrapeCommitsIf(config_.metrics);
  if (!commits_last.ok()) return Failed("metrics", commits_last.status());
  w.commits_last = *commits_last;
  absl::StatusOr<EtcdSample> etcd_last = ScrapeEtcdIf(config_.etcd_metrics);
  if (!etcd_last.ok()) return Failed("etcd metrics", etcd_last.status());
  w.etcd_last = *etcd_last;
  w.lists = lister.Stop();
  return true;
}

bool LoadRun::LoseWorker() {
  if (!config_.lose_worker) return true;
  absl::StatusOr<SimCluster::Silenced> silenced = sim_.SilenceOne();
  if (!silenced.ok()) {
    watchers_->Stop();
    return Failed("lose a worker", silenced.status());
  }
  absl::StatusOr<std::pair<absl::Time, absl::Time>> restarted =
      watch_.AwaitRestart(/*generation=*/2, absl::Now() + config_.timeout);
  if (!restarted.ok()) {
    watchers_->Stop();
    return Failed("restart", restarted.status());
  }
  detect_s_ = absl::ToDoubleSeconds(restarted->first - silenced->last_heartbeat);
  restart_s_ = absl::ToDoubleSeconds(restarted->second - silenced->last_heartbeat);
  return true;
}

absl::Status LoadRun::EndJob(absl::Time deadline) {
  if (!config_.cancel) {
    sim_.FinishAll();
    return watch_.AwaitEnd(baton::v1::JOB_STATE_SUCCEEDED, deadline);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  baton::v1::CancelJobRequest req;
  req.set_job_id(job_id_);
  req.set_reason("load_generator --end=cancel");
  baton::v1::Job cancelled;
  absl::Status ended = FromGrpcStatus(jobs_->CancelJob(&ctx, req, &cancelled));
  if (ended.ok()) ended = watch_.AwaitEnd(baton::v1::JOB_STATE_CANCELLED, deadline);
  if (ended.ok()) ended = sim_.AwaitStopped(config_.workers, deadline);
  return ended;
}

int LoadRun::EndAndReport() {
  const int n = config_.workers;
  const absl::Time finish_time = absl::Now();
  const absl::Status ended = EndJob(finish_time + config_.timeout);
  const absl::Time ended_time = absl::Now();
  watchers_->Stop();
  const SimCounts end = sim_.Counts();
  sim_.Stop();
  PrintResult(end, ended, absl::ToDoubleSeconds(ended_time - finish_time));
  if (!ended.ok()) {
    Failed("end", ended);
    return 1;
  }
  if (end.started < n || end.failed_streams != 0) {
    Failed("workers", absl::InternalError(absl::StrCat(end.started, " of ", n, " workers started, ",
                                                       end.failed_streams, " streams broke")));
    return 1;
  }
  return 0;
}

void LoadRun::PrintResult(const SimCounts& end, const absl::Status& ended, double finish_to_end_s) {
  const SteadyWindow& w = window_;
  const double window_s = w.window_s;
  std::printf(
      "result workers=%d register_s=%.3f submit_to_last_start_s=%.3f submit_to_running_s=%.3f "
      "window_s=%.1f coord_cpu_per_s=%.4f coord_rss_mib=%.1f coord_rss_max_mib=%.1f "
      "gen_cpu_per_s=%.3f heartbeats_per_s=%.1f acks_per_s=%.1f points_per_s=%.2f "
      "list_jobs_ms=%.2f list_workers_ms=%.2f list_errors=%d finish_to_end_s=%.3f "
      "watch_updates=%lld started_workers=%d running=1 ended=%s stops_received=%lld "
      "failed_streams=%d watchers=%d watch_latency_p50_ms=%.2f watch_latency_p99_ms=%.2f "
      "store_commits_per_s=%.2f store_busy=%.4f detect_s=%.3f restart_s=%.3f "
      "etcd_proposals_per_s=%.2f etcd_puts_per_s=%.2f etcd_txns_per_s=%.2f "
      "etcd_received_kib_per_s=%.1f etcd_cpu_per_s=%.4f\n",
      config_.workers, absl::ToDoubleSeconds(registered_ - register_start_),
      absl::ToDoubleSeconds(at_start_.last_start_received - submit_time_),
      absl::ToDoubleSeconds(running_ - submit_time_), window_s,
      (w.last.cpu_s - w.first.cpu_s) / window_s, w.last.rss_mib, w.rss_max,
      (w.self_last - w.self_first) / window_s,
      (w.counts_last.heartbeats_sent - w.counts_first.heartbeats_sent) / window_s,
      (w.counts_last.heartbeat_acks - w.counts_first.heartbeat_acks) / window_s,
      (w.counts_last.metric_points_sent - w.counts_first.metric_points_sent) / window_s,
      Median(w.lists.list_jobs_ms), Median(w.lists.list_workers_ms), w.lists.errors,
      finish_to_end_s, static_cast<long long>(watch_.updates()), end.started,
      !ended.ok()      ? "no"
      : config_.cancel ? "CANCELLED"
                       : "SUCCEEDED",
      static_cast<long long>(end.stops_received), end.failed_streams, config_.watchers,
      watch_.LatencyQuantileMs(0.5), watch_.LatencyQuantileMs(0.99),
      (w.commits_last.commits - w.commits_first.commits) / window_s,
      (w.commits_last.seconds - w.commits_first.seconds) / window_s, detect_s_, restart_s_,
      (w.etcd_last.proposals - w.etcd_first.proposals) / window_s,
      (w.etcd_last.puts - w.etcd_first.puts) / window_s,
      (w.etcd_last.txns - w.etcd_first.txns) / window_s,
      (w.etcd_last.received_bytes - w.etcd_first.received_bytes) / 1024 / window_s,
      (w.etcd_proc_last.cpu_s - w.etcd_proc_first.cpu_s) / window_s);
  std::fflush(stdout);
}

int RunFailoverFromFlags() {
  FailoverConfig config;
  absl::StatusOr<std::vector<std::string>> addresses =
      ParseCoordinatorAddresses(absl::GetFlag(FLAGS_coordinator));
  if (!addresses.ok()) {
    Failed("--coordinator", addresses.status());
    return 2;
  }
  config.coordinators = *std::move(addresses);
  config.pid_files = absl::StrSplit(absl::GetFlag(FLAGS_pid_files), ',', absl::SkipEmpty());
  config.workers = absl::GetFlag(FLAGS_workers);
  config.jobs = absl::GetFlag(FLAGS_jobs);
  config.slots = absl::GetFlag(FLAGS_slots);
  config.workers_per_channel = absl::GetFlag(FLAGS_workers_per_channel);
  config.id_prefix = absl::GetFlag(FLAGS_id_prefix);
  config.settle = absl::GetFlag(FLAGS_settle);
  config.timeout = absl::GetFlag(FLAGS_timeout);
  config.etcd_metrics = absl::GetFlag(FLAGS_etcd_metrics);
  return RunFailover(config);
}

int Run() {
  if (absl::GetFlag(FLAGS_failover)) return RunFailoverFromFlags();
  const std::optional<RunConfig> config = ConfigFromFlags();
  if (!config.has_value()) return 2;
  LoadRun run(*config);
  if (!run.Register() || !run.Submit() || !run.AwaitStart() || !run.MeasureSteady() ||
      !run.LoseWorker()) {
    return 1;
  }
  return run.EndAndReport();
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Control-plane load on a coordinator started with --insecure on loopback:\n"
      "  load_generator --coordinator=127.0.0.1:PORT --workers=N [--coordinator_pid=PID]\n"
      "  load_generator --failover --coordinator=ADDR,ADDR,... --pid_files=F,F,... "
      "--workers=N [--jobs=J]");
  absl::ParseCommandLine(argc, argv);
  return baton::bench::Run();
}
