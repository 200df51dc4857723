#pragma once

// The two one-way channels between a member of one host's group (shm_segment.h) and one
// other member: messages of bytes, in order per direction, through a segment of the pair's
// own (ShmSegment::AttachPair), attached at the pair's first transfer: the lower member
// creates it, the other maps it at its own first transfer with that member. The building
// block of the shared-memory point-to-point transfers (comm/shm_point_to_point.h); it knows
// nothing of tensors.
//
// Each member's slot of the pair's segment carries its channel to the other: control words
// (pieces sent, pieces taken: futex words) and two piece buffers of about slot_bytes / 2
// each. A message goes through in pieces, at least one, so that an empty message is matched
// too; a Send returns once its last piece is in a buffer, so a message of at most one piece
// never waits for the receiver unless two pieces are already unread. Every piece carries its
// message's byte count, which the receiver checks.
//
// Failure: a transfer waiting for its peer fails as ShmSegment's waits do (AttachPair and
// WaitWhile): UNAVAILABLE if the peer exited, left or gave up, or after the collective
// timeout; CANCELLED after Cancel(). A Recv of another byte count than the message's fails
// with INVALID_ARGUMENT and breaks both channels for good (they are out of step): every later
// transfer of the pair fails with that status, and the peer is told this member gave up. If
// the attach fails, every transfer of the pair fails with its status.
//
// Threading: Send is called by one thread at a time, and so is Recv (one lane per direction);
// a Send and a Recv may run at once. Cancel() from any thread.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/comm/host/shm_segment.h"

namespace baton::trainer {

class ShmPairChannels {
 public:
  // The channels between the member of `group` this process is and member `peer` of it,
  // rank `peer_rank` (for messages). `slot_bytes`: the group's ShmOptions::slot_bytes, which
  // the pair's segment has too. Attaches nothing yet. `group` must outlive this. Destroying
  // it leaves the pair's segment: the peer's waits then fail as if this process exited.
  ShmPairChannels(const ShmSegment& group, int peer, int peer_rank, size_t slot_bytes);
  ShmPairChannels(const ShmPairChannels&) = delete;
  ShmPairChannels& operator=(const ShmPairChannels&) = delete;

  // Sends the `bytes` bytes at `data` to the peer; returns once the last piece is in this
  // member's channel (see above). Errors as the header says.
  absl::Status Send(const void* data, size_t bytes);
  // Receives the peer's next message into the `bytes` bytes at `data`, which must be its
  // size (else INVALID_ARGUMENT, the channels broken). Errors as the header says.
  absl::Status Recv(void* data, size_t bytes);

  // Makes a transfer in progress end with CANCELLED soon, and every later one: for shutdown.
  // An attach in progress (the peer not there yet) holds the pair's mutex: it is then left
  // to end by itself (the group's segment cancelled, the peer's exit or the timeout), after
  // which its transfer sees the cancellation.
  void Cancel();

 private:
  // The pair's segment, attached on the first call (by whichever direction needs it first).
  absl::StatusOr<ShmSegment*> Segment();
  // Marks both channels broken by `status` (out of step), tells the peer, returns it.
  absl::Status Break(absl::Status status);

  const ShmSegment& group_;
  const int peer_;
  const int peer_rank_;
  const size_t slot_bytes_;

  std::mutex mu_;
  std::unique_ptr<ShmSegment> segment_;  // Guarded by mu_ until set, then read-only.
  absl::Status attached_;                // Guarded by mu_: the attach's outcome, once tried.
  bool tried_ = false;                   // Guarded by mu_.
  absl::Status broken_;                  // Guarded by mu_: the channels out of step.
  std::atomic<bool> cancelled_{false};
  uint32_t send_pieces_ = 0;  // Pieces sent; Send's thread only.
  uint32_t recv_pieces_ = 0;  // Pieces received; Recv's thread only.
};

}  // namespace baton::trainer
