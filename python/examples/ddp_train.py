"""A plain PyTorch DistributedDataParallel training script whose gradient
communication is picked by a flag: DDP's own all-reduce, torch's fp16 or
PowerSGD hooks, or a gradzip hook (any gradzip plan, or "auto").

    torchrun --nproc-per-node 2 python/examples/ddp_train.py --hook gradzip \\
        --plan '{"name": "thc", "collective": "ps", "thc": {"bits": 4}}'

It trains a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) with
SGD and momentum, evaluates every --eval-every steps on the test split (the
clock pauses meanwhile), stops at --target accuracy or --max-steps, and rank 0
prints one JSON line: the time to the target, steps, final accuracy. With
gradzip, the two lines that matter are marked "gradzip".
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def fashion_mnist(split, root):
    prefix = "train" if split == "train" else "t10k"
    paths = [os.path.join(root, f"{prefix}-{kind}-idx{n}-ubyte.gz") for kind, n in (("images", 3), ("labels", 1))]
    for p in paths:
        if not os.path.exists(p):
            raise SystemExit(f"ddp_train: {p} not found (apt install dataset-fashion-mnist, or --data DIR)")
    x = torch.from_numpy(read_idx(paths[0]).copy()).float().div_(255).sub_(0.2860).div_(0.3530).unsqueeze(1)
    return x, torch.from_numpy(read_idx(paths[1]).astype(np.int64))


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 5 * 5, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


def evaluate(model, x, y, rank, world):
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for i in range(rank * 500, x.shape[0], world * 500):
            correct[0] += (model(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum()
            correct[1] += y[i:i + 500].numel()
    dist.all_reduce(correct)
    model.train()
    return (correct[0] / correct[1]).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hook", choices=["ddp", "torch-fp16", "torch-powersgd", "gradzip"], default="gradzip")
    ap.add_argument("--plan", default="auto", help="gradzip plan: JSON/YAML mapping, a compressor name, or auto")
    ap.add_argument("--powersgd-rank", type=int, default=4)
    ap.add_argument("--powersgd-start", type=int, default=2, help="fp32 steps before PowerSGD compresses")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    torch.manual_seed(args.seed)
    # One bucket for every hook (an explicit bucket_cap_mb drops DDP's 1 MiB first bucket): torch's powerSGD_hook
    # issues its P/Q all-reduces from Gloo callback threads, so with 2+ buckets the ranks' collective order races.
    model = DDP(cnn(), bucket_cap_mb=25)
    state = None
    if args.hook == "torch-fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "torch-powersgd":
        state = powerSGD_hook.PowerSGDState(None, matrix_approximation_rank=args.powersgd_rank,
                                            start_powerSGD_iter=args.powersgd_start, use_error_feedback=True,
                                            warm_start=True, random_seed=args.seed)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif args.hook == "gradzip":
        import gradzip  # gradzip

        plan = args.plan if args.plan.lstrip()[:1] not in "{[" else json.loads(args.plan)
        state, hook = gradzip.ddp_hook(plan, model=model, seed=args.seed)  # gradzip
        model.register_comm_hook(state, hook)  # gradzip
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    x, y = fashion_mnist("train", args.data)
    tx, ty = fashion_mnist("test", args.data)
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(x.shape[0], generator=g)[rank::world]
    per_epoch = order.numel() // args.batch
    train_seconds, reached, acc = 0.0, None, 0.0
    for step in range(args.max_steps):
        t0 = time.perf_counter()
        i = order[(step % per_epoch) * args.batch:(step % per_epoch + 1) * args.batch]
        loss = F.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_seconds += time.perf_counter() - t0
        if (step + 1) % args.eval_every == 0:
            acc = evaluate(model, tx, ty, rank, world)
            if acc >= args.target:
                reached = {"seconds": train_seconds, "steps": step + 1}
                break
    if rank == 0:
        name = args.hook if args.hook != "gradzip" else f"gradzip {args.plan}"
        plans = state.plans() if args.hook == "gradzip" else None
        print(json.dumps({"hook": name, "target": args.target, "reached": reached, "accuracy": acc,
                          "train_seconds": train_seconds, "steps": step + 1, "world_size": world,
                          "gradzip_plans": plans}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
