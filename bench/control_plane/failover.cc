#include "bench/control_plane/failover.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "bench/control_plane/probes.h"
#include "bench/control_plane/sim_workers.h"
#include "common/grpc_status.h"
#include "common/health/health_check.h"
#include "common/net/coordinator_addresses.h"
#include "common/time/proto_time.h"

namespace baton::bench {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(20);
constexpr absl::Duration kProbeTimeout = absl::Milliseconds(500);
constexpr absl::Duration kCallTimeout = absl::Seconds(30);

bool Failed(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "load_generator --failover: %s: %s\n", what.c_str(), s.ToString().c_str());
  return false;
}

std::chrono::system_clock::time_point CallDeadline() {
  return absl::ToChronoTime(absl::Now() + kCallTimeout);
}

// A channel whose own reconnect backoff stays short: the probes poll every kPoll.
std::shared_ptr<grpc::Channel> ProbeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// Polls every address's health for baton.v1.WorkerService every kPoll until one says
// SERVING: that address, and in `when` the time its answer came. DEADLINE_EXCEEDED.
absl::StatusOr<std::string> AwaitServing(const std::vector<std::string>& addresses,
                                         absl::Time deadline, absl::Time* when) {
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  for (;;) {
    for (const std::string& address : addresses) {
      std::shared_ptr<grpc::Channel>& channel = channels[address];
      if (channel == nullptr ||
          channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        channel = ProbeChannel(address);
      }
      const HealthAnswer answer =
          CheckHealth(channel, kWorkerServiceName, absl::ToChronoTime(absl::Now() + kProbeTimeout));
      if (answer.status.ok() && answer.serving == ServingStatus::kServing) {
        *when = absl::Now();
        return address;
      }
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("none of ", absl::StrJoin(addresses, ","),
                                                      " served WorkerService by the deadline"));
    }
    absl::SleepFor(kPoll);
  }
}

absl::StatusOr<int> ReadPid(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  int pid = 0;
  if (!(in >> text) || !absl::SimpleAtoi(text, &pid) || pid <= 1) {
    return absl::FailedPreconditionError(absl::StrCat("no pid in ", path));
  }
  return pid;
}

double Seconds(absl::Time from, absl::Time to) { return absl::ToDoubleSeconds(to - from); }

// One run's phases in order; each returns false once it printed why it failed.
class FailoverRun {
 public:
  explicit FailoverRun(const FailoverConfig& config)
      : config_(config), sim_(SimOptionsOf(config)) {}

  // Registers every worker; the leader must list them all READY.
  bool Register();
  // Submits the J jobs and waits until each is RUNNING; records their generations.
  bool SubmitAndRun();
  // After the settle time, SIGKILLs the leader.
  bool KillLeader();
  // Waits for a replica serving, every worker re-registered, every job re-attached.
  bool AwaitRecovered();
  // Ends the jobs (every rank exits 0) and prints the result line; the exit status.
  int EndAndReport(bool recovered);

 private:
  static SimOptions SimOptionsOf(const FailoverConfig& config) {
    SimOptions options;
    options.coordinators = config.coordinators;
    options.workers = config.workers;
    options.slots = config.slots;
    options.workers_per_channel = config.workers_per_channel;
    options.id_prefix = config.id_prefix;
    options.reconnect = true;
    return options;
  }

  // The JobService (and ClusterService) of `address`.
  void UseLeader(const std::string& address) {
    leader_ = address;
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    jobs_ = baton::v1::JobService::NewStub(channel_);
    cluster_ = baton::v1::ClusterService::NewStub(channel_);
  }
  // Our jobs as ListJobs has them.
  absl::StatusOr<std::vector<baton::v1::Job>> ListOurJobs();
  // Polls until every job is in `state` (a restart while waiting fails it).
  absl::Status AwaitAll(baton::v1::JobState state, absl::Time deadline);
  // Polls GetJob until every job is re-attached or restarted.
  absl::Status AwaitReattached(absl::Time deadline);
  void PrintResult(const SimCounts& end, bool ended);

  const FailoverConfig config_;
  SimCluster sim_;
  std::string leader_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<baton::v1::JobService::Stub> jobs_;
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_;
  std::map<std::string, int64_t> generations_;  // by job id, before the kill
  absl::Time register_start_, registered_, submitted_, running_;
  std::string killed_;  // the leader's address
  absl::Time killed_at_, serving_at_;
  std::string new_leader_;
  SimCounts at_kill_;
  FailoverCheck check_;
  EtcdSample etcd_at_kill_, etcd_reattached_;
  std::vector<absl::Time> registrations_;  // each worker's latest, after the failover
};

bool FailoverRun::Register() {
  register_start_ = absl::Now();
  if (absl::Status s = sim_.Start(); !s.ok()) return Failed("start", s);
  if (absl::Status s = sim_.AwaitRegistered(register_start_ + config_.timeout); !s.ok()) {
    return Failed("register", s);
  }
  registered_ = absl::Now();
  LeaderFinder finder({config_.coordinators, kJobServiceName}, [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  });
  absl::StatusOr<std::string> leader = finder.Find();
  if (!leader.ok()) return Failed("find the leader", leader.status());
  UseLeader(*leader);
  return true;
}

absl::StatusOr<std::vector<baton::v1::Job>> FailoverRun::ListOurJobs() {
  grpc::ClientContext ctx;
  ctx.set_deadline(CallDeadline());
  baton::v1::ListJobsResponse resp;
  grpc::Status s = jobs_->ListJobs(&ctx, baton::v1::ListJobsRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  std::vector<baton::v1::Job> ours;
  for (const baton::v1::Job& job : resp.jobs()) {
    if (generations_.count(job.id()) > 0) ours.push_back(job);
  }
  return ours;
}

absl::Status FailoverRun::AwaitAll(baton::v1::JobState state, absl::Time deadline) {
  for (;;) {
    absl::StatusOr<std::vector<baton::v1::Job>> jobs = ListOurJobs();
    if (!jobs.ok()) return jobs.status();
    int in_state = 0;
    for (const baton::v1::Job& job : *jobs) in_state += job.state() == state ? 1 : 0;
    if (in_state == static_cast<int>(generations_.size())) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(in_state, " of ", generations_.size(),
                                                      " jobs ", baton::v1::JobState_Name(state),
                                                      " by the deadline"));
    }
    absl::SleepFor(absl::Milliseconds(100));  // a poll with a deadline
  }
}

bool FailoverRun::SubmitAndRun() {
  const int per_job = config_.workers / config_.jobs;
  submitted_ = absl::Now();
  for (int j = 0; j < config_.jobs; ++j) {
    baton::v1::SubmitJobRequest submit;
    baton::v1::JobSpec* spec = submit.mutable_spec();
    spec->set_name(absl::StrCat("failover-bench-", j));
    spec->mutable_command()->add_argv("/bin/true");  // never run: the workers are simulated
    spec->mutable_workers()->set_min(per_job);
    spec->set_slots_per_worker(config_.slots);
    submit.set_request_id(absl::StrCat("cp-failover-", j, "-", absl::ToUnixNanos(submitted_)));
    baton::v1::SubmitJobResponse submitted;
    grpc::ClientContext ctx;
    ctx.set_deadline(CallDeadline());
    if (grpc::Status s = jobs_->SubmitJob(&ctx, submit, &submitted); !s.ok()) {
      return Failed("SubmitJob", FromGrpcStatus(s));
    }
    generations_[submitted.job().id()] = 0;
  }
  const absl::Time deadline = submitted_ + config_.timeout;
  if (absl::Status s = sim_.AwaitStarted(config_.workers, deadline); !s.ok()) {
    return Failed("start", s);
  }
  if (absl::Status s = AwaitAll(baton::v1::JOB_STATE_RUNNING, deadline); !s.ok()) {
    return Failed("RUNNING", s);
  }
  running_ = absl::Now();
  absl::StatusOr<std::vector<baton::v1::Job>> jobs = ListOurJobs();
  if (!jobs.ok()) return Failed("ListJobs", jobs.status());
  for (const baton::v1::Job& job : *jobs) generations_[job.id()] = job.generation();
  return true;
}

bool FailoverRun::KillLeader() {
  absl::SleepFor(config_.settle);  // steady heartbeats before the kill
  if (config_.coordinators.size() == 1) {
    killed_ = config_.coordinators.front();
  } else {
    absl::Time when;
    absl::StatusOr<std::string> leader =
        AwaitServing(config_.coordinators, absl::Now() + config_.timeout, &when);
    if (!leader.ok()) return Failed("find the leader", leader.status());
    killed_ = *leader;
  }
  const size_t index =
      std::find(config_.coordinators.begin(), config_.coordinators.end(), killed_) -
      config_.coordinators.begin();
  absl::StatusOr<int> pid = ReadPid(config_.pid_files[index]);
  if (!pid.ok()) return Failed("leader pid", pid.status());
  if (!config_.etcd_metrics.empty()) {
    absl::StatusOr<EtcdSample> etcd = ScrapeEtcd(config_.etcd_metrics);
    if (!etcd.ok()) return Failed("etcd metrics", etcd.status());
    etcd_at_kill_ = *etcd;
  }
  at_kill_ = sim_.Counts();
  killed_at_ = absl::Now();
  if (kill(*pid, SIGKILL) != 0) {
    return Failed("kill", absl::InternalError(absl::StrCat("kill -9 ", *pid, " failed")));
  }
  return true;
}

absl::Status FailoverRun::AwaitReattached(absl::Time deadline) {
  for (;;) {
    std::vector<baton::v1::Job> jobs;
    for (const auto& [id, generation] : generations_) {
      grpc::ClientContext ctx;
      ctx.set_deadline(CallDeadline());
      baton::v1::GetJobRequest req;
      req.set_job_id(id);
      baton::v1::Job job;
      if (grpc::Status s = jobs_->GetJob(&ctx, req, &job); !s.ok()) return FromGrpcStatus(s);
      jobs.push_back(std::move(job));
    }
    check_ = CheckJobs(generations_, jobs, killed_at_);
    if (check_.reattached + check_.restarted == static_cast<int>(generations_.size())) {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(check_.reattached, " of ", generations_.size(),
                       " jobs re-attached by the deadline (", check_.restarted, " restarted)"));
    }
    absl::SleepFor(absl::Milliseconds(100));  // a poll with a deadline
  }
}

bool FailoverRun::AwaitRecovered() {
  const absl::Time deadline = killed_at_ + config_.timeout;
  absl::StatusOr<std::string> leader = AwaitServing(config_.coordinators, deadline, &serving_at_);
  if (!leader.ok()) return Failed("a serving replica", leader.status());
  new_leader_ = *leader;
  absl::Status s = sim_.AwaitReregistrations(at_kill_.reregistrations + config_.workers, deadline);
  registrations_ = sim_.LastRegistrations();
  if (!s.ok()) return Failed("re-registration", s);
  UseLeader(new_leader_);
  if (s = AwaitReattached(deadline); !s.ok()) return Failed("re-attachment", s);
  if (!config_.etcd_metrics.empty()) {
    absl::StatusOr<EtcdSample> etcd = ScrapeEtcd(config_.etcd_metrics);
    if (!etcd.ok()) return Failed("etcd metrics", etcd.status());
    etcd_reattached_ = *etcd;
  }
  if (check_.restarted > 0) {
    return Failed("re-attachment", absl::InternalError(absl::StrCat(
                                       check_.restarted, " jobs restarted during the failover")));
  }
  return true;
}

int FailoverRun::EndAndReport(bool recovered) {
  bool ended = false;
  if (recovered) {
    sim_.FinishAll();
    const absl::Status s = AwaitAll(baton::v1::JOB_STATE_SUCCEEDED, absl::Now() + config_.timeout);
    ended = s.ok();
    if (!ended) Failed("end", s);
  }
  const SimCounts end = sim_.Counts();
  sim_.Stop();
  PrintResult(end, ended);
  return ended && end.failed_streams == 0 ? 0 : 1;
}

void FailoverRun::PrintResult(const SimCounts& end, bool ended) {
  // The workers' re-registrations after the kill: first, median, last.
  std::vector<double> after;
  for (absl::Time t : registrations_) {
    if (t >= killed_at_) after.push_back(Seconds(killed_at_, t));
  }
  std::sort(after.begin(), after.end());
  const bool all = static_cast<int>(after.size()) == config_.workers && !after.empty();
  const bool served = serving_at_ != absl::Time();
  std::printf(
      "result failover=1 replicas=%zu workers=%d jobs=%d register_s=%.3f "
      "submit_to_running_s=%.3f leader_s=%.3f reattach_s=%.3f reattach_first_s=%.3f "
      "reattach_p50_s=%.3f reattached_event_s=%.3f reregistered_workers=%zu "
      "restarted_jobs=%d reattached_jobs=%d leader_changed=%d streams_lost=%lld "
      "reconnect_attempts=%lld election_retries=%lld failed_streams=%d ended=%s "
      "killed_at_unix=%.3f etcd_proposals_failover=%.0f etcd_puts_failover=%.0f "
      "etcd_received_mib_failover=%.2f\n",
      config_.coordinators.size(), config_.workers, config_.jobs,
      Seconds(register_start_, registered_), Seconds(submitted_, running_),
      served ? Seconds(killed_at_, serving_at_) : -1.0, all ? after.back() : -1.0,
      after.empty() ? -1.0 : after.front(), after.empty() ? -1.0 : after[after.size() / 2],
      check_.reattached > 0 ? Seconds(killed_at_, check_.last_reattached) : -1.0, after.size(),
      check_.restarted, check_.reattached, new_leader_ != killed_ ? 1 : 0,
      static_cast<long long>(end.streams_lost - at_kill_.streams_lost),
      static_cast<long long>(end.reconnect_attempts - at_kill_.reconnect_attempts),
      static_cast<long long>(end.election_retries - at_kill_.election_retries), end.failed_streams,
      ended ? "SUCCEEDED" : "no", absl::ToDoubleSeconds(killed_at_ - absl::UnixEpoch()),
      etcd_reattached_.proposals - etcd_at_kill_.proposals,
      etcd_reattached_.puts - etcd_at_kill_.puts,
      (etcd_reattached_.received_bytes - etcd_at_kill_.received_bytes) / (1 << 20));
  std::fflush(stdout);
}

}  // namespace

FailoverCheck CheckJobs(const std::map<std::string, int64_t>& generations,
                        const std::vector<baton::v1::Job>& jobs, absl::Time since) {
  FailoverCheck check;
  for (const baton::v1::Job& job : jobs) {
    const auto it = generations.find(job.id());
    if (it == generations.end()) continue;
    if (job.state() != baton::v1::JOB_STATE_RUNNING || job.generation() != it->second) {
      ++check.restarted;
      continue;
    }
    for (const baton::v1::JobEvent& e : job.events()) {
      const absl::Time t = FromProto(e.time());
      if (e.reason() == "Reattached" && t >= since) {
        ++check.reattached;
        check.last_reattached = std::max(check.last_reattached, t);
        break;
      }
    }
  }
  return check;
}

int RunFailover(const FailoverConfig& config) {
  if (config.coordinators.empty() || config.pid_files.size() != config.coordinators.size() ||
      config.workers < 1 || config.jobs < 1 || config.workers % config.jobs != 0) {
    std::fprintf(stderr,
                 "load_generator --failover: want --pid_files with one file per --coordinator "
                 "address, and --jobs dividing --workers\n");
    return 2;
  }
  FailoverRun run(config);
  if (!run.Register() || !run.SubmitAndRun() || !run.KillLeader()) return 1;
  const bool recovered = run.AwaitRecovered();
  return run.EndAndReport(recovered) == 0 && recovered ? 0 : 1;
}

}  // namespace baton::bench
