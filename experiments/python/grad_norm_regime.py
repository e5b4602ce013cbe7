"""Does Accordion's critical-regime signal tell VGG-11 from ResNet-20?

Accordion (Agarwal et al. 2021, "Adaptive Gradient Communication via Critical
Learning Regime Identification", Alg. 1) compresses little while training is
in a critical regime, detected from the norm of the gradient accumulated over
an interval: critical while |‖Δ_prev‖ − ‖Δ_cur‖| / ‖Δ_prev‖ >= η (η = 0.5).
On VGG-11 error-feedback TopKC b=2 costs its accuracy early (ef_phase.py),
while on ResNet-20 it reaches the suites' targets with fp16's steps; a
controller that charged error feedback more inside the regime could only help
if the regime lasted longer on VGG-11. This trains each twin uncompressed
with its suite's recipe (global batch 128 = 2 ranks x 64 on one process,
ef_virtual_gap.RECIPES, cosine over 468 steps after 50 warm-up steps) and
prints, per window of 10, 25 and 50 steps, ‖Δ‖ (the accumulated gradient's
norm) and the relative change from the window before. Offline analysis (about
3 minutes for ResNet-20 and 9 for VGG-11 on two cores); not a test.

Usage: .venv/bin/python experiments/python/grad_norm_regime.py [--models resnet20 vgg11] [--seed 1]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ef_virtual_gap as vg  # noqa: E402
import fmnist  # noqa: E402
import gz_models  # noqa: E402

WINDOWS = (10, 25, 50)
ETA = 0.5  # Accordion's threshold


def accumulated_norms(name, seed, threads):
    """‖Σ g‖ over consecutive windows of each length in WINDOWS, along the dense run."""
    r = vg.RECIPES[name]
    transform = fmnist.Transform(2, True, [fmnist.DEFAULT_MEAN], [fmnist.DEFAULT_STD])
    x, y = fmnist.load(train=True)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    loader = fmnist.Loader(x, y, 0, 1, 128, True, True, seed, transform, augment=True)
    model = gz_models.make_model(name, in_channels=1)
    opt = torch.optim.SGD(model.parameters(), lr=r["lr"], momentum=r["momentum"], nesterov=r["nesterov"],
                          weight_decay=5e-4)
    acc = {w: None for w in WINDOWS}
    norms = {w: [] for w in WINDOWS}
    for step, (xb, yb) in enumerate(loader.epoch(0)):
        if step >= vg.STEPS:
            break
        for grp in opt.param_groups:
            grp["lr"] = vg.lr_at(r["lr"], step)
        g = vg.flat_grad(model, xb, yb)
        for w in WINDOWS:
            acc[w] = g if acc[w] is None else acc[w] + g
            if (step + 1) % w == 0:
                norms[w].append((step + 1, acc[w].norm().item()))
                acc[w] = None
        opt.step()
    return norms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet20", "vgg11"], choices=list(vg.RECIPES))
    ap.add_argument("--seed", type=int, default=1, help="data order, augmentation and initialisation")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for name in args.models:
        norms = accumulated_norms(name, args.seed, args.threads)
        for w in WINDOWS:
            seq = norms[w]
            rel = [abs(seq[i][1] - seq[i - 1][1]) / seq[i - 1][1] for i in range(1, len(seq))]
            # The regime ends at the first window whose change falls below η.
            end = next((seq[i + 1][0] for i, c in enumerate(rel) if c < ETA), None)
            print(f"{name} window {w}: critical until step {end}")
            print("  |Δ|    " + " ".join(f"{s}:{v:.2f}" for s, v in seq))
            print("  change " + " ".join(f"{c:.2f}" for c in rel), flush=True)


if __name__ == "__main__":
    main()
