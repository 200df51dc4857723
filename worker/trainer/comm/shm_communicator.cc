#include "worker/trainer/comm/shm_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/comm/host/shm_pieces.h"
#include "worker/trainer/comm/shm_completion.h"
#include "worker/trainer/comm/shm_point_to_point.h"

namespace baton::trainer {
namespace {

// Who runs a collective that is still queued when its waiter arrives
// (ShmOptions::collectives_on_waiter).
class QueueRunner {
 public:
  virtual ~QueueRunner() = default;
  // Runs queued collectives in order on the calling thread until `completion` is done.
  virtual void RunUntilDone(ShmCompletion& completion) = 0;
  // Leaves what is queued to the communication thread.
  virtual void HandOff() = 0;
};

class ShmPending final : public PendingCollective {
 public:
  // `runner`: null where another thread runs the work (the communication thread, a
  // transfer's lane); else the collective runs on the thread that waits for it (or, never
  // waited for, is handed to the communication thread when this is destroyed). A pending
  // collective may outlive its communicator: the communicator's destructor completes every
  // queued one, so the runner is only used while it is not done.
  ShmPending(std::shared_ptr<ShmCompletion> completion, QueueRunner* runner = nullptr)
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
  std::shared_ptr<ShmCompletion> completion_;
  QueueRunner* const runner_;
  bool waited_ = false;
};

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
        point_to_point_(segment_ != nullptr
                            ? std::make_unique<ShmPointToPoint>(*segment_, options_.slot_bytes)
                            : nullptr),
        thread_([this] { Loop(); }) {}

  ~ShmCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (segment_ != nullptr) segment_->Cancel();
    thread_.join();
    // Then point_to_point_ cancels its transfers and leaves the pairs' segments.
  }

  int rank() const override { return rank_; }
  int world_size() const override { return topology_.world_size(); }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  std::string backend() const override { return backend_; }
  bool CanReduce(c10::ScalarType dtype) const override {
    return (at::isFloatingType(dtype) || dtype == at::kInt || dtype == at::kLong) &&
           (leaders_reduce_ == nullptr || leaders_reduce_(dtype));
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor tensor) override {
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

  // Point to point with the ranks of this host: shm_point_to_point.h. Ranks on different
  // hosts (hierarchical) have no shared memory: UNIMPLEMENTED.
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor,
                                                               int dst) override {
    return StartTransfer(std::move(tensor), dst, /*send=*/true);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor,
                                                               int src) override {
    return StartTransfer(std::move(tensor), src, /*send=*/false);
  }

 private:
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartTransfer(at::Tensor tensor, int peer,
                                                                   bool send) {
    RETURN_IF_ERROR(CheckPointToPoint(*this, tensor, peer, send ? "send" : "recv"));
    if (topology_.host_of[peer] != host_) {
      return absl::UnimplementedError(
          absl::StrCat(backend_, ": no point-to-point transfers between hosts (rank ", rank_,
                       " and rank ", peer, " are on different hosts); use the gloo backend"));
    }
    // Another rank of this host: the host has a segment, so point_to_point_ is set.
    auto completion = std::make_shared<ShmCompletion>();
    point_to_point_->Start(std::move(tensor), topology_.local_rank_of[peer], peer, send,
                           completion);
    return std::unique_ptr<PendingCollective>(new ShmPending(std::move(completion)));
  }

  enum class Kind { kAllReduce, kBroadcast, kReduceScatter, kAllGather };

  struct Op {
    Kind kind = Kind::kAllReduce;
    at::Tensor tensor;  // An all-reduce's or broadcast's tensor; else the input.
    at::Tensor output;  // A reduce-scatter's or all-gather's output.
    int root = 0;       // A broadcast's root.
    bool mean = false;  // An all-reduce's result divided by the world size.
    std::shared_ptr<ShmCompletion> completion;
  };

  static absl::Status CheckTensor(const at::Tensor& tensor) {
    if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm collectives need contiguous CPU tensors, got ", tensor.device().str(),
                       tensor.is_contiguous() ? "" : " (strided)"));
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
  std::shared_ptr<ShmCompletion> Enqueue(Op op) {
    auto completion = std::make_shared<ShmCompletion>();
    op.completion = completion;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
    }
    if (!options_.collectives_on_waiter) cv_.notify_all();
    return completion;
  }

  // A pending collective for `completion`.
  std::unique_ptr<PendingCollective> Pending(std::shared_ptr<ShmCompletion> completion) {
    QueueRunner* runner = options_.collectives_on_waiter ? this : nullptr;
    return std::make_unique<ShmPending>(std::move(completion), runner);
  }

  // QueueRunner. Once run_mu_ is held, every collective taken off the queue is done, so an
  // empty queue means `completion` is.
  void RunUntilDone(ShmCompletion& completion) override {
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

  // Elements of one piece of `t` (host/shm_pieces.h).
  int64_t PieceElements(const at::Tensor& t) const {
    return ShmPieceElements(options_.slot_bytes, t.element_size());
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
          const auto [begin, end] = ShmChunkOf(len, j, local_size_);
          if (j != local_rank_ && end > begin) fn(j, begin, end - begin);
        }
      };
      for_other_chunks([&](int, int64_t begin, int64_t size) {
        own_slot.narrow(0, begin, size).copy_(mine.narrow(0, begin, size));
      });
      RETURN_IF_ERROR(segment_->Barrier());
      if (const auto [begin, end] = ShmChunkOf(len, local_rank_, local_size_); end > begin) {
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
      const auto [begin, end] = ShmChunkOf(len, local_rank_, local_size_);
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
  const std::unique_ptr<ShmSegment> segment_;    // Null if alone on this host.
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
  std::deque<Op> queue_;   // Guarded by mu_.
  bool stopping_ = false;  // Guarded by mu_.

  // Point to point; touched by the training thread only (Start*, the destructor). Null if
  // alone on this host. Destroyed right after the destructor's body: after the communication
  // thread, before the segment its pairs' segments were attached through.
  const std::unique_ptr<ShmPointToPoint> point_to_point_;

  std::thread thread_;  // Last: starts after every member above is constructed.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ShmOptions& options) {
  if (world_size < 1 || world_size > ShmSegment::kMaxMembers || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size,
                                                   " (shm: at most ", ShmSegment::kMaxMembers,
                                                   " ranks)"));
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
    return absl::InvalidArgumentError(
        absl::StrCat("shm parts of rank ", group.rank, " do not fit the topology ", t.ToString()));
  }
  RETURN_IF_ERROR(ValidateShmOptions(options));
  return std::unique_ptr<Communicator>(new ShmCommunicator(std::move(group), options));
}

}  // namespace baton::trainer
