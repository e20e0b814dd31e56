"""The direct-connect planner (controller/direct.py): clusters checked by field, device trees within their
ports, plans that fit the cluster, NTT's step counts, and a tree part timed as the one model times it."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from controller import circuits, direct
from controller.cli import main as ina_ctl
from controller.direct import DirectCluster, DirectError
from controller.job_plan import plan_job
from controller.pipeline import build
from controller.topology import Topology
from worker import protocol

CLUSTER = {"workers": {"count": 16, "interfaces": 4, "gbps": 100}, "devices": {"count": 14, "ports": 4},
           "hop_latency_us": 1}


@pytest.mark.parametrize("n, ports, devices", [(128, 4, 63), (128, 8, 21), (2048, 8, 341), (4, 4, 1), (5, 4, 2)])
def test_a_full_tree_takes_ceil_n_less_2_over_e_less_2_devices_each_within_its_ports(n, ports, devices):
    assert circuits.tree_devices(n, ports) == devices == math.ceil((n - 2) / (ports - 2))
    wiring = circuits.tree_circuits(n, 0, tuple(range(devices)), ports)
    used = Counter(end.split(".")[0] for pair in wiring for end in pair)
    assert max(used[f"d{j}"] for j in range(devices)) <= ports
    assert all(used[f"w{w}"] == 1 for w in range(n))
    ports_seen = [end for pair in wiring for end in pair]
    assert len(ports_seen) == len(set(ports_seen))
    # a tree: devices + workers - 1 circuits, every node reaches device 0
    assert len(wiring) == devices + n - 1
    near = defaultdict(set)
    for a, b in wiring:
        near[a.split(".")[0]].add(b.split(".")[0])
        near[b.split(".")[0]].add(a.split(".")[0])
    seen, todo = {"d0"}, ["d0"]
    while todo:
        for x in near[todo.pop()] - seen:
            seen.add(x)
            todo.append(x)
    assert len(seen) == devices + n


def test_a_torus_is_the_hierarchical_ring_layout_on_circuits():
    from worker.ring_layout import Layout
    n, g = 24, 4
    wiring = dict(circuits.torus_circuits(n, g, (0, 1, 2, 3)))
    layout = Layout("hierarchical", (g, n // g), tuple(range(n)))
    for w in range(n):  # each rank's successor at each level is the far end of its circuit on that level
        assert wiring[f"w{w}.0"] == f"w{layout.peers(w, 0)[0]}.1"
        assert wiring[f"w{w}.2"] == f"w{layout.peers(w, 1)[0]}.3"
    torus = direct.plan(DirectCluster(n, 4, 10.0), 1 << 20, ["torus"])
    _fits(torus)
    chosen = torus.parts[0].shape.group
    assert chosen in (3, 4, 6, 8) and torus.steps == 2 * (chosen - 1) + 2 * (n // chosen - 1)



def test_a_torus_may_have_a_level_of_2_its_pair_on_two_circuits():
    """Levels of 2 beside one of 3 or more (2 x 2 is the ring's): 8 workers of 4 interfaces have tori of 4 x 2
    and 2 x 4, every port in one circuit, and each times as a ring per level: a pair's two directed rings of 2
    do 2 steps of half their half each, one on each of its two circuits, (g-1)/g of the share per interface."""
    from controller.rings import TCP_WIRE
    from worker.ring import HEADER
    assert [direct._torus_sizes(n) for n in (4, 6, 8, 9)] == [[], [2, 3], [2, 4], [3]]
    cluster = DirectCluster(8, 4, 10.0)
    ring_step = cluster.hop_latency + cluster.host_latency + HEADER.size * TCP_WIRE / cluster.link_bytes
    for g in (4, 2):
        torus = direct.plan_of(cluster, 1 << 20, [f"torus({g})"])
        _fits(torus)
        ports = [end for pair in torus.circuits for end in pair]
        assert len(ports) == len(set(ports)) == 8 * 4  # every port, once
        pairs = Counter(frozenset(end.split(".")[0] for end in pair) for pair in torus.circuits)
        assert sorted(pairs.values()) == [1] * 8 + [2] * 4  # the level of 2: each pair joined twice
        shape = torus.parts[0].shape
        assert shape.steps == 8 and shape.latency == pytest.approx(8 * ring_step)
        assert shape.per_byte == pytest.approx((1 / 2 if g == 2 else 3 / 4) * TCP_WIRE / cluster.link_bytes
                                               + (3 / 4 / 2 if g == 2 else 1 / 2 / 4) * TCP_WIRE / cluster.link_bytes)
        assert torus.parts[0].to_dict()["runs"] == "fabric and sockets"  # worker.direct.TorusPart
        assert not any("(fabric only)" in line for line in direct.describe(torus))

def test_the_tree_is_as_shallow_as_its_ports_allow():
    # 128 workers on fan-out-3 devices: 3 x 3^4 = 243 >= 128 > 81, so 5 device levels
    assert circuits.device_tree(128, 4).depth == 5
    assert circuits.device_tree(128, 8).depth == 3


@pytest.mark.parametrize("change, field", [
    (lambda d: d["workers"].update(count=1), "workers.count"),
    (lambda d: d["workers"].update(interfaces=0), "workers.interfaces"),
    (lambda d: d["workers"].update(gbps=-1), "workers.gbps"),
    (lambda d: d["workers"].pop("gbps"), "workers.gbps"),
    (lambda d: d["devices"].update(ports=2), "devices.ports"),
    (lambda d: d["devices"].update(count="many"), "devices.count"),
    (lambda d: d["devices"].update(colour="red"), "devices.colour"),
    (lambda d: d.update(hop_latency_us=-3), "hop_latency_us"),
    (lambda d: d.update(workers=[16]), "workers"),
    (lambda d: d["workers"].update(nic_streaming="yes"), "workers.nic_streaming"),
])
def test_a_bad_cluster_is_refused_naming_the_field(change, field):
    data = json.loads(json.dumps(CLUSTER))
    change(data)
    with pytest.raises(DirectError, match=rf"cluster\.json: .*{field}"):
        DirectCluster.from_dict(data, "cluster.json")


def test_a_cluster_file_round_trips(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(CLUSTER))
    cluster = DirectCluster.load(path)
    assert (cluster.workers, cluster.interfaces, cluster.devices, cluster.hop_latency) == (16, 4, 14, 1e-6)
    assert DirectCluster.from_dict(cluster.to_dict()) == cluster
    path.write_text("{")
    with pytest.raises(DirectError, match="c.json"):
        DirectCluster.load(path)


def _fits(plan: direct.DirectPlan) -> None:
    """The plan's invariants: ports used once, interfaces and devices within the cluster, shares cover."""
    c = plan.cluster
    direct.check_circuits(c, plan.circuits)
    assert sum(len(p.interfaces) for p in plan.parts) <= c.interfaces
    assert plan.devices_used <= c.devices
    assert math.isclose(sum(p.share for p in plan.parts), 1.0)
    slices = plan.slices(1000)
    assert slices[0][0] == 0 and slices[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))
    for p in plan.parts:  # every worker in every part
        ends = {end.split(".")[0] for pair in p.circuits for end in pair}
        assert {f"w{w}" for w in range(c.workers)} <= ends


def test_more_devices_never_slow_the_plan_and_none_gives_rings():
    cluster = DirectCluster(128, 4, 100.0, 0, 4)
    times = []
    for m in (*range(0, 24), 40, 63, 100, 126, 189, 252):
        found = direct.plan(replace(cluster, devices=m), 25 << 20)
        _fits(found)
        times.append(found.seconds)
        if m == 0:  # rings over circuits: flat ones, or rings of rings (fewer steps at 100 Gbit/s)
            assert {p.shape.kind for p in found.parts} <= {"ring", "torus"}
            flat = direct.plan(cluster, 25 << 20, ["ring"])
            assert [p.shape.kind for p in flat.parts] == ["ring", "ring"]
            assert flat.seconds == pytest.approx(found.baselines["ring"], rel=1e-6)
            assert found.seconds < flat.seconds / 2
    assert all(b <= a * (1 + 1e-6) for a, b in zip(times, times[1:]))
    assert times[-1] == pytest.approx(direct.plan(replace(cluster, devices=252), 25 << 20).baselines[
        "tree_per_interface"], rel=1e-3)
    # at 100 Gbit/s 11 devices do not help: a group of 12+ workers' chain of host relays holds the devices'
    # 1,024 slots for a host latency per hop, so its window carries a fraction of L; 63 do (groups of 6-8)
    assert times[11] == pytest.approx(times[0]) and times[25] < times[0] * 0.7
    slower = replace(cluster, link_gbps=10.0)  # where bytes, not round trips, cost: 11 devices already help
    assert direct.plan(replace(slower, devices=11), 25 << 20).seconds < direct.plan(slower, 25 << 20).seconds * 0.8


def test_partial_trees_are_chosen_when_devices_are_too_few_for_a_tree():
    found = direct.plan(DirectCluster(128, 4, 25.0, 22, 4), 25 << 20)
    assert {p.shape.kind for p in found.parts} == {"ring_tree"}
    baseline = direct.plan(DirectCluster(128, 4, 25.0, 22, 4), 25 << 20, ["ring", "torus", "tree"])
    assert found.seconds < baseline.seconds * 0.7


def test_ntts_table_eight_nodes_of_four_interfaces():
    cluster = DirectCluster(8, 4, 100.0, nic_streaming=True)
    rows = {kinds: direct.plan(cluster, 1 << 20, [kinds]) for kinds in ("ring", "nic_mesh(2)", "nic_mesh(4)")}
    assert {k: p.steps for k, p in rows.items()} == {"ring": 14, "nic_mesh(2)": 7, "nic_mesh(4)": 3}
    for p in rows.values():
        assert p.transfer_lb == pytest.approx(0.4375)
        _fits(p)
    # the optimised topology is K_{4,4}: every circuit joins an even worker to an odd one
    assert all(int(a[1]) % 2 != int(b[1]) % 2 for a, b in rows["nic_mesh(4)"].circuits)
    assert direct.plan(cluster, 1 << 20).steps == 3  # the whole catalogue finds it


def test_a_tree_part_is_timed_as_the_one_model_times_its_topology():
    P = protocol.load()
    cluster = DirectCluster(64, 2, 100.0, 2 * circuits.tree_devices(64, 4), 4)
    found = direct.plan(cluster, 16 << 20, ["tree"])
    part = found.parts[0]
    topology = Topology.from_dict(direct.tree_topology(cluster, part))
    job = plan_job(topology, [f"h{w + 1}" for w in range(64)], P, 1, "ina", pool_size=part.shape.window)
    assert job.tree_plan.trees[0].tree.root == f"d{part.root}"
    elements = round(part.share * found.nbytes / 4)
    model = job.model.ina_choice(elements, False, [1 << 30]).seconds
    assert part.shape.exact_seconds(elements * 4, P.values) == pytest.approx(model, rel=1e-6)


def test_the_device_pool_is_the_programs():
    assert direct.DEVICE_POOL == build("builtin").pool_slots


def test_a_bad_request_is_refused():
    cluster = DirectCluster(16, 1, 10.0)
    with pytest.raises(DirectError, match="no part fits 16 workers with 1 interface"):
        direct.plan(cluster, 1 << 20)
    with pytest.raises(DirectError, match="bytes"):
        direct.plan(DirectCluster(16, 2, 10.0), 0)


def test_ina_ctl_direct_plan_prints_the_plan_and_writes_the_circuits(tmp_path, capsys):
    out = tmp_path / "circuits.json"
    assert ina_ctl(["direct", "plan", "--workers", "16", "--interfaces", "3", "--gbps", "10", "--devices", "7",
                    "--size", "4MB", "--circuits", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {p["kind"] for p in shown["parts"]} <= {"tree", "ring", "ring_tree", "torus"}
    assert json.loads(out.read_text()) == shown["circuits"]
    assert ina_ctl(["direct", "plan", "--workers", "16", "--gbps", "10"]) == 1
    assert "--interfaces" in capsys.readouterr().err


def test_a_plan_of_given_parts_ends_them_together():
    cluster = DirectCluster(16, 3, 10.0, circuits.tree_devices(16, 4), 4)
    mixed = direct.plan_of(cluster, 8 << 20, ["tree", "ring"])
    assert [p.shape.kind for p in mixed.parts] == ["ring", "tree"]
    _fits(mixed)
    ends = [p.shape.seconds(p.share * mixed.nbytes) for p in mixed.parts]
    assert ends[0] == pytest.approx(ends[1], rel=1e-9)
    with pytest.raises(DirectError, match="take 4 interface"):
        direct.plan_of(cluster, 8 << 20, ["tree", "ring", "tree"])
    with pytest.raises(DirectError, match="torus"):
        direct.plan_of(cluster, 8 << 20, ["torus(4)"])
