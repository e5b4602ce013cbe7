"""What the controller's early screenings read of an error-feedback
compressor, against what it then runs at (controller/ControllerOptions.h
`rescreen_first`).

The provisional step (2) screens every codec on 8 replays of the step-2
gradient (`screen_reps`), and the first decision (step 10) reuses those
screenings (the `rescreen_first` option that screened afresh was not adopted:
experiments/results/controller_ablation.md). This trains ResNet-20 on Fashion-MNIST on one process at a
rank's batch of 64 (the two-rank suites' recipe: SGD lr 0.05, momentum 0.9,
Nesterov, weight decay 5e-4, 50 warm-up steps), keeps the flattened gradients
of steps 0-160 and runs TopK 3.3%, TopK 1.1%, TopKC 2 bits and TopK 10% (as
ef_steady_state.py) with error feedback over them. Per compressor it prints
the vNMSE, and in brackets the ef_rate k(1 - δ)/δ² with δ = 1 - vNMSE and k
= 0.03 (ControllerOptions.h statisticalCost), of:
  - "R8@t": the 8th replay of the step-t gradient with its own residual (the
    screening at the provisional step, t = 2, and at a later decision);
  - "C8x2@t": the last 8 gradients up to t twice over (`screen_window: 8`);
  - "fresh@2": the codec on the step-2 gradient alone, no residual;
  - "run a-b": the mean along error feedback from step 0 over steps a-b
    (the gradients come from an uncompressed run, as in ef_steady_state.py).
Offline analysis, about two minutes a seed on two cores; not a test.

Usage: .venv/bin/python experiments/python/ef_early_screening.py [--seeds 1 2]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ef_steady_state as E  # noqa: E402
import replay_knee  # noqa: E402


def ef_rate(v):
    return replay_knee.cost(v, "topk", "ef_rate", 0.03)  # every codec here runs under error feedback


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    torch.set_num_threads(2)
    for seed in args.seeds:
        g = E.gradients(160, 0, batch=64, seed=seed)
        d = g.shape[1]
        print(f"seed {seed}: {g.shape[0]} gradients, d={d}")
        comps = {"TopK 3.3%": E.topk(0.033, d), "TopK 1.1%": E.topk(0.011, d), "TopKC 2": E.topkc(2, d),
                 "TopK 10%": E.topk(0.1, d)}
        for name, c in comps.items():
            run = E.error_fed(c, g)
            r8 = {t: E.error_fed(c, [g[t]] * 8)[-1] for t in (2, 10, 30)}
            c8 = {t: E.error_fed(c, [g[j] for _ in range(2) for j in range(t - 7, t + 1)])[-1] for t in (10, 30, 60)}
            fresh = E.vnmse(g[2], c(g[2]))

            def mean(a, b):
                return sum(run[a:b]) / (b - a)

            cells = [f"R8@{t} {v:.3f}({ef_rate(v):.2f})" for t, v in r8.items()]
            cells += [f"C8x2@{t} {v:.3f}({ef_rate(v):.2f})" for t, v in c8.items()]
            cells += [f"fresh@2 {fresh:.3f} |"]
            for a, b in ((21, 31), (41, 51), (100, 160)):
                cells.append(f"run {a}-{b - 1} {mean(a, b):.3f}({ef_rate(mean(a, b)):.2f})")
            print(f"  {name:10s} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
