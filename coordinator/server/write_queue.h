#pragma once

#include <deque>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "coordinator/jobs/stream_sink.h"

namespace baton::coordinator {

// The outgoing side of a callback-API server stream: queues messages and writes them
// one at a time (gRPC allows one outstanding write), then finishes the call once the
// queue is drained. Shared (shared_ptr) between the reactor and whoever pushes, so
// pushing after the call ended is safe: Push just returns false.
//
// Bounded: a client that stops reading while messages keep coming would grow the queue
// without end, so once more than `max_bytes` (serialized) are queued the queue drops
// them and ends the call with RESOURCE_EXHAUSTED, saying so; the client reconnects
// (WatchJob and GetLogs resume from the last seq it got; a worker re-registers).
//
// `Reactor` is grpc::ServerWriteReactor<Msg> or grpc::ServerBidiReactor<In, Msg>. The
// reactor must forward OnWriteDone and OnDone here. Thread-safe; never calls into gRPC
// while holding its lock.
template <typename Msg, typename Reactor>
class WriteQueue final : public StreamSink<Msg> {
 public:
  static constexpr size_t kDefaultMaxBytes = 16 << 20;

  explicit WriteQueue(Reactor* reactor, size_t max_bytes = kDefaultMaxBytes)
      : reactor_(reactor), max_bytes_(max_bytes) {}

  bool Push(const Msg& msg) override {
    const Msg* first = nullptr;
    Reactor* reactor = nullptr;
    const size_t size = msg.ByteSizeLong();
    grpc::Status overflow;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || finishing_) return false;
      if (queued_bytes_ + size > max_bytes_) {
        Overflow();
        if (writing_) return false;  // OnWriteDone finishes the call
        finished_ = true;
        reactor = reactor_;
        overflow = status_;
      }
    }
    if (reactor != nullptr) {
      reactor->Finish(overflow);
      return false;
    }
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || finishing_) return false;
      queued_bytes_ += size;
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
      queued_bytes_ -= pending_.front().ByteSizeLong();
      pending_.pop_front();
      reactor = reactor_;
      if (!ok) {
        // The client is gone: drop the rest and end the call.
        pending_.clear();
        queued_bytes_ = 0;
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
    queued_bytes_ = 0;
  }

  // Finish was called (or the call ended): nothing more is accepted.
  bool finishing() const {
    absl::MutexLock lock(&mu_);
    return finishing_ || reactor_ == nullptr;
  }

  // More than half the bound is queued.
  bool Backlogged() const override {
    absl::MutexLock lock(&mu_);
    return queued_bytes_ > max_bytes_ / 2;
  }

  // Bytes queued and not yet written (the one being written included).
  size_t queued_bytes() const {
    absl::MutexLock lock(&mu_);
    return queued_bytes_;
  }

 private:
  // Drops what is queued (but the message being written, which gRPC holds) and ends the
  // call with RESOURCE_EXHAUSTED once that write completes.
  void Overflow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t dropped = queued_bytes_;
    while (pending_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= pending_.back().ByteSizeLong();
      pending_.pop_back();
    }
    finishing_ = true;
    status_ = grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("the client is not reading its stream: ", dropped,
                     " bytes were queued for it (limit ", max_bytes_,
                     "); reconnect to resume from the last sequence number received"));
  }

  mutable absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  const size_t max_bytes_;
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Msg> pending_ ABSL_GUARDED_BY(mu_);  // front() is being written if writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // no more pushes accepted
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // reactor->Finish called
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::coordinator
