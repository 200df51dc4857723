"""Eager PyTorch baseline for tools/gpu_check.sh: the same GPT as baton-trainer's
(worker/trainer/models/testing/torch_reference.py, checked there to give identical
logits), the same synthetic token sequences ((start + t * stride) mod vocab), the same
AdamW settings and precision handling (bf16 autocast; fp16 autocast + GradScaler), one GPU.

Prints one JSON line: {"tokens_per_sec": .., "first_loss": .., "last_loss": .., ...}, the
rate measured over the steps after --warmup, between CUDA synchronisations.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "worker", "trainer",
                                "models", "testing"))
import torch_reference  # noqa: E402


class Gpt(torch_reference.GPT):
    def forward(self, idx):
        pos = torch.arange(idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def batch(gen, n, context, vocab, device):
    start = torch.randint(0, vocab, (n, 1), generator=gen)
    stride = torch.randint(1, vocab, (n, 1), generator=gen)
    seq = (start + torch.arange(context + 1).view(1, -1) * stride) % vocab
    seq = seq.to(device, non_blocking=True)
    return seq[:, :-1], seq[:, 1:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--context_length", type=int, default=1024)
    p.add_argument("--gpt_layers", type=int, default=12)
    p.add_argument("--gpt_heads", type=int, default=12)
    p.add_argument("--gpt_width", type=int, default=768)
    p.add_argument("--vocab_size", type=int, default=32768)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    args = p.parse_args()
    device = torch.device("cuda")
    torch.manual_seed(1)
    model = Gpt(args.vocab_size, args.context_length, args.gpt_layers, args.gpt_heads,
                args.gpt_width).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    scaler = torch.cuda.amp.GradScaler(enabled=args.precision == "fp16")
    gen = torch.Generator().manual_seed(2)
    losses = []
    start = None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        x, y = batch(gen, args.batch_size, args.context_length, args.vocab_size, device)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.detach())  # Read at the end: no host sync per step.
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tokens = (args.steps - args.warmup) * args.batch_size * args.context_length
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"tokens_per_sec": tokens / elapsed, "first_loss": losses[0].item(),
                      "last_loss": losses[-1].item(), "params": params,
                      "precision": args.precision}), flush=True)


if __name__ == "__main__":
    main()
