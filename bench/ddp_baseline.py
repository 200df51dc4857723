"""The torchrun + DDP baseline for bench/trainer_vs_torchrun.sh.

Trains the same model on the same data as baton-trainer, the way the PyTorch
distributed-training guides teach it: DistributedSampler, DDP over gloo, SGD with
momentum. Rank 0 prints one JSON line: {"samples_per_sec": S, "steps": N, ...}, where S is
the global rate over the timed steps (after --warmup steps), measured between barriers.

Run under torchrun (Debian's 1.13 needs: torchrun --redirects 9:1 --tee 9:1 ...).
"""
import argparse
import json
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">i", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "i" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist(data_dir):
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    x = (x - 0.1307) / 0.3081
    return TensorDataset(torch.from_numpy(x.reshape(len(x), -1)), torch.from_numpy(y))


def cifar_shaped(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = torch.randn(n, 3, 32, 32, generator=g) * 0.5 + y.view(-1, 1, 1, 1).float() / 10.0
    return TensorDataset(x, y)


def mlp(hidden):
    layers, width = [], 784
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max-pool)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["mlp", "resnet18"], default="mlp")
    p.add_argument("--data_dir", default="")
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    if args.model == "mlp":
        data = mnist(args.data_dir)
        model = mlp([int(h) for h in args.hidden.split(",") if h])
    else:
        data = cifar_shaped(4096, seed=1)
        model = ResNet18()
    if distributed:
        model = DDP(model)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1,
                                 drop_last=True)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    step, epoch, start = 0, 0, None
    while step < args.warmup + args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            if step == args.warmup:
                if distributed:
                    dist.barrier()
                start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            if step == args.warmup + args.steps:
                break
        epoch += 1
    if distributed:
        dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"samples_per_sec": args.steps * args.batch_size * world / elapsed,
                          "steps": args.steps, "world": world, "final_loss": loss.item()}),
              flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
