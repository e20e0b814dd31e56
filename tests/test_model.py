"""The one model of a call (controller/model.py, controller/rings.py, worker/tuner.py): its formulas against
hand-computed cases, the ring layouts it finds in topologies, the choice per call, and the jobs that carry
it.  Its agreement with the virtual fabric is in tests/test_fabric_ring.py and tests/test_scale.py; the
per-call choice on real sockets in tests/test_worker.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from controller import plan
from controller.calibrate import calibrate
from controller.controller import JobError
from controller.entries import HIGH_WATER_CHILD
from controller.job_plan import plan_job
from controller.model import (
    DEFAULT_HOST_LATENCY,
    JobTree,
    aggregation_limit,
    call_model,
    sent_mbps,
    tree_pipe,
    trees_load,
)
from controller.rings import TCP_WIRE, layouts, level_shares, ring_cost, ring_efficiency, ring_wire_mbps
from controller.topology import Topology, fat_tree, leaf_spine, single
from tests.test_controller import Switches, controller, members
from worker import protocol
from worker.engine import INITIAL_IN_FLIGHT, Pacer
from worker.ring import HEADER
from worker.ring_layout import Layout, LayoutError, schedule
from worker.tuner import CallModel, HybridCost, InaCost, RingCost, TreePipe, equal_finish, split_chunks

P = protocol.load(256)
BITS = P.frame_bytes * 8


def _topology(data: dict, mbps: float, delay: str | None = None, agg_pps: float | None = None) -> Topology:
    options = {"bw": mbps, **({"delay": delay} if delay else {})}
    data["links"] = [[a, b, options] for a, b, *_ in data["links"]]
    for s in data["switches"].values():
        if agg_pps is not None:
            s["agg_pps"] = agg_pps
    return Topology.from_dict(data)


# --- the tuner's formulas ---------------------------------------------------------------------------

def test_a_tree_is_paced_by_its_link_or_by_its_window():
    f, rtt = 1e-6, 30e-6
    rate_bound = TreePipe(1.0, rtt, f)
    # 64 slots fill 30 us of a 1 us-per-frame link: the last of 1,000 frames leaves at 999 us, back 30 us later
    assert rate_bound.seconds(1000, 64, 64) == pytest.approx(999 * f + rtt)
    # 8 slots: 8 frames per round trip; the last window starts at 124 round trips, its last frame 7 us in
    assert rate_bound.seconds(1000, 8, 8) == pytest.approx(124 * rtt + 7 * f + rtt)
    # slow start from 8 on a window that wants 30: rounds of 8 and 16 frames, then the pipe is full
    assert rate_bound.seconds(1000, 64, INITIAL_IN_FLIGHT) == pytest.approx(2 * rtt + (1000 - 24 - 1) * f + rtt)
    assert rate_bound.seconds(20, 64, INITIAL_IN_FLIGHT) == pytest.approx(rtt + 11 * f + rtt)  # done in round 2
    assert rate_bound.seconds(0, 64, 64) == 0


def test_the_trees_split_a_call_as_the_spec_does_and_the_slowest_sets_the_time():
    assert split_chunks([0.25, 0.75], 12) == [3, 9] and split_chunks([0.5, 0.5], 3) == [2, 1]
    ina = InaCost((TreePipe(0.25, 10e-6, 4e-6), TreePipe(0.75, 10e-6, 1e-6)), window=256)
    # 400 chunks: 100 + 100 exponents on the first tree, 300 + 256 on the second in a size's first float call;
    # none in a later one (hinted: docs/protocol.md), none in int32
    assert ina.packets(400, exact=False, first=True) == [200, 556] and ina.packets(400, exact=True) == [100, 300]
    assert ina.packets(400, exact=False) == [100, 300]
    assert ina.seconds(400, exact=True) == pytest.approx(max(99 * 4e-6, 299 * 1e-6) + 10e-6)


def test_a_ring_is_its_latency_plus_what_each_rank_sends_over_its_rate():
    ring = RingCost("flat", 6, latency=100e-6, reduce_seconds=2e-9, gather_seconds=1e-9)
    assert ring.seconds(1000, 4, 4) == pytest.approx(100e-6 + 1000 * (8e-9 + 4e-9))
    assert ring.seconds(1000, 8, 4) == pytest.approx(100e-6 + 1000 * (16e-9 + 4e-9))  # float64 sums, float32 back
    assert ring.seconds(0, 4, 4) == 0


def _model(ring_latency: float, pace: float | None = 50.0) -> CallModel:
    """One tree of 2 us frames and 10 us round trips; a ring of 2 ns per byte each way; beside each other, the
    tree at its pace (the same 2 us frames) and the ring at half its rate."""
    ina = InaCost((TreePipe(1.0, 10e-6, 2e-6),), 64, pace)
    ring = RingCost("flat", 6, ring_latency, 2e-9, 2e-9)
    hybrid = HybridCost(InaCost((TreePipe(1.0, 10e-6, 2e-6),), 64, pace), RingCost("flat", 6, ring_latency, 4e-9,
                                                                                    4e-9, pace))
    return CallModel(256, ina, (ring,), (hybrid,))


def test_the_hybrid_split_makes_both_parts_take_as_long():
    model = _model(ring_latency=50e-6)
    elements = 256 * 10_000
    choice = model.hybrid_choice(elements, np.float32)
    assert choice is not None and 0 < choice.ina_share < 1
    assert choice.ina_seconds == pytest.approx(choice.ring_seconds, rel=0.01)
    # by hand: trees a = 10 us (a later call of the size: no exponent window), b = 2 us per chunk; ring
    # (float64 sums, float32 back) a = 50 us, b = (8 + 4) x 4 ns per element
    a_ina, b_ina, a_ring, b_ring = 10e-6, 2e-6 / 256, 50e-6, 12 * 4e-9
    share = (a_ring - a_ina + b_ring * elements) / ((b_ina + b_ring) * elements)
    assert choice.ina_share == pytest.approx(share)
    assert model.choose(elements, np.float32).method == "hybrid"


def test_a_ring_whose_latency_exceeds_the_trees_whole_call_is_never_taken():
    small = 256 * 10
    slow = _model(ring_latency=1.0)
    assert slow.hybrid_choice(small, np.float32) is None
    assert slow.choose(small, np.float32).method == "ina"
    assert slow.choose(small, np.float32, mode="hybrid").method == "ina"  # asked for, but it would only lose
    unpaced = _model(ring_latency=50e-6, pace=None)  # the trees take the whole link: no hybrid unless asked
    assert unpaced.hybrid_choice(256 * 10_000, np.float32) is None
    forced = unpaced.choose(256 * 10_000, np.float32, mode="hybrid", alpha=0.3)
    assert (forced.method, forced.ina_share) == ("hybrid", 0.3)


def test_modes_force_a_method_and_auto_takes_the_fastest():
    model = _model(ring_latency=50e-6)
    for elements in (256, 256 * 100, 256 * 100_000):
        options = model.options(elements, np.float32)
        auto = model.choose(elements, np.float32)
        assert auto.seconds <= min(c.seconds for c in options.values()) * (1 + 1e-9)
        for mode in ("ina", "ring"):
            assert model.choose(elements, np.float32, mode=mode).method == mode
    with pytest.raises(ValueError, match="mode must be one of"):
        model.choose(10, np.float32, mode="both")
    ringless = CallModel(256, None, (RingCost("flat", 2, 0.0, 1e-9, 1e-9),))
    with pytest.raises(ValueError, match="cannot run it"):
        ringless.choose(10, np.float32, mode="ina")


def test_crossovers_are_where_the_choice_changes():
    """A ring that starts sooner (5 us) but sends 8 ns per element against the trees' 1 us per chunk of 256:
    the ring below some size, the trees above it."""
    model = CallModel(256, InaCost((TreePipe(1.0, 10e-6, 1e-6),), 64), (RingCost("flat", 6, 5e-6, 1e-9, 1e-9),))
    (crossing,) = model.crossovers(np.float32)
    nbytes, below, above = crossing
    assert (below, above) == ("ring (flat)", "ina")
    assert model.choose(nbytes // 4, np.float32).method == "ina"
    assert model.choose(nbytes // 4 - 256, np.float32).method == "ring"
    # by hand, E elements in n = ceil(E / 256) chunks, a later call of the size (no exponent window):
    # 10 + (n - 1) x 1 us against 5 + E x 8 ns: equal at E = 1,000 (n = 4)
    assert 3 * 1024 < nbytes <= 4 * 1024
    # the first call of a size, a window of 64 exponent packets more: 10 + (n + 63) x 1 us, equal at n = 64.9
    first = model.choose(65 * 256, np.float32, first=True), model.choose(64 * 256, np.float32, first=True)
    assert [c.method for c in first] == ["ina", "ring"]


def test_the_model_goes_into_the_spec_and_back():
    model = _model(ring_latency=50e-6)
    assert CallModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model


def test_equal_finish_is_the_hybrids_closed_form_and_drops_a_part_too_slow_to_start():
    a1, b1, a2, b2, amount = 138e-6, 2e-6 / 256, 50e-6, 48e-9, 2_560_000
    first, second = equal_finish([(a1, b1), (a2, b2)], amount)
    assert first == pytest.approx((a2 - a1 + b2 * amount) / ((b1 + b2) * amount)) and first + second == pytest.approx(1)
    assert a1 + b1 * first * amount == pytest.approx(a2 + b2 * second * amount)  # both end at once
    assert equal_finish([(1e-6, 1e-9), (1.0, 1e-9), (2e-6, 1e-9)], 1000)[1] == 0.0  # its latency alone is longer


# --- what a calibration measures, through the model --------------------------------------------------------

def test_calibration_takes_C_from_a_float_calls_packets_exponents_in():
    """`ina-ctl calibrate`'s C: its timed calls follow a warm-up of their size, so a float call of n chunks sends
    n packets on each tree; a first call of the size n + min(W, n) (``InaCost.packets``).  The model's time for
    either at a rate gives that rate back; a first call counted a frame per chunk alone would say n / (n + W) of
    it: 94% at 1,024 chunks and 64 slots, half for a call within a window."""
    mbps, window = 400.0, 64
    f = BITS / (mbps * 1e6)  # the worker's frames, end to end
    for chunks in (1024, 40):
        for shares in ((1.0,), (0.5, 0.5)):
            # each tree at its share of the rate, its round trip one of its frames: a call is its packets' frames
            ina = InaCost(tuple(TreePipe(s, f / s, f / s) for s in shares), window)
            took = ina.seconds(chunks, exact=False)
            assert sent_mbps(ina, chunks, took, P.frame_bytes) == pytest.approx(mbps)
            assert chunks * BITS / took / 1e6 == pytest.approx(mbps)
            took = ina.seconds(chunks, exact=False, first=True)
            assert sent_mbps(ina, chunks, took, P.frame_bytes, first=True) == pytest.approx(mbps)
            exponents = len(shares) * min(window, chunks // len(shares))  # the chunks split evenly here
            assert chunks * BITS / took / 1e6 == pytest.approx(mbps * chunks / (chunks + exponents))


def test_calibration_takes_a_rings_rate_and_efficiency_through_its_cost():
    """The model's ring call at the link's rate gives the link's rate back (all but the steps' headers), and one
    slowed to an efficiency gives that efficiency back, in every layout."""
    n, mbps, elements = 4, 50.0, 1 << 20
    topology = _topology(single(n), mbps)
    hosts = [f"h{i}" for i in range(1, n + 1)]
    for layout in layouts(topology, hosts):  # flat and halving-doubling
        full, _ = ring_cost(topology, hosts, layout, 0.0)
        took = full.seconds(elements, 4, 4)
        assert ring_wire_mbps(layout, elements, 4, 4, took) == pytest.approx(mbps, rel=1e-4)
        assert sum(level_shares(layout)) == pytest.approx((n - 1) / n)
        assert ring_efficiency(full, elements, 4, 4, took) == 1.0
        slowed, _ = ring_cost(topology, hosts, layout, 0.0, efficiency=0.6)
        assert ring_efficiency(full, elements, 4, 4, slowed.seconds(elements, 4, 4)) == pytest.approx(0.6, rel=1e-4)


# --- layouts --------------------------------------------------------------------------------------

def test_layouts_follow_the_topology():
    fat16 = Topology.from_dict(fat_tree(16))
    hosts = sorted(fat16.hosts, key=lambda h: int(h[1:]))
    found = {x.name: x for x in layouts(fat16, hosts)}
    assert found["hierarchical"].levels == (8, 8, 16) and found["hierarchical"].steps == 58
    assert found["halving_doubling"].steps == 20 and found["flat"].steps == 2046
    assert {x.name: x.levels for x in layouts(fat16, hosts[:256])}["hierarchical"] == (8, 8, 4)
    assert {x.name: x.levels for x in layouts(fat16, hosts[:64])}["hierarchical"] == (8, 8)
    # 12 hosts: 8 under one leaf, 4 under the next: uneven leaves in one pod make one ring, the flat one
    assert [x.name for x in layouts(fat16, hosts[:12])] == ["flat"]
    spine = Topology.from_dict(leaf_spine(2, 3, 4))
    assert {x.name: x.levels for x in layouts(spine, sorted(spine.hosts))}["hierarchical"] == (4, 3)
    assert [x.name for x in layouts(Topology.from_dict(single(6)), [f"h{i}" for i in range(1, 7)])] == ["flat"]
    # a member order unlike the topology's: the layout keeps each leaf's hosts together (rank 0's leaf first)
    shuffled = ["h3", "h1", "h4", "h2"]
    small = Topology.from_dict(leaf_spine(2, 2, 2))
    hier = {x.name: x for x in layouts(small, shuffled)}["hierarchical"]
    assert [shuffled[r] for r in hier.order] == ["h3", "h4", "h1", "h2"] and hier.levels == (2, 2)


def test_every_layout_moves_the_bandwidth_optimal_bytes_in_its_steps():
    for layout in (Layout.flat(6), Layout("hierarchical", (3, 2), (0, 1, 2, 3, 4, 5)),
                   Layout("halving_doubling", (2, 2, 2), tuple(range(8)))):
        n, count = len(layout.order), 24_000
        for rank in range(n):
            steps, (lo, hi) = schedule(layout, rank, count)
            assert len(steps) == layout.steps
            sent = sum(b - a for s in steps for a, b in (s.send,))
            assert sent == 2 * (n - 1) * count // n and hi - lo == count // n
    with pytest.raises(LayoutError, match="do not describe"):
        Layout("flat", (3,), (0, 1, 1))


# --- the model's numbers from a topology ----------------------------------------------------------

def test_a_trees_round_trip_is_its_hops_and_the_hosts_latency():
    topology = _topology(single(4), 1000.0, delay="10us")
    members = ["h1", "h2", "h3", "h4"]
    tree = plan.pack_trees(topology, members, 32).trees[0]
    pipe = tree_pipe(topology, members, JobTree(tree.tree, tree.rate, tree.share), tree.rate, P.frame_bytes, 20e-6)
    hop = BITS / 1e9 + 10e-6
    assert pipe.round_trip == pytest.approx(2 * hop + 20e-6) and pipe.spacing == pytest.approx(BITS / 1e9)


def test_a_flat_rings_cost_on_one_switch_is_the_closed_form():
    n, mbps = 4, 1000.0
    topology = _topology(single(n), mbps, delay="10us")
    cost, load = ring_cost(topology, [f"h{i}" for i in range(1, n + 1)], Layout.flat(n), 20e-6)
    step = 2 * 10e-6 + 20e-6 + HEADER.size * TCP_WIRE * 8 / (mbps * 1e6)
    assert cost.latency == pytest.approx(2 * (n - 1) * step)
    assert cost.reduce_seconds == pytest.approx((n - 1) / n * TCP_WIRE * 8 / (mbps * 1e6))
    assert max(load.values()) == pytest.approx(mbps * 1e6)  # every host link full both ways


def test_a_measured_efficiency_slows_a_layouts_bytes_not_its_steps_and_steers_the_choice():
    """What ``ina-ctl calibrate`` measured of each layout: on four ranks of one switch halving-doubling moves the
    same bytes in 4 steps instead of 6, so it wins until the hosts show TCP gets less of the links in it."""
    n, mbps = 4, 50.0
    topology = _topology(single(n), mbps, delay="10us")
    hosts = [f"h{i}" for i in range(1, n + 1)]
    full, _ = ring_cost(topology, hosts, Layout("halving_doubling", (2, 2), (0, 1, 2, 3)), 1e-3)
    half, load = ring_cost(topology, hosts, Layout("halving_doubling", (2, 2), (0, 1, 2, 3)), 1e-3, None, 0.5)
    assert half.reduce_seconds == pytest.approx(2 * full.reduce_seconds)
    assert half.latency - full.latency == pytest.approx(4 * HEADER.size * TCP_WIRE * 8 / (mbps * 1e6))  # headers
    assert max(load.values()) == pytest.approx(mbps * 1e6 / 2)  # and it leaves the rest of the links

    def ring_layout(efficiency: dict[str, float] | None) -> str | None:
        model = call_model(topology, hosts, [], P, 8, None, 1e-3, None, efficiency)
        return model.choose(1 << 19, np.dtype(np.float32), mode="ring").layout  # 2 MiB

    assert ring_layout(None) == "halving_doubling"
    assert ring_layout({"flat": 0.75, "halving_doubling": 0.6}) == "flat"
    assert ring_layout({"flat": 0.75, "halving_doubling": 0.749}) == "halving_doubling"  # two steps outweigh 0.1%


def test_declared_aggregation_rates_bound_the_switches_share():
    spec = single(4)
    spec["switches"]["s1"]["agg_pps"] = 1000
    topology = Topology.from_dict(spec)
    members = ["h1", "h2", "h3", "h4"]
    trees = [JobTree(t.tree, t.rate, t.share) for t in plan.pack_trees(topology, members, 32).trees]
    limit, why = aggregation_limit(topology, members, trees, 1082)
    assert limit == pytest.approx(1000 / 4 * 1082 * 8 / 1e6) and "s1 sums 1000" in why
    assert aggregation_limit(Topology.from_dict(single(4)), members, trees, 1082)[0] == math.inf
    spec["switches"]["s1"]["agg_pps"] = -5
    with pytest.raises(ValueError, match="agg_pps must be a positive number"):
        Topology.from_dict(spec)


def test_a_hybrid_paces_the_trees_at_C_and_the_ring_at_the_rest():
    topology = _topology(single(4), 100.0, agg_pps=50e6 / BITS * 4)  # C = 50 Mb/s per worker
    members = ["h1", "h2", "h3", "h4"]
    trees = [JobTree(t.tree, t.rate, t.share) for t in plan.pack_trees(topology, members, 32).trees]
    model = call_model(topology, members, trees, P, 256)
    assert model.ina.pace_mbps == pytest.approx(50.0)  # INA alone keeps to C too
    (flat, hd) = model.hybrids
    assert flat.ina.pace_mbps == pytest.approx(50.0) and flat.ring.pace_mbps == pytest.approx((50.0,))
    assert hd.ring.pace_mbps == pytest.approx((50.0, 50.0))  # per level: one switch, every flow on host links
    assert model.choose(4 << 20, np.float32).method == "hybrid"  # a large call: both at once
    small = model.choose(1024, np.float32)
    assert small.method != "hybrid"  # a small one: a ring's latency alone is most of it
    # a small pool: the window, not C, bounds the trees, and the ring gets what they leave
    narrow = call_model(_topology(single(4), 100.0, delay="100us"), members, trees, P, 2)
    assert narrow.hybrids[0].ina.pace_mbps < 100.0 * 0.1
    assert narrow.hybrids[0].ring.pace_mbps == pytest.approx((100.0 - narrow.hybrids[0].ina.pace_mbps,))


def test_a_ring_chosen_while_the_windows_are_closed_opens_them_within_its_time():
    """8 workers on one switch at 100 Gbit/s, C = L/4, 256 slots, 256 KB: in a first call of the size (its
    exponent window in: ``first``) the ring beats the trees whose windows still open, but not the trees with
    open windows.  Greedy, auto would run the ring on every call and the windows would never open; instead the
    call sends beside the ring what the trees carry within its time, and later calls are faster than the ring.
    (Timed as a later call, with no exponent window, the closed trees beside the ring already beat it.)"""
    topology = _topology(single(8), 100_000.0, delay="1us")
    hosts = [f"h{i}" for i in range(1, 9)]
    job = plan_job(topology, hosts, P, "auto", pool_size=256, host_latency=20.5e-6, limit_mbps=25_000.0)
    model, elements = job.model, 65_536
    closed = [0] * len(model.ina.trees)
    now, opened = model.options(elements, np.float32, closed, first=True), model.options(elements, np.float32)
    ring = now["ring"]
    assert min(now.values(), key=lambda c: c.seconds) == ring
    assert min(c.seconds for c in opened.values()) < ring.seconds
    first = model.choose(elements, np.float32, closed, first=True)
    assert first.method == "hybrid" and first.seconds <= ring.seconds and first.ina_share > 0.1
    assert model.choose(elements, np.float32, closed).seconds < ring.seconds  # as a later call
    chunks = -(-elements // model.values)
    sent, later = closed, first
    for _ in range(3):  # the windows open over a few calls
        sent = [a + b for a, b in zip(sent, model.ina.packets(round(later.ina_share * chunks), False, sent is closed))]
        later = model.choose(elements, np.float32, sent)
    best_open = min(c.seconds for c in opened.values())
    assert later.seconds == pytest.approx(best_open) and best_open < ring.seconds
    assert model.choose(elements, np.float32, closed, mode="ring", first=True) == ring  # a mode still forces
    assert model.choose(elements, np.float32, None) == min(opened.values(), key=lambda c: c.seconds)


def test_a_hybrids_ring_leaves_the_trees_their_share_on_every_link():
    """On a fat tree several ring flows of one level cross one fabric link: each paced at L - C' they would
    fill it and leave the trees' frames 1% (C' then fell to the floor).  Paced per level at the slowest
    flow's share of what the trees leave, they do not."""
    topology = _topology(fat_tree(4), 100_000.0, delay="1us")
    hosts = sorted(topology.hosts, key=lambda h: int(h[1:]))
    job = plan_job(topology, hosts, P, "auto", pool_size=256, host_latency=20.5e-6, limit_mbps=50_000.0)
    trees = [JobTree(t.tree, t.rate, t.share) for t in job.tree_plan.trees]
    for h in job.model.hybrids:
        assert h.ina.pace_mbps == pytest.approx(50_000.0)  # C' stays at C
        layout = next(x for x in job.layouts if x.name == h.ring.layout)
        reserved = trees_load(topology, hosts, trees, h.ina.pace_mbps)
        _, load = ring_cost(topology, hosts, layout, 20.5e-6, reserved)
        for (index, d), bits in load.items():
            assert bits + reserved.get((index, d), 0.0) <= topology.links[index].capacity * 1e6 * (1 + 1e-9)
        assert len(h.ring.pace_mbps) == len(layout.levels) and min(h.ring.pace_mbps) > 0


def test_a_plan_prints_every_method_and_the_one_that_runs():
    topology = _topology(fat_tree(4), 100_000.0, delay="1us")
    hosts = sorted(topology.hosts, key=lambda h: int(h[1:]))
    job = plan_job(topology, hosts, P, "1", pool_size=256)
    data = json.loads(json.dumps(job.to_dict(topology, (1 << 20,))))
    call = data["calls"][0]
    assert set(call["later"]["methods"]) == {"ina", "ring"} and call["later"]["runs"] == "ina"
    ina = call["later"]["methods"]["ina"]
    assert ina["latency"] + ina["bandwidth"] == pytest.approx(ina["seconds"])
    assert call["first"]["seconds"] > call["later"]["seconds"]  # slow start on the first call
    assert [x["name"] for x in data["layouts"]] == ["flat", "hierarchical", "halving_doubling"]
    assert DEFAULT_HOST_LATENCY == 20e-6


# --- jobs ---------------------------------------------------------------------------------------

@pytest.fixture
def slow_switch():
    """Four hosts on 4 Mb/s links under a switch that sums 4,000 contributions per second (C = 2.51 Mb/s)."""
    spec = single(4)
    spec["switches"]["s1"]["agg_pps"] = 4000
    for link in spec["links"]:
        link.append({"bw": 4})
    s = Switches(Topology.from_dict(spec))
    yield s
    s.stop()


def test_a_job_carries_its_model_and_layouts_in_the_spec(slow_switch, tmp_path):
    c = controller(slow_switch, tmp_path)
    hosts = ["h1", "h2", "h3", "h4"]
    spec = c.create_job("mixed", hosts, pool_size=8)
    assert spec.mode == "auto" and spec.model is not None and spec.model == c.job_plan("mixed").model
    big = spec.choose(1 << 20, np.float32, [0])
    assert big.method == "hybrid" and big.ina_pace_mbps == pytest.approx(4000 / 4 * (42 + 272) * 8 / 1e6)
    levels = len(big.ring_pace_mbps)  # each level of its layout: the ring gets what is left, L - C
    assert big.ring_pace_mbps == pytest.approx((4.0 - big.ina_pace_mbps,) * levels)
    assert spec.ring_port is not None and spec.ring_port not in {t.port for t in spec.trees}
    assert spec.ring_peers == [f"10.0.0.{i}:{spec.ring_port}" for i in range(1, 5)]
    ring = c.create_job("ring", hosts, pool_size=8, mode="ring")
    assert (ring.trees, ring.mode) == ((), "ring") and ring.ring_port not in (spec.ring_port, None)
    assert {e.key("hdr.ina.job_id") for e in members(c, "s1")} == {spec.trees[0].job_id}  # the ring has no entries
    pure = c.create_job("pure", hosts, pool_size=8, mode="ina")
    assert pure.choose(1 << 20, np.float32).ina_pace_mbps == big.ina_pace_mbps  # paced at C
    c.close()


def test_a_calibration_goes_into_the_jobs_model_and_a_bad_record_counts_as_unmeasured(slow_switch, tmp_path):
    c = controller(slow_switch, tmp_path)
    hosts = ["h1", "h2", "h3", "h4"]
    c.create_job("ring", hosts, pool_size=8, mode="ring")
    assert c.job_plan("ring").choose(1 << 22).layout == "halving_doubling"
    spec = c.calibrated("ring", None, {"flat": 3.0, "halving_doubling": 2.0}, 1e-4,
                        {"flat": 0.75, "halving_doubling": 0.5})
    assert spec.choose(1 << 22, np.float32).layout == c.job_plan("ring").choose(1 << 22).layout == "flat"
    assert c.state.jobs["ring"].calibration["ring_efficiency"] == {"flat": 0.75, "halving_doubling": 0.5}
    c.state.jobs["ring"].calibration["ring_efficiency"] = {"flat": "fast", "halving_doubling": 7}
    assert c.job_plan("ring").choose(1 << 22).layout == "halving_doubling"  # as measured by nobody
    c.close()


@pytest.mark.parametrize("kwargs, message", [({"mode": "hybrid", "alpha": 2.0}, r"within \[0, 1\]"),
                                             ({"mode": "ina", "alpha": 0.5}, "chooses its own"),
                                             ({"mode": "both"}, "mode must be one of"),
                                             ({"ring_layout": "star"}, "ring layout must be one of"),
                                             ({"ring_layout": "halving_doubling"}, "does not fit these members")])
def test_bad_requests_change_nothing(slow_switch, tmp_path, kwargs, message):
    c = controller(slow_switch, tmp_path)
    before = (c.state.next_job_id, c.installed_entries("s1"))
    with pytest.raises(JobError, match=message):
        c.create_job("x", ["h1", "h2", "h3"], pool_size=8, **kwargs)
    assert (c.state.next_job_id, c.installed_entries("s1")) == before and not c.state.jobs
    c.close()


def test_the_pacer_lets_a_burst_through_then_holds_to_the_rate():
    pacer = Pacer(8.0, frame_bytes=1000, burst_packets=2)  # 1 MB/s; a burst of 2,000 bytes
    now = 12.5  # any time: the bucket is full at the first look
    for _ in range(3):  # the bucket starts full (2,000 bytes): two frames go, the third puts it in debt
        assert pacer.ready_at(now) == now
        pacer.spend(958, now)
    # 1,000 bytes of debt at 1 MB/s, then half a burst more: the next wake sends two, not one
    assert pacer.ready_at(now) == pytest.approx(now + 2000 / 1e6)
    assert pacer.ready_at(now + 0.0005) == pytest.approx(now + 0.002)
    assert pacer.allowed(now + 0.002, 958) == 2
    assert pacer.ready_at(now + 0.002) == now + 0.002
    sender, t, sent, wakes = Pacer(8.0, frame_bytes=1000, burst_packets=4), 0.0, 0, 0
    while t < 2.0:  # a sender that sends what it may and sleeps until the pacer is ready: the rate holds
        k = sender.allowed(t, 958)
        sender.spend(958, t, k)
        sent, wakes, t = sent + k, wakes + 1, sender.ready_at(t)
    assert 2000 <= sent <= 2006 and wakes < sent / 2  # 1 MB/s of 1,000-byte frames, a few a wake


@pytest.mark.parametrize("host_exec, message", [({}, "gives no way to run commands on h1"),
                                                ({h: ["false"] for h in ("h1", "h2", "h3", "h4")},
                                                 r"calibration: h\d \(is it running\?\): exit status 1")])
def test_calibrating_a_job_whose_hosts_do_not_run_changes_nothing(slow_switch, tmp_path, host_exec, message):
    c = controller(slow_switch, tmp_path)
    c.network.host_exec = host_exec
    spec = c.create_job("idle", ["h1", "h2", "h3", "h4"], pool_size=8)

    def seen() -> tuple:  # job ids and epochs move on (a temporary job's packets may still fly), nothing else
        jobs = json.loads((tmp_path / "state.json").read_text())["jobs"]
        entries = {e for e in c.installed_entries("s1") if dict(e.match).get("hdr.ina.child") != HIGH_WATER_CHILD}
        return jobs, entries, c.installed_groups("s1"), sorted(p.name for p in c.spec_dir.iterdir())

    before = seen()
    with pytest.raises(JobError, match=message):
        calibrate(c, "idle", values=1000, timeout=2.0)
    assert seen() == before and c.job_spec("idle") == spec
    c.close()
