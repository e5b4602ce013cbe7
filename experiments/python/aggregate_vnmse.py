"""Offline check: does rank 0's vNMSE see what the mean of the ranks loses?

The controller measures a plan's statistical cost on rank 0 alone:
||x0 - C(x0)||^2 / ||x0||^2 with x0 its gradient plus residual. What reaches
the optimizer is the mean of the ranks' compressed vectors, whose error is
||mean C(xi) - mean xi||^2 / ||mean xi||^2 (the aggregate vNMSE). TopK picks
each rank's own coordinates (all-gather); TopKC picks the same chunks on every
rank from the summed chunk norms (end-to-end-utility paper §3.1.2), a global
selection. This script trains a small CNN on Fashion-MNIST with N simulated
workers in one process, error feedback per worker, the mean as the update
(SGD, Nesterov momentum 0.9, lr 0.05, weight decay 5e-4, batch 64 per worker,
as the fmnist_resnet20 suites), and prints both vNMSEs (means over the last
100 steps) and the test accuracy on 2000 images every 100 steps, one JSON
line per (compressor, seed). No gradzip code runs: TopK and TopKC are written
out here as their papers define them (values exact, no fp16 rounding).

    python aggregate_vnmse.py [--steps 400] [--workers 2] [--seeds 1 2]

Results and what they mean: experiments/results/controller_ablation.md (last
section).
"""
import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import fmnist


class SmallCnn(nn.Module):
    """Three 3x3 conv + pool stages and a linear head: 29,066 parameters."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.c3 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 3 * 3, 10)

    def forward(self, x):
        for conv in (self.c1, self.c2, self.c3):
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.fc(x.flatten(1))


def topk(x, ratio):
    """TopK: the ceil-free k = ratio * d largest magnitudes of this worker's x."""
    k = max(1, int(ratio * x.numel()))
    i = x.abs().topk(k).indices
    out = torch.zeros_like(x)
    out[i] = x[i]
    return out


def topkc_mask(xs, bits, chunk=64):
    """TopKC's chunk mask, shared by every worker: the J chunks with the largest
    summed squared norms, J from b = 16(JC/d + 1/C) (fp16 values and norms)."""
    d = xs[0].numel()
    chunks = (d + chunk - 1) // chunk
    j = max(1, min(chunks, int((bits * d - 16 * chunks) // (16 * chunk))))
    norms = sum(F.pad(x, (0, chunks * chunk - d)).view(chunks, chunk).pow(2).sum(1) for x in xs)
    mask = torch.zeros(chunks, chunk)
    mask[norms.topk(j).indices] = 1
    return mask.view(-1)[:d]


def run(kind, param, steps, workers, seed, images, labels, test_x, test_y):
    torch.manual_seed(seed)
    net = SmallCnn()
    params = list(net.parameters())
    d = sum(p.numel() for p in params)
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(seed)
    residual = [torch.zeros(d) for _ in range(workers)]
    local, aggregate, rows = [], [], []
    for step in range(1, steps + 1):
        xs = []
        for r in range(workers):
            idx = torch.randint(0, len(labels), (64,), generator=gen)
            net.zero_grad()
            F.cross_entropy(net(images[idx]), labels[idx]).backward()
            xs.append(torch.cat([p.grad.flatten() for p in params]) + residual[r])
        if kind == "dense":
            outs = xs
        elif kind == "topk":
            outs = [topk(x, param) for x in xs]
        else:
            mask = topkc_mask(xs, param)
            outs = [x * mask for x in xs]
        for r in range(workers):
            residual[r] = xs[r] - outs[r]  # error feedback: what was not sent
        mean_in, mean_out = sum(xs) / workers, sum(outs) / workers
        local.append(((xs[0] - outs[0]).pow(2).sum() / xs[0].pow(2).sum()).item())
        aggregate.append(((mean_out - mean_in).pow(2).sum() / mean_in.pow(2).sum()).item())
        offset = 0
        for p in params:
            p.grad = mean_out[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        opt.step()
        if step % 100 == 0:
            with torch.no_grad():
                acc = (net(test_x).argmax(1) == test_y).float().mean().item()
            rows.append({"step": step, "accuracy": round(acc, 4), "local_vnmse": round(float(np.mean(local[-100:])), 3),
                         "aggregate_vnmse": round(float(np.mean(aggregate[-100:])), 3)})
    return d, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--data", default=fmnist.DEFAULT_PATH)
    a = ap.parse_args()
    torch.set_num_threads(1)

    def tensors(train):
        x, y = fmnist.load(a.data, train=train)
        x = torch.tensor(x, dtype=torch.float32).div(255).sub(fmnist.DEFAULT_MEAN).div(fmnist.DEFAULT_STD).unsqueeze(1)
        return x, torch.tensor(y)

    images, labels = tensors(True)
    test_x, test_y = tensors(False)
    test_x, test_y = test_x[:2000], test_y[:2000]
    for kind, param in [("dense", 0), ("topkc", 2.0), ("topk", 0.033), ("topk", 0.011), ("topkc", 0.5)]:
        for seed in a.seeds:
            d, rows = run(kind, param, a.steps, a.workers, seed, images, labels, test_x, test_y)
            print(json.dumps({"compressor": kind, "param": param, "seed": seed, "d": d, "rows": rows}), flush=True)


if __name__ == "__main__":
    main()
