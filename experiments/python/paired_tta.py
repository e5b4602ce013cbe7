"""Paired comparison of two arms' time to accuracy over seeds, with a confidence interval.

The controller's goals (auto within 5% of the best static arm, ahead of it on
schedule_c1) are claims about a ratio of times to accuracy whose run-to-run
spread is 10-25% per seed, so a mean over two to five seeds says little on its
own. This script pairs the two arms' runs of each seed (same seed, same
hyperparameters, interleaved on one host), takes the ratio of their times to
each target, and reports the geometric mean of the ratios with a Student-t
95% interval on their logarithms (the ratios of paired runs are roughly
log-normal; the interval assumes the seeds are independent draws). It also
prints the ratio of the mean times, the figure the README table quotes. A goal
g (e.g. 1.05, or 1.0 for "ahead") is then met with confidence when the
interval lies below g, missed when it lies above, and undetermined otherwise.

Time to a target is the training seconds (evaluation excluded) of the first
tta.jsonl row whose test metric reaches it, as `gradzip compare` computes it.
With --steps it is that row's step instead: the statistical half of the
ratio. A static arm's trajectory does not depend on the link (the same seed
gives the same losses at 10, 20 Mbit/s or unshaped), so steps of runs on
different links pair.

  # suite run directories (runs/SUITE of one seed each) holding both arms:
  python3 experiments/python/paired_tta.py --arm auto --against topkc2 \\
      --targets 0.83 --goal 1.0 runs/c1_s1 runs/c1_s2 runs/c1_s3
  # or explicit pairs of run directories, ARM_DIR:AGAINST_DIR:
  python3 experiments/python/paired_tta.py --targets 0.88 \\
      runs/s3/auto_tol:runs/s3/topkc2 runs/s4/auto_tol:runs/s4/topkc2
  # steps to 0.83 of two static arms, runs on any links:
  python3 experiments/python/paired_tta.py --steps --targets 0.83 \\
      runs/m20_s4/topk33:runs/st_s4/fp16 runs/m20_s5/topk33:runs/st_s5/fp16
  # or per-seed ratios already computed (e.g. from a results table):
  python3 experiments/python/paired_tta.py --ratios 1.14,0.98,0.83,0.97,1.02 --goal 1.0
"""
import argparse
import json
import math
import os
import statistics

# Two-sided 95% quantiles of Student's t by degrees of freedom (no scipy in
# the venv); beyond 30 the normal quantile is close enough.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}


def t975(df):
    if df > 30:
        return 1.960
    return T975[max(k for k in T975 if k <= df)]  # the next lower df's quantile: a slightly wider interval


def tta_rows(run_dir, tool="paired_tta"):
    """The rows of run_dir/tta.jsonl in order; a missing file or a line that is
    not JSON ends the program with a message naming `tool`, the file and line."""
    path = os.path.join(run_dir, "tta.jsonl")
    if not os.path.exists(path):
        raise SystemExit(f"{tool}: {path}: no such file (is {run_dir} a gradzip run directory?)")
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{tool}: {path}:{n}: not JSON ({e})")
            yield row


def time_to(run_dir, target, metric, key="train_seconds", smooth=0.0):
    """Training seconds (or `key`, e.g. "step") at the first evaluation whose metric reaches target, or None.

    smooth > 0: the metric is the mean over the evaluations of the trailing
    `smooth` epochs (those with epoch > this one's − smooth, this one included),
    the rolling average the end-to-end-utility paper applies to its TTA curves
    (§3, over 0.3 epochs for BERT-large)."""
    window = []  # (epoch, value) of the evaluations inside the trailing window
    for row in tta_rows(run_dir):
        value = row.get("metrics", {}).get(metric)
        if value is None:
            continue
        if smooth > 0:
            window = [(e, v) for e, v in window if e > row["epoch"] - smooth] + [(row["epoch"], value)]
            value = statistics.fmean(v for _, v in window)
        if value >= target:
            return row[key]
    return None


def pairs_from(items, arm, against):
    pairs = []
    for item in items:
        if ":" in item:
            a, b = item.split(":", 1)
        else:
            a, b = os.path.join(item, arm), os.path.join(item, against)
        pairs.append((a, b))
    return pairs


def summarise(ratios, goal):
    logs = [math.log(r) for r in ratios]
    gm = math.exp(statistics.fmean(logs))
    if len(logs) < 2:
        return gm, None, None, "undetermined (one pair)"
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    lo, hi = math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half)
    verdict = "met" if hi < goal else "missed" if lo > goal else "undetermined"
    return gm, lo, hi, verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="suite run directories, or ARM_DIR:AGAINST_DIR pairs")
    ap.add_argument("--ratios", help="comma-separated per-seed ratios instead of run directories")
    ap.add_argument("--arm", default="auto", help="the arm compared (subdirectory name in a suite run directory)")
    ap.add_argument("--against", default="topkc2", help="the reference arm")
    ap.add_argument("--targets", default="0.83", help="comma-separated metric targets")
    ap.add_argument("--metric", default="accuracy", help="the tta.jsonl metric (masked_accuracy for MLM)")
    ap.add_argument("--smooth", type=float, default=0.0,
                    help="epochs of the trailing rolling average taken of the metric before the target is read (0: none)")
    ap.add_argument("--steps", action="store_true", help="compare steps to the target instead of seconds")
    ap.add_argument("--goal", type=float, default=1.05, help="the ratio the arm must stay below (1.0: ahead)")
    args = ap.parse_args()
    if args.smooth < 0:
        ap.error(f"--smooth must be >= 0 epochs, got {args.smooth}")
    if args.ratios:
        ratios = [float(r) for r in args.ratios.split(",")]
        gm, lo, hi, verdict = summarise(ratios, args.goal)
        ci = f", 95% interval [{lo:.2f}x, {hi:.2f}x]" if lo is not None else ""
        print(f"{len(ratios)} ratios: geometric mean {gm:.2f}x{ci}; goal < {args.goal:g}x: {verdict}")
        return
    if not args.runs:
        ap.error("give run directories or --ratios")
    pairs = pairs_from(args.runs, args.arm, args.against)
    key, unit = ("step", "{:.0f} steps") if args.steps else ("train_seconds", "{:.1f} s")
    for target in (float(t) for t in args.targets.split(",")):
        print(f"target {target}:")
        ratios, mine, theirs = [], [], []
        for a, b in pairs:
            ta, tb = (time_to(a, target, args.metric, key, args.smooth),
                      time_to(b, target, args.metric, key, args.smooth))
            shown = unit.format(ta) if ta is not None else "never"
            against = unit.format(tb) if tb is not None else "never"
            if ta is None or tb is None:
                print(f"  {a}: {shown} against {against} (left out: a run never reached the target)")
                continue
            ratios.append(ta / tb)
            mine.append(ta)
            theirs.append(tb)
            print(f"  {a}: {shown} against {against}: {ta / tb:.2f}x")
        if not ratios:
            print("  no pair reached the target")
            continue
        gm, lo, hi, verdict = summarise(ratios, args.goal)
        ci = f", 95% interval [{lo:.2f}x, {hi:.2f}x]" if lo is not None else ""
        means = f"{unit.format(statistics.fmean(mine))} against {unit.format(statistics.fmean(theirs))}"
        print(f"  {len(ratios)} pairs: ratio of the means {statistics.fmean(mine) / statistics.fmean(theirs):.3f}x ({means}); "
              f"geometric mean of the ratios {gm:.2f}x{ci}; goal < {args.goal:g}x: {verdict}")


if __name__ == "__main__":
    main()
