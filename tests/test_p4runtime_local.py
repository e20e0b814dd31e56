"""The real controller driving the built-in target's P4Runtime servers in process
(virtual_fabric.p4runtime_local), in virtual time: no socket, no thread, a clock the test moves.

Each switch of a topology gets its own P4RuntimeServer on a dataplane without ports; all share
one DeviceConfigCache, so the program is parsed once for the module.  Whatever the controller
installs is read back through the same servers, and failures are the servers' own: a stopped
server is a dead switch, a new one without a pipeline a restarted switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from controller.controller import DEAD_AFTER, Controller
from controller.network import Network, SwitchAccess
from controller.p4runtime_client import SwitchClient, SwitchError, WriteError
from controller.pipeline import PipelineOptions
from controller.schema import Schema, multicast_group
from controller.topology import Topology, leaf_spine, single
from p4target.dataplane import Dataplane
from p4target.runtime.device_config import DeviceConfigCache
from p4target.runtime.service import P4RuntimeServer, serve
from tests.conftest import free_port
from virtual_fabric.p4runtime_local import LocalSwitchClient
from worker.jobspec import JobSpec

V64 = PipelineOptions(values=64)
HOSTS = ["h1", "h2", "h3", "h4"]
Update = p4runtime_pb2.Update


class FakeClock:
    """Virtual time: moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class LocalSwitches:
    """One in-process P4Runtime server per switch of the topology."""

    def __init__(self, topology: Topology, compile: DeviceConfigCache) -> None:
        self.topology = topology
        self.compile = compile
        self.servers: dict[str, P4RuntimeServer] = {}
        access = {}
        for name, sw in topology.switches.items():
            access[name] = SwitchAccess(f"in-process:{name}", sw.index + 1, "builtin")
            self.start(name, sw.index + 1)
        self.network = Network(topology, access)

    def start(self, name: str, device_id: int) -> None:
        """A switch process starting: a new server, no pipeline."""
        self.servers[name] = P4RuntimeServer(Dataplane([]), device_id, compile=self.compile)

    def connect(self, name: str) -> LocalSwitchClient:
        return LocalSwitchClient(self.servers[name], self.servers[name].device_id, name=name)

    def restart(self, name: str) -> None:
        self.servers[name].stop()
        self.start(name, self.servers[name].device_id)


@pytest.fixture(scope="module")
def cache() -> DeviceConfigCache:
    return DeviceConfigCache()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def controller(switches: LocalSwitches, tmp_path: Path, clock: FakeClock) -> Controller:
    c = Controller(switches.network, tmp_path / "state.json", V64, connect=switches.connect, clock=clock)
    c.setup()
    return c


def test_setup_and_a_job_land_on_every_switch(cache, clock, tmp_path):
    """Routes, then a packed job's trees, read back from each server as the controller expects them;
    four switches of one program parse it once (the module's cache)."""
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    c = controller(net, tmp_path, clock)
    for sw in net.topology.switches:
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
        assert net.servers[sw].pipeline is not None
    spec = c.create_job("packed", HOSTS, pool_size=8)
    assert sorted(t.root for t in spec.trees) == ["spine1", "spine2"]
    for sw in net.topology.switches:
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    assert len(c.installed_entries("leaf1")) > len(c.installed_entries("spine1"))  # both trees cross leaf1
    assert cache.parsed == 1
    assert c.watch_once() == []  # nothing to do
    c.delete_job("packed")
    assert all(c.installed_entries(sw) == c.expected_entries(sw) for sw in net.topology.switches)
    c.close()


def failing_batch(c: Controller, switch: str) -> list[p4runtime_pb2.Update]:
    """An insert of what exists, a delete of what does not, and a good modify: one code each."""
    route = min(c.installed_entries(switch), key=repr)
    entity = p4runtime_pb2.Entity(table_entry=Schema(c.pipeline(switch).p4info).table_entry(route))
    return [Update(type=Update.INSERT, entity=entity), Update(type=Update.DELETE, entity=multicast_group(4000, [])),
            Update(type=Update.MODIFY, entity=entity)]


def test_a_write_error_names_every_update_as_over_grpc(cache, clock, tmp_path):
    """The same failing batch gives the same WriteError in process as through gRPC to a twin switch."""
    local = LocalSwitches(Topology.from_dict(single(4)), cache)
    c = controller(local, tmp_path / "local", clock)
    twin = P4RuntimeServer(Dataplane([]), device_id=1, compile=cache)
    address = f"127.0.0.1:{free_port()}"
    server = serve(twin, address)
    try:
        grpc_net = Network(local.topology, {"s1": SwitchAccess(address, 1, "builtin")})
        over_grpc = Controller(grpc_net, tmp_path / "grpc" / "state.json", V64)
        over_grpc.setup()
        errors = []
        for ctl in (c, over_grpc):
            with pytest.raises(WriteError) as caught:
                ctl.client("s1").write(failing_batch(ctl, "s1"))
            errors.append(caught.value)
        assert errors[0].codes == errors[1].codes == ["ALREADY_EXISTS", "NOT_FOUND", "OK"]
        assert isinstance(over_grpc.client("s1"), SwitchClient)
        assert str(errors[0]).replace("s1", address) == str(errors[1])
        over_grpc.close()
    finally:
        server.stop(None)
    c.close()


def test_arbitration_in_process(cache, clock, tmp_path):
    """A higher election id takes the primary role from the controller (whose writes are then refused),
    a lower one is refused, a taken one ends its stream; once the higher one leaves, the controller is
    primary again.  An observer reads without arbitrating."""
    net = LocalSwitches(Topology.from_dict(single(4)), cache)
    c = controller(net, tmp_path, clock)
    server = net.servers["s1"]
    usurper = LocalSwitchClient(server, 1, election_id=10)
    with pytest.raises(SwitchError, match="not primary for device 1"):
        LocalSwitchClient(server, 1, election_id=5)
    with pytest.raises(WriteError, match="PERMISSION_DENIED") as caught:
        c.client("s1").write(failing_batch(c, "s1"))
    assert caught.value.codes == ["PERMISSION_DENIED"] * 3
    with pytest.raises(SwitchError, match="stream failed: INVALID_ARGUMENT"):
        LocalSwitchClient(server, 1, election_id=10)
    usurper.close()
    with pytest.raises(WriteError) as caught:
        c.client("s1").write(failing_batch(c, "s1"))
    assert caught.value.codes == ["ALREADY_EXISTS", "NOT_FOUND", "OK"]
    observer = LocalSwitchClient(server, 1, election_id=None)
    assert observer.alive and observer.pipeline_cookie() == c.pipeline("s1").config.cookie.cookie
    assert len(server.streams) == 1  # the refused clients' streams are gone; the observer has none
    c.close()


def test_a_port_down_reaches_failures(cache, clock, tmp_path):
    """Port status from the server's stream, read when the controller asks; a later client hears of
    the ports down when it arbitrates."""
    net = LocalSwitches(Topology.from_dict(single(4)), cache)
    c = controller(net, tmp_path, clock)
    server = net.servers["s1"]
    server.port_status(3, True, "s1-eth3")  # first seen up: no message
    server.port_status(3, False, "s1-eth3")
    assert c.failures() == (set(), {net.topology.port_links["s1", 3]})
    later = LocalSwitchClient(server, 1, election_id=5)
    assert later.ports_down == {3}
    server.port_status(3, True, "s1-eth3")
    assert c.failures() == (set(), set()) and later.ports_down == set()
    later.close()
    c.close()


def test_a_killed_switch_is_dead_at_once_and_its_tree_moves(cache, clock, tmp_path):
    """spine2's process stops: calls to it fail as unreachable, and the next watch round (its stream ended
    and it does not answer again) moves spine2's tree onto spine1 without waiting dead_after."""
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    c = controller(net, tmp_path, clock)
    before = c.create_job("packed", HOSTS, pool_size=8)
    moving = next(t for t in before.trees if t.root == "spine2")
    client = c.client("spine2")
    net.servers["spine2"].stop()
    assert not client.alive
    with pytest.raises(SwitchError, match="not reachable"):
        client.pipeline_cookie()
    with pytest.raises(WriteError) as caught:
        client.write(failing_batch(c, "spine1"))
    assert caught.value.codes == ["UNAVAILABLE"] * 3
    with pytest.raises(SwitchError, match="not reachable"):
        net.connect("spine2")
    (line,) = c.watch_once()
    assert f"tree {moving.job_id} (root spine2) crosses spine2, down; moved to root spine1" in line
    spec = JobSpec.load(tmp_path / "jobs" / "packed.json")
    assert [t.root for t in spec.trees] == ["spine1", "spine1"]
    assert next(t for t in spec.trees if t.job_id == moving.job_id).incarnation == 1
    for sw in ("leaf1", "leaf2", "spine1"):
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    assert c.watch_once() == []  # moved once
    c.close()


def test_a_switch_never_reached_counts_as_dead_after_dead_after(cache, clock, tmp_path):
    """The backstop: a controller started again while spine2 is down never had its stream, so silence is
    all it has; it moves spine2's tree once dead_after seconds of virtual time have passed."""
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    first = controller(net, tmp_path, clock)
    moving = next(t for t in first.create_job("packed", HOSTS, pool_size=8).trees if t.root == "spine2")
    first.close()
    net.servers["spine2"].stop()
    c = Controller(net.network, tmp_path / "state.json", V64, connect=net.connect, clock=clock)
    assert c.dead_after == DEAD_AFTER
    assert c.watch_once() == []  # unreachable from now on
    clock.advance(DEAD_AFTER - 0.5)
    assert c.watch_once() == [] and c.failures() == (set(), set())
    clock.advance(0.5)
    assert c.failures() == ({"spine2"}, set())
    (line,) = c.watch_once()
    assert f"tree {moving.job_id} (root spine2) crosses spine2, down; moved to root spine1" in line
    c.close()


def test_a_restarted_switch_is_provisioned_again_by_watch_once(cache, clock, tmp_path):
    """leaf1 comes back as a new switch without a pipeline: one watch round pushes the pipeline, routes
    and the job, and the incarnation of every tree over leaf1 grows (its registers are gone)."""
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    c = controller(net, tmp_path, clock)
    before = c.create_job("packed", HOSTS, pool_size=8)
    old = net.servers["leaf1"]
    old_switch = old.pipeline.switch
    net.restart("leaf1")
    assert net.servers["leaf1"].pipeline is None
    assert c.watch_once() == ["leaf1 restarted: pipeline, routes and 1 job(s) installed again"]
    new_switch = net.servers["leaf1"].pipeline.switch
    assert new_switch is not old_switch and not old.running
    for sw in net.topology.switches:
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    spec = JobSpec.load(tmp_path / "jobs" / "packed.json")
    assert [t.incarnation for t in before.trees] == [0, 0]
    assert [t.incarnation for t in spec.trees] == [1, 1]
    assert c.watch_once() == []
    assert cache.parsed == 1  # the restarted switch reused the parsed program
    c.close()
