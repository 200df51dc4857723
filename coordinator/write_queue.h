#pragma once

#include <deque>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "coordinator/stream_sink.h"

namespace baton::coordinator {

// The outgoing side of a callback-API server stream: queues messages and writes them
// one at a time (gRPC allows one outstanding write), then finishes the call once the
// queue is drained. Shared (shared_ptr) between the reactor and whoever pushes, so
// pushing after the call ended is safe: Push just returns false.
//
// `Reactor` is grpc::ServerWriteReactor<Msg> or grpc::ServerBidiReactor<In, Msg>. The
// reactor must forward OnWriteDone and OnDone here. Thread-safe; never calls into gRPC
// while holding its lock.
template <typename Msg, typename Reactor>
class WriteQueue final : public StreamSink<Msg> {
 public:
  explicit WriteQueue(Reactor* reactor) : reactor_(reactor) {}

  bool Push(const Msg& msg) override {
    const Msg* first = nullptr;
    Reactor* reactor = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || finishing_) return false;
      pending_.push_back(msg);
      if (writing_) return true;
      writing_ = true;
      first = &pending_.front();  // deque::push_back keeps references valid
      reactor = reactor_;
    }
    // Safe outside the lock: the call cannot end (OnDone) while a write is outstanding.
    reactor->StartWrite(first);
    return true;
  }

  void Finish(const absl::Status& status) override { FinishWith(ToGrpcStatus(status)); }

  void FinishWith(const grpc::Status& status) {
    Reactor* reactor = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || finishing_) return;
      finishing_ = true;
      status_ = status;
      if (writing_) return;  // OnWriteDone finishes once the queue is drained
      finished_ = true;
      reactor = reactor_;
    }
    reactor->Finish(status);
  }

  // From Reactor::OnWriteDone.
  void OnWriteDone(bool ok) {
    const Msg* next = nullptr;
    bool finish = false;
    grpc::Status status;
    Reactor* reactor = nullptr;
    {
      absl::MutexLock lock(&mu_);
      pending_.pop_front();
      reactor = reactor_;
      if (!ok) {
        // The client is gone: drop the rest and end the call.
        pending_.clear();
        if (!finishing_) status_ = grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
        finishing_ = true;
      }
      if (!pending_.empty()) {
        next = &pending_.front();
      } else {
        writing_ = false;
        if (finishing_ && !finished_) {
          finished_ = true;
          finish = true;
          status = status_;
        }
      }
    }
    if (next != nullptr) {
      reactor->StartWrite(next);
    } else if (finish) {
      reactor->Finish(status);
    }
  }

  // From Reactor::OnDone: the reactor is about to be deleted.
  void OnDone() {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    pending_.clear();
  }

 private:
  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  std::deque<Msg> pending_ ABSL_GUARDED_BY(mu_);  // front() is being written if writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // no more pushes accepted
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // reactor->Finish called
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::coordinator
