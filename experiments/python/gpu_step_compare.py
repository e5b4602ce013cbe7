#!/usr/bin/env python3
"""PyTorch eager reference for gradzip's single-GPU step speed (issue 71).

Times N training steps of torchvision's resnet18 on one CUDA device in eager
mode: SGD with momentum, cross-entropy, batch B, after W warm-up steps that
are left out of the time, with torch.cuda.synchronize() before and after the
timed region. gradzip's run of the same model (model resnet18 with
`resnet: {stem: imagenet}`, `data: {dataset: synthetic}`, `run.device: cuda`)
gives the other side of the ratio; the goal is gradzip >= 0.95x this.

Input (--input):
  pinned (default) - one random float batch [B,3,H,W] and its labels in pinned
      host memory, copied to the GPU every step with non_blocking=True. This
      matches gradzip, whose trainer copies each batch from pinned host memory
      with non-blocking copies.
  gpu - the batch generated once on the GPU and reused (no copy per step).
Either way the data is identical every step and no I/O or augmentation runs.

Prints one JSON line {model, batch, steps, seconds_per_step, images_per_second,
...} and appends it to --out when given. --check-model prints the model's
parameter count (no GPU needed), to compare with gradzip's resnet18.

Needs only python3 with torch and torchvision; it does not import gradzip.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import torchvision


def build(args):
    return torchvision.models.resnet18(weights=None, num_classes=args.num_classes)


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--image-size", type=int, nargs=2, default=[224, 224], metavar=("H", "W"))
    p.add_argument("--size", type=int, metavar="S", help="square images: the same as --image-size S S")
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps before the timed ones")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--input", choices=["pinned", "gpu"], default="pinned")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="let cuDNN pick kernels by timing (off by default, as in LibTorch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="append the JSON line to this file")
    p.add_argument("--check-model", action="store_true",
                   help="print the parameter count of resnet18 with --num-classes and exit")
    args = p.parse_args()

    if args.size is not None:
        args.image_size = [args.size, args.size]
    torch.manual_seed(args.seed)
    if args.check_model:
        print(json.dumps({"model": "resnet18", "num_classes": args.num_classes,
                          "parameters": parameter_count(build(args))}))
        return 0
    if not torch.cuda.is_available():
        print("gpu_step_compare.py: no CUDA device is visible (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    if args.steps < 1 or args.warmup < 0 or args.batch < 1:
        print("gpu_step_compare.py: need --steps >= 1, --warmup >= 0, --batch >= 1", file=sys.stderr)
        return 2

    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    dev = torch.device("cuda")
    model = build(args).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    h, w = args.image_size
    x_src = torch.randn(args.batch, 3, h, w)
    y_src = torch.randint(0, args.num_classes, (args.batch,))
    if args.input == "pinned":
        x_src, y_src = x_src.pin_memory(), y_src.pin_memory()
    else:
        x_src, y_src = x_src.to(dev), y_src.to(dev)

    def step():
        x = x_src.to(dev, non_blocking=True)  # a no-op for --input gpu
        y = y_src.to(dev, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start

    result = {
        "model": "resnet18",
        "batch": args.batch,
        "steps": args.steps,
        "seconds_per_step": seconds / args.steps,
        "images_per_second": args.batch * args.steps / seconds,
        "framework": "pytorch-eager",
        "num_classes": args.num_classes,
        "image_size": [h, w],
        "warmup": args.warmup,
        "input": args.input,
        "cudnn_benchmark": args.cudnn_benchmark,
        "parameters": parameter_count(model),
        "final_loss": loss.item(),
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    line = json.dumps(result)
    print(line)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
