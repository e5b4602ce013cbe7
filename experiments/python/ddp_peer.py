"""The PyTorch DDP peer arm of `gradzip compare`: trains a gradzip config with
torch.nn.parallel.DistributedDataParallel (Gloo, CPU) and a stock comm hook,
and logs time-to-accuracy rows in gradzip's format (trainer/TtaLog.cpp).

    torchrun --standalone --nproc-per-node 2 ddp_peer.py --config ARM.yaml \
        --hook none|fp16|powersgd [--powersgd-rank 4] --out RUN_DIR

Mirrors trainer/Trainer.cpp: same model (gz_models), data semantics (fmnist),
optimizer, LR schedule (trainer/LrSchedule.cpp, lr scaled with the world size
as optim.scale_lr_with_world), evaluation (top-1/top-5 on the test split,
train.eval_batches per rank, counts all-reduced, training clock paused), and
threads (run.threads, else cores / local ranks). DDP's gradient buckets are
comm.bucket_mb, like gradzip's. BatchNorm buffers are not re-broadcast every
step (broadcast_buffers=False), as in gradzip, which syncs them only at start.
Hooks: none = DDP's built-in fp32 all-reduce (plan "ddp-fp32"); fp16 =
default_hooks.fp16_compress_hook ("ddp-fp16"); powersgd = powerSGD_hook with
rank R, error feedback and warm start ("ddp-powersgd-rR"). PowerSGD runs plain
fp32 all-reduce for its first --powersgd-start steps (default 2, the smallest
value torch allows with error feedback / warm start).
Rows carry loss_spikes and residual_norm as 0 and vnmse as null (the peer does not track them).
When GRADZIP_PROGRESS_FILE is set (an emulated launch with a rate schedule in
epochs), rank 0 writes the fractional epoch (step / steps per epoch) there
after each step, at most every 0.25 s, as launch/ProgressFile.h does.
Supported: data.dataset fashion_mnist with resnet*/vgg*/mlp; anything else
fails with a message. Resume, nan_policy and checksums are not implemented.
"""
import argparse
import datetime
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmnist  # noqa: E402
import gz_config  # noqa: E402
import gz_models  # noqa: E402

METRIC_COLUMNS = ["accuracy", "top5", "eval_loss", "mlm_accuracy", "perplexity"]  # trainer/TtaLog.cpp
CSV_HEADER = ("train_seconds,step,epoch,samples,loss," + ",".join(METRIC_COLUMNS) +
              ",lr,plan,bytes,saturated,loss_spikes,residual_norm,vnmse,data_wait,compute,encode,communicate,decode,exposed,"
              "optimizer,step_time")


def lr_at(step, sched, base, total, per_epoch):
    """trainer/LrSchedule.cpp: linear warm-up, then constant, step decay or cosine to min_lr."""
    total, per_epoch, warm = max(1, total), max(1, per_epoch), sched["warmup_steps"]
    if warm > 0 and step < warm:
        return base * (step + 1) / warm
    if sched["name"] == "step":
        return base * sched["gamma"] ** math.floor(step / per_epoch / sched["step_epochs"])
    if sched["name"] == "cosine":
        t = min(max((step - warm) / max(1, total - warm), 0.0), 1.0)
        return sched["min_lr"] + 0.5 * (base - sched["min_lr"]) * (1.0 + math.cos(math.pi * t))
    return base


def scaled_lr(optim, world):
    return {"linear": optim["lr"] * world, "sqrt": optim["lr"] * math.sqrt(world)}.get(
        optim["scale_lr_with_world"], optim["lr"])


def make_optimizer(params, o, lr):
    if o["name"] == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                 weight_decay=o["weight_decay"])
    if o["name"] == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=o["momentum"], nesterov=o["nesterov"],
                               weight_decay=o["weight_decay"])
    raise SystemExit(f"ddp_peer: optim.name '{o['name']}' is not supported (sgd, adamw)")


def resolve_data(data):
    if data["dataset"] != "fashion_mnist":
        raise SystemExit(f"ddp_peer: data.dataset '{data['dataset']}' is not supported yet (only fashion_mnist)")
    data.setdefault("path", fmnist.DEFAULT_PATH)
    aug = data.get("augment") or {}
    norm = data.get("normalise") or {}
    data["augment"] = {"crop_padding": aug.get("crop_padding", 0), "flip": aug.get("flip", False)}
    data["normalise"] = {"mean": norm.get("mean", [fmnist.DEFAULT_MEAN]), "std": norm.get("std", [fmnist.DEFAULT_STD])}
    return data


def build_model(m):
    name = m["name"]
    if not (name.startswith("resnet") or name.startswith("vgg") or name == "mlp"):
        raise SystemExit(f"ddp_peer: model '{name}' is not supported on fashion_mnist (resnet*, vgg*, mlp)")
    if name == "mlp":  # as Trainer::setup: input size from the data (1x28x28)
        return gz_models.make_model("mlp", num_classes=m.get("num_classes", 10), mlp=dict(m.get("mlp") or {},
                                                                                        input_size=784))
    return gz_models.make_model(name, in_channels=m.get("in_channels", 1), num_classes=m.get("num_classes", 10),
                                resnet=m.get("resnet"))


class ByteCounter:
    """Payload bytes this rank all-reduces per step, as gradzip counts them
    (the tensor bytes handed to the engine's all-reduce)."""

    def __init__(self, model, hook):
        numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.per_step = {"none": 4 * numel, "fp16": 2 * numel}.get(hook, 0)
        self.total = 0

    def powersgd_hook(self, state, bucket):
        """powerSGD_hook, counting the bytes of its all-reduces (P and Q, plus uncompressed tensors)."""
        if state.iter < state.start_powerSGD_iter:
            self.total += 4 * bucket.buffer().numel()
        else:
            for g in bucket.gradients():
                n, m = g.shape[0], g.numel() // max(1, g.shape[0])
                r = min(n, m, state.matrix_approximation_rank)
                compress, full, small = powerSGD_hook._should_compress(n, m, r, state.min_compression_rate)
                self.total += 4 * (small if compress else full)
        return powerSGD_hook.powerSGD_hook(state, bucket)


def evaluate(model, loader, max_batches):
    """Classification metrics over this rank's shard, summed over ranks (trainer/Evaluator.cpp)."""
    was_training = model.training
    model.eval()
    sums = torch.zeros(4, dtype=torch.float64)  # loss * n, top-1 hits, top-5 hits, n
    with torch.no_grad():
        for i, (x, y) in enumerate(loader.epoch(0)):
            if max_batches > 0 and i >= max_batches:
                break
            logits = model(x)
            top = logits.topk(min(5, logits.shape[1]), 1).indices.eq(y.unsqueeze(1))
            sums += torch.tensor([F.cross_entropy(logits, y).item() * len(y), top[:, 0].sum().item(),
                                  top.any(1).sum().item(), len(y)], dtype=torch.float64)
    dist.all_reduce(sums)
    model.train(was_training)
    n = max(1.0, sums[3].item())
    return {"accuracy": sums[1].item() / n, "eval_loss": sums[0].item() / n, "top5": sums[2].item() / n}


class ProgressFile:
    """launch/ProgressFile.h's writer: the fractional epoch as one line ("1.250000\n"),
    written to <path>.tmp and renamed over <path> (a reader never sees a torn
    line), at most every `min_interval` seconds (the first update always
    writes; flush() writes the last value). An empty path does nothing. A
    failed write warns once and stops the writer: the schedule loses
    precision, the run goes on (Trainer::updateProgressFile)."""

    ENV = "GRADZIP_PROGRESS_FILE"

    def __init__(self, path, min_interval=0.25):
        self.path, self.min_interval = path or "", min_interval
        self.last_write, self.value, self.pending = None, 0.0, False

    def update(self, epoch):
        if not self.path:
            return
        self.value, self.pending = epoch, True
        now = time.monotonic()
        if self.last_write is not None and now - self.last_write < self.min_interval:
            return
        self.last_write = now
        self.flush()

    def flush(self):
        if not self.path or not self.pending:
            return
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(f"{self.value:.6f}\n")
            os.replace(tmp, self.path)
        except OSError as e:
            print(f"ddp_peer: progress file {self.path}: {e}; the network schedule in epochs no longer "
                  "follows this run", file=sys.stderr, flush=True)
            self.path = ""
        self.pending = False


class TtaLog:
    """tta.jsonl + tta.csv in trainer/TtaLog.cpp's row format."""

    def __init__(self, out):
        os.makedirs(out, exist_ok=True)
        self.jsonl = open(os.path.join(out, "tta.jsonl"), "w")
        self.csv = open(os.path.join(out, "tta.csv"), "w")
        self.csv.write(CSV_HEADER + "\n")

    def write(self, row):
        self.jsonl.write(json.dumps(row) + "\n")
        self.jsonl.flush()
        g = lambda v: f"{v:.6g}"  # C++ ostream default: %g, 6 significant digits
        b, m = row["breakdown"], row["metrics"]
        cells = [g(row["train_seconds"]), str(row["step"]), g(row["epoch"]), str(row["samples"]), g(row["loss"])]
        cells += [g(m[k]) if k in m else "" for k in METRIC_COLUMNS]
        cells += [g(row["lr"]), f'"{row["plan"]}"', str(row["bytes"]), str(row["saturated"]), str(row["loss_spikes"]),
                  g(row["residual_norm"]), ""]
        cells += [g(b[k]) for k in ("data_wait", "compute", "encode", "communicate", "decode", "exposed",
                                    "optimizer", "step")]
        self.csv.write(",".join(cells) + "\n")
        self.csv.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="gradzip train config (YAML)")
    ap.add_argument("--hook", choices=["none", "fp16", "powersgd"], default="none")
    ap.add_argument("--powersgd-rank", type=int, default=4)
    ap.add_argument("--powersgd-start", type=int, default=2, help="fp32 steps before PowerSGD starts (>= 2)")
    ap.add_argument("--out", required=True, help="run directory for tta.jsonl / tta.csv")
    args = ap.parse_args()

    cfg = gz_config.load_train_config(args.config)
    data = resolve_data(cfg["data"])
    run, optim, sched, train, comm = cfg["run"], cfg["optim"], cfg["schedule"], cfg["train"], cfg["comm"]

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=comm["timeout_s"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    threads = 1 if run["deterministic"] else (run["threads"] or max(1, (os.cpu_count() or 1) // local))
    torch.set_num_threads(threads)
    torch.manual_seed(run["seed"])

    model = build_model(cfg["model"])
    counter = ByteCounter(model, args.hook)
    # DDP broadcasts rank 0's parameters at construction, like Trainer::setup.
    ddp = DDP(model, bucket_cap_mb=comm["bucket_mb"], broadcast_buffers=False)
    if args.hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        plan = "ddp-fp16"
    elif args.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(None, matrix_approximation_rank=args.powersgd_rank,
                                            start_powerSGD_iter=args.powersgd_start, use_error_feedback=True,
                                            warm_start=True, random_seed=run["seed"])
        ddp.register_comm_hook(state, counter.powersgd_hook)
        plan = f"ddp-powersgd-r{args.powersgd_rank}"
    else:
        plan = "ddp-fp32"

    train_loader, test_loader = fmnist.loaders(data, rank, world, run["seed"])
    per_epoch = train_loader.steps_per_epoch
    total = math.ceil(train["epochs"] * per_epoch) if train["epochs"] > 0 else 0
    if train["max_steps"] > 0:
        total = min(total, train["max_steps"]) if total > 0 else train["max_steps"]
    base_lr = scaled_lr(optim, world)
    opt = make_optimizer(ddp.parameters(), optim, base_lr)
    eval_every = train["eval_every"] or per_epoch
    log = TtaLog(args.out) if rank == 0 else None
    progress = ProgressFile(os.environ.get(ProgressFile.ENV, "") if rank == 0 else "")
    if rank == 0:
        with open(os.path.join(args.out, "ddp_peer.json"), "w") as f:
            json.dump({"config": cfg, "hook": args.hook, "plan": plan, "world_size": world, "threads": threads,
                       "total_steps": total, "steps_per_epoch": per_epoch, "torch": torch.__version__}, f, indent=1)
        print(f"ddp_peer: {cfg['model']['name']} {plan} world {world} threads {threads} steps {total} "
              f"({gz_models.parameter_count(model)} parameters)", flush=True)

    keys = ("data_wait", "compute", "encode", "communicate", "decode", "exposed", "optimizer", "step")
    acc, loss_sum, acc_steps = dict.fromkeys(keys, 0.0), 0.0, 0
    step, train_seconds, samples, best, bad_evals = 0, 0.0, 0, -math.inf, 0
    epoch, batches = 0, iter(train_loader.epoch(0))
    ddp.train()
    while step < total:
        t_step = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            epoch += 1
            batches = iter(train_loader.epoch(epoch))
            continue
        data_wait = time.perf_counter() - t_step
        for group in opt.param_groups:
            group["lr"] = lr_at(step, sched, base_lr, total, per_epoch)
        opt.zero_grad()
        t_compute = time.perf_counter()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()  # DDP all-reduces buckets during backward and waits for them before returning
        compute = time.perf_counter() - t_compute
        t_opt = time.perf_counter()
        if train["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), train["clip_grad_norm"])
        opt.step()
        opt_time = time.perf_counter() - t_opt
        loss_value = loss.item()
        step += 1
        samples += len(y) * world
        counter.total += counter.per_step
        step_time = time.perf_counter() - t_step
        train_seconds += step_time
        progress.update(step / per_epoch)  # outside the step clock, like the trainer's
        # compute = forward + backward wall time, which includes DDP's overlapped all-reduce
        # and whatever of it is not hidden; DDP does not expose the split, so communicate,
        # encode, decode and exposed are 0 (unknown), not measured zeros.
        for k, v in (("data_wait", data_wait), ("compute", compute), ("optimizer", opt_time), ("step", step_time)):
            acc[k] += v
        loss_sum += loss_value if math.isfinite(loss_value) else 0.0
        acc_steps += 1
        if step % eval_every == 0 or step == total:
            metrics = evaluate(model, test_loader, train["eval_batches"])
            if log:
                log.write({"train_seconds": train_seconds, "step": step, "epoch": step / per_epoch,
                           "samples": samples, "loss": loss_sum / acc_steps, "metrics": metrics,
                           "lr": lr_at(max(0, step - 1), sched, base_lr, total, per_epoch), "plan": plan,
                           "bytes": counter.total, "saturated": 0, "loss_spikes": 0, "residual_norm": 0.0, "vnmse": None,
                           "breakdown": {k: acc[k] / acc_steps for k in keys}})
                print(f"step {step}/{total} {train_seconds:.1f}s loss {loss_sum / acc_steps:.4f} "
                      f"acc {metrics['accuracy']:.4f}", flush=True)
            acc, loss_sum, acc_steps = dict.fromkeys(keys, 0.0), 0.0, 0
            if train["patience"] > 0:  # early stopping on accuracy, as Trainer::evaluateAndLog
                if metrics["accuracy"] > best:
                    best, bad_evals = metrics["accuracy"], 0
                else:
                    bad_evals += 1
                    if bad_evals >= train["patience"]:
                        break
    progress.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # The run is complete and every file it writes is flushed. Leave without
    # the interpreter's finalisation: there, after a clean
    # destroy_process_group(), a Gloo thread of PyTorch's can still abort the
    # process ("terminate called without an active exception", rank 1 of a
    # ddp_fp16 arm in a CI run; pytorch/pytorch#179291 describes the
    # teardown).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
