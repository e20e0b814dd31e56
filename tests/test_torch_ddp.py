"""The PyTorch DDP hook (worker/torch_ddp.py) and examples/train_ddp.py, through the real ina.p4.

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
from worker import Worker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_ddp.py"


@pytest.fixture
def net3(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as net:
        yield net


def spec_file(net: LoopbackNet, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.json"
    net.job(name, pool_size=32).save(path)
    return path


def run_ranks(commands: list[list[str]], envs: list[dict[str, str]], timeout: float) -> list[tuple[int, str, str]]:
    procs = [subprocess.Popen(c, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(commands, envs)]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append((p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return out


@pytest.mark.parametrize("dtype, view", [("float32", "copy"), ("float32", "view"), ("float16", "copy"),
                                         ("bfloat16", "view")])
def test_the_hook_averages_within_the_bound_and_matches_gloo(net3, tmp_path, dtype, view):
    """Three steps over three decades of gradient size: every element of the hook's average is
    within the quantization bound / N of the exact average (and of gloo's, for float32)."""
    spec = spec_file(net3, tmp_path, f"grads-{dtype}-{view}")
    port = free_port()
    results = run_ranks([[sys.executable, "-m", "tests.ddp_rank", str(spec), str(r), "3", str(port), dtype, view]
                         for r in range(3)], [dict(os.environ)] * 3, timeout=120)
    for code, stdout, stderr in results:
        assert code == 0, stderr[-2000:]
        steps = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        assert len(steps) == 3
        for s in steps:
            assert s["max_error_over_bound"] <= 1.0, s
            assert s["max_abs"] > 0
            if dtype == "float32":
                assert s["vs_gloo_over_bound"] <= 1.0, s


def train_command(comm: str, *extra: str) -> list[str]:
    return [sys.executable, str(EXAMPLE), "--comm", comm, "--timeout", "3", *extra]


def train_envs(spec: Path | None, port: int) -> list[dict[str, str]]:
    base = dict(os.environ, WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return [dict(base, RANK=str(r), **({"INA_JOB_SPEC": str(spec)} if spec else {})) for r in range(3)]


def test_training_through_the_switch_reaches_gloos_accuracy(net3, tmp_path):
    """examples/train_ddp.py, three ranks, the same seed: INA's test accuracy within 1 point of gloo's."""
    spec = spec_file(net3, tmp_path, "train")
    final = {}
    for comm in ("ina", "gloo"):
        results = run_ranks([train_command(comm, "--epochs", "6", "--bucket-view", "--timeline",
                                           str(tmp_path / f"{comm}-{r}.json")) for r in range(3)],
                            train_envs(spec if comm == "ina" else None, free_port()), timeout=600)
        assert all(code == 0 for code, _, _ in results), [err[-1500:] for _, _, err in results]
        epochs = [json.loads(line) for line in results[0][1].splitlines() if line.startswith("{")]
        assert [e["epoch"] for e in epochs] == list(range(1, 7))
        final[comm] = epochs[-1]
        timeline = json.loads((tmp_path / f"{comm}-0.json").read_text())
        assert timeline["buckets"] and all(0 <= h <= 1 for h in timeline["hidden_share"])
        assert all(b["ready"] <= b["started"] <= b["finished"] for b in timeline["buckets"])
    assert final["gloo"]["test_accuracy"] > 0.8  # it did learn
    assert abs(final["ina"]["test_accuracy"] - final["gloo"]["test_accuracy"]) <= 0.01
    assert abs(final["ina"]["loss"] - final["gloo"]["loss"]) <= 0.05 * final["gloo"]["loss"]


def test_a_killed_rank_fails_the_others_with_a_clear_error_in_time(net3, tmp_path):
    spec = spec_file(net3, tmp_path, "killed")
    commands = [train_command("ina", "--epochs", "3") + (["--exit-after-steps", "2"] if r == 2 else [])
                for r in range(3)]
    start = time.monotonic()
    results = run_ranks(commands, train_envs(spec, free_port()), timeout=120)
    elapsed = time.monotonic() - start
    assert results[2][0] == 3  # the one that died
    for code, stdout, stderr in results[:2]:
        errors = [json.loads(line)["error"] for line in stdout.splitlines() if '"error"' in line]
        assert code == 1 and errors, stderr[-1500:]
        assert errors[0].startswith("AllreduceTimeout: tree 1/1 of job killed"), errors
    assert elapsed < 60  # the worker's 3 s timeout, not a hang


def test_bad_setup_is_refused_before_training(net3, tmp_path, monkeypatch):
    from worker.torch_ddp import InaHookState

    monkeypatch.delenv("INA_JOB_SPEC", raising=False)
    monkeypatch.delenv("INA_RANK", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="set INA_JOB_SPEC"):
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
