"""``init_process_group("ina")`` (worker/torch_backend.py): its collectives one by one, and its set-up.

Ranks are real processes (tests/backend_rank.py) whose all_reduce goes through the loopback
switch (tests/loopback_net.py: ina.p4 on the built-in target); what the backend hands to gloo
is compared with a plain gloo group of the same ranks.  Training with the backend, and a dead
rank under it, are in tests/test_torch_ddp.py beside the hook's.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import free_port  # noqa: E402
from tests.loopback_net import LoopbackNet  # noqa: E402
from tests.rank_procs import EXAMPLE, json_lines, run_ranks, spec_file  # noqa: E402

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def net3(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as net:
        yield net


def ranks(spec: Path, device: str, world: int = 3, env: dict[int, dict[str, str]] | None = None,
          timeout: float = 120) -> list[tuple[int, str, str]]:
    port = free_port()
    envs = [dict(os.environ, INA_JOB_SPEC=str(spec), **(env or {}).get(r, {})) for r in range(world)]
    return run_ranks([[sys.executable, "-m", "tests.backend_rank", str(r), str(world), str(port), device]
                      for r in range(world)], envs, timeout)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU)])
def test_collectives_through_the_backend(net3, tmp_path, device):
    """all_reduce of float32/float16/bfloat16 (SUM, AVG) within the bound and int32 exact, all
    through the switches; async calls in flight together, and one done while the rank computes; every
    other collective equal to gloo's, and none of them through the switches; a later group sums with gloo;
    hundreds of gloo collectives in a row do not hang."""
    for code, stdout, stderr in ranks(spec_file(net3, tmp_path, f"collectives-{device}"), device):
        assert code == 0, stderr[-2000:]
        checks = json_lines(stdout)
        assert checks[0] == {"check": "backend", "name": "ina", "type": "InaProcessGroup"}
        sums = [c for c in checks if c["check"] == "allreduce"]
        assert {(c["dtype"], c["op"]) for c in sums} == {(d, o) for d in ("float32", "float16", "bfloat16", "int32")
                                                         for o in ("sum", "avg")}
        for c in sums:
            assert c["device"] == device
            if c["dtype"] == "int32":
                assert c["exact"], c
            else:
                assert c["over_bound"] <= 1.0 and c["max_abs"] > 0, c
        assert [c for c in checks if c["check"] == "async"] == [{"check": "async", "exact": True,
                                                                 "future_values": True}]
        assert [c for c in checks if c["check"] == "behind"] == [{"check": "behind", "done_before_wait": True,
                                                                  "computed": True, "exact": True}]
        delegated = {c["name"]: c["equal"] for c in checks if c["check"] == "delegated"}
        assert len(delegated) == 12 and all(delegated.values()), delegated
        assert [c for c in checks if c["check"] == "repeated"] == [
            {"check": "repeated", "calls": 900, "last": [float(r + 299) for r in range(3)]}]
        assert [c for c in checks if c["check"] == "subgroup"] == [
            {"check": "subgroup", "type": "InaProcessGroup", "worker": False, "exact": True}]
        counts = [c for c in checks if c["check"] == "worker"][0]
        assert counts["packets_before_delegated"] >= 8 * 2 * 3001 // 256  # the sums above went through the switch
        assert counts["packets_after_delegated"] == counts["packets_before_delegated"]  # the rest did not


def test_a_world_size_the_spec_does_not_have_fails_every_rank(net3, tmp_path):
    results = ranks(spec_file(net3, tmp_path, "sizes"), "none", world=2, timeout=60)
    for code, _, stderr in results:
        assert code != 0
        assert 'init_process_group("ina"): 2 of 2 ranks cannot join the job' in stderr, stderr[-1500:]
        assert "the process group has 2 ranks but job sizes" in stderr and "has 3 workers" in stderr


def test_one_rank_that_cannot_join_fails_every_rank_with_its_reason(net3, tmp_path):
    results = ranks(spec_file(net3, tmp_path, "named"), "none", env={1: {"INA_RANK": "2"}}, timeout=60)
    for code, _, stderr in results:
        assert code != 0
        assert "1 of 3 ranks cannot join the job: rank 1: ValueError: INA_RANK=2 but torch.distributed made " \
               "this process rank 1" in stderr, stderr[-1500:]


def test_no_spec_is_a_clear_error(net3, tmp_path):
    results = ranks(tmp_path / "missing.json", "none", timeout=60)
    for code, _, stderr in results:
        assert code != 0
        assert f"no job spec at {tmp_path / 'missing.json'} (from INA_JOB_SPEC)" in stderr, stderr[-1500:]


def test_a_good_setup_joins(net3, tmp_path):
    for code, stdout, stderr in ranks(spec_file(net3, tmp_path, "good"), "none", timeout=60):
        assert code == 0, stderr[-1500:]
        assert json_lines(stdout) == [{"check": "init", "backend": "ina"}]


@pytest.mark.parametrize("autoload, registered", [("1", True), ("0", False)])
def test_import_torch_registers_the_backend(autoload, registered):
    """The ``torch.backends`` entry point: init_process_group("ina") needs no import of ours."""
    code = ("import sys, torch.distributed as d; "
            "print('INA' in d.Backend._plugins, 'worker.torch_backend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True,
                         env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload))
    assert out.stdout.split() == [str(registered)] * 2


@GPU
def test_fsdp_trains_through_the_backend(net3, tmp_path):
    """FSDP (NO_SHARD: its gradients go through all_reduce) on CUDA, three ranks on the first GPU."""
    spec = spec_file(net3, tmp_path, "fsdp")
    port = free_port()
    results = run_ranks([[sys.executable, "-m", "tests.fsdp_rank", str(r), "3", str(port)] for r in range(3)],
                        [dict(os.environ, INA_JOB_SPEC=str(spec))] * 3, timeout=300)
    for code, stdout, stderr in results:
        assert code == 0, stderr[-2000:]
        steps = json_lines(stdout)
        assert len(steps) == 3 and all(s["over_bound"] <= 1.0 for s in steps), steps
        assert steps[-1]["packets"] > 0


def test_torchrun_alone_starts_a_job_from_the_default_spec(net3, tmp_path):
    """The script's only change is the backend's name: torchrun gives RANK, WORLD_SIZE and the
    rendezvous, and the spec is ./ina-job.json (no INA_JOB_SPEC)."""
    net3.job("torchrun", pool_size=32).save(tmp_path / "ina-job.json")
    env = {k: v for k, v in os.environ.items() if k not in ("INA_JOB_SPEC", "RANK", "WORLD_SIZE", "INA_RANK")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                           str(EXAMPLE), "--comm", "ina-backend", "--epochs", "2", "--timeout", "3"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    epochs = json_lines(done.stdout)
    assert [e["epoch"] for e in epochs] == [1, 2] and all(e["comm"] == "ina-backend" for e in epochs)
    assert epochs[-1]["test_accuracy"] > epochs[0]["test_accuracy"]
    status = net3.controller.status()
    assert status["jobs"]["torchrun"]["s1"]["aggregated"] > 0  # the gradients went through the switch
