"""Replays the controller's logged decisions under another statistical cost.

Each `decision` record of a run's decisions.jsonl holds every candidate's
predicted step and screened vNMSE, the explored candidates' measured steps and
vNMSEs, and the running plan's. This script recomputes, per decision, the knee
of the predicted front (what the decision would explore first) and the knee of
the measured points (what it would choose among what it explored), with the
relative knee of trainer/Pareto.h (time as (t - t_min)/t_min over the front,
the statistical cost as s - s_min; the point minimising
sqrt(w t^2 + (1 - w) s^2)) and the costs of trainer/ControllerOptions.h
statisticalCost: `vnmse`, or `ef_rate` (k v/(1 - v)^2 for plans under error
feedback, v for the rest). It cannot say what a decision would have measured
for candidates it did not explore. With the run's own settings the measured
knee reproduces every logged choice; it set `ef_rate_scale` (see
experiments/results/controller_ablation.md).

  python3 experiments/python/replay_knee.py --stat ef_rate --scale 0.015 runs/*/auto*/decisions.jsonl
"""
import argparse
import json
import math

# Compressors the factory does not wrap in error feedback (compress/Factory.cpp).
NO_ERROR_FEEDBACK = ("fp32", "fp16", "bf16", "cnat", "dnat", "qsgd", "gradiveq")


def error_feedback(plan):
    """As compress::usesErrorFeedback, from a plan key: its option, else the paper's choice."""
    if "error_feedback: true" in plan:
        return True
    if "error_feedback: false" in plan:
        return False
    return not plan.startswith(NO_ERROR_FEEDBACK)


def cost(vnmse, plan, stat, scale):
    if stat == "vnmse" or not error_feedback(plan):
        return vnmse
    return scale * vnmse / (1 - vnmse) ** 2 if vnmse < 1 else math.inf


def knee(points, w):
    """points: (time, stat, name); the relative knee of their Pareto front."""
    finite = [p for p in points if math.isfinite(p[0]) and math.isfinite(p[1])]
    front = [p for p in finite
             if not any(q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1]) for q in finite)]
    if not front:
        return None
    t0 = min(p[0] for p in front)
    s0 = min(p[1] for p in front)
    return min(front, key=lambda p: (math.sqrt(w * ((p[0] - t0) / t0) ** 2 + (1 - w) * (p[1] - s0) ** 2), p[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+", help="decisions.jsonl files")
    ap.add_argument("--stat", choices=["vnmse", "ef_rate"], default="ef_rate")
    ap.add_argument("--scale", type=float, default=0.015, help="ef_rate_scale")
    ap.add_argument("--time-weight", type=float, default=0.85)
    a = ap.parse_args()
    for log in a.logs:
        for line in open(log):
            d = json.loads(line)
            if d.get("event") != "decision" or "candidates" not in d:
                continue
            c = lambda r: cost(r["vnmse"], r["plan"], a.stat, a.scale)  # noqa: E731
            predicted = knee([(r["predicted_step"], c(r), r["plan"]) for r in d["candidates"] if r.get("ok")],
                             a.time_weight)
            measured = [(r["measured_step"], c(r), r["plan"]) for r in d.get("explored", []) if r.get("ok")]
            cur = d.get("current") or {}
            if isinstance(cur.get("measured_step"), float) and isinstance(cur.get("vnmse"), float):
                measured.append((cur["measured_step"], c(cur), cur["plan"]))
            chosen = knee(measured, a.time_weight)
            print(json.dumps({"log": log, "step": d["step"], "trigger": d.get("trigger"),
                              "predicted_knee": predicted[2] if predicted else None,
                              "measured_knee": chosen[2] if chosen else None, "logged": d.get("chosen")}))


if __name__ == "__main__":
    main()
