"""Plots a `gradzip compare` suite: one arm per subdirectory of SUITE_DIR, each
with a tta.jsonl (rows of trainer/TtaLog.cpp, or of ddp_peer.py).

    python plot_tta.py SUITE_DIR [--metric accuracy] [--window 3]

Writes into SUITE_DIR:
  tta.png             metric vs training seconds (evaluation excluded), one line
                      per arm: a trailing rolling mean over --window evaluations,
                      raw evaluations as faint dots; targets from
                      SUITE_DIR/summary.json (if present) as dashed lines
  metric_vs_step.png  the same against the optimizer step
  breakdown.png       stacked bars per arm of the mean step time: compute,
                      exposed communication, encode+decode, data wait,
                      optimizer, rest (step time minus those; clipped at 0)
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read_arms(suite):
    arms = {}
    for name in sorted(os.listdir(suite)):
        path = os.path.join(suite, name, "tta.jsonl")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if rows:
            arms[name] = rows
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
        if any(m in r["metrics"] for rows in arms.values() for r in rows):
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
    for i, (name, rows) in enumerate(arms.items()):
        rows = [r for r in rows if metric in r["metrics"]]
        if not rows:
            continue
        x = [r[xkey] for r in rows]
        y = [r["metrics"][metric] for r in rows]
        color = f"C{i % 10}"
        ax.plot(x, y, ".", color=color, alpha=0.3)
        ax.plot(x, rolling(y, window), "-", color=color, label=f"{name} ({rows[-1].get('plan', '')})")
    for t in targets:
        ax.axhline(t, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(f"target {t:g}", (ax.get_xlim()[0], t), fontsize=7, color="grey", va="bottom")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{metric} (rolling mean of {window} evaluations)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
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
    means = [mean_breakdown(arms[n]) for n in names]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(names) + 2), 4.5))
    bottom = np.zeros(len(names))
    for i, (label, f) in enumerate(parts):
        v = np.array([f(b) for b in means]) * 1e3
        ax.bar(names, v, bottom=bottom, label=label, color=f"C{i}")
        bottom += v
    rest = np.maximum(0, np.array([b["step"] for b in means]) * 1e3 - bottom)
    ax.bar(names, rest, bottom=bottom, label="rest", color="lightgrey")
    ax.set_ylabel("mean step time (ms)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", help="suite directory: one subdirectory with tta.jsonl per arm")
    ap.add_argument("--metric", help="metrics key to plot (default: accuracy, else mlm_accuracy)")
    ap.add_argument("--window", type=int, default=3, help="rolling-mean window in evaluations")
    args = ap.parse_args()
    arms = read_arms(args.suite)
    if not arms:
        sys.exit(f"plot_tta: no */tta.jsonl under {args.suite}")
    metric = pick_metric(arms, args.metric)
    targets = read_targets(args.suite)
    plot_curves(arms, metric, targets, args.window, "train_seconds", "training seconds (evaluation excluded)",
                os.path.join(args.suite, "tta.png"))
    plot_curves(arms, metric, targets, args.window, "step", "step", os.path.join(args.suite, "metric_vs_step.png"))
    plot_breakdown(arms, os.path.join(args.suite, "breakdown.png"))
    print(f"plot_tta: {len(arms)} arms ({', '.join(arms)}) -> {args.suite}/tta.png, metric_vs_step.png, breakdown.png")


if __name__ == "__main__":
    main()
