"""PyTorch reference implementations for parity_test: torchvision's ResNet and nanoGPT.

Usage: torch_reference.py CASE_FILE ARCH [ARGS...]
  resnet18|resnet50 IN_CHANNELS NUM_CLASSES CIFAR_STEM(0|1)
  gpt VOCAB CONTEXT LAYERS HEADS WIDTH
CASE_FILE is a dict of tensors written by C++ (torch::pickle_save): "input", "logits" and the
model's state under "state.<name>". The reference model loads the state strictly (GPT: only
the tied lm_head.weight may be missing), runs forward in training mode and must reproduce the
logits. Exit status 0 on agreement.
"""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


# ---- torchvision.models.resnet (v0.14), trimmed to what Baton builds --------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, in_channels, num_classes, cifar_stem):
        super().__init__()
        self.inplanes = 64
        if cifar_stem:  # Baton's stem for small inputs.
            self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- nanoGPT (model.py), bias=True, dropout=0 -------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.n_head = heads

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # Weight tying.

    def forward(self, idx):
        pos = torch.arange(idx.size(1), dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def main():
    case_file, arch, *args = sys.argv[1:]
    case = torch.load(case_file)
    state = {k[len("state."):]: v for k, v in case.items() if k.startswith("state.")}
    args = [int(a) for a in args]
    if arch == "resnet18":
        model = ResNet(BasicBlock, [2, 2, 2, 2], args[0], args[1], bool(args[2]))
    elif arch == "resnet50":
        model = ResNet(Bottleneck, [3, 4, 6, 3], args[0], args[1], bool(args[2]))
    elif arch == "gpt":
        model = GPT(*args)
    else:
        sys.exit(f"unknown arch {arch}")
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = ["lm_head.weight"] if arch == "gpt" else []
    if missing != allowed_missing or unexpected:
        sys.exit(f"state mismatch: missing {missing}, unexpected {unexpected}")
    model.train()
    with torch.no_grad():
        logits = model(case["input"])
    if logits.shape != case["logits"].shape:
        sys.exit(f"shape {tuple(logits.shape)} != C++ {tuple(case['logits'].shape)}")
    diff = (logits - case["logits"]).abs().max().item()
    print(f"{arch}: max |python - c++| = {diff:.3g}")
    if not torch.allclose(logits, case["logits"], rtol=1e-4, atol=1e-4):
        sys.exit(f"logits differ by up to {diff}")


if __name__ == "__main__":
    main()
