#pragma once

// Runs one pipeline stage's schedule (schedule.h) for a training step: forwards and
// backwards of its part of the model (stage_model.h) on M micro-batches, activations sent
// to the next stage and gradients of its inputs sent back to the previous one, point to
// point over the pipeline's Communicator (communicator.h's StartSend/StartRecv).
//
// Gradients: the last stage's loss for a micro-batch is divided by M before its backward,
// so with equal micro-batches the gradients each stage accumulates over the step are those
// of the mean loss over the whole batch (as one process computing the batch at once, up to
// the order in which the M partial sums are added: not bit-identical, see
// executor_test.cc). A stage's backward starts from its output with the gradient the next
// stage sent (output.backward(grad)); the input it received requires grad, so its .grad is
// what goes back. After the schedule: the tied parameters' gradients (GPT's wte on the first
// and last stage) are summed between the two stages; then, with data parallelism, every
// parameter's gradient is averaged over the stage's replicas.
//
// Transfers: sends are started and waited on only at the end of the step (the tensors stay
// alive until then); receives are waited on at once. Since starting a send never waits for
// the peer, every schedule whose simulation in schedule_test.cc completes cannot deadlock.
// Each activation is preceded by a small int64 message with its dtype and shape (the
// receiver allocates from it); gradients have the shape the receiver already knows.
//
// Threading: one training thread per stage, which owns the executor and the communicators'
// calls (as Communicator requires).

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/pipeline/schedule.h"
#include "worker/trainer/pipeline/stage_model.h"

namespace baton::trainer::pipeline {

// The mean loss of one micro-batch: logits (the last stage's output) against its targets.
using LossFn = std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& targets)>;

struct StepResult {
  // The mean loss over the step's batch; on the last stage only (0 elsewhere).
  double loss = 0.0;
  // Wall time of the step (schedule, transfers, gradient exchanges), and of it the time spent
  // waiting for peers: in receives and in the final wait on sends. wait / total approximates
  // this stage's bubble (bench/pipeline.sh compares it with BubbleFraction).
  absl::Duration total;
  absl::Duration wait;
};

class PipelineExecutor {
 public:
  // `pipeline`: the communicator of this pipeline's stages, rank == stage, world == stages.
  // `data_parallel`: the communicator of this stage's replicas (one per pipeline), or null
  // for none. Both must outlive the executor, as must `stage`. INVALID_ARGUMENT if the
  // ranks do not fit the stage or micro_batches < 1.
  static absl::StatusOr<std::unique_ptr<PipelineExecutor>> Create(StageModel& stage,
                                                                  Communicator& pipeline,
                                                                  Communicator* data_parallel,
                                                                  ScheduleKind kind,
                                                                  int micro_batches);

  // One step's forward and backward: adds the gradient of the batch's mean loss to the .grad
  // of stage.Parameters() (zero them before, step the optimizer after). `inputs`: the whole
  // batch's model inputs, on the first stage (ignored elsewhere); `targets`: its targets, on
  // the last stage (ignored elsewhere); both split into M equal micro-batches along dim 0.
  // INVALID_ARGUMENT if the batch does not split into M; errors of the communicators
  // (UNAVAILABLE: a peer is gone); INTERNAL for LibTorch's errors.
  absl::StatusOr<StepResult> RunStep(const at::Tensor& inputs, const at::Tensor& targets,
                                     const LossFn& loss);

 private:
  PipelineExecutor(StageModel& stage, Communicator& pipeline, Communicator* data_parallel,
                   int micro_batches, std::vector<Action> actions)
      : stage_(stage),
        pipeline_(pipeline),
        data_parallel_(data_parallel),
        micro_batches_(micro_batches),
        actions_(std::move(actions)) {}

  struct StepState;  // What one step keeps between the actions of its schedule.

  absl::StatusOr<StepResult> Run(const at::Tensor& inputs, const at::Tensor& targets,
                                 const LossFn& loss);
  // Splits `t` (`what`: "inputs" or "targets", for the message) into micro_batches_ equal
  // chunks along dim 0 into `out`; INVALID_ARGUMENT if it does not split.
  absl::Status SplitBatch(const at::Tensor& t, const char* what,
                          std::vector<at::Tensor>& out) const;
  // Runs one action of the schedule on `step`.
  absl::Status RunAction(const Action& action, const LossFn& loss, StepState& step);
  // pipeline_.Recv, its time added to step.wait.
  absl::Status Receive(at::Tensor t, int src, StepState& step);
  // pipeline_.StartSend, the transfer kept in step.sends (waited on at the end of Run).
  absl::Status StartSend(at::Tensor t, int dst, StepState& step);
  absl::Status ExchangeTiedGradients();

  StageModel& stage_;
  Communicator& pipeline_;
  Communicator* const data_parallel_;
  const int micro_batches_;
  const std::vector<Action> actions_;
};

}  // namespace baton::trainer::pipeline
