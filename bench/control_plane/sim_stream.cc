#include "bench/control_plane/sim_stream.h"

#include <utility>

#include "common/net/coordinator_addresses.h"

namespace baton::bench {

SimStream::SimStream(Owner* owner, std::string address,
                     std::shared_ptr<baton::v1::WorkerService::Stub> stub)
    : owner_(owner), address_(std::move(address)), stub_(std::move(stub)) {}

void SimStream::Start(baton::v1::WorkerMessage first) {
  stub_->async()->Connect(&context_, this);
  std::vector<baton::v1::WorkerMessage> hello;
  hello.push_back(std::move(first));
  Send(std::move(hello));
  StartRead(&in_);
  AddHold();  // until MaybeReleaseLocked: see the class comment
  StartCall();
}

bool SimStream::Send(std::vector<baton::v1::WorkerMessage> messages) {
  {
    absl::MutexLock lock(&mu_);
    if (dead_) return false;
    if (messages.empty()) return true;
    for (baton::v1::WorkerMessage& m : messages) pending_.push_back(std::move(m));
    if (writing_) return true;
    writing_ = true;
    out_ = std::move(pending_.front());
    pending_.pop_front();
  }
  StartWrite(&out_);
  return true;
}

void SimStream::MaybeReleaseLocked(bool* release) {
  *release = dead_ && !writing_ && !released_;
  if (*release) released_ = true;
}

void SimStream::OnReadDone(bool ok) {
  if (ok) {
    owner_->OnMessage(this, in_);
    in_.Clear();
    StartRead(&in_);
    return;
  }
  bool release;
  {
    absl::MutexLock lock(&mu_);
    dead_ = true;
    MaybeReleaseLocked(&release);
  }
  if (release) RemoveHold();
}

void SimStream::OnWriteDone(bool ok) {
  bool next = false;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    if (!ok) dead_ = true;
    if (!dead_ && !pending_.empty()) {
      out_ = std::move(pending_.front());
      pending_.pop_front();
      next = true;
    } else {
      writing_ = false;
      if (dead_) pending_.clear();
      MaybeReleaseLocked(&release);
    }
  }
  if (next) StartWrite(&out_);
  if (release) RemoveHold();
}

void SimStream::OnDone(const grpc::Status& status) {
  // The owner may destroy this stream: nothing may touch it after this call.
  owner_->OnStreamDone(this, status, LeaderHint(context_));
}

}  // namespace baton::bench
