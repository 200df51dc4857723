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
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "bench/control_plane/sim_workers.h"
#include "common/grpc_status.h"
#include "common/time/proto_time.h"

ABSL_FLAG(std::string, coordinator, "", "The coordinator (HOST:PORT), plaintext (--insecure).");
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
ABSL_FLAG(bool, lose_worker, false,
          "Register N + 1 workers; after the window one running worker goes silent, and the "
          "time until the coordinator restarts the job on N is measured.");
ABSL_FLAG(std::string, id_prefix, "sim-", "Simulated worker ids are <id_prefix><index>.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(120),
          "Deadline of each phase (registration, start, RUNNING, SUCCEEDED).");

namespace baton::bench {
namespace {

using baton::v1::JobState;

// utime + stime (seconds) and VmRSS (MiB) of a process; zeros if it cannot be read.
struct ProcSample {
  double cpu_s = 0;
  double rss_mib = 0;
};

ProcSample SampleProc(int pid) {
  ProcSample s;
  if (pid <= 0) return s;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after "(comm)": state is the 3rd field, utime the 14th, stime the 15th.
    const size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      double ticks[2] = {0, 0};
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) ticks[0] = std::stod(field);
        if (i == 15) ticks[1] = std::stod(field);
      }
      s.cpu_s = (ticks[0] + ticks[1]) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      s.rss_mib = std::stod(line.substr(6)) / 1024.0;  // kB
    }
  }
  return s;
}

double SelfCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What the watchers saw of the job. The RUNNING time is the coordinator's event time.
class JobWatch {
 public:
  explicit JobWatch(int watchers) : ended_(watchers, baton::v1::JOB_STATE_UNSPECIFIED) {}

  // Records one update from watcher `watcher`.
  void Note(int watcher, const baton::v1::JobUpdate& update) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    ++updates_;
    if (measure_latency_ && update.has_metric() && update.metric().has_time()) {
      latencies_ms_.push_back(absl::ToDoubleMilliseconds(now - FromProto(update.metric().time())));
    }
    auto note_state = [&](JobState state, absl::Time when, int64_t generation = 0) {
      if (state == baton::v1::JOB_STATE_RUNNING && running_time_ == absl::InfinitePast()) {
        running_time_ = when;
      }
      if (state == baton::v1::JOB_STATE_RUNNING && generation > 0) {
        running_by_generation_.emplace(generation, when);
      }
      if (state == baton::v1::JOB_STATE_RESTARTING && restarting_time_ == absl::InfinitePast()) {
        restarting_time_ = when;
      }
      if (state == baton::v1::JOB_STATE_SUCCEEDED || state == baton::v1::JOB_STATE_FAILED ||
          state == baton::v1::JOB_STATE_CANCELLED) {
        ended_[watcher] = state;
      }
    };
    if (update.has_event()) {
      note_state(update.event().to_state(), FromProto(update.event().time()),
                 update.event().generation());
      if (update.event().to_state() == baton::v1::JOB_STATE_FAILED) {
        failure_ = absl::StrCat(update.event().reason(), ": ", update.event().message());
      }
    }
    if (update.has_snapshot()) {
      for (const baton::v1::JobEvent& e : update.snapshot().events()) {
        note_state(e.to_state(), FromProto(e.time()));
      }
      note_state(update.snapshot().state(), absl::InfinitePast());
    }
  }

  // Waits for RUNNING; its coordinator time. DEADLINE_EXCEEDED, or ABORTED if a watcher saw
  // the job end first.
  absl::StatusOr<absl::Time> AwaitRunning(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_time_ != absl::InfinitePast() || AnyEndedLocked();
    };
    mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
    if (running_time_ != absl::InfinitePast()) return running_time_;
    if (AnyEndedLocked()) return absl::AbortedError(absl::StrCat("job ended: ", failure_));
    return absl::DeadlineExceededError("the job did not reach RUNNING by the deadline");
  }

  // Waits until every watcher saw the job end; OK iff each saw it end in `want`.
  absl::Status AwaitEnd(JobState want, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::none_of(ended_.begin(), ended_.end(),
                          [](JobState s) { return s == baton::v1::JOB_STATE_UNSPECIFIED; });
    };
    mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
    for (size_t i = 0; i < ended_.size(); ++i) {
      if (ended_[i] != want) {
        return absl::FailedPreconditionError(absl::StrCat(
            "watcher ", i, " saw the job end in ", baton::v1::JobState_Name(ended_[i]), ", not ",
            baton::v1::JobState_Name(want), " (by the deadline) ", failure_));
      }
    }
    return absl::OkStatus();
  }

  int64_t updates() const {
    absl::MutexLock lock(&mu_);
    return updates_;
  }

  // Collects the latency of every metric point the watchers receive while on.
  void MeasureLatency(bool on) {
    absl::MutexLock lock(&mu_);
    measure_latency_ = on;
  }
  // The q-quantile (0..1) of the latencies collected, in ms; 0 if none.
  double LatencyQuantileMs(double q) const {
    absl::MutexLock lock(&mu_);
    if (latencies_ms_.empty()) return 0;
    std::vector<double> v = latencies_ms_;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }

  // Waits for the first RESTARTING event, then for generation `generation`'s RUNNING; their
  // coordinator times. DEADLINE_EXCEEDED naming the one missing.
  absl::StatusOr<std::pair<absl::Time, absl::Time>> AwaitRestart(int64_t generation,
                                                                 absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_by_generation_.count(generation) > 0 || AnyEndedLocked();
    };
    mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
    if (restarting_time_ == absl::InfinitePast()) {
      return absl::DeadlineExceededError(
          absl::StrCat("the job never went RESTARTING by the deadline ", failure_));
    }
    auto it = running_by_generation_.find(generation);
    if (it == running_by_generation_.end()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "generation ", generation, " did not reach RUNNING by the deadline ", failure_));
    }
    return std::make_pair(restarting_time_, it->second);
  }

 private:
  bool AnyEndedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::any_of(ended_.begin(), ended_.end(),
                       [](JobState s) { return s != baton::v1::JOB_STATE_UNSPECIFIED; });
  }

  mutable absl::Mutex mu_;
  absl::Time running_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time restarting_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<int64_t, absl::Time> running_by_generation_ ABSL_GUARDED_BY(mu_);
  bool measure_latency_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(mu_);
  std::vector<JobState> ended_ ABSL_GUARDED_BY(mu_);  // UNSPECIFIED: not yet
  std::string failure_ ABSL_GUARDED_BY(mu_);
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
};

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

// What the coordinator's metrics say of its store: ok transactions and seconds in them.
struct CommitSample {
  double commits = 0;
  double seconds = 0;
};

// Scrapes http://<address>/metrics (127.0.0.1:PORT; plain HTTP/1.0 over loopback).
absl::StatusOr<CommitSample> ScrapeCommits(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": want HOST:PORT"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": bad port"));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t got; (got = read(fd, buf, sizeof(buf))) > 0;) body.append(buf, got);
    }
  }
  close(fd);
  CommitSample out;
  bool found = false;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "baton_coordinator_store_commits_total{result=\"ok\"}")) {
      out.commits = std::stod(line.substr(line.rfind(' ') + 1));
      found = true;
    } else if (absl::StartsWith(line, "baton_coordinator_store_commit_seconds_total")) {
      out.seconds = std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  if (!found) {
    return absl::UnavailableError(
        absl::StrCat("no baton_coordinator_store_commits_total at http://", address, "/metrics"));
  }
  return out;
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

int Run() {
  const std::string address = absl::GetFlag(FLAGS_coordinator);
  const int n = absl::GetFlag(FLAGS_workers);
  const int watchers = std::max(1, absl::GetFlag(FLAGS_watchers));
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  const int pid = absl::GetFlag(FLAGS_coordinator_pid);
  if (address.empty() || n < 1 ||
      (absl::GetFlag(FLAGS_end) != "finish" && absl::GetFlag(FLAGS_end) != "cancel")) {
    std::fprintf(stderr,
                 "load_generator: --coordinator, --workers >= 1 and --end=finish|cancel are "
                 "required\n");
    return 2;
  }
  auto fail = [](const std::string& what, const absl::Status& s) {
    std::fprintf(stderr, "load_generator: %s: %s\n", what.c_str(), s.ToString().c_str());
    return 1;
  };

  // The clients' own channel, apart from the workers' connections.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  std::unique_ptr<baton::v1::JobService::Stub> jobs = baton::v1::JobService::NewStub(channel);
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_service =
      baton::v1::ClusterService::NewStub(channel);

  const bool lose = absl::GetFlag(FLAGS_lose_worker);
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  SimOptions options;
  options.coordinator = address;
  options.workers = lose ? n + 1 : n;  // one spare to restart on
  options.slots = absl::GetFlag(FLAGS_slots);
  options.workers_per_channel = absl::GetFlag(FLAGS_workers_per_channel);
  options.metric_period = absl::GetFlag(FLAGS_metric_period);
  options.id_prefix = absl::GetFlag(FLAGS_id_prefix);
  SimCluster sim(options);

  // 1. Register every worker; the coordinator must list them all READY.
  const absl::Time register_start = absl::Now();
  if (absl::Status s = sim.Start(); !s.ok()) return fail("start", s);
  if (absl::Status s = sim.AwaitRegistered(register_start + timeout); !s.ok()) {
    return fail("register", s);
  }
  const absl::Time registered = absl::Now();
  for (;;) {
    absl::StatusOr<int> ready = ReadyWorkers(cluster_service.get(), options.id_prefix);
    if (ready.ok() && *ready == options.workers) break;
    if (absl::Now() > register_start + timeout) {
      return fail("ListWorkers", ready.ok()
                                     ? absl::DeadlineExceededError(absl::StrCat(
                                           *ready, " of ", options.workers, " workers READY"))
                                     : ready.status());
    }
    absl::SleepFor(absl::Milliseconds(100));  // a poll with a deadline
  }

  // 2. Submit a job needing every worker.
  baton::v1::SubmitJobRequest submit;
  baton::v1::JobSpec* spec = submit.mutable_spec();
  spec->set_name("control-plane-bench");
  spec->mutable_command()->add_argv("/bin/true");  // never run: the workers are simulated
  spec->mutable_workers()->set_min(n);
  spec->set_slots_per_worker(options.slots);
  submit.set_request_id(absl::StrCat("cp-bench-", n, "-", absl::ToUnixNanos(absl::Now())));
  baton::v1::SubmitJobResponse submitted;
  const absl::Time submit_time = absl::Now();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(submit_time + timeout));
    if (grpc::Status s = jobs->SubmitJob(&ctx, submit, &submitted); !s.ok()) {
      return fail("SubmitJob", FromGrpcStatus(s));
    }
  }
  const std::string job_id = submitted.job().id();

  // 3. Watchers; the first to see RUNNING times it (by the coordinator's event time).
  JobWatch watch(watchers);
  std::vector<std::unique_ptr<grpc::ClientContext>> watch_contexts;
  std::vector<std::thread> watch_threads;
  for (int i = 0; i < watchers; ++i) {
    watch_contexts.push_back(std::make_unique<grpc::ClientContext>());
    watch_threads.emplace_back([&, i, ctx = watch_contexts.back().get()] {
      baton::v1::WatchJobRequest req;
      req.set_job_id(job_id);
      std::unique_ptr<grpc::ClientReader<baton::v1::JobUpdate>> reader = jobs->WatchJob(ctx, req);
      baton::v1::JobUpdate update;
      while (reader->Read(&update)) watch.Note(i, update);
      reader->Finish();
    });
  }
  auto stop_watchers = [&] {
    for (auto& ctx : watch_contexts) ctx->TryCancel();
    for (std::thread& t : watch_threads) t.join();
    watch_threads.clear();
  };

  absl::Status started = sim.AwaitStarted(n, submit_time + timeout);
  absl::StatusOr<absl::Time> running = watch.AwaitRunning(submit_time + timeout);
  if (!started.ok() || !running.ok()) {
    stop_watchers();
    return fail("start", started.ok() ? running.status() : started);
  }
  const SimCounts at_start = sim.Counts();

  // 4. Steady state: heartbeats, metric points, watchers, a client listing.
  ListStats lists;
  absl::Mutex lists_mu;
  bool window_over = false;
  std::thread lister([&] {
    for (;;) {
      {
        absl::MutexLock lock(&lists_mu);
        if (lists_mu.AwaitWithTimeout(absl::Condition(&window_over),
                                      absl::GetFlag(FLAGS_list_period))) {
          return;
        }
      }
      grpc::ClientContext list_ctx;
      list_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      baton::v1::ListJobsResponse list_resp;
      absl::Time t0 = absl::Now();
      const bool jobs_ok = jobs->ListJobs(&list_ctx, baton::v1::ListJobsRequest(), &list_resp).ok();
      const double jobs_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      t0 = absl::Now();
      const bool workers_ok = ReadyWorkers(cluster_service.get(), options.id_prefix).ok();
      const double workers_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      absl::MutexLock lock(&lists_mu);
      lists.list_jobs_ms.push_back(jobs_ms);
      lists.list_workers_ms.push_back(workers_ms);
      lists.errors += (jobs_ok ? 0 : 1) + (workers_ok ? 0 : 1);
    }
  });
  const absl::Duration steady = absl::GetFlag(FLAGS_steady);
  const absl::Time window_start = absl::Now();
  const ProcSample first = SampleProc(pid);
  const double self_first = SelfCpuSeconds();
  const SimCounts counts_first = sim.Counts();
  absl::StatusOr<CommitSample> commits_first = CommitSample();
  if (!metrics.empty()) commits_first = ScrapeCommits(metrics);
  if (!commits_first.ok()) return fail("metrics", commits_first.status());
  watch.MeasureLatency(true);
  double rss_max = first.rss_mib;
  while (absl::Now() < window_start + steady) {
    absl::SleepFor(std::min(absl::Seconds(1), window_start + steady - absl::Now()));
    rss_max = std::max(rss_max, SampleProc(pid).rss_mib);
  }
  const ProcSample last = SampleProc(pid);
  const double self_last = SelfCpuSeconds();
  const SimCounts counts_last = sim.Counts();
  const double window_s = absl::ToDoubleSeconds(absl::Now() - window_start);
  watch.MeasureLatency(false);
  absl::StatusOr<CommitSample> commits_last = CommitSample();
  if (!metrics.empty()) commits_last = ScrapeCommits(metrics);
  if (!commits_last.ok()) return fail("metrics", commits_last.status());
  {
    absl::MutexLock lock(&lists_mu);
    window_over = true;
  }
  lister.join();

  // 4b. A lost worker: silent from now; the job restarts on the N others (the spare too).
  double detect_s = 0, restart_s = 0;
  if (lose) {
    absl::StatusOr<SimCluster::Silenced> silenced = sim.SilenceOne();
    if (!silenced.ok()) {
      stop_watchers();
      return fail("lose a worker", silenced.status());
    }
    absl::StatusOr<std::pair<absl::Time, absl::Time>> restarted =
        watch.AwaitRestart(/*generation=*/2, absl::Now() + timeout);
    if (!restarted.ok()) {
      stop_watchers();
      return fail("restart", restarted.status());
    }
    detect_s = absl::ToDoubleSeconds(restarted->first - silenced->last_heartbeat);
    restart_s = absl::ToDoubleSeconds(restarted->second - silenced->last_heartbeat);
  }

  // 5. End the job: every rank exits 0 (the job must succeed), or a CancelJob (the job is
  // CANCELLED and every worker is sent its StopAssignment). Every watcher must see it.
  const bool cancel = absl::GetFlag(FLAGS_end) == "cancel";
  const absl::Time finish_time = absl::Now();
  absl::Status ended;
  if (cancel) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(finish_time + timeout));
    baton::v1::CancelJobRequest req;
    req.set_job_id(job_id);
    req.set_reason("load_generator --end=cancel");
    baton::v1::Job cancelled;
    ended = FromGrpcStatus(jobs->CancelJob(&ctx, req, &cancelled));
    if (ended.ok()) ended = watch.AwaitEnd(baton::v1::JOB_STATE_CANCELLED, finish_time + timeout);
    if (ended.ok()) ended = sim.AwaitStopped(n, finish_time + timeout);
  } else {
    sim.FinishAll();
    ended = watch.AwaitEnd(baton::v1::JOB_STATE_SUCCEEDED, finish_time + timeout);
  }
  const absl::Time ended_time = absl::Now();
  stop_watchers();
  const SimCounts end = sim.Counts();
  sim.Stop();

  std::printf(
      "result workers=%d register_s=%.3f submit_to_last_start_s=%.3f submit_to_running_s=%.3f "
      "window_s=%.1f coord_cpu_per_s=%.4f coord_rss_mib=%.1f coord_rss_max_mib=%.1f "
      "gen_cpu_per_s=%.3f heartbeats_per_s=%.1f acks_per_s=%.1f points_per_s=%.2f "
      "list_jobs_ms=%.2f list_workers_ms=%.2f list_errors=%d finish_to_end_s=%.3f "
      "watch_updates=%lld started_workers=%d running=1 ended=%s stops_received=%lld "
      "failed_streams=%d watchers=%d watch_latency_p50_ms=%.2f watch_latency_p99_ms=%.2f "
      "store_commits_per_s=%.2f store_busy=%.4f detect_s=%.3f restart_s=%.3f\n",
      n, absl::ToDoubleSeconds(registered - register_start),
      absl::ToDoubleSeconds(at_start.last_start_received - submit_time),
      absl::ToDoubleSeconds(*running - submit_time), window_s,
      (last.cpu_s - first.cpu_s) / window_s, last.rss_mib, rss_max,
      (self_last - self_first) / window_s,
      (counts_last.heartbeats_sent - counts_first.heartbeats_sent) / window_s,
      (counts_last.heartbeat_acks - counts_first.heartbeat_acks) / window_s,
      (counts_last.metric_points_sent - counts_first.metric_points_sent) / window_s,
      Median(lists.list_jobs_ms), Median(lists.list_workers_ms), lists.errors,
      absl::ToDoubleSeconds(ended_time - finish_time), static_cast<long long>(watch.updates()),
      end.started,
      !ended.ok() ? "no"
      : cancel    ? "CANCELLED"
                  : "SUCCEEDED",
      static_cast<long long>(end.stops_received), end.failed_streams, watchers,
      watch.LatencyQuantileMs(0.5), watch.LatencyQuantileMs(0.99),
      (commits_last->commits - commits_first->commits) / window_s,
      (commits_last->seconds - commits_first->seconds) / window_s, detect_s, restart_s);
  std::fflush(stdout);
  if (!ended.ok()) return fail("end", ended);
  if (end.started < n || end.failed_streams != 0) {
    return fail("workers",
                absl::InternalError(absl::StrCat(end.started, " of ", n, " workers started, ",
                                                 end.failed_streams, " streams broke")));
  }
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Control-plane load on a coordinator started with --insecure on loopback:\n"
      "  load_generator --coordinator=127.0.0.1:PORT --workers=N [--coordinator_pid=PID]");
  absl::ParseCommandLine(argc, argv);
  return baton::bench::Run();
}
