#pragma once

#include <vector>

#include "absl/status/status.h"
#include "baton/v1/worker_service.pb.h"
#include "coordinator/control/worker_registry.h"

namespace baton::coordinator {

// A WorkerChannel that records what the coordinator sends to one worker. Not thread-safe:
// for tests that drive the Coordinator from one thread.
class FakeChannel : public WorkerChannel {
 public:
  bool Send(const baton::v1::CoordinatorMessage& msg) override {
    if (closed) return false;
    sent.push_back(msg);
    return true;
  }
  void Close(const absl::Status& status) override {
    closed = true;
    close_status = status;
  }
  // Messages of one kind, in order.
  std::vector<baton::v1::CoordinatorMessage> Of(baton::v1::CoordinatorMessage::MsgCase c) const {
    std::vector<baton::v1::CoordinatorMessage> out;
    for (const auto& m : sent) {
      if (m.msg_case() == c) out.push_back(m);
    }
    return out;
  }

  std::vector<baton::v1::CoordinatorMessage> sent;
  bool closed = false;
  absl::Status close_status;
};

// A WorkerChannel that drops what it is sent (for load and scale, where nothing reads it).
class NullChannel : public WorkerChannel {
 public:
  bool Send(const baton::v1::CoordinatorMessage&) override { return true; }
  void Close(const absl::Status&) override {}
};

}  // namespace baton::coordinator
