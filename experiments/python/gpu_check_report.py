"""Writes experiments/results/gpu_check.md from the logs of scripts/gpu_check.sh.

Reads, from --out-dir: gpu_tests.log (ctest -L gpu), runs/resnet18_gpu/tta.jsonl
(gradzip's cumulative training seconds at each evaluation row),
train_torch.log (the JSON line of gpu_step_compare.py), two_ranks_*.log and
bench.log (`gradzip bench compressors --device cuda`). Time per step excludes
the warm-up steps on both sides: gradzip's is the difference of its
cumulative training time between the row at the warm-up's end and the last
row, divided by the steps between them.
"""
import argparse
import datetime
import json
import os
import re
import socket
import subprocess


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def gradzip_step_seconds(out_dir, warmup):
    rows = [json.loads(l) for l in read(os.path.join(out_dir, "runs/resnet18_gpu/tta.jsonl")).splitlines() if l.strip()]
    rows = [r for r in rows if "train_seconds" in r]
    start = [r for r in rows if r["step"] == warmup]
    if not start or rows[-1]["step"] <= warmup:
        return None
    return (rows[-1]["train_seconds"] - start[0]["train_seconds"]) / (rows[-1]["step"] - warmup)


def torch_step_seconds(out_dir):
    for line in reversed(read(os.path.join(out_dir, "train_torch.log")).splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line).get("seconds_per_step")
            except json.JSONDecodeError:
                pass
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--tests-rc", type=int, required=True)
    ap.add_argument("--two-ranks-done", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    a = ap.parse_args()

    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    tests = read(os.path.join(a.out_dir, "gpu_tests.log"))
    summary = re.findall(r"\d+% tests passed.*", tests)
    gz, pt = gradzip_step_seconds(a.out_dir, a.warmup), torch_step_seconds(a.out_dir)
    ratio = f"{pt / gz:.3f}x" if gz and pt else "n/a"
    print("# GPU check (issue 71)\n")
    print(f"Summary ({datetime.date.today()}, {gpu}, host {socket.gethostname()}): gpu tests "
          f"{'passed' if a.tests_rc == 0 else 'FAILED'}; ResNet-18 step in gradzip at {ratio} the speed of PyTorch "
          f"eager (goal ≥ 0.95x); two ranks on one GPU over Gloo: {a.two_ranks_done} of 2 finished.\n")
    print("Produced by `scripts/gpu_check.sh` (its logs: gpu_check_logs.tar.gz in the run's output).\n")
    print("## Tests labelled gpu\n")
    print("```\n" + ("\n".join(summary) or "(no ctest summary: see gpu_tests.log)") + "\n```\n")
    print(f"## Training step: ResNet-18, synthetic 224x224 images, batch {a.batch}, fp32, one GPU\n")
    print(f"Timed over {a.steps} steps after {a.warmup} warm-up steps.\n")
    print("| | seconds per step | images per second |\n|---|---|---|")
    for name, s in (("gradzip train", gz), ("PyTorch eager (torchvision resnet18)", pt)):
        print(f"| {name} | {s:.4f} | {a.batch / s:.0f} |" if s else f"| {name} | failed | |")
    print(f"\ngradzip / PyTorch speed: {ratio} (goal: ≥ 0.95x)\n")
    print("## Compressors on the GPU against a device-to-device copy\n")
    print("```\n" + (read(os.path.join(a.out_dir, "bench.log")).strip() or "(bench failed: see bench.log)") + "\n```")


if __name__ == "__main__":
    main()
