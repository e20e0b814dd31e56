"""The controller's units on their own (controller/README.md, "The controller's units"): the state store
on a temporary directory, the entry diff as a pure function, and the others composed by hand over the
built-in target's in-process P4Runtime servers in virtual time (tests/test_p4runtime_local.py's harness),
without the ``Controller`` front."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from controller.context import Context
from controller.failover import Failover
from controller.job_plan import JobError
from controller.jobs import JobBook
from controller.model import DEFAULT_HOST_LATENCY, NO_HOST_COST
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.planning import Planning
from controller.provisioning import Provisioning
from controller.reconcile import left_over
from controller.relocation import Relocation
from controller.schema import Entry
from controller.specs import Specs
from controller.state import ControllerState
from controller.store import JobExists, NoSuchJob, StateStore
from controller.switch_io import SwitchIO
from controller.topology import Topology, leaf_spine, servers, single
from controller.watch import Watch
from p4target.runtime.device_config import DeviceConfigCache
from tests.test_p4runtime_local import FakeClock, LocalSwitches
from worker.jobspec import JobSpec

V64 = PipelineOptions(values=64)
HOSTS = ["h1", "h2", "h3", "h4"]


def one_switch() -> Network:
    return Network(Topology.from_dict(single(2)), {"s1": SwitchAccess("127.0.0.1:1", 1, "builtin")})


# --- the state store ---------------------------------------------------------------------------


def test_a_store_starts_empty_and_loads_what_it_saved(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore(one_switch(), path, V64, None)
    assert store.state.jobs == {} and store.spec_dir == tmp_path / "jobs" and not path.exists()
    store.state.host_latency = 1e-4
    store.save()
    again = StateStore(one_switch(), path, None, None)
    assert again.state.options == store.state.options and again.state.host_latency == 1e-4
    with pytest.raises(JobError, match="was made with"):
        StateStore(one_switch(), path, PipelineOptions(values=32), None)


def test_values_per_packet_default_to_what_the_programs_take():
    assert StateStore(one_switch(), None, None, None).state.options.values == 256
    assert StateStore(one_switch(), None, None, None).spec_dir is None


def test_reload_follows_another_writer_and_replaces_the_state(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore(one_switch(), path, V64, None)
    store.save()
    first = store.state
    store.reload(threading.RLock())
    assert store.state is first  # the file is what it wrote
    other = ControllerState.load(path)
    other.host_latency = 2e-4
    other.save(path)
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    store.reload(threading.RLock())
    assert store.state is not first and store.state.host_latency == 2e-4


def test_names_and_lookups_say_what_is_wrong(tmp_path):
    store = StateStore(one_switch(), tmp_path / "state.json", V64, None)
    for bad in ("", "a b", "jöb", "x/y"):
        with pytest.raises(JobError, match="use letters, digits"):
            store.check_name(bad)
    store.check_name("ok-1_x")
    with pytest.raises(NoSuchJob, match=r"no job named 'nope' \(jobs: \[\]\)"):
        store.job("nope")


def test_spec_files_are_written_and_removed_by_name(tmp_path):
    store = StateStore(one_switch(), tmp_path / "state.json", V64, tmp_path / "specs")
    store.remove_spec("none")  # nothing there: no error

    class Spec:
        name = "j"

        def save(self, path: Path) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")

    store.save_spec(Spec())
    assert (tmp_path / "specs" / "j.json").exists()
    store.remove_spec("j")
    assert not (tmp_path / "specs" / "j.json").exists()


# --- the entry diff ------------------------------------------------------------------------------


def test_left_over_keeps_by_table_and_match_and_groups_by_id():
    a1 = Entry.of("t", {"k": 1}, "a", {"p": 1})
    a1_changed = Entry.of("t", {"k": 1}, "b", {"p": 2})  # same key, other action: installing modifies it
    a2 = Entry.of("t", {"k": 2}, "a")
    other_table = Entry.of("u", {"k": 1}, "a")
    held, held_groups = [a1, a2, other_table], [(5, [(1, 0)]), (6, [(2, 0)])]
    entries, groups = left_over(held, held_groups, [a1_changed], [(6, [(3, 1)])])
    assert entries == [a2, other_table] and groups == [(5, [(1, 0)])]
    assert left_over(held, held_groups, held, held_groups) == ([], [])
    assert left_over(held, held_groups, [], []) == (held, held_groups)


# --- the units over in-process switches ----------------------------------------------------------


class Units:
    """The units composed by hand as ``Controller.__init__`` composes them."""

    def __init__(self, net: LocalSwitches, tmp_path: Path, clock: FakeClock) -> None:
        store = StateStore(net.network, tmp_path / "state.json", V64, None)
        wake = threading.Event()
        io = SwitchIO(net.network, lambda: store.state.options, 1, net.connect, wake)
        self.ctx = Context(net.network, store, io, Failover(clock), wake, None, NO_HOST_COST)
        self.specs = Specs(self.ctx)
        self.planning = Planning(self.ctx)
        self.jobs = JobBook(self.ctx, self.planning, self.specs)
        self.provisioning = Provisioning(self.ctx, self.specs)
        self.relocation = Relocation(self.ctx, self.specs)
        self.watch = Watch(self.ctx, self.provisioning, self.relocation)

    def in_sync(self, *but: str) -> bool:
        io, reconciler = self.ctx.io, self.ctx.reconciler
        return all(io.installed_entries(s) == set(reconciler.expected(s)[0])
                   for s in self.ctx.topology.devices if s not in but)


@pytest.fixture(scope="module")
def cache() -> DeviceConfigCache:
    return DeviceConfigCache()


@pytest.fixture
def fabric(cache, tmp_path) -> Units:
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    units = Units(net, tmp_path, FakeClock())
    assert units.provisioning.setup() == []
    yield units
    units.ctx.io.close()


def test_planning_touches_no_switch_and_the_book_installs_and_deletes(fabric, tmp_path):
    before = {s: fabric.ctx.io.installed_entries(s) for s in fabric.ctx.topology.devices}
    planned = fabric.planning.plan(HOSTS, pool_size=8)
    assert sorted(p.tree.root for p in planned.tree_plan.trees) == ["spine1", "spine2"]
    assert {s: fabric.ctx.io.installed_entries(s) for s in before} == before
    with pytest.raises(JobError, match="pool size 0 is outside"):
        fabric.planning.check_pool(0)
    spec = fabric.jobs.create("packed", HOSTS, pool_size=8)
    assert JobSpec.load(tmp_path / "jobs" / "packed.json") == spec and fabric.in_sync()
    assert sum(n for held in fabric.ctx.held().values() for _, n, _ in held) == 8 * 2 * 3  # 2 trees, 3 switches
    with pytest.raises(JobExists):
        fabric.jobs.create("packed", HOSTS, pool_size=8)
    fabric.jobs.delete("packed")
    assert fabric.ctx.state.jobs == {} and fabric.ctx.held() == {} and fabric.in_sync()
    assert not (tmp_path / "jobs" / "packed.json").exists()


def test_relocation_moves_a_tree_off_a_dead_switch_and_home_again(fabric, tmp_path):
    spec = fabric.jobs.create("packed", HOSTS, pool_size=8)
    moving = next(t for t in spec.trees if t.root == "spine2")
    (line,) = fabric.relocation.route_around({"spine2"}, set())
    assert f"tree {moving.job_id} (root spine2) crosses spine2, down; moved to root spine1" in line
    tree = next(t for t in fabric.ctx.state.jobs["packed"].trees if t.job_id == moving.job_id)
    assert tree.tree.root == "spine1" and tree.incarnation == 1 and tree.home is not None
    assert "spine2" not in tree.allocations and fabric.in_sync("spine2")  # a dead switch is not written to
    assert not fabric.in_sync()  # spine2 (alive here) still holds the moved tree: a dead switch is left alone
    (line,) = fabric.relocation.return_home(set(), set())
    assert "back at root spine2" in line and tree.home is None and tree.incarnation == 2 and fabric.in_sync()
    assert JobSpec.load(tmp_path / "jobs" / "packed.json").version == 2


def test_lost_registers_grow_each_tree_on_the_switch_and_write_its_spec(fabric, tmp_path):
    spec = fabric.jobs.create("packed", HOSTS, pool_size=8)
    fabric.provisioning.lost_registers("spine1")
    written = JobSpec.load(tmp_path / "jobs" / "packed.json")
    grown = {t.job_id: t.incarnation for t in written.trees}
    assert grown == {t.job_id: int(t.root == "spine1") for t in spec.trees}


def test_a_watch_round_follows_the_state_file_another_process_wrote(fabric, tmp_path):
    fabric.jobs.create("packed", HOSTS, pool_size=8)
    path = tmp_path / "state.json"
    other = ControllerState.load(path)
    del other.jobs["packed"]  # as `ina-ctl job delete` with its own controller would leave it (entries aside)
    other.save(path)
    os.utime(path, ns=(1, 1))
    assert fabric.watch.once() == []
    assert fabric.ctx.state.jobs == {} and fabric.ctx.held() == {}


def test_the_context_reads_the_state_the_store_holds_now(tmp_path):
    """A server's calibrated rate makes the topology again (once); a state replaced by a reload is the one
    every view reads; the hosts' latency given to the controller wins over a calibration's."""
    topology = Topology.from_dict(servers(2, 1, 4))
    network = Network(topology, {s: SwitchAccess("127.0.0.1:1", 1, "builtin") for s in topology.devices})
    store = StateStore(network, tmp_path / "state.json", V64, None)
    io = SwitchIO(network, lambda: store.state.options, 1, None, threading.Event())  # never connects here
    ctx = Context(network, store, io, Failover(FakeClock()), threading.Event(), None, NO_HOST_COST)
    first = ctx.topology
    assert ctx.topology is first and ctx.host_latency == DEFAULT_HOST_LATENCY
    (server,) = topology.servers
    ctx.state.server_rates[server] = 1234.0
    calibrated = ctx.topology
    assert calibrated is not first and ctx.topology is calibrated
    store.state = ControllerState(V64)  # as StateStore.reload replaces it
    store.state.host_latency = 3e-4
    assert ctx.state is store.state and ctx.topology is first and ctx.host_latency == 3e-4
    fixed = Context(network, store, io, Failover(FakeClock()), threading.Event(), 1e-5, NO_HOST_COST)
    assert fixed.host_latency == 1e-5
