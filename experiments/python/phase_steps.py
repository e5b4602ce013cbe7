"""Seconds per training step of each arm in each phase of a rate schedule.

Where an `auto` arm loses time to a static arm over the same steps, this
says in which phase of the link schedule: per run, the training seconds
(`train_seconds`, evaluation excluded, the controller's charged time
included) between consecutive tta.jsonl rows, divided by the steps between
them, summed over the rows whose interval starts in a phase; then, per arm
and phase, the median over the runs. Phases are step ranges given by their
boundaries (`schedule_c1`'s quarters of a 468-step epoch: 117,234,351).

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


def phase_seconds(run_dir, bounds):
    """Per phase (len(bounds) + 1 of them), seconds per step, or None where no interval starts."""
    seconds = [0.0] * (len(bounds) + 1)
    steps = [0] * (len(bounds) + 1)
    prev_step, prev_seconds = 0, 0.0
    for row in tta_rows(run_dir, "phase_steps"):
        step, t = row["step"], row["train_seconds"]
        if step > prev_step:
            phase = sum(1 for b in bounds if prev_step >= b)
            seconds[phase] += t - prev_seconds
            steps[phase] += step - prev_step
        prev_step, prev_seconds = step, t
    return [s / k if k else None for s, k in zip(seconds, steps)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", required=True, help="comma-separated arm names (subdirectories of each suite directory)")
    ap.add_argument("--bounds", required=True, help="comma-separated first steps of the phases after the first")
    ap.add_argument("dirs", nargs="+", help="suite run directories, one per seed")
    args = ap.parse_args()
    try:
        args.bounds = [int(b) for b in args.bounds.split(",")]
    except ValueError:
        raise SystemExit(f"phase_steps: --bounds {args.bounds!r}: not comma-separated integers")
    if sorted(args.bounds) != args.bounds:
        raise SystemExit("phase_steps: --bounds must be increasing")
    edges = [0] + args.bounds
    names = [f"{a}-{b}" for a, b in zip(edges, args.bounds)] + [f"{edges[-1]}-"]
    print(f"median seconds per step over {len(args.dirs)} runs, by phase (steps): " + ", ".join(names))
    for arm in args.arms.split(","):
        per_run = [phase_seconds(os.path.join(d, arm), args.bounds) for d in args.dirs]
        medians = []
        for p in range(len(names)):
            values = [r[p] for r in per_run if r[p] is not None]
            medians.append(f"{statistics.median(values):.4f}" if values else "-")
        print(f"  {arm}: " + "  ".join(medians))


if __name__ == "__main__":
    main()
