"""Plots a `gradzip compare` suite: one arm per subdirectory of SUITE_DIR, each
with a tta.jsonl (rows of trainer/TtaLog.cpp, or of ddp_peer.py). Repeats of an
arm (`ARM.r1`, `ARM.r2`, ... next to `ARM`, from `suite.repeats`) are drawn in
the arm's colour. A suite with `suite.networks` has one group directory per
network (SUITE_DIR/NET/ARM/tta.jsonl); each group gets its own plots.

    python plot_tta.py SUITE_DIR [--metric accuracy] [--window 3]

Writes into SUITE_DIR (or each group directory):
  tta.png             metric vs training seconds (evaluation excluded), one line
                      per arm and repeat: a trailing rolling mean over --window
                      evaluations (--window 1: the evaluations themselves, as
                      the TTA table reads them), raw evaluations as faint dots;
                      targets from summary.json (if present) as dashed lines
  metric_vs_step.png  the same against the optimizer step
  breakdown.png       stacked bars per arm of the mean step time (averaged over
                      repeats): compute, exposed communication, encode+decode,
                      data wait, optimizer, rest (step time minus those;
                      clipped at 0)
"""
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


REPEAT = re.compile(r"^(.*)\.r(\d+)$")


def read_runs(suite):
    """{run directory name: rows} for every SUITE/*/tta.jsonl with rows."""
    runs = {}
    for name in sorted(os.listdir(suite)):
        path = os.path.join(suite, name, "tta.jsonl")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if rows:
            runs[name] = rows
    return runs


def read_arms(suite):
    """{arm: [rows of repeat 0, rows of repeat 1, ...]}; `ARM.rK` joins ARM."""
    runs = read_runs(suite)
    arms = {}
    for name in runs:
        m = REPEAT.match(name)
        if m and m.group(1) in runs:
            continue
        arms[name] = [runs[name]]
    for name in runs:
        m = REPEAT.match(name)
        if m and m.group(1) in arms:
            arms[m.group(1)].append(runs[name])
    return arms


def read_targets(suite):
    path = os.path.join(suite, "summary.json")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        s = json.load(f)
    if isinstance(s, dict):
        return list(s.get("targets", []))
    for arm in s:  # gradzip compare: a list of arms, each carrying the suite's targets
        if isinstance(arm, dict) and arm.get("targets"):
            return list(arm["targets"])
    return []


def pick_metric(arms, wanted):
    if wanted:
        return wanted
    for m in ("accuracy", "mlm_accuracy"):
        if any(m in r["metrics"] for reps in arms.values() for rows in reps for r in rows):
            return m
    raise SystemExit("plot_tta: no accuracy or mlm_accuracy in any row; pass --metric")


def rolling(y, window):
    """Trailing mean over the last `window` values (fewer at the start)."""
    c = np.cumsum(np.insert(np.asarray(y, float), 0, 0.0))
    idx = np.arange(1, len(y) + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def plot_curves(arms, metric, targets, window, xkey, xlabel, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, reps) in enumerate(arms.items()):
        color = f"C{i % 10}"
        for k, rows in enumerate(reps):
            rows = [r for r in rows if metric in r["metrics"]]
            if not rows:
                continue
            x = [r[xkey] for r in rows]
            y = [r["metrics"][metric] for r in rows]
            ax.plot(x, y, ".", color=color, alpha=0.3)
            label = f"{name} ({rows[-1].get('plan', '')})" + (f", {len(reps)} runs" if len(reps) > 1 else "")
            ax.plot(x, rolling(y, window), "-" if k == 0 else "--", color=color, linewidth=1.5 if k == 0 else 1.0,
                    label=label if k == 0 else None)
    for t in targets:
        ax.axhline(t, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(f"target {t:g}", (ax.get_xlim()[0], t), fontsize=7, color="grey", va="bottom")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric if window == 1 else f"{metric} (rolling mean of {window} evaluations)")
    ax.grid(alpha=0.3)
    # Below the axes: plan names can be long, and inside the axes the legend hid the curves.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=1, frameon=False)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def mean_breakdown(rows):
    """Per-step means, each row weighted by the steps it covers."""
    keys = ("compute", "exposed", "encode", "decode", "data_wait", "optimizer", "step")
    total, steps, prev = dict.fromkeys(keys, 0.0), 0, 0
    for r in rows:
        n = max(0, r["step"] - prev)
        prev = r["step"]
        for k in keys:
            total[k] += r["breakdown"].get(k, 0.0) * n
        steps += n
    return {k: v / max(1, steps) for k, v in total.items()}


def plot_breakdown(arms, out):
    parts = [("compute", lambda b: b["compute"]), ("exposed comm.", lambda b: b["exposed"]),
             ("encode+decode", lambda b: b["encode"] + b["decode"]), ("data wait", lambda b: b["data_wait"]),
             ("optimizer", lambda b: b["optimizer"])]
    names = list(arms)
    means = []
    for n in names:
        per_run = [mean_breakdown(rows) for rows in arms[n]]
        means.append({k: float(np.mean([b[k] for b in per_run])) for k in per_run[0]})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names) + 3.5), 4.5))
    bottom = np.zeros(len(names))
    for i, (label, f) in enumerate(parts):
        v = np.array([f(b) for b in means]) * 1e3
        ax.bar(names, v, bottom=bottom, label=label, color=f"C{i}")
        bottom += v
    step = np.array([b["step"] for b in means]) * 1e3
    ax.bar(names, np.maximum(0, step - bottom), bottom=bottom, label="rest", color="lightgrey")
    # Encode/decode on the comm thread overlaps backward, so the stack can
    # exceed the step; the tick marks the measured mean step time.
    ax.plot(names, step, "k_", markersize=40, markeredgewidth=2, label="mean step time")
    ax.set_ylabel("mean step time (ms)")
    ax.legend(fontsize=8, markerscale=0.3, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_group(group, wanted_metric, window, targets):
    arms = read_arms(group)
    metric = pick_metric(arms, wanted_metric)
    targets = read_targets(group) or targets
    plot_curves(arms, metric, targets, window, "train_seconds", "training seconds (evaluation excluded)",
                os.path.join(group, "tta.png"))
    plot_curves(arms, metric, targets, window, "step", "step", os.path.join(group, "metric_vs_step.png"))
    plot_breakdown(arms, os.path.join(group, "breakdown.png"))
    runs = sum(len(r) for r in arms.values())
    print(f"plot_tta: {len(arms)} arms, {runs} runs ({', '.join(arms)}) -> {group}/tta.png, metric_vs_step.png, "
          "breakdown.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", help="suite directory: one subdirectory with tta.jsonl per arm (or per network group)")
    ap.add_argument("--metric", help="metrics key to plot (default: accuracy, else mlm_accuracy)")
    ap.add_argument("--window", type=int, default=3, help="rolling-mean window in evaluations")
    args = ap.parse_args()
    if read_runs(args.suite):
        plot_group(args.suite, args.metric, args.window, [])
        return
    groups = [os.path.join(args.suite, d) for d in sorted(os.listdir(args.suite))
              if os.path.isdir(os.path.join(args.suite, d)) and read_runs(os.path.join(args.suite, d))]
    if not groups:
        sys.exit(f"plot_tta: no */tta.jsonl or */*/tta.jsonl under {args.suite}")
    targets = read_targets(args.suite)
    for g in groups:
        plot_group(g, args.metric, args.window, targets)


if __name__ == "__main__":
    main()
