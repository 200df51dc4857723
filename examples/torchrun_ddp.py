"""A plain PyTorch DistributedDataParallel script, written for torchrun.

It runs unchanged under torchrun and under Baton, which sets the same environment
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...):

    torchrun --nproc_per_node=2 examples/torchrun_ddp.py
    baton submit examples/torchrun_ddp.yaml

(Debian's torchrun for PyTorch 1.13 on Python 3.11 also needs `--redirects 9:1 --tee 9:1`.)

The data is synthetic and generated from a fixed seed, so every rank builds the same
dataset without any download: 10 overlapping Gaussian blobs in 16 dimensions. Rank 0 prints the
epoch loss averaged over all ranks and exits non-zero if the model did not learn.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

NUM_SAMPLES = 4096
DIM = 16
CLASSES = 10
BATCH_SIZE = 64  # Per rank.
EPOCHS = int(os.environ.get("EPOCHS", "3"))


def make_blobs(seed: int) -> TensorDataset:
    """Class c is a unit Gaussian around a random centre; the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    centres = 0.5 * torch.randn(CLASSES, DIM, generator=g)
    labels = torch.randint(CLASSES, (NUM_SAMPLES,), generator=g)
    inputs = centres[labels] + torch.randn(NUM_SAMPLES, DIM, generator=g)
    return TensorDataset(inputs, labels)


def main() -> int:
    dist.init_process_group("gloo")  # Reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"world_size={world} master={os.environ.get('MASTER_ADDR')}:"
              f"{os.environ.get('MASTER_PORT')}", flush=True)

    dataset = make_blobs(seed=1234)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                 seed=0, drop_last=True)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, drop_last=True)

    torch.manual_seed(0)  # Same initial weights everywhere (DDP also broadcasts rank 0's).
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    losses = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)  # A different shuffle each epoch, the same on all ranks.
        total, batches = 0.0, 0
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()  # DDP all-reduces the gradients here.
            optimizer.step()
            total += loss.item()
            batches += 1
        stats = torch.tensor([total, batches], dtype=torch.float64)
        dist.all_reduce(stats)
        losses.append((stats[0] / stats[1]).item())
        if rank == 0:
            print(f"epoch {epoch} loss {losses[-1]:.4f}", flush=True)

    dist.destroy_process_group()
    if rank == 0:
        if not losses[-1] < losses[0]:
            print(f"FAILED: final loss {losses[-1]:.4f} is not below the first "
                  f"{losses[0]:.4f}", file=sys.stderr, flush=True)
            return 1
        print(f"done: loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
