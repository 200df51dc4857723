#pragma once

// One WorkerService.Connect call of a simulated worker (sim_workers.h), on gRPC's callback
// API. Writes go out one at a time from a queue (the callback API allows one outstanding
// write per stream); a read is always armed. What is read goes to the stream's Owner.

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::bench {

// Lifetime: owned through a shared_ptr by whoever holds it (the worker, a sender); gRPC is
// done with it once Owner::OnStreamDone was called, and it may be destroyed from within
// that call. Until then the stream holds the call open (a hold) while a write may still be
// started from outside a reaction, so no write ever starts after the call finished: the
// hold is released once the stream is dead (a read or a write failed) and no write is in
// flight. Thread-safe.
class SimStream final
    : public grpc::ClientBidiReactor<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage> {
 public:
  // Called on gRPC's threads.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Each message read, in order (one reaction at a time per stream).
    virtual void OnMessage(SimStream* stream, const baton::v1::CoordinatorMessage& message) = 0;
    // The call is over and gRPC is done with it: its final status and the baton-leader
    // hint of its trailers (a standby's refusal), if any. The last call on the stream.
    virtual void OnStreamDone(SimStream* stream, const grpc::Status& status,
                              std::optional<std::string> hint) = 0;
  };

  // `owner` must outlive the call (until OnStreamDone returned).
  SimStream(Owner* owner, std::string address,
            std::shared_ptr<baton::v1::WorkerService::Stub> stub);

  // Opens the call with `first` as its first message. Once.
  void Start(baton::v1::WorkerMessage first);

  // Queues `messages` in order; false, sending nothing, once the stream is dead.
  bool Send(std::vector<baton::v1::WorkerMessage> messages);

  // Ends the call (OnStreamDone follows).
  void Cancel() { context_.TryCancel(); }

  // The replica this stream was opened to (HOST:PORT).
  const std::string& address() const { return address_; }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // Releases the hold if the stream is dead and no write is in flight, once.
  void MaybeReleaseLocked(bool* release) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Owner* const owner_;
  const std::string address_;
  const std::shared_ptr<baton::v1::WorkerService::Stub> stub_;  // keeps the channel
  grpc::ClientContext context_;
  baton::v1::CoordinatorMessage in_;  // touched by read reactions only
  baton::v1::WorkerMessage out_;      // the write in flight

  absl::Mutex mu_;
  std::deque<baton::v1::WorkerMessage> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a write is in flight or being started
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace baton::bench
