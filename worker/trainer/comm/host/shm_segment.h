#pragma once

// One POSIX shared-memory segment mapped by the ranks of one host (its "members"): a
// header (a barrier, the members' pids, a failure word) and one slot per member, each
// slot split in two buffers (by piece parity). The building block of the shared-memory
// communicators (comm/shm_communicator.h); it moves no tensors itself.
//
// Setup (Attach) goes through the job's c10d store: member 0 creates a uniquely named
// segment and publishes its name and a random token; every member maps it, checks the
// token and that it can see its peers' processes; member 0 then unlinks the name, so
// nothing is left in /dev/shm even if every process is killed. If any member cannot attach
// (e.g. containers with separate IPC namespaces on one node), every member gets the same
// FAILED_PRECONDITION.
//
// Failure: a member waiting at the barrier checks every `poll_interval` whether a peer
// process has exited, a peer left (destroyed its ShmSegment) or gave up, and gives up after
// `collective_timeout`; its wait then fails with UNAVAILABLE, and so does every later one on every
// member (the group is out of step for good).
//
// Threading: Barrier() and GiveUp() are called by one thread per member (its
// communication thread); Cancel() from any thread.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/trainer/comm/host/process_exit_watch.h"

namespace baton::trainer {

struct ShmOptions {
  // How long one collective may wait for its peers before it fails (a hung peer).
  absl::Duration collective_timeout = absl::Minutes(5);
  // How often a waiting rank checks that its peers are alive. A fallback: a peer's exit
  // wakes the waiters at once (ProcessExitWatch), where pidfds exist.
  absl::Duration poll_interval = absl::Milliseconds(100);
  // Bytes of one rank's slot (half per parity buffer). The segment is one slot per rank of
  // the host; keep it within /dev/shm (Docker's default is 64 MiB).
  size_t slot_bytes = size_t{8} << 20;
  // Run each collective on the thread that waits for it instead of the communication
  // thread (shm_communicator.h). For hosts whose cores are all taken by training threads:
  // there the thread buys no overlap with backward, only wake-ups and a contender for a core
  // (UseCommunicationThread in comm/process_group.h decides for the trainer).
  bool collectives_on_waiter = false;
};

// INVALID_ARGUMENT unless slot_bytes is a multiple of 64 and at least 256.
absl::Status ValidateShmOptions(const ShmOptions& options);

class ShmSegment {
 public:
  // At most this many members.
  static constexpr int kMaxMembers = 256;

  // Why a member gave up, as its peers are told.
  enum class GiveUpReason {
    kStuck,      // A wait timed out or saw a dead peer.
    kCrossHost,  // The member (a host's leader) failed a collective with other hosts.
  };

  // Maps the group's segment through `store` (keys relative to it): blocks until every
  // member attached or one failed to. Member `index` of `ranks.size()` members; `ranks`
  // names them in messages (member i is rank ranks[i]). INVALID_ARGUMENT for a bad index,
  // more than kMaxMembers or bad options; FAILED_PRECONDITION, the same on every member,
  // if some member could not map the segment or see its peers' processes. Throws
  // c10::Error as the store does.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Attach(c10d::Store& store, int index,
                                                            std::vector<int> ranks,
                                                            const ShmOptions& options);
  // A segment of two members, this one and member `peer` of this group, for the pair's own
  // protocol (the point-to-point channels, shm_channel.h): the member with the lower
  // index creates it (named after this group's token and the pair), the other one maps it,
  // looking for it every poll_interval until then. Slots of options.slot_bytes; index 0 is
  // the lower member. Waits on it see the peer's exit even before the peer mapped it.
  // INVALID_ARGUMENT for a bad peer; FAILED_PRECONDITION if it cannot be created or mapped;
  // UNAVAILABLE if the peer exits or gives up before, or the collective timeout passes.
  // Thread-safe (reads only the group's header).
  absl::StatusOr<std::unique_ptr<ShmSegment>> AttachPair(int peer) const;

  // Leaves the group: peers still waiting for this member fail as if its process exited.
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int index() const { return index_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  // Buffer `parity` (0 or 1) of member `slot`'s slot: ShmOptions::slot_bytes / 2 bytes.
  char* Buffer(int slot, uint64_t parity) const;

  // Returns once every member arrived. UNAVAILABLE if a peer exited or gave up, or after
  // the collective timeout (peers are then told this member gave up); CANCELLED after
  // Cancel(). A barrier that completed after some member gave up fails too.
  absl::Status Barrier();

  // Tells every member that this one gave up: their waits fail with UNAVAILABLE naming it
  // and `reason`. The first member to give up is the one named.
  void GiveUp(GiveUpReason reason);

  // For protocols of their own over the buffers (the point-to-point channels,
  // shm_channel.h): returns once `*word`, a word inside this segment's buffers, no longer holds
  // `value` (spinning briefly, then sleeping on it as a futex; Wake() ends the sleep).
  // Errors as Barrier: UNAVAILABLE if a peer exited, left or gave up, or after the
  // collective timeout (peers are then told this member gave up); CANCELLED after Cancel().
  // Unlike Barrier, may be called by several threads of a member at once.
  absl::Status WaitWhile(const std::atomic<uint32_t>* word, uint32_t value);
  // Wakes every member sleeping in WaitWhile on `word`.
  static void Wake(std::atomic<uint32_t>* word);

  // Makes a wait in progress (and every later one) return CANCELLED soon: for shutdown.
  void Cancel() { cancelled_.store(true); }

 private:
  struct Header;
  class Mapping;

  ShmSegment(std::unique_ptr<Mapping> mapping, int index, std::vector<int> ranks,
             const ShmOptions& options);
  // The store protocol: member 0 creates and publishes the segment, every member maps it.
  static absl::StatusOr<std::unique_ptr<Mapping>> MapGroupSegment(c10d::Store& store, int index,
                                                                  const std::vector<int>& ranks,
                                                                  size_t bytes,
                                                                  const ShmOptions& options);

  // UNAVAILABLE once any member gave up.
  absl::Status PeerGaveUp() const;
  // Sleeps on the futex `word` while it holds `value`, for at most poll_interval, or not
  // at all once a peer was seen to exit; a peer's exit wakes it (OnPeerExit).
  void Sleep(std::atomic<uint32_t>* word, uint32_t value);
  // The exit watch's callback: wakes every thread of this process sleeping on the segment.
  void OnPeerExit();
  // Why a wait for the other members cannot go on (one gave up, exited or left; this
  // member was cancelled; `deadline` passed), or OK. `only`: wait for that member alone
  // (another member's exit or give-up is then none of this wait's business).
  absl::Status WhyStuck(absl::Time deadline, std::optional<int> only = std::nullopt) const;

  const std::unique_ptr<Mapping> mapping_;
  Header* const header_;
  const int index_;
  const std::vector<int> ranks_;
  const ShmOptions options_;
  uint32_t round_ = 0;  // Barrier rounds this member passed.
  std::atomic<bool> cancelled_{false};
  std::string unlink_name_;  // A pair segment's name, while its peer may not have unlinked it.
  absl::Mutex sleepers_mu_;
  // The futex words this process's threads sleep on now (a word once per sleeper).
  std::vector<std::atomic<uint32_t>*> sleepers_ ABSL_GUARDED_BY(sleepers_mu_);
  // The peers' processes (members' pids at construction); destroyed first.
  std::unique_ptr<ProcessExitWatch> exits_;
};

}  // namespace baton::trainer
