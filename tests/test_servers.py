"""Spare servers as aggregation devices (issue 62): the topology's server hosts and plain switches."""

from __future__ import annotations

import pytest

from controller import topology as topo
from controller.topology import Topology, TopologyError


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
