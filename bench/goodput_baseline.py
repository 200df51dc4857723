"""The torchrun side of bench/goodput.sh: the same MLP as baton-trainer (784-512-512-10,
SGD with momentum, batch 64 per rank) on the same MNIST-format data, DDP over gloo, in its
strongest form here: the whole training set is one tensor and each step's batch is indexed
from it (a per-epoch permutation from a fixed seed; no per-sample DataLoader), and a resume
computes its position instead of iterating to it. Rank 0 saves a checkpoint every
--checkpoint_every steps (atomically) and every rank resumes from the newest at start, the
way torchrun's elastic guide teaches it. Rank 0 appends {"t", "step"} JSON lines to
--events: one "step" per completed step."""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_baseline import read_idx  # This directory is on sys.path (the script's own).


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data_dir", required=True)
    p.add_argument("--checkpoint_dir", required=True)
    p.add_argument("--checkpoint_every", type=int, default=50)
    p.add_argument("--events", required=True)
    p.add_argument("--max_steps", type=int, default=10 ** 9)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x = read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    x = torch.from_numpy(((x - 0.1307) / 0.3081).reshape(len(x), -1))
    y = torch.from_numpy(read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte")).astype(np.int64))
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    ckpts = sorted(f for f in os.listdir(args.checkpoint_dir) if f.startswith("ckpt-") and f.endswith(".pt"))
    if ckpts:
        state = torch.load(os.path.join(args.checkpoint_dir, ckpts[-1]))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    model = DDP(model)
    batch = 64
    per_epoch = len(x) // (batch * world)
    order, order_epoch = None, -1
    while step < args.max_steps:
        epoch, i = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1000 + epoch))
            order_epoch = epoch
        ids = order[(i * world + rank) * batch:(i * world + rank + 1) * batch]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[ids]), y[ids]).backward()
        opt.step()
        step += 1
        if rank == 0:
            with open(args.events, "a") as f:
                f.write(json.dumps(dict(event="step", t=time.time(), step=step)) + "\n")
            if step % args.checkpoint_every == 0:
                path = os.path.join(args.checkpoint_dir, "ckpt-%08d.pt" % step)
                torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                            "step": step}, path + ".tmp")
                os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
