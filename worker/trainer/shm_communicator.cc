#include "worker/trainer/shm_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

constexpr uint64_t kMagic = 0x6d6873206e6f7461;  // "aton shm"
constexpr int kMaxRanks = 256;
constexpr size_t kHeaderBytes = 4096;
// Chunk boundaries inside a piece fall on multiples of this many elements (cache lines).
constexpr int64_t kChunkAlign = 16;
// Barrier polls before sleeping on the futex (a peer is usually microseconds away).
constexpr int kSpins = 4000;

// The segment starts with this header; world_size slots follow at kHeaderBytes.
struct Header {
  uint64_t magic;
  uint64_t token;  // Random, checked by every attaching rank.
  uint32_t world_size;
  uint32_t reserved;
  uint64_t slot_bytes;
  // Sense-free barrier: arrivals in the current round, and the round (the futex word).
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> round;
  // 1 + the rank that gave up on a collective, 0 while none did.
  std::atomic<uint32_t> failed_rank;
  std::atomic<int32_t> pids[kMaxRanks];
};
static_assert(sizeof(Header) <= kHeaderBytes, "header must fit its page");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// A mapped segment; unmapped on destruction. The name is unlinked by its creator.
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping() { munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  Header* header() const { return static_cast<Header*>(base_); }
  char* bytes() const { return static_cast<char*>(base_); }

 private:
  void* const base_;
  const size_t bytes_;
};

absl::StatusOr<std::unique_ptr<Mapping>> MapSegment(const std::string& name, size_t bytes,
                                                    bool create) {
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name.c_str(), O_RDWR, 0);
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

// ---- the store protocol -------------------------------------------------------------

std::string StoreGet(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

void StoreSet(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// Every rank publishes "<phase>/<rank>" = "ok" or "!<error>"; returns the first error
// (the same on every rank) or OK.
absl::Status AgreeOn(c10d::Store& store, const std::string& phase, int rank, int world_size,
                     const absl::Status& mine) {
  StoreSet(store, absl::StrCat(phase, "/", rank),
           mine.ok() ? "ok" : absl::StrCat("!", mine.message()));
  for (int r = 0; r < world_size; ++r) {
    const std::string v = StoreGet(store, absl::StrCat(phase, "/", r));
    if (v != "ok") {
      return absl::FailedPreconditionError(
          absl::StrCat("shared memory unusable (rank ", r, "): ", v.substr(1)));
    }
  }
  return absl::OkStatus();
}

// ---- the communicator ----------------------------------------------------------------

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
};

class ShmPending final : public PendingCollective {
 public:
  explicit ShmPending(std::shared_ptr<Completion> completion)
      : completion_(std::move(completion)) {}

  absl::Status Wait() override {
    std::unique_lock<std::mutex> lock(completion_->mu);
    completion_->cv.wait(lock, [this] { return completion_->done; });
    return completion_->status;
  }

 private:
  std::shared_ptr<Completion> completion_;
};

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<Mapping> mapping,
                  int rank, int world_size, ShmOptions options)
      : store_(std::move(store)),
        mapping_(std::move(mapping)),
        header_(mapping_->header()),
        rank_(rank),
        world_size_(world_size),
        options_(options),
        thread_([this] { Loop(); }) {}

  ~ShmCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  std::string backend() const override { return "shm"; }
  bool CanReduce(c10::ScalarType dtype) const override {
    return at::isFloatingType(dtype) || dtype == at::kInt || dtype == at::kLong;
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(
      at::Tensor tensor) override {
    RETURN_IF_ERROR(CheckTensor(tensor));
    if (!CanReduce(tensor.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shm cannot all-reduce ", c10::toString(tensor.scalar_type()), " tensors"));
    }
    return std::unique_ptr<PendingCollective>(new ShmPending(Enqueue(std::move(tensor), -1)));
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= world_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " not in world of ", world_size_));
    }
    RETURN_IF_ERROR(CheckTensor(tensor));
    return ShmPending(Enqueue(tensor, root)).Wait();
  }

 private:
  struct Op {
    at::Tensor tensor;
    int root;  // -1: all-reduce (sum); else broadcast from root.
    std::shared_ptr<Completion> completion;
  };

  static absl::Status CheckTensor(const at::Tensor& tensor) {
    if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm collectives need contiguous CPU tensors, got ",
                       tensor.device().str(), tensor.is_contiguous() ? "" : " (strided)"));
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Completion> Enqueue(at::Tensor tensor, int root) {
    auto completion = std::make_shared<Completion>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Op{std::move(tensor), root, completion});
    }
    cv_.notify_all();
    return completion;
  }

  // The communication thread: runs queued collectives in order.
  void Loop() {
    c10::AutoGradMode no_grad(false);
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status status = broken_;
      if (status.ok()) {
        try {
          at::Tensor flat = op.tensor.view({-1});
          status = op.root < 0 ? RunAllReduce(flat) : RunBroadcast(flat, op.root);
        } catch (const std::exception& e) {
          status = absl::InternalError(absl::StrCat("shm collective: ", e.what()));
        }
        if (!status.ok()) broken_ = status;
      }
      op.tensor = at::Tensor();
      std::lock_guard<std::mutex> lock(op.completion->mu);
      op.completion->status = std::move(status);
      op.completion->done = true;
      op.completion->cv.notify_all();
    }
  }

  // Elements of one piece (half a slot), a multiple of kChunkAlign.
  int64_t PieceElements(const at::Tensor& t) const {
    const int64_t n = static_cast<int64_t>(header_->slot_bytes / 2) / t.element_size();
    return std::max<int64_t>(kChunkAlign, n / kChunkAlign * kChunkAlign);
  }

  // `len` elements of slot `slot`'s buffer for `parity`, typed like `like`.
  at::Tensor View(int slot, uint64_t parity, int64_t len, const at::Tensor& like) const {
    char* p = mapping_->bytes() + kHeaderBytes + slot * header_->slot_bytes +
              parity * (header_->slot_bytes / 2);
    return at::from_blob(p, {len}, like.options());
  }

  absl::Status RunAllReduce(at::Tensor& flat) {
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      const uint64_t parity = pieces_++ & 1;
      at::Tensor mine = flat.narrow(0, off, len);
      View(rank_, parity, len, flat).copy_(mine);
      RETURN_IF_ERROR(Barrier());
      // This rank's chunk of the piece, summed over every slot into slot 0.
      const int64_t begin = len * rank_ / world_size_ / kChunkAlign * kChunkAlign;
      const int64_t end =
          rank_ == world_size_ - 1 ? len : len * (rank_ + 1) / world_size_ / kChunkAlign * kChunkAlign;
      if (end > begin) {
        at::Tensor sum = View(0, parity, len, flat).narrow(0, begin, end - begin);
        for (int s = 1; s < world_size_; ++s) {
          sum.add_(View(s, parity, len, flat).narrow(0, begin, end - begin));
        }
      }
      RETURN_IF_ERROR(Barrier());
      mine.copy_(View(0, parity, len, flat));
    }
    return absl::OkStatus();
  }

  absl::Status RunBroadcast(at::Tensor& flat, int root) {
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      const uint64_t parity = pieces_++ & 1;
      at::Tensor mine = flat.narrow(0, off, len);
      if (rank_ == root) View(root, parity, len, flat).copy_(mine);
      RETURN_IF_ERROR(Barrier());
      if (rank_ != root) mine.copy_(View(root, parity, len, flat));
    }
    return absl::OkStatus();
  }

  // Returns once every rank arrived; UNAVAILABLE if a peer exited or gave up or the
  // timeout passed (then peers are told this rank gave up).
  absl::Status Barrier() {
    RETURN_IF_ERROR(PeerGaveUp());
    const uint32_t round = round_;
    if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) ==
        static_cast<uint32_t>(world_size_ - 1)) {
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
        FutexWait(&header_->round, round, options_.poll_interval);
        if (header_->round.load(std::memory_order_acquire) != round) break;
        absl::Status why = WhyStuck(deadline);
        if (!why.ok()) {
          uint32_t none = 0;
          header_->failed_rank.compare_exchange_strong(none, rank_ + 1);
          FutexWakeAll(&header_->round);
          return why;
        }
      }
    }
    round_ = round + 1;
    // A rank that gave up left its arrival counted: a barrier completed after that is void.
    return PeerGaveUp();
  }

  // UNAVAILABLE once any rank gave up on a collective: the ranks are out of step for good.
  absl::Status PeerGaveUp() const {
    const uint32_t failed = header_->failed_rank.load(std::memory_order_acquire);
    if (failed == 0) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("shm collective failed: rank ", failed - 1, " gave up"));
  }

  absl::Status WhyStuck(absl::Time deadline) const {
    RETURN_IF_ERROR(PeerGaveUp());
    for (int r = 0; r < world_size_; ++r) {
      const pid_t pid = header_->pids[r].load(std::memory_order_relaxed);
      if (r != rank_ && !ProcessExists(pid)) {
        return absl::UnavailableError(absl::StrCat(
            "shm collective failed: rank ", r, " (pid ", pid, ") exited"));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return absl::CancelledError("shm communicator shutting down");
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("shm collective timed out after ",
                       absl::FormatDuration(options_.collective_timeout), " (a peer hung?)"));
    }
    return absl::OkStatus();
  }

  // Kept alive: on rank 0 it serves the store, which peers may still be reading the setup
  // keys from after this rank finished its setup.
  const c10::intrusive_ptr<c10d::Store> store_;
  const std::unique_ptr<Mapping> mapping_;
  Header* const header_;
  const int rank_;
  const int world_size_;
  const ShmOptions options_;

  // Communication thread only.
  uint32_t round_ = 0;    // Barrier rounds this rank passed.
  uint64_t pieces_ = 0;   // Pieces moved so far (their parity picks the buffer).
  absl::Status broken_;   // First failure; fails every later collective.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // Guarded by mu_.
  bool stopping_ = false;  // Guarded by mu_.

  std::thread thread_;  // Last: starts after every member above is constructed.
};

absl::StatusOr<std::unique_ptr<Mapping>> Attach(c10d::Store& store, int rank, int world_size,
                                                size_t bytes, const ShmOptions& options) {
  if (rank == 0) {
    std::random_device random;
    const uint64_t token = (uint64_t{random()} << 32) ^ random();
    const std::string name = absl::StrCat("/baton-", getpid(), "-", absl::Hex(token));
    absl::StatusOr<std::unique_ptr<Mapping>> mapping = MapSegment(name, bytes, /*create=*/true);
    if (!mapping.ok()) {
      StoreSet(store, "segment", absl::StrCat("!", mapping.status().message()));
      return mapping.status();
    }
    Header* h = (*mapping)->header();
    h->token = token;
    h->world_size = static_cast<uint32_t>(world_size);
    h->slot_bytes = options.slot_bytes;
    h->pids[0].store(getpid());
    h->magic = kMagic;
    std::atomic_thread_fence(std::memory_order_release);
    StoreSet(store, "segment", absl::StrCat(name, " ", token));
    // Once every rank mapped it (or failed to), the name is no longer needed.
    const absl::Status attached = AgreeOn(store, "attached", rank, world_size, absl::OkStatus());
    shm_unlink(name.c_str());
    RETURN_IF_ERROR(attached);
    return mapping;
  }
  const std::string segment = StoreGet(store, "segment");
  absl::StatusOr<std::unique_ptr<Mapping>> mapping =
      absl::FailedPreconditionError(segment.substr(1));
  if (!absl::StartsWith(segment, "!")) {
    const std::vector<std::string> parts = absl::StrSplit(segment, ' ');
    uint64_t token = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &token)) {
      mapping = absl::InternalError(absl::StrCat("bad segment record '", segment, "'"));
    } else {
      mapping = MapSegment(parts[0], bytes, /*create=*/false);
      if (mapping.ok()) {
        std::atomic_thread_fence(std::memory_order_acquire);
        Header* h = (*mapping)->header();
        if (h->magic != kMagic || h->token != token ||
            h->world_size != static_cast<uint32_t>(world_size)) {
          mapping = absl::FailedPreconditionError(
              absl::StrCat(parts[0], " is not this job's segment (another IPC namespace?)"));
        } else {
          h->pids[rank].store(getpid());
        }
      }
    }
  }
  RETURN_IF_ERROR(AgreeOn(store, "attached", rank, world_size, mapping.status()));
  return mapping;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ShmOptions& options) {
  if (world_size < 1 || world_size > kMaxRanks || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " not in world of ", world_size, " (shm: at most ",
                     kMaxRanks, " ranks)"));
  }
  if (options.slot_bytes < 2 * kChunkAlign * sizeof(double) || options.slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm slot_bytes ", options.slot_bytes, " must be a multiple of 64, >= 256"));
  }
  const size_t bytes = kHeaderBytes + options.slot_bytes * world_size;
  try {
    c10d::PrefixStore shm_store("shm", store);
    ASSIGN_OR_RETURN(std::unique_ptr<Mapping> mapping,
                     Attach(shm_store, rank, world_size, bytes, options));
    // Peers' processes must be visible to detect their exit (separate PID namespaces
    // would make every peer look dead).
    absl::Status visible;
    for (int r = 0; r < world_size && visible.ok(); ++r) {
      const pid_t pid = mapping->header()->pids[r].load();
      if (!ProcessExists(pid)) {
        visible = absl::FailedPreconditionError(
            absl::StrCat("cannot see rank ", r, "'s process ", pid, " (PID namespaces?)"));
      }
    }
    RETURN_IF_ERROR(AgreeOn(shm_store, "visible", rank, world_size, visible));
    return std::unique_ptr<Communicator>(
        new ShmCommunicator(store, std::move(mapping), rank, world_size, options));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("shm setup through the store failed (rank ", rank,
                                               "): ", message.substr(0, message.find('\n'))));
  }
}

}  // namespace baton::trainer
