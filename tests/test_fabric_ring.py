"""Rings in the virtual fabric: the flow-level network (virtual_fabric/flows.py), the ring on it in each
layout (virtual_fabric/ring.py), and ring and hybrid jobs end to end against the model
(controller/model.py, worker/tuner.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from controller.fair_share import max_min_rates
from controller.model import FLOOR
from controller.rings import TCP_WIRE
from controller.topology import Topology, fat_tree, leaf_spine, single
from tests.test_ring import run_ring
from virtual_fabric.events import EventLoop
from virtual_fabric.fabric import Fabric
from virtual_fabric.flows import FlowNetwork, route
from virtual_fabric.host_latency import HOST_LATENCY
from virtual_fabric.links import Channel
from worker import calls, protocol
from worker.cli import bound_ok
from worker.ring import HEADER, RingWorker
from worker.ring_layout import Layout, reduce_sum

MB = 1e6 / 8  # bytes per second at 1 Mb/s


def _channel(loop: EventLoop, name: str, mbps: float, got: list | None = None, delay: float = 0.0) -> Channel:
    return Channel(loop, name, mbps * 1e6, delay, 1 << 30, random.Random(0),
                   (lambda f: got.append(loop.now)) if got is not None else (lambda f: None))


def _topology(data: dict, mbps: float, delay: str | None = None, agg_pps: float | None = None) -> Topology:
    options = {"bw": mbps, **({"delay": delay} if delay else {})}
    data["links"] = [[a, b, options] for a, b, *_ in data["links"]]
    if agg_pps is not None:
        for s in data["switches"].values():
            s["agg_pps"] = agg_pps
    return Topology.from_dict(data)


# --- (a) max-min fairness ----------------------------------------------------------------------

def test_two_flows_on_one_link_get_half_each_then_the_survivor_gets_it_all() -> None:
    loop = EventLoop()
    link = _channel(loop, "a -> b", 8)  # 1 MB/s
    net, done = FlowNetwork(loop), {}
    net.start([link], 1e6, None, lambda f: done.setdefault("big", loop.now))
    net.start([link], 0.5e6, None, lambda f: done.setdefault("small", loop.now))
    loop.run(10)
    # 0.5 MB/s each until the small one is done at 1 s; then 0.5 MB left at 1 MB/s
    assert done == pytest.approx({"small": 1.0, "big": 1.5})
    assert link.rate == 8e6 and net.active(link) == 0
    assert link.stats.flow_busy == pytest.approx(1.5) and link.stats.busy == pytest.approx(1.5)


def test_a_capped_flow_leaves_the_rest_to_the_other() -> None:
    loop = EventLoop()
    a, b, c = (_channel(loop, n, r) for n, r in (("a", 8), ("b", 4), ("c", 10)))
    net, done = FlowNetwork(loop), {}
    capped = net.start([a], 0.25e6, 2e6, lambda f: done.setdefault("capped", loop.now))  # bytes, bits/s
    free = net.start([a], 0.75e6, None, lambda f: done.setdefault("free", loop.now))
    loop.run(0.0)
    assert (capped.rate, free.rate) == (2e6, 6e6)
    loop.run(10)
    assert done == pytest.approx({"capped": 1.0, "free": 1.0})
    # progressive filling over three links: x on a and b, y on a, z on b and c; b (4) fills first at 2
    # each (x, z), then a gives y the rest: 8 - 2 = 6, c is left with 8 unused
    paths, capacity = [["a", "b"], ["a"], ["b", "c"]], {"a": 8e6, "b": 4e6, "c": 10e6}
    assert max_min_rates(paths, [None, None, 3e6], capacity) == pytest.approx([2e6, 6e6, 2e6])
    # a cap below the fair share: z at 1, x gets the rest of b (3), y the rest of a (5)
    assert max_min_rates(paths, [None, None, 1e6], capacity) == pytest.approx([3e6, 5e6, 1e6])


# --- (d) packets beside flows ------------------------------------------------------------------

def test_packets_get_what_the_flows_leave_and_the_link_back_after() -> None:
    loop, got = EventLoop(), []
    link = _channel(loop, "a -> b", 8, got)  # 1,000 bytes take 1 ms at 8 Mb/s
    net, done = FlowNetwork(loop), []
    net.start([link], 0.75e6, 6e6, lambda f: done.append(loop.now))  # 6 Mb/s for 1 s
    loop.run(0.5)
    assert link.rate == pytest.approx(2e6)
    link.send(bytes(1000))  # 4 ms at the 2 Mb/s left
    loop.run(0.9)
    assert got == pytest.approx([0.504])
    loop.run(2.0)
    assert done == pytest.approx([1.0]) and link.rate == 8e6
    loop.at(2.0, link.send, bytes(1000))
    loop.run(3.0)
    assert got == pytest.approx([0.504, 2.001])
    # the flow's share and the packets' (at the link's own rate) both count as busy
    assert link.stats.flow_busy == pytest.approx(0.75)
    assert link.stats.busy == pytest.approx(0.75 + 0.002)
    # an uncapped flow takes the link: packets keep the floor, and are not stalled forever
    net.start([link], 1e6, None, lambda f: None)
    loop.run(3.0)
    assert link.rate == pytest.approx(FLOOR * 8e6)


# --- paths and sums ----------------------------------------------------------------------------

def test_routes_follow_the_shortest_paths() -> None:
    fab = Fabric(Topology.from_dict(fat_tree(4)))
    names = [c.name for c in route(fab.topology, fab.channels, "h1", "h2")]  # same edge switch
    assert names == ["h1 -> edge1-p1", "edge1-p2 -> h2"]
    far = [c.name for c in route(fab.topology, fab.channels, "h1", "h16")]  # another pod: up to a core
    assert len(far) == 6 and far[0] == "h1 -> edge1-p1" and far[-1].endswith("-> h16")
    assert any(n.startswith("core") for n in far)
    spine = Fabric(Topology.from_dict(leaf_spine(2, 2, 2)))
    assert len(route(spine.topology, spine.channels, "h1", "h3")) == 4


LAYOUTS = [Layout.flat(5), Layout("halving_doubling", (2, 2, 2), (0, 1, 2, 3, 4, 5, 6, 7)),
           Layout("hierarchical", (2, 3), (3, 0, 1, 2, 5, 4))]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[x.name for x in LAYOUTS])
@pytest.mark.parametrize("wide", ["float32", "float64"])
def test_reduce_sum_is_the_real_rings_bits(wide: str, layout: Layout) -> None:
    """reduce_sum against RingWorker on loopback, in each layout: allreduce_ in float32, allreduce_cast from
    float64 (the fabric's ring sums are what the ranks end with, bit for bit)."""
    n, count = len(layout.order), 1003
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal(count) * 10.0 ** rng.uniform(-3, 3, count)).astype(np.float32).astype(wide)
          for _ in range(n)]

    def body(w: RingWorker) -> np.ndarray:
        x = xs[w.rank].copy()
        return w.allreduce_(x, layout) if wide == "float32" else w.allreduce_cast(x, np.dtype(np.float32), layout)

    results = run_ring(n, body, layouts=[layout])
    ours = reduce_sum([x.copy() for x in xs], layout, np.dtype(np.float32))
    for r in results:
        assert not isinstance(r, BaseException), r
        assert r.dtype == ours.dtype and np.array_equal(r, ours)
    if wide == "float32":  # and the order matters: numpy's own float32 sum differs somewhere
        assert not np.array_equal(ours, np.sum(xs, axis=0, dtype=np.float32))


# --- (b) a ring alone ----------------------------------------------------------------------------

def test_a_ring_alone_takes_the_bandwidth_optimal_time_and_sums_as_the_worker() -> None:
    n, mbps, count = 4, 100.0, 262_144  # 1 MiB of float32
    fab = Fabric(_topology(single(n), mbps, delay="1ms"))
    rng = np.random.default_rng(1)
    floats = [rng.standard_normal(count).astype(np.float32) for _ in range(n)]
    ints = [rng.integers(-2**28, 2**28, 1000, dtype=np.int32) for _ in range(n)]
    job = fab.create_job("ring", [f"h{i}" for i in range(1, n + 1)], [[f, i] for f, i in zip(floats, ints)],
                         mode="ring", ring_layout="flat")
    assert job.spec.mode == "ring" and not job.spec.trees and all(not w.trees for w in job.workers)
    fab.run(10)
    assert fab.finished()
    first = [w.records[0] for w in job.workers]
    took = first[0].ended - first[0].started
    # 2(N-1)/N x K in TCP segments at L; each of the 2(N-1) steps crosses two 1 ms links once, then the host
    model = 2 * (n - 1) / n * count * 4 * TCP_WIRE * 8 / (mbps * 1e6) + 2 * (n - 1) * (2e-3 + HOST_LATENCY)
    assert took == pytest.approx(model, rel=0.005), (took, model)
    assert first[0].choice.seconds == pytest.approx(took, rel=0.005)  # the worker's own prediction
    assert all(r.error is None and r.ring_seconds == pytest.approx(took) and r.trees_seconds is None for r in first)
    assert all(np.array_equal(r.result, first[0].result) for r in first)  # the same bits everywhere
    flat = Layout.flat(n)
    assert np.array_equal(first[0].result, reduce_sum([f.copy() for f in floats], flat, np.float32))  # its order
    _, ok = bound_ok(first[0].result, floats, 256, summed_in_type=True)
    assert ok
    second = [w.records[1].result for w in job.workers]  # int32: summed in int64, exact
    assert all(np.array_equal(s, np.sum(ints, axis=0, dtype=np.int64).astype(np.int32)) for s in second)
    assert job.workers[0].time_in["ring"] == pytest.approx(fab.loop.now, rel=1e-6)
    report = "\n".join(fab.report())
    assert "ring: flow level, 4 ranks, layouts flat x2" in report and "ring flows" in report
    assert all(c.rate == c.line_rate for c in fab.all_channels() if c.line_rate)  # every link given back
    wire = 2 * (n - 1) * ((count // n * 4 + 1000 // n * 8) + 2 * HEADER.size) * TCP_WIRE  # both calls, per rank
    assert fab.jobs["ring"].ring.wire_bytes == pytest.approx(n * wire, rel=0.01)


@pytest.mark.parametrize("layout", ["flat", "hierarchical", "halving_doubling"])
def test_each_layout_of_a_ring_on_a_fat_tree_takes_the_models_time(layout: str) -> None:
    """16 ranks on fat_tree(4), each layout: the time the model predicts (its flows' rates on the routes,
    each level's mean path round its rings, the host's latency), and the same sums as a real ring's."""
    fab = Fabric(_topology(fat_tree(4), 1000.0, delay="20us"))
    hosts = [f"h{i}" for i in range(1, 17)]
    arrays = [np.random.default_rng(i).standard_normal(50_000).astype(np.float32) for i in range(16)]
    job = fab.create_job("ring", hosts, [[a] for a in arrays], mode="ring", ring_layout=layout)
    assert [x.name for x in job.spec.ring_arrangements] == ["flat", "hierarchical", "halving_doubling"]
    fab.run(10)
    records = [w.records[0] for w in job.workers]
    took = records[0].ended - records[0].started
    assert records[0].choice.layout == layout
    assert took == pytest.approx(records[0].choice.seconds, rel=0.03), (took, records[0].choice.seconds)
    want = reduce_sum([a.copy() for a in arrays], job.spec.layout(layout), np.float32)
    assert all(np.array_equal(r.result, want) for r in records)
    steps = {"flat": 30, "hierarchical": 2 * (1 + 1 + 3), "halving_doubling": 8}[layout]
    assert job.spec.layout(layout).steps == steps


def test_a_dead_rank_fails_the_others_ring_parts() -> None:
    n = 4
    fab = Fabric(_topology(single(n), 100.0))
    arrays = [[np.ones(100_000, np.float32)] for _ in range(n)]
    job = fab.create_job("ring", [f"h{i}" for i in range(1, n + 1)], arrays, mode="ring", ring_layout="flat")
    fab.loop.at(0.005, job.workers[2].kill)
    fab.run(10)
    assert fab.finished()
    errors = [w.records[0].error for w in job.workers]
    assert errors[2] == "killed"
    assert all(e is not None and "ring part of job ring" in e and "rank 2 closed" in e
               for i, e in enumerate(errors) if i != 2)
    assert all(w.records[0].ended == pytest.approx(0.005) for w in job.workers)


# --- (c) a hybrid --------------------------------------------------------------------------------

def test_a_hybrid_runs_both_parts_at_once_as_the_model_says() -> None:
    n, mbps, C, pool, count = 4, 100.0, 50.0, 8, 262_144
    P = protocol.load(256, 48879)
    agg_pps = C * MB / P.frame_bytes * n  # one switch, N children: C = agg_pps / N x frame
    fab = Fabric(_topology(single(n), mbps, delay="0.05ms", agg_pps=agg_pps), values=256)
    hosts = [f"h{i}" for i in range(1, n + 1)]
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(count).astype(np.float32) for _ in range(n)]
    job = fab.create_job("hybrid", hosts, [[a] for a in arrays], mode="hybrid", pool_size=pool)
    chosen = job.spec.choose(count, np.float32, [0])  # as for a later call of the size; this one is its first:
    choice = job.spec.model.as_first(chosen, count, np.float32, [0], job.spec.ring_sum == "native")  # + a window
    assert choice.method == "hybrid" and choice.ina_share == chosen.ina_share and 0 < choice.ina_share < 1
    assert choice.ina_pace_mbps <= C + 1e-9
    assert choice.ring_pace_mbps == pytest.approx((mbps - choice.ina_pace_mbps,) * len(choice.ring_pace_mbps))
    fab.run(10)
    assert fab.finished()
    records = [w.records[0] for w in job.workers]
    assert all(r.error is None and r.choice == choice for r in records)
    took = records[0].ended - records[0].started
    assert records[0].trees_seconds == pytest.approx(choice.ina_seconds, rel=0.03)
    assert records[0].ring_seconds == pytest.approx(choice.ring_seconds, rel=0.03)
    assert took == pytest.approx(choice.seconds, rel=0.03), (took, choice.seconds)
    result = records[0].result
    assert all(np.array_equal(r.result, result) for r in records)
    _, ok = bound_ok(result, arrays, 256)
    assert ok
    chunks = calls.ina_chunks(choice.ina_share, count // 256)
    ring_part = result[chunks * 256:]  # float64 partial sums, cast once: the float64 sum rounded once
    exact = np.sum([a[chunks * 256:].astype(np.float64) for a in arrays], axis=0)
    layout = job.spec.layout(choice.layout)
    assert np.array_equal(ring_part, reduce_sum([a[chunks * 256:].astype(np.float64) for a in arrays], layout,
                                                np.float32))
    assert (np.abs(ring_part - exact) <= np.abs(exact) * 2.0**-24 + 1e-12).all()
    # the ring's flows took at most L - C of each host link while they ran, and gave it back
    uplink = job.workers[0].uplink
    assert 0 < uplink.stats.flow_busy <= records[0].ring_seconds * (mbps - choice.ina_pace_mbps) / mbps + 1e-9
    assert uplink.rate == mbps * 1e6 and fab.flows.active(uplink) == 0


def test_auto_picks_the_ring_when_the_switches_add_next_to_nothing() -> None:
    n = 4
    fab = Fabric(_topology(single(n), 100.0, agg_pps=100.0))
    arrays = [[np.full(5000, i + 1, np.float32)] for i in range(n)]
    job = fab.create_job("auto", [f"h{i}" for i in range(1, n + 1)], arrays)  # mode auto
    assert job.spec.mode == "auto"
    fab.run(10)
    assert all(w.records[0].choice.method == "ring" for w in job.workers)
    assert all(np.array_equal(w.records[0].result, np.full(5000, 10, np.float32)) for w in job.workers)
