"""The PyTorch DDP hook (worker/torch_ddp.py) and examples/train_ddp.py, through the real ina.p4.

The training tests also cover the backend (worker/torch_backend.py) as the example uses it;
tests/test_torch_backend.py tests the backend's collectives one by one.

Ranks are real processes with a real gloo process group on loopback; their workers' packets
go through the loopback switch (tests/loopback_net.py: ina.p4 on the built-in target, set up
by the controller over gRPC).  No root needed.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from tests.conftest import free_port  # noqa: E402
from tests.loopback_net import LoopbackNet  # noqa: E402
from tests.rank_procs import json_lines, run_ranks, spec_file, train_command, train_envs  # noqa: E402
from worker import Worker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def net3(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as net:
        yield net


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("dtype, view, device", [("float32", "copy", "cpu"), ("float32", "view", "cpu"),
                                                 ("float16", "copy", "cpu"), ("bfloat16", "view", "cpu"),
                                                 pytest.param("float32", "view", "cuda", marks=GPU),
                                                 pytest.param("float16", "copy", "cuda", marks=GPU)])
def test_the_hook_averages_within_the_bound_and_matches_gloo(net3, tmp_path, dtype, view, device):
    """Three steps over three decades of gradient size: every element of the hook's average is
    within the quantization bound / N of the exact average (and of gloo's, for float32).  On a
    GPU the buckets are CUDA tensors, staged through pinned memory."""
    check_hook(net3, tmp_path, dtype, view, device)


def test_the_hook_on_the_reference_core(net3, tmp_path, monkeypatch):
    """The same on the Python core (where no compiler is): the ranks inherit INA_NATIVE=0."""
    monkeypatch.setenv("INA_NATIVE", "0")
    check_hook(net3, tmp_path, "float32", "copy", "cpu")


def check_hook(net3: LoopbackNet, tmp_path: Path, dtype: str, view: str, device: str) -> None:
    spec = spec_file(net3, tmp_path, f"grads-{dtype}-{view}-{device}")
    port = free_port()
    results = run_ranks([[sys.executable, "-m", "tests.ddp_rank", str(spec), str(r), "3", str(port), dtype, view,
                          device] for r in range(3)], [dict(os.environ)] * 3, timeout=120)
    for code, stdout, stderr in results:
        assert code == 0, stderr[-2000:]
        steps = json_lines(stdout)
        assert len(steps) == 3
        for s in steps:
            assert s["max_error_over_bound"] <= 1.0, s
            assert s["max_abs"] > 0
            if dtype == "float32":
                assert s["vs_gloo_over_bound"] <= 1.0, s


WAYS = {"hook": ["ina-hook"], "backend": ["ina-backend"], "backend-plain": ["ina-backend", "--plain"]}


def test_training_through_the_switch_reaches_gloos_accuracy(net3, tmp_path):
    """examples/train_ddp.py, three ranks, the same seed, DDP with the hook and DDP with
    init_process_group("ina") and no hook: test accuracy within 1 point of gloo's (the plain loop of
    dist.all_reduce sums the same calls as the backend; it is tested for a killed rank below)."""
    final = {}
    trained = {w: WAYS[w] for w in ("hook", "backend")}
    for way, comm in {"gloo": ["gloo"], **trained}.items():
        spec = spec_file(net3, tmp_path, f"train-{way}") if way != "gloo" else None
        results = run_ranks([train_command(*comm, "--epochs", "6", "--bucket-view", "--timeline",
                                           str(tmp_path / f"{way}-{r}.json")) for r in range(3)],
                            train_envs(spec, free_port()), timeout=600)
        assert all(code == 0 for code, _, _ in results), [err[-1500:] for _, _, err in results]
        epochs = json_lines(results[0][1])
        assert [e["epoch"] for e in epochs] == list(range(1, 7))
        final[way] = epochs[-1]
        timeline = json.loads((tmp_path / f"{way}-0.json").read_text())
        assert timeline["buckets"] and all(0 <= h <= 1 for h in timeline["hidden_share"])
        assert all(b["ready"] <= b["started"] <= b["finished"] for b in timeline["buckets"])
    assert final["gloo"]["test_accuracy"] > 0.8  # it did learn
    for way in trained:
        assert abs(final[way]["test_accuracy"] - final["gloo"]["test_accuracy"]) <= 0.01, (way, final)
        assert abs(final[way]["loss"] - final["gloo"]["loss"]) <= 0.05 * final["gloo"]["loss"], (way, final)


@pytest.mark.parametrize("way", list(WAYS))
def test_a_killed_rank_fails_the_others_with_a_clear_error_in_time(net3, tmp_path, way):
    spec = spec_file(net3, tmp_path, f"killed-{way}")
    commands = [train_command(*WAYS[way], "--epochs", "3") + (["--exit-after-steps", "2"] if r == 2 else [])
                for r in range(3)]
    start = time.monotonic()
    results = run_ranks(commands, train_envs(spec, free_port()), timeout=120)
    elapsed = time.monotonic() - start
    assert results[2][0] == 3  # the one that died
    for code, stdout, stderr in results[:2]:
        errors = [line["error"] for line in json_lines(stdout) if "error" in line]
        assert code == 1 and errors, stderr[-1500:]
        assert errors[0].startswith(f"AllreduceTimeout: tree 1/1 of job killed-{way}"), errors
    assert elapsed < 60  # the worker's 3 s timeout, not a hang


def test_bad_setup_is_refused_before_training(net3, tmp_path, monkeypatch):
    from worker.torch_ddp import InaHookState

    monkeypatch.delenv("INA_JOB_SPEC", raising=False)
    monkeypatch.delenv("INA_RANK", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="set INA_RANK"):
        InaHookState()
    spec = net3.job("setup", pool_size=8)
    with pytest.raises(ValueError, match="rank 3 is not in job setup"):
        Worker(spec, 3)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        worker = Worker(spec, 0)
        with pytest.raises(ValueError, match="process group has 1 ranks but job setup has 3 workers"):
            InaHookState(worker)
        worker.close()
    finally:
        dist.destroy_process_group()


def test_worker_does_not_need_torch():
    """`import worker` stays free of torch: the hook's module is the only one that imports it."""
    code = "import sys, worker, worker.api, worker.engine; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
