"""When does error-feedback TopKC b=2 cost VGG-11 its accuracy: early in the
run, or as the schedule decays?

The controller's first decision takes TopKC b=2 (error feedback) on VGG-11 at
200 Mbit/s, and that run never reaches 0.88 in its epoch, while fp16 and THC
4-bit do (experiments/results/fmnist_vgg11.md, controller_ablation.md). If
the damage is done late, a controller that re-decides as the schedule
decays can keep TopKC's fast early steps; if it is done early, only the first
decision can avoid it. This trains the PyTorch twin of gradzip's VGG-11 with
the suite's recipe (global batch 128 = 2 ranks x 64, SGD lr 0.02, momentum
0.9, weight decay 5e-4, cosine over 468 steps after 50 warm-up steps,
crop-padding 2 and flips) on one process, on the same batches in every arm:

  - dense:      the uncompressed gradient throughout;
  - topkc:      TopKC b=2 (chunks of 64; end-to-end-utility paper §3.1.2) with
                error feedback (e <- x - C(x), x = g + e) throughout;
  - topkc->dense@S: TopKC b=2 to step S, then dense, the residual added to
                the next gradient (as sync/GradSync.h does when a bucket
                leaves an error-feedback plan);
  - dense->topkc@S: dense to step S, then TopKC b=2.

It prints the accuracy on the 10k test images at the given steps. One process
stands for two ranks (TopKC's chunk choice from the summed norms is the same
consensus either way). Offline analysis, about 30 minutes a seed on two
cores; not a test.

Usage: .venv/bin/python experiments/python/ef_phase.py [--switch 200] [--evals 150 250 350 468] [--seed 1]
"""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_peer  # noqa: E402
import ef_steady_state as ef  # noqa: E402
import fmnist  # noqa: E402
import gz_models  # noqa: E402

STEPS, WARMUP, LR = 468, 50, 0.02


def lr_at(step):
    """The suite's schedule: linear warm-up, then cosine to 0 over the epoch."""
    return ddp_peer.lr_at(step, dict(name="cosine", warmup_steps=WARMUP, min_lr=0.0), LR, STEPS, STEPS)


def accuracy(model, test):
    model.eval()
    hit = n = 0
    with torch.no_grad():
        for xb, yb in test:
            hit += (model(xb).argmax(1) == yb).sum().item()
            n += len(yb)
    model.train()
    return hit / n


class Arm:
    def __init__(self, model, d):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
        self.e = torch.zeros(d)
        self.c = ef.topkc(2, d)

    def step(self, step, xb, yb, compress):
        for g in self.opt.param_groups:
            g["lr"] = lr_at(step)
        self.opt.zero_grad()
        torch.nn.functional.cross_entropy(self.model(xb), yb).backward()
        g = torch.cat([p.grad.flatten() for p in self.model.parameters()])
        x = g + self.e
        y = self.c(x) if compress else x
        self.e = x - y
        off = 0
        for p in self.model.parameters():
            p.grad.copy_(y[off: off + p.numel()].view_as(p))
            off += p.numel()
        self.opt.step()

    def clone(self):
        other = copy.copy(self)
        other.model = copy.deepcopy(self.model)
        other.opt = torch.optim.SGD(other.model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
        other.opt.load_state_dict(self.opt.state_dict())
        other.e = self.e.clone()
        return other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--switch", type=int, default=200)
    ap.add_argument("--evals", nargs="+", type=int, default=[150, 250, 350, 468])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="data order, augmentation and initialisation")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    transform = fmnist.Transform(2, True, [fmnist.DEFAULT_MEAN], [fmnist.DEFAULT_STD])
    x, y = fmnist.load(train=True)
    tx, ty = fmnist.load(train=False)
    batches = list(fmnist.Loader(x, y, 0, 1, 128, True, True, args.seed, transform, augment=True).epoch(0))[:STEPS]
    test = list(fmnist.Loader(tx, ty, 0, 1, 500, False, False, 1, transform, augment=False).epoch(0))
    torch.manual_seed(args.seed)
    model = gz_models.make_model("vgg11", in_channels=1)
    d = sum(p.numel() for p in model.parameters())
    # (name, compress before the switch, compress after it); arms sharing their
    # first segment fork from one run at the switch.
    plans = {"dense": (False, False), "dense->topkc": (False, True),
             "topkc": (True, True), "topkc->dense": (True, False)}
    results = {name: {} for name in plans}
    for first in (False, True):
        arm = Arm(copy.deepcopy(model), d)
        for step in range(args.switch):
            arm.step(step, *batches[step], first)
            if step + 1 in args.evals:
                for name, (a, _) in plans.items():
                    if a == first:
                        results[name][step + 1] = accuracy(arm.model, test)
        forks = {name: arm.clone() for name, (a, _) in plans.items() if a == first}
        for name, fork in forks.items():
            then = plans[name][1]
            for step in range(args.switch, STEPS):
                fork.step(step, *batches[step], then)
                if step + 1 in args.evals:
                    results[name][step + 1] = accuracy(fork.model, test)
            print(f"{name}@{args.switch}: " + "  ".join(f"step {s} {a:.4f}" for s, a in
                                                      sorted(results[name].items())), flush=True)


if __name__ == "__main__":
    main()
