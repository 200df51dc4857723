#include "worker/trainer/comm/shm_point_to_point.h"

#include <c10/core/GradMode.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

namespace baton::trainer {

// One per peer and direction of the point-to-point channels, so a send blocked on a full
// channel never holds up a receive (or a collective).
class ShmPointToPoint::Lane {
 public:
  Lane() : thread_([this] { Loop(); }) {}
  // Runs what was posted, then joins.
  ~Lane() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void Loop() {
    c10::AutoGradMode no_grad(false);
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // Guarded by mu_.
  bool stopping_ = false;                    // Guarded by mu_.
  std::thread thread_;                       // Last.
};

ShmPointToPoint::ShmPointToPoint(const ShmSegment& host, size_t slot_bytes)
    : host_(host), slot_bytes_(slot_bytes) {}

ShmPointToPoint::~ShmPointToPoint() {
  for (auto& [peer, pair] : pairs_) pair->Cancel();
  lanes_.clear();
  pairs_.clear();
}

void ShmPointToPoint::Start(at::Tensor tensor, int peer, int peer_rank, bool send,
                            std::shared_ptr<ShmCompletion> completion) {
  std::unique_ptr<ShmPairChannels>& pair = pairs_[peer];
  if (pair == nullptr) {
    pair = std::make_unique<ShmPairChannels>(host_, peer, peer_rank, slot_bytes_);
  }
  std::unique_ptr<Lane>& lane = lanes_[{peer, send}];
  if (lane == nullptr) lane = std::make_unique<Lane>();
  lane->Post(
      [p = pair.get(), send, completion = std::move(completion), t = std::move(tensor)]() mutable {
        absl::Status status;
        try {
          const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
          status = send ? p->Send(t.data_ptr(), bytes) : p->Recv(t.data_ptr(), bytes);
        } catch (const std::exception& e) {
          status = absl::InternalError(absl::StrCat("shm transfer: ", e.what()));
        }
        t = at::Tensor();
        completion->Finish(std::move(status));
      });
}

}  // namespace baton::trainer
