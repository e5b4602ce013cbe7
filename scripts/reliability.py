"""Failure trials for gradzip (issue "Reliability"): repeated, randomised runs
that kill or freeze a rank mid-training, or kill the launcher and resume, and
check what a user must be able to rely on. Not part of CI (it takes minutes);
ctest runs one trial of each kind (tests/launch/LauncherTest.cpp).

    .venv/bin/python scripts/reliability.py [--trials 10] [--ranks 2 3] [--timeout 10]
        [--resume-trials 10] [--rendezvous-trials 3] [--overwrite-trials 3]
        [--gradzip build/gradzip] [--md experiments/results/reliability.md]

Trial kinds:
- launch/SIGKILL: `gradzip launch -n N` trains; after a random delay one random
  rank is SIGKILLed. launch must exit with 128+9 naming that rank, within
  the comm timeout plus a margin, and leave no rank process behind.
- launch/SIGSTOP: the same with a frozen (stopped, not dead) rank: the others
  must notice within the comm timeout and launch must exit non-zero.
- bare/SIGKILL: N ranks started by hand with the torchrun environment (no
  launcher to clean up): every survivor must exit non-zero within the timeout
  with an error naming itself and the failed operation.
- resume: the launcher is SIGKILLed at a random time; `--resume` must end with
  weights byte-identical to an uninterrupted run's (deterministic mode) and
  logs holding each step once (the TTA rows of the uninterrupted run; under
  `auto` no decision-log record of a step after the checkpoint from before
  the resume), for
  fp16@ring and for `compress: auto` whose only candidate is its sparse start's
  plan (TopK 0.1% all-gather with error feedback: the controller's checkpointed
  plan and the residual must both come back; a resume that fell back to
  `initial` would part from the uninterrupted run).
- rendezvous/foreign listener: `python3 -m http.server` listens on MASTER_PORT
  and rank 1 of 2 starts, with the torchrun environment and with SLURM's. It
  must exit 3 within the comm timeout plus a margin, naming the address and
  that another program listens there, leaving no process and no run
  directory behind (before the fix it blocked forever in c10d's ping).
- overwrite: a finished run's config is started again without --resume. It
  must exit 2 naming --resume, --overwrite and run.name, with the first run's
  weights, TTA log and checkpoints unchanged; `--overwrite` must then replace
  them, leaving none of the old checkpoints behind.
Plans alternate over fp32@engine (Gloo's all-reduce), fp16@ring and thc@ps
(gradzip's own point-to-point collectives) and that `auto` (the controller's
broadcasts and probes meet the failure too). Writes a markdown report (--md);
exits non-zero when any trial fails.
"""
import argparse
import datetime
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (label, the YAML `compress` flow map)
FP16_RING = ("fp16@ring", "{name: fp16, collective: ring}")
AUTO_SPARSE = ("auto (TopK 0.1% kept)",
               "{name: auto, families: [topk], ratios: [0.001], collectives: [allgather], sparse_start_above: 0,"
               " warmup_steps: 50, probe: {budget_seconds: 0.3}}")
PLANS = [("fp32@engine", "{name: fp32, collective: engine}"), FP16_RING,
         ("thc@ps", "{name: thc, collective: ps, thc: {bits: 4}}"), AUTO_SPARSE]
RESUME_PLANS = [FP16_RING, AUTO_SPARSE]
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


def write_config(path, out_dir, plan, latency_us, max_steps, deterministic, ckpt_every):
    with open(path, "w") as f:
        f.write(f"run: {{name: r, out_dir: {out_dir}, seed: 3, deterministic: {str(deterministic).lower()}}}\n"
                "model: {name: mlp, mlp: {hidden: [32]}}\n"
                "data: {dataset: fashion_mnist, batch_size: 16}\n"
                "optim: {name: sgd, lr: 0.05, momentum: 0.9}\n"
                f"train: {{max_steps: {max_steps}, eval_every: 200, eval_batches: 1, checkpoint_every: {ckpt_every}}}\n"
                f"comm: {{latency_us: {latency_us}}}\n"
                f"compress: {plan[1]}\n")


def children(pid):
    """Direct child pids of `pid` (the launcher's ranks)."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"RANK="):
                    return int(kv[5:])
    except OSError:
        pass
    return None


def leftovers(cfg):
    """Processes still running `train CFG`."""
    p = subprocess.run(["pgrep", "-f", f"[t]rain {cfg}"], capture_output=True, text=True)
    return [int(x) for x in p.stdout.split()]


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)  # polling an external process's state
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_trial(args, n, sig, plan, tmp):
    cfg = os.path.join(tmp, "c.yaml")
    write_config(cfg, tmp, plan, 2000, 1_000_000, False, 0)
    env = {**os.environ, "GRADZIP_COMM_TIMEOUT_S": str(args.timeout)}
    log = open(os.path.join(tmp, "launch.log"), "w+")
    p = subprocess.Popen([args.gradzip, "launch", "-n", str(n), cfg], stdout=log, stderr=subprocess.STDOUT, env=env)
    ok = wait_for(lambda: len(children(p.pid)) == n, 30)
    time.sleep(random.uniform(1.0, 4.0))  # the random moment of the failure: training is under way by then
    ranks = {rank_of(c): c for c in children(p.pid)}
    victim = random.randrange(n)
    if not ok or victim not in ranks or p.poll() is not None:
        p.kill()
        p.wait()
        log.seek(0)
        tail = " | ".join(log.read().strip().splitlines()[-3:])
        return {"ok": False, "why": f"ranks did not start ({len(ranks)} found; launch says: {tail})", "victim": victim}
    t0 = time.monotonic()
    os.kill(ranks[victim], sig)
    try:
        code = p.wait(timeout=args.timeout + 30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        code = None
    elapsed = time.monotonic() - t0
    if sig == signal.SIGSTOP:  # a frozen rank launch already killed; make sure
        try:
            os.kill(ranks[victim], signal.SIGKILL)
        except ProcessLookupError:
            pass
    left = leftovers(cfg) if wait_for(lambda: not leftovers(cfg), 5) is False else []
    log.seek(0)
    text = log.read()
    why = []
    if code is None:
        why.append("launch hung")
    elif code == 0:
        why.append("launch exited 0")
    if sig == signal.SIGKILL:
        if code is not None and code != 128 + 9:
            why.append(f"exit {code}, expected 137")
        if f"rank {victim} failed with signal 9" not in text:
            why.append("victim not named")
    if elapsed > args.timeout + 15:
        why.append(f"took {elapsed:.1f} s")
    if left:
        why.append(f"left processes {left}")
    return {"ok": not why, "why": "; ".join(why), "victim": victim, "exit": code, "seconds": elapsed}


def bare_trial(args, n, plan, tmp):
    cfg = os.path.join(tmp, "c.yaml")
    write_config(cfg, tmp, plan, 2000, 1_000_000, False, 0)
    port = free_port()
    procs, logs = [], []
    for r in range(n):
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GRADZIP_COMM_TIMEOUT_S": str(args.timeout)}
        logs.append(open(os.path.join(tmp, f"rank{r}.log"), "w+"))
        procs.append(subprocess.Popen([args.gradzip, "train", cfg], stdout=logs[-1], stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True))
    time.sleep(random.uniform(2.0, 5.0))  # startup + a random amount of training
    victim = random.randrange(n)
    t0 = time.monotonic()
    procs[victim].kill()
    why, slowest = [], 0.0
    for r, p in enumerate(procs):
        if r == victim:
            p.wait()
            continue
        try:
            code = p.wait(timeout=args.timeout + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            why.append(f"rank {r} hung")
            continue
        slowest = max(slowest, time.monotonic() - t0)
        logs[r].seek(0)
        text = logs[r].read()
        if code == 0:
            why.append(f"rank {r} exited 0")
        if f"rank {r}: " not in text or " failed" not in text:
            why.append(f"rank {r}'s error names neither itself nor the operation: {text.strip().splitlines()[-1:]}")
    if slowest > args.timeout + 15:
        why.append(f"took {slowest:.1f} s")
    return {"ok": not why, "why": "; ".join(why), "victim": victim, "seconds": slowest}


def wait_listening(port, timeout):
    def up():
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex(("127.0.0.1", port)) == 0
    return wait_for(up, timeout)


def rendezvous_trial(args, launcher, tmp):
    """Rank 1 of 2 against a web server on MASTER_PORT."""
    cfg = os.path.join(tmp, "c.yaml")
    write_config(cfg, tmp, FP16_RING, 0, 10, False, 0)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_listening(port, 20):
            return {"ok": False, "why": "http.server did not start", "seconds": 0}
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "GRADZIP_COMM_TIMEOUT_S": str(args.timeout)}
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"):
            env.pop(k, None)
        if launcher == "torchrun":
            env.update({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
        else:
            env.update({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1"})
        t0 = time.monotonic()
        p = subprocess.Popen([args.gradzip, "train", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=args.timeout + 30)
            code = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            code = None
        elapsed = time.monotonic() - t0
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    why = []
    if code is None:
        why.append("rank 1 hung")
    elif code != 3:
        why.append(f"exit {code}, expected 3")
    if f"127.0.0.1:{port} accepted the connection but did not answer" not in out or "another program" not in out:
        why.append(f"the message names neither the address nor the cause: {out.strip().splitlines()[-1:]}")
    if elapsed > args.timeout + 15:
        why.append(f"took {elapsed:.1f} s")
    if leftovers(cfg):
        why.append("processes left behind")
    if os.path.exists(os.path.join(tmp, "r")):
        why.append("a run directory was created")
    return {"ok": not why, "why": "; ".join(why), "seconds": elapsed, "exit": code}


def overwrite_trial(args, tmp):
    """A finished run started again: refused without a flag, replaced with --overwrite."""
    cfg = os.path.join(tmp, "c.yaml")
    write_config(cfg, tmp, FP16_RING, 0, 40, True, 10)
    run_dir = os.path.join(tmp, "r")
    why = []
    first = subprocess.run([args.gradzip, "launch", "-n", "2", cfg], capture_output=True, text=True)
    if first.returncode != 0:
        return {"ok": False, "why": f"first run exited {first.returncode}", "seconds": 0}
    files = ["model.pt", "tta.jsonl", "rank0/checkpoint.pt", "rank1/checkpoint.pt", "rank0/checkpoint.prev.pt"]
    before = {f: sha(os.path.join(run_dir, f)) for f in files}
    t0 = time.monotonic()
    again = subprocess.run([args.gradzip, "launch", "-n", "2", cfg], capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    text = again.stdout + again.stderr
    if again.returncode != 2:
        why.append(f"a second run exited {again.returncode}, expected 2")
    if not all(w in text for w in ("holds an earlier run's results", "--resume", "--overwrite", "run.name")):
        why.append(f"the refusal names neither the directory nor the ways on: {text.strip().splitlines()[-1:]}")
    if {f: sha(os.path.join(run_dir, f)) for f in files} != before:
        why.append("the refused run changed the first run's results")
    over = subprocess.run([args.gradzip, "launch", "-n", "2", cfg, "--overwrite", "--set", "train.max_steps=10"],
                          capture_output=True, text=True)
    if over.returncode != 0:
        why.append(f"--overwrite exited {over.returncode}")
    elif os.path.exists(os.path.join(run_dir, "rank0", "checkpoint.prev.pt")) or \
            os.path.exists(os.path.join(run_dir, "rank1", "checkpoint.prev.pt")):
        why.append("--overwrite left the old run's checkpoints behind")
    else:
        resumed = subprocess.run([args.gradzip, "launch", "-n", "2", cfg, "--set", "train.max_steps=10", "--resume"],
                                 capture_output=True, text=True)
        if resumed.returncode != 0 or "at step 10" not in resumed.stdout + resumed.stderr:
            why.append(f"--resume after --overwrite exited {resumed.returncode} without resuming at step 10")
    return {"ok": not why, "why": "; ".join(why), "seconds": elapsed, "exit": again.returncode}


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def log_problems(ref, run, resumed_at):
    """What the resumed run's logs hold that the uninterrupted run's do not:
    TTA rows of other steps (one logged twice, or missing), or under
    `compress: auto` a decision-log record, from before the resume, of a step
    after the checkpoint it resumed from (the resumed run trains those steps
    again and logs them anew)."""
    def records(path):
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    why = []
    if [r["step"] for r in records(os.path.join(run, "r", "tta.jsonl"))] != \
            [r["step"] for r in records(os.path.join(ref, "r", "tta.jsonl"))]:
        why.append("the TTA log's steps differ from the uninterrupted run's")
    decisions = os.path.join(run, "r", "decisions.jsonl")
    if not resumed_at.isdigit():
        why.append("the resumed run logged no 'resumed from ... at step N' line")
    elif os.path.exists(decisions):
        recs = records(decisions)
        resumes = [i for i, r in enumerate(recs) if r.get("event") == "resume"]
        if not resumes:
            why.append("decisions.jsonl has no resume record")
        else:
            late = [r for r in recs[:resumes[-1]] if r.get("step", -1) > int(resumed_at)]
            if late:
                why.append(f"decisions.jsonl keeps {len(late)} records of steps after the checkpoint")
    return why


def resume_trials(args, tmp_root, plan):
    ref = os.path.join(tmp_root, "ref")
    os.makedirs(ref)
    cfg = os.path.join(ref, "c.yaml")
    write_config(cfg, ref, plan, 3000, 400, True, 25)
    t0 = time.monotonic()
    ref_run = subprocess.run([args.gradzip, "launch", "-n", "2", cfg], capture_output=True, text=True)
    if ref_run.returncode != 0:
        sys.exit(f"reliability: the uninterrupted reference run exited {ref_run.returncode}: "
                 f"{(ref_run.stdout + ref_run.stderr).strip().splitlines()[-3:]}")
    duration = time.monotonic() - t0
    expected = sha(os.path.join(ref, "r", "model.pt"))
    rows = []
    for t in range(args.resume_trials):
        d = os.path.join(tmp_root, f"resume{t}")
        os.makedirs(d)
        cfg = os.path.join(d, "c.yaml")
        write_config(cfg, d, plan, 3000, 400, True, 25)
        p = subprocess.Popen([args.gradzip, "launch", "-n", "2", cfg], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        # Kill after a random number of rank 0's checkpoints (of 16) plus a random
        # part of the next interval, so the kill lands mid-run whatever the load.
        t0 = time.monotonic()
        writes, last = random.randint(1, 13), None
        sum_file = os.path.join(d, "r", "rank0", "checkpoint.pt.sum")
        while writes > 0 and p.poll() is None:
            m = os.stat(sum_file).st_mtime_ns if os.path.exists(sum_file) else None
            if m is not None and m != last:
                writes -= 1
                last = m
            time.sleep(0.01)  # polling another process's file
        time.sleep(random.uniform(0.0, 0.6) * duration / 16)
        delay = time.monotonic() - t0
        p.kill()
        p.wait()
        finished = os.path.exists(os.path.join(d, "r", "model.pt"))
        wait_for(lambda: not leftovers(cfg), 10)
        left = leftovers(cfg)
        r = subprocess.run([args.gradzip, "launch", "-n", "2", cfg, "--resume"], capture_output=True, text=True)
        resumed = [ln for ln in r.stdout.splitlines() + r.stderr.splitlines() if "resumed from" in ln]
        step = resumed[0].split(" at step ")[1].split()[0] if resumed else "-"
        why = []
        if finished:
            why.append("the run finished before the kill")
        if left:
            why.append(f"ranks outlived the launcher: {left}")
        if r.returncode != 0:
            why.append(f"resume exited {r.returncode}")
        elif sha(os.path.join(d, "r", "model.pt")) != expected:
            why.append("final weights differ from the uninterrupted run")
        else:
            why += log_problems(ref, d, step)
        rows.append({"ok": not why, "why": "; ".join(why), "kill_s": delay, "resumed_at": step})
        print(f"resume {plan[0]} trial {t + 1}: killed after {delay:.1f} s, resumed at step {step}: "
              f"{'ok' if not why else 'FAIL ' + '; '.join(why)}", flush=True)
    return duration, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradzip", default=os.path.join(ROOT, "build", "gradzip"))
    ap.add_argument("--trials", type=int, default=10, help="trials per (kind, world size)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--timeout", type=int, default=10, help="comm timeout (s) given to the ranks")
    ap.add_argument("--resume-trials", type=int, default=10)
    ap.add_argument("--rendezvous-trials", type=int, default=3, help="per launcher environment (torchrun, SLURM)")
    ap.add_argument("--overwrite-trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--md", default=os.path.join(ROOT, "experiments", "results", "reliability.md"))
    args = ap.parse_args()
    if not os.access(args.gradzip, os.X_OK):
        sys.exit(f"reliability: {args.gradzip} is not an executable; run `bash scripts/setup.sh build` first")
    if not os.path.exists(FMNIST):
        sys.exit(f"reliability: {FMNIST} is missing (Debian package dataset-fashion-mnist)")
    random.seed(args.seed)
    table = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="gradzip-reliability-") as tmp_root:
        k = 0
        for kind in ("launch/SIGKILL", "launch/SIGSTOP", "bare/SIGKILL"):
            for n in args.ranks:
                for t in range(args.trials):
                    plan = PLANS[k % len(PLANS)]
                    k += 1
                    tmp = os.path.join(tmp_root, f"t{k}")
                    os.makedirs(tmp)
                    if kind.startswith("launch"):
                        sig = signal.SIGKILL if kind.endswith("KILL") else signal.SIGSTOP
                        res = launch_trial(args, n, sig, plan, tmp)
                    else:
                        res = bare_trial(args, n, plan, tmp)
                    failures += not res["ok"]
                    table.append((kind, n, plan[0], res))
                    print(f"{kind} n={n} {plan[0]} trial {t + 1}: victim rank {res['victim']}, "
                          f"{res.get('seconds', 0):.1f} s: {'ok' if res['ok'] else 'FAIL ' + res['why']}", flush=True)
        for launcher in ("torchrun", "SLURM"):
            for t in range(args.rendezvous_trials):
                k += 1
                tmp = os.path.join(tmp_root, f"t{k}")
                os.makedirs(tmp)
                res = rendezvous_trial(args, launcher, tmp)
                failures += not res["ok"]
                table.append(("rendezvous/foreign listener", f"1 of 2 ({launcher})", "-", res))
                print(f"rendezvous {launcher} trial {t + 1}: {res['seconds']:.1f} s: "
                      f"{'ok' if res['ok'] else 'FAIL ' + res['why']}", flush=True)
        for t in range(args.overwrite_trials):
            k += 1
            tmp = os.path.join(tmp_root, f"t{k}")
            os.makedirs(tmp)
            res = overwrite_trial(args, tmp)
            failures += not res["ok"]
            table.append(("overwrite", 2, FP16_RING[0], res))
            print(f"overwrite trial {t + 1}: {res['seconds']:.1f} s: {'ok' if res['ok'] else 'FAIL ' + res['why']}",
                  flush=True)
        resumes = {}  # label -> (uninterrupted seconds, trials)
        for i, plan in enumerate(RESUME_PLANS if args.resume_trials > 0 else []):
            resumes[plan[0]] = resume_trials(args, os.path.join(tmp_root, f"resume_{i}"), plan)
            failures += sum(not r["ok"] for r in resumes[plan[0]][1])

    lines = ["| kind | ranks | plan | trials | passed | exit after the failure: median s (max) |", "|---|---|---|---|---|---|"]
    groups = {}
    for kind, n, plan, res in table:
        groups.setdefault((kind, n, plan), []).append(res)
    for (kind, n, plan), rs in groups.items():
        secs = sorted(r.get("seconds", 0) for r in rs)
        lines.append(f"| {kind} | {n} | {plan} | {len(rs)} | {sum(r['ok'] for r in rs)} | "
                     f"{secs[len(secs) // 2]:.1f} ({secs[-1]:.1f}) |")
    fails = [f"- {kind} n={n} {plan}: {res['why']}" for kind, n, plan, res in table if not res["ok"]]
    fails += [f"- resume {label}: {r['why']}" for label, (_, rs) in resumes.items() for r in rs if not r["ok"]]
    resume_lines = [f"- {label}: {sum(r['ok'] for r in rs)} of {len(rs)} resumed runs ended with weights "
                    f"byte-identical to the uninterrupted run's ({duration:.1f} s) and logs holding each step "
                    f"once; resumed at steps "
                    f"{', '.join(r['resumed_at'] for r in rs)}" for label, (duration, rs) in resumes.items()]
    resume_text = ("2 ranks, 400 steps, a checkpoint every 25 steps; the launcher SIGKILLed after a random number "
                   "(1-13) of rank 0's 16 checkpoints plus part of the next interval, then `--resume`:\n\n"
                   + "\n".join(resume_lines)) if resumes else "not run"
    cmd = " ".join(["python", os.path.relpath(__file__, ROOT), *sys.argv[1:]])
    md = f"""# Failure trials

- date: {datetime.datetime.now().isoformat(timespec="seconds")}; command: `{cmd}`
- comm timeout {args.timeout} s (GRADZIP_COMM_TIMEOUT_S); model: MLP on Fashion-MNIST, 2 ms injected latency per
  message so a step takes long enough to be interrupted anywhere; failure at a random time 1-5 s after start
- pass means: launch/SIGKILL exits 137 naming the killed rank; launch/SIGSTOP exits non-zero; bare/SIGKILL every
  survivor exits non-zero naming itself and the failed operation; all within the timeout + 15 s; no rank process
  left behind
- rendezvous/foreign listener: `python3 -m http.server` on MASTER_PORT, rank 1 of 2 started alone with the torchrun
  or the SLURM environment; pass means exit 3 within the timeout + 15 s naming the address and that another
  program listens there, no process or run directory left behind (the column gives the time to that exit)
- overwrite: a finished 2-rank run (40 steps) started again without `--resume`; pass means exit 2 naming
  `--resume`, `--overwrite` and `run.name`, the first run's weights, TTA log and checkpoints unchanged, then
  `--overwrite` (10 steps) leaves no old checkpoint and `--resume` of it resumes at step 10 (the column gives
  the time to the refusal)

{chr(10).join(lines)}

Resume: {resume_text}

{"Failures:" + chr(10) + chr(10).join(fails) if fails else "No failures."}
"""
    os.makedirs(os.path.dirname(args.md), exist_ok=True)
    with open(args.md, "w") as f:
        f.write(md)
    print("\n" + md + f"\nwritten: {args.md}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
