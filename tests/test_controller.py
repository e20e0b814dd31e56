"""The controller against the built-in target's P4Runtime servers, through real gRPC.

Each switch of a topology gets its own server (127.0.0.1, a free port, an in-memory
dataplane).  Table contents are read back over P4Runtime and compared with what the job
needs; aggregation through the installed entries is checked by sending frames into the
switches' pipelines.  The restart test runs the real `p4target-switch-grpc` command.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether, raw

from controller import entries, plan
from controller.controller import Controller, JobError
from controller.entries import HIGH_WATER_CHILD
from controller.network import Network, SwitchAccess
from controller.p4runtime_client import SwitchError
from controller.pipeline import PipelineOptions
from controller.plan import PlanError
from controller.programs import V1MODEL
from controller.topology import Topology, TopologyError, fat_tree, leaf_spine, mac_int, single, tree
from p4target.dataplane import Dataplane
from p4target.frontend import load_declarations
from p4target.runtime.service import P4RuntimeServer, serve
from tests.conftest import free_port
from worker import protocol
from worker.jobspec import JobSpec
from worker.protocol import PROTOCOL_P4


class Switches:
    """In-process P4Runtime servers, one per switch of the topology."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.services: dict[str, P4RuntimeServer] = {}
        self.servers = {}
        access = {}
        for name, sw in topology.switches.items():
            port = free_port()
            self.services[name] = P4RuntimeServer(Dataplane([]), device_id=sw.index + 1)
            self.servers[name] = serve(self.services[name], f"127.0.0.1:{port}")
            access[name] = SwitchAccess(f"127.0.0.1:{port}", sw.index + 1, "builtin")
        self.network = Network(topology, access)

    def switch(self, name: str):
        return self.services[name].pipeline.switch

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop(None)


V64 = PipelineOptions(values=64)  # the tests build packets of 64 values (the default would be 256)

@pytest.fixture
def net_single():
    s = Switches(Topology.from_dict(single(4)))
    yield s
    s.stop()


@pytest.fixture
def net_tree():
    s = Switches(Topology.from_dict(tree(2, 2)))
    yield s
    s.stop()


@pytest.fixture
def net_leaf_spine():
    """Host links twice as fast as the leaf-spine links: the planner packs a tree per spine."""
    s = Switches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)))
    yield s
    s.stop()


def controller(switches: Switches, tmp_path: Path) -> Controller:
    c = Controller(switches.network, tmp_path / "state.json", V64)
    c.setup()
    return c


def members(c: Controller, switch: str) -> set:
    """The switch's jobs-table entries for job members (without the controller's high-water record)."""
    return {e for e in c.installed_entries(switch, V1MODEL.jobs) if e.key("hdr.ina.child") != HIGH_WATER_CHILD}


def contribution(topology: Topology, spec, rank: int, values: np.ndarray, slot: int = 0, seq: int = 1,
                 tree: int = 0) -> bytes:
    """A worker's data packet for one of the job's trees, as it leaves its host."""
    m, t = spec.members[rank], spec.trees[tree]
    P = protocol.load(spec.values)
    host = topology.hosts[m.host]
    payload = P.pack(values, msg_type=P.MSG_DATA, job_id=t.job_id, child=t.children[rank], slot=slot, seq=seq)
    return raw(Ether(src=host.mac, dst=m.switch_mac) / IP(src=m.ip, dst=m.switch_ip)
               / UDP(sport=t.port, dport=spec.udp_port) / payload)


def run_tree(switches: Switches, spec, frames: dict[int, bytes]) -> dict[str, list[bytes]]:
    """Deliver frames through the switches' pipelines, following links; what reaches each host."""
    topo = switches.topology
    at_hosts: dict[str, list[bytes]] = {h: [] for h in topo.hosts}
    todo = [(*topo.attachment[spec.members[r].host], f) for r, f in frames.items()]
    while todo:
        sw, port, frame = todo.pop(0)
        for out_port, data in switches.switch(sw).process(port, frame):
            peer = topo.ports[sw][out_port]
            if peer.node in topo.hosts:
                at_hosts[peer.node].append(data)
            else:
                todo.append((peer.node, peer.peer_port, data))
    return at_hosts


# --- topology and plan (no switch) -----------------------------------------------------------

def test_topology_errors_name_the_problem():
    base = single(2)
    bad_link = {**base, "links": base["links"] + [["h1", "s1-p3"]]}
    with pytest.raises(TopologyError, match="h1 has more than one link"):
        Topology.from_dict(bad_link)
    with pytest.raises(TopologyError, match="neither a host nor a switch port"):
        Topology.from_dict({**base, "links": [["h1", "s9-p1"], ["h2", "s1-p2"]]})
    with pytest.raises(TopologyError, match="used by two links"):
        Topology.from_dict({**base, "links": [["h1", "s1-p1"], ["h2", "s1-p1"]]})
    dup = {**base, "hosts": {"h1": {"ip": "10.0.0.1/24", "mac": "02:00:00:00:00:01"},
                             "h2": {"ip": "10.0.0.1/24", "mac": "02:00:00:00:00:02"}}}
    with pytest.raises(TopologyError, match="IP address used twice"):
        Topology.from_dict(dup)


def build_tree(topo: Topology, members: list[str], max_children: int) -> dict[str, plan.TreeNode]:
    """The one-tree plan's nodes."""
    (one,) = plan.pack_trees(topo, members, max_children, max_trees=1).trees
    return plan.nodes(topo, members, one.tree)


def test_tree_root_children_and_fan_in():
    topo = Topology.from_dict(tree(2, 2))
    t = build_tree(topo, ["h1", "h2", "h3", "h4"], 32)
    assert t["s1"].parent is None and [c.node for c in t["s1"].children] == ["s2", "s3"]
    assert (t["s3"].parent, t["s3"].parent_port, t["s3"].index_at_parent) == ("s1", 1, 1)
    assert [(c.node, c.index, c.port) for c in t["s2"].children] == [("h1", 0, 2), ("h2", 1, 3)]
    local = build_tree(topo, ["h4", "h3"], 32)  # members under one leaf: that leaf is the root
    assert list(local) == ["s3"] and [c.node for c in local["s3"].children] == ["h4", "h3"]
    with pytest.raises(PlanError, match="3 children .* 2 bits"):
        build_tree(Topology.from_dict(single(3)), ["h1", "h2", "h3"], 2)


def _lookup(routes: list, address: int):
    """The longest prefix among ``routes`` that holds ``address``, as the LPM table finds it."""
    best = None
    for e in routes:
        prefix, length = e.key("hdr.ipv4.dst")
        mask = ~((1 << (32 - length)) - 1) & 0xFFFFFFFF
        if address & mask == prefix and (best is None or length > best[0]):
            best = (length, e)
    return None if best is None else best[1]


@pytest.mark.parametrize("spec", [fat_tree(8), leaf_spine(2, 4, 8)], ids=["fat_tree8", "leaf_spine"])
def test_folded_routes_take_every_switch_to_every_host(spec):
    """Routes fold into prefixes (hosts sent one way share the next hop's MAC) and spread over equal paths by
    the destination, yet from every switch a frame to any host gets there over a shortest path, with the
    host's MAC on the last hop."""
    topo = Topology.from_dict(spec)
    tables = {s: entries.route_entries(topo, s) for s in topo.switches}
    edges = {e for e, _ in topo.attachment.values()}
    assert max(len(tables[e]) for e in edges) < len(topo.hosts) / 2  # the leaves' routes did fold
    routes = load_declarations(PROTOCOL_P4.with_name("common") / "vocabulary.p4").constants["ROUTE_ENTRIES"]
    assert max(len(t) for t in tables.values()) <= int(routes)  # and every switch's fit the table
    # a leaf's routes to another leaf's hosts leave by every uplink (D-mod-k), not all by the first
    first, other = sorted(edges)[:2]
    ports = {_lookup(tables[first], int(topo.hosts[h].ip.ip)).param("port") for h, (e, _) in topo.attachment.items()
             if e == other}
    assert len(ports) == min(len(topo.switch_neighbours(first)), sum(e == other for e, _ in topo.attachment.values()))
    distance: dict[str, dict[str, int]] = {}  # edge: switch: hops from it
    for edge in {e for e, _ in topo.attachment.values()}:
        far, frontier, hops = distance.setdefault(edge, {edge: 0}), [edge], 0
        while frontier:
            hops += 1
            frontier = list(dict.fromkeys(n.node for f in frontier for n in topo.switch_neighbours(f)
                                          if n.node not in far))
            far.update(dict.fromkeys(frontier, hops))
    for host in topo.hosts.values():
        edge, _ = topo.attachment[host.name]
        for start in topo.switches:
            here, hops = start, 0
            while True:
                e = _lookup(tables[here], int(host.ip.ip))
                assert e is not None, f"{here} has no route to {host.name}"
                nxt = topo.ports[here][e.param("port")].node
                if nxt == host.name:
                    assert here == edge and e.param("dst_mac") == mac_int(host.mac)
                    break
                assert e.param("dst_mac") == mac_int(topo.switches[nxt].mac)
                here, hops = nxt, hops + 1
                assert hops < 8, f"{start} -> {host.name} loops"
            assert hops == distance[edge][start], f"{start} -> {host.name}: {hops} hops, not the shortest"


# --- against switches --------------------------------------------------------------------------

def test_setup_installs_routes_and_is_idempotent(net_single, tmp_path):
    c = controller(net_single, tmp_path)
    for _ in range(2):
        assert c.installed_entries("s1") == c.expected_entries("s1")
        c.setup()
    routes = {e.key("hdr.ipv4.dst"): e.param("port") for e in c.installed_entries("s1", V1MODEL.routes)}
    assert routes == {(0x0A000000 + i, 32): i for i in range(1, 5)}
    c.close()


def test_job_on_one_switch_sums(net_single, tmp_path):
    c = controller(net_single, tmp_path)
    spec = c.create_job("train", ["h1", "h2", "h3"], pool_size=16)
    (tree,) = spec.trees
    assert tree.children == (0, 1, 2) and spec.pool_size == 16 and (tree.root, tree.share) == ("s1", 1.0)
    assert JobSpec.load(tmp_path / "jobs" / "train.json") == spec
    jobs = members(c, "s1")
    assert {(e.key("sm.ingress_port"), e.key("hdr.ina.child")) for e in jobs} == {(1, 0), (2, 1), (3, 2)}
    assert c.installed_entries("s1") == c.expected_entries("s1")
    rng = np.random.default_rng(0)
    values = [rng.integers(-1000, 1000, spec.values, dtype=np.int32) for _ in range(3)]
    out = run_tree(net_single, spec, {r: contribution(net_single.topology, spec, r, values[r]) for r in range(3)})
    P = protocol.load(spec.values)
    assert out["h4"] == []
    for m in spec.members:
        (frame,) = out[m.host]
        pkt = Ether(frame)
        assert (pkt[IP].dst, pkt[UDP].dport, pkt[IP].src) == (m.ip, tree.port, m.switch_ip)
        fields, got = P.unpack(bytes(pkt[UDP].payload))
        assert fields["msg_type"] == P.MSG_RESULT and fields["child"] == tree.children[m.rank]
        np.testing.assert_array_equal(got, sum(v.astype(np.int64) for v in values))
    stats = c.status()["jobs"]["train"]["s1"]
    assert (stats["aggregated"], stats["results"]) == (3, 1)
    c.close()


def test_job_over_a_tree_sums_and_tables_match(net_tree, tmp_path):
    c = controller(net_tree, tmp_path)
    spec = c.create_job("big", ["h1", "h2", "h3", "h4"], pool_size=8)
    for sw in ("s1", "s2", "s3"):
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    assert c.installed_groups("s1") == {1: [(1, 0), (2, 1)]}  # to s2 and s3, instance = child index
    assert c.installed_groups("s3") == {1: [(2, 0), (3, 1)]}
    parent = {e.key("hdr.ina.child"): e.action for e in c.installed_entries("s2", V1MODEL.jobs)
              if e.key("sm.ingress_port") == 1}
    assert parent == {0: V1MODEL.result_from_parent}
    values = [np.full(spec.values, r + 1, dtype=np.int32) for r in range(4)]
    out = run_tree(net_tree, spec, {r: contribution(net_tree.topology, spec, r, values[r], slot=5, seq=9)
                                    for r in range(4)})
    P = protocol.load(spec.values)
    for m in spec.members:
        (frame,) = out[m.host]
        fields, got = P.unpack(bytes(Ether(frame)[UDP].payload))
        assert (fields["slot"], fields["seq"], fields["msg_type"]) == (5, 9, P.MSG_RESULT)
        assert (got == 10).all()
    c.close()


def test_two_jobs_then_delete_one(net_single, tmp_path):
    c = controller(net_single, tmp_path)
    a = c.create_job("a", ["h1", "h2"], pool_size=100)
    b = c.create_job("b", ["h3", "h4", "h1"], pool_size=50)
    bases = {j: c.state.jobs[j].trees[0].allocations["s1"].pool_base for j in "ab"}
    assert bases == {"a": 0, "b": 100} and a.trees[0].job_id != b.trees[0].job_id
    c.delete_job("a")
    assert {e.key("hdr.ina.job_id") for e in members(c, "s1")} == {b.trees[0].job_id}
    assert {e.key("hdr.ina.job_id") for e in c.installed_entries("s1", V1MODEL.receivers)} == {b.trees[0].job_id}
    assert not (tmp_path / "jobs" / "a.json").exists()
    assert list(c.installed_groups("s1")) == [c.state.jobs["b"].trees[0].allocations["s1"].cell + 1]
    c2 = c.create_job("c", ["h2"], pool_size=100)  # a's freed range is reused
    assert c.state.jobs["c"].trees[0].allocations["s1"].pool_base == 0
    # never the id of a job whose packets may still fly
    assert c2.trees[0].job_id not in (a.trees[0].job_id, b.trees[0].job_id)
    # b still aggregates
    vals = {r: np.full(b.values, 7, dtype=np.int32) for r in range(3)}
    out = run_tree(net_single, b, {r: contribution(net_single.topology, b, r, vals[r], slot=49) for r in range(3)})
    assert all(len(out[m.host]) == 1 for m in b.members)
    c.close()


@pytest.mark.parametrize("request_, message", [
    ({"members": ["h1", "h9"]}, "h9: not hosts of the topology"),
    ({"members": ["h1", "h1"]}, "listed twice"),
    ({"pool_size": 5000}, "outside 1..1024"),
    ({"pool_size": 600}, "no 600 free consecutive slots"),
    ({"pool_base": 400}, "overlaps slots 0..499"),
    ({"pool_base": 1000}, "does not fit"),
    ({"name": "first"}, "exists already"),
    ({"name": "bad name!"}, "use letters"),
])
def test_bad_requests_change_nothing(net_single, tmp_path, request_, message):
    c = controller(net_single, tmp_path)
    c.create_job("first", ["h1", "h2"], pool_size=500)
    before = (c.installed_entries("s1", V1MODEL.jobs), (tmp_path / "state.json").read_text())
    args = {"name": "second", "members": ["h3", "h4"], "pool_size": 100, "pool_base": None, **request_}
    with pytest.raises(JobError, match=message):
        c.create_job(args["name"], args["members"], args["pool_size"], args["pool_base"])
    assert (c.installed_entries("s1", V1MODEL.jobs), (tmp_path / "state.json").read_text()) == before
    c.close()


def test_a_job_over_two_trees_installs_both_and_deletes_both(net_leaf_spine, tmp_path):
    c = controller(net_leaf_spine, tmp_path)
    hosts = ["h1", "h2", "h3", "h4"]
    spec = c.create_job("packed", hosts, pool_size=8)
    assert sorted(t.root for t in spec.trees) == ["spine1", "spine2"]
    assert [t.share for t in spec.trees] == pytest.approx([0.5, 0.5]) and len({t.job_id for t in spec.trees}) == 2
    for sw in net_leaf_spine.topology.switches:
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    # each leaf carries both trees: two slot ranges, two multicast groups, each tree's parent its own spine
    leaf = c.state.jobs["packed"].trees
    assert sorted(t.allocations["leaf1"].pool_base for t in leaf) == [0, 8]
    assert len(c.installed_groups("leaf1")) == 2
    up = {e.key("hdr.ina.job_id"): e.key("sm.ingress_port") for e in members(c, "leaf1")
          if e.action == V1MODEL.result_from_parent}
    assert up == {t.job_id: 1 if t.root == "spine1" else 2 for t in spec.trees}  # leaf port p leads to spine p
    P = protocol.load(spec.values)
    for i, t in enumerate(spec.trees):  # every tree sums on its own spine and answers every member
        values = [np.full(spec.values, 10 * i + r, dtype=np.int32) for r in range(4)]
        out = run_tree(net_leaf_spine, spec, {r: contribution(net_leaf_spine.topology, spec, r, values[r], tree=i)
                                              for r in range(4)})
        for m in spec.members:
            (frame,) = out[m.host]
            fields, got = P.unpack(bytes(Ether(frame)[UDP].payload))
            assert fields["job_id"] == t.job_id and Ether(frame)[UDP].dport == t.port
            assert (got == sum(10 * i + r for r in range(4))).all()
        assert c.status()["jobs"]["packed"][t.root]["aggregated"] == 2  # the two leaves' partial sums
    c.delete_job("packed")
    for sw in net_leaf_spine.topology.switches:
        assert members(c, sw) == set() and c.installed_groups(sw) == {}, sw
    c.close()


def test_a_tree_over_a_dead_spine_moves_to_the_other(net_leaf_spine, tmp_path):
    """spine2 counts as down: its tree moves onto spine1 (same job id and share, a slot range of its own
    there, the leaves' allocations kept), the spec says so, and the moved tree sums through spine1."""
    c = controller(net_leaf_spine, tmp_path)
    hosts = ["h1", "h2", "h3", "h4"]
    before = c.create_job("packed", hosts, pool_size=8)
    moving = next(t for t in before.trees if t.root == "spine2")
    leaves = {sw: a for t in c.state.jobs["packed"].trees if t.job_id == moving.job_id
              for sw, a in t.allocations.items() if sw.startswith("leaf")}
    assert c.route_around(set(), set()) == []
    (line,) = c.route_around({"spine2"}, set())
    assert f"tree {moving.job_id} (root spine2) crosses spine2, down; moved to root spine1" in line
    spec = JobSpec.load(tmp_path / "jobs" / "packed.json")
    assert spec.version == 1 and [t.root for t in spec.trees] == ["spine1", "spine1"]
    moved = next(t for t in spec.trees if t.job_id == moving.job_id)
    assert (moved.incarnation, moved.share, moved.port) == (1, moving.share, moving.port)
    record = next(t for t in c.state.jobs["packed"].trees if t.job_id == moving.job_id)
    assert {sw: a for sw, a in record.allocations.items() if sw.startswith("leaf")} == leaves
    assert "spine2" not in record.allocations
    for sw in ("leaf1", "leaf2", "spine1"):
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    assert c.route_around({"spine2"}, set()) == []  # moved once: nothing crosses spine2 now
    values = [np.full(spec.values, r + 1, dtype=np.int32) for r in range(4)]
    i = spec.trees.index(moved)
    out = run_tree(net_leaf_spine, spec, {r: contribution(net_leaf_spine.topology, spec, r, values[r], tree=i)
                                          for r in range(4)})
    assert all(len(out[h]) == 1 for h in hosts)
    assert c.status()["jobs"]["packed"]["spine1"]["aggregated"] == 2
    # a leaf's uplink to spine1 down as well: nothing joins the two leaves any more
    uplink = net_leaf_spine.topology.port_links["leaf1", 1]
    lines = c.route_around({"spine2"}, {uplink})
    assert len(lines) == 2 and all("no other tree joins its members" in x for x in lines)
    assert c.route_around({"spine2"}, {uplink}) == []  # said once
    assert JobSpec.load(tmp_path / "jobs" / "packed.json") == spec
    c.close()


def eventually(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.01)


def test_a_port_down_reaches_the_controller(net_single, tmp_path):
    """The built-in target reports port status on the stream; a client that arbitrates later hears of
    the ports down then; failures() turns them into links."""
    c = controller(net_single, tmp_path)
    service = net_single.services["s1"]
    service.port_status(3, True, "s1-eth3")  # a port seen up for the first time: no message
    service.port_status(3, False, "s1-eth3")
    eventually(lambda: c.client("s1").ports_down == {3})
    assert c.failures() == (set(), {net_single.topology.port_links["s1", 3]})
    later = Controller(net_single.network, None, V64, election_id=5)
    eventually(lambda: later.client("s1").ports_down == {3})
    service.port_status(3, True, "s1-eth3")
    eventually(lambda: not c.client("s1").ports_down and not later.client("s1").ports_down)
    assert c.failures() == (set(), set())
    later.close()
    c.close()


def test_the_surviving_topology():
    topo = Topology.from_dict(leaf_spine(2, 2, 2))
    alive = topo.without({"spine2"}, {topo.port_links["leaf1", 1]})
    assert set(alive.switches) == set(topo.switches) and alive.switch_neighbours("spine2") == []
    assert [n.node for n in alive.switch_neighbours("leaf1")] == [] and set(alive.hosts) == set(topo.hosts)
    assert set(topo.without({"leaf1"}).hosts) == {"h3", "h4"}


def test_a_packed_job_that_does_not_fit_changes_nothing(net_leaf_spine, tmp_path):
    """The second tree's slots do not fit: refused with the tree named, no id, epoch or entry taken."""
    c = controller(net_leaf_spine, tmp_path)
    c.create_job("small", ["h1", "h2"], pool_size=8)  # under leaf1 alone
    before = (c.state.next_job_id, dict(c.state.next_epoch), (tmp_path / "state.json").read_text(),
              {sw: c.installed_entries(sw) for sw in net_leaf_spine.topology.switches})
    with pytest.raises(JobError, match=r"tree 2 of 2 \(root spine\d\): pool 1016..1031 does not fit switch leaf1"):
        c.create_job("big", ["h1", "h2", "h3", "h4"], pool_size=16, pool_base=1000)
    after = (c.state.next_job_id, dict(c.state.next_epoch), (tmp_path / "state.json").read_text(),
             {sw: c.installed_entries(sw) for sw in net_leaf_spine.topology.switches})
    assert after == before and list(c.state.jobs) == ["small"]
    c.close()


@pytest.mark.parametrize("trees, message", [(5, "5 trees asked for, but the planner found only 4 candidate"),
                                            (0, "trees must be 'auto' or a positive whole number"),
                                            ("many", "trees must be 'auto' or a positive whole number")])
def test_bad_tree_counts_change_nothing(tmp_path, trees, message):
    s = Switches(Topology.from_dict(leaf_spine(2, 2, 2)))  # one tree per switch as root
    try:
        c = controller(s, tmp_path)
        before = {sw: c.installed_entries(sw) for sw in s.topology.switches}
        with pytest.raises(JobError, match=message):
            c.create_job("x", ["h3", "h4"], pool_size=8, trees=trees)
        assert {sw: c.installed_entries(sw) for sw in s.topology.switches} == before and not c.state.jobs
        assert c.create_job("x", ["h3", "h4"], pool_size=8, trees=1).trees[0].root == "leaf2"
        c.close()
    finally:
        s.stop()


def test_too_many_members_for_one_switch(tmp_path):
    s = Switches(Topology.from_dict(single(33)))
    try:
        c = controller(s, tmp_path)
        with pytest.raises(JobError, match="33 children"):
            c.create_job("wide", [f"h{i}" for i in range(1, 34)], pool_size=8)
        assert members(c, "s1") == set()
        c.close()
    finally:
        s.stop()


def test_controller_restart_reads_its_state(net_single, tmp_path):
    c = controller(net_single, tmp_path)
    spec = c.create_job("keep", ["h1", "h2"], pool_size=8)
    expected = c.expected_entries("s1")
    c.close()
    again = Controller(net_single.network, tmp_path / "state.json")
    again.setup()
    assert again.job_spec("keep") == spec and again.expected_entries("s1") == expected
    assert again.installed_entries("s1") == expected
    again.close()


def test_a_lost_state_file_never_repeats_an_epoch_or_job_id(net_single, tmp_path):
    """The switch keeps the last epoch and job id it was given: a fresh controller continues above them."""
    first = controller(net_single, tmp_path / "a")
    old = first.create_job("a", ["h1", "h2"], pool_size=8)
    values = np.full(old.values, 100, np.int32)
    run_tree(net_single, old, {r: contribution(net_single.topology, old, r, values) for r in range(2)})
    first.delete_job("a")
    first.close()
    second = controller(net_single, tmp_path / "b")  # another state file: it knows nothing of job a
    new = second.create_job("b", ["h1", "h2"], pool_size=8)
    assert new.trees[0].job_id > old.trees[0].job_id
    assert second.state.jobs["b"].trees[0].allocations["s1"].epoch > 1
    # h1 alone sends the same slot and seq as job a's finished round: no stale sum comes back
    out = run_tree(net_single, new, {0: contribution(net_single.topology, new, 0, np.ones(new.values, np.int32))})
    assert out["h1"] == [] and out["h2"] == []
    second.close()


def test_setup_removes_what_no_job_needs_and_a_failed_create_rolls_back(net_tree, tmp_path):
    c = controller(net_tree, tmp_path)
    (one,) = plan.pack_trees(net_tree.topology, ["h1", "h2"], 32).trees
    stray = entries.job_entries(net_tree.topology, c.pipeline("s1").protocol,
                                plan.nodes(net_tree.topology, ["h1", "h2"], one.tree)["s2"], 77, 4,
                                entries.Allocation(500, 9, 3), 40077)
    c.io.install("s2", stray[0], stray[1])  # as if left by a crashed controller
    c.setup()
    assert c.installed_entries("s2") == c.expected_entries("s2") and c.installed_groups("s2") == {}
    net_tree.servers["s3"].stop(None)  # s3 goes away: the job cannot be installed there
    with pytest.raises(SwitchError):
        c.create_job("wide", ["h1", "h2", "h3", "h4"], pool_size=8)
    assert "wide" not in c.state.jobs and "wide" not in json.loads((tmp_path / "state.json").read_text())["jobs"]
    for sw in ("s1", "s2"):
        assert members(c, sw) == set() and c.installed_groups(sw) == {}, sw
    c.close()


class SwitchProcess:
    """The real `p4target-switch-grpc` command, without ports: enough for the control plane."""

    def __init__(self) -> None:
        self.port = free_port()
        self.cmd = [sys.executable, "-m", "p4target.switch_grpc", "--no-p4", "--device-id", "1", "--",
                    "--grpc-server-addr", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(self.cmd)
        self.network = Network(Topology.from_dict(single(2)),
                               {"s1": SwitchAccess(f"127.0.0.1:{self.port}", 1, "builtin")})

    def restart(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc = subprocess.Popen(self.cmd)


@pytest.fixture
def switch_process():
    sp = SwitchProcess()
    yield sp
    sp.proc.kill()
    sp.proc.wait()


def test_switch_process_restart_is_reprovisioned(switch_process, tmp_path):
    """Kill the real switch command, start it again: check_switches() installs everything again."""
    c = Controller(switch_process.network, tmp_path / "state.json", V64)
    c.setup()
    c.create_job("j", ["h1", "h2"], pool_size=4)
    expected = c.expected_entries("s1")
    assert c.check_switches() == []
    switch_process.restart()
    deadline = time.monotonic() + 20
    restarted: list[str] = []
    while not restarted and time.monotonic() < deadline:
        restarted = c.check_switches()
    assert restarted == ["s1"]
    assert c.installed_entries("s1") == expected
    assert c.installed_groups("s1") == {1: [(1, 0), (2, 1)]}
    c.close()


def test_command_line(switch_process, tmp_path):
    net = tmp_path / "net.json"
    switch_process.network.save(net)

    def ina_ctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", "--net", str(net), *args],
                              capture_output=True, text=True, timeout=60)

    assert ina_ctl("setup").returncode == 0
    made = ina_ctl("job", "create", "demo", "--hosts", "h1,h2", "--pool-size", "32")
    assert made.returncode == 0, made.stderr
    spec = json.loads((tmp_path / "jobs" / "demo.json").read_text())
    assert [m["host"] for m in spec["members"]] == ["h1", "h2"] and spec["pool_size"] == 32
    exported = ina_ctl("job", "create", "second", "--hosts", "h1,h2", "--pool-size", "8", "--export")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"export INA_JOB_SPEC={(tmp_path / 'jobs' / 'second.json').absolute()}\n"
    assert "job second: mode auto, 1 tree(s)" in exported.stderr
    assert ina_ctl("job", "delete", "second").returncode == 0
    status = json.loads(ina_ctl("status", "--json").stdout)
    assert status["jobs"]["demo"]["s1"]["aggregated"] == 0 and "truncated" in status["drops"]["s1"]
    table = ina_ctl("status").stdout.splitlines()  # for people: a row per job and switch, per switch's drops
    assert table[0].split()[:4] == ["job", "switch", "aggregated", "results"]
    assert table[1].split()[:3] == ["demo", "s1", "0"] and len(table[1].split()) == len(table[0].split())
    assert table[3].split()[:3] == ["switch", "drop", "truncated"] and table[4].split()[:2] == ["s1", "0"]
    bad = ina_ctl("job", "create", "other", "--hosts", "h1,h7", "--pool-size", "8")
    assert bad.returncode == 1 and "h7: not hosts of the topology" in bad.stderr and "Traceback" not in bad.stderr
    assert ina_ctl("job", "delete", "demo").returncode == 0
    assert "demo" not in json.loads(ina_ctl("status", "--json").stdout)["jobs"]
    assert ina_ctl("status").stdout.startswith("no jobs\n")
    missing = ina_ctl("job", "delete", "demo")
    assert missing.returncode == 1 and "no job named 'demo'" in missing.stderr
    assert ina_ctl("--help").returncode == 0


def test_command_line_plans_without_any_switch(tmp_path):
    """`job plan` reads the topology only: the switches' addresses here lead nowhere."""
    topology = Topology.from_dict(leaf_spine(2, 2, 2, host_bw=4, fabric_bw=2))
    net = tmp_path / "net.json"
    Network(topology, {sw: SwitchAccess("127.0.0.1:9", 1, "builtin") for sw in topology.switches}).save(net)

    def ina_ctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", "--net", str(net), "job", "plan", *args],
                              capture_output=True, text=True, timeout=60)

    shown = ina_ctl("--hosts", "h1,h2,h3,h4")
    assert shown.returncode == 0, shown.stderr
    assert "2 tree(s) of 4 candidates" in shown.stdout and "rate 4 Mb/s" in shown.stdout
    assert "links at capacity (8)" in shown.stdout and "leaf1-p1 -- spine1-p1 (2 Mb/s)" in shown.stdout
    data = json.loads(ina_ctl("--hosts", "h1,h2,h3,h4", "--json").stdout)
    assert sorted(t["root"] for t in data["trees"]) == ["spine1", "spine2"] and data["optimal"]
    one = json.loads(ina_ctl("--hosts", "h1,h2,h3,h4", "--trees", "1", "--json", "--size", "25MB").stdout)
    assert len(one["trees"]) == 1 and one["rate_mbps"] == pytest.approx(data["rate_mbps"] / 2)
    packed = json.loads(ina_ctl("--hosts", "h1,h2,h3,h4", "--json", "--size", "25MB").stdout)
    # a large call through the trees: the packed trees' twice the rate, nearly half the time
    one_call, packed_call = (x["calls"][0]["later"]["methods"]["ina"]["seconds"] for x in (one, packed))
    assert 1.9 < one_call / packed_call <= 2.0
    for args, message in [(("--hosts", "h1,spine1"), "spine1: not hosts of the topology"),
                          (("--hosts", "h1,h2", "--trees", "5"), "5 trees asked for, but the planner found only 4")]:
        bad = ina_ctl(*args)
        assert bad.returncode == 1 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert not (tmp_path / "controller-state.json").exists()  # planning wrote nothing


def test_command_line_plans_on_a_topology_file(tmp_path):
    """`job plan --topology` needs no network file, state or switch; a file of the other kind is named as such."""
    topologies = Path(__file__).parents[1] / "bmv2-env" / "topologies"

    def ina_ctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", *args], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)

    fattree = str(topologies / "fattree-4.json")
    shown = ina_ctl("job", "plan", "--topology", fattree, "--hosts", "h1,h2,h5,h9,h13")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("5 members, 1 tree(s) of 20 candidates") and "cut bound 1000 Mb/s: optimal" in \
        shown.stdout and "a 1 MB call (window open): ina" in shown.stdout and "<- runs" in shown.stdout
    data = json.loads(ina_ctl("job", "plan", "--topology", str(topologies / "leafspine-2x2.json"), "--hosts",
                              "h1,h2,h3,h4", "--trees", "1", "--json", "--mode", "ina").stdout)
    assert len(data["trees"]) == 1 and data["mode"] == "ina" and data["rate_mbps"] == 1000
    assert data["calls"][0]["later"]["runs"] == "ina"
    ring = ina_ctl("job", "plan", "--topology", fattree, "--hosts", "h1,h5", "--mode", "ring")
    assert ring.returncode == 0 and "no aggregation trees (a ring alone)" in ring.stdout
    assert list(tmp_path.iterdir()) == []  # planning wrote nothing
    net = tmp_path / "net.json"
    topology = Topology.load(topologies / "tree-4.json")
    Network(topology, {sw: SwitchAccess("127.0.0.1:9", 1, "builtin") for sw in topology.switches}).save(net)
    for args, message in [
            (("--net", fattree, "status"), "fattree-4.json is a topology file, not a network file: `ina-ctl job "
                                           "plan --topology"),
            (("job", "plan", "--topology", str(net), "--hosts", "h1,h2"), "net.json is a network file (net.json), "
                                                                          "not a topology file: pass it as --net"),
            (("--net", str(net), "job", "plan", "--topology", fattree, "--hosts", "h1"), "either --net or --topology"),
            (("job", "plan", "--topology", fattree, "--hosts", "h1,h99"), "h99: not hosts of the topology"),
            (("job", "plan", "--topology", str(tmp_path / "none.json"), "--hosts", "h1"), "No such file"),
            (("status",), "--net RUN/net.json is needed")]:
        bad = ina_ctl(*args)
        assert bad.returncode == 1 and message in bad.stderr and "Traceback" not in bad.stderr, (args, bad.stderr)


def test_watch_runs_beside_other_commands_and_follows_their_changes(switch_process, tmp_path):
    net = tmp_path / "net.json"
    switch_process.network.save(net)
    base = [sys.executable, "-m", "controller.cli", "--net", str(net)]
    assert subprocess.run(base + ["setup"], capture_output=True, timeout=60).returncode == 0
    watch = subprocess.Popen(base + ["watch", "--interval", "0.2"], stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        made = subprocess.run(base + ["job", "create", "late", "--hosts", "h1,h2", "--pool-size", "8"],
                              capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr  # election id 2 while watch holds 1
        time.sleep(0.5)
        switch_process.restart()
        checker = Controller(switch_process.network, tmp_path / "controller-state.json", election_id=None)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if any(e.key("hdr.ina.job_id") for e in members(checker, "s1")):
                    break
            except SwitchError:
                pass
            time.sleep(0.2)
        assert {e.key("sm.ingress_port") for e in members(checker, "s1")} == {1, 2}  # the job made after watch
        checker.close()
    finally:
        watch.terminate()
        watch.communicate(timeout=10)


def test_admission_plans_around_a_full_switch(tmp_path):
    """The planner picks trees by links, not slots: a job whose best tree crosses a full spine is planned
    again without it, and gets a tree of its own rather than the ring."""
    switches = Switches(Topology.from_dict(leaf_spine(2, 4, 2)))
    try:
        c = controller(switches, tmp_path)
        c.create_job("full", ["h1", "h3"], pool_size=1024, trees=1)
        [tree] = c.state.jobs["full"].trees
        c.create_job("next", ["h5", "h7"], trees=1, mode="ina", admit=True)
        job = c.state.jobs["next"]
        assert (job.mode, len(job.trees)) == ("ina", 1) and job.trees[0].tree.root != tree.tree.root
        assert tree.tree.root in job.admission or job.admission == ""
    finally:
        switches.stop()
