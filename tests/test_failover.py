"""A switch or link that stays down mid-call, in Mininet (root): the job goes on, exactly.

`Controller.watch` (what `ina-ctl watch` runs) finds the failure (a switch whose stream ended and
that does not answer again; a port the built-in target reports down) and moves each tree that
crosses it onto what survives; the workers (`ina-allreduce`, watching their job spec) send
their last window again, and every call completes within the stated bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controller.controller import Controller
from controller.failover import DEAD_AFTER
from controller.pipeline import PipelineOptions
from controller.topology import Topology, leaf_spine
from tests.mininet_env import USABLE, needs_mininet
from tests.test_e2e import assert_all_exact, first_reports, reports, start_workers
from worker.jobspec import JobSpec

if USABLE:
    from bmv2env.network import InaNetwork

pytestmark = needs_mininet
HOSTS = ["h1", "h2", "h3", "h4"]
CALLS = 20
SIZE = 1_000_000  # float32 values per call: 4 MB, about 0.4 s at the host links' 100 Mbit/s


@contextmanager
def watched_leaf_spine(tmp_path: Path) -> Iterator[tuple[InaNetwork, Controller]]:
    """leaf_spine(2, 2, 2), host links twice the fabric's (so a job packs a tree per spine), with
    the controller's watch running as `ina-ctl watch` would."""
    topology = Topology.from_dict(leaf_spine(2, 2, 2, host_bw=100, fabric_bw=50))
    with InaNetwork(topology, tmp_path / "net", target="builtin") as net:
        # V = 64: calls last long enough (4x the packets of the default 256) to fail a switch mid-call
        with Controller(net.network, tmp_path / "state.json", PipelineOptions(values=64)) as controller:
            controller.setup()
            stop = threading.Event()
            watch = threading.Thread(target=controller.watch, kwargs={"interval": 0.5, "stop": stop})
            watch.start()
            try:
                yield net, controller
            finally:
                stop.set()
                watch.join()


def wait_for_version(spec_path: Path, version: int, timeout: float = 30, poll: float = 0.1) -> JobSpec:
    deadline = time.monotonic() + timeout
    while (spec := JobSpec.load(spec_path)).version < version:
        assert time.monotonic() < deadline, f"the plan never reached version {version}"
        time.sleep(poll)
    return spec


def test_a_spine_of_a_two_tree_job_killed_mid_call(tmp_path):
    with watched_leaf_spine(tmp_path) as (net, controller):
        before = controller.create_job("packed", HOSTS, pool_size=16, mode="ina")
        assert sorted(t.root for t in before.trees) == ["spine1", "spine2"]
        spec_path = controller.spec_dir / "packed.json"
        procs = start_workers(net, spec_path, HOSTS, size=SIZE, repeat=CALLS, timeout=10.0)
        first = first_reports(procs)
        assert all(p.poll() is None for p in procs), "the job ended before the spine was killed"
        spine2 = net.switch("spine2")
        killed = time.monotonic()
        spine2.process.kill()
        spine2.process.wait()
        after = wait_for_version(spec_path, 1, poll=0.01)
        moved = time.monotonic() - killed
        print(f"spine2 killed: its tree moved after {moved:.3f} s of wall time")
        # its stream ended and it did not answer the next round (woken by the stream's end): not DEAD_AFTER
        assert moved < DEAD_AFTER, moved
        assert [t.root for t in after.trees] == ["spine1", "spine1"]
        assert [t.share for t in after.trees] == [t.share for t in before.trees]
        results = first + reports(procs, wait=240)
        assert_all_exact(results, 4, repeat=CALLS)
        assert [r["recoveries"] for r in results if r["run"] == CALLS - 1] == [1, 1, 1, 1], results


def test_a_leaf_uplink_down_mid_call(tmp_path):
    """A job of one tree: the uplink of leaf1 towards the tree's spine goes down, the built-in
    target reports its port down, and the tree moves to the other spine."""
    with watched_leaf_spine(tmp_path) as (net, controller):
        (tree,) = controller.create_job("single", HOSTS, pool_size=16, trees=1, mode="ina").trees
        other = {"spine1": "spine2", "spine2": "spine1"}[tree.root]
        spec_path = controller.spec_dir / "single.json"
        procs = start_workers(net, spec_path, HOSTS, size=SIZE, repeat=CALLS, timeout=10.0)
        first = first_reports(procs)
        assert all(p.poll() is None for p in procs), "the job ended before the link went down"
        net.mininet.configLinkStatus("leaf1", tree.root, "down")
        after = wait_for_version(spec_path, 1)
        assert [t.root for t in after.trees] == [other] and after.trees[0].job_id == tree.job_id
        results = first + reports(procs, wait=240)
        assert_all_exact(results, 4, repeat=CALLS)
        assert [r["recoveries"] for r in results if r["run"] == CALLS - 1] == [1, 1, 1, 1], results


def test_no_path_left_is_a_clear_timeout(tmp_path):
    """Both spines gone: no tree joins the leaves; the workers fail with today's clear error."""
    with watched_leaf_spine(tmp_path) as (net, controller):
        controller.create_job("doomed", HOSTS, pool_size=16, mode="ina")
        spec_path = controller.spec_dir / "doomed.json"
        procs = start_workers(net, spec_path, HOSTS, size=SIZE, repeat=CALLS, timeout=6.0)
        time.sleep(1.0)
        for name in ("spine1", "spine2"):
            net.switch(name).process.kill()
            net.switch(name).process.wait()
        errors = [r["error"] for r in reports(procs, wait=120) if "error" in r]
        assert len(errors) == 4 and all(e.startswith("AllreduceTimeout: tree ") for e in errors), errors
        assert JobSpec.load(spec_path).version == 0
