"""Lanes (issue 42): a planned tree installed as L trees on the same switches, each with its own job id, pool,
worker port and 1/L of the tree's share and rate, so a worker runs one tree's slots on L threads.  Nothing
changes in the P4 program or the wire: to the switches and the workers a lane is a tree."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from controller.job_plan import MAX_LANES, MIN_LANE_POOL, JobError, lane_count, plan_job
from controller.model import NO_HOST_COST, HostCost
from controller.topology import Topology, leaf_spine
from virtual_fabric import host_cost, runs
from virtual_fabric.fabric import Fabric
from worker import protocol
from worker.cli import gradient
from worker.jobspec import JobSpec

P = protocol.load(256)
MEASURED = host_cost.measured()


def test_lane_count_is_what_one_core_moves_of_the_trees_rate():
    one_core = P.frame_bytes * 8 / MEASURED.per_packet(P.packet_bytes) / 1e6  # Mb/s of wire one core keeps up with
    assert 2000 < one_core < 12000  # the calibration's 1.4 us per packet of 1,040 bytes: about 6 Gbit/s
    assert lane_count(50, MEASURED, P.packet_bytes, P.frame_bytes) == 1  # Mininet's links: one lane
    assert lane_count(one_core, MEASURED, P.packet_bytes, P.frame_bytes) == 1
    assert lane_count(one_core * 1.01, MEASURED, P.packet_bytes, P.frame_bytes) == 2
    assert lane_count(one_core * 3.5, MEASURED, P.packet_bytes, P.frame_bytes) == 4
    assert lane_count(100_000, MEASURED, P.packet_bytes, P.frame_bytes) == MAX_LANES  # capped
    assert lane_count(100_000, MEASURED, P.packet_bytes, P.frame_bytes, most=32) == math.ceil(100_000 / one_core)
    assert lane_count(100_000, NO_HOST_COST, P.packet_bytes, P.frame_bytes) == 1  # hosts' cost unknown


def _topology() -> Topology:
    return Topology.from_dict(leaf_spine(2, 2, 2, host_bw=100, fabric_bw=50))


def test_a_plan_in_lanes_has_each_planned_tree_lanes_times_with_its_share_and_pool_split():
    hosts = ["h1", "h2", "h3", "h4"]
    plain = plan_job(_topology(), hosts, P, mode="ina", pool_size=64)
    laned = plan_job(_topology(), hosts, P, mode="ina", pool_size=64, lanes=4)
    assert len(plain.tree_plan.trees) == 2 and laned.lanes == 4 and laned.pool_size == 16
    assert len(laned.tree_plan.trees) == 8
    for i, t in enumerate(laned.tree_plan.trees):
        planned = plain.tree_plan.trees[laned.lane_of(i)]
        assert t.tree == planned.tree
        assert t.share == pytest.approx(planned.share / 4) and t.rate == pytest.approx(planned.rate / 4)
    assert sum(t.share for t in laned.tree_plan.trees) == pytest.approx(1.0)
    # the model: parallel trees sharing the planned trees' links, so the same time for a call without host costs
    assert laned.choose(25 << 20).seconds == pytest.approx(plain.choose(25 << 20).seconds, rel=0.01)
    assert [t["lane_of"] for t in laned.to_dict(_topology())["trees"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    # fewer lanes where the pool is too small for MIN_LANE_POOL slots each; auto without a host cost: one
    assert plan_job(_topology(), hosts, P, pool_size=2 * MIN_LANE_POOL, lanes=4).lanes == 2
    assert plan_job(_topology(), hosts, P, pool_size=4, lanes=4).lanes == 1
    assert plan_job(_topology(), hosts, P, lanes="auto").lanes == 1
    with pytest.raises(JobError, match="lanes"):
        plan_job(_topology(), hosts, P, lanes=0)


def _single(mbps: float) -> Topology:
    return runs.build_topology(runs.RunConfig(topology="single:4", bw=mbps))


def test_auto_lanes_follow_the_hosts_cost_at_the_trees_rate():
    fast, hosts = _single(20_000), ["h1", "h2", "h3", "h4"]
    rate = plan_job(fast, hosts, P).tree_plan.trees[0].rate
    auto = plan_job(fast, hosts, P, host_cost=MEASURED, lanes="auto")
    one_core = P.frame_bytes * 8 / MEASURED.per_packet(P.packet_bytes) / 1e6
    assert auto.lanes == lane_count(rate, MEASURED, P.packet_bytes, P.frame_bytes) == math.ceil(rate / one_core) > 1
    assert plan_job(_single(50), hosts, P, host_cost=MEASURED, lanes="auto").lanes == 1


def test_lane_trees_on_cores_of_their_own_are_paced_by_one_core_each():
    """One core serving the lanes is as slow as one tree; a core per lane takes the host's pace off."""
    fast = _single(100_000)
    hosts = ["h1", "h2", "h3", "h4"]
    one = plan_job(fast, hosts, P, host_cost=MEASURED, mode="ina")
    lanes_one_core = plan_job(fast, hosts, P, host_cost=MEASURED, mode="ina", lanes=4)
    lanes_four = plan_job(fast, hosts, P, host_cost=HostCost(**{**vars(MEASURED), "cores": 4}), mode="ina", lanes=4)
    size = 64 << 20
    assert lanes_one_core.choose(size).seconds == pytest.approx(one.choose(size).seconds, rel=0.01)
    assert lanes_four.choose(size).seconds < one.choose(size).seconds / 3


def test_a_job_in_lanes_gets_distinct_ids_and_ports_and_sums_exactly_as_without():
    """Through the fabric's controller (the real one, in process) and the workers' own core: a job of 2 packed
    trees in 2 lanes installs 4 trees, and each call's sum is bit for bit the job's without lanes."""
    hosts = ["h1", "h2", "h3", "h4"]
    arrays = [[gradient(c, r, 40_000, "float32") for c in range(2)] for r in range(4)]
    sums = {}
    for lanes in (1, 2):
        fabric = Fabric(_topology(), seed=5, values=64)
        job = fabric.create_job("j", hosts, arrays, mode="ina", pool_size=32, lanes=lanes)
        spec = job.spec
        assert len(spec.trees) == 2 * lanes and spec.lanes == lanes and spec.pool_size == 32 // lanes
        assert len({t.job_id for t in spec.trees}) == len({t.port for t in spec.trees}) == 2 * lanes
        assert sum(t.share for t in spec.trees) == pytest.approx(1.0)
        assert [t.lane_of for t in spec.trees] == [i // lanes for i in range(2 * lanes)]
        for switch in ("leaf1", "leaf2"):  # on every leaf both trees: two pools of 32 slots, as without lanes
            held = fabric.controller.room(switch)
            assert held.pool_slots - held.free_slots == 64 and held.cells - held.free_cells == 2 * lanes
        assert JobSpec.from_json(spec.to_json(), "here") == spec
        written_before = json.loads(spec.to_json())  # a spec from before lanes: each tree a tree of its own
        for t in written_before["trees"]:
            del t["lane_of"]
        old = JobSpec.from_json(json.dumps(written_before), "an older spec")
        assert old.lanes == 1 and [t.lane_of for t in old.trees] == [None] * 2 * lanes
        fabric.run(60.0)
        records = [w.records for w in job.workers]
        assert all(r.result is not None for rs in records for r in rs)
        sums[lanes] = [records[0][c].result for c in range(2)]
        assert all(np.array_equal(rs[c].result, sums[lanes][c]) for rs in records for c in range(2))
    assert all(np.array_equal(a, b) for a, b in zip(sums[1], sums[2]))


@pytest.mark.parametrize("core", ["reference", "native"])
@pytest.mark.parametrize("config", [
    runs.RunConfig(topology="single:4", size=65536, lanes=2),  # lanes share every host's link
    runs.RunConfig(topology="leaf_spine:2,2,2", fabric_bw=45, size=65536),  # so do packed trees (no lanes)
], ids=["lanes", "packed"])
def test_trees_sharing_a_host_link_take_no_storm_of_copies(config, core, monkeypatch):
    """A second tree starts from the first one's round trip (``engine._share_round_trip``), measured with empty
    queues; its own packets queue behind the first tree's on the host's link.  Taken once, that short estimate
    timed the second tree's first packets out, Karn's rule then left it no round trip of its own, and every one
    of its packets went twice: single:4 at 50 Mbit/s in 2 lanes took 208 ms against 55.6 in one (3,768 copies);
    2 packed trees 77 ms against 65 (324 copies).  It follows the sibling's now, until it has its own."""
    monkeypatch.setenv("INA_NATIVE", "1" if core == "native" else "0")
    alone = runs.run(dataclasses.replace(config, lanes=1, trees=1))
    shared = runs.run(config)
    assert shared["job"]["trees"] == 2 and alone["job"]["trees"] == 1
    assert shared["check"]["within_bound"] and shared["check"]["identical"], shared["check"]
    assert shared["calls"][0]["seconds"] < 1.1 * alone["calls"][0]["seconds"]
    assert shared["where"]["retransmissions"] <= 8


def test_a_host_whose_core_is_busy_waits_for_it_rather_than_turning_at_one_instant(monkeypatch):
    """A core busy receiving while results for it have reached the loop: the loop woke at once for them, found
    the core busy, and woke at once again, for ever (fat_tree:4 at 100 Gbit/s in 4 lanes on 8 cores never
    ended).  It wakes when the core is free."""
    from virtual_fabric import hosts
    turn, seen = hosts.SimWorker._turn, {}

    def counted(self):
        key = (self.rank, self.loop.now)
        seen[key] = seen.get(key, 0) + 1
        assert seen[key] < 1000, f"worker {self.rank} turned 1,000 times at {self.loop.now}"
        turn(self)

    monkeypatch.setattr(hosts.SimWorker, "_turn", counted)
    config = runs.RunConfig(topology="fat_tree:4", workers=16, bw=100000, delay="1us", size=262144, calls=2,
                            pool_size=64, host_cost="measured", host_cores=8, lanes=4, check=False)
    result = runs.run(config)
    assert all(c["seconds"] < 1.1 * c["model"] for c in result["calls"])
