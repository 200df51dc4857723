#include "worker/trainer/comm/shm_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

// Chunk boundaries inside a piece fall on multiples of this many elements (cache lines).
constexpr int64_t kChunkAlign = 16;

// ---- the communicator ----------------------------------------------------------------

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;

  bool IsDone() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
  void Finish(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  }
};

// Who runs a collective that is still queued when its waiter arrives
// (ShmOptions::collectives_on_waiter).
class QueueRunner {
 public:
  virtual ~QueueRunner() = default;
  // Runs queued collectives in order on the calling thread until `completion` is done.
  virtual void RunUntilDone(Completion& completion) = 0;
  // Leaves what is queued to the communication thread.
  virtual void HandOff() = 0;
};

class ShmPending final : public PendingCollective {
 public:
  // `runner`: null where the communication thread runs every collective; else the
  // collective runs on the thread that waits for it (or, never waited for, is handed to the
  // communication thread when this is destroyed). A pending collective may outlive its
  // communicator: the communicator's destructor completes every queued one, so the runner
  // is only used while it is not done.
  ShmPending(std::shared_ptr<Completion> completion, QueueRunner* runner = nullptr)
      : completion_(std::move(completion)), runner_(runner) {}
  ~ShmPending() override {
    if (runner_ != nullptr && !waited_ && !completion_->IsDone()) runner_->HandOff();
  }

  absl::Status Wait() override {
    waited_ = true;
    if (runner_ != nullptr && !completion_->IsDone()) runner_->RunUntilDone(*completion_);
    std::unique_lock<std::mutex> lock(completion_->mu);
    completion_->cv.wait(lock, [this] { return completion_->done; });
    return completion_->status;
  }

 private:
  std::shared_ptr<Completion> completion_;
  QueueRunner* const runner_;
  bool waited_ = false;
};

// Runs closures in order on a thread of its own: one per peer and direction of the
// point-to-point channels, so a send blocked on a full channel never holds up a receive (or
// a collective).
class Lane {
 public:
  Lane() : thread_([this] { Loop(); }) {}
  // Runs what was posted, then joins.
  ~Lane() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void Loop() {
    c10::AutoGradMode no_grad(false);
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // Guarded by mu_.
  bool stopping_ = false;                    // Guarded by mu_.
  std::thread thread_;                       // Last.
};

// A point-to-point channel's control words, at the start of the sending member's slot of
// the pair's segment; the pieces' two buffers follow at kChannelDataOffset.
struct ChannelControl {
  std::atomic<uint32_t> sent;   // Pieces the sender wrote (futex word).
  uint32_t reserved;
  uint64_t message_bytes[2];    // Per buffer: the byte count of the message its piece is of.
  char pad[40];
  std::atomic<uint32_t> taken;  // Pieces the receiver copied out (futex word), own cache line.
};
constexpr size_t kChannelDataOffset = 128;
static_assert(sizeof(ChannelControl) <= kChannelDataOffset, "control must fit before the data");

class ShmCommunicator final : public Communicator, private QueueRunner {
 public:
  ShmCommunicator(ShmGroup group, ShmOptions options)
      : store_(std::move(group.store)),
        topology_(std::move(group.topology)),
        segment_(std::move(group.segment)),
        leaders_(std::move(group.leaders)),
        leaders_reduce_(std::move(group.leaders_reduce)),
        backend_(std::move(group.backend)),
        rank_(group.rank),
        host_(topology_.host_of[rank_]),
        local_rank_(topology_.local_rank_of[rank_]),
        local_size_(static_cast<int>(topology_.hosts[host_].size())),
        options_(options),
        thread_([this] { Loop(); }) {}

  ~ShmCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (segment_ != nullptr) segment_->Cancel();
    thread_.join();
    // Transfers in progress end with CANCELLED; then the pairs' segments are left, which
    // their peers see as this rank leaving.
    // A lane still attaching its pair (waiting in the store for the peer) holds the pair's
    // mutex; it sees `cancelled` once the store answers or times out.
    for (auto& [peer, pair] : pairs_) {
      pair->cancelled.store(true);
      if (pair->mu.try_lock()) {
        if (pair->segment != nullptr) pair->segment->Cancel();
        pair->mu.unlock();
      }
    }
    lanes_.clear();
    pairs_.clear();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return topology_.world_size(); }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  std::string backend() const override { return backend_; }
  bool CanReduce(c10::ScalarType dtype) const override {
    return (at::isFloatingType(dtype) || dtype == at::kInt || dtype == at::kLong) &&
           (leaders_reduce_ == nullptr || leaders_reduce_(dtype));
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(
      at::Tensor tensor) override {
    return StartAllReduce(std::move(tensor), /*mean=*/false);
  }

  // The division is in the pass that writes the sum (RunAllReduceOneHost, RunAllReduce).
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceMean(
      at::Tensor tensor) override {
    RETURN_IF_ERROR(CheckMeanDtype(tensor));
    return StartAllReduce(std::move(tensor), /*mean=*/true);
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " not in world of ", world_size()));
    }
    RETURN_IF_ERROR(CheckTensor(tensor));
    Op op{Kind::kBroadcast, tensor};
    op.root = root;
    return Pending(Enqueue(std::move(op)))->Wait();
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override {
    RETURN_IF_ERROR(CheckShardedCollective(*this, input, output, /*reduce_scatter=*/true));
    Op op{Kind::kReduceScatter, std::move(input)};
    op.output = std::move(output);
    return Pending(Enqueue(std::move(op)));
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override {
    RETURN_IF_ERROR(CheckShardedCollective(*this, input, output, /*reduce_scatter=*/false));
    Op op{Kind::kAllGather, std::move(input)};
    op.output = std::move(output);
    return Pending(Enqueue(std::move(op)));
  }

  // Point to point: each ordered pair of ranks has a channel in a segment of the pair's own
  // (ShmSegment::AttachPair, made at the pair's first transfer: the lower rank creates it, the
  // other maps it at its own first transfer with that rank).
  // The sender's slot carries its channel: two piece buffers of about slot_bytes / 2, so a
  // send completes once its last piece is in a buffer (a message of at most one piece never
  // waits for the receiver unless two pieces are already unread). Transfers run on one lane
  // (thread) per peer and direction. A completed send is received even if this rank then
  // destroys its communicator, except when the peer had not begun its first transfer with
  // this rank yet (the pair's segment then goes with this rank): the receive fails with
  // UNAVAILABLE. Ranks on different hosts (hierarchical) have no shared memory:
  // UNIMPLEMENTED.
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor,
                                                               int dst) override {
    return StartTransfer(std::move(tensor), dst, /*send=*/true);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor,
                                                               int src) override {
    return StartTransfer(std::move(tensor), src, /*send=*/false);
  }

 private:
  // The channels between this rank and one peer. The send lane uses send_pieces, the recv
  // lane recv_pieces; the segment is attached by whichever lane needs it first.
  struct Pair {
    std::mutex mu;
    std::unique_ptr<ShmSegment> segment;  // Guarded by mu until set, then read-only.
    absl::Status attached;                // Guarded by mu: the attach's outcome, once tried.
    bool tried = false;                   // Guarded by mu.
    std::atomic<bool> cancelled{false};   // Set by the destructor.
    uint32_t send_pieces = 0;             // Send lane only.
    uint32_t recv_pieces = 0;             // Recv lane only.
    absl::Status broken;                  // Guarded by mu: a channel out of step.
  };

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartTransfer(at::Tensor tensor, int peer,
                                                                   bool send) {
    RETURN_IF_ERROR(CheckPointToPoint(*this, tensor, peer, send ? "send" : "recv"));
    if (topology_.host_of[peer] != host_) {
      return absl::UnimplementedError(absl::StrCat(
          backend_, ": no point-to-point transfers between hosts (rank ", rank_, " and rank ",
          peer, " are on different hosts); use the gloo backend"));
    }
    std::unique_ptr<Pair>& pair = pairs_[peer];
    if (pair == nullptr) pair = std::make_unique<Pair>();
    std::unique_ptr<Lane>& lane = lanes_[{peer, send}];
    if (lane == nullptr) lane = std::make_unique<Lane>();
    auto completion = std::make_shared<Completion>();
    lane->Post([this, p = pair.get(), peer, send, completion, t = std::move(tensor)]() mutable {
      absl::Status status;
      try {
        status = send ? RunSend(*p, peer, t) : RunRecv(*p, peer, t);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat("shm transfer: ", e.what()));
      }
      t = at::Tensor();
      completion->Finish(std::move(status));
    });
    return std::unique_ptr<PendingCollective>(new ShmPending(std::move(completion)));
  }

  // The pair's segment, attached on first use. Lane threads only.
  absl::StatusOr<ShmSegment*> PairSegment(Pair& pair, int peer) {
    std::lock_guard<std::mutex> lock(pair.mu);
    RETURN_IF_ERROR(pair.broken);
    if (!pair.tried) {
      pair.tried = true;
      absl::StatusOr<std::unique_ptr<ShmSegment>> segment =
          segment_->AttachPair(topology_.local_rank_of[peer]);
      if (segment.ok()) {
        pair.segment = std::move(*segment);
      } else {
        pair.attached = segment.status();
      }
    }
    RETURN_IF_ERROR(pair.attached);
    if (pair.cancelled.load()) return absl::CancelledError("shm communicator shutting down");
    return pair.segment.get();
  }

  // Bytes of one piece buffer of a channel (a multiple of 64, at least 64).
  size_t ChannelPieceBytes() const {
    return (options_.slot_bytes - kChannelDataOffset) / 2 / 64 * 64;
  }

  // Marks the pair's channels broken by `status` (a desynchronised channel) and returns it.
  static absl::Status Break(Pair& pair, absl::Status status) {
    std::lock_guard<std::mutex> lock(pair.mu);
    if (pair.broken.ok()) pair.broken = status;
    if (pair.segment != nullptr) pair.segment->GiveUp(ShmSegment::GiveUpReason::kStuck);
    return status;
  }

  absl::Status RunSend(Pair& pair, int peer, const at::Tensor& tensor) {
    ASSIGN_OR_RETURN(ShmSegment * segment, PairSegment(pair, peer));
    char* slot = segment->Buffer(segment->index(), 0);
    auto* control = reinterpret_cast<ChannelControl*>(slot);
    const size_t piece = ChannelPieceBytes();
    const size_t n = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    const char* data = static_cast<const char*>(tensor.data_ptr());
    size_t off = 0;
    do {  // At least one piece, so that an empty message is matched too.
      const uint32_t k = pair.send_pieces;
      // Buffer k % 2 is free once piece k - 2 was taken.
      for (;;) {
        const uint32_t taken = control->taken.load(std::memory_order_acquire);
        if (static_cast<int32_t>(k - taken) < 2) break;
        RETURN_IF_ERROR(segment->WaitWhile(&control->taken, taken));
      }
      const size_t len = std::min(piece, n - off);
      if (len > 0) std::memcpy(slot + kChannelDataOffset + (k & 1) * piece, data + off, len);
      control->message_bytes[k & 1] = n;
      control->sent.store(k + 1, std::memory_order_release);
      ShmSegment::Wake(&control->sent);
      pair.send_pieces = k + 1;
      off += len;
    } while (off < n);
    return absl::OkStatus();
  }

  absl::Status RunRecv(Pair& pair, int peer, const at::Tensor& tensor) {
    ASSIGN_OR_RETURN(ShmSegment * segment, PairSegment(pair, peer));
    char* slot = segment->Buffer(1 - segment->index(), 0);  // The peer's channel to this rank.
    auto* control = reinterpret_cast<ChannelControl*>(slot);
    const size_t piece = ChannelPieceBytes();
    const size_t n = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    char* data = static_cast<char*>(tensor.data_ptr());
    size_t off = 0;
    do {
      const uint32_t k = pair.recv_pieces;
      for (;;) {
        const uint32_t sent = control->sent.load(std::memory_order_acquire);
        if (static_cast<int32_t>(sent - k) > 0) break;
        RETURN_IF_ERROR(segment->WaitWhile(&control->sent, sent));
      }
      if (control->message_bytes[k & 1] != n) {
        return Break(pair, absl::InvalidArgumentError(absl::StrCat(
                               "shm recv from rank ", peer, ": it sent ",
                               control->message_bytes[k & 1], " bytes, this rank receives ", n,
                               " (the channel is out of step for good)")));
      }
      const size_t len = std::min(piece, n - off);
      if (len > 0) std::memcpy(data + off, slot + kChannelDataOffset + (k & 1) * piece, len);
      control->taken.store(k + 1, std::memory_order_release);
      ShmSegment::Wake(&control->taken);
      pair.recv_pieces = k + 1;
      off += len;
    } while (off < n);
    return absl::OkStatus();
  }

  enum class Kind { kAllReduce, kBroadcast, kReduceScatter, kAllGather };

  struct Op {
    Kind kind = Kind::kAllReduce;
    at::Tensor tensor;  // An all-reduce's or broadcast's tensor; else the input.
    at::Tensor output;  // A reduce-scatter's or all-gather's output.
    int root = 0;       // A broadcast's root.
    bool mean = false;  // An all-reduce's result divided by the world size.
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

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduce(at::Tensor tensor, bool mean) {
    RETURN_IF_ERROR(CheckTensor(tensor));
    if (!CanReduce(tensor.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          backend_, " cannot all-reduce ", c10::toString(tensor.scalar_type()), " tensors"));
    }
    Op op{Kind::kAllReduce, std::move(tensor)};
    op.mean = mean;
    return Pending(Enqueue(std::move(op)));
  }

  // Queues `op`; collectives_on_waiter: without waking the communication thread.
  std::shared_ptr<Completion> Enqueue(Op op) {
    auto completion = std::make_shared<Completion>();
    op.completion = completion;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
    }
    if (!options_.collectives_on_waiter) cv_.notify_all();
    return completion;
  }

  // A pending collective for `completion`.
  std::unique_ptr<PendingCollective> Pending(std::shared_ptr<Completion> completion) {
    QueueRunner* runner = options_.collectives_on_waiter ? this : nullptr;
    return std::make_unique<ShmPending>(std::move(completion), runner);
  }

  // QueueRunner. Once run_mu_ is held, every collective taken off the queue is done, so an
  // empty queue means `completion` is.
  void RunUntilDone(Completion& completion) override {
    std::lock_guard<std::mutex> running(run_mu_);
    while (!completion.IsDone() && RunNext()) {
    }
  }
  void HandOff() override { cv_.notify_all(); }

  // The communication thread: runs queued collectives in order, as they are queued or (with
  // collectives_on_waiter) once handed off, and what is left at destruction.
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
      }
      std::lock_guard<std::mutex> running(run_mu_);
      while (RunNext()) {
      }
    }
  }

  // Runs the next queued collective; false if there was none. The caller holds run_mu_.
  bool RunNext() {
    Op op;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return false;
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    c10::AutoGradMode no_grad(false);
    absl::Status status = broken_;
    if (status.ok()) {
      try {
        status = Run(op);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat("shm collective: ", e.what()));
      }
      if (!status.ok()) broken_ = status;
    }
    op.tensor = at::Tensor();
    op.output = at::Tensor();
    op.completion->Finish(std::move(status));
    return true;
  }

  // Elements of one piece (half a slot), a multiple of kChunkAlign. The same on every rank,
  // with or without a segment: the leaders' collectives must match piece for piece.
  int64_t PieceElements(const at::Tensor& t) const {
    const int64_t n = static_cast<int64_t>(options_.slot_bytes / 2) / t.element_size();
    return std::max<int64_t>(kChunkAlign, n / kChunkAlign * kChunkAlign);
  }

  // `len` elements of slot `slot`'s buffer for `parity`, typed like `like`.
  at::Tensor View(int slot, uint64_t parity, int64_t len, const at::Tensor& like) const {
    return at::from_blob(segment_->Buffer(slot, parity), {len}, like.options());
  }

  bool MultiHost() const { return topology_.num_hosts() > 1; }

  // Passes on the outcome of a leaders' collective; a failure is also this host's ranks'
  // (the segment is marked failed, so their waits end with UNAVAILABLE).
  absl::Status CrossHost(const absl::Status& status) {
    if (status.ok()) return status;
    if (segment_ != nullptr) segment_->GiveUp(ShmSegment::GiveUpReason::kCrossHost);
    return absl::Status(status.code(), absl::StrCat("cross-host stage: ", status.message()));
  }

  absl::Status Run(const Op& op) {
    at::Tensor flat = op.tensor.view({-1});
    switch (op.kind) {
      case Kind::kAllReduce:
        if (segment_ != nullptr && !MultiHost()) return RunAllReduceOneHost(flat, op.mean);
        return RunAllReduce(flat, op.mean);
      case Kind::kBroadcast:
        return RunBroadcast(flat, op.root);
      case Kind::kReduceScatter: {
        at::Tensor out = op.output.view({-1});
        if (world_size() == 1) {  // Possibly without a segment.
          out.copy_(flat);
          return absl::OkStatus();
        }
        return RunReduceScatter(flat, out);
      }
      case Kind::kAllGather: {
        at::Tensor out = op.output.view({-1});
        if (world_size() == 1) {
          out.copy_(flat);
          return absl::OkStatus();
        }
        return RunAllGather(flat, out);
      }
    }
    return absl::InternalError("shm: unknown collective");
  }

  // Chunk `index` of a piece of `len` elements split between this host's ranks: [begin, end),
  // boundaries on multiples of kChunkAlign; the last chunk takes the rest (any may be empty).
  std::pair<int64_t, int64_t> ChunkOf(int64_t len, int index) const {
    const int64_t begin = len * index / local_size_ / kChunkAlign * kChunkAlign;
    const int64_t end = index == local_size_ - 1
                            ? len
                            : len * (index + 1) / local_size_ / kChunkAlign * kChunkAlign;
    return {begin, end};
  }

  // All-reduce of a world on one host, piece by piece, each rank owning one chunk of each
  // piece. A rank's own chunk never goes through its slot on the way in, and the other
  // chunks come back only from their owners:
  //
  //   copy the other ranks' chunks into this rank's slot                          (barrier)
  //   sum this rank's chunk, its own tensor's and the other slots' parts in slot order,
  //     into its slot (then / world for a mean); copy it into its own tensor      (barrier)
  //   copy every other chunk's result out of its owner's slot
  //
  // Per rank that moves (L - 1) / L of the piece in and out instead of all of it, and the
  // mean costs no pass of its own. Each chunk is summed by one rank only, in slot order, so
  // every rank reads bit-identical results, equal to RunAllReduce's. Buffer reuse: a rank
  // writes this parity's buffer again two pieces later, after the next piece's second
  // barrier, which every peer reaches only after its last read of this piece.
  absl::Status RunAllReduceOneHost(at::Tensor& flat, bool mean) {
    if (local_size_ == 1) return absl::OkStatus();  // The sum and the mean of one.
    const at::Tensor divisor = mean ? MeanDivisor(local_size_) : at::Tensor();
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      const uint64_t parity = pieces_++ & 1;
      at::Tensor mine = flat.narrow(0, off, len);
      at::Tensor own_slot = View(local_rank_, parity, len, flat);
      // fn(j, begin, size) for every other rank j whose chunk of this piece is not empty.
      auto for_other_chunks = [&](auto fn) {
        for (int j = 0; j < local_size_; ++j) {
          const auto [begin, end] = ChunkOf(len, j);
          if (j != local_rank_ && end > begin) fn(j, begin, end - begin);
        }
      };
      for_other_chunks([&](int, int64_t begin, int64_t size) {
        own_slot.narrow(0, begin, size).copy_(mine.narrow(0, begin, size));
      });
      RETURN_IF_ERROR(segment_->Barrier());
      if (const auto [begin, end] = ChunkOf(len, local_rank_); end > begin) {
        auto part = [&](int s) {
          const at::Tensor& from = s == local_rank_ ? mine : View(s, parity, len, flat);
          return from.narrow(0, begin, end - begin);
        };
        at::Tensor result = own_slot.narrow(0, begin, end - begin);
        at::add_out(result, part(0), part(1));
        for (int s = 2; s < local_size_; ++s) result.add_(part(s));
        if (mean) at::div_out(result, result, divisor);
        part(local_rank_).copy_(result);
      }
      RETURN_IF_ERROR(segment_->Barrier());
      for_other_chunks([&](int j, int64_t begin, int64_t size) {
        mine.narrow(0, begin, size).copy_(View(j, parity, len, flat).narrow(0, begin, size));
      });
    }
    return absl::OkStatus();
  }

  // All-reduce through slot 0, which holds each piece's whole sum: several hosts (the leaders
  // reduce slot 0 across hosts) or a rank alone on its host. For a mean every rank divides
  // as it copies its piece out.
  absl::Status RunAllReduce(at::Tensor& flat, bool mean) {
    const at::Tensor divisor = mean ? MeanDivisor(world_size()) : at::Tensor();
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      at::Tensor mine = flat.narrow(0, off, len);
      if (segment_ == nullptr) {  // Alone on this host: only the leaders' stage, in place.
        if (leaders_ != nullptr) RETURN_IF_ERROR(CrossHost(leaders_->AllReduceSum(mine)));
        if (mean) at::div_out(mine, mine, divisor);
        continue;
      }
      const uint64_t parity = pieces_++ & 1;
      View(local_rank_, parity, len, flat).copy_(mine);
      RETURN_IF_ERROR(segment_->Barrier());
      // This rank's chunk of the piece, summed over every slot into slot 0.
      const auto [begin, end] = ChunkOf(len, local_rank_);
      at::Tensor sum = View(0, parity, len, flat);
      if (end > begin) {
        at::Tensor chunk = sum.narrow(0, begin, end - begin);
        for (int s = 1; s < local_size_; ++s) {
          chunk.add_(View(s, parity, len, flat).narrow(0, begin, end - begin));
        }
      }
      RETURN_IF_ERROR(segment_->Barrier());
      if (MultiHost()) {
        if (leaders_ != nullptr) RETURN_IF_ERROR(CrossHost(leaders_->AllReduceSum(sum)));
        RETURN_IF_ERROR(segment_->Barrier());
      }
      if (mean) {
        at::div_out(mine, sum, divisor);
      } else {
        mine.copy_(sum);
      }
    }
    return absl::OkStatus();
  }

  absl::Status RunBroadcast(at::Tensor& flat, int root) {
    const int root_host = topology_.host_of[root];
    // The slot this host's ranks read the value from: the root's on its host, else the
    // leader's, which receives it from the other leaders.
    const int source = root_host == host_ ? topology_.local_rank_of[root] : 0;
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      at::Tensor mine = flat.narrow(0, off, len);
      if (segment_ == nullptr) {
        if (leaders_ != nullptr) RETURN_IF_ERROR(CrossHost(leaders_->Broadcast(mine, root_host)));
        continue;
      }
      const uint64_t parity = pieces_++ & 1;
      at::Tensor value = View(source, parity, len, flat);
      if (rank_ == root) value.copy_(mine);
      if (MultiHost()) {
        // On the root's host the leader sends once the root's copy is in.
        if (source != 0) RETURN_IF_ERROR(segment_->Barrier());
        if (leaders_ != nullptr) RETURN_IF_ERROR(CrossHost(leaders_->Broadcast(value, root_host)));
      }
      RETURN_IF_ERROR(segment_->Barrier());
      if (rank_ != root) mine.copy_(value);
    }
    return absl::OkStatus();
  }

  // Reduce-scatter of `input` (world_size() chunks of out.numel()) into `out`. One host: piece by
  // piece, every rank copies q elements of each chunk into its slot (chunk j's at j * q) and, after
  // one barrier, sums the q elements of its own chunk over the slots (in slot order) straight into
  // `out`. One barrier per piece suffices: a rank writes a buffer again two pieces later, after the
  // next piece's barrier, which every reader of this piece passed only after reading it. Several
  // hosts (or slots too small to hold one element per rank): the whole input is all-reduced in
  // place and this rank's chunk copied out, at the cost of an all-reduce.
  absl::Status RunReduceScatter(at::Tensor& input, at::Tensor& out) {
    const int64_t m = out.numel();
    const int world = world_size();
    const int64_t q_max = PieceElements(input) / world;
    if (MultiHost() || q_max == 0) {
      RETURN_IF_ERROR(RunAllReduce(input, /*mean=*/false));
      out.copy_(input.narrow(0, rank_ * m, m));
      return absl::OkStatus();
    }
    for (int64_t off = 0; off < m; off += q_max) {
      const int64_t q = std::min(q_max, m - off);
      const uint64_t parity = pieces_++ & 1;
      at::Tensor slot = View(local_rank_, parity, world * q, input);
      for (int j = 0; j < world; ++j) {
        slot.narrow(0, j * q, q).copy_(input.narrow(0, j * m + off, q));
      }
      RETURN_IF_ERROR(segment_->Barrier());
      at::Tensor mine = out.narrow(0, off, q);
      mine.copy_(View(0, parity, world * q, input).narrow(0, rank_ * q, q));
      for (int s = 1; s < world; ++s) {
        mine.add_(View(s, parity, world * q, input).narrow(0, rank_ * q, q));
      }
    }
    return absl::OkStatus();
  }

  // All-gather of `input` into `out` (world_size() chunks of input.numel()). One host: piece by
  // piece, every rank copies its piece into its slot and, after one barrier (enough, as for the
  // reduce-scatter), copies every slot's piece into its chunk of `out`. Several hosts: one
  // broadcast per rank, of its chunk (exact; world_size() times the latency of a broadcast).
  absl::Status RunAllGather(at::Tensor& input, at::Tensor& out) {
    const int64_t n = input.numel();
    const int world = world_size();
    if (MultiHost()) {
      // As a type the leaders' Gloo broadcasts (any dtype: a copy).
      const at::Tensor wire = out.view(CopyTypeOfSize(out.element_size()));
      for (int r = 0; r < world; ++r) {
        at::Tensor chunk = wire.narrow(0, r * n, n);
        if (r == rank_) chunk.copy_(input.view(wire.scalar_type()));
        RETURN_IF_ERROR(RunBroadcast(chunk, r));
      }
      return absl::OkStatus();
    }
    const int64_t piece = PieceElements(input);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      const uint64_t parity = pieces_++ & 1;
      View(local_rank_, parity, len, input).copy_(input.narrow(0, off, len));
      RETURN_IF_ERROR(segment_->Barrier());
      for (int s = 0; s < world; ++s) {
        out.narrow(0, s * n + off, len).copy_(View(s, parity, len, input));
      }
    }
    return absl::OkStatus();
  }

  // Kept alive: on rank 0 it serves the store, which peers may still be reading the setup
  // keys from after this rank finished its setup.
  const c10::intrusive_ptr<c10d::Store> store_;
  const HostTopology topology_;
  const std::unique_ptr<ShmSegment> segment_;  // Null if alone on this host.
  const std::unique_ptr<Communicator> leaders_;  // Set on a leader of several hosts.
  const std::function<bool(c10::ScalarType)> leaders_reduce_;
  const std::string backend_;
  const int rank_;
  const int host_;
  const int local_rank_;
  const int local_size_;
  const ShmOptions options_;

  // Held by whichever thread runs collectives (the communication thread, or a waiter with
  // collectives_on_waiter): one at a time, in queue order.
  std::mutex run_mu_;
  uint64_t pieces_ = 0;  // Guarded by run_mu_. Pieces moved through the segment (their
                         // parity picks the buffer).
  absl::Status broken_;  // Guarded by run_mu_. First failure; fails every later collective.

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // Guarded by mu_.
  bool stopping_ = false;  // Guarded by mu_.

  // Point to point; touched by the training thread only (Start*, the destructor). Lanes are
  // declared after the pairs they use, and cleared first.
  std::map<int, std::unique_ptr<Pair>> pairs_;
  std::map<std::pair<int, bool>, std::unique_ptr<Lane>> lanes_;

  std::thread thread_;  // Last: starts after every member above is constructed.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ShmOptions& options) {
  if (world_size < 1 || world_size > ShmSegment::kMaxMembers || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " not in world of ", world_size, " (shm: at most ",
                     ShmSegment::kMaxMembers, " ranks)"));
  }
  std::vector<int> ranks(world_size);
  for (int r = 0; r < world_size; ++r) ranks[r] = r;
  try {
    c10d::PrefixStore shm_store("shm", store);
    ASSIGN_OR_RETURN(std::unique_ptr<ShmSegment> segment,
                     ShmSegment::Attach(shm_store, rank, std::move(ranks), options));
    ShmGroup group;
    group.store = store;
    group.topology = SingleHost(world_size);
    group.rank = rank;
    group.segment = std::move(segment);
    return NewShmCommunicator(std::move(group), options);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("shm setup through the store failed (rank ", rank,
                                               "): ", message.substr(0, message.find('\n'))));
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> NewShmCommunicator(ShmGroup group,
                                                                 const ShmOptions& options) {
  const HostTopology& t = group.topology;
  if (group.rank < 0 || group.rank >= t.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", group.rank, " not in world of ", t.world_size()));
  }
  const int host_size = static_cast<int>(t.hosts[t.host_of[group.rank]].size());
  const bool wants_leaders = t.num_hosts() > 1 && t.IsLeader(group.rank);
  if ((group.segment == nullptr && host_size > 1) ||
      (group.segment != nullptr && (group.segment->size() != host_size ||
                                    group.segment->index() != t.local_rank_of[group.rank])) ||
      (group.leaders == nullptr) == wants_leaders ||
      (t.num_hosts() > 1 && group.leaders_reduce == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("shm parts of rank ", group.rank,
                                                   " do not fit the topology ", t.ToString()));
  }
  RETURN_IF_ERROR(ValidateShmOptions(options));
  return std::unique_ptr<Communicator>(new ShmCommunicator(std::move(group), options));
}

}  // namespace baton::trainer
