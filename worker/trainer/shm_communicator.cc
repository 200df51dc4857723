#include "worker/trainer/shm_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
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
  ShmCommunicator(c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<ShmSegment> segment,
                  ShmOptions options)
      : store_(std::move(store)),
        segment_(std::move(segment)),
        rank_(segment_->index()),
        world_size_(segment_->size()),
        options_(options),
        thread_([this] { Loop(); }) {}

  ~ShmCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    segment_->Cancel();
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
    const int64_t n = static_cast<int64_t>(options_.slot_bytes / 2) / t.element_size();
    return std::max<int64_t>(kChunkAlign, n / kChunkAlign * kChunkAlign);
  }

  // `len` elements of slot `slot`'s buffer for `parity`, typed like `like`.
  at::Tensor View(int slot, uint64_t parity, int64_t len, const at::Tensor& like) const {
    return at::from_blob(segment_->Buffer(slot, parity), {len}, like.options());
  }

  absl::Status RunAllReduce(at::Tensor& flat) {
    const int64_t n = flat.numel();
    const int64_t piece = PieceElements(flat);
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t len = std::min(piece, n - off);
      const uint64_t parity = pieces_++ & 1;
      at::Tensor mine = flat.narrow(0, off, len);
      View(rank_, parity, len, flat).copy_(mine);
      RETURN_IF_ERROR(segment_->Barrier());
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
      RETURN_IF_ERROR(segment_->Barrier());
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
      RETURN_IF_ERROR(segment_->Barrier());
      if (rank_ != root) mine.copy_(View(root, parity, len, flat));
    }
    return absl::OkStatus();
  }

  // Kept alive: on rank 0 it serves the store, which peers may still be reading the setup
  // keys from after this rank finished its setup.
  const c10::intrusive_ptr<c10d::Store> store_;
  const std::unique_ptr<ShmSegment> segment_;
  const int rank_;
  const int world_size_;
  const ShmOptions options_;

  // Communication thread only.
  uint64_t pieces_ = 0;   // Pieces moved so far (their parity picks the buffer).
  absl::Status broken_;   // First failure; fails every later collective.

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // Guarded by mu_.
  bool stopping_ = false;  // Guarded by mu_.

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
    return std::unique_ptr<Communicator>(new ShmCommunicator(store, std::move(segment), options));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("shm setup through the store failed (rank ", rank,
                                               "): ", message.substr(0, message.find('\n'))));
  }
}

}  // namespace baton::trainer
