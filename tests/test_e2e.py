"""End to end in Mininet (root): P4 switches running ina.p4, the controller, workers on hosts.

Each worker is the `ina-allreduce` command (worker/cli.py) in its host's namespace, with a
real UDP socket on the host's interface; it checks its own result against the exact sum of
all ranks' arrays (it can draw them all from their seeds) and prints one JSON line.
Duplication and reordering need netem, which some kernels lack: those faults are covered
on the loopback wire in tests/test_worker.py.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from controller.controller import Controller
from controller.topology import Topology, fat_tree, leaf_spine, single
from tests.mininet_env import USABLE, needs_mininet
from worker.jobspec import JobSpec

if USABLE:
    from bmv2env.network import InaNetwork

pytestmark = needs_mininet
SIZE = 20_000  # values per allreduce: 313 packets of 64 values per worker


def start_workers(net, spec_path: Path, hosts: list[str], size: int = SIZE, repeat: int = 1,
                  timeout: float = 10.0) -> list[subprocess.Popen]:
    return [net.host(h).popen([sys.executable, "-m", "worker.cli", "--spec", str(spec_path), "--rank", str(rank),
                               "--size", str(size), "--repeat", str(repeat), "--timeout", str(timeout), "--check"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for rank, h in enumerate(hosts)]


def first_reports(procs: list[subprocess.Popen], wait: float = 120) -> list[dict]:
    """Each worker's first report, once all have one: a fault made after this lands mid-job on running
    workers (a worker still starting on a loaded machine would read the new plan, with nothing to
    recover).  Read a byte at a time from the pipe, so ``reports`` (communicate) misses nothing."""
    deadline, out = time.monotonic() + wait, []
    for p in procs:
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"a worker finished no call in {wait} s"
            byte = os.read(p.stdout.fileno(), 1)
            assert byte, f"a worker ended before its first report: {p.communicate()}"
            line += byte
        out.append(json.loads(line))
    return out


def reports(procs: list[subprocess.Popen], wait: float = 90) -> list[dict]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=wait)
        lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        assert lines, f"worker printed nothing; stderr: {stderr[-2000:]}"
        out += lines
    return out


def assert_all_exact(results: list[dict], workers: int, repeat: int = 1) -> None:
    assert len(results) == workers * repeat, results
    for r in results:
        assert "error" not in r, r
        assert r["within_bound"], r


# Tests with their own network come first: the module's single-8 network (same switch name)
# lives from its first user to the end of the module.

def test_tree_of_three_switches(tmp_path):
    with InaNetwork(Path(__file__).resolve().parents[1] / "bmv2-env/topologies/tree-4.json", tmp_path / "net",
                    target="builtin") as net:
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            hosts = ["h1", "h2", "h3", "h4"]
            controller.create_job("tree", hosts, pool_size=32, mode="ina")
            assert_all_exact(reports(start_workers(net, controller.spec_dir / "tree.json", hosts)), 4)
            stats = controller.status()["jobs"]["tree"]
            V = controller.state.options.values
            assert stats["s1"]["aggregated"] >= 2 * (-(-SIZE // V))  # the root summed the two leaves' partials
            assert stats["s2"]["from_parent"] > 0 and stats["s3"]["from_parent"] > 0


def test_lossy_worker_links(tmp_path):
    """1% loss on h1's and h2's links, 5% on h3's and h4's, each way (bmv2-env/links.py)."""
    spec = single(4)
    for i, link in enumerate(spec["links"]):
        link.append({"loss": 1 if i < 2 else 5})
    with InaNetwork(Topology.from_dict(spec), tmp_path / "net", target="builtin") as net:
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            controller.create_job("one", ["h1", "h2"], pool_size=32, mode="ina")
            controller.create_job("five", ["h3", "h4"], pool_size=32, mode="ina")
            procs = start_workers(net, controller.spec_dir / "one.json", ["h1", "h2"]) + \
                start_workers(net, controller.spec_dir / "five.json", ["h3", "h4"])
            results = reports(procs)
            assert_all_exact(results, 4)
            assert all(r["retransmissions"] > 0 for r in results[2:])


@pytest.mark.parametrize("spine_loss", [0, 2])
def test_two_trees_over_a_leaf_spine(tmp_path, spine_loss):
    """Host links 2x the leaf-spine links: the planner packs one tree per spine, half the data each.

    With ``spine_loss`` % loss on every leaf-spine link, each way, results stay exact."""
    spec = leaf_spine(2, 2, 2, host_bw=100, fabric_bw=50)
    for link in spec["links"]:
        if "spine" in link[1] and spine_loss:
            link[2]["loss"] = spine_loss
    with InaNetwork(Topology.from_dict(spec), tmp_path / "net", target="builtin") as net:
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            hosts = ["h1", "h2", "h3", "h4"]
            job = controller.create_job("packed", hosts, pool_size=16, mode="ina")
            assert sorted(t.root for t in job.trees) == ["spine1", "spine2"]
            assert [t.share for t in job.trees] == pytest.approx([0.5, 0.5])
            results = reports(start_workers(net, controller.spec_dir / "packed.json", hosts, repeat=2))
            assert_all_exact(results, 4, repeat=2)
            stats = controller.status()["jobs"]["packed"]
            for spine in ("spine1", "spine2"):  # each spine summed its half: about SIZE / V / 2 chunks per call
                V = controller.state.options.values
                assert stats[spine]["aggregated"] >= 2 * 2 * (SIZE // V // 2), (spine, stats[spine])
            if spine_loss:
                assert sum(r["retransmissions"] for r in results) > 0  # the loss was real
            controller.delete_job("packed")
            for switch in net.network.access:
                assert controller.installed_entries(switch) == controller.expected_entries(switch)
                assert controller.installed_groups(switch) == {}


def test_packed_trees_over_a_fat_tree(tmp_path):
    """fat_tree(4): 16 workers, 20 switches; each edge switch's two uplinks together match its hosts'
    links, so one tree per aggregation plane (two trees, through different cores)."""
    topology = Topology.from_dict(fat_tree(4, host_bw=40, fabric_bw=20))
    with InaNetwork(topology, tmp_path / "net", target="builtin") as net:
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            hosts = [f"h{i}" for i in range(1, 17)]
            job = controller.create_job("fat", hosts, pool_size=16, mode="ina")
            assert len(job.trees) == 2 and {t.root for t in job.trees} <= {f"core{i}" for i in range(1, 5)}
            assert_all_exact(reports(start_workers(net, controller.spec_dir / "fat.json", hosts), wait=150), 16)


@pytest.fixture(scope="module")
def single8(tmp_path_factory):
    run = tmp_path_factory.mktemp("single8")
    with InaNetwork(Topology.from_dict(single(8)), run / "net", target="builtin") as net:
        with Controller(net.network, run / "state.json") as controller:
            controller.setup()
            yield net, controller


@pytest.mark.parametrize("workers", [2, 4, 8])
def test_one_switch(single8, workers):
    net, controller = single8
    hosts = [f"h{i}" for i in range(1, workers + 1)]
    controller.create_job(f"n{workers}", hosts, pool_size=32, mode="ina")
    try:
        results = reports(start_workers(net, controller.spec_dir / f"n{workers}.json", hosts, repeat=2), wait=120)
        assert_all_exact(results, workers, repeat=2)
        stats = controller.status()["jobs"][f"n{workers}"]["s1"]
        chunks = -(-SIZE // controller.state.options.values)
        # every packet completed once per call: the first call's exponent window too (the second is hinted)
        assert stats["results"] >= 2 * chunks + 32
    finally:
        controller.delete_job(f"n{workers}")


def test_two_jobs_at_once(single8):
    net, controller = single8
    a, b = ["h1", "h2", "h3", "h4"], ["h5", "h6", "h7", "h8"]
    controller.create_job("a", a, pool_size=32, mode="ina")
    controller.create_job("b", b, pool_size=32, mode="ina")
    try:
        procs = start_workers(net, controller.spec_dir / "a.json", a) + \
            start_workers(net, controller.spec_dir / "b.json", b)
        assert_all_exact(reports(procs), 8)
    finally:
        controller.delete_job("a")
        controller.delete_job("b")


def test_dead_worker_fails_the_others_clearly_then_a_fresh_job_works(single8):
    net, controller = single8
    hosts = ["h1", "h2", "h3"]
    controller.create_job("doomed", hosts, pool_size=32, mode="ina")
    procs = start_workers(net, controller.spec_dir / "doomed.json", hosts, size=2_000_000, repeat=50, timeout=2.0)
    time.sleep(1.0)  # mid-job (calls take a fraction of a second: 50 of them run for longer)
    assert all(p.poll() is None for p in procs), "the job ended before the worker was killed"
    procs[2].kill()
    survivors = [r for r in reports(procs[:2], wait=60) if "error" in r or r["run"] == 49]
    procs[2].communicate()
    assert len(survivors) == 2
    for r in survivors:
        assert r["error"].startswith("AllreduceTimeout: tree 1/1 of job doomed (root s1, job id "), r
        assert "no result for 2.0 s" in r["error"], r
        assert "seq" in r["error"] and "retransmissions" in r["error"]
    controller.delete_job("doomed")
    controller.create_job("fresh", hosts, pool_size=32, mode="ina")
    try:
        assert_all_exact(reports(start_workers(net, controller.spec_dir / "fresh.json", hosts)), 3)
    finally:
        controller.delete_job("fresh")


def test_the_switch_killed_and_restarted_three_times_during_one_job(single8):
    """SIGKILL the switch three times while a job's calls run and start it again: `watch` provisions
    it and writes the job spec again, the workers send their last window again, and every call of
    the job completes within the bound (docs/protocol.md, "A switch restart")."""
    net, controller = single8
    hosts = ["h1", "h2", "h3", "h4"]
    controller.create_job("phoenix", hosts, pool_size=32, mode="ina")
    spec_path = controller.spec_dir / "phoenix.json"
    stop = threading.Event()
    watch = threading.Thread(target=controller.watch, kwargs={"interval": 0.2, "stop": stop})
    watch.start()
    switch = net.switch("s1")
    try:
        procs = start_workers(net, spec_path, hosts, size=200_000, repeat=40, timeout=10.0)
        first = first_reports(procs)
        for restart in range(1, 4):
            time.sleep(0.7)
            assert all(p.poll() is None for p in procs), "the job ended before the switch was restarted"
            switch.process.kill()
            switch.process.wait()
            switch.start([])
            switch.wait_ready(30)
            deadline = time.monotonic() + 30
            while JobSpec.load(spec_path).trees[0].incarnation < restart:
                assert time.monotonic() < deadline, "watch did not provision the restarted switch"
                time.sleep(0.1)
        results = first + reports(procs, wait=300)
        assert_all_exact(results, 4, repeat=40)
        assert [r["recoveries"] for r in results if r["run"] == 39] == [3, 3, 3, 3]
    finally:
        stop.set()
        watch.join()
        controller.check_switches()
        controller.delete_job("phoenix")


@pytest.mark.parametrize("mode, alpha", [("ring", None), ("hybrid", 0.4), ("hybrid", None)])
def test_ring_and_hybrid_jobs(single8, mode, alpha):
    """The same worker command over a pure ring and over the switch and a ring at once (TCP between
    the hosts, routed by ina.p4): every element within the bound, on every rank."""
    net, controller = single8
    hosts = ["h1", "h2", "h3", "h4"]
    name = f"{mode}-{alpha}".replace(".", "")
    spec = controller.create_job(name, hosts, pool_size=32, mode=mode, alpha=alpha)
    try:
        share = spec.choose(SIZE, np.float32).ina_share  # a hybrid left to the model: its split for the size
        assert share == (0.0 if mode == "ring" else alpha) if mode == "ring" or alpha is not None else 0 <= share <= 1
        assert_all_exact(reports(start_workers(net, controller.spec_dir / f"{name}.json", hosts, repeat=2)), 4, 2)
    finally:
        controller.delete_job(name)


def test_a_killed_peer_fails_a_hybrid_job_clearly(single8):
    net, controller = single8
    hosts = ["h1", "h2", "h3"]
    controller.create_job("half", hosts, pool_size=32, mode="hybrid", alpha=0.5)
    procs = start_workers(net, controller.spec_dir / "half.json", hosts, size=2_000_000, repeat=50, timeout=2.0)
    time.sleep(1.5)  # mid-job (calls take a fraction of a second: 50 of them run for longer)
    assert all(p.poll() is None for p in procs), "the job ended before the peer was killed"
    procs[2].kill()
    start = time.monotonic()
    survivors = [r for r in reports(procs[:2], wait=60) if "error" in r or r["run"] == 49]
    procs[2].communicate()
    assert time.monotonic() - start < 20
    assert len(survivors) == 2
    for r in survivors:
        assert r["error"].startswith(("AllreduceError: ring part of job half",
                                      "AllreduceTimeout: tree 1/1 of job half")), r
    controller.delete_job("half")


def test_calibrate_measures_on_the_hosts_and_makes_the_model_again(single8):
    """`ina-ctl calibrate`'s bursts run on the job's own hosts (bmv2-env's host_exec): C, the ring's rate and
    the hosts' latency go into the job's model (and the latency into the controller's); the job keeps working."""
    from controller.calibrate import calibrate

    net, controller = single8
    hosts = ["h1", "h2", "h3", "h4"]
    before = controller.create_job("cal", hosts, pool_size=32)
    try:
        measured = calibrate(controller, "cal", values=50_000, timeout=10.0)
        layouts = [x.name for x in controller.job_plan("cal").layouts]
        assert layouts == ["flat", "halving_doubling"]  # four ranks on one switch
        assert measured.ina_mbps > 0 and measured.host_latency >= 0
        assert sorted(measured.ring_mbps) == sorted(measured.ring_efficiency) == sorted(layouts)
        assert all(x > 0 for x in measured.ring_mbps.values())
        assert all(0 < x <= 1 for x in measured.ring_efficiency.values())
        assert set(measured.seconds) == {"ina", "one value", *(f"ring ({x})" for x in layouts)}
        assert min(measured.seconds.values()) > 0
        # per round trip, not per call: a one-value call's two round trips take less than the call
        assert measured.host_latency < measured.seconds["one value"] / 2
        record = controller.state.jobs["cal"].calibration
        assert record["ring_mbps"] == measured.ring_mbps and record["host_latency"] == measured.host_latency
        assert record["ring_efficiency"] == measured.ring_efficiency
        assert controller.host_latency == measured.host_latency  # later jobs' models take it too
        assert measured.spec.trees == before.trees and measured.spec.model == controller.job_plan("cal").model
        assert measured.spec.model != before.model  # the measured latency (and C) changed its numbers
        assert sorted(controller.state.jobs) == ["cal"]  # the temporary jobs are gone
        assert_all_exact(reports(start_workers(net, controller.spec_dir / "cal.json", hosts)), 4)
    finally:
        controller.delete_job("cal")
