#pragma once

#include <vector>

#include "absl/status/status.h"
#include "coordinator/jobs/stream_sink.h"

namespace baton::coordinator {

// A StreamSink that keeps what it is given. Not thread-safe: for single-threaded tests.
template <typename T>
class RecordingSink final : public StreamSink<T> {
 public:
  bool Push(const T& item) override {
    if (finished) return false;
    items.push_back(item);
    return true;
  }
  void Finish(const absl::Status& s) override {
    finished = true;
    status = s;
  }
  bool Backlogged() const override { return backlogged; }

  std::vector<T> items;
  bool finished = false;
  absl::Status status;
  // What Backlogged() answers (a client that stopped reading).
  bool backlogged = false;
};

}  // namespace baton::coordinator
