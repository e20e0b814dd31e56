"""Aggregation servers measured, shared and moved (issue 62): ``ina-ctl calibrate --server`` in the fabric against
server engines slower than the topology says, admission sharing a server's cores between jobs, and a dead
server's trees moved onto the one left."""

from __future__ import annotations

import pytest

from controller import topology as topo
from controller.calibrate import calibrate_server
from controller.topology import Topology
from virtual_fabric.calibrate import fabric_burst
from virtual_fabric.fabric import Fabric

WORKERS = ["h1", "h2", "h3", "h4"]


def _fabric(workers: int = 4, servers: int = 2, cores: int = 2, gbps: float = 10.0) -> Fabric:
    return Fabric(Topology.from_dict(topo.servers(workers, servers, cores, 1, host_bw=gbps * 1e3,
                                                  fabric_bw=gbps * 1e3)))


def _shares(planned) -> dict[str, float]:
    """Of a plan's (lane) trees, the share of the call each root takes."""
    shares: dict[str, float] = {}
    for t in planned.tree_plan.trees:
        shares[t.tree.root] = shares.get(t.tree.root, 0.0) + t.share
    return shares


def test_a_server_slower_than_the_topology_says_is_measured_and_the_plan_follows():
    fabric = _fabric()
    assert fabric.controller.topology.hosts["srv1"].server.agg_pps_per_core == topo.SERVER_AGG_PPS_PER_CORE
    fabric.switches["srv1"].agg_pps = 150e3  # its real cores: half what the topology says
    before = fabric.controller.plan(WORKERS, lanes=2)
    assert _shares(before) == pytest.approx({"srv1": 0.5, "srv2": 0.5})  # as the topology says
    measured = calibrate_server(fabric.controller, "srv1", WORKERS, values=1 << 17, burst=fabric_burst(fabric))
    assert measured.cores == 2 and measured.per_core_pps == pytest.approx(150e3, rel=0.10), measured.line()
    srv2 = calibrate_server(fabric.controller, "srv2", WORKERS, values=1 << 17, burst=fabric_burst(fabric))
    assert srv2.per_core_pps == pytest.approx(300e3, rel=0.10), srv2.line()
    assert fabric.controller.state.server_rates == {"srv1": measured.per_core_pps, "srv2": srv2.per_core_pps}
    assert not fabric.controller.state.jobs  # the temporary jobs are gone
    after = fabric.controller.plan(WORKERS, lanes=2)
    assert _shares(after)["srv1"] == pytest.approx(measured.per_core_pps / (measured.per_core_pps + srv2.per_core_pps))
    assert after.limit_mbps < before.limit_mbps  # C: what the servers really sum
