"""examples/train_tp.py under torchrun: a tensor-parallel GPT trained in both schedules, its JSON summary."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.conftest import free_port  # noqa: E402
from tests.loopback_net import LoopbackNet  # noqa: E402
from tests.rank_procs import ROOT, run_ranks, spec_file, train_envs  # noqa: E402

EXAMPLE = ROOT / "examples" / "train_tp.py"
TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "8", "--batch", "4", "--steps", "3",
        "--schedule", "both", "--calibrate", "3"]


def check_summary(summary: dict, backend: str) -> None:
    assert summary["config"]["backend"] == backend and summary["world"] == 2
    sync, domino = summary["schedules"]["sync"], summary["schedules"]["domino"]
    assert len(sync["losses"]) == len(domino["losses"]) == 3
    for a, b in zip(sync["losses"], domino["losses"]):
        assert abs(a - b) <= 0.01 * abs(a), (sync["losses"], domino["losses"])
    assert sync["losses"][-1] < sync["losses"][0]  # it trains
    assert (sync["calls"], domino["calls"]) == (8, 16)  # 2 layers x 2 sublayers x (forward, backward) x m
    for r in (sync, domino):
        assert r["T_step"] > 0 and r["T_no_comm"] > 0 and r["cpu_per_step"] > 0
        for p in r["predicted"].values():
            assert all(math.isfinite(p[k]) and p[k] > 0 for k in ("T_step", "compute", "comm", "ratio_to_measured"))
    assert math.isfinite(summary["hidden_share"]) and summary["speedup"] > 0
    assert set(summary["calibration_seconds"]) == {"512", "1024"}  # the whole batch's and a micro-batch's
    assert set(summary["calibration_cpu_seconds"]) == {"512", "1024"}
    for r in summary["schedules"].values():  # a call's CPU taken from the compute can only lengthen the step
        assert r["predicted"]["calibrated_cpu"]["T_step"] >= r["predicted"]["calibrated"]["T_step"] - 1e-9
    check_timeline(summary["timeline"])


def check_timeline(timeline: dict) -> None:
    """The last step of each schedule: every call started, finished on the network (seen from its future)
    and waited for, in that order; Domino's calls carry their keys, every (sublayer, micro-batch) both ways."""
    sync, domino = timeline["sync"], timeline["domino"]
    assert len(sync["calls"]) == 8 and all(c["key"] is None for c in sync["calls"])
    assert sorted(map(tuple, (c["key"] for c in domino["calls"]))) == sorted(
        (kind, n, i) for kind in ("dgrad", "reduce") for n in range(4) for i in range(2))
    for step in (sync, domino):
        for c in step["calls"]:
            assert c["done"] is not None, c  # gloo's and the ina backend's handles have futures
            assert 0 <= c["start"] <= c["done"] <= c["wait_returned"] <= step["seconds"], c
            assert c["start"] <= c["wait_called"] <= c["wait_returned"], c
        assert [c["start"] for c in step["calls"]] == sorted(c["start"] for c in step["calls"])


def test_both_schedules_on_gloo_give_the_same_losses_and_a_prediction(tmp_path: Path):
    out = tmp_path / "tp.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", str(free_port()), str(EXAMPLE), *TINY, "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(out.read_text())
    check_summary(summary, "gloo")
    assert set(summary["schedules"]["sync"]["predicted"]) == {"calibrated", "calibrated_cpu"}  # gloo has no job model
    assert "hidden share" in done.stdout and "predicted (calibrated)" in done.stdout
    sys.path.insert(0, str(ROOT / "examples"))  # make train-tp's table and plot from this run's summary
    import mininet_train_tp

    summary["switch_cpu_per_step"], summary["machine_busy"] = 0.0, 0.5
    row = mininet_train_tp.summary("gloo", [summary, summary])
    assert row["T_sync"] == summary["schedules"]["sync"]["T_step"] and row["rounds"] == 2
    assert row["cpu_bound_sync"] == pytest.approx(2 * row["cpu_sync"] / os.cpu_count())
    assert mininet_train_tp.losses_agree([row]) < 0.01
    mininet_train_tp.plot_timelines({"gloo": summary}, tmp_path / "timeline.png", "test")
    assert (tmp_path / "timeline.png").stat().st_size > 10_000


def test_through_the_switch_the_job_model_predicts_too(tmp_path: Path):
    """--backend ina: every allreduce through ina.p4 on the built-in target (loopback wire)."""
    with LoopbackNet(2, tmp_path) as net:
        spec = spec_file(net, tmp_path, "tp")
        out = tmp_path / "tp.json"
        envs = [dict(e, PYTHONPATH=str(ROOT)) for e in train_envs(spec, free_port(), world=2)]
        results = run_ranks([[sys.executable, str(EXAMPLE), *TINY, "--backend", "ina", "--json", str(out)]
                             for _ in range(2)], envs, timeout=120)
    assert all(code == 0 for code, _, _ in results), [err[-2000:] for _, _, err in results]
    summary = json.loads(out.read_text())
    check_summary(summary, "ina")
    assert set(summary["schedules"]["domino"]["predicted"]) == {"calibrated", "calibrated_cpu", "job_model"}
