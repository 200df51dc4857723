#include "worker/trainer/comm/host/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/trainer/comm/host/store_protocol.h"

namespace baton::trainer {
namespace {

constexpr uint64_t kMagic = 0x6d6873206e6f7461;  // "aton shm"
constexpr size_t kHeaderBytes = 4096;
// Barrier polls before sleeping on the futex (a peer is usually microseconds away).
constexpr int kSpins = 4000;
// In the failure word: set when the member gave up for GiveUpReason::kCrossHost.
constexpr uint32_t kCrossHostBit = uint32_t{1} << 31;

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

// A member's pid slot holds 0 once it left (ShmSegment destroyed).
bool ProcessExists(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

// The segment starts with this header; one slot per member follows at kHeaderBytes.
struct ShmSegment::Header {
  uint64_t magic;
  uint64_t token;  // Random, checked by every attaching member.
  uint32_t members;
  uint32_t reserved;
  uint64_t slot_bytes;
  // Sense-free barrier: arrivals in the current round, and the round (the futex word).
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> round;
  // 0 while no member gave up; else 1 + the index of the first that did, plus
  // kCrossHostBit for GiveUpReason::kCrossHost.
  std::atomic<uint32_t> failed;
  std::atomic<int32_t> pids[kMaxMembers];
};

// A mapped segment; unmapped on destruction. The name is unlinked by its creator.
class ShmSegment::Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping() { munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  Header* header() const { return static_cast<Header*>(base_); }
  char* bytes() const { return static_cast<char*>(base_); }

  static absl::StatusOr<std::unique_ptr<Mapping>> Map(const std::string& name, size_t bytes,
                                                      bool create) {
    const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                          : shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0 && !create && errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("shm_open(", name, "): not created yet"));
    }
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm_open(", name, "): ", std::strerror(errno)));
    }
    // Reserve every page now: a /dev/shm too small for the segment fails here rather than
    // with SIGBUS mid-training.
    if (create) {
      int err = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
      if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (err != 0) {
        close(fd);
        shm_unlink(name.c_str());
        return absl::FailedPreconditionError(absl::StrCat("sizing ", name, " to ", bytes,
                                                          " bytes: ", std::strerror(err)));
      }
    }
    // A segment its creator has not sized yet would fault when touched.
    struct stat st {};
    if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes)) {
      close(fd);
      return absl::NotFoundError(absl::StrCat(name, ": not sized yet"));
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
      if (create) shm_unlink(name.c_str());
      return absl::FailedPreconditionError(
          absl::StrCat("mmap of ", name, ": ", std::strerror(err)));
    }
    return std::make_unique<Mapping>(base, bytes);
  }

 private:
  void* const base_;
  const size_t bytes_;
};

namespace {
constexpr char kUnusable[] = "shared memory unusable";
}  // namespace

absl::StatusOr<std::unique_ptr<ShmSegment::Mapping>> ShmSegment::MapGroupSegment(
    c10d::Store& store, int index, const std::vector<int>& ranks, size_t bytes,
    const ShmOptions& options) {
  const int members = static_cast<int>(ranks.size());
  if (index == 0) {
    std::random_device random;
    const uint64_t token = (uint64_t{random()} << 32) ^ random();
    const std::string name = absl::StrCat("/baton-", getpid(), "-", absl::Hex(token));
    absl::StatusOr<std::unique_ptr<Mapping>> mapping = Mapping::Map(name, bytes, /*create=*/true);
    if (!mapping.ok()) {
      // The others wait for the record, then for every member's outcome: this one's too.
      StoreSetString(store, "segment", absl::StrCat("!", mapping.status().message()));
      return AgreeOn(store, "attached", index, members, mapping.status(), kUnusable, ranks);
    }
    Header* h = (*mapping)->header();
    h->token = token;
    h->members = static_cast<uint32_t>(members);
    h->slot_bytes = options.slot_bytes;
    h->pids[0].store(getpid());
    h->magic = kMagic;
    std::atomic_thread_fence(std::memory_order_release);
    StoreSetString(store, "segment", absl::StrCat(name, " ", token));
    // Once every member mapped it (or failed to), the name is no longer needed.
    const absl::Status attached =
        AgreeOn(store, "attached", index, members, absl::OkStatus(), kUnusable, ranks);
    shm_unlink(name.c_str());
    RETURN_IF_ERROR(attached);
    return mapping;
  }
  const std::string segment = StoreGetString(store, "segment");
  absl::StatusOr<std::unique_ptr<Mapping>> mapping =
      absl::FailedPreconditionError(segment.substr(1));
  if (!absl::StartsWith(segment, "!")) {
    const std::vector<std::string> parts = absl::StrSplit(segment, ' ');
    uint64_t token = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &token)) {
      mapping = absl::InternalError(absl::StrCat("bad segment record '", segment, "'"));
    } else {
      mapping = Mapping::Map(parts[0], bytes, /*create=*/false);
      if (mapping.ok()) {
        std::atomic_thread_fence(std::memory_order_acquire);
        Header* h = (*mapping)->header();
        if (h->magic != kMagic || h->token != token ||
            h->members != static_cast<uint32_t>(members)) {
          mapping = absl::FailedPreconditionError(
              absl::StrCat(parts[0], " is not this job's segment (another IPC namespace?)"));
        } else {
          h->pids[index].store(getpid());
        }
      }
    }
  }
  RETURN_IF_ERROR(AgreeOn(store, "attached", index, members, mapping.status(), kUnusable, ranks));
  return mapping;
}

absl::Status ValidateShmOptions(const ShmOptions& options) {
  if (options.slot_bytes < 256 || options.slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm slot_bytes ", options.slot_bytes, " must be a multiple of 64, >= 256"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Attach(c10d::Store& store, int index,
                                                                std::vector<int> ranks,
                                                                const ShmOptions& options) {
  const int members = static_cast<int>(ranks.size());
  if (members < 1 || members > kMaxMembers || index < 0 || index >= members) {
    return absl::InvalidArgumentError(absl::StrCat("member ", index, " not in a group of ",
                                                   members, " (shm: at most ", kMaxMembers,
                                                   " ranks per host)"));
  }
  RETURN_IF_ERROR(ValidateShmOptions(options));
  const size_t bytes = kHeaderBytes + options.slot_bytes * members;
  ASSIGN_OR_RETURN(std::unique_ptr<Mapping> mapping,
                   MapGroupSegment(store, index, ranks, bytes, options));
  // Peers' processes must be visible to detect their exit (separate PID namespaces would
  // make every peer look dead).
  absl::Status visible;
  for (int i = 0; i < members && visible.ok(); ++i) {
    const pid_t pid = mapping->header()->pids[i].load();
    if (!ProcessExists(pid)) {
      visible = absl::FailedPreconditionError(absl::StrCat(
          "cannot see rank ", ranks[i], "'s process ", pid, " (PID namespaces?)"));
    }
  }
  RETURN_IF_ERROR(AgreeOn(store, "visible", index, members, visible, kUnusable, ranks));
  return std::unique_ptr<ShmSegment>(
      new ShmSegment(std::move(mapping), index, std::move(ranks), options));
}

ShmSegment::ShmSegment(std::unique_ptr<Mapping> mapping, int index, std::vector<int> ranks,
                       const ShmOptions& options)
    : mapping_(std::move(mapping)),
      header_(mapping_->header()),
      index_(index),
      ranks_(std::move(ranks)),
      options_(options) {
  static_assert(sizeof(Header) <= kHeaderBytes, "header must fit its page");
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");
  std::vector<pid_t> peers(ranks_.size(), 0);
  for (int i = 0; i < size(); ++i) {
    if (i != index_) peers[i] = header_->pids[i].load();
  }
  exits_ = std::make_unique<ProcessExitWatch>(peers, [this](int) { OnPeerExit(); });
}

void ShmSegment::Sleep(std::atomic<uint32_t>* word, uint32_t value) {
  {
    absl::MutexLock lock(&sleepers_mu_);
    if (exits_->AnyExited()) return;  // The caller's WhyStuck names it.
    sleepers_.push_back(word);
  }
  // A wake between the unlock and the futex call is lost: poll_interval bounds it.
  FutexWait(word, value, options_.poll_interval);
  absl::MutexLock lock(&sleepers_mu_);
  sleepers_.erase(std::find(sleepers_.begin(), sleepers_.end(), word));
}

void ShmSegment::OnPeerExit() {
  absl::MutexLock lock(&sleepers_mu_);
  for (std::atomic<uint32_t>* word : sleepers_) FutexWakeAll(word);
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::AttachPair(int peer) const {
  if (peer < 0 || peer >= size() || peer == index_) {
    return absl::InvalidArgumentError(
        absl::StrCat("member ", peer, " is not another member of a group of ", size()));
  }
  const int lo = std::min(index_, peer);
  const int hi = std::max(index_, peer);
  const size_t bytes = kHeaderBytes + options_.slot_bytes * 2;
  // Unique to this group (its random token) and pair; no store round trip needed.
  const std::string name = absl::StrCat("/baton-", absl::Hex(header_->token), "-p", lo, "-", hi);
  std::vector<int> ranks = {ranks_[lo], ranks_[hi]};
  if (index_ == lo) {
    ASSIGN_OR_RETURN(std::unique_ptr<Mapping> mapping, Mapping::Map(name, bytes, /*create=*/true));
    Header* h = mapping->header();
    h->token = header_->token;
    h->members = 2;
    h->slot_bytes = options_.slot_bytes;
    h->pids[0].store(getpid());
    // The peer's pid as the group knows it, until it maps the pair: if it dies first, waits
    // here see it.
    h->pids[1].store(header_->pids[hi].load());
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = kMagic;
    auto segment =
        std::unique_ptr<ShmSegment>(new ShmSegment(std::move(mapping), 0, std::move(ranks), options_));
    segment->unlink_name_ = name;
    return segment;
  }
  // The other member creates it: look for it every poll_interval while it is alive (only it:
  // a third rank leaving the group meanwhile does not concern this pair).
  const absl::Time deadline = absl::Now() + options_.collective_timeout;
  for (;;) {
    absl::StatusOr<std::unique_ptr<Mapping>> mapping = Mapping::Map(name, bytes, /*create=*/false);
    if (mapping.ok()) {
      Header* h = (*mapping)->header();
      if (h->magic == kMagic) {
        std::atomic_thread_fence(std::memory_order_acquire);
        h->pids[1].store(getpid());
        shm_unlink(name.c_str());  // Both mapped it: the name is no longer needed.
        return std::unique_ptr<ShmSegment>(
            new ShmSegment(*std::move(mapping), 1, std::move(ranks), options_));
      }
    } else if (!absl::IsNotFound(mapping.status())) {
      return mapping.status();
    }
    RETURN_IF_ERROR(WhyStuck(deadline, lo));
    absl::SleepFor(options_.poll_interval);  // A poll with a deadline, once per pair.
  }
}

ShmSegment::~ShmSegment() {
  exits_.reset();  // Its thread calls OnPeerExit.
  if (!unlink_name_.empty()) shm_unlink(unlink_name_.c_str());  // If the peer never mapped it.
  // Leaving: a peer waiting for this member now fails at its next check, as if this
  // process had exited.
  header_->pids[index_].store(0);
  FutexWakeAll(&header_->round);
}

char* ShmSegment::Buffer(int slot, uint64_t parity) const {
  return mapping_->bytes() + kHeaderBytes + slot * options_.slot_bytes +
         parity * (options_.slot_bytes / 2);
}

absl::Status ShmSegment::Barrier() {
  RETURN_IF_ERROR(PeerGaveUp());
  const uint32_t round = round_;
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) ==
      static_cast<uint32_t>(size() - 1)) {
    header_->arrived.store(0, std::memory_order_relaxed);
    header_->round.store(round + 1, std::memory_order_release);
    FutexWakeAll(&header_->round);
  } else {
    const absl::Time deadline = absl::Now() + options_.collective_timeout;
    for (int spin = 0; header_->round.load(std::memory_order_acquire) == round; ++spin) {
      if (spin < kSpins) {
        __builtin_ia32_pause();
        continue;
      }
      Sleep(&header_->round, round);
      if (header_->round.load(std::memory_order_acquire) != round) break;
      absl::Status why = WhyStuck(deadline);
      if (!why.ok()) {
        GiveUp(GiveUpReason::kStuck);
        return why;
      }
    }
  }
  round_ = round + 1;
  // A member that gave up left its arrival counted: a barrier completed after that is void.
  return PeerGaveUp();
}

absl::Status ShmSegment::WaitWhile(const std::atomic<uint32_t>* word, uint32_t value) {
  RETURN_IF_ERROR(PeerGaveUp());
  const absl::Time deadline = absl::Now() + options_.collective_timeout;
  for (int spin = 0; word->load(std::memory_order_acquire) == value; ++spin) {
    if (spin < kSpins) {
      __builtin_ia32_pause();
      continue;
    }
    Sleep(const_cast<std::atomic<uint32_t>*>(word), value);
    if (word->load(std::memory_order_acquire) != value) break;
    absl::Status why = WhyStuck(deadline);
    if (!why.ok()) {
      GiveUp(GiveUpReason::kStuck);
      return why;
    }
  }
  return absl::OkStatus();
}

void ShmSegment::Wake(std::atomic<uint32_t>* word) { FutexWakeAll(word); }

void ShmSegment::GiveUp(GiveUpReason reason) {
  uint32_t none = 0;
  const uint32_t word = static_cast<uint32_t>(index_ + 1) |
                        (reason == GiveUpReason::kCrossHost ? kCrossHostBit : 0);
  header_->failed.compare_exchange_strong(none, word);
  FutexWakeAll(&header_->round);
}

absl::Status ShmSegment::PeerGaveUp() const {
  const uint32_t failed = header_->failed.load(std::memory_order_acquire);
  if (failed == 0) return absl::OkStatus();
  const int rank = ranks_[(failed & ~kCrossHostBit) - 1];
  if ((failed & kCrossHostBit) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "shm collective failed: rank ", rank, " (this host's leader) failed the cross-host stage"));
  }
  return absl::UnavailableError(absl::StrCat("shm collective failed: rank ", rank, " gave up"));
}

absl::Status ShmSegment::WhyStuck(absl::Time deadline, std::optional<int> only) const {
  if (!only.has_value()) RETURN_IF_ERROR(PeerGaveUp());
  for (int i = 0; i < size(); ++i) {
    if (only.has_value() && i != *only) continue;
    const pid_t pid = header_->pids[i].load(std::memory_order_relaxed);
    // The watch sees an exited process that is not reaped yet; kill() does not.
    if (i != index_ && (exits_->Exited(i) || !ProcessExists(pid))) {
      return absl::UnavailableError(
          pid == 0 ? absl::StrCat("shm collective failed: rank ", ranks_[i],
                                  " left (its communicator was destroyed)")
                   : absl::StrCat("shm collective failed: rank ", ranks_[i], " (pid ", pid,
                                  ") exited"));
    }
  }
  if (cancelled_.load()) return absl::CancelledError("shm communicator shutting down");
  if (absl::Now() >= deadline) {
    return absl::UnavailableError(
        absl::StrCat("shm collective timed out after ",
                     absl::FormatDuration(options_.collective_timeout), " (a peer hung?)"));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
