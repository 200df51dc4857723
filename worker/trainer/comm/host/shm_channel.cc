#include "worker/trainer/comm/host/shm_channel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

// A channel's control words, at the start of the sending member's slot of the pair's
// segment; the pieces' two buffers follow at kChannelDataOffset.
struct ChannelControl {
  std::atomic<uint32_t> sent;  // Pieces the sender wrote (futex word).
  uint32_t reserved;
  uint64_t message_bytes[2];  // Per buffer: the byte count of the message its piece is of.
  char pad[40];
  std::atomic<uint32_t> taken;  // Pieces the receiver copied out (futex word), own cache line.
};
constexpr size_t kChannelDataOffset = 128;
static_assert(sizeof(ChannelControl) <= kChannelDataOffset, "control must fit before the data");

// Bytes of one piece buffer of a channel in a slot of `slot_bytes` (a multiple of 64, at least
// 64: ValidateShmOptions).
size_t PieceBytes(size_t slot_bytes) { return (slot_bytes - kChannelDataOffset) / 2 / 64 * 64; }

}  // namespace

ShmPairChannels::ShmPairChannels(const ShmSegment& group, int peer, int peer_rank,
                                 size_t slot_bytes)
    : group_(group), peer_(peer), peer_rank_(peer_rank), slot_bytes_(slot_bytes) {}

void ShmPairChannels::Cancel() {
  cancelled_.store(true);
  if (mu_.try_lock()) {
    if (segment_ != nullptr) segment_->Cancel();
    mu_.unlock();
  }
}

absl::StatusOr<ShmSegment*> ShmPairChannels::Segment() {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(broken_);
  if (!tried_) {
    tried_ = true;
    absl::StatusOr<std::unique_ptr<ShmSegment>> segment = group_.AttachPair(peer_);
    if (segment.ok()) {
      segment_ = std::move(*segment);
    } else {
      attached_ = segment.status();
    }
  }
  RETURN_IF_ERROR(attached_);
  if (cancelled_.load()) return absl::CancelledError("shm communicator shutting down");
  return segment_.get();
}

absl::Status ShmPairChannels::Break(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) broken_ = status;
  if (segment_ != nullptr) segment_->GiveUp(ShmSegment::GiveUpReason::kStuck);
  return status;
}

absl::Status ShmPairChannels::Send(const void* data, size_t bytes) {
  ASSIGN_OR_RETURN(ShmSegment * segment, Segment());
  char* slot = segment->Buffer(segment->index(), 0);
  auto* control = reinterpret_cast<ChannelControl*>(slot);
  const size_t piece = PieceBytes(slot_bytes_);
  const char* from = static_cast<const char*>(data);
  size_t off = 0;
  do {  // At least one piece, so that an empty message is matched too.
    const uint32_t k = send_pieces_;
    // Buffer k % 2 is free once piece k - 2 was taken.
    for (;;) {
      const uint32_t taken = control->taken.load(std::memory_order_acquire);
      if (static_cast<int32_t>(k - taken) < 2) break;
      RETURN_IF_ERROR(segment->WaitWhile(&control->taken, taken));
    }
    const size_t len = std::min(piece, bytes - off);
    if (len > 0) std::memcpy(slot + kChannelDataOffset + (k & 1) * piece, from + off, len);
    control->message_bytes[k & 1] = bytes;
    control->sent.store(k + 1, std::memory_order_release);
    ShmSegment::Wake(&control->sent);
    send_pieces_ = k + 1;
    off += len;
  } while (off < bytes);
  return absl::OkStatus();
}

absl::Status ShmPairChannels::Recv(void* data, size_t bytes) {
  ASSIGN_OR_RETURN(ShmSegment * segment, Segment());
  char* slot = segment->Buffer(1 - segment->index(), 0);  // The peer's channel to this member.
  auto* control = reinterpret_cast<ChannelControl*>(slot);
  const size_t piece = PieceBytes(slot_bytes_);
  char* to = static_cast<char*>(data);
  size_t off = 0;
  do {
    const uint32_t k = recv_pieces_;
    for (;;) {
      const uint32_t sent = control->sent.load(std::memory_order_acquire);
      if (static_cast<int32_t>(sent - k) > 0) break;
      RETURN_IF_ERROR(segment->WaitWhile(&control->sent, sent));
    }
    if (control->message_bytes[k & 1] != bytes) {
      return Break(absl::InvalidArgumentError(absl::StrCat(
          "shm recv from rank ", peer_rank_, ": it sent ", control->message_bytes[k & 1],
          " bytes, this rank receives ", bytes, " (the channel is out of step for good)")));
    }
    const size_t len = std::min(piece, bytes - off);
    if (len > 0) std::memcpy(to + off, slot + kChannelDataOffset + (k & 1) * piece, len);
    control->taken.store(k + 1, std::memory_order_release);
    ShmSegment::Wake(&control->taken);
    recv_pieces_ = k + 1;
    off += len;
  } while (off < bytes);
  return absl::OkStatus();
}

}  // namespace baton::trainer
