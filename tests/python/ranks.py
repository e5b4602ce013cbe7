"""Runs a function on N Gloo ranks over loopback, each in its own process, and
returns their results in rank order. A rank that raises fails the call with its
traceback; ranks that have not finished within `timeout` seconds are killed and
the call fails, so a hang becomes a test failure instead of a stuck suite."""

import multiprocessing as mp
import os
import socket
import traceback
from datetime import timedelta


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn, rank, world, port, args, results, pg_timeout):
    try:
        import torch
        import torch.distributed as dist

        torch.manual_seed(1234)
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=pg_timeout))
        try:
            # As bytes: a tensor put on the queue as itself travels by shared
            # memory that vanishes when this process exits.
            import io

            buf = io.BytesIO()
            torch.save(fn(rank, world, *args), buf)
            results.put((rank, True, buf.getvalue()))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 (reported to the parent)
        results.put((rank, False, traceback.format_exc()))


def run_ranks(fn, *args, world=2, timeout=90, pg_timeout=30):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, args, results, pg_timeout)) for r in range(world)]
    for p in procs:
        p.start()
    out, errors = {}, []
    try:
        for _ in range(world):
            rank, ok, value = results.get(timeout=timeout)
            if ok:
                import io

                import torch

                out[rank] = torch.load(io.BytesIO(value), weights_only=False)
            else:
                errors.append(f"rank {rank}:\n{value}")
    except Exception as e:  # queue.Empty: a rank hung or died without a word
        errors.append(f"ranks {sorted(set(range(world)) - set(out))} gave no result within {timeout} s ({e!r})")
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise AssertionError("\n".join(errors))
    return [out[r] for r in range(world)]


os.environ.setdefault("OMP_NUM_THREADS", "1")
