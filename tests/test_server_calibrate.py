"""Aggregation servers measured, shared and moved (issue 62): ``ina-ctl calibrate --server`` in the fabric against
server engines slower than the topology says, admission sharing a server's cores between jobs, and a dead
server's trees moved onto the one left."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from controller import topology as topo
from controller.calibrate import calibrate_server
from controller.controller import JobError
from controller.state import ControllerState, StateError
from controller.topology import Topology
from virtual_fabric.calibrate import fabric_burst
from virtual_fabric.fabric import Fabric
from worker.batch_io import BatchSocket

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
    ctl = fabric.controller
    assert ctl.topology.hosts["srv1"].server.agg_pps_per_core == topo.SERVER_AGG_PPS_PER_CORE
    fabric.switches["srv1"].agg_pps = 150e3  # its real cores: half what the topology says
    before = ctl.plan(WORKERS, lanes=2)
    assert _shares(before) == pytest.approx({"srv1": 0.5, "srv2": 0.5})  # as the topology says
    ctl.create_job("live", WORKERS, 32, lanes=2)
    live = ctl.job_plan("live").limit_mbps
    measured = calibrate_server(ctl, "srv1", WORKERS, values=1 << 17, burst=fabric_burst(fabric))
    assert measured.cores == 2 and measured.per_core_pps == pytest.approx(150e3, rel=0.10), measured.line()
    assert measured.jobs == ["live"] and ctl.job_plan("live").limit_mbps < live  # its model made again
    srv2 = calibrate_server(ctl, "srv2", WORKERS, values=1 << 17, burst=fabric_burst(fabric))
    assert srv2.per_core_pps == pytest.approx(300e3, rel=0.10), srv2.line()
    assert ctl.state.server_rates == {"srv1": measured.per_core_pps, "srv2": srv2.per_core_pps}
    assert list(ctl.state.jobs) == ["live"]  # the temporary jobs are gone
    ctl.delete_job("live")  # (beside it a new job would find half of each server: the next test)
    after = ctl.plan(WORKERS, lanes=2)
    assert _shares(after)["srv1"] == pytest.approx(measured.per_core_pps / (measured.per_core_pps + srv2.per_core_pps))
    slower = (measured.per_core_pps + srv2.per_core_pps) / (2 * topo.SERVER_AGG_PPS_PER_CORE)
    assert after.limit_mbps == pytest.approx(before.limit_mbps * slower)  # C: what the servers really sum...
    for method in ("ina", "hybrid"):  # ...and what the trees are paced at, alone or beside the ring
        assert after.options(1 << 24)[method].ina_pace_mbps == pytest.approx(
            before.options(1 << 24)[method].ina_pace_mbps * slower)


def _start(fabric: Fabric, name: str, hosts: list[str], values: int, calls: int = 2, **options):
    """A job whose workers each make ``calls`` float calls of small whole numbers (so every sum is exact)."""
    arrays = [[np.full(values, rank + call + 1, np.float32) for call in range(calls)] for rank in range(len(hosts))]
    return fabric.create_job(name, hosts, arrays, **options)


def _finished(job) -> float:
    """Every rank's sums exact; the job's last call's time over its model's."""
    n = len(job.workers)
    for w in job.workers:
        assert [r.error for r in w.records] == [None] * len(w.arrays), (job.spec.name, w.rank)
        for call, r in enumerate(w.records):
            assert np.array_equal(r.result, np.full(r.result.shape, sum(k + call + 1 for k in range(n)), np.float32))
    last = [w.records[-1] for w in job.workers]
    return max(r.ended - r.started for r in last) / last[0].choice.seconds


def test_a_second_job_sees_what_the_first_leaves_of_a_server():
    fabric = _fabric()
    ctl = fabric.controller
    alone = ctl.plan(["h3", "h4"], lanes=2)
    assert _shares(alone) == pytest.approx({"srv1": 0.5, "srv2": 0.5})
    a = _start(fabric, "a", ["h1", "h2"], 1 << 17, pool_size=32, trees=1, lanes=2, mode="ina")
    (taken,) = {t.root for t in a.spec.trees}
    other = "srv2" if taken == "srv1" else "srv1"
    found = ctl.plan(["h3", "h4"], lanes=2)  # job a sums on all of its server: a fair half is left of it
    assert _shares(found) == pytest.approx({taken: 1 / 3, other: 2 / 3})
    assert found.limit_mbps == pytest.approx(alone.limit_mbps * 3 / 4)  # 1.5 servers' cores of 2
    b = _start(fabric, "b", ["h3", "h4"], 1 << 17, pool_size=32, lanes=2, mode="ina")
    assert ctl.state.jobs["b"].server_shares == pytest.approx({taken: 0.5})
    assert ctl.job_plan("b").limit_mbps == pytest.approx(found.limit_mbps)  # its spec's model: as planned
    assert ctl.job_plan("a").limit_mbps == pytest.approx(alone.limit_mbps / 2)  # a's: all of one server
    fabric.run(20.0)  # both at once, a's server shared: exact sums, each near its model (b's part on a's
    # server waits behind a, whose workers keep the pace they were planned at: 1.14x measured)
    assert _finished(a) < 1.1 and _finished(b) < 1.25
    ctl.delete_job("a")
    ctl.delete_job("b")
    assert _shares(ctl.plan(["h3", "h4"], lanes=2)) == pytest.approx({"srv1": 0.5, "srv2": 0.5})  # all free again


def test_a_calibration_that_cannot_run_changes_nothing_and_the_rates_persist(tmp_path):
    fabric = _fabric()
    ctl = fabric.controller
    with pytest.raises(JobError, match="gives no way to run commands on h1"):
        calibrate_server(ctl, "srv1", WORKERS)  # the hosts' own processes: this network file has no host_exec
    with pytest.raises(JobError, match="h1 is not an aggregation server"):
        calibrate_server(ctl, "h1", WORKERS, burst=fabric_burst(fabric))
    with pytest.raises(JobError, match="srv1: aggregation server"):
        calibrate_server(ctl, "srv2", ["srv1", "h1"], burst=fabric_burst(fabric))
    with pytest.raises(JobError, match="must be positive"):
        ctl.server_calibrated("srv1", 0.0)
    assert not ctl.state.jobs and not ctl.state.server_rates
    ctl.state.server_rates["srv1"] = 1.5e5
    ctl.state.save(tmp_path / "state.json")
    assert ControllerState.load(tmp_path / "state.json").server_rates == {"srv1": 1.5e5}
    assert ctl.topology.hosts["srv1"].server.agg_pps_per_core == 1.5e5
    assert ctl.network.topology.hosts["srv1"].server.agg_pps_per_core == topo.SERVER_AGG_PPS_PER_CORE  # the file's
    data = json.loads((tmp_path / "state.json").read_text())
    data["server_rates"] = {"srv1": "fast"}
    (tmp_path / "state.json").write_text(json.dumps(data))
    with pytest.raises(StateError, match="server_rates must map each server to a positive number"):
        ControllerState.load(tmp_path / "state.json")


@pytest.mark.parametrize("gso", [True, False])
def test_a_worker_socket_retargets_to_another_server(gso):
    """A server tree moved to another server: the worker's socket sends there from then on (GSO's sendto and
    sendmmsg's prepared messages both)."""
    sender, first, second = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3))
    try:
        for s in (sender, first, second):
            s.bind(("127.0.0.1", 0))
            s.settimeout(2.0)
        if not gso:
            sender.setsockopt(socket.SOL_SOCKET, 11, 1)  # SO_NO_CHECK: the kernel refuses GSO, so sendmmsg
        io = BatchSocket(sender, 100, first.getsockname())
        rows = np.arange(3 * 100, dtype=np.uint32).astype(np.uint8).reshape(3, 100)
        assert io.send(rows) == 3 and first.recv(65536) == rows[0].tobytes()
        io.retarget(second.getsockname())
        assert io.send(rows) == 3 and [second.recv(65536) for _ in range(3)] == [r.tobytes() for r in rows]
        assert io.gso == gso
    finally:
        for s in (sender, first, second):
            s.close()


def test_a_dead_servers_trees_move_to_the_server_left_and_the_calls_finish_exactly():
    fabric = _fabric()
    job = _start(fabric, "j", WORKERS, 1 << 16, calls=4, pool_size=32, lanes=2, mode="ina")
    assert sorted({t.root for t in job.spec.trees}) == ["srv1", "srv2"]
    fabric.loop.at(1.2e-3, fabric.kill_switch, "srv1")  # during the second call (0.85 ms each)
    fabric.run(20.0)
    _finished(job)  # every call of every rank, exact
    ended = max(r.ended for w in job.workers for r in w.records)
    print(f"calls ended at {ended * 1e3:.1f} ms of virtual time")
    assert ended < 1.0, ended  # the move at the next round, the spec SPEC_PERIOD later: last windows again
    moved = [line for _, line in fabric.log if "moved to root srv2" in line]
    assert len(moved) == 2 and all("crosses srv1, srv1 -- s1-p5" in line for line in moved), fabric.log
    spec = fabric.controller.job_spec("j")
    assert {t.root for t in spec.trees} == {"srv2"} and {t.to_ip for t in spec.trees} == {"10.0.0.6"}
    assert all(t.incarnation == 1 for t in spec.trees if t.job_id in {u.job_id for u in job.spec.trees
                                                                        if u.root == "srv1"})
    assert fabric.switches["srv2"].agg_busy > fabric.switches["srv1"].agg_busy  # srv2 summed the rest


def test_a_job_is_admitted_around_a_server_whose_slots_are_taken():
    ctl = _fabric().controller
    first = ctl.create_job("a", ["h1", "h2"], ctl.pipeline("srv1").pool_slots, trees=1, lanes=2, mode="ina")
    (full,) = {t.root for t in first.trees}  # every slot of that server
    other = "srv2" if full == "srv1" else "srv1"
    spec = ctl.create_job("b", ["h3", "h4"], 64, lanes=2, admit=True)
    assert {t.root for t in spec.trees} == {other}
    assert f"planned around full switch(es) {full}" in ctl.state.jobs["b"].admission
