"""Single-worker training throughput (samples/s) of the PyTorch twins of
gradzip's models: the Python side of `gradzip bench train`
(experiments/TrainBench.cpp), with the same shapes, batch, threads, optimizer
and timing, so the two rates can be divided.

    python throughput.py --models resnet20 vgg11 bert --batch 64 --threads 1 \
        --warmup 3 --steps 20 [--out results.jsonl] [--profile]

One step: zero_grad, forward, cross-entropy, backward, SGD (momentum 0.9,
weight decay 5e-4) on one fixed synthetic batch (1x28x28 images, 10 classes;
BERT: seq-len tokens of an 8000 vocabulary, 15% of positions as MLM targets).
Rates = batch / median step time over the timed steps, in wall-clock and in
process CPU time (robust on a shared machine when --threads is 1). --profile prints the
per-op table of torch.autograd.profiler for a few steps of each model.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gz_models  # noqa: E402

VOCAB, CLASSES, MASK_PROB, IGNORE = 8000, 10, 0.15, -100


def build(name, seq_len):
    if name == "bert":
        return gz_models.make_model("bert", bert={"vocab_size": VOCAB, "max_len": max(128, seq_len)})
    if name == "mlp":
        return gz_models.make_model("mlp", num_classes=CLASSES)
    return gz_models.make_model(name, in_channels=1, num_classes=CLASSES)


def synthetic_batch(name, batch, seq_len):
    g = torch.Generator().manual_seed(20240611)
    if name == "bert":
        ids = torch.randint(VOCAB, (batch, seq_len), generator=g)
        picked = torch.rand(batch, seq_len, generator=g) < MASK_PROB
        return ids, torch.where(picked, ids, torch.full_like(ids, IGNORE))
    return torch.randn(batch, 1, 28, 28, generator=g), torch.randint(CLASSES, (batch,), generator=g)


def loss_of(name, logits, target):
    if name == "bert":
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE)
    return F.cross_entropy(logits, target)


def bench(name, args):
    torch.manual_seed(1)
    model = build(name, args.seq_len)
    sgd = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x, y = synthetic_batch(name, args.batch, args.seq_len)

    def step(marks):
        sgd.zero_grad()
        loss = loss_of(name, model(x), y)
        marks.append(time.process_time())
        loss.backward()
        marks.append(time.process_time())
        sgd.step()
        return loss

    # Per timed step: wall and CPU seconds, and CPU seconds of the three phases
    # (zero_grad + forward + loss, backward, SGD step), as TrainBench.cpp.
    times, cpu_times, phases = [], [], {"forward": [], "backward": [], "optimizer": []}
    for i in range(args.warmup + args.steps):
        c0, t0 = time.process_time(), time.perf_counter()
        marks = []
        loss = step(marks)
        dt, c3 = time.perf_counter() - t0, time.process_time()
        if not torch.isfinite(loss):
            raise SystemExit(f"throughput: {name} diverged (loss {loss.item()})")
        if i >= args.warmup:
            times.append(dt)
            cpu_times.append(c3 - c0)
            for k, a, b in (("forward", c0, marks[0]), ("backward", marks[0], marks[1]), ("optimizer", marks[1], c3)):
                phases[k].append(b - a)
    if args.profile:
        with torch.autograd.profiler.profile() as prof:
            for _ in range(3):
                step([])
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    return model, times, cpu_times, phases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["resnet20", "vgg11", "bert"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="append JSON lines here")
    ap.add_argument("--profile", action="store_true", help="print per-op profiler tables")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'model':<10} {'batch':>6} {'threads':>8} {'samples/s':>12} {'cpu samp/s':>12} {'median ms':>10} "
          f"{'min ms':>10} {'max ms':>10}")
    for name in args.models:
        model, times, cpu_times, phases = bench(name, args)
        med, cpu_med = statistics.median(times), statistics.median(cpu_times)
        print(f"{name:<10} {args.batch:>6} {args.threads:>8} {args.batch / med:>12.1f} {args.batch / cpu_med:>12.1f} "
              f"{med * 1e3:>10.2f} {min(times) * 1e3:>10.2f} {max(times) * 1e3:>10.2f}", flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps({"bench": "train", "impl": "pytorch", "model": name, "batch": args.batch,
                                    "seq_len": args.seq_len, "threads": args.threads, "warmup": args.warmup,
                                    "steps": args.steps, "samples_per_s": args.batch / med,
                                    "cpu_samples_per_s": args.batch / cpu_med, "step_seconds": times,
                                    "step_cpu_seconds": cpu_times,
                                    "phase_cpu_seconds": {k: statistics.median(v) for k, v in phases.items()},
                                    "parameters": gz_models.parameter_count(model)}) + "\n")


if __name__ == "__main__":
    main()
