"""Replays the controller's logged decisions under another statistical cost.

Each `decision` record of a run's decisions.jsonl holds every candidate's
predicted step and screened vNMSE, the explored candidates' measured steps and
vNMSEs, and the running plan's; the `provisional` record (step 2) holds the
candidates alone, and its choice is the predicted front's knee (this script
does not model the rule that keeps fp16 when the knee saves less than
explore_margin). This script recomputes, per decision, the knee
of the predicted front (what the decision would explore first) and the knee of
the measured points (what it would choose among what it explored), with the
relative knee of controller/Pareto.h (time as (t - t_min)/t_min over the front,
the statistical cost as s - s_min; the point minimising
sqrt(w t^2 + (1 - w) s^2)) and the costs of controller/ControllerOptions.h
statisticalCost: `vnmse`, or `ef_rate` (k v/(1 - v)^2 for plans under error
feedback, v for the rest). It cannot say what a decision would have measured
for candidates it did not explore. With the run's own settings the measured
knee reproduces every logged choice; it set `ef_rate_scale` (see
experiments/results/controller_ablation.md).

  python3 experiments/python/replay_knee.py --stat ef_rate --scale 0.03 runs/*/auto*/decisions.jsonl

With several comma-separated --scale values (0.015,0.03,...) it prints, per
decision, the knee of the predicted front at each k instead, with the
predicted step of THC 4-bit all-reduce over TopKC b=2's and TopKC b=2's
screened vNMSE (where both were screened): the k at which a decision
changes plan.

With --knee log the knee is Pareto.h's KneeScale::Log instead: the weighted L1
distance w ln(t/t_min) + (1 - w) ln((1 + s)/(1 + s_min)), which at
--time-weight 0.5 takes the least predicted step x (1 + cost).

  python3 experiments/python/replay_knee.py --knee log --time-weight 0.5 runs/*/auto*/decisions.jsonl

With --floors it prices the explored candidates and the running plan as the
controller does: the larger of what they measured and their screened cost
(their residual may not have built up). With --settled N as well, the running
plan's screened floor is dropped once it has run N steps since it was applied
(the run's rank0/plans.jsonl says when; controller/ControllerDecision.cpp: the
controller's min_interval, 200); a network decision that
re-measures the link (its record holds a `predicted_knee`) leaves the running
plan out, as the controller does.

  python3 experiments/python/replay_knee.py --floors --settled 200 runs/*/auto*/decisions.jsonl

With --followups it prints instead the cost model's error on the plans the
decisions chose: |measured/predicted - 1| of every `followup` record
(median, p75, p90, mean signed), over all logs and per compressor, the
evidence behind `time_tolerance` (controller/ControllerOptions.h).

  python3 experiments/python/replay_knee.py --followups runs/*/auto*/decisions.jsonl
"""
import argparse
import json
import math
import os

STAT_MARGIN = 0.01  # controller/Pareto.h kFollowGainMargin, kneePoint's margin too

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


def distance(p, t0, s0, w, scale):
    """Pareto.h kneePoint's distance of point p from the ideal (t0, s0); scale: relative or log."""
    if scale == "log":  # weighted L1 of the log ratios: w = 0.5 ranks by time x (1 + stat)
        return w * math.log(p[0] / t0) + (1 - w) * math.log((1 + p[1]) / (1 + s0))
    return math.sqrt(w * ((p[0] - t0) / t0) ** 2 + (1 - w) * (p[1] - s0) ** 2)


def knee(points, w, tolerance=0.0, scale="relative"):
    """points: (time, stat, name); the relative (or log) knee of their Pareto front, leaving
    out points another front point beats on cost within (1 + tolerance) of their
    time (Pareto.h kneePoint's timeTolerance; the scales stay the whole front's)."""
    finite = [p for p in points if math.isfinite(p[0]) and math.isfinite(p[1])]
    front = [p for p in finite
             if not any(q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1]) for q in finite)]
    if not front:
        return None
    t0 = min(p[0] for p in front)
    s0 = min(p[1] for p in front)
    kept = [p for p in front if not any(q[1] < p[1] - STAT_MARGIN * abs(p[1]) and q[0] <= p[0] * (1 + tolerance)
                                        for q in front)] if tolerance > 0 else front
    return min(kept, key=lambda p: (distance(p, t0, s0, w, scale), p[0]))


def sweep(log, d, scales, stat, w, tolerance, scale):
    """The predicted front's knee of decision d at each k in scales."""
    ok = [r for r in d["candidates"] if r.get("ok")]
    out = {"log": log, "step": d["step"], "trigger": trigger(d)}
    fastest = {}
    for r in ok:  # each configuration's fastest collective
        key = r["plan"].split("@")[0]
        if key not in fastest or r["predicted_step"] < fastest[key]["predicted_step"]:
            fastest[key] = r
    kc, thc = fastest.get("topkc{bits: 2}"), fastest.get("thc{deployment: allreduce, bits: 4, rotation_block_log2: 10}")
    if kc and thc:
        out["thc_over_topkc2"] = round(thc["predicted_step"] / kc["predicted_step"], 4)
        out["topkc2_vnmse"] = round(kc["vnmse"], 4)
    out["knee"] = {}
    for k in scales:
        p = knee([(r["predicted_step"], cost(r["vnmse"], r["plan"], stat, k), r["plan"]) for r in ok], w, tolerance,
                 scale)
        out["knee"][str(k)] = p[2].split("@")[0] if p else None
    return out


def trigger(d):
    """A decision's trigger; "provisional" for the step-2 record."""
    return d.get("trigger") or d.get("event")


def followup_errors(logs):
    """measured/predicted - 1 of each distinct followup record, by compressor."""
    seen, errors = set(), {}
    for log in logs:
        for line in open(log):
            d = json.loads(line)
            if d.get("event") != "followup" or line in seen or not d.get("predicted_step"):
                continue
            seen.add(line)  # a run copied into two result folders counts once
            errors.setdefault(d["plan"].split("@")[0], []).append(d["measured_step"] / d["predicted_step"] - 1)
    return errors


def summary(errs):
    a = sorted(abs(e) for e in errs)
    q = lambda f: a[min(len(a) - 1, int(f * len(a)))]  # noqa: E731
    return {"n": len(a), "median_abs": round(q(0.5), 4), "p75_abs": round(q(0.75), 4),
            "p90_abs": round(q(0.9), 4), "mean": round(sum(errs) / len(errs), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+", help="decisions.jsonl files")
    ap.add_argument("--stat", choices=["vnmse", "ef_rate"], default="ef_rate")
    ap.add_argument("--scale", type=lambda v: [float(x) for x in v.split(",")], default=[0.03],
                    help="ef_rate_scale; several, comma-separated: a sweep")
    ap.add_argument("--time-weight", type=float, default=0.85)
    ap.add_argument("--knee", choices=["relative", "log"], default="relative", help="the knee's scale (ControllerOptions knee)")
    ap.add_argument("--tolerance", type=float, default=0.04, help="time_tolerance (the controller's default 0.04; 0.05 in runs before 90a6569)")
    ap.add_argument("--followups", action="store_true", help="the cost model's error on the chosen plans instead")
    ap.add_argument("--floors", action="store_true", help="price measured points at no less than their screened cost")
    ap.add_argument("--settled", type=int, default=0,
                    help="with --floors: drop the running plan's floor after this many steps on it (0: never)")
    a = ap.parse_args()
    if a.followups:
        errors = followup_errors(a.logs)
        if not errors:
            raise SystemExit("no followup records in these logs")
        print(json.dumps({"all": summary([e for v in errors.values() for e in v])}))
        for plan, errs in sorted(errors.items()):
            print(json.dumps({plan: summary(errs)}))
        return
    for log in a.logs:
        plans = os.path.join(os.path.dirname(log), "rank0", "plans.jsonl")
        applied = [json.loads(x)["step"] for x in open(plans)] if a.settled and os.path.exists(plans) else []
        for line in open(log):
            d = json.loads(line)
            if d.get("event") not in ("decision", "provisional") or "candidates" not in d:
                continue
            if len(a.scale) > 1:
                print(json.dumps(sweep(log, d, a.scale, a.stat, a.time_weight, a.tolerance, a.knee)))
                continue
            c = lambda r: cost(r["vnmse"], r["plan"], a.stat, a.scale[0])  # noqa: E731
            screened = {r["plan"]: c(r) for r in d["candidates"] if r.get("ok")}
            floor = lambda r: max(c(r), screened.get(r["plan"], 0.0)) if a.floors else c(r)  # noqa: E731
            predicted = knee([(r["predicted_step"], c(r), r["plan"]) for r in d["candidates"] if r.get("ok")],
                             a.time_weight, a.tolerance, a.knee)
            # `time`: the step the decision compared (on its common_base where logged).
            measured = [(r.get("time", r["measured_step"]), floor(r), r["plan"])
                        for r in d.get("explored", []) if r.get("ok")]
            cur = d.get("current") or {}
            stale = a.floors and "predicted_knee" in d  # the controller leaves the running plan out
            if isinstance(cur.get("measured_step"), float) and isinstance(cur.get("vnmse"), float) and not stale:
                on_plan = d["step"] - max([s for s in applied if s < d["step"]] or [0])
                own = c(cur) if applied and on_plan >= a.settled else floor(cur)
                measured.append((cur.get("time", cur["measured_step"]), own, cur["plan"]))
            chosen = knee(measured, a.time_weight, a.tolerance, a.knee)
            print(json.dumps({"log": log, "step": d["step"], "trigger": trigger(d),
                              "predicted_knee": predicted[2] if predicted else None,
                              "measured_knee": chosen[2] if chosen else None, "logged": d.get("chosen")}))


if __name__ == "__main__":
    main()
