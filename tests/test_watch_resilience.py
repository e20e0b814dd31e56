"""`ina-ctl watch` and `ina-ctl serve` never exit on a switch that does not answer: one down at start, or
killed during their first setup, is provisioned once it answers while the others are provisioned at once.
And a watch wakes on what a switch reports (its stream ending, a port going down), not only every interval.

The switches are the real `p4target-switch-grpc` command (no ports, enough for the control plane), and the
watch and the service are `ina-ctl` processes; what a switch holds is read back over P4Runtime."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.p4runtime_client import SwitchError
from controller.state import STATE_FILE
from controller.topology import Topology, leaf_spine, tree
from ina_api.client import JobsClient, ServiceError
from tests.conftest import free_port, free_ports
from tests.test_controller import V64, Switches
from worker.jobspec import JobSpec

TOKEN = "resilience-token"
CLI = [sys.executable, "-m", "controller.cli"]


class SwitchProcesses:
    """One `p4target-switch-grpc` process per switch of tree(2, 2): root s1, leaves s2 (h1, h2) and s3 (h3, h4)."""

    def __init__(self, folder: Path) -> None:
        self.topology = Topology.from_dict(tree(2, 2))
        self.ports = dict(zip(self.topology.switches, free_ports(len(self.topology.switches))))
        self.procs: dict[str, subprocess.Popen] = {}
        access = {name: SwitchAccess(f"127.0.0.1:{self.ports[name]}", sw.index + 1, "builtin")
                  for name, sw in self.topology.switches.items()}
        self.net_file = folder / "net.json"
        Network(self.topology, access).save(self.net_file)

    def start(self, name: str) -> None:
        device = self.topology.switches[name].index + 1
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "p4target.switch_grpc", "--no-p4", "--device-id", str(device), "--",
             "--grpc-server-addr", f"127.0.0.1:{self.ports[name]}"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def kill(self, name: str) -> None:
        self.procs[name].kill()
        self.procs[name].wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()


@pytest.fixture
def switches(tmp_path: Path) -> Iterator[SwitchProcesses]:
    s = SwitchProcesses(tmp_path)
    yield s
    s.stop()


class Process:
    """An `ina-ctl` process whose log goes to a file, read while it runs."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self._file = log.open("w")
        self.proc = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=self._file, text=True)

    def text(self) -> str:
        return self.log.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        finally:
            self._file.close()


def eventually(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``check()`` held (AssertionError naming ``what`` past ``timeout``)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - start


def provisioned(switches: SwitchProcesses, name: str) -> bool:
    """The switch runs our pipeline and holds exactly what the state file says (read without arbitrating)."""
    checker = Controller(Network.load(switches.net_file), switches.net_file.parent / STATE_FILE, election_id=None)
    try:
        return checker.io.runs_our_pipeline(name) and checker.installed_entries(name) == checker.expected_entries(name)
    except SwitchError:
        return False
    finally:
        checker.close()


def test_watch_goes_on_without_a_switch_and_provisions_it_when_it_starts(switches, tmp_path):
    for name in ("s1", "s2"):
        switches.start(name)
    watch = Process(["--net", str(switches.net_file), "watch", "--interval", "0.3", "--dead-after", "600"],
                    tmp_path / "watch.log")
    try:
        eventually(lambda: all(provisioned(switches, n) for n in ("s1", "s2")), 20, "provisioned")
        eventually(lambda: "s3: not provisioned" in watch.text(), 10, "the missing switch named")
        time.sleep(1.0)  # rounds without s3
        assert watch.alive(), watch.text()
        switches.start("s3")
        eventually(lambda: provisioned(switches, "s3"), 20, "s3 provisioned once it answers")
        assert "s3 restarted: pipeline, routes and 0 job(s) installed again" in watch.text()
        assert watch.alive() and "Traceback" not in watch.text()
    finally:
        watch.stop()


def test_watch_survives_a_switch_killed_during_its_first_setup(switches, tmp_path):
    for name in switches.topology.switches:
        switches.start(name)
    watch = Process(["--net", str(switches.net_file), "watch", "--interval", "0.3", "--dead-after", "600"],
                    tmp_path / "watch.log")
    try:  # s1 is set up first: killed while its pipeline goes in
        eventually(lambda: "s1: pushing the pipeline" in watch.text(), 20, "the first setup started")
        switches.kill("s1")
        eventually(lambda: all(provisioned(switches, n) for n in ("s2", "s3")), 20, "provisioned")
        eventually(lambda: "s1: not" in watch.text(), 10, "s1 named as not provisioned, or not reachable")
        assert watch.alive(), watch.text()
        switches.start("s1")
        eventually(lambda: provisioned(switches, "s1"), 20, "s1 provisioned once it answers again")
        assert watch.alive() and "Traceback" not in watch.text()
    finally:
        watch.stop()


def test_serve_goes_on_without_a_switch_and_refuses_jobs_over_it_clearly(switches, tmp_path):
    for name in ("s1", "s2"):
        switches.start(name)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    address = f"127.0.0.1:{free_port()}"
    serve = Process(["--net", str(switches.net_file), "--token-file", str(token), "serve", "--listen", address,
                     "--interval", "0.3", "--dead-after", "600", "--lease-seconds", "600"], tmp_path / "serve.log")
    try:
        assert serve.proc.stdout is not None
        line = serve.proc.stdout.readline()
        assert "serving on" in line, serve.text()
        assert "s3: not provisioned" in serve.text()
        with JobsClient(address, TOKEN) as client:
            eventually(lambda: {s.name: s.reachable for s in client.status().switches} ==
                       {"s1": True, "s2": True, "s3": False}, 20, "s1 and s2 reachable, s3 not")
            job, secret = client.create("near", ["h1", "h2"])  # s2 alone: s3 is not needed
            assert list(job.switches) == ["s2"]
            with pytest.raises(ServiceError) as e:
                client.create("far", ["h1", "h3"])
            assert e.value.code == grpc.StatusCode.UNAVAILABLE and "switch(es) s3 do not answer" in str(e.value), \
                e.value
            assert serve.alive()
            switches.start("s3")
            eventually(lambda: provisioned(switches, "s3"), 20, "s3 provisioned once it answers")
            eventually(lambda: all(s.reachable for s in client.status().switches), 5, "s3 reachable")
            far, _ = client.create("far", ["h1", "h3"])
            assert set(far.switches) == {"s1", "s2", "s3"}
            client.delete("near", secret)
        assert serve.alive() and "Traceback" not in serve.text()
    finally:
        serve.stop()
    assert serve.proc.returncode == 0


def test_a_dead_switch_wakes_the_watch_long_before_its_interval(switches, tmp_path):
    for name in switches.topology.switches:
        switches.start(name)
    watch = Process(["--net", str(switches.net_file), "watch", "--interval", "30", "--dead-after", "600"],
                    tmp_path / "watch.log")
    try:
        eventually(lambda: all(provisioned(switches, n) for n in switches.topology.switches), 20, "provisioned")
        time.sleep(0.5)
        switches.kill("s2")
        took = eventually(lambda: "s2: not reachable yet" in watch.text(), 10, "the watch acted on s2")
        assert took < 5, took  # a round every 30 s: woken by the stream's end
        assert watch.alive()
    finally:
        watch.stop()


def test_a_port_down_wakes_the_watch_and_the_tree_moves(tmp_path):
    """In process: leaf1's uplink to spine2 reported down moves spine2's tree within a second or two,
    with the watch's interval at 30 s."""
    net = Switches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)))
    c = Controller(net.network, tmp_path / "state.json", V64)
    stop = threading.Event()
    try:
        c.setup()
        spec = c.create_job("packed", ["h1", "h2", "h3", "h4"], pool_size=8)
        assert sorted(t.root for t in spec.trees) == ["spine1", "spine2"]
        watcher = threading.Thread(target=c.watch, args=(30.0, stop), daemon=True)
        watcher.start()
        time.sleep(0.3)
        net.services["leaf1"].port_status(2, False, "leaf1-eth2")  # leaf1's port 2 goes up to spine2
        took = eventually(lambda: JobSpec.load(tmp_path / "jobs" / "packed.json").version == 1, 10, "tree moved")
        assert took < 5, took
        assert [t.root for t in JobSpec.load(tmp_path / "jobs" / "packed.json").trees] == ["spine1", "spine1"]
    finally:
        stop.set()
        c.wake.set()
        c.close()
        net.stop()
