"""The packing planner (controller/plan.py), without switches.

The planner decides how many aggregation trees a job gets and how its data is split over them.  A
wrong plan shows up only as a slow or overloaded network, so these tests recompute every link's
load from the plan's trees on their own (not from the planner's LP) and check it against the
link's capacity, check the trees are valid and within the fan-in limit, and pin the rates and
shares the planner must reach on fabrics whose best packing is known by hand.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from controller import plan
from controller.plan import PlanError
from controller.topology import Topology, TopologyError, fat_tree, leaf_spine, single, tree

FAN_IN = 32  # max_children: the slot bitmap's width
TOL = 1e-9

FABRICS = {
    "single(4)": lambda: single(4),
    "tree(2,2)": lambda: tree(2, 2),
    "leaf_spine(2,2,2) 4/2 Mb/s": lambda: leaf_spine(2, 2, 2, host_bw=4, fabric_bw=2),
    "fat_tree(4) 10/2 Mb/s": lambda: fat_tree(4, host_bw=10, fabric_bw=2),
    "fat_tree(4) uniform": lambda: fat_tree(4),
    "fat_tree(16) 10/2.5 Mb/s": lambda: fat_tree(16, host_bw=10, fabric_bw=2.5),
}


@cache
def all_hosts_plan(name: str) -> tuple[Topology, tuple[str, ...], plan.Plan]:
    """The plan for every host of a fabric in FABRICS, planned once per test run (fat_tree(16) takes a while)."""
    topology = Topology.from_dict(FABRICS[name]())
    members = tuple(sorted(topology.hosts, key=lambda h: int(h[1:])))
    return topology, members, plan.pack_trees(topology, members, FAN_IN)


def host_link(topology: Topology, host: str) -> int:
    return topology.port_links[topology.attachment[host]]


def link_loads(topology: Topology, members: tuple[str, ...], p: plan.Plan) -> list[float]:
    """Each link's load (Mb/s, each way), summed from the trees: a tree's rate on every member's host
    link and on every link one of its switches goes up by."""
    load = [0.0] * len(topology.links)
    for planned in p.trees:
        for m in members:
            load[host_link(topology, m)] += planned.rate
        for switch, port in planned.tree.uplinks:
            load[topology.port_links[switch, port]] += planned.rate
    return load


def assert_feasible(topology: Topology, members: tuple[str, ...], p: plan.Plan) -> None:
    """Shares sum to 1, no tree is too small, and no link carries more than its capacity."""
    assert p.trees
    assert sum(t.share for t in p.trees) == pytest.approx(1.0, abs=TOL)
    assert all(t.share >= plan.MIN_SHARE for t in p.trees), [t.share for t in p.trees]
    assert p.rate == pytest.approx(sum(t.rate for t in p.trees), rel=TOL)
    for t in p.trees:
        assert t.share == pytest.approx(t.rate / p.rate, rel=TOL)
    loads = link_loads(topology, members, p)
    over = [(plan.link_name(topology, i), load) for i, load in enumerate(loads)
            if load > topology.links[i].capacity * (1 + TOL)]
    assert not over
    for m in members:  # every member's host link carries the whole job
        assert loads[host_link(topology, m)] == pytest.approx(p.rate, rel=TOL)


def assert_trees_valid(topology: Topology, members: tuple[str, ...], p: plan.Plan) -> None:
    """Each tree joins all members to its root, hangs each member off its own host port, and fits the fan-in."""
    for planned in p.trees:
        plan.check_tree(topology, members, planned.tree, FAN_IN)
        tree_nodes = plan.nodes(topology, members, planned.tree)
        assert max(len(n.children) for n in tree_nodes.values()) <= FAN_IN
        for m in members:
            switch, port = topology.attachment[m]
            assert [c.port for c in tree_nodes[switch].children if c.node == m] == [port]
            assert topology.port_links[switch, port] == host_link(topology, m)


def shares(p: plan.Plan) -> dict[str, float]:
    """Share by root (fails if two trees have the same root, which none of these fabrics needs)."""
    out = {t.tree.root: t.share for t in p.trees}
    assert len(out) == len(p.trees)
    return out


def leaf_spine_topology(spine1_bw: float, spine2_bw: float, host_bw: float) -> Topology:
    """Two spines, two leaves of two hosts; the links to each spine get their own capacity."""
    data = leaf_spine(2, 2, 2, host_bw=host_bw)
    bw = {"spine1": spine1_bw, "spine2": spine2_bw}
    data["links"] = [[a, b, {"bw": bw[b.split("-")[0]]}] if b.startswith("spine") else [a, b, *options]
                     for a, b, *options in data["links"]]
    return Topology.from_dict(data)


def bottlenecked_leaf_spine() -> Topology:
    """Fabric links at 2 Mb/s, host links at 4: one tree gets 2 Mb/s, two trees 4."""
    return Topology.from_dict(leaf_spine(2, 2, 2, host_bw=4, fabric_bw=2))


ALL4 = ("h1", "h2", "h3", "h4")


# --- any fabric: feasible, valid, optimal -----------------------------------------------------------

@pytest.mark.parametrize("name", list(FABRICS))
def test_plan_is_feasible_valid_and_optimal(name):
    topology, members, p = all_hosts_plan(name)
    assert p.members == members
    assert_feasible(topology, members, p)
    assert_trees_valid(topology, members, p)
    assert p.rate <= p.upper_bound * (1 + TOL)
    assert p.optimal, (p.rate, p.upper_bound, p.notes)


def test_1024_workers_on_fat_tree_16():
    topology, members, p = all_hosts_plan("fat_tree(16) 10/2.5 Mb/s")
    assert len(members) == len(set(members)) == 1024 and set(members) == set(topology.hosts)
    assert_feasible(topology, members, p)
    # an edge switch has 8 hosts and 8 uplinks of 2.5 Mb/s: the 10 Mb/s host links are the limit
    assert p.rate == pytest.approx(10.0, rel=1e-6)
    assert len(p.trees) >= 4  # one tree uses one uplink of each edge switch: 2.5 Mb/s at most


# --- leaf-spine: trees in proportion to capacity ---------------------------------------------------

def test_bottlenecked_leaf_spine_uses_both_spines():
    topology = bottlenecked_leaf_spine()
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    assert shares(p) == pytest.approx({"spine1": 0.5, "spine2": 0.5}, abs=1e-6)
    assert p.rate == pytest.approx(2 * 2.0, rel=1e-6)
    fabric = {i for i, link in enumerate(topology.links) if link.a.startswith("leaf") and "spine" in link.b}
    assert len(fabric) == 4 and fabric <= set(p.bottlenecks)
    assert_feasible(topology, ALL4, p)


def test_uniform_leaf_spine_needs_one_tree():
    for data in (leaf_spine(2, 2, 2), leaf_spine(2, 2, 2, host_bw=2, fabric_bw=2)):
        topology = Topology.from_dict(data)
        p = plan.pack_trees(topology, ALL4, FAN_IN)
        assert len(p.trees) == 1 and p.trees[0].share == 1.0
        assert p.trees[0].tree.root in ("spine1", "spine2")
        assert p.optimal


def test_asymmetric_spines_get_shares_in_proportion():
    topology = leaf_spine_topology(spine1_bw=3, spine2_bw=1, host_bw=10)
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    assert shares(p) == pytest.approx({"spine1": 0.75, "spine2": 0.25}, abs=1e-6)
    assert p.trees[0].tree.root == "spine1"  # largest share first
    assert p.rate == pytest.approx(4.0, rel=1e-6) and p.optimal
    assert_feasible(topology, ALL4, p)


def test_tree_below_min_share_is_dropped():
    """A spine link at 1 Mb/s next to one at 99 would carry 1 % of the data: not worth its switch state."""
    topology = leaf_spine_topology(spine1_bw=99, spine2_bw=1, host_bw=1000)
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    assert [(t.tree.root, t.share) for t in p.trees] == [("spine1", 1.0)]
    assert p.rate == pytest.approx(99.0, rel=1e-6)
    assert p.upper_bound == pytest.approx(100.0) and not p.optimal


def line(length: int) -> Topology:
    """Switches s1..sN in a row (sI-p3 to sI+1-p2), h1 on s1 and h2 on sN: every root gives the same rate."""
    return Topology.from_dict({
        "hosts": {"h1": {"ip": "10.0.0.1/24", "mac": "02:00:00:00:00:01"},
                  "h2": {"ip": "10.0.0.2/24", "mac": "02:00:00:00:00:02"}},
        "switches": {f"s{i}": {} for i in range(1, length + 1)},
        "links": [["h1", "s1-p1"], ["h2", f"s{length}-p1"]] + [[f"s{i}-p3", f"s{i + 1}-p2"] for i in range(1, length)],
    })


def test_equal_rate_prefers_the_shallowest_tree():
    topology = line(5)
    (only,) = plan.pack_trees(topology, ("h1", "h2"), FAN_IN).trees
    assert only.tree.root == "s3" and plan.depth(topology, ("h1", "h2"), only.tree) == 2


def test_parallel_links_each_get_a_tree():
    """s1 and s2 joined twice: the first trees (one per root) all take the first link; column generation must
    find the tree over the second (same root, other port) to double the rate."""
    data = single(2)
    data["hosts"].update({f"h{i}": {"ip": f"10.0.0.{i}/24", "mac": f"02:00:00:00:00:{i:02x}"} for i in (3, 4)})
    data["switches"]["s2"] = {}
    data["links"] = [[h, port, {"bw": 10}] for h, port in [("h1", "s1-p1"), ("h2", "s1-p2"), ("h3", "s2-p1"),
                                                           ("h4", "s2-p2")]]
    data["links"] += [["s1-p3", "s2-p3", {"bw": 2}], ["s1-p4", "s2-p4", {"bw": 2}]]
    topology = Topology.from_dict(data)
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    assert p.rate == pytest.approx(4.0, rel=1e-6) and p.optimal
    assert sorted(port for t in p.trees for _, port in t.tree.uplinks) == [3, 4]
    assert_feasible(topology, ALL4, p)
    assert_trees_valid(topology, ALL4, p)


# --- max_trees --------------------------------------------------------------------------------

def test_one_tree_on_a_bottlenecked_fabric_gets_half_the_rate():
    topology = bottlenecked_leaf_spine()
    packed = plan.pack_trees(topology, ALL4, FAN_IN)
    one = plan.pack_trees(topology, ALL4, FAN_IN, max_trees=1)
    assert len(one.trees) == 1 and one.trees[0].share == 1.0
    assert one.rate == pytest.approx(packed.rate / 2, rel=1e-6)
    assert not one.optimal and packed.optimal
    assert one.upper_bound == packed.upper_bound
    assert_feasible(topology, ALL4, one)


def test_max_trees_at_or_above_what_pays_keeps_the_packed_plan():
    topology = bottlenecked_leaf_spine()
    p = plan.pack_trees(topology, ALL4, FAN_IN, max_trees=3)
    assert len(p.trees) == 2 and p.optimal
    assert any("more would add nothing" in note for note in p.notes)


# --- single-tree plans: the old root and child-index rule ------------------------------------------

def test_single_tree_root_and_child_order():
    topology = Topology.from_dict(tree(2, 2))
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    (only,) = p.trees
    assert only.tree.root == "s1" and only.share == 1.0
    tree_nodes = plan.nodes(topology, ALL4, only.tree)
    assert [c.node for c in tree_nodes["s1"].children] == ["s2", "s3"]
    assert [(c.index, c.node) for c in tree_nodes["s2"].children] == [(0, "h1"), (1, "h2")]
    assert (tree_nodes["s3"].parent, tree_nodes["s3"].index_at_parent) == ("s1", 1)


def test_members_under_one_leaf_make_it_the_root_in_member_order():
    topology = Topology.from_dict(tree(2, 2))
    members = ("h2", "h1")
    (only,) = plan.pack_trees(topology, members, FAN_IN).trees
    assert only.tree.root == "s2" and only.tree.uplinks == ()
    tree_nodes = plan.nodes(topology, members, only.tree)
    assert list(tree_nodes) == ["s2"]
    assert [(c.index, c.node, c.port) for c in tree_nodes["s2"].children] == [(0, "h2", 3), (1, "h1", 2)]


# --- bad input -------------------------------------------------------------------------------------

def two_islands() -> Topology:
    """Two switches with a host each and no link between them."""
    return Topology.from_dict({
        "hosts": {"h1": {"ip": "10.0.0.1/24", "mac": "02:00:00:00:00:01"},
                  "h2": {"ip": "10.0.0.2/24", "mac": "02:00:00:00:00:02"}},
        "switches": {"s1": {}, "s2": {}},
        "links": [["h1", "s1-p1"], ["h2", "s2-p1"]],
    })


@pytest.mark.parametrize(("topology", "members", "kwargs", "message"), [
    (single(4), ["h1", "h9"], {}, r"h9: not hosts of the topology"),
    (single(4), ["h1", "s1"], {}, r"s1: not hosts of the topology"),
    (single(4), [], {}, r"at least one member"),
    (single(4), ["h1", "h2", "h1"], {}, r"listed twice"),
    (None, ["h1", "h2"], {}, r"no common root.*not connected"),
    (single(33), [f"h{i}" for i in range(1, 34)], {}, r"fan-in limit.*33 children"),
    (single(4), ["h1", "h2"], {"max_trees": 2}, r"2 trees asked for.*only 1 candidate"),
    (single(4), ["h1", "h2"], {"max_trees": 0}, r"positive integer"),
    (single(4), ["h1", "h2"], {"max_trees": True}, r"positive integer"),
], ids=["unknown host", "switch as member", "no members", "repeated member", "disconnected", "fan-in",
        "more trees than candidates", "zero trees", "bool trees"])
def test_bad_input_raises_plan_error(topology, members, kwargs, message):
    topo = two_islands() if topology is None else Topology.from_dict(topology)
    with pytest.raises(PlanError, match=message):
        plan.pack_trees(topo, members, FAN_IN, **kwargs)


def test_fan_in_limit_holds_when_another_tree_fits():
    """34 members fit 17 children per switch over two leaves (the root s1 has 2), not 16."""
    topology = Topology.from_dict(tree(2, 17))
    members = tuple(sorted(topology.hosts))
    p = plan.pack_trees(topology, members, 17)
    assert [t.tree.root for t in p.trees] == ["s1"]
    with pytest.raises(PlanError, match="fan-in limit"):
        plan.pack_trees(topology, members, 16)


def test_fan_in_limit_finds_a_tree_that_spreads_children():
    """R over M1 and M2, each linked to all four leaves: with 2 children per switch only R fits, M1 and M2 taking
    two leaves each."""
    hosts = {f"h{i}": {"ip": f"10.0.0.{i}/24", "mac": f"02:00:00:00:00:{i:02x}"} for i in range(1, 5)}
    links = [["M1-p9", "R-p1"], ["M2-p9", "R-p2"]]
    for i in range(1, 5):
        links += [[f"h{i}", f"L{i}-p3"], [f"L{i}-p1", f"M1-p{i}"], [f"L{i}-p2", f"M2-p{i}"]]
    switches = {s: {} for s in ["R", "M1", "M2", "L1", "L2", "L3", "L4"]}
    topology = Topology.from_dict({"hosts": hosts, "switches": switches, "links": links})
    fits = plan.Tree("R", (("L1", 1), ("L2", 1), ("L3", 2), ("L4", 2), ("M1", 9), ("M2", 9)))
    plan.check_tree(topology, ALL4, fits, 2)  # such a tree exists
    p = plan.pack_trees(topology, ALL4, 2)
    assert [t.tree.root for t in p.trees] == ["R"]


# --- determinism and the report --------------------------------------------------------------------

@pytest.mark.parametrize("build", [bottlenecked_leaf_spine, lambda: leaf_spine_topology(3, 1, 10),
                                   lambda: Topology.from_dict(fat_tree(4, host_bw=10, fabric_bw=2))])
def test_same_input_same_plan(build):
    first, second = build(), build()
    members = tuple(sorted(first.hosts))
    a, b = plan.pack_trees(first, members, FAN_IN), plan.pack_trees(second, members, FAN_IN)
    assert [(t.tree.root, t.tree.uplinks, t.share) for t in a.trees] == \
           [(t.tree.root, t.tree.uplinks, t.share) for t in b.trees]
    assert (a.rate, a.bottlenecks, a.candidates) == (b.rate, b.bottlenecks, b.candidates)


def test_to_dict_is_json_and_readable():
    topology = bottlenecked_leaf_spine()
    p = plan.pack_trees(topology, ALL4, FAN_IN)
    d = p.to_dict(topology)
    assert json.loads(json.dumps(d)) == d
    assert d["members"] == list(ALL4) and d["optimal"] is True
    assert d["rate_mbps"] == pytest.approx(4.0, rel=1e-6)
    assert {t["root"] for t in d["trees"]} == {"spine1", "spine2"}
    for t in d["trees"]:
        assert t["share"] == pytest.approx(0.5, abs=1e-6) and t["rate_mbps"] == pytest.approx(2.0, rel=1e-6)
        assert t["depth"] == 1 and t["switches"] == sorted([t["root"], "leaf1", "leaf2"])
    assert "leaf1-p1 -- spine1-p1 (2 Mb/s)" in d["bottlenecks"]
    assert "h1 -- leaf1-p3 (4 Mb/s)" in d["bottlenecks"]
    assert all(isinstance(name, str) for name in d["bottlenecks"])


# --- random fabrics and odd capacities ---------------------------------------------------------------

def random_fabric(rng: random.Random) -> Topology:
    """A connected random switch graph with parallel links, random capacities and hosts on random switches."""
    switches = [f"s{i}" for i in range(1, rng.randint(2, 7) + 1)]
    ports = dict.fromkeys(switches, 0)

    def port(s: str) -> str:
        ports[s] += 1
        return f"{s}-p{ports[s]}"

    links = [[port(s), port(rng.choice(switches[:i])), {"bw": round(rng.uniform(0.1, 50), 3)}]
             for i, s in enumerate(switches) if i]
    links += [[port(a), port(b), {"bw": round(rng.uniform(0.1, 50), 3)}]
              for a, b in (rng.sample(switches, 2) for _ in range(rng.randint(0, 5)))]
    hosts = {f"h{i}": {"ip": f"10.0.0.{i}/24", "mac": f"02:00:00:00:00:{i:02x}"} for i in range(1, rng.randint(2, 7))}
    links += [[h, port(rng.choice(switches)), {"bw": round(rng.uniform(1, 100), 3)}] for h in hosts]
    return Topology.from_dict({"hosts": hosts, "switches": dict.fromkeys(switches, {}), "links": links})


@pytest.mark.parametrize("seed", range(6))
def test_random_fabrics_never_overload_a_link(seed):
    """Property over many small random fabrics: whatever the planner returns is feasible, valid and
    within the cut bound, and keeps to the tree limit it was given."""
    rng = random.Random(seed)
    for _ in range(25):
        topology = random_fabric(rng)
        members = tuple(rng.sample(sorted(topology.hosts), rng.randint(1, len(topology.hosts))))
        fan_in, max_trees = rng.choice([32, 2, 3]), rng.choice([None, None, 1, 2])
        try:
            p = plan.pack_trees(topology, members, fan_in, max_trees)
        except PlanError as e:  # the only refusals a connected fabric may give
            assert "fan-in" in str(e) or "asked for" in str(e), e
            continue
        assert_feasible(topology, members, p)
        for planned in p.trees:
            plan.check_tree(topology, members, planned.tree, fan_in)
        assert p.rate <= p.upper_bound * (1 + TOL)
        assert max_trees is None or len(p.trees) <= max_trees


def test_capacities_plan_alike_at_any_scale():
    """Shares depend on capacity ratios only: kbit/s or Tbit/s links plan the same trees."""
    shares = []
    for scale in (1e-6, 1.0, 1e6):
        topology = leaf_spine_topology(3 * scale, 1 * scale, 10 * scale)
        p = plan.pack_trees(topology, ALL4, FAN_IN)
        assert p.rate == pytest.approx(4 * scale, rel=1e-6)
        shares.append([(t.tree.root, round(t.share, 6)) for t in p.trees])
    assert shares[0] == shares[1] == shares[2] == [("spine1", 0.75), ("spine2", 0.25)]


@pytest.mark.parametrize("bw", [0, -1, float("inf"), float("nan"), "fast", True])
def test_a_link_capacity_must_be_a_positive_finite_number(bw):
    spec = leaf_spine(2, 2, 2)
    spec["links"][0] = [*spec["links"][0][:2], {"bw": bw}]
    with pytest.raises(TopologyError, match="bw must be a positive number"):
        Topology.from_dict(spec)


# --- plan_job in parts: column generation, tree limiting, pruning ---------------------------------

REFERENCE = Path(__file__).with_name("plan_reference.json")  # plan_job's plans before it was split in parts
BUILDERS = {"single": single, "tree": tree, "leaf_spine": leaf_spine, "fat_tree": fat_tree}


def reference_cases() -> list[dict]:
    return json.loads(REFERENCE.read_text())


def build(expression: str) -> Topology:
    """A reference case's topology from its builder call, e.g. ``fat_tree(4, host_bw=10, fabric_bw=2)``."""
    return Topology.from_dict(eval(expression, {"__builtins__": {}}, BUILDERS))


@pytest.mark.parametrize("case", reference_cases(), ids=lambda c: c["name"])
def test_plans_are_the_ones_before_the_split(case):
    """The same trees, rates, shares, bottlenecks, candidates and notes (or error) as the one-piece planner
    gave: a refactoring must not move a plan."""
    topology = build(case["topology"])
    try:
        got = plan.pack_trees(topology, case["members"], case["max_children"], case["max_trees"], 1.0625)
    except PlanError as e:
        assert {"error": str(e)} == case["plan"]
        return
    data = json.loads(json.dumps(got.to_dict(topology)))
    data.pop("planning_seconds")
    expected = case["plan"]
    assert [(t["root"], t["uplinks"]) for t in data["trees"]] == [(t["root"], t["uplinks"]) for t in expected["trees"]]
    assert [t["rate_mbps"] for t in data["trees"]] == pytest.approx([t["rate_mbps"] for t in expected["trees"]])
    assert [t["share"] for t in data["trees"]] == pytest.approx([t["share"] for t in expected["trees"]])
    for key in ("members", "bottlenecks", "candidates", "notes", "optimal"):
        assert data[key] == expected[key], key
    for key in ("rate_mbps", "upper_bound_mbps"):
        assert data[key] == pytest.approx(expected[key]), key


def test_column_generation_reaches_the_best_rate_over_its_trees():
    """The columns hold a packing at the cut bound (leaf-spines reach it), one candidate per spine at least."""
    topology = leaf_spine_topology(3, 1, 10)
    request = plan.PlanRequest.of(topology, ALL4, FAN_IN)
    columns, notes = plan.generate_columns(request)
    assert notes == [] and {"spine1", "spine2"} <= {t.root for t in columns}
    assert request.packing(columns).max_rate()[0] == pytest.approx(4.0)
    again, _ = plan.generate_columns(request)
    assert again == columns  # a pure function: the same request, the same columns


def test_priced_trees_skip_known_trees_and_say_which_roots_reach_the_members():
    topology = leaf_spine_topology(3, 1, 10)
    request = plan.PlanRequest.of(topology, ALL4, FAN_IN)
    free = np.zeros(len(topology.links))
    first, too_wide, reachable = plan.priced_trees(request, free, {})
    assert reachable and too_wide == [] and first
    assert plan.priced_trees(request, free, first) == ({}, [], True)


def test_limit_trees_keeps_at_most_the_limit_and_leaves_fewer_alone():
    topology = Topology.from_dict(leaf_spine(4, 3, 2, host_bw=10, fabric_bw=1))
    members = tuple(f"h{i}" for i in range(1, 7))
    request = plan.PlanRequest.of(topology, members, FAN_IN)
    columns, _ = plan.generate_columns(request)
    rates = request.packing(columns).solve(members)
    assert len(rates) == 4 and sum(rates.values()) == pytest.approx(4.0)
    assert plan.limit_trees(request, columns, rates, 4) == (rates, [])
    two, notes = plan.limit_trees(request, columns, rates, 2)
    assert len(two) == 2 and sum(two.values()) == pytest.approx(2.0) and notes == []


def test_prune_trees_drops_trees_too_small_to_pay_for_their_state():
    """A tree under 2% of the rate goes unless the others cannot make up for it (then a note says why)."""
    topology = leaf_spine_topology(3, 1, 10)
    request = plan.PlanRequest.of(topology, ALL4, FAN_IN)
    columns, _ = plan.generate_columns(request)
    rates = request.packing(columns).solve(ALL4)
    assert plan.prune_trees(request, columns, rates, 4.0) == (rates, [])  # 75/25: both pay
    big, small = sorted(rates, key=rates.get, reverse=True)
    skewed = {big: 3.0, small: 0.03}
    assert plan.prune_trees(request, columns, skewed, 4.0) == (skewed, [
        "1 tree(s) under 2% of the rate kept: without them the plan would lose 25% of its rate"])
    pruned, notes = plan.prune_trees(request, columns, skewed, 3.03)
    assert list(pruned) == [big] and pruned[big] == pytest.approx(3.0) and notes == []
