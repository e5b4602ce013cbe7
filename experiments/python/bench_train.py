"""Side-by-side single-worker training throughput: gradzip (C++, `gradzip bench
train`, experiments/TrainBench.cpp) against PyTorch (throughput.py) on the
same models, shapes, batch, threads and optimizer.

    python experiments/python/bench_train.py [--gradzip build/gradzip] \
        [--models resnet20 vgg11 bert] [--batch 64] [--bert-batch 16] \
        [--threads 1] [--repeats 3] [--steps 10] [--warmup 3]

Runs are interleaved, C++ then Python, model by model, --repeats times, so
machine-load drift hits both sides alike. Each run reports the median over its
timed steps; the table shows the median over repeats and the min-max spread,
in process CPU time (robust to other processes taking the cores when
--threads is 1) and in wall-clock time. Writes experiments/results/
train_throughput.md (or --md) with the date, machine, torch version, command
and table. The target is gradzip / PyTorch >= 0.95.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# gradzip's own allocator settings (util/Allocator.h: mallopt M_MMAP_MAX = 0,
# M_TRIM_THRESHOLD = INT_MAX), given to the "PyTorch, same malloc" side.
SAME_MALLOC = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"


def run(cmd, out, env=None):
    """Runs one benchmark process; returns the JSON rows it appended to `out`."""
    before = os.path.getsize(out) if os.path.exists(out) else 0
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench_train: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    with open(out) as f:
        f.seek(before)
        return [json.loads(line) for line in f if line.strip()]


def spread(v):
    return f"{min(v):.1f}-{max(v):.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradzip", default=os.path.join(ROOT, "build", "gradzip"))
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for throughput.py")
    ap.add_argument("--models", nargs="+", default=["resnet20", "vgg11", "bert"])
    ap.add_argument("--batch", type=int, default=64, help="images per step")
    ap.add_argument("--bert-batch", type=int, default=16, help="BERT sequences per step (configs/kdoc_bert_mlm.yaml)")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--md", default=os.path.join(ROOT, "experiments", "results", "train_throughput.md"))
    args = ap.parse_args()
    if not os.access(args.gradzip, os.X_OK):
        sys.exit(f"bench_train: {args.gradzip} is not an executable; build it (ninja -C build gradzip) or pass --gradzip")

    load_before = os.getloadavg()
    rows = {}  # (model, impl) -> list of per-run rows
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.jsonl")
        for r in range(args.repeats):
            for model in args.models:
                batch = args.bert_batch if model == "bert" else args.batch
                common = ["--models", model, "--batch", str(batch), "--seq-len", str(args.seq_len), "--threads",
                          str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup), "--out", out]
                py = [args.python, os.path.join(HERE, "throughput.py"), *common]
                for impl, cmd, env in (("gradzip", [args.gradzip, "bench", "train", *common], None),
                                       ("pytorch", py, None),
                                       ("pytorch_malloc", py, {**os.environ, "GLIBC_TUNABLES": SAME_MALLOC})):
                    for row in run(cmd, out, env):
                        rows.setdefault((model, impl), []).append(row)
                        print(f"repeat {r + 1}/{args.repeats} {model:9s} {impl:14s} "
                              f"{row['cpu_samples_per_s']:8.1f} samples/CPU-s {row['samples_per_s']:8.1f} samples/s",
                              flush=True)
    load_after = os.getloadavg()
    import torch  # only for its version; imported late to keep it out of the timed runs' way

    head = ("| model | batch | gradzip samples/s (CPU) | PyTorch samples/s (CPU) | ratio (CPU) | "
            "PyTorch, same malloc (CPU) | ratio (CPU) | gradzip samples/s (wall) | PyTorch samples/s (wall) | "
            "ratio (wall) | params |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in args.models:
        g, p, t = rows[(model, "gradzip")], rows[(model, "pytorch")], rows[(model, "pytorch_malloc")]
        med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
        cpu = lambda rs: f"{med(rs, 'cpu_samples_per_s'):.1f} ({spread([r['cpu_samples_per_s'] for r in rs])})"  # noqa: E731
        wall = lambda rs: f"{med(rs, 'samples_per_s'):.1f} ({spread([r['samples_per_s'] for r in rs])})"  # noqa: E731
        gc, pc, tc = (med(g, "cpu_samples_per_s"), med(p, "cpu_samples_per_s"), med(t, "cpu_samples_per_s"))
        gw, pw = med(g, "samples_per_s"), med(p, "samples_per_s")
        assert g[0]["parameters"] == p[0]["parameters"], f"{model}: parameter counts differ"
        lines.append(f"| {model} | {g[0]['batch']} | {cpu(g)} | {cpu(p)} | **{gc / pc:.3f}** | {cpu(t)} | "
                     f"**{gc / tc:.3f}** | {wall(g)} | {wall(p)} | {gw / pw:.3f} | {g[0]['parameters']:,} |")
    table = "\n".join(lines)
    # Where the time goes: CPU ms per phase (median over runs of each run's median).
    phase_lines = ["| model | impl | forward+loss ms | backward ms | SGD step ms |", "|---|---|---|---|---|"]
    for model in args.models:
        for impl in ("gradzip", "pytorch", "pytorch_malloc"):
            rs = rows[(model, impl)]
            ms = [statistics.median(r["phase_cpu_seconds"][k] for r in rs) * 1e3
                  for k in ("forward", "backward", "optimizer")]
            phase_lines.append(f"| {model} | {impl} | {ms[0]:.2f} | {ms[1]:.2f} | {ms[2]:.2f} |")
    phases = "\n".join(phase_lines)
    print("\n" + table + "\n\n" + phases)

    cmd = " ".join(["python", os.path.relpath(__file__, ROOT), *sys.argv[1:]])
    md = f"""# Single-worker training throughput: gradzip vs PyTorch

- date: {datetime.datetime.now().isoformat(timespec="seconds")}
- machine: {os.cpu_count()} cores (nproc), {cpu_model()}; load average {load_before[0]:.1f} before, \
{load_after[0]:.1f} after (a shared machine: other jobs were running)
- torch {torch.__version__} (the same libtorch_cpu under both sides); {args.threads} intra-op thread(s)
- command: `{cmd}`
- each cell: median over {args.repeats} interleaved runs (C++, Python, Python with gradzip's malloc settings, C++, ...),
  each run the median of
  {args.steps} timed steps after {args.warmup} warm-up steps; in parentheses the min-max over the runs
- one step = zero_grad, forward, cross-entropy, backward, SGD (momentum 0.9, weight decay 5e-4) on one fixed
  synthetic batch: 1x28x28 images, 10 classes; BERT (BERT-mini defaults, vocab 8000): sequences of {args.seq_len}
  tokens, 15% MLM targets
- CPU = samples per second of process CPU time (does not count waiting for a core; the robust number on a
  loaded machine with 1 thread); wall = samples per wall-clock second
- gradzip keeps freed memory in the heap (util/Allocator.h: `mallopt(M_MMAP_MAX, 0)`, `M_TRIM_THRESHOLD` =
  2 GiB); "PyTorch" runs with glibc's defaults, as a user's script does; "PyTorch, same malloc" gets the same
  settings through `GLIBC_TUNABLES={SAME_MALLOC}`, which isolates everything but the allocator
- target: gradzip / PyTorch >= 0.95 (both ratios)

{table}

CPU milliseconds per step phase (zero_grad + forward + loss, backward, SGD step):

{phases}
"""
    os.makedirs(os.path.dirname(args.md), exist_ok=True)
    with open(args.md, "w") as f:
        f.write(md)
    print(f"\nwritten: {args.md}")


if __name__ == "__main__":
    main()
