"""``ina-sim run`` at scale, in virtual time: 64 workers of a 1,024-host fat_tree(16) (320 switches
running the real P4 program), packed trees against the model, switches that sum below the link
rate, auto choosing per call, a root that dies mid-call, and the command's refusals.  The grid and
the 1,024-worker runs are ``bench/bench_scale.py``'s (docs/scale.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from virtual_fabric import cli, runs
from virtual_fabric.fabric import REACTION, SPEC_DELAY
from virtual_fabric.host_latency import MEAN

FAT16 = ["--topology", "fat_tree:16", "--bw", "100000", "--delay", "1us", "--size", "262144"]
FAT4 = ["--topology", "fat_tree:4", "--bw", "100000", "--delay", "1us", "--size", "262144", "--trees", "1"]


def sim(capsys, *args: str) -> tuple[int, dict]:
    status = cli.main(["run", *args, "--json"])
    out = capsys.readouterr().out
    return status, json.loads(out)


def test_64_workers_of_fat_tree_16_on_packed_trees_match_the_model(capsys):
    """Fabric links at a quarter of the hosts': the planner packs 4 trees for the full host rate, and
    both calls take what the model says (the first opens the window by slow start), within 5%."""
    status, r = sim(capsys, *FAT16, "--fabric-bw", "25000", "--window", "128", "--workers", "64", "--calls", "2")
    assert status == 0 and r["job"]["switches"] == 320 and r["job"]["trees"] == 4
    assert r["check"] == {**r["check"], "within_bound": True, "identical": True, "calls_checked": 2}
    first, steady = r["calls"]
    assert steady["error"] is None and 0.95 < steady["ratio"] < 1.05, steady
    assert 0.9 < first["ratio"] < 1.1, first
    assert steady["seconds"] < first["seconds"]  # the first call's window opened by slow start
    assert r["passes"] > 64 * 1024 * 2  # every worker's packets went through the switches


def test_a_switch_summing_half_the_link_rate_halves_ina_and_the_model_knows(capsys):
    status, full = sim(capsys, *FAT4, "--window", "256", "--calls", "2")
    status_half, half = sim(capsys, *FAT4, "--window", "256", "--calls", "2", "--agg-rate", "0.5")
    assert status == status_half == 0
    busiest = half["where"]["aggregation_busiest"]  # the engines, not the links, set the pace
    assert busiest > 0.7 and half["where"]["busiest_link"]["busy"] < busiest
    assert 1.5 < half["calls"][1]["model"] / full["calls"][1]["model"] < 2.0  # the transfer doubles, not R
    # in the fabric too, but for the hints its inputs make wrong (a round trip more in each: see the next line)
    assert 1.3 < half["calls"][1]["seconds"] / full["calls"][1]["seconds"] < 2.0
    # the model's second call has no exponent window and no wrong hint; the fabric's inputs change from call to
    # call (``runs.Inputs``) and make some hints of the first window wrong: a packet each and a round trip more
    assert 0.97 < half["calls"][0]["ratio"] < 1.03 and 0.97 < half["calls"][1]["ratio"] < 1.08, half["calls"]
    assert half["job"]["ina_limit_mbps"] == pytest.approx(50000) and "contributions/s" in half["job"]["why"]


@pytest.mark.parametrize("size, rate", [("262144", "0.5"), ("4194304", "0.5"), ("16384", None)])
def test_auto_runs_each_call_as_the_forced_method_it_chose(capsys, size, rate):
    """auto's calls are, in the fabric, the very runs of the method (share, layout, paces) the model chose:
    bench_scale reuses a forced run for auto's where the choices agree.  And the choice is right here."""
    args = ["--topology", "fat_tree:4", "--bw", "100000", "--delay", "1us", "--size", size, "--trees", "1",
            "--window", "64", "--calls", "2"] + (["--agg-rate", rate] if rate else [])
    _, auto = sim(capsys, *args, "--mode", "auto")
    methods = {c["method"] for c in auto["calls"]}
    assert len(methods) == 1, methods
    _, forced = sim(capsys, *args, "--mode", methods.pop())
    assert [c["seconds"] for c in auto["calls"]] == [c["seconds"] for c in forced["calls"]]
    for call in auto["calls"]:
        assert call["model"] <= min(m["seconds"] for m in call["methods"].values()) * 1.03  # a nearly whole split: pure
        assert 0.95 < call["ratio"] < 1.05, call


def test_a_root_dying_mid_call_is_routed_around_and_the_sum_is_exact(capsys):
    status, r = sim(capsys, *FAT4, "--window", "256", "--fail", "root@40us")
    assert status == 0 and r["check"]["within_bound"] and r["check"]["identical"]
    root = r["faults"]["injected"][0]["switch"]
    assert root.startswith("core") and any(root in line for line in r["faults"]["controller"])
    # its neighbours lost carrier to it at once, the controller (subscribed to their ports) moved the tree
    # a reaction later, not after DEAD_AFTER of silence; the workers saw the new spec and the call ended
    moved = float(r["faults"]["controller"][0].split(" s:")[0])
    assert moved == pytest.approx(40e-6 + REACTION)
    assert moved < r["calls"][0]["seconds"] < moved + SPEC_DELAY + 0.005
    assert r["where"]["retransmissions"] > 0


def test_a_switch_back_takes_its_trees_back_and_every_call_is_exact():
    """A core dies mid-call and boots again 2.5 ms later: the tree moves off it, then back to the packing the
    planner chose once the switch answers and its links are up; every call of the run is exact."""
    config = runs.RunConfig(topology="fat_tree:4", bw=100000, delay="1us", size=262144, calls=12, trees=1,
                            pool_size=256, fail=[("core4", 40e-6)], restart=[("core4", 0.0025)])
    r = runs.run(config)
    assert r["check"]["within_bound"] and r["check"]["identical"] and r["check"]["calls_checked"] == 12
    lines = r["faults"]["controller"]
    assert any("crosses core4" in line and "moved to root" in line for line in lines), lines
    back = [line for line in lines if "back at root core4" in line]
    assert back and float(back[0].split(" s:")[0]) < 0.0025 + 2 * REACTION, lines


@pytest.mark.parametrize("args, message", [
    (["--topology", "fat_tree:x"], "arguments are integers"),
    (["--topology", "fat_tree:4", "--workers", "17"], "the topology has 16 hosts"),
    (["--topology", "fat_tree:4", "--fail", "nosuch@1us"], "no switch 'nosuch'"),
    (["--topology", "/nonexistent.json"], "nonexistent"),
])
def test_bad_runs_are_refused_by_name(capsys, args, message):
    assert cli.main(["run", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_text_report_names_every_kind_of_fault(capsys):
    """A kill, a restart and a cut in one run, each on its own line (a restart once crashed the report)."""
    assert cli.main(["run", "--topology", "fat_tree:4", "--bw", "100000", "--delay", "1us", "--size", "16384",
                     "--trees", "1", "--fail", "root@40us", "--restart", "root@300us", "--cut", "uplink@20us"]) == 0
    faults = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fault: ")]
    assert faults == ["fault: core4 killed at 40.0 us", "fault: core4 back at 300.0 us",
                      "fault: agg2-p4 -- core4-p1 cut at 20.0 us"]


def test_a_fault_needs_a_time():
    with pytest.raises(SystemExit):
        cli.main(["run", "--fail", "core1"])


def test_ina_ctl_job_plan_prints_what_ina_sim_predicts(capsys):
    """The same topology file, hosts and host latency: `ina-ctl job plan` (no switch) and `ina-sim run
    --dry-run` print the same methods, terms and choice, for the first call and a later one."""
    topology = "bmv2-env/topologies/leafspine-2x2.json"
    hosts = ",".join(f"h{i}" for i in range(1, 5))
    plan = subprocess.run([sys.executable, "-m", "controller.cli", "job", "plan", "--topology", topology,
                           "--hosts", hosts, "--size", "1MB", "--host-latency", str(MEAN * 1e6)],
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert cli.main(["run", "--topology", topology, "--workers", "4", "--size", "262144", "--calls", "2",
                     "--dry-run"]) == 0
    simulated = capsys.readouterr().out

    def blocks(text: str, heading: str) -> list[list[str]]:
        out: list[list[str]] = []
        for line in text.splitlines():
            if line.startswith(heading):
                out.append([])
            elif out and line.startswith("  "):
                out[-1].append(" ".join(line.split()))
            elif out and out[-1]:
                out.append([])
        return [b for b in out if b]

    later, first = blocks(plan.stdout, "a 1 MB call")
    assert [first, later] == blocks(simulated, "call "), (plan.stdout, simulated)
    assert any("<- runs" in line for line in first) and any(" us = latency " in line for line in later)
