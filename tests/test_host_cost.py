"""What a packet costs a host's CPU (issue 42): the fabric's hosts spend it one datagram after another on one
CPU (``virtual_fabric.hosts``), the model paces a tree no faster than it (``controller.model.HostCost``,
``worker.tuner.TreePipe.host_spacing``), ``ina-sim run --host-cost`` gives both the same cost, and without
one every figure is what it was before host costs existed."""

from __future__ import annotations

import json

import pytest

from controller import plan
from controller.model import NO_HOST_COST, HostCost, JobTree, tree_pipe
from controller.topology import Topology, leaf_spine
from virtual_fabric import cli, host_cost, runs
from worker import protocol
from worker.tuner import CallModel, InaCost, TreePipe

P = protocol.load(256)
# one switch, four hosts at 100 Gbit/s: the figures recorded at 4dd4204, before hosts had a CPU
SINGLE = runs.RunConfig(topology="single:4", bw=100000, delay="1us", size=65536, calls=2, pool_size=64)
# two packed trees (the fabric's links a quarter of the hosts'): one CPU serves both
TWO_TREES = runs.RunConfig(topology="fat_tree:4", workers=8, bw=100000, fabric_bw=25000, delay="1us", size=262144,
                           calls=2, pool_size=128)


def test_parse_takes_none_measured_one_figure_or_send_and_receive():
    assert host_cost.parse("none") == NO_HOST_COST and NO_HOST_COST.free
    assert host_cost.parse("0.5") == HostCost(0.5e-6, 0.5e-6)
    assert host_cost.parse("0.4/0.6") == HostCost(0.4e-6, 0.6e-6)
    assert host_cost.parse("0").free
    for bad in ("fast", "1/x", "-1", "1/2/3"):
        with pytest.raises(ValueError, match="host cost"):
            host_cost.parse(bad)
    with pytest.raises(SystemExit):
        cli.main(["run", "--host-cost", "fast"])


def test_the_committed_calibration_says_where_it_came_from():
    data = json.loads(host_cost.CALIBRATION.read_text())
    cost = host_cost.measured()
    assert cost == host_cost.parse("measured") and not cost.free
    assert cost.send == pytest.approx(data["send_us"] * 1e-6) and cost.receive_per_byte >= 0
    assert {"machine", "date", "command", "split", "points"} <= set(data)
    assert data["command"].startswith("python -m bench.host_cost")
    assert sorted(p["values"] for p in data["points"]) == [64, 256]
    for point in data["points"]:  # the fit goes through both points
        assert cost.per_packet(point["datagram_bytes"]) == pytest.approx(point["cpu_us_per_packet"] * 1e-6, rel=1e-6) \
            or cost.send_per_byte == 0


def test_a_trees_host_spacing_is_the_cpu_per_packet_over_its_share_and_its_round_trip_pays_it_once():
    topology = Topology.from_dict(leaf_spine(2, 2, 2, host_bw=100000.0, fabric_bw=25000.0))
    members = [f"h{i}" for i in range(1, 5)]
    found = plan.pack_trees(topology, members, 32)
    assert len(found.trees) == 2
    t = found.trees[0]
    job_tree = JobTree(t.tree, t.rate, t.share)
    free = tree_pipe(topology, members, job_tree, t.rate, P.frame_bytes, 20e-6)
    cpu = HostCost(1e-6, 2e-6, 1e-9, 0.0).per_packet(P.packet_bytes)
    assert cpu == pytest.approx(3e-6 + P.packet_bytes * 1e-9)
    costed = tree_pipe(topology, members, job_tree, t.rate, P.frame_bytes, 20e-6, host_seconds=cpu)
    assert costed.host_spacing == pytest.approx(cpu / t.share) and costed.spacing == free.spacing
    assert costed.round_trip == pytest.approx(free.round_trip + cpu)
    assert costed.pace == max(costed.spacing, costed.host_spacing) == costed.host_spacing
    # the bottleneck spacing f sets the call's bandwidth term: one tree, an open window, n packets
    pipe = TreePipe(1.0, 30e-6, 1e-7, 3e-6)
    assert pipe.seconds(1000, 256, 256) == pytest.approx(30e-6 + 999 * 3e-6)


def test_a_spec_carries_host_spacing_only_where_hosts_cost_time():
    free = CallModel(256, InaCost((TreePipe(1.0, 30e-6, 1e-7),), 64), ())
    assert "host_spacing" not in free.to_dict()["ina"]["trees"][0]  # as specs were before host costs
    assert CallModel.from_dict(free.to_dict()) == free
    costed = CallModel(256, InaCost((TreePipe(1.0, 30e-6, 1e-7, 3e-6),), 64), ())
    assert CallModel.from_dict(json.loads(json.dumps(costed.to_dict()))) == costed


def test_no_host_cost_is_the_fabric_before_host_costs_bit_for_bit():
    """The figures ``SINGLE`` gave once its second call sent no exponent window (piggybacked exponents), to the
    last bit: none (and a cost of 0) leaves the fabric as it was."""
    for text in ("none", "0"):
        r = runs.run(runs.RunConfig(**{**vars(SINGLE), "host_cost": text}))
        assert [c["seconds"] for c in r["calls"]] == [0.000184, 9.799999999999997e-05]
        assert [c["model"] for c in r["calls"]] == [0.00018199088, 9.614576e-05]
        assert r["virtual"].hex() == "0x1.27b2cc70867adp-12" and r["events"] == 4868 and r["passes"] == 2304
        assert r["where"]["worker_seconds"]["window"] == 0.00023499999999999997 and r["host_cost"] is None


def test_a_host_cost_slows_the_fabric_by_what_the_model_says():
    """Two trees on one CPU of 1 us per datagram each way: the host, not the 100 Gbit/s links, sets the pace,
    in the fabric and in the model alike (each call within 3% of its prediction, the slowdown within 5%).  The
    model times the second call with no exponent window and no wrong hint; the fabric's inputs change from
    call to call, and a hint of its first window that is wrong costs a packet and a round trip more (6% at
    the links' pace here, within 3% where the host sets it)."""
    free = runs.run(TWO_TREES)
    costed = runs.run(runs.RunConfig(**{**vars(TWO_TREES), "host_cost": "1"}))
    assert free["job"]["trees"] == costed["job"]["trees"] == 2
    for r in (free, costed):
        assert r["check"]["within_bound"] and r["check"]["identical"] and r["check"]["calls_checked"] == 2
        for call in r["calls"]:
            assert 0.97 < call["ratio"] < (1.03 if r is costed or call is r["calls"][0] else 1.08), call
    # the first call: the model knows what it sends (the second's wrong hints it does not)
    slower = costed["calls"][0]["seconds"] / free["calls"][0]["seconds"]
    predicted = costed["calls"][0]["model"] / free["calls"][0]["model"]
    assert slower > 5 and slower == pytest.approx(predicted, rel=0.05)
    # every packet of a call (its chunks, and a window of exponents per tree in the first; the second's redos
    # are a few) cost 2 us of the one CPU: busy nearly always
    packets = 2 * -(-TWO_TREES.size // P.values) + 2 * TWO_TREES.pool_size
    assert costed["host_cost"]["busy_seconds_per_worker"] == pytest.approx(packets * 2e-6, rel=0.01)
    assert costed["host_cost"]["busy_seconds_per_worker"] > 0.95 * costed["virtual"]
    assert costed["where"]["tail_drops"] == 0  # what the CPU is still sending counts against the queue's room
