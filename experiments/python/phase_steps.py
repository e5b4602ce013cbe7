"""Seconds per training step of each arm in each phase of a rate schedule,
and in the transitions between phases.

Where an `auto` arm loses time to a static arm over the same steps, this
says in which phase of the link schedule: per run, the training seconds
(`train_seconds`, evaluation excluded, the controller's charged time
included) between consecutive tta.jsonl rows, divided by the steps between
them, summed over the rows whose interval falls in a phase; then, per arm
and phase, the median over the runs. Phases are step ranges given by their
boundaries (`schedule_c1`'s quarters of a 468-step epoch: 117,234,351).

An interval that contains a boundary, or starts less than --settle steps
after one (default 10), is the transition into that phase, reported in its
own column ("→117": the steps it covered, e.g. 110-130): there the link has
changed (the launcher follows the epoch up to ~0.5 s late), the running
plan still runs on it until the controller's network decision, and the
decision's charged time falls. The phases' columns are their steady state.
--settle 0 assigns every interval to the phase it starts in, transitions
included (this script's older output).

  python3 experiments/python/phase_steps.py --arms topk33,auto \\
      --bounds 117,234,351 runs/c1_s1/schedule_c1 runs/c1_s2/schedule_c1

Each directory is a suite run directory holding one subdirectory per arm.
Offline analysis of logged runs; not a test.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_tta import tta_rows  # noqa: E402


def phase_seconds(run_dir, bounds, settle):
    """Seconds per step per phase (len(bounds) + 1 of them), then per transition
    (len(bounds)), each None where no interval falls; and each transition's
    first and last step."""
    n = len(bounds)
    seconds = [0.0] * (2 * n + 1)
    steps = [0] * (2 * n + 1)
    spans = [[None, None] for _ in bounds]
    prev_step, prev_seconds = 0, 0.0
    for row in tta_rows(run_dir, "phase_steps"):
        step, t = row["step"], row["train_seconds"]
        if step > prev_step:
            # The boundary this interval contains or starts within `settle` steps after.
            into = [i for i, b in enumerate(bounds) if prev_step < b < step or b <= prev_step < b + settle] if settle else []
            if into:
                slot = n + 1 + into[-1]
                span = spans[into[-1]]
                span[0] = prev_step if span[0] is None else min(span[0], prev_step)
                span[1] = step if span[1] is None else max(span[1], step)
            else:
                slot = sum(1 for b in bounds if prev_step >= b)
            seconds[slot] += t - prev_seconds
            steps[slot] += step - prev_step
        prev_step, prev_seconds = step, t
    return [s / k if k else None for s, k in zip(seconds, steps)], spans


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", required=True, help="comma-separated arm names (subdirectories of each suite directory)")
    ap.add_argument("--bounds", required=True, help="comma-separated first steps of the phases after the first")
    ap.add_argument("--settle", type=int, default=10,
                    help="steps after a boundary still counted as its transition (0: no transition columns)")
    ap.add_argument("dirs", nargs="+", help="suite run directories, one per seed")
    args = ap.parse_args()
    try:
        args.bounds = [int(b) for b in args.bounds.split(",")]
    except ValueError:
        raise SystemExit(f"phase_steps: --bounds {args.bounds!r}: not comma-separated integers")
    if sorted(args.bounds) != args.bounds:
        raise SystemExit("phase_steps: --bounds must be increasing")
    if args.settle < 0:
        raise SystemExit(f"phase_steps: --settle {args.settle}: must be >= 0")
    edges = [0] + args.bounds
    names = [f"{a}-{b}" for a, b in zip(edges, args.bounds)] + [f"{edges[-1]}-"]
    if args.settle:
        names += [f"→{b}" for b in args.bounds]
    print(f"median seconds per step over {len(args.dirs)} runs, by phase (steps)"
          + (f" and transition (settle {args.settle})" if args.settle else "") + ": " + ", ".join(names))
    for arm in args.arms.split(","):
        runs = [phase_seconds(os.path.join(d, arm), args.bounds, args.settle) for d in args.dirs]
        medians = []
        for p in range(len(names)):
            values = [r[0][p] for r in runs if r[0][p] is not None]
            medians.append(f"{statistics.median(values):.4f}" if values else "-")
        spans = ""
        if args.settle:
            firsts = [[r[1][i][0] for r in runs if r[1][i][0] is not None] for i in range(len(args.bounds))]
            lasts = [[r[1][i][1] for r in runs if r[1][i][1] is not None] for i in range(len(args.bounds))]
            spans = "  (transitions over steps " + ", ".join(
                f"{min(f)}-{max(l)}" if f else "-" for f, l in zip(firsts, lasts)) + ")"
        print(f"  {arm}: " + "  ".join(medians) + spans)


if __name__ == "__main__":
    main()
