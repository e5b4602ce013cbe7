"""Issue 69's regret matrix: which plan is safe across models, links and ranks.

Reads the summaries that `gradzip compare` writes for the regret suites
(experiments/suites/regret_*.yaml): one condition per suite and network,
SUITE_DIR/NETWORK/summary.json (or SUITE_DIR/summary.json for a suite of one
network). For each condition and target it takes each arm's time to the
target (training seconds, evaluation excluded, as compare computes it) and
writes, per condition, each arm's time relative to fp16 and to that
condition's best static arm (every arm but `auto`: gradzip's fixed plans and
the PyTorch DDP peers), and, per arm, the geometric mean and the worst of
that regret across conditions. An arm that never reaches a target has regret
infinity there ("never"): its geometric mean is then infinite too.

  python3 experiments/python/regret_matrix.py --target-index 1 \\
      --out experiments/results/regret_matrix.md runs/regret_r20_n2 runs/regret_r20_n4 ...

--target-index picks which of each suite's targets is the matrix's (suites
list them in ascending order; the last is the near-final one). The heatmap
(arms x conditions, log regret) goes beside --out as a PNG, the same numbers
as the markdown table.
"""
import argparse
import json
import math
import os


def conditions(paths):
    """(condition name, summary rows) for every summary.json under the given suite directories."""
    out = []
    for path in paths:
        suite = os.path.basename(os.path.normpath(path))
        direct = os.path.join(path, "summary.json")
        if os.path.exists(direct):
            out.append((suite, json.load(open(direct))))
            continue
        for net in sorted(os.listdir(path)):
            f = os.path.join(path, net, "summary.json")
            if os.path.exists(f):
                out.append((f"{suite}/{net}", json.load(open(f))))
    return out


def times(rows, index):
    """arm -> time to the index-th target (None: never reached or failed)."""
    t = {}
    for r in rows:
        tt = r.get("time_to_target") or []
        ok = index < len(tt) and tt[index] is not None and r.get("runs_ok", 0) > 0
        reached = r.get("reached") or []
        if ok and index < len(reached) and not reached[index]:
            ok = False
        t[r["arm"]] = tt[index] if ok else None
    return t


def regret(t, best):
    return math.inf if t is None or best is None else t / best


def fmt(x):
    return "never" if x is None or math.isinf(x) else f"{x:.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="+", help="suite run directories (runs/regret_*)")
    ap.add_argument("--target-index", type=int, default=1)
    ap.add_argument("--out", required=True, help="markdown file; the heatmap PNG goes beside it")
    a = ap.parse_args()

    conds = conditions(a.suites)
    if not conds:
        raise SystemExit("regret_matrix: no summary.json under " + ", ".join(a.suites))
    table = {}  # arm -> condition -> regret vs best static
    lines = ["## Per condition", ""]
    for name, rows in conds:
        t = times(rows, a.target_index)
        target = rows[0]["targets"][a.target_index]
        static = [v for arm, v in t.items() if arm != "auto" and v is not None]
        best = min(static) if static else None
        lines += [f"### {name} (target {target})", "",
                  "| arm | time to target | vs fp16 | vs best static |", "|---|---|---|---|"]
        for arm, v in t.items():
            r = regret(v, best)
            table.setdefault(arm, {})[name] = r
            vs16 = regret(v, t.get("fp16"))
            lines.append(f"| {arm} | {'never' if v is None else f'{v:.1f} s'} | {fmt(vs16)} | {fmt(r)} |")
        lines.append("")

    names = [n for n, _ in conds]
    head = ["## Per arm: regret against each condition's best static arm", "",
            "| arm | geometric mean | worst | " + " | ".join(names) + " |",
            "|---|---|---|" + "---|" * len(names)]
    for arm, per in table.items():
        vals = [per.get(n) for n in names if per.get(n) is not None]
        gm = math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals and all(math.isfinite(v) for v in vals) \
            else math.inf
        worst = max(vals) if vals else math.inf
        head.append(f"| {arm} | {fmt(gm)} | {fmt(worst)} | " + " | ".join(fmt(per.get(n)) for n in names) + " |")

    with open(a.out, "w") as f:
        f.write("\n".join(head + [""] + lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        arms = list(table)
        grid = [[min(math.log2(table[arm].get(n, math.inf)), 3.0) for n in names] for arm in arms]
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(names), 0.8 + 0.4 * len(arms)))
        im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=3, aspect="auto")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_yticks(range(len(arms)), arms)
        for i, arm in enumerate(arms):
            for j, n in enumerate(names):
                ax.text(j, i, fmt(table[arm].get(n)), ha="center", va="center", fontsize=7)
        fig.colorbar(im, label="log2 regret (cap 8x)")
        fig.tight_layout()
        fig.savefig(os.path.splitext(a.out)[0] + ".png", dpi=120)
    except ImportError:
        print("regret_matrix: matplotlib missing; no heatmap")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
