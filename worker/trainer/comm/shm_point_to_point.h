#pragma once

// The shared-memory communicator's point-to-point transfers (Communicator::StartSend and
// StartRecv, shm_communicator.h) between this rank and the other ranks of its host: each
// pair of ranks has its two channels in a segment of the pair's own (host/shm_channel.h),
// attached at the pair's first transfer. Transfers run on one lane (a thread of its own,
// started at the first transfer that needs it) per peer and direction, so a send blocked on
// a full channel never holds up a receive, or a collective.
//
// A send completes once its last piece is in the channel's buffer (a message of at most one
// piece never waits for the receiver unless two pieces are already unread). A completed send
// is received even if this rank then destroys its communicator, except when the peer had not
// begun its first transfer with this rank yet (the pair's segment then goes with this rank):
// the receive fails with UNAVAILABLE.
//
// Threading: Start is called by one thread at a time (the communicator's caller); each
// transfer finishes its completion on its lane.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <memory>
#include <utility>

#include "worker/trainer/comm/host/shm_channel.h"
#include "worker/trainer/comm/host/shm_segment.h"
#include "worker/trainer/comm/shm_completion.h"

namespace baton::trainer {

class ShmPointToPoint {
 public:
  // `host`: this rank's host's segment (its members are the host's ranks, in order), which
  // must outlive this; `slot_bytes`: its ShmOptions::slot_bytes.
  ShmPointToPoint(const ShmSegment& host, size_t slot_bytes);
  // Cancels the transfers in progress (they end with CANCELLED; host/shm_channel.h), lets
  // each lane finish what was started on it, then leaves the pairs' segments, which their
  // peers see as this rank leaving.
  ~ShmPointToPoint();
  ShmPointToPoint(const ShmPointToPoint&) = delete;
  ShmPointToPoint& operator=(const ShmPointToPoint&) = delete;

  // Starts sending `tensor` to (send) or receiving it from member `peer` of the host's
  // segment, rank `peer_rank`, after every transfer started before in that direction with
  // that peer, and returns; finishes `completion` with the outcome: ShmPairChannels' Send's or
  // Recv's, or INTERNAL for LibTorch's errors. `tensor`: dense, contiguous, on the CPU (the
  // caller checks: CheckPointToPoint), untouched until `completion` is done.
  void Start(at::Tensor tensor, int peer, int peer_rank, bool send,
             std::shared_ptr<ShmCompletion> completion);

 private:
  class Lane;  // Runs closures in order on a thread of its own.

  const ShmSegment& host_;
  const size_t slot_bytes_;
  // By peer; lanes by peer and direction (send: true). Lanes are declared after the pairs
  // they use, and cleared first.
  std::map<int, std::unique_ptr<ShmPairChannels>> pairs_;
  std::map<std::pair<int, bool>, std::unique_ptr<Lane>> lanes_;
};

}  // namespace baton::trainer
