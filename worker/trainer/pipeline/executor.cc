#include "worker/trainer/pipeline/executor.h"

#include <ATen/ATen.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace baton::trainer::pipeline {
namespace {

// An activation's header: dtype, number of dims, then the dims.
constexpr int64_t kMaxDims = 8;
constexpr int64_t kMetaLength = 2 + kMaxDims;

absl::StatusOr<at::Tensor> Meta(const at::Tensor& t) {
  if (t.dim() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline activation of ", t.dim(), " dims (at most ", kMaxDims, ")"));
  }
  at::Tensor meta = at::zeros({kMetaLength}, at::kLong);
  auto m = meta.accessor<int64_t, 1>();
  m[0] = static_cast<int64_t>(t.scalar_type());
  m[1] = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) m[2 + i] = t.size(i);
  return meta;
}

at::Tensor FromMeta(const at::Tensor& meta, c10::Device device) {
  auto m = meta.accessor<int64_t, 1>();
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < m[1]; ++i) sizes.push_back(m[2 + i]);
  return at::empty(sizes,
                   at::TensorOptions().dtype(static_cast<c10::ScalarType>(m[0])).device(device));
}

// Everything a micro-batch keeps between its forward and its backward.
struct MicroBatch {
  at::Tensor input;   // The stage's input (received: requires grad).
  at::Tensor output;  // The stage's output (the last stage: logits).
  at::Tensor loss;    // The last stage: this micro-batch's loss / M.
  at::Tensor grad;    // The gradient of `output`, received from the next stage.
};

}  // namespace

// What one step keeps from one action of the schedule to the next.
struct PipelineExecutor::StepState {
  std::vector<at::Tensor> input_chunks;   // The first stage: the micro-batches' inputs.
  std::vector<at::Tensor> target_chunks;  // The last stage: their targets.
  std::vector<MicroBatch> batches;        // By micro-batch.
  // Sends started, waited on at the end of the step (the tensors stay alive until then).
  std::vector<std::unique_ptr<PendingCollective>> sends;
  double loss_sum = 0.0;  // The last stage: the micro-batches' losses / M, summed.
  absl::Duration wait;    // Spent in receives and in the final wait on sends.
};

absl::StatusOr<std::unique_ptr<PipelineExecutor>> PipelineExecutor::Create(
    StageModel& stage, Communicator& pipeline, Communicator* data_parallel, ScheduleKind kind,
    int micro_batches) {
  if (pipeline.world_size() != stage.stages() || pipeline.rank() != stage.stage()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline communicator rank ", pipeline.rank(), " of ", pipeline.world_size(),
                     " does not fit stage ", stage.stage(), " of ", stage.stages()));
  }
  ASSIGN_OR_RETURN(std::vector<Action> actions,
                   StageActions(kind, stage.stage(), stage.stages(), micro_batches));
  return std::unique_ptr<PipelineExecutor>(
      new PipelineExecutor(stage, pipeline, data_parallel, micro_batches, std::move(actions)));
}

absl::StatusOr<StepResult> PipelineExecutor::RunStep(const at::Tensor& inputs,
                                                     const at::Tensor& targets,
                                                     const LossFn& loss) {
  try {
    return Run(inputs, targets, loss);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::InternalError(absl::StrCat("pipeline stage ", stage_.stage(), ": ",
                                            message.substr(0, message.find('\n'))));
  }
}

absl::StatusOr<StepResult> PipelineExecutor::Run(const at::Tensor& inputs,
                                                 const at::Tensor& targets, const LossFn& loss) {
  const absl::Time start = absl::Now();
  StepState step;
  if (stage_.first()) RETURN_IF_ERROR(SplitBatch(inputs, "inputs", step.input_chunks));
  if (stage_.last()) RETURN_IF_ERROR(SplitBatch(targets, "targets", step.target_chunks));
  step.batches.resize(micro_batches_);
  for (const Action& action : actions_) RETURN_IF_ERROR(RunAction(action, loss, step));
  const absl::Time drain = absl::Now();
  for (std::unique_ptr<PendingCollective>& pending : step.sends) RETURN_IF_ERROR(pending->Wait());
  step.wait += absl::Now() - drain;

  RETURN_IF_ERROR(ExchangeTiedGradients());
  if (data_parallel_ != nullptr && data_parallel_->world_size() > 1) {
    RETURN_IF_ERROR(AverageGradients(stage_.Parameters(), *data_parallel_));
  }
  StepResult result;
  result.loss = stage_.last() ? step.loss_sum : 0.0;
  result.total = absl::Now() - start;
  result.wait = step.wait;
  return result;
}

absl::Status PipelineExecutor::SplitBatch(const at::Tensor& t, const char* what,
                                          std::vector<at::Tensor>& out) const {
  const int m = micro_batches_;
  const int64_t rows = t.defined() && t.dim() > 0 ? t.size(0) : 0;
  if (rows == 0 || rows % m != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline stage ", stage_.stage(), ": a batch of ", rows, " ", what,
                     " does not split into ", m, " equal micro-batches"));
  }
  out = t.chunk(m, 0);
  return absl::OkStatus();
}

absl::Status PipelineExecutor::RunAction(const Action& action, const LossFn& loss,
                                         StepState& step) {
  const int prev = stage_.stage() - 1;
  const int next = stage_.stage() + 1;
  MicroBatch& mb = step.batches[action.micro_batch];
  switch (action.type) {
    case Action::Type::kRecvActivation: {
      at::Tensor meta = at::empty({kMetaLength}, at::kLong);
      RETURN_IF_ERROR(Receive(meta, prev, step));
      at::Tensor activation = FromMeta(meta, pipeline_.device());
      RETURN_IF_ERROR(Receive(activation, prev, step));
      mb.input = activation.requires_grad_(true);
      break;
    }
    case Action::Type::kForward: {
      if (stage_.first()) mb.input = step.input_chunks[action.micro_batch];
      mb.output = stage_.Forward(mb.input);
      if (stage_.last()) {
        mb.loss = loss(mb.output, step.target_chunks[action.micro_batch]) / micro_batches_;
        step.loss_sum += mb.loss.item<double>();
      }
      break;
    }
    case Action::Type::kSendActivation: {
      at::Tensor activation = mb.output.detach().contiguous();
      ASSIGN_OR_RETURN(at::Tensor meta, Meta(activation));
      RETURN_IF_ERROR(StartSend(meta, next, step));
      RETURN_IF_ERROR(StartSend(activation, next, step));
      break;
    }
    case Action::Type::kRecvGradient: {
      mb.grad = at::empty(mb.output.sizes(), mb.output.options().requires_grad(false));
      RETURN_IF_ERROR(Receive(mb.grad, next, step));
      break;
    }
    case Action::Type::kBackward: {
      if (stage_.last()) {
        mb.loss.backward();
      } else {
        mb.output.backward(mb.grad);
      }
      mb.output = at::Tensor();
      mb.loss = at::Tensor();
      mb.grad = at::Tensor();
      break;
    }
    case Action::Type::kSendGradient: {
      at::Tensor grad = mb.input.grad();
      if (!grad.defined()) grad = at::zeros_like(mb.input);  // The stage ignores its input.
      RETURN_IF_ERROR(StartSend(grad.contiguous(), prev, step));
      mb.input = at::Tensor();
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineExecutor::Receive(at::Tensor t, int src, StepState& step) {
  const absl::Time begin = absl::Now();
  absl::Status s = pipeline_.Recv(std::move(t), src);
  step.wait += absl::Now() - begin;
  return s;
}

absl::Status PipelineExecutor::StartSend(at::Tensor t, int dst, StepState& step) {
  ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending,
                   pipeline_.StartSend(std::move(t), dst));
  step.sends.push_back(std::move(pending));
  return absl::OkStatus();
}

absl::Status PipelineExecutor::ExchangeTiedGradients() {
  const int peer = stage_.TiedPeer();
  if (peer < 0) return absl::OkStatus();
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : stage_.TiedParameters()) {
    at::Tensor& grad = p.mutable_grad();
    if (!grad.defined()) grad = at::zeros_like(p);
    flat.push_back(grad.reshape({-1}));
  }
  if (flat.empty()) return absl::OkStatus();
  const at::Tensor mine = at::cat(flat);
  at::Tensor theirs = at::empty_like(mine);
  ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> sent, pipeline_.StartSend(mine, peer));
  RETURN_IF_ERROR(pipeline_.Recv(theirs, peer));
  RETURN_IF_ERROR(sent->Wait());
  // a + b == b + a in floating point: both stages end with the same bits.
  const at::Tensor sum = mine + theirs;
  int64_t offset = 0;
  for (const at::Tensor& p : stage_.TiedParameters()) {
    at::Tensor grad = p.mutable_grad();
    grad.copy_(sum.narrow(0, offset, grad.numel()).view(grad.sizes()));
    offset += grad.numel();
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer::pipeline
