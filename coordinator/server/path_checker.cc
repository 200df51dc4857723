#include "coordinator/server/path_checker.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace baton::coordinator {

// State the (detached) checker threads share with the PathChecker; it outlives whichever
// goes last.
struct PathChecker::Shared {
  struct Job {
    baton::v1::JobSpec spec;
    std::function<void(absl::Status)> done;
  };

  explicit Shared(CheckFn fn, int max) : check(std::move(fn)), max_pending(max) {}

  void Run() {
    for (;;) {
      Job job;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
              return s->stopping || !s->queue.empty();
            },
            this));
        if (stopping) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      const absl::Status status = check(job.spec);  // may block for ever
      absl::MutexLock lock(&mu);
      --pending;
      if (!stopping) job.done(status);  // under the lock: ~PathChecker waits for it
    }
  }

  const CheckFn check;
  const int max_pending;
  absl::Mutex mu;
  std::deque<Job> queue ABSL_GUARDED_BY(mu);
  int pending ABSL_GUARDED_BY(mu) = 0;  // queued or running
  bool stopping ABSL_GUARDED_BY(mu) = false;
};

PathChecker::PathChecker(CheckFn check, int threads, int max_pending)
    : shared_(std::make_shared<Shared>(std::move(check), max_pending)) {
  for (int i = 0; i < threads; ++i) {
    std::thread([shared = shared_] { shared->Run(); }).detach();
  }
}

PathChecker::~PathChecker() {
  absl::MutexLock lock(&shared_->mu);
  shared_->stopping = true;
  shared_->queue.clear();
}

bool PathChecker::Check(baton::v1::JobSpec spec, std::function<void(absl::Status)> done) {
  absl::MutexLock lock(&shared_->mu);
  if (shared_->stopping || shared_->pending >= shared_->max_pending) return false;
  ++shared_->pending;
  shared_->queue.push_back({std::move(spec), std::move(done)});
  return true;
}

}  // namespace baton::coordinator
