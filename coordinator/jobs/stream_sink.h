#pragma once

#include "absl/status/status.h"

namespace baton::coordinator {

// The receiving end of a server stream (a watch, a log follow), as the domain classes
// see it. Implementations are thread-safe and never block: Push queues the item.
template <typename T>
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Queues `item` for the client. Returns false once the stream is finished or the
  // client went away; the caller then drops the sink.
  virtual bool Push(const T& item) = 0;
  // Ends the stream with `status` after every queued item was sent. Idempotent.
  virtual void Finish(const absl::Status& status) = 0;
  // True while the client is behind (much is queued for it): history is sent only to
  // streams that are not, live updates to every one.
  virtual bool Backlogged() const { return false; }
};

}  // namespace baton::coordinator
