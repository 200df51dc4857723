#pragma once

// The process contract between the worker daemon and `baton-trainer`: environment,
// flags, metric lines and exit codes. Header-only, no LibTorch, so the worker daemon can
// depend on it (//worker/trainer/contract).
//
// Environment (set by the worker, as torchrun sets it):
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
//   BATON_JOB_ID, BATON_GENERATION, BATON_METRICS_FD.
//   WORLD_SIZE unset: single process, no rendezvous. Otherwise RANK is required and, when
//   WORLD_SIZE > 1, MASTER_ADDR/MASTER_PORT too; rank 0 serves the c10d TCPStore on
//   MASTER_PORT (all interfaces) and the others connect to MASTER_ADDR:MASTER_PORT.
//   BATON_METRICS_FD: an inherited, writable fd (e.g. a pipe); unset = no metric lines.
//   BATON_GENERATION: the rendezvous generation, an integer >= 0 (anything else is a usage
//   error); unset or 0 = unknown (a run outside Baton). It names the checkpoints and fences
//   the checkpoint directory against older generations (see kFinalCheckpointName).
//   Optional: GLOO_SOCKET_IFNAME picks the interface Gloo binds (as in PyTorch).
//   Optional: BATON_HOST_KEY, if set and non-empty, replaces this rank's host key: ranks
//   with equal keys count as one host for the CPU backends (default: derived from the
//   kernel's boot id, /dev/shm's device and the PID namespace; tests use it to simulate
//   several hosts on one machine).
//
// Flags: `--name=value` for each TrainerSpec field, named like the field (a field of a
// nested message as `<field>_<subfield>`: TrainerSpec.zero.stage is --zero_stage), and for Budget's
// max_steps and max_epochs and JobSpec's checkpoint_dir (hidden: comma-separated widths,
// e.g. --hidden=256,128; booleans: true/false). Every one of them, its default and the
// values it allows are in common/spec/trainer_spec_defaults.h, the table submit validates
// against; the worker passes every flag (worker/supervisor/trainer_args.h), so a default only
// applies to a standalone run. Non-contract tuning flags: --device=auto|cpu|cuda (auto:
// CUDA when a GPU is visible, NCCL between ranks; else CPU),
// --cpu_backend=auto|shm|gloo|hierarchical (auto: shared memory when every rank is on one
// host; hierarchical, i.e. shared memory inside each host and Gloo between one leader per
// host, when ranks are on several hosts and some host has more than one; else Gloo),
// --rendezvous_timeout, --collective_timeout, --profile_dir, --profile_steps.
//
// Signals: SIGTERM/SIGINT stop before the next step (a second one, or 5 s, ends the process
// at once); SIGUSR1 asks rank 0 to checkpoint at the next step boundary and exit
// kExitCheckpointed (other ranks ignore it; with --zero_stage=1 on more than one rank they
// follow rank 0's request, take part in the save and exit kExitCheckpointed too); with
// --profile_dir=DIR, SIGUSR2 asks for a
// profiling window of steps written to DIR as a Chrome trace (worker/trainer/profile/
// profiler.h has the request file and the output's names); without it SIGUSR2 is ignored.
//
// Metric lines (on BATON_METRICS_FD): one JSON object per line, numbers only, e.g.
//   {"step":N,"epoch":E,"loss":L,"accuracy":A,"samples_per_sec":S,"lr":LR,
//    "time_step_s":T,"time_data_s":..,"time_forward_s":..,"time_backward_s":..,
//    "time_comm_wait_s":..,"time_optimizer_s":..,"grad_norm":G}
// written every --log_every optimizer steps, after the last step and at each evaluation
// (--eval_every). step counts completed
// optimizer steps from 1 (global: it continues after a restore); epoch is the 0-based
// epoch the step belongs to; loss/accuracy average this rank's training micro-batches
// since the previous line (accuracy: the fraction of samples, or of target tokens for a
// language model, predicted right); samples_per_sec is the global rate
// (batch_size * accumulation_steps * world_size samples per step) over that window; lr is
// the learning rate of the window's last step. The time_* keys are seconds per optimizer
// step, averaged over the window: time_step_s the whole step (wall), time_data_s waiting
// for the loader's batches, time_forward_s forward + loss, time_backward_s backward()
// (gradient hooks and the all-reduces started during it included), time_comm_wait_s
// finishing the all-reduces after backward() and waiting for them, time_optimizer_s
// unscale/overflow check, clipping, the optimizer update and the scaler update. The
// phases partition the step, so they sum to time_step_s: the bookkeeping around them is
// counted too (the epoch seek and setting the lr as data, accumulating the loss as
// backward, the sample log as optimizer). On a GPU each phase ends with a device
// synchronisation so the split is the device's.
// grad_norm: mean L2 norm of the averaged (unscaled, pre-clipping) gradient over the
// window's applied steps. comm_bytes: gradient bytes this rank all-reduces per optimizer
// step (as sent: 16-bit when compressed; 0 for one process). Conditional keys: "tokens_per_sec"
// (language models: target tokens per second, global); "loss_scale" and "skipped_steps" (precision
// fp16: the scale after the window's last step, steps skipped for inf/NaN in the window);
// "mem_allocated_bytes", "mem_reserved_bytes", "mem_peak_bytes" (CUDA: the caching
// allocator's current and, since the previous line, peak allocation); "eval_accuracy" on
// the line of the last step and every --eval_every steps when the dataset has a test split
// (every rank reports the same value). Non-finite values (a diverged loss) are left out of
// the line.
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
inline constexpr char kEnvHostKey[] = "BATON_HOST_KEY";
// Where a command job saves and resumes its state (the spec's checkpoint_dir); set only when
// the spec has one. baton-trainer takes it as --checkpoint_dir instead.
inline constexpr char kEnvCheckpointDir[] = "BATON_CHECKPOINT_DIR";
// A directory on a memory file system that the worker keeps for the job on this host across
// its generations, private to the job's ranks: where in-memory snapshots of the training
// state live (baton-trainer: snapshot/snapshot_store.h). Unset: no snapshots.
inline constexpr char kEnvSnapshotDir[] = "BATON_SNAPSHOT_DIR";
// A pipe the worker writes to (rejoin_protocol.h): a rank started with it stays alive when a
// peer is lost and joins the next generation it is told of, in the same process. Unset:
// such a rank exits kExitPeer, as every rank did before.
inline constexpr char kEnvRejoinFd[] = "BATON_REJOIN_FD";
// Fault injection for tests only: a duration (e.g. "3s") every data epoch boundary of
// baton-trainer then takes longer, as a slow storage listing would make it. Not a BATON_
// name, so a job's `env` can set it (it slows that job alone).
inline constexpr char kEnvFaultEpochDelay[] = "TRAINER_FAULT_EPOCH_DELAY";
// Fault injection for tests only: "RANK:STEP" makes rank RANK's training thread block for
// good before optimizer step STEP, as a deadlock or a hung device would, while its
// heartbeat goes on.
inline constexpr char kEnvFaultHang[] = "TRAINER_FAULT_HANG";

// Metric keys.
inline constexpr char kMetricStep[] = "step";
inline constexpr char kMetricEpoch[] = "epoch";
inline constexpr char kMetricLoss[] = "loss";
inline constexpr char kMetricAccuracy[] = "accuracy";
inline constexpr char kMetricSamplesPerSec[] = "samples_per_sec";
inline constexpr char kMetricLr[] = "lr";
inline constexpr char kMetricEvalAccuracy[] = "eval_accuracy";
inline constexpr char kMetricTokensPerSec[] = "tokens_per_sec";
inline constexpr char kMetricTimeStep[] = "time_step_s";
inline constexpr char kMetricTimeData[] = "time_data_s";
inline constexpr char kMetricTimeForward[] = "time_forward_s";
inline constexpr char kMetricTimeBackward[] = "time_backward_s";
inline constexpr char kMetricTimeCommWait[] = "time_comm_wait_s";
inline constexpr char kMetricTimeOptimizer[] = "time_optimizer_s";
inline constexpr char kMetricGradNorm[] = "grad_norm";
inline constexpr char kMetricLossScale[] = "loss_scale";
inline constexpr char kMetricSkippedSteps[] = "skipped_steps";
inline constexpr char kMetricMemAllocated[] = "mem_allocated_bytes";
inline constexpr char kMetricMemReserved[] = "mem_reserved_bytes";
inline constexpr char kMetricMemPeak[] = "mem_peak_bytes";
inline constexpr char kMetricCommBytes[] = "comm_bytes";

// Heartbeat lines (progress/heartbeat.h): besides its metric lines, baton-trainer writes
// one line every --heartbeat_interval (100 ms; 0 = none) from a thread of its own, e.g.
//   {"beat":B,"step":N,"phase":P,"phase_s":T,"coll":C,"waiting":0,"ref_step_s":R,...}
// beat numbers the heartbeats from 1 (per process); step counts completed optimizer steps;
// phase is a TrainingPhase code and phase_s the seconds since it began; coll counts the
// collectives the process started; waiting is 1 while it is blocked waiting for one, with
// wait_s the seconds since; ref_<phase name>_s is the longest of the phase's last 32
// completed durations (left out for a phase not completed yet). The worker relays the
// newest heartbeat of each rank to the coordinator (RankBeat), never as a metric point.
inline constexpr char kHeartbeatSeq[] = "beat";
inline constexpr char kHeartbeatPhase[] = "phase";
inline constexpr char kHeartbeatInPhase[] = "phase_s";
inline constexpr char kHeartbeatCollectives[] = "coll";
inline constexpr char kHeartbeatWaiting[] = "waiting";
inline constexpr char kHeartbeatWaited[] = "wait_s";
inline constexpr char kHeartbeatReferencePrefix[] = "ref_";
inline constexpr char kHeartbeatReferenceSuffix[] = "_s";

// The phases of a rank's run whose durations differ by orders of magnitude, so the
// coordinator gives each a timeout of its own. Values are the heartbeat's phase codes.
enum class TrainingPhase {
  // From the start of the process (or of its rejoin) through its generation's first step:
  // data loading, rendezvous, restore, the first step's allocations.
  kStartup = 0,
  kStep = 1,        // an optimizer step after the first
  kEval = 2,        // an evaluation pass over the test split
  kCheckpoint = 3,  // a checkpoint save (every rank taking part, with ZeRO)
  kEpoch = 4,       // a data epoch boundary: the loader moving to the next epoch
};
inline constexpr int kTrainingPhases = 5;

// The wire name of a phase: "startup", "step", "eval", "checkpoint", "epoch" (RankBeat,
// RestartPolicy.phase_timeouts, the heartbeat's ref_<name>_s keys).
inline const char* TrainingPhaseName(TrainingPhase phase) {
  switch (phase) {
    case TrainingPhase::kStartup:
      return "startup";
    case TrainingPhase::kStep:
      return "step";
    case TrainingPhase::kEval:
      return "eval";
    case TrainingPhase::kCheckpoint:
      return "checkpoint";
    case TrainingPhase::kEpoch:
      return "epoch";
  }
  return "unknown";
}

// With --pipeline_stages=S > 1 (worker/trainer/pipeline_session.h) everything below is per
// stage, in <checkpoint_dir>/pipeline-<S>-stage-<s>/ (written by the stage's first replica,
// final.pt holding that stage's parameters), SIGUSR1 is followed by every rank as with ZeRO,
// and every rank's metric lines carry the last stages' loss.
// Final weights written by rank 0 under --checkpoint_dir: a pickled Dict[str, Tensor]
// (parameter and buffer name -> tensor) that Python's torch.load reads. Full training
// state checkpoints go to the same directory (see checkpoint/checkpoint_manager.h):
// ckpt-<step, 8 digits>-g<generation>.pt (ckpt-<step>.pt when BATON_GENERATION is 0 or
// unset), every --checkpoint_every steps and after the last step; every rank resumes from
// the newest valid one that is not stale at start. Then rank 0 of generation g >= 1 writes
// gen-<g, 8 digits>.start (its job, BATON_JOB_ID, and the step it resumed from). From then
// on a process of an older generation (one left running by a network partition) writes,
// replaces and deletes nothing there: it exits kExitData at its next checkpoint or final
// save (at once, if it starts only now) with the line
// "baton-trainer: FAILED_PRECONDITION: generation <g> is superseded by generation <g'> ...".
// A directory serves one job at a time: a new job started in an earlier job's directory
// continues from that job's newest checkpoint and takes the directory over (the earlier
// job's start records go; a writer of that job is fenced like an older generation).
inline constexpr char kFinalCheckpointName[] = "final.pt";

// Exit codes. Every non-zero exit prints exactly one "baton-trainer: <CODE>: <reason>" line,
// and it is the last line on stderr (LibTorch/Gloo may log their own lines before it), so
// the worker can use that line as the failure message.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;      // Bug or unexpected runtime error.
inline constexpr int kExitUsage = 2;         // Bad flags or environment: fix the spec.
// Dataset missing, unreadable or corrupt; a checkpoint that does not fit the job; or this
// generation is superseded by a newer one in --checkpoint_dir (see kFinalCheckpointName).
inline constexpr int kExitData = 3;
inline constexpr int kExitPeer = 4;          // Rendezvous failed or a peer vanished: retryable.
inline constexpr int kExitTerminated = 143;  // Stopped by SIGTERM/SIGINT (128 + 15).
// Rank 0 got SIGUSR1: it saved a checkpoint at the next step boundary and left (the other
// ranks then exit kExitPeer). Restart the gang from that checkpoint; no step is lost.
inline constexpr int kExitCheckpointed = 75;

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
