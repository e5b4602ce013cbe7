"""How well replaying one gradient estimates an error-feedback compressor's
steady-state vNMSE (the controller's screening, controller/Controller.h
screenCodec and `screen_reps`).

Trains ResNet-20 on Fashion-MNIST on one process (batch 128, the two-rank
suites' global batch; SGD lr 0.05 with momentum 0.9, Nesterov, weight decay
5e-4 and 50 warm-up steps, as experiments/suites/schedule_c1.yaml), keeps the
flattened gradients of steps 60-300, and runs TopK and TopKC (chunks of 64,
b = 16(JC/d + 1/C) bits, end-to-end-utility paper §3.1.2) with error feedback
(e ← x − C(x), x = g + e) over them. vNMSE = ||x − C(x)||²/||x||² of the
compressor's input, the residual included, as GradSync measures a running
plan. Prints per compressor:
  - "running": the mean vNMSE along the sequence from step 180 (the steady
    state the plan trains in; the gradients come from an uncompressed run),
    and the mean cosine of the applied update C(x) with that step's
    gradient g there (1 for a lossless plan);
  - at steps t0 (--t0; 140, 200, 260): "fresh", the vNMSE on g_t0 alone (what
    screening measured before screen_reps); "R2/R4/R8", the vNMSE of the
    R-th replay of g_t0 with its own residual (screen_reps R); "W4/W8/W16",
    error feedback over the last 4, 8 or 16 distinct gradients; "C2x4",
    "C4x2", "C8x2", the last 2, 4 or 8 distinct gradients cycled 4, 2 or 2
    times (the statistic of the last call, on g_t0): replays that a changing
    gradient spreads, as it does along a run (C8x2 is the controller's
    screening once it holds `screen_window` 8 gradients); "cos R8", the cosine of the
    8th replay's C(x) with g_t0; "cos W8", "cos W16", that of the last step
    of W8 and W16 with its own gradient, and "cos W16 last 8" their mean
    over W16's last 8 steps (a screening over the last gradients instead
    of replays of one); "cos C8x2 2nd pass", the same mean over C8x2's
    second pass (what `screen_window` 8 screens on).
Offline analysis (about two minutes on two cores); not a test.

Usage: .venv/bin/python experiments/python/ef_steady_state.py [--steps 300] [--t0 140 200 260]
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmnist  # noqa: E402
import gz_models  # noqa: E402


def gradients(steps, first, batch=128, seed=1):
    """The flattened gradients of steps first..steps of the recipe above,
    at `batch` samples a step (ef_early_screening.py: a rank's 64)."""
    torch.manual_seed(seed)
    transform = fmnist.Transform(2, True, [fmnist.DEFAULT_MEAN], [fmnist.DEFAULT_STD])
    x, y = fmnist.load(train=True)
    loader = fmnist.Loader(x, y, 0, 1, batch, True, True, 1, transform, augment=True)
    model = gz_models.make_model("resnet20", in_channels=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    out = []
    for step, (xb, yb) in enumerate(loader.epoch(0)):
        for g in opt.param_groups:
            g["lr"] = 0.05 * min(1.0, (step + 1) / 50)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        if step >= first:
            out.append(torch.cat([p.grad.flatten() for p in model.parameters()]).clone())
        opt.step()
        if step == steps:
            break
    return torch.stack(out)


def topk(ratio, d):
    k = max(1, math.ceil(ratio * d))

    def c(x):
        i = x.abs().topk(k).indices
        out = torch.zeros_like(x)
        out[i] = x[i]
        return out
    return c


def topkc(bits, d, chunk=64):
    # The last chunk is zero padded to C coordinates and competes like the
    # others, as compress/TopKC.cpp pads it. (An earlier version left it
    # out here, so its coordinates, ResNet-20's last 58 and VGG-11's
    # classifier bias, were never sent and their residual grew without bound:
    # TopKC 2 bits read 0.710 instead of 0.665 "running" on ResNet-20.)
    n = -(-d // chunk)
    j = max(1, int((bits / 16 - 1 / chunk) * d / chunk))

    def c(x):
        chunks = torch.nn.functional.pad(x, (0, n * chunk - d)).view(n, chunk)
        i = chunks.pow(2).sum(1).topk(j).indices
        out = torch.zeros_like(chunks)
        out[i] = chunks[i]
        return out.flatten()[:d]
    return c


def vnmse(x, c):
    return ((x - c).pow(2).sum() / x.pow(2).sum()).item()


def error_fed(c, seq, cosines=None):
    """The vNMSE of every step of error feedback over the gradients in seq
    (and, into `cosines` when given, the cosine of each applied update C(x)
    with that step's gradient g)."""
    e = torch.zeros_like(seq[0])
    out = []
    for g in seq:
        x = g + e
        y = c(x)
        e = x - y
        out.append(vnmse(x, y))
        if cosines is not None:
            cosines.append(torch.nn.functional.cosine_similarity(y, g, 0).item())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--t0", type=int, nargs="+", default=[140, 200, 260],
                    help="steps whose gradient is screened (at least 75: W16 needs 15 before it)")
    args = ap.parse_args()
    first = 60
    for t0 in args.t0:  # W16 and C8x2 look 15 gradients back from t0
        if not first + 15 <= t0 <= args.steps:
            raise SystemExit(f"ef_steady_state: --t0 {t0}: must be in [{first + 15}, --steps {args.steps}]")
    torch.set_num_threads(2)
    g = gradients(args.steps, first)
    d = g.shape[1]
    comps = {"TopK 10%": topk(0.1, d), "TopK 3.3%": topk(0.033, d), "TopK 1.1%": topk(0.011, d), "TopK 0.4%": topk(0.004, d),
             "TopK 0.1%": topk(0.001, d), "TopKC 8 bits": topkc(8, d), "TopKC 2 bits": topkc(2, d),
             "TopKC 0.5 bits": topkc(0.5, d)}
    print(f"{g.shape[0]} gradients (steps {first}-{args.steps}) of {d} coordinates")
    for name, c in comps.items():
        cos = []
        run = error_fed(c, g, cos)
        print(f"{name}: running {sum(run[120:]) / len(run[120:]):.3f}, cos(C(x), g) {sum(cos[120:]) / len(cos[120:]):.3f}")
        for t0 in args.t0:
            i = t0 - first
            cosr = []
            reps = error_fed(c, [g[i]] * 8, cosr)
            cosw = {w: [] for w in (4, 8, 16)}
            win = {w: error_fed(c, g[i - w + 1: i + 1], cosw[w])[-1] for w in (4, 8, 16)}
            cosc = []  # C8x2's: the cosine of each call's C(x) with that call's gradient
            cyc = {(w, k): error_fed(c, [g[j] for _ in range(k) for j in range(i - w + 1, i + 1)],
                                     cosc if (w, k) == (8, 2) else None)[-1]
                   for w, k in ((2, 4), (4, 2), (8, 2))}
            print(f"  t0 {t0}: fresh {vnmse(g[i], c(g[i])):.3f}  R2 {reps[1]:.3f}  R4 {reps[3]:.3f}  "
                  f"R8 {reps[7]:.3f}  W4 {win[4]:.3f}  W8 {win[8]:.3f}  W16 {win[16]:.3f}  "
                  f"C2x4 {cyc[(2, 4)]:.3f}  C4x2 {cyc[(4, 2)]:.3f}  C8x2 {cyc[(8, 2)]:.3f}  "
                  f"cos R8 {cosr[7]:.3f}  cos W8 {cosw[8][-1]:.3f}  cos W16 {cosw[16][-1]:.3f}  "
                  f"cos W16 last 8 {sum(cosw[16][8:]) / 8:.3f}  cos C8x2 2nd pass {sum(cosc[8:]) / 8:.3f}", flush=True)


if __name__ == "__main__":
    main()
