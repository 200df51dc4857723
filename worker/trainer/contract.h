#pragma once

// The process contract between the worker daemon and `baton-trainer`: environment,
// flags, metric lines and exit codes. Header-only, no LibTorch, so the worker daemon can
// depend on it (//worker/trainer:contract).
//
// Environment (set by the worker, as torchrun sets it):
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
//   BATON_JOB_ID, BATON_GENERATION, BATON_METRICS_FD.
//   WORLD_SIZE unset: single process, no rendezvous. Otherwise RANK is required and, when
//   WORLD_SIZE > 1, MASTER_ADDR/MASTER_PORT too; rank 0 serves the c10d TCPStore on
//   MASTER_PORT (all interfaces) and the others connect to MASTER_ADDR:MASTER_PORT.
//   BATON_METRICS_FD: an inherited, writable fd (e.g. a pipe); unset = no metric lines.
//   Optional: GLOO_SOCKET_IFNAME picks the interface Gloo binds (as in PyTorch).
//
// Flags: `--name=value` for each kFlag* below; each maps to the TrainerSpec field of the
// same name (hidden: comma-separated widths, e.g. --hidden=256,128) or Budget field.
//
// Metric lines (on BATON_METRICS_FD): one JSON object per line, numbers only:
//   {"step":N,"epoch":E,"loss":L,"accuracy":A,"samples_per_sec":S,"lr":LR}
// written every --log_every optimizer steps and after the last step. step counts completed
// optimizer steps from 1; epoch is the 0-based epoch the step belongs to; loss/accuracy
// average this rank's training batches since the previous line; samples_per_sec is the
// global rate (batch_size * world_size per step) over that window. The line of the last
// step also carries "eval_accuracy" when the t10k test files exist (every rank reports the
// same value). Non-finite values (a diverged loss) are left out of the line.
//
// Exit codes: see kExit* below.

#include "absl/status/status.h"

namespace baton::trainer {

// Environment variables.
inline constexpr char kEnvRank[] = "RANK";
inline constexpr char kEnvWorldSize[] = "WORLD_SIZE";
inline constexpr char kEnvLocalRank[] = "LOCAL_RANK";
inline constexpr char kEnvLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kEnvGroupRank[] = "GROUP_RANK";
inline constexpr char kEnvMasterAddr[] = "MASTER_ADDR";
inline constexpr char kEnvMasterPort[] = "MASTER_PORT";
inline constexpr char kEnvJobId[] = "BATON_JOB_ID";
inline constexpr char kEnvGeneration[] = "BATON_GENERATION";
inline constexpr char kEnvMetricsFd[] = "BATON_METRICS_FD";

// Flag names (without the leading "--").
inline constexpr char kFlagModel[] = "model";
inline constexpr char kFlagDataset[] = "dataset";
inline constexpr char kFlagDataDir[] = "data_dir";
inline constexpr char kFlagBatchSize[] = "batch_size";
inline constexpr char kFlagLr[] = "lr";
inline constexpr char kFlagMomentum[] = "momentum";
inline constexpr char kFlagSeed[] = "seed";
inline constexpr char kFlagHidden[] = "hidden";
inline constexpr char kFlagLogEvery[] = "log_every";
inline constexpr char kFlagThreads[] = "threads";
inline constexpr char kFlagMaxSteps[] = "max_steps";
inline constexpr char kFlagMaxEpochs[] = "max_epochs";
inline constexpr char kFlagCheckpointDir[] = "checkpoint_dir";

// Metric keys.
inline constexpr char kMetricStep[] = "step";
inline constexpr char kMetricEpoch[] = "epoch";
inline constexpr char kMetricLoss[] = "loss";
inline constexpr char kMetricAccuracy[] = "accuracy";
inline constexpr char kMetricSamplesPerSec[] = "samples_per_sec";
inline constexpr char kMetricLr[] = "lr";
inline constexpr char kMetricEvalAccuracy[] = "eval_accuracy";

// Final weights written by rank 0 under --checkpoint_dir: a pickled Dict[str, Tensor]
// (parameter name -> tensor) that Python's torch.load reads.
inline constexpr char kFinalCheckpointName[] = "final.pt";

// Exit codes. Every non-zero exit prints exactly one "baton-trainer: <CODE>: <reason>" line,
// and it is the last line on stderr (LibTorch/Gloo may log their own lines before it), so
// the worker can use that line as the failure message.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;      // Bug or unexpected runtime error.
inline constexpr int kExitUsage = 2;         // Bad flags or environment: fix the spec.
inline constexpr int kExitData = 3;          // Dataset missing, unreadable or corrupt.
inline constexpr int kExitPeer = 4;          // Rendezvous failed or a peer vanished: retryable.
inline constexpr int kExitTerminated = 143;  // Stopped by SIGTERM/SIGINT (128 + 15).

// The exit code for a failed run with `status`.
inline int ExitCodeForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:
      return kExitData;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return kExitPeer;
    case absl::StatusCode::kCancelled:
      return kExitTerminated;
    default:
      return kExitInternal;
  }
}

}  // namespace baton::trainer
