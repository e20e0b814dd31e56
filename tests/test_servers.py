"""Spare servers as aggregation devices (issue 62): the topology's server hosts and plain switches, the
planner's server trees (links with multiplicity, a row per server) and the model's terms for them."""

from __future__ import annotations

from collections import Counter

import pytest

from controller import model, plan
from controller import topology as topo
from controller.job_plan import plan_job
from controller.model import JobTree
from controller.topology import Topology, TopologyError
from worker import protocol


def _with(host_spec: dict | None = None, switch_spec: dict | None = None) -> dict:
    spec = topo.single(2)
    if host_spec is not None:
        spec["hosts"]["h2"].update(host_spec)
    if switch_spec is not None:
        spec["switches"]["s1"].update(switch_spec)
    return spec


def test_a_server_host_and_a_plain_switch_are_read_and_written_back():
    topology = Topology.from_dict(_with({"server": {"cores": 16, "agg_pps_per_core": 2e5}}, {"plain": True}))
    assert topology.servers == ["h2"]
    assert topology.hosts["h2"].server == topo.Server(16, 2e5)
    assert topology.switches["s1"].plain
    assert topology.device_pps("h2", lanes=4) == 8e5  # a core per lane...
    assert topology.device_pps("h2", lanes=64) == 16 * 2e5  # ...at most its cores
    assert Topology.from_dict(topology.to_dict()).to_dict() == topology.to_dict()


@pytest.mark.parametrize("server, field", [
    ({"cores": 0}, "server.cores"), ({"cores": 2.5}, "server.cores"), ({"cores": True}, "server.cores"),
    ({"cores": 4, "agg_pps_per_core": -1}, "server.agg_pps_per_core"),
    ({"cores": 4, "agg_pps_per_core": "fast"}, "server.agg_pps_per_core"),
    ({"cores": 4, "threads": 2}, "'server'"), ("yes", "'server'")])
def test_a_bad_server_spec_is_refused_by_its_field(server, field):
    with pytest.raises(TopologyError, match=f"host h2: {field}"):
        Topology.from_dict(_with({"server": server}))


def test_plain_must_be_a_boolean():
    with pytest.raises(TopologyError, match="switch s1: plain must be true or false"):
        Topology.from_dict(_with(switch_spec={"plain": "yes"}))


@pytest.mark.parametrize("switches", [1, 2])
def test_the_servers_builder(switches):
    topology = Topology.from_dict(topo.servers(6, 3, 16, switches, host_bw=100.0, fabric_bw=400.0))
    assert topology.servers == ["srv1", "srv2", "srv3"]
    assert all(s.plain for s in topology.switches.values()) and len(topology.switches) == switches
    assert topology.hosts["srv1"].server == topo.Server(16, topo.SERVER_AGG_PPS_PER_CORE)
    route = topology.route("h1", "srv3")
    assert len(route) == switches + 1  # h1 up, (s1 to s2,) down to the server
    with pytest.raises(TopologyError, match="1 or 2 switches"):
        topo.servers(6, 3, 16, 3)


# --- the planner: a tree per server, its links with multiplicity, a row per server ---------------------------

FRAME = 1000  # bytes a frame, so a server's Mb/s is pps x 8e-3


def _servers(workers: int = 4, count: int = 2, cores: int = 4, switches: int = 1, host_bw: float = 1000.0,
             fabric_bw: float = 1000.0, per_core: float = 1e4) -> Topology:
    return Topology.from_dict(topo.servers(workers, count, cores, switches, host_bw, fabric_bw, per_core))


def _hosts(n: int) -> list[str]:
    return [f"h{i}" for i in range(1, n + 1)]


def test_each_server_gets_a_tree_and_the_call_splits_by_their_rates():
    topology = _servers(per_core=1e4)  # a core: 1e4 x 8e3 bits = 80 Mb/s of contributions, 20 per member
    data = topology.to_dict()
    data["hosts"]["srv2"]["server"]["agg_pps_per_core"] = 2e4  # srv2 sums twice as fast
    topology = Topology.from_dict(data)
    p = plan.pack_trees(topology, _hosts(4), 32, frame_bytes=FRAME, lanes=1)
    rates = {t.tree.root: t.rate for t in p.trees}
    assert rates == pytest.approx({"srv1": 20.0, "srv2": 40.0})  # members x rate = what each sums
    assert {t.tree.root: t.share for t in p.trees} == pytest.approx({"srv1": 1 / 3, "srv2": 2 / 3})
    assert all(t.tree.uplinks == () for t in p.trees) and p.optimal
    lanes = plan.pack_trees(topology, _hosts(4), 32, frame_bytes=FRAME, lanes=3)  # a core per lane, 3 of 4
    assert lanes.rate == pytest.approx(3 * 60.0)


def test_a_server_link_carries_the_tree_once_per_member():
    # servers that sum without limit behind one 200 Mb/s link between the two switches: the four members'
    # frames all cross it, so the trees get 200 / 4 = 50 Mb/s in all (200 if each link counted once)
    topology = _servers(count=2, switches=2, fabric_bw=200.0, per_core=1e9)
    p = plan.pack_trees(topology, _hosts(4), 32, frame_bytes=FRAME)
    assert p.rate == pytest.approx(50.0)
    assert [plan.link_name(topology, i) for i in p.bottlenecks] == ["s1-p5 -- s2-p3 (200 Mb/s)"]
    # and a server's own link likewise: 4 members x the tree's rate within its 100 Mb/s
    one = plan.pack_trees(_servers(count=1, host_bw=100.0, per_core=1e9), _hosts(4), 32, frame_bytes=FRAME)
    assert one.rate == pytest.approx(25.0)


def test_the_packing_rows_for_servers():
    topology = _servers(count=1, switches=2)
    request = plan.PlanRequest.of(topology, _hosts(4), 32, FRAME, lanes=2)
    columns, notes = request.server_columns()
    (tree, links), = columns.items()
    assert tree == plan.Tree("srv1", ()) and not notes
    fabric, server = topology.port_links["s1", 5], topology.host_link("srv1")
    assert sorted(links) == sorted([fabric] * 4 + [server] * 4)
    packing = request.packing(columns)
    dense = packing.A.toarray()
    assert dense[1:, 0].tolist() == [4.0, 4.0, 4.0]  # each link 4 times; the server's row: 4 children
    assert packing.b[-1] * packing.scale == pytest.approx(2 * 1e4 * FRAME * 8 / 1e6)  # 2 lanes' cores


def test_members_are_never_servers_and_plain_switches_never_aggregate():
    topology = _servers()
    with pytest.raises(plan.PlanError, match="srv1: aggregation server"):
        plan.pack_trees(topology, ["h1", "srv1"], 32)
    data = topo.single(4)
    data["switches"]["s1"]["plain"] = True
    with pytest.raises(plan.PlanError, match="every switch is plain"):
        plan.pack_trees(Topology.from_dict(data), _hosts(4), 32)
    with pytest.raises(plan.PlanError, match="need a server tree of 2 servers .* the topology has 1"):
        plan.pack_trees(_servers(workers=4, count=1), _hosts(4), 3)
    with pytest.raises(plan.PlanError, match="srv1 would have 4 children, but it takes 3 .* 1 leaf server"):
        plan.check_tree(topology, _hosts(4), plan.Tree("srv1", ()), 3)


# --- two levels: more members than a server's slot bitmap takes ---------------------------------------------------

def test_the_leaves_a_server_tree_needs():
    assert [plan.server_leaves(m, 32) for m in (1, 32, 33, 62, 64, 90, 91)] == [0, 0, 1, 1, 2, 2, 3]
    assert plan.server_leaves(4, 3) == 1  # 2 + 1 at the root, 2 at the leaf


def test_a_two_level_server_tree_keys_a_leaf_apart_from_its_members():
    tree = plan.Tree("srv1", (("srv2", 1), ("srv3", 1)))
    members = _hosts(64)
    nodes = plan.server_nodes(members, tree)
    root, a, b = nodes["srv1"], nodes["srv2"], nodes["srv3"]
    assert [len(n.children) for n in (root, a, b)] == [22 + 2, 21, 21]
    assert [c.node for c in root.children[-2:]] == ["srv2", "srv3"] and root.parent is None
    for leaf in (a, b):  # one port: the parent's result is told from a member's contribution by its index
        assert leaf.parent == "srv1" and leaf.parent_port == plan.SERVER_PORT
        assert leaf.index_at_parent not in {c.index for c in leaf.children}
        assert root.children[leaf.index_at_parent].node == leaf.switch
    assert {c.port for n in nodes.values() for c in n.children} == {plan.SERVER_PORT}
    owner = plan.server_of(members, tree)
    assert owner["h1"] == "srv1" and owner["h23"] == "srv2" and owner["h64"] == "srv3"
    with pytest.raises(plan.PlanError, match="servers as its nodes"):
        plan.check_tree(_servers(workers=64, count=3), members, plan.Tree("srv1", (("h2", 1),)), 32)


def test_a_two_level_server_trees_entries_do_not_clash_on_its_one_port():
    from controller.entries import Allocation, job_entries
    from controller.programs import V1MODEL

    P = protocol.load()
    topology = _servers(workers=64, count=3)
    tree = plan.Tree("srv1", (("srv2", 1), ("srv3", 1)))
    assert plan.fabric_links(topology, tree) == sorted(topology.host_link(s) for s in ("srv1", "srv2", "srv3"))
    for node in plan.server_nodes(_hosts(64), tree).values():
        entries, groups = job_entries(topology, P, node, 7, 8, Allocation(0, 0, 1), 40000)
        jobs = [e.match for e in entries if e.table == V1MODEL.jobs]
        receivers = [e for e in entries if e.table == V1MODEL.receivers]
        assert len(jobs) == len(set(jobs)) == len(node.children) + (node.parent is not None)
        assert len(receivers) == len({e.match for e in receivers})
        to_servers = [e for e in receivers if e.param("dst_port") == P.INA_UDP_PORT]
        assert len(to_servers) == (2 if node.parent is None else 1)  # the root to its leaves, a leaf to the root


def test_64_members_over_servers_plan_two_level_trees_with_the_extra_contributions_counted():
    topology = _servers(workers=64, count=4, cores=2, host_bw=1e6, per_core=1e4)
    request = plan.PlanRequest.of(topology, _hosts(64), 32, FRAME, lanes=2)
    columns, notes = request.server_columns()
    assert not notes and len(columns) == 4  # each server a root once, a leaf twice
    assert all(len(t.uplinks) == 2 for t in columns)
    tree = plan.Tree("srv1", (("srv2", 1), ("srv3", 1)))
    link = Counter(columns[tree])  # members' frames on their server's link, a leaf's partial on both
    assert link[topology.host_link("srv1")] == 22 + 2 and link[topology.host_link("srv2")] == 21 + 1
    rows = request.server_rows(columns)
    assert sorted(sorted(c.values()) for c, _ in rows) == [[21, 21, 24]] * 4
    p = plan.pack_trees(topology, _hosts(64), 32, frame_bytes=FRAME, lanes=2)
    summed = 2 * 1e4 * FRAME * 8 / 1e6  # a server sums on its 2 cores (its 3 trees of 2 lanes share them)
    assert p.rate == pytest.approx(4 * summed / (64 + 2)) and p.optimal  # 64 members' frames and 2 partials
    assert sorted(t.share for t in p.trees) == pytest.approx([0.25] * 4)


def test_two_servers_cannot_take_64_members_and_say_why():
    with pytest.raises(plan.PlanError, match="64 members need a server tree of 3 servers .* has 2"):
        plan.pack_trees(_servers(workers=64, count=2), _hosts(64), 32)


def test_the_model_of_a_two_level_server_tree():
    P = protocol.load()
    topology = _servers(workers=64, count=3, cores=1, host_bw=100_000.0, per_core=1e5)
    tree = plan.Tree("srv1", (("srv2", 1), ("srv3", 1)))
    t = JobTree(tree, 100.0, 1.0)
    pipe = model.tree_pipe(topology, _hosts(64), t, t.rate, P.frame_bytes, 0.0)
    hop = P.frame_bytes * 8 / 100e9 + topology.links[0].delay
    # a leaf's member: up to its leaf, on to the root and back (4 links each way), 21 then 24 children on a core
    assert pipe.round_trip == pytest.approx(8 * hop + 21 / 1e5 + 24 / 1e5)
    assert model.switch_loads(topology, _hosts(64), [t]) == {"srv1": 24.0, "srv2": 21.0, "srv3": 21.0}
    assert model.aggregation_limit(topology, _hosts(64), [t], P.frame_bytes)[0] == \
        pytest.approx(1e5 / 24 * P.frame_bytes * 8 / 1e6)  # the root, the busiest
    load = model.trees_load(topology, _hosts(64), [t], 100.0)
    assert load[topology.host_link("srv2"), 0] == pytest.approx(22 * 100e6)  # 21 members and its partial
    assert load[topology.host_link("srv1"), 1] == pytest.approx(24 * 100e6)


def test_a_plain_leaf_leaves_the_programmable_spine_no_tree():
    data = topo.tree(2, 2)
    data["switches"]["s2"]["plain"] = True  # h1, h2's leaf
    with pytest.raises(plan.PlanError, match="no common root|plain"):
        plan.pack_trees(Topology.from_dict(data), _hosts(4), 32)
    p = plan.pack_trees(Topology.from_dict(data), ["h3", "h4"], 32)
    assert [t.tree.root for t in p.trees] == ["s3"]


# --- the model: a server's way up, its per-core turn, its link's load ----------------------------------------

def test_the_model_of_a_server_plan():
    P = protocol.load()
    topology = _servers(count=2, cores=4, host_bw=100_000.0, per_core=1e5)
    planned = plan_job(topology, _hosts(4), P, "auto", "ina", pool_size=64, lanes="auto")
    assert planned.lanes == 4  # a lane per server core
    rate = 2 * 4 * 1e5 * P.frame_bytes * 8 / 1e6 / 4  # two servers of four cores, over four members
    assert planned.tree_plan.rate == pytest.approx(rate)
    assert planned.limit_mbps == pytest.approx(rate) and "srv" in planned.why
    trees = [JobTree(t.tree, t.rate, t.share) for t in planned.tree_plan.trees]
    alone = [JobTree(trees[0].tree, trees[0].rate, 1.0)]  # one lane, so one core of srv1, takes everything
    assert model.aggregation_limit(topology, _hosts(4), alone, P.frame_bytes)[0] == pytest.approx(rate / 8)
    pipe = model.tree_pipe(topology, _hosts(4), trees[0], trees[0].rate, P.frame_bytes, 0.0)
    wire = 2 * 2 * P.frame_bytes * 8 / 100e9  # up two links and back down them
    assert pipe.round_trip == pytest.approx(wire + 4 / 1e5)  # and four children on one core
    load = model.trees_load(topology, _hosts(4), trees, 100.0)
    server_link = topology.host_link("srv1")
    assert load[server_link, 0] == pytest.approx(4 * 100e6 / 2)  # every member's frames, half the data
    assert load[topology.host_link("h1"), 0] == pytest.approx(100e6)


# --- the fabric: servers as devices at their hosts' link ends, plain switches forwarding -------------------------

def test_two_servers_sum_exactly_in_the_fabric_within_ten_percent_of_the_model():
    from virtual_fabric.runs import RunConfig, run

    result = run(RunConfig(topology="servers:4,2,2", bw=1000.0, size=1 << 16, mode="ina", lanes="auto",
                           pool_size=64))
    assert result["check"]["within_bound"] and result["check"]["identical"]
    assert sorted(set(result["job"]["roots"])) == ["srv1", "srv2"] and result["job"]["lanes"] == 2
    (call,) = result["calls"]
    assert call["method"] == "ina" and abs(call["ratio"] - 1) < 0.10  # measured over the model's prediction
    assert result["where"]["aggregation_busiest"] > 0  # the servers' engines summed (the switch only forwarded)


def test_server_trees_are_paced_each_at_its_share_in_bursts_of_one():
    from worker.calls import pace
    from worker.engine import Pacer

    class Tree:
        pacer: Pacer | None = None

    trees = [Tree(), Tree()]
    pace(trees, 300.0, 1082, [0.25, 0.75])
    assert [t.pacer.mbps for t in trees] == [75.0, 225.0] and trees[0].pacer is not trees[1].pacer
    assert trees[0].pacer.burst == 1082  # one frame: every member's burst lands on one core at once
    first, second = (t.pacer.ready_at(0.0) for t in trees)
    assert first == 0.0  # tree 0 at once, tree 1 half an interval (its pacer's threshold) and 1/2 later
    assert second == pytest.approx((0.5 + 1 / 2) * 1082 * 8 / 225e6)
    pace(trees, 300.0, 1082)  # switches' trees: one pacer shared, as before
    assert trees[0].pacer is trees[1].pacer and trees[0].pacer.mbps == 300.0


def test_the_model_starts_each_server_tree_as_late_as_its_pacer():
    from worker.tuner import TreePipe

    assert [model.phased(i, 4) for i in range(4)] == [0.0, 0.75, 1.0, 1.25]
    pipe = TreePipe(1.0, 1e-3, 1e-4)
    late = TreePipe(1.0, 1e-3, 1e-4, late=3e-4)
    assert late.seconds(100, 64, 64) == pytest.approx(pipe.seconds(100, 64, 64) + 3e-4)
    P = protocol.load()
    topology = _servers(count=2, cores=2, host_bw=100_000.0, per_core=1e5)
    planned = plan_job(topology, _hosts(4), P, "auto", "ina", pool_size=64, lanes=2)
    spacing = [t.spacing for t in planned.model.ina.trees]
    assert [t.late for t in planned.model.ina.trees] == pytest.approx(
        [model.phased(i, 4) * f for i, f in enumerate(spacing)])


def test_a_job_spec_names_a_server_trees_address_and_reads_back():
    from worker.jobspec import JobSpec, JobSpecError, Member, TreeSpec

    spec = JobSpec("j", 256, 9999, 8, (Member(0, "h1", "10.0.0.1", "s1", "10.0.0.254", "02:00:00:00:fe:01"),),
                   (TreeSpec(1, "srv1", 1.0, 100.0, 16385, (0,), to_ip="10.0.0.5"),))
    assert JobSpec.from_json(spec.to_json(), "here").trees[0].to_ip == "10.0.0.5"
    two = TreeSpec(1, "srv1", 1.0, 100.0, 16385, (0,), to_ip="10.0.0.5", to_ips=("10.0.0.6",))  # a leaf's member
    back = JobSpec.from_json(spec.__class__(**{**spec.__dict__, "trees": (two,)}).to_json(), "here").trees[0]
    assert back.to_ips == ("10.0.0.6",) and back.destination(0) == "10.0.0.6"
    with pytest.raises(JobSpecError, match="names 2 servers"):
        JobSpec(**{**spec.__dict__, "trees": (TreeSpec(1, "srv1", 1.0, 100.0, 16385, (0,), to_ips=("a", "b")),)})


def test_64_members_sum_exactly_over_three_servers_in_two_level_trees():
    from virtual_fabric.runs import RunConfig, run

    result = run(RunConfig(topology="servers:64,3,1", bw=1000.0, size=1 << 10, mode="ina", lanes=1, pool_size=8))
    assert result["check"]["within_bound"] and result["check"]["identical"]  # every member's sum exact
    assert sorted(result["job"]["roots"]) == ["srv1", "srv2", "srv3"]  # each server a root (and a leaf twice)
    assert all(c["method"] == "ina" for c in result["calls"])
