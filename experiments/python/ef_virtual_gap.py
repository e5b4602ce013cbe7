"""What an error-feedback compressor costs a given model, measured on that model:
the gradient gap at the virtual iterate, against the minibatch noise.

EF-SGD's analysis (Karimireddy et al. 2019, Thm II; Stich & Karimireddy 2020)
runs on the virtual iterate x~ = x - gamma_eff * e, where e is the residual
error feedback still holds back. Its compression term is the gradient gap
||grad f(x~) - grad f(x)||^2, which the theorem bounds by L^2 gamma^2 ||e||^2
and then by (1 - delta)/delta^2 times the gradient noise; the ratio of that
term to the noise term is what `stat: ef_rate` charges, k (1 - delta)/delta^2
with one k for every model (controller/ControllerOptions.h). Here the gap is
measured instead of bounded, on the same minibatch B:

    gap = ||g(x - gamma_eff e; B) - g(x; B)||^2 / sigma^2,
    sigma^2 = ||g(x; B1) - g(x; B2)||^2 / 2   (two other batches of the same size),

with gamma_eff = lr_t / (1 - momentum), the total step the held-back mass
takes once released through the momentum buffer. The residual e is (a) the
controller's screening, 8 replays of g(x; B) (`screen_reps`), and (b) error
feedback run over the last 16 gradients of the (uncompressed) trajectory.

Each model trains uncompressed on one process with its suite's recipe (global
batch 128 = 2 ranks x 64; ResNet-20: experiments/suites/fmnist_resnet20_n2_20M.yaml,
VGG-11: fmnist_vgg11.yaml; cosine over 468 steps after 50 warm-up steps) and
is probed at the given steps. Offline analysis, not a test.

Usage: .venv/bin/python experiments/python/ef_virtual_gap.py [--models resnet20 vgg11] [--probes 20 60 150]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_peer  # noqa: E402
import ef_steady_state as ef  # noqa: E402
import fmnist  # noqa: E402
import gz_models  # noqa: E402

RECIPES = {  # the suites' optimiser settings
    "resnet20": dict(lr=0.05, momentum=0.9, nesterov=True),
    "vgg11": dict(lr=0.02, momentum=0.9, nesterov=False),
}
STEPS, WARMUP, WINDOW = 468, 50, 16


def lr_at(base, step):
    """The suites' schedule: linear warm-up, then cosine to 0 over the epoch."""
    return ddp_peer.lr_at(step, dict(name="cosine", warmup_steps=WARMUP, min_lr=0.0), base, STEPS, STEPS)


def flat_grad(model, xb, yb):
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(xb), yb).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()]).clone()


def grad_at(model, shift, xb, yb):
    """g(x - shift; B) with parameters and BatchNorm buffers restored after."""
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        off = 0
        for p in model.parameters():
            p.sub_(shift[off: off + p.numel()].view_as(p))
            off += p.numel()
    g = flat_grad(model, xb, yb)
    model.load_state_dict(saved)
    return g


def residual(c, seq):
    e = torch.zeros_like(seq[0])
    for g in seq:
        x = g + e
        e = x - c(x)
    return e


def probe(model, name, step, lr, momentum, history, xb, yb, noise_batches):
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    g = flat_grad(model, xb, yb)
    g1, g2 = (flat_grad(model, *b) for b in noise_batches)
    model.load_state_dict(saved)
    sigma2 = (g1 - g2).pow(2).sum().item() / 2
    d = g.numel()
    gamma = lr / (1 - momentum)
    comps = {"TopKC 2 bits": ef.topkc(2, d), "TopK 1.1%": ef.topk(0.011, d), "TopK 0.4%": ef.topk(0.004, d)}
    print(f"{name} step {step}: d {d}, lr {lr:.4f}, gamma_eff {gamma:.3f}, ||g||^2/sigma^2 "
          f"{g.pow(2).sum().item() / sigma2:.3f}", flush=True)
    for cname, c in comps.items():
        row = []
        for label, seq in (("screen", [g] * 8), ("running", history[-WINDOW:] + [g])):
            e = residual(c, seq[:-1])
            x = seq[-1] + e
            v = ef.vnmse(x, c(x))
            e = x - c(x)
            gt = grad_at(model, gamma * e, xb, yb)
            model.load_state_dict(saved)
            gap = (gt - g).pow(2).sum().item() / sigma2
            bound = v / (1 - v) ** 2
            row.append(f"{label}: vNMSE {v:.3f} gap/sigma^2 {gap:.4f} (1-delta)/delta^2 {bound:.2f} "
                       f"||gamma e||/||x|| {(gamma * e).norm().item() / max(1e-12, params_norm(model)):.2e}")
        print(f"  {cname:13s} " + " | ".join(row), flush=True)


def params_norm(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).norm().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet20", "vgg11"], choices=list(RECIPES))
    ap.add_argument("--probes", nargs="+", type=int, default=[20, 60, 150])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    transform = fmnist.Transform(2, True, [fmnist.DEFAULT_MEAN], [fmnist.DEFAULT_STD])
    x, y = fmnist.load(train=True)
    for name in args.models:
        r = RECIPES[name]
        torch.manual_seed(1)
        loader = fmnist.Loader(x, y, 0, 1, 128, True, True, 1, transform, augment=True)
        noise = list(zip(range(2), fmnist.Loader(x, y, 0, 1, 128, True, True, 7, transform,
                                                 augment=True).epoch(0)))
        noise = [b for _, b in noise]
        model = gz_models.make_model(name, in_channels=1)
        opt = torch.optim.SGD(model.parameters(), lr=r["lr"], momentum=r["momentum"],
                              nesterov=r["nesterov"], weight_decay=5e-4)
        history = []
        for step, (xb, yb) in enumerate(loader.epoch(0)):
            lr = lr_at(r["lr"], step)
            if step in args.probes:
                probe(model, name, step, lr, r["momentum"], history, xb, yb, noise)
            if step >= max(args.probes):
                break
            for grp in opt.param_groups:
                grp["lr"] = lr
            history = (history + [flat_grad(model, xb, yb)])[-WINDOW:]
            opt.step()


if __name__ == "__main__":
    main()
