"""The torchrun side of bench/recovery_vs_torchrun.sh: the same MLP as baton-trainer on the
same MNIST-format data (DDP over gloo, SGD with momentum, batch 64 per rank), a checkpoint
every --checkpoint_every steps (rank 0, atomic), resume from the newest one at start, the
way torchrun's elastic guide teaches it.

Rank 0 appends JSON events to --events: "start" (first line of the script, before importing
torch), "imported", "rendezvous" (process group up), "restored" (checkpoint loaded) and one
"step" per completed step; every event has the wall time "t", torchrun's restart count and
the step. Rank 1 SIGKILLs itself after completing the steps listed in --kill_at (one kill
per restart round), after appending a "kill" event; with --freeze it SIGSTOPs itself
instead (a hang: event "freeze"), and rank 0, blocked in the next all-reduce, appends a
"timeout" event when the process group's --pg_timeout (seconds; torch's default 30 min)
ends the wait.
"""
import time

T_START = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402

ARGS = None


def event(kind, **fields):
    with open(ARGS.events, "a") as f:
        f.write(json.dumps(dict(event=kind, restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
                                **fields)) + "\n")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--data_dir", required=True)
    p.add_argument("--checkpoint_dir", required=True)
    p.add_argument("--checkpoint_every", type=int, default=50)
    p.add_argument("--events", required=True)
    p.add_argument("--kill_at", default="", help="comma-separated steps, one per restart round")
    p.add_argument("--max_steps", type=int, default=100000)
    p.add_argument("--freeze", action="store_true", help="SIGSTOP instead of SIGKILL")
    p.add_argument("--pg_timeout", type=float, default=1800)
    ARGS = p.parse_args()
    rank = int(os.environ["RANK"])
    if rank == 0:
        event("start", t=T_START)

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler
    import ddp_baseline

    torch.set_num_threads(1)
    if rank == 0:
        event("imported", t=time.time())
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=ARGS.pg_timeout))
    world = dist.get_world_size()
    if rank == 0:
        event("rendezvous", t=time.time())
    torch.manual_seed(1)
    data = ddp_baseline.mnist(ARGS.data_dir)
    model = DDP(ddp_baseline.mlp([512, 512]))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    ckpts = sorted(f for f in os.listdir(ARGS.checkpoint_dir) if f.startswith("ckpt-"))
    if ckpts:
        state = torch.load(os.path.join(ARGS.checkpoint_dir, ckpts[-1]))
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    if rank == 0:
        event("restored", t=time.time(), step=step)
    kills = [int(s) for s in ARGS.kill_at.split(",") if s]
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
    kill_at = kills[restart] if restart < len(kills) else -1
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1,
                                 drop_last=True)
    loader = DataLoader(data, batch_size=64, sampler=sampler, drop_last=True)
    per_epoch = len(loader)
    while step < ARGS.max_steps:
        epoch, skip = divmod(step, per_epoch)
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if i < skip:
                continue
            opt.zero_grad(set_to_none=True)
            try:
                F.cross_entropy(model(x), y).backward()
            except RuntimeError:
                if rank == 0:
                    event("timeout", t=time.time(), step=step)
                raise
            opt.step()
            step += 1
            if rank == 0:
                event("step", t=time.time(), step=step)
                if step % ARGS.checkpoint_every == 0:
                    path = os.path.join(ARGS.checkpoint_dir, "ckpt-%08d.pt" % step)
                    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                                "step": step}, path + ".tmp")
                    os.replace(path + ".tmp", path)
            if rank == 1 and step == kill_at:
                with open(ARGS.events, "a") as f:
                    f.write(json.dumps(dict(event="freeze" if ARGS.freeze else "kill",
                                            t=time.time(), step=step, restart=restart)) + "\n")
                os.kill(os.getpid(), signal.SIGSTOP if ARGS.freeze else signal.SIGKILL)
            if step >= ARGS.max_steps:
                break


if __name__ == "__main__":
    main()
