"""Writes TorchScript models for torchscript_model_test: usage tiny_mlp.py OUT_DIR.

OUT_DIR/mlp.pt: TinyMlp, a classifier of [B, 3, 8, 8] images into 4 classes.
OUT_DIR/lm.pt:  TinyLm, a language model of [B, T] int64 tokens over 32 ids.
OUT_DIR/names.txt: the state_dict names of both, one per line, for the C++ side to compare.
"""

import os
import sys

import torch
from torch import nn


class TinyMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class TinyLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.out = nn.Linear(32, 32)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        previous = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
        return self.out(torch.cat([x, previous], dim=-1))


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    names = []
    for name, module in (("mlp", TinyMlp()), ("lm", TinyLm())):
        torch.jit.script(module).save(os.path.join(out, name + ".pt"))
        names += [f"{name} {key}" for key in module.state_dict()]
    with open(os.path.join(out, "names.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
