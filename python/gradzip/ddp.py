"""gradzip.ddp_hook: gradzip's gradient synchronisation as a DDP communication hook.

DDP hands each gradient bucket to the hook as backward fills it. The hook queues
the bucket to gradzip's communication thread, which runs the plan's compressor
and collective over DDP's own process group, and returns a future that
completes with the bucket's mean over ranks. Backward goes on meanwhile, as it
does under DDP's default all-reduce.
"""

import json
import os

import torch
import torch.distributed as dist

from . import _C


def _plan_text(plan):
    """A plan as gradzip's YAML reads it: a dict, a YAML/JSON string, or "auto"."""
    if isinstance(plan, dict):
        try:
            return json.dumps(plan)
        except TypeError as e:
            raise ValueError(f"plan {plan!r} holds a value that is not plain data: {e}") from None
    if isinstance(plan, str):
        text = plan.strip()
        if text in _C.compressor_names():  # "fp16" as shorthand for {"name": "fp16"}
            return json.dumps({"name": text})
        return text
    raise ValueError(f"plan must be a dict, a YAML string or 'auto', not {type(plan).__name__}")


class HookState:
    """The state behind one DDP model's hook: per-bucket compressor state
    (error-feedback residuals, PowerSGD's Q, THC's tables), the controller's
    under "auto", and the step counter. Save it with ``state_dict()`` next to
    the model and optimizer; ``load_state_dict()`` before the first step of
    the resumed run."""

    def __init__(self, plan, process_group=None, *, seed=0, nan_policy="stop", nan_skip_max_run=10,
                 log_dir="gradzip_logs", model=None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("gradzip.ddp_hook needs torch.distributed initialised "
                               "(torch.distributed.init_process_group) before the hook is made")
        group = process_group if process_group is not None else dist.group.WORLD
        self._plan = plan
        self._names, self._unnamed = {}, 0
        if model is not None:
            module = getattr(model, "module", model)
            self._names = {id(p): n for n, p in module.named_parameters()}
        self._layouts = {}
        self._impl = _C.DdpHook(group, _plan_text(plan), os.fspath(log_dir), bool(self._names), int(seed),
                                nan_policy, int(nan_skip_max_run))

    def _layout(self, bucket):
        params = bucket.parameters()
        key = (bucket.index(), tuple(id(p) for p in params))
        layout = self._layouts.get(key)
        if layout is None:
            layout, offset = [], 0
            for p in params:
                # Without the model, a name that stays with the tensor in
                # this process (DDP regroups tensors once, after step 0).
                name = self._names.get(id(p))
                if name is None:
                    name = self._names[id(p)] = f"parameter #{self._unnamed} {tuple(p.shape)}"
                    self._unnamed += 1
                layout.append((name, list(p.shape), offset, p.numel()))
                offset += p.numel()
            self._layouts[key] = layout
        return layout

    def _submit(self, bucket):
        # DDP reads a Python hook's result as a Python object: the callback
        # turns the C++ future's tensor into one (and passes an error on).
        fut = self._impl.submit(bucket.index(), bucket.buffer(), self._layout(bucket), bucket.is_last())
        return fut.then(_value)

    @property
    def step(self):
        """Steps synchronised so far (a resumed state continues its count)."""
        return self._impl.step

    @property
    def skipped_steps(self):
        """Steps whose gradients were zeroed for a NaN or Inf under nan_policy="skip"."""
        return self._impl.skipped_steps

    @property
    def last_step_skipped(self):
        """Whether the last step was skipped: its gradients are zero on every rank.
        With momentum or weight decay, skip ``optimizer.step()`` when this is True."""
        return self._impl.last_step_skipped

    def plans(self):
        """Each bucket's current plan, as gradzip names it (e.g. "thc{bits: 4}@ps")."""
        return [self._impl.plan_key(b) for b in range(self._impl.num_buckets)]

    def state_dict(self):
        """Every piece of compressor and controller state; between steps only."""
        return {"gradzip_hook": 1, "plan": self._plan, "state": self._impl.save()}

    def load_state_dict(self, state):
        """Restores state_dict()'s result; the plan must be the one this hook runs."""
        if not isinstance(state, dict) or state.get("gradzip_hook") != 1 or "state" not in state:
            raise ValueError("load_state_dict: not a gradzip hook state (expected the dict state_dict() returned)")
        self._impl.load(state["state"])


def _value(fut):
    return fut.value()


def _hook(state, bucket):
    return state._submit(bucket)


def ddp_hook(plan, process_group=None, **options):
    """Returns ``(state, hook)`` for ``DistributedDataParallel.register_comm_hook``.

    ``plan`` is written as in gradzip's YAML ``compress:`` section: a dict such
    as ``{"name": "thc", "collective": "ps", "thc": {"bits": 4}}``, the same as
    a YAML string, a bare compressor name (``"fp16"``), or ``"auto"`` (or
    ``{"name": "auto", ...controller options}``) to let gradzip's controller
    choose. ``process_group`` defaults to the default group (the one DDP uses
    by default). Options: ``seed`` (shared randomness, as run.seed),
    ``nan_policy`` ("stop" raises NonFiniteGradientError on every rank, "skip"
    zeroes the step's gradients on every rank), ``nan_skip_max_run``,
    ``log_dir`` (the controller's decision logs under "auto") and ``model``
    (the DDP model, for parameter names in error messages).

    An unknown compressor, option or value raises ValueError naming it and
    listing the valid ones."""
    state = HookState(plan, process_group, **options)
    return state, _hook
