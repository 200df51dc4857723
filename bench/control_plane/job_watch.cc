#include "bench/control_plane/job_watch.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/time/proto_time.h"

namespace baton::bench {

using baton::v1::JobState;

void JobWatch::Note(int watcher, const baton::v1::JobUpdate& update) {
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

absl::StatusOr<absl::Time> JobWatch::AwaitRunning(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_time_ != absl::InfinitePast() || AnyEndedLocked();
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  if (running_time_ != absl::InfinitePast()) return running_time_;
  if (AnyEndedLocked()) return absl::AbortedError(absl::StrCat("job ended: ", failure_));
  return absl::DeadlineExceededError("the job did not reach RUNNING by the deadline");
}

absl::Status JobWatch::AwaitEnd(JobState want, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::none_of(ended_.begin(), ended_.end(),
                        [](JobState s) { return s == baton::v1::JOB_STATE_UNSPECIFIED; });
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  for (size_t i = 0; i < ended_.size(); ++i) {
    if (ended_[i] != want) {
      return absl::FailedPreconditionError(
          absl::StrCat("watcher ", i, " saw the job end in ", baton::v1::JobState_Name(ended_[i]),
                       ", not ", baton::v1::JobState_Name(want), " (by the deadline) ", failure_));
    }
  }
  return absl::OkStatus();
}

int64_t JobWatch::updates() const {
  absl::MutexLock lock(&mu_);
  return updates_;
}

void JobWatch::MeasureLatency(bool on) {
  absl::MutexLock lock(&mu_);
  measure_latency_ = on;
}

double JobWatch::LatencyQuantileMs(double q) const {
  absl::MutexLock lock(&mu_);
  if (latencies_ms_.empty()) return 0;
  std::vector<double> v = latencies_ms_;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

absl::StatusOr<std::pair<absl::Time, absl::Time>> JobWatch::AwaitRestart(int64_t generation,
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

bool JobWatch::AnyEndedLocked() const {
  return std::any_of(ended_.begin(), ended_.end(),
                     [](JobState s) { return s != baton::v1::JOB_STATE_UNSPECIFIED; });
}

Watchers::Watchers(baton::v1::JobService::Stub* jobs, const std::string& job_id, int count,
                   JobWatch& watch) {
  for (int i = 0; i < count; ++i) {
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
    threads_.emplace_back([jobs, job_id, &watch, i, ctx = contexts_.back().get()] {
      baton::v1::WatchJobRequest req;
      req.set_job_id(job_id);
      std::unique_ptr<grpc::ClientReader<baton::v1::JobUpdate>> reader = jobs->WatchJob(ctx, req);
      baton::v1::JobUpdate update;
      while (reader->Read(&update)) watch.Note(i, update);
      reader->Finish();
    });
  }
}

void Watchers::Stop() {
  for (auto& ctx : contexts_) ctx->TryCancel();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace baton::bench
