"""bmv2-env end to end: Mininet networks of built-in-target switches, set up by the controller.

Hosts ping each other through ina.p4's IPv4 routes (before the controller pushes the
pipeline they cannot: the switch, not a bridge, carries the traffic); a run killed with
kill -9 is cleaned up by the next start in the same run directory; the CLI starts, runs a
command on a host and stops.  Root and Mininet only: skipped elsewhere.  The shipped
topology files are checked against their builders everywhere.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.topology import Topology, fat_tree, leaf_spine, single, tree
from tests.mininet_env import USABLE, needs_mininet

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "bmv2-env" / "topologies"


if USABLE:
    from bmv2env.links import LinkSetupError, kernel_has_netem
    from bmv2env.network import InaNetwork
    from bmv2env.processes import ProcessRef
    from bmv2env.runstate import NetworkBusy, RunState, link_exists


@pytest.mark.parametrize("name, built", [("single-4", single(4)), ("single-8", single(8)), ("tree-4", tree(2, 2)),
                                         ("leafspine-2x2", leaf_spine(2, 2, 2)), ("fattree-4", fat_tree(4))])
def test_shipped_topologies_equal_their_builders(name: str, built: dict) -> None:
    path = TOPOLOGIES / f"{name}.json"
    assert json.loads(path.read_text()) == built
    assert Topology.load(path) == Topology.from_dict(built)


def _setup_routes(net: InaNetwork, run_dir: Path) -> None:
    with Controller(net.network, run_dir / "controller-state.json") as controller:
        controller.setup()


@needs_mininet
def test_single_4_hosts_ping_through_the_p4_program(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with InaNetwork(TOPOLOGIES / "single-4.json", run_dir, target="builtin") as net:
        saved = Network.load(run_dir / "net.json")
        s1 = net.switch("s1")
        assert saved.access == {"s1": SwitchAccess(s1.grpc_address, 1, "builtin")}
        argv = Path(f"/proc/{s1.process.pid}/cmdline").read_bytes().decode().split("\0")
        assert [a for a in argv if "@" in a] == [f"{n}@s1-eth{n}" for n in (1, 2, 3, 4)]
        assert "--no-p4" in argv

        h1 = net.host("h1")
        assert "tx-checksumming: off" in h1.cmd("ethtool -k h1-eth0")
        assert h1.cmd("sysctl -n net.ipv6.conf.h1-eth0.disable_ipv6").strip() == "1"
        assert "10.0.0.254 dev h1-eth0 lladdr 02:00:00:00:fe:01 PERMANENT" in h1.cmd("ip neigh show")
        assert ", 0 received" in net.run("h1", "ping -c1 -W1 10.0.0.2")  # no pipeline yet: dropped

        with pytest.raises(NetworkBusy, match="s1-eth1"):  # a second network on the same interfaces
            InaNetwork(TOPOLOGIES / "single-4.json", tmp_path / "other", target="builtin").start()
        assert (run_dir / "state.json").exists()

        _setup_routes(net, run_dir)
        assert net.ping_all() == []
        process = s1.process
    assert process.returncode == 0  # SIGTERM: a clean exit
    assert not any(link_exists(f"s1-eth{n}") for n in (1, 2, 3, 4))
    assert not (run_dir / "net.json").exists() and not (run_dir / "state.json").exists()


@needs_mininet
def test_tree_4_hosts_ping_across_three_switches(tmp_path: Path) -> None:
    with InaNetwork(TOPOLOGIES / "tree-4.json", tmp_path, target="builtin") as net:
        assert {n: (a.device_id, a.target) for n, a in net.network.access.items()} == \
            {"s1": (1, "builtin"), "s2": (2, "builtin"), "s3": (3, "builtin")}
        assert len({a.grpc_address for a in net.network.access.values()}) == 3
        _setup_routes(net, tmp_path)
        assert net.ping_all() == []


def _qdiscs(iface: str) -> str:
    return subprocess.run(["tc", "qdisc", "show", "dev", iface], capture_output=True, text=True).stdout


@needs_mininet
def test_link_options_and_host_commands(tmp_path: Path) -> None:
    """bw (and delay where the kernel has netem) make a TCLink; a host's commands run after start."""
    spec = single(2)
    spec["links"][0].append({"bw": 50})
    spec["hosts"]["h2"]["commands"] = [f"echo started-on-$(hostname) > {tmp_path / 'h2.out'}", "ip -br addr"]
    with InaNetwork(Topology.from_dict(spec), tmp_path / "run", target="builtin") as net:
        assert "htb" in net.run("h1", "tc qdisc show dev h1-eth0") and "htb" in _qdiscs("s1-eth1")
        assert "htb" not in _qdiscs("s1-eth2")
        assert (tmp_path / "h2.out").read_text().startswith("started-on-")
        assert "10.0.0.2/24" in (tmp_path / "run" / "logs" / "h2.log").read_text()

    spec["links"][0][2] = {"delay": "7ms"}
    delayed = InaNetwork(Topology.from_dict(spec), tmp_path / "run", target="builtin")
    if kernel_has_netem():
        with delayed:
            assert "delay 7ms" in _qdiscs("s1-eth1")
    else:  # Mininet would only print tc's complaint: we refuse rather than run an unshaped link
        with pytest.raises(LinkSetupError, match="no netem qdisc on h1-eth0"):
            delayed.start()
        assert not link_exists("s1-eth1") and not link_exists("s1-eth2")


@needs_mininet
def test_link_loss_drops_that_share_of_frames(tmp_path: Path) -> None:
    """loss on both ends of a link, netem or not, frame by frame: a UDP GSO send of 10 frames is
    10 chances to lose one, not one chance to lose all 10."""
    spec = tree(2, 1)  # h1 - s2 - s1 - s3 - h2
    spec["links"][0].append({"loss": 100})  # s2 <-> s1: everything lost
    spec["links"][1].append({"loss": 30, "bw": 100})  # h1 <-> s2: 30% each way, shaped as well
    with InaNetwork(Topology.from_dict(spec), tmp_path / "run", target="builtin") as net:
        _setup_routes(net, tmp_path)
        # 10 pings: each crosses h1's 30% end with 0.7, so P(none reaches s2's lossy end) = 0.3^10
        assert "100% packet loss" in net.run("h1", "ping -c10 -i0.02 -W1 10.0.0.2")
        assert "rate 100Mbit" in net.run("h1", "tc class show dev h1-eth0")
        before = _dropped(net.run("h1", "tc -s qdisc show dev h1-eth0"))
        # 100 GSO sends of 10 frames (UDP_SEGMENT = 103); the switch drops what arrives anyway
        send = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n" \
               "s.setsockopt(socket.SOL_UDP, 103, 1000)\n" \
               "for _ in range(100): s.sendto(bytes(10000), ('10.0.0.254', 9))"
        net.run("h1", f"/usr/bin/python3 -c \"{send}\"")
        dropped = _dropped(net.run("h1", "tc -s qdisc show dev h1-eth0")) - before
        assert 220 <= dropped <= 380, dropped  # 300 frames expected (5.5 standard deviations either side)
        switch_end = subprocess.run(["tc", "-s", "qdisc", "show", "dev", "s2-eth1"], capture_output=True, text=True)
        assert _dropped(switch_end.stdout) >= 1  # a switch's own sends are lost too (the pings to s1)


def _dropped(tc_stats: str) -> int:
    """Frames the loss filter dropped: the htb's drop counter."""
    return int(re.search(r"qdisc htb 10:.*?dropped (\d+)", tc_stats, re.S)[1])


def _ina_net(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bmv2env.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def _wait_for_net_json(proc: subprocess.Popen, run_dir: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not (run_dir / "net.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"ina-net start did not come up: {proc.communicate()[0]}")
        time.sleep(0.05)


@needs_mininet
def test_a_crashed_run_is_cleaned_up_by_the_next_start(tmp_path: Path) -> None:
    """kill -9 of ina-net and of one switch leaves switch-to-switch links and live switches behind."""
    topology = TOPOLOGIES / "tree-4.json"
    crashed = _ina_net("start", str(topology), "--run-dir", str(tmp_path), "--target", "builtin")
    _wait_for_net_json(crashed, tmp_path)
    state = RunState.load(tmp_path)
    os.kill(state.owner.pid, signal.SIGKILL)
    crashed.wait(timeout=10)
    os.kill(state.switches["s1"].pid, signal.SIGKILL)
    survivors = [state.switches["s2"], state.switches["s3"]]
    assert all(ref.alive() for ref in survivors) and link_exists("s1-eth1") and link_exists("s2-eth1")

    with InaNetwork(topology, tmp_path, target="builtin") as net:
        assert not any(ref.alive() for ref in survivors)
        assert RunState.load(tmp_path).owner == ProcessRef.of(os.getpid())
        _setup_routes(net, tmp_path)
        assert net.ping_all() == []
    assert not link_exists("s1-eth1")


@needs_mininet
def test_cli_start_exec_and_stop(tmp_path: Path) -> None:
    topology = tmp_path / "single-2.json"
    topology.write_text(json.dumps(single(2)))
    run_dir = tmp_path / "run"
    started = _ina_net("start", str(topology), "--run-dir", str(run_dir), "--target", "builtin")
    _wait_for_net_json(started, run_dir)
    shown = subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "h2", "--run-dir", str(run_dir), "--",
                            "ip", "-br", "addr", "show", "h2-eth0"], capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0 and "10.0.0.2/24" in shown.stdout
    stopped = subprocess.run([sys.executable, "-m", "bmv2env.cli", "stop", "--run-dir", str(run_dir)],
                             capture_output=True, text=True, timeout=40)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    output = started.communicate(timeout=10)[0]
    assert started.returncode == 0 and "Traceback" not in output, output
    assert "s1: device 1, P4Runtime 127.0.0.1:" in output
    assert not link_exists("s1-eth1") and not (run_dir / "state.json").exists()
