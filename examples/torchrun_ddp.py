"""A plain PyTorch DistributedDataParallel script, written for torchrun, elastic under Baton.

It runs unchanged under torchrun and under Baton, which sets the same environment
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...):

    torchrun --nproc_per_node=2 examples/torchrun_ddp.py
    baton submit examples/torchrun_ddp.yaml

(Debian's torchrun for PyTorch 1.13 on Python 3.11 also needs `--redirects 9:1 --tee 9:1`.)

Under Baton it uses the in-script helper `baton` (client/python; imported from the
repository by path when it is not installed; with neither, or outside Baton, every call is
a no-op or has a stand-in here):
* it reports step, loss, epoch and samples on every step (`baton submit --wait` shows them);
* after every step it keeps an in-memory snapshot (`baton.snapshot`), and at start it
  resumes from the newest one any rank holds when that is newer than the disk checkpoint
  (`baton.restore`): a rank killed mid-run costs at most the step in flight;
* with `command: {elastic: true}` and a `checkpoint_dir` in the job spec, a drain or a
  scale-up asks rank 0 to checkpoint (SIGUSR1): it finishes the step it is in, saves model,
  optimizer and step to BATON_CHECKPOINT_DIR and exits 75; the next generation, at another
  world size, resumes from the newest checkpoint there, so no step is lost or repeated.

Resizing exactly: the batch is global (GLOBAL_BATCH samples a step, split evenly over the
ranks, so the world size must divide it) and the sample order depends only on the seed, the
epoch and the step, not on the world size; DDP averages the ranks' mean losses' gradients,
which is the gradient of the mean over the global batch. So a run resized mid-way trains
every step on the same samples as an uninterrupted one, and its weights differ only by the
rounding of fp32 sums in another order.

The data is synthetic and generated from a fixed seed, so every rank builds the same
dataset without any download: 10 overlapping Gaussian blobs in 16 dimensions. Rank 0 prints
the loss of the first and last epoch and exits non-zero if the model did not learn.

Environment (all optional): EPOCHS (3) or STEPS (total optimizer steps; overrides EPOCHS);
CHECKPOINT_EVERY (0: only on request and at the end), also saved to BATON_CHECKPOINT_DIR;
SAMPLE_LOG (append "generation step rank ids" per step to <SAMPLE_LOG>.<rank>, as the
built-in trainer's sample_log does); STEP_SECONDS (pace each step to at least this long, a
stand-in for a heavier model so a demo or a test can act while it trains).
"""

import gc
import glob
import os
import re
import sys
import time

# First, so that its SIGUSR1 handler is in place before the slow imports: a checkpoint
# request that arrived earlier would end the process (SIGUSR1's default action).
try:
    import baton
except ImportError:  # Not installed: the copy in this repository (client/python).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "client", "python"))
    try:
        import baton
    except ImportError:
        baton = None

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

NUM_SAMPLES = 4096
DIM = 16
CLASSES = 10
GLOBAL_BATCH = 96  # Samples per optimizer step, over all ranks: 1, 2, 3, 4, 6, 8, ... ranks.
STEPS_PER_EPOCH = NUM_SAMPLES // GLOBAL_BATCH
CHECKPOINT_EXIT_CODE = baton.CHECKPOINT_EXIT_CODE if baton else 75


def make_blobs(seed: int):
    """Class c is a unit Gaussian around a random centre; the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    centres = 0.5 * torch.randn(CLASSES, DIM, generator=g)
    labels = torch.randint(CLASSES, (NUM_SAMPLES,), generator=g)
    inputs = centres[labels] + torch.randn(NUM_SAMPLES, DIM, generator=g)
    return inputs, labels


def batch_ids(step: int, rank: int, world: int) -> torch.Tensor:
    """Sample ids of `rank`'s share of optimizer step `step` (from 1): a permutation per
    epoch from a fixed seed, cut into global batches; rank r takes the r-th slice."""
    epoch, index = divmod(step - 1, STEPS_PER_EPOCH)
    order = torch.randperm(NUM_SAMPLES, generator=torch.Generator().manual_seed(1000 + epoch))
    per_rank = GLOBAL_BATCH // world
    start = index * GLOBAL_BATCH + rank * per_rank
    return order[start:start + per_rank]


def checkpoint_dir():
    if baton is not None:
        return baton.rank_info().checkpoint_dir
    return os.environ.get("BATON_CHECKPOINT_DIR") or None


def newest_checkpoint(directory):
    """(step, path) of the newest ckpt-<step>-g<generation>.pt in `directory`, or None."""
    best = None
    for path in glob.glob(os.path.join(directory, "ckpt-*.pt")):
        m = re.fullmatch(r"ckpt-(\d+)-g(\d+)\.pt", os.path.basename(path))
        if m:
            key = (int(m.group(1)), int(m.group(2)))
            if best is None or key > best[0]:
                best = (key, path)
    return None if best is None else (best[0][0], best[1])


def save(directory, name, state):
    """Writes `state` to directory/name atomically (a temporary file, then a rename)."""
    tmp = os.path.join(directory, name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, os.path.join(directory, name))


def main() -> int:
    dist.init_process_group("gloo")  # Reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
    rank, world = dist.get_rank(), dist.get_world_size()
    generation = int(os.environ.get("BATON_GENERATION", "0") or 0)
    if GLOBAL_BATCH % world != 0:
        print(f"FAILED: world size {world} does not divide the global batch {GLOBAL_BATCH}",
              file=sys.stderr, flush=True)
        return 2
    if rank == 0:
        print(f"world_size={world} master={os.environ.get('MASTER_ADDR')}:"
              f"{os.environ.get('MASTER_PORT')}", flush=True)
    total_steps = int(os.environ.get("STEPS") or 0) or \
        int(os.environ.get("EPOCHS", "3")) * STEPS_PER_EPOCH
    checkpoint_every = int(os.environ.get("CHECKPOINT_EVERY", "0"))
    step_seconds = float(os.environ.get("STEP_SECONDS", "0"))
    sample_log = os.environ.get("SAMPLE_LOG")
    ckpt_dir = checkpoint_dir()

    inputs, labels = make_blobs(seed=1234)
    torch.manual_seed(0)  # Same initial weights everywhere (DDP also broadcasts rank 0's).
    net = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    step, epoch_losses = 0, {}  # epoch -> [sum of rank-averaged losses, steps]
    found = newest_checkpoint(ckpt_dir) if ckpt_dir else None
    if found is not None:
        state = torch.load(found[1])
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, epoch_losses = state["step"], state["epoch_losses"]
        if rank == 0:
            print(f"resumed: step={step} from {os.path.basename(found[1])} at world size "
                  f"{world}", flush=True)
    # After a failure: the newest in-memory snapshot a surviving rank holds, when it is newer
    # than the disk checkpoint (a collective: every rank calls it).
    snap = baton.restore(newer_than=step) if baton is not None else None
    if snap is not None:
        step, saved = snap
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        epoch_losses = saved["epoch_losses"]
        if rank == 0:
            print(f"resumed: step={step} from memory at world size {world}", flush=True)
    model = DistributedDataParallel(net)

    def state():
        return {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                "epoch_losses": epoch_losses}

    log = open(f"{sample_log}.{rank}", "a") if sample_log else None
    last_report = step
    while step < total_steps:
        started = time.monotonic()
        ids = batch_ids(step + 1, rank, world)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs[ids]), labels[ids])
        loss.backward()  # DDP all-reduces (averages) the gradients here.
        optimizer.step()
        step += 1
        # Logged before the next collective, which no rank passes before every rank logged:
        # a step that any rank snapshotted (below) is in every rank's log.
        if log is not None:
            log.write(f"{generation} {step} {rank} {','.join(str(i) for i in ids.tolist())}\n")
            log.flush()
        # The epoch's loss over all ranks (a collective: every rank finished this step).
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss = mean_loss.item() / world
        epoch = (step - 1) // STEPS_PER_EPOCH
        acc = epoch_losses.setdefault(epoch, [0.0, 0])
        acc[0] += mean_loss
        acc[1] += 1
        if baton is not None:
            baton.snapshot(state(), step)
            baton.report(step=step, loss=loss.item(),
                         samples=GLOBAL_BATCH * (step - last_report), epoch=epoch)
            last_report = step
        if rank == 0 and ckpt_dir and checkpoint_every > 0 and step % checkpoint_every == 0:
            save(ckpt_dir, f"ckpt-{step:08d}-g{generation}.pt", state())
        # A step boundary: asked to checkpoint (a planned resize), rank 0 saves and leaves.
        # The other ranks are then blocked in the next step's all-reduce and are stopped by
        # Baton, so none of them completes a step rank 0 did not.
        if rank == 0 and baton is not None and baton.checkpoint_requested() and step < total_steps:
            if ckpt_dir is None:
                print("checkpoint requested, but the job has no checkpoint_dir; going on",
                      file=sys.stderr, flush=True)
            else:
                save(ckpt_dir, f"ckpt-{step:08d}-g{generation}.pt", state())
                print(f"checkpointed: step={step} (requested); exiting {CHECKPOINT_EXIT_CODE}",
                      flush=True)
                os._exit(CHECKPOINT_EXIT_CODE)  # Peers are blocked in a collective: no teardown.
        if step_seconds > 0:
            time.sleep(max(0.0, step_seconds - (time.monotonic() - started)))

    if rank == 0 and ckpt_dir:
        save(ckpt_dir, f"ckpt-{step:08d}-g{generation}.pt", state())
        save(ckpt_dir, "final.pt", net.state_dict())
    # Teardown order matters with PyTorch 1.13 and Gloo: the DDP wrapper's reducer holds a
    # reference to the process group. Freed after destroy_process_group() it drops the last
    # one, and the group's destructor then joins Gloo's worker threads while holding the
    # GIL; a worker still freeing the last step's tensors waits for the GIL: a deadlock
    # after training (rank 0 never exits). Freed first, the group is destroyed by
    # destroy_process_group(), whose binding releases the GIL.
    del model
    gc.collect()
    dist.destroy_process_group()
    if rank == 0:
        losses = [s / n for _, (s, n) in sorted(epoch_losses.items())]
        if not losses or not losses[-1] < losses[0]:
            print(f"FAILED: epoch losses {losses} do not fall", file=sys.stderr, flush=True)
            return 1
        print(f"done: loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
