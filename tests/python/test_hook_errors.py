"""gradzip.ddp_hook's error cases: bad plans and options (ValueError naming
them), a process group it cannot run on, ranks on different plans, non-finite
gradients under each nan_policy, and a torch version it was not built for."""

import os
import re
import subprocess
import sys

import pytest

import gradzip
import workloads
from ranks import run_ranks


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    # Plans and options are checked before the group is used, so a 1-rank
    # Gloo group in this process is enough.
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path_factory.mktemp('pg')}/store", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_unknown_compressor_names_it_and_lists_the_valid_ones(one_rank):
    with pytest.raises(ValueError, match=r"name: expected one of \[.*fp16.*thc.*\], got \"nope\""):
        gradzip.ddp_hook({"name": "nope"})


def test_unknown_option_names_it_and_lists_the_known_ones(one_rank):
    with pytest.raises(ValueError, match=r"bitz.*unknown key.*bits"):
        gradzip.ddp_hook({"name": "thc", "thc": {"bitz": 4}})


def test_unsupported_collective_is_named(one_rank):
    with pytest.raises(ValueError, match=r"collective.*topk does not support collective 'tree'"):
        gradzip.ddp_hook({"name": "topk", "collective": "tree"})


def test_bad_nan_policy_is_named(one_rank):
    with pytest.raises(ValueError, match=r"nan_policy 'ignore'.*stop, skip"):
        gradzip.ddp_hook({"name": "fp16"}, nan_policy="ignore")


def test_exploration_is_refused_under_ddp(one_rank):
    with pytest.raises(ValueError, match=r"explore.*cannot snapshot"):
        gradzip.ddp_hook({"name": "auto", "explore": 2})


def test_plan_that_is_not_plain_data_is_refused(one_rank):
    with pytest.raises(ValueError, match=r"not plain data"):
        gradzip.ddp_hook({"name": "fp16", "fp16": {"x": object()}})


def test_ranks_with_different_plans_fail_at_the_first_bucket():
    for kind, message in run_ranks(workloads.plan_per_rank, timeout=60):
        assert kind is not None, "the mismatch went unnoticed"
        assert "different plans" in message and "rank 0: fp16@engine" in message and "rank 1: topkc" in message


def test_nan_stop_raises_on_every_rank_naming_the_rank():
    for rank, (kind, message, skipped, _) in enumerate(run_ranks(workloads.nan_gradient, "stop", [1])):
        assert kind in ("NonFiniteGradientError", "RuntimeError") and "non-finite gradient" in message, (kind, message)
        # Rank 1 names its tensor; rank 0 learns that another rank had one.
        assert re.search(r"rank 1: \d\.(weight|bias)", message) if rank == 1 else "on another rank" in message, message
        assert skipped == [False], skipped


def test_nan_skip_zeroes_the_step_on_every_rank():
    for kind, message, skipped, zero in run_ranks(workloads.nan_gradient, "skip", [1]):
        assert kind is None, message
        assert skipped == [False, True, False, False], skipped
        assert zero == [False, True, False, False], zero


def test_nan_skip_stops_after_nan_skip_max_run_steps_in_a_row():
    for kind, message, skipped, _ in run_ranks(workloads.nan_gradient, "skip", [1, 2]):
        assert "2 steps in a row" in message and "nan_skip_max_run = 1" in message, (kind, message)
        assert skipped == [False, True], skipped


def test_backend_other_than_gloo_is_refused_naming_both():
    out = subprocess.run([sys.executable, "-c", "import workloads; print(workloads.fake_backend_refused())"],
                         capture_output=True, text=True, timeout=120, cwd=os.path.dirname(__file__),
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    message, backend = out.stdout.strip().rsplit("|", 1)
    assert "fp16@engine" in message and f"backend '{backend}'" in message, out.stdout


def test_torch_version_mismatch_is_an_import_error_naming_both():
    code = "import torch; torch.__version__ = '1.13.0'; import gradzip"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "1.13.0" in out.stderr and gradzip._build_info.torch_version in out.stderr


def test_dead_peer_fails_backward_instead_of_hanging():
    (kind, message), (left, _) = run_ranks(workloads.peer_dies, timeout=60, pg_timeout=10)
    assert left == "left"
    assert kind is not None, "rank 0 went on without its peer"
    assert "rank 0" in message, message
