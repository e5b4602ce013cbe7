"""Benchmark of the PyTorch entry: python/examples/ddp_train.py on 2 ranks over an
emulated link (default 20 Mbit/s), once per hook, on the same data, model and
seed: torch's fp16 and PowerSGD hooks against gradzip's hooks (fp16, TopKC,
THC, auto), plus DDP's own fp32 all-reduce. Prints each arm's time to the
target accuracy and its ratio to torch's PowerSGD and fp16 hooks, measured in
this one run, and writes them to experiments/results/pytorch_hooks.md (or --out).

    sudo .venv/bin/python experiments/python/bench_ddp_hooks.py [--rate 20] [--target 0.85]

Needs root for the emulated link (gradzip launch --net); --rate unshaped runs
on loopback without it.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARMS = [
    ("torch fp16 hook", ["--hook", "torch-fp16"]),
    ("torch PowerSGD r4 hook", ["--hook", "torch-powersgd", "--powersgd-rank", "4"]),
    ("gradzip fp16", ["--hook", "gradzip", "--plan", "fp16"]),
    ("gradzip TopKC b=2", ["--hook", "gradzip", "--plan", '{"name": "topkc", "topkc": {"bits": 2}}']),
    ("gradzip THC 4-bit PS", ["--hook", "gradzip", "--plan",
                              '{"name": "thc", "collective": "ps", "thc": {"bits": 4}}']),
    ("gradzip PowerSGD r4", ["--hook", "gradzip", "--plan", '{"name": "powersgd", "powersgd": {"rank": 4}}']),
    ("gradzip auto", ["--hook", "gradzip", "--plan", "auto"]),
    ("DDP fp32 all-reduce", ["--hook", "ddp"]),
]


def run_arm(args, extra):
    cmd = [os.path.join(args.build, "gradzip"), "launch", "-n", "2", "--net", args.rate, "--",
           sys.executable, os.path.join(ROOT, "python/examples/ddp_train.py"), "--target", str(args.target),
           "--max-steps", str(args.max_steps), "--seed", str(args.seed)] + extra
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.arm_timeout, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=os.path.join(args.build, "python")))
    wall = time.time() - t0
    for line in out.stdout.splitlines():
        line = line[line.find("{"):]
        if line.startswith('{"hook"'):
            r = json.loads(line)
            r["wall"] = wall
            return r
    raise SystemExit(f"bench_ddp_hooks: {' '.join(cmd)} gave no result (exit {out.returncode}):\n"
                     f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")


def fmt_ratio(a, b):
    return f"{b / a:.2f}x" if a and b else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="20", help="Mbit/s of the emulated link, or 'unshaped'")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arm-timeout", type=int, default=1800)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", nargs="*", help="run only arms whose name contains one of these")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments/results/pytorch_hooks.md"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the arms of --out's raw results that this run does not run again")
    args = ap.parse_args()

    results = []
    if args.merge and os.path.exists(args.out):
        with open(args.out) as f:
            text = f.read()
        raw = text.split("```json", 1)[1].split("```", 1)[0] if "```json" in text else ""
        results = [json.loads(line) for line in raw.splitlines() if line.strip()]
        if args.only:
            results = [r for r in results if not any(o in r["arm"] for o in args.only)]
    for name, extra in ARMS:
        if args.only and not any(o in name for o in args.only):
            continue
        r = run_arm(args, extra)
        r["arm"] = name
        results.append(r)
        tt = r["reached"]["seconds"] if r["reached"] else None
        print(f"{name:26s} time to {args.target:.2f}: {tt if tt is None else round(tt, 1)} s "
              f"(steps {r['steps']}, final accuracy {r['accuracy']:.3f})", flush=True)

    order = [name for name, _ in ARMS]
    results.sort(key=lambda r: order.index(r["arm"]) if r["arm"] in order else len(order))

    def tta(arm):
        for r in results:
            if r["arm"] == arm and r["reached"]:
                return r["reached"]["seconds"]
        return None

    psgd, fp16 = tta("torch PowerSGD r4 hook"), tta("torch fp16 hook")
    rows = ["| arm | time to target (s) | steps | final accuracy | vs torch PowerSGD | vs torch fp16 |",
            "|---|---|---|---|---|---|"]
    for r in results:
        t = r["reached"]["seconds"] if r["reached"] else None
        rows.append(f"| {r['arm']} | {'not reached' if t is None else f'{t:.1f}'} | {r['steps']} | "
                    f"{r['accuracy']:.3f} | {fmt_ratio(t, psgd)} | {fmt_ratio(t, fp16)} |")
    gz = [(tta(r["arm"]), r["arm"]) for r in results if r["arm"].startswith("gradzip") and tta(r["arm"])]
    best = min(gz) if gz else None
    summary = (f"Best gradzip hook: {best[1]}, {fmt_ratio(best[0], psgd)} sooner than torch's PowerSGD hook "
               f"(goal: 1.2x)." if best and psgd else "No gradzip hook and PowerSGD pair reached the target.")
    print("\n".join(rows))
    print(summary)
    auto = [r for r in results if r["arm"] == "gradzip auto"]
    host = platform.node()
    link = "unshaped loopback" if args.rate == "unshaped" else f"link {args.rate} Mbit/s"
    text = [f"# PyTorch entry: gradzip's DDP hooks against torch's hooks", "",
            f"Summary ({datetime.date.today()}): {summary}", "",
            f"python/examples/ddp_train.py (small CNN, Fashion-MNIST, SGD momentum 0.9, lr 0.05, batch 64 per "
            f"rank, seed {args.seed}, one DDP bucket) on 2 ranks, "
            f"{link} via `gradzip launch --net`, "
            f"target test accuracy {args.target}; time to target is training time (evaluation paused). "
            f"Host {host}, {os.cpu_count()} cores, one run per arm.", "",
            f"Command: `sudo .venv/bin/python experiments/python/bench_ddp_hooks.py "
            f"{' '.join(shlex.quote(a) for a in sys.argv[1:])}`", ""] + rows + [""]
    if auto:
        text += [f"gradzip auto ran these bucket plans at the end: {auto[0].get('gradzip_plans')}", ""]
    text += ["Raw results:", "", "```json"] + [json.dumps(r) for r in results] + ["```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(text))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
