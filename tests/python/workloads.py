"""Small DDP workloads the hook tests run on every rank: a seeded MLP on a
seeded synthetic classification task (four Gaussian blobs in 32 dimensions),
split across ranks, trained with plain SGD."""

import io

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import gradzip

DIM, CLASSES = 32, 4


def data(rank, world, n=512, seed=7):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, DIM, generator=g) * 1.5
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = centres[y] + torch.randn(n, DIM, generator=g)
    return x[rank::world], y[rank::world]


def model(seed=3, bias=True):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(DIM, 64, bias=bias), torch.nn.ReLU(), torch.nn.Linear(64, 64, bias=bias),
                               torch.nn.ReLU(), torch.nn.Linear(64, CLASSES, bias=bias))


def ddp(m, bucket_cap_mb=0.005):
    # Small buckets by default: several per step, so ordering and overlap are
    # exercised.
    return DDP(m, bucket_cap_mb=bucket_cap_mb)


def train(net, opt, x, y, steps, batch=32, first=0, state=None):
    for s in range(first, first + steps):
        i = (s * batch) % x.shape[0]
        loss = torch.nn.functional.cross_entropy(net(x[i:i + batch]), y[i:i + batch])
        opt.zero_grad()
        loss.backward()
        if state is None or not state.last_step_skipped:
            opt.step()
    return loss.item()


def accuracy(net, rank, world):
    x, y = data(rank, world, n=2048, seed=7)
    with torch.no_grad():
        return (net(x).argmax(1) == y).float().mean().item()


def params(net):
    return [p.detach().clone() for p in net.parameters()]


def with_hook(plan, rank, world, steps, lr=0.1, bucket_cap_mb=0.005, bias=True, **opts):
    net = ddp(model(bias=bias), bucket_cap_mb)
    state, hook = gradzip.ddp_hook(plan, model=net, **opts)
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    x, y = data(rank, world)
    loss = train(net, opt, x, y, steps)
    return net, state, loss


def same_as_torch_fp16(rank, world, steps):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    ours, _, _ = with_hook({"name": "fp16"}, rank, world, steps)
    theirs = ddp(model())
    theirs.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    x, y = data(rank, world)
    train(theirs, opt, x, y, steps)
    return params(ours), params(theirs)


def same_as_ddp_default(rank, world, steps):
    ours, _, _ = with_hook({"name": "fp32"}, rank, world, steps)
    theirs = ddp(model())
    opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    x, y = data(rank, world)
    train(theirs, opt, x, y, steps)
    return params(ours), params(theirs)


def trains_to(rank, world, plan, steps):
    net, state, loss = with_hook(plan, rank, world, steps)
    return accuracy(net.module, rank, world), state.plans(), state.step


def resume(rank, world, plan, steps, at):
    """Uninterrupted vs saved at `at` (torch.save) and resumed in fresh objects.
    DDP's first step in a process runs its initial buckets (here the tensors
    in registration order) and then rebuilds them in the order the gradients
    arrived (the reverse): the resumed hook moves the residual over by
    parameter name. One bucket of bias-free layers, whose sizes are multiples
    of TopKC's chunk, makes that step's chunks the same as in the uninterrupted
    run (docs/pytorch.md, Checkpoints)."""
    whole, _, _ = with_hook(plan, rank, world, steps, bucket_cap_mb=25, bias=False)

    net = ddp(model(bias=False), 25)
    state, hook = gradzip.ddp_hook(plan, model=net)
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = data(rank, world)
    train(net, opt, x, y, at)
    buf = io.BytesIO()
    torch.save({"model": net.module.state_dict(), "opt": opt.state_dict(), "hook": state.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=False)

    net2 = ddp(model(seed=99, bias=False), 25)  # other initial weights: the checkpoint must overwrite them
    net2.module.load_state_dict(saved["model"])
    state2, hook2 = gradzip.ddp_hook(plan, model=net2)
    state2.load_state_dict(saved["hook"])
    net2.register_comm_hook(state2, hook2)
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.1)
    opt2.load_state_dict(saved["opt"])
    train(net2, opt2, x, y, steps - at, first=at)
    return params(whole), params(net2), state2.step


def plan_per_rank(rank, world):
    plan = {"name": "fp16"} if rank == 0 else {"name": "topkc", "topkc": {"bits": 2}}
    try:
        with_hook(plan, rank, world, 2)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None, ""


def nan_gradient(rank, world, policy, bad_steps):
    net = ddp(model())
    state, hook = gradzip.ddp_hook({"name": "fp16"}, model=net, nan_policy=policy, nan_skip_max_run=1)
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = data(rank, world)
    skipped, grads_zero = [], []
    try:
        for s in range(4):
            opt.zero_grad()
            xb = x[s * 8:(s + 1) * 8].clone()
            if s in bad_steps and rank == 1:
                xb[0, 0] = float("nan")
            torch.nn.functional.cross_entropy(net(xb), y[s * 8:(s + 1) * 8]).backward()
            skipped.append(state.last_step_skipped)
            grads_zero.append(all(bool((p.grad == 0).all()) for p in net.parameters()))
            if not state.last_step_skipped:
                opt.step()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e), skipped, grads_zero
    return None, "", skipped, grads_zero


def auto_decides(rank, world, log_dir, steps):
    plan = {"name": "auto", "warmup_steps": 4, "families": ["fp16", "topkc", "thc"]}
    net, state, loss = with_hook(plan, rank, world, steps, log_dir=log_dir)
    return loss, state.plans(), state.step


def fake_backend_refused():
    """A process group whose backend is not Gloo (torch's fake backend)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    backend = dist.get_backend()
    try:
        gradzip.ddp_hook({"name": "fp16"})
    except ValueError as e:
        return f"{e}|{backend}"
    finally:
        dist.destroy_process_group()
    return f"|{backend}"


def peer_dies(rank, world):
    """Rank 1 leaves after one step; rank 0's next backward must fail, not hang."""
    net = ddp(model())
    state, hook = gradzip.ddp_hook({"name": "topkc", "topkc": {"bits": 2}})
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = data(rank, world)
    train(net, opt, x, y, 2)  # past DDP's bucket rebuild, whose broadcast would fail first
    if rank == 1:
        return "left", ""  # the process exits and its connections close
    try:
        train(net, opt, x, y, 1, first=2)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None, ""
