"""gradzip.ddp_hook on 2 Gloo ranks over loopback: agreement with torch's own
hooks, training to a stated accuracy, state through torch.save, and `auto`
(docs/pytorch.md). The error cases are test_hook_errors.py."""

import json

import pytest
import torch

import workloads
from ranks import run_ranks


def test_fp16_plan_ends_with_torchs_fp16_hook_parameters():
    # torch halves in fp16 before the sum, gradzip after it: the same bits
    # except where a gradient is an fp16 subnormal (below 2^-14), whose
    # halving drops its last bit, 2^-24. Over 8 steps at lr 0.1 that moves a
    # weight by well under 1e-6, while fp16 against fp32 differs by ~1e-4.
    max_diff = 0.0
    for ours, theirs in run_ranks(workloads.same_as_torch_fp16, 8):
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
            max_diff = max(max_diff, (a - b).abs().max().item())
    assert max_diff < 1e-6


def test_fp32_plan_matches_ddp_default_all_reduce():
    for ours, theirs in run_ranks(workloads.same_as_ddp_default, 8):
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("plan", [
    {"name": "topkc", "topkc": {"bits": 2}},
    {"name": "thc", "collective": "ps", "thc": {"bits": 4}},
    {"name": "powersgd", "powersgd": {"rank": 2}},
], ids=["topkc", "thc-ps", "powersgd"])
def test_compressed_plans_train_to_accuracy(plan):
    # fp32 reaches 0.97 on this task in 120 steps; 0.9 leaves room for the
    # compression error without passing an untrained net (chance is 0.25).
    (acc0, plans, steps), (acc1, _, _) = run_ranks(workloads.trains_to, plan, 120)
    assert acc0 >= 0.9 and acc1 >= 0.9, (acc0, acc1)
    assert steps == 120
    assert plans and all(p.startswith(plan["name"]) for p in plans), plans


def test_state_round_trips_through_torch_save():
    # TopKC keeps an error-feedback residual per bucket: resuming without it,
    # or at another step (its seeds), would end elsewhere.
    for whole, resumed, step in run_ranks(workloads.resume, {"name": "topkc", "topkc": {"bits": 2}}, 10, 4):
        assert step == 10
        for a, b in zip(whole, resumed):
            assert torch.equal(a, b), (a - b).abs().max()


def test_auto_decides_and_trains(tmp_path):
    results = run_ranks(workloads.auto_decides, str(tmp_path), 40, timeout=180)
    (loss0, plans0, step0), (_, plans1, _) = results
    assert step0 == 40
    assert plans0 == plans1, "ranks must run the same plans"
    decisions = [json.loads(l) for l in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    chosen = [d for d in decisions if "chosen" in d]
    assert chosen, decisions
    assert chosen[-1]["chosen"] in plans0 or len(set(plans0)) > 1
    assert loss0 < 1.0
