"""Machines with several NICs in bmv2-env (issue 44): rail_optimised(4, 2, 2, 1) in Mininet.

Four machines n1..n4 with two NICs each (rail 0 and rail 1), each rail two leaves under one spine.  A
machine is one Mininet host, NIC i its interface ``n<k>-eth<i>`` (bmv2-env/machines.py).  The test checks
the machines' interfaces and routes, pings within and across rails, then sums one job per rail with the
real controller and plain worker processes, both rails at once from the same machines, and reads each
NIC's byte counters: each rail's traffic is on its own interface only.  Root and Mininet only (the pure
checks need Mininet importable).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.controller import Controller
from controller.network import Network
from controller.topology import Topology, TopologyError, rail_optimised, single
from tests.mininet_env import HAVE_MININET, USABLE, needs_mininet, needs_mininet_module
from worker import protocol
from worker.jobspec import JobSpec
from worker.protocol import Protocol

if HAVE_MININET:
    from bmv2env.cli import topology_argument
    from bmv2env.machines import Placement, machine_commands
    from bmv2env.network import interface_names, management_names
if USABLE:
    from bmv2env.network import InaNetwork
    from bmv2env.runstate import link_exists

    from tests.test_e2e import assert_all_exact, reports, start_workers

RAILS = rail_optimised(4, 2, 2, 1)  # spine1; r0leaf1, r0leaf2, r1leaf1, r1leaf2; n1..n4 with NICs n<k>r0, n<k>r1
SIZE = 40_000  # float32 values per allreduce, on either rail
STATISTICS = ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets")


@needs_mininet_module
def test_a_machine_is_one_mininet_host_with_an_interface_per_nic() -> None:
    topology = Topology.from_dict(RAILS)
    placement = Placement.of(topology)
    assert placement.nodes["n1"] == ("n1r0", "n1r1") and placement.machines == {"n1", "n2", "n3", "n4"}
    assert placement.ports["n3r1"] == ("n3", 1) and placement.node("n3r1") == placement.node("n3") == "n3"
    names = interface_names(topology)
    assert {"n1-eth0", "n1-eth1", "n4-eth1"} <= set(names) and not any(n.startswith("n1r") for n in names)
    assert management_names(topology)[1:] == ["n1-mgr", "n2-mgr", "n3-mgr", "n4-mgr"]

    commands = machine_commands(topology, [("n1r0", "n1-eth0"), ("n1r1", "n1-eth1")])
    # rail 1's peers and its leaf (10.255.0.4) on rail 1's interface only; policy routing by source
    assert "ip neigh replace 10.1.0.2 lladdr 02:01:00:00:02:01 dev n1-eth1 nud permanent" in commands
    assert not any("10.1.0.2" in c and "n1-eth0" in c for c in commands)
    assert "ip route replace 10.255.0.4/32 dev n1-eth1 src 10.1.0.1" in commands
    assert "ip rule add from 10.1.0.1 lookup 101 priority 1001" in commands
    assert "ip route replace default via 10.255.0.4 dev n1-eth1 src 10.1.0.1 onlink table 101" in commands
    assert not any("10.255.0.1" in c for c in commands)  # the spine: no NIC is linked to it

    # plain hosts stay their own Mininet hosts; a machine's name may not take another node's
    plain = Placement.of(Topology.from_dict(single(2)))
    assert plain.ports == {"h1": ("h1", 0), "h2": ("h2", 0)} and not plain.machines
    clash = json.loads(json.dumps(RAILS))
    clash["hosts"]["n2r0"]["node"] = "r0leaf1"
    with pytest.raises(TopologyError, match=r"machine name\(s\) \['r0leaf1'\] also name a switch or a host"):
        Placement.of(Topology.from_dict(clash))


@needs_mininet_module
def test_ina_net_takes_the_rail_builder() -> None:
    assert topology_argument("rails:4,2,2,1") == Topology.from_dict(RAILS)
    shaped = topology_argument("rails:2,2,2,1", bw=100, fabric_bw=50)
    assert {lk.capacity for lk in shaped.links if lk.a in shaped.hosts} == {100.0}
    assert {lk.capacity for lk in shaped.links if lk.a not in shaped.hosts} == {50.0}
    with pytest.raises(TopologyError, match="integers"):
        topology_argument("rails:4,two")
    with pytest.raises(TopologyError, match="builder's links"):
        topology_argument("bmv2-env/topologies/single-4.json", bw=10)


def _counters(net: InaNetwork, machine: str) -> dict[str, dict[str, int]]:
    """Interface -> its statistics (/sys/class/net/<if>/statistics), read in the machine's namespace."""
    out = net.run(machine, "for f in /sys/class/net/*-eth*/statistics/{tx,rx}_{bytes,packets}; do "
                           "echo $f $(cat $f); done")
    found: dict[str, dict[str, int]] = {}
    for line in out.splitlines():
        m = re.match(r"/sys/class/net/(\S+)/statistics/(\S+) (\d+)$", line.strip())
        if m:
            found.setdefault(m[1], {})[m[2]] = int(m[3])
    return found


def _all_counters(net: InaNetwork) -> dict[str, dict[str, int]]:
    return {iface: c for machine in ("n1", "n2", "n3", "n4") for iface, c in _counters(net, machine).items()}


def _sent_only(counted: dict[str, int], report: dict, P: Protocol) -> bool:
    """Whether an interface sent the worker's aggregation frames (its report's ``bytes_sent``: payload of
    ``P.packet_bytes`` a frame) and little else: the ICMP port-unreachables a machine answers to results that
    arrive once its worker has gone (at most 590 bytes each), not another worker's frames."""
    own = report["bytes_sent"] // P.packet_bytes * P.frame_bytes
    return 4 * SIZE <= own <= counted["tx_bytes"] <= 1.25 * own


def _moved(before: dict, after: dict) -> dict[str, dict[str, int]]:
    return {iface: {k: after[iface][k] - before[iface][k] for k in STATISTICS} for iface in after}


@needs_mininet
def test_two_rails_sum_at_once_each_on_its_own_nics(tmp_path: Path) -> None:
    topology = Topology.from_dict(RAILS)
    with InaNetwork(topology, tmp_path / "net", target="builtin", management=True) as net:
        _assert_one_host_per_machine(net, topology, tmp_path)
        _assert_each_rail_leaves_by_its_interface(net, topology)

        with Controller(net.network, tmp_path / "controller-state.json") as controller:
            controller.setup()
            assert len(net.ping_pairs()) == 2 * 4 * 3
            assert net.ping_all() == []
            assert net.ping_all(across_rails=True) == []  # bound to rail i, through its leaf and the spine

            members = {rail: [f"n{k}r{rail}" for k in range(1, 5)] for rail in (0, 1)}
            # a job is one session of its workers: rail 0 has one for the run alone, one for the run with rail 1
            for name, rail in (("alone", 0), ("rail0", 0), ("rail1", 1)):
                controller.create_job(name, members[rail], pool_size=32, mode="ina")
            spec = {rail: controller.spec_dir / f"rail{rail}.json" for rail in (0, 1)}
            P = protocol.load(JobSpec.load(spec[0]).values)

            # rail 0 alone: its workers' frames on rail 0's interfaces, nothing at all on rail 1's
            before = _all_counters(net)
            alone = reports(start_workers(net, controller.spec_dir / "alone.json", members[0], size=SIZE))
            assert_all_exact(alone, 4)
            moved = _moved(before, _all_counters(net))
            for k in range(1, 5):
                assert _sent_only(moved[f"n{k}-eth0"], alone[k - 1], P), (alone, moved)
                assert moved[f"n{k}-eth1"] == dict.fromkeys(STATISTICS, 0), moved

            # both rails at once, from the same machines, the same size each: each interface sends its own
            # rail's worker's frames (one rail's on the other's interface would double them there)
            before = _all_counters(net)
            procs = start_workers(net, spec[0], members[0], size=SIZE) + \
                start_workers(net, spec[1], members[1], size=SIZE)
            both = reports(procs)
            assert_all_exact(both, 8)
            moved = _moved(before, _all_counters(net))
            for k in range(1, 5):
                for rail in (0, 1):
                    counted, sent = moved[f"n{k}-eth{rail}"], both[4 * rail + k - 1]
                    assert sent["rank"] == k - 1 and _sent_only(counted, sent, P), (rail, both, moved)
                    assert counted["rx_bytes"] >= 4 * SIZE, (rail, moved)  # its rail's sum came in there
            status = controller.status()["jobs"]
            for rail in (0, 1):  # each rail's job summed on its own leaves (and the spine), none of the other's
                used, leaves = {sw for sw, c in status[f"rail{rail}"].items() if c["aggregated"] > 0}, \
                    {f"r{rail}leaf1", f"r{rail}leaf2"}
                assert leaves <= used <= leaves | {"spine1"}, status
    assert not link_exists("r0leaf1-eth2") and not link_exists("n1-mgr")


def _assert_one_host_per_machine(net: InaNetwork, topology: Topology, tmp_path: Path) -> None:
    """One Mininet host per machine, NIC i its interface i (the NIC's address and MAC, offloads off), and one
    management address per machine."""
    assert sorted(h.name for h in net.hosts) == ["n1", "n2", "n3", "n4"]
    assert net.host("n2r0") is net.host("n2r1") is net.host("n2")
    for nic, spec in topology.hosts.items():
        iface = net.interface(nic)
        assert iface == f"{spec.node}-eth{nic[-1]}"
        shown = net.run(nic, f"ip -br addr show {iface}; ip -br link show {iface}; ethtool -k {iface}")
        assert str(spec.ip) in shown and spec.mac in shown and "tx-checksumming: off" in shown, shown
    assert net.run("n1", "ls /sys/class/net").split() == ["lo", "n1-eth0", "n1-eth1", "n1-mgmt"]
    # net.json: every NIC runs its commands in its machine; one management address per machine
    saved = Network.load(tmp_path / "net" / "net.json")
    assert saved.run_on("n3r0", ["true"]) == saved.run_on("n3r1", ["true"]) == \
        ["mnexec", "-a", str(net.host("n3").pid), "true"]
    assert net.management_ip("n1r0") == net.management_ip("n1r1") == net.management_ip("n1") == "172.31.0.1"
    assert net.management_ip("n4r1") == "172.31.0.4"


def _assert_each_rail_leaves_by_its_interface(net: InaNetwork, topology: Topology) -> None:
    """Rail i's traffic leaves by interface i: to peers, to the NIC's leaf, and (bound) to another rail's NICs."""
    for k, machine in enumerate(("n1", "n2", "n3", "n4"), 1):
        for rail in (0, 1):
            me = topology.hosts[f"{machine}r{rail}"]
            iface, leaf = f"{machine}-eth{rail}", topology.switches[topology.attachment[me.name][0]]
            peer = topology.hosts[f"n{k % 4 + 1}r{rail}"]
            other = topology.hosts[f"n{k % 4 + 1}r{1 - rail}"]
            routes = {
                "peer": net.run(machine, f"ip route get {peer.ip.ip} from {me.ip.ip}"),
                "peer, unbound": net.run(machine, f"ip route get {peer.ip.ip}"),
                "leaf": net.run(machine, f"ip route get {leaf.ip}"),
                "leaf, bound": net.run(machine, f"ip route get {leaf.ip} from {me.ip.ip}"),
                "other rail, bound": net.run(machine, f"ip route get {other.ip.ip} from {me.ip.ip}"),
            }
            for what, route in routes.items():
                assert f"dev {iface} " in route, (what, route)
                assert f"src {me.ip.ip} " in route or f"from {me.ip.ip} " in route, (what, route)
            assert f"via {leaf.ip} " in routes["other rail, bound"]
    # the other rail's peer unbound: by the machine's own NIC on that rail
    assert "dev n1-eth1 src 10.1.0.1" in net.run("n1", f"ip route get {topology.hosts['n2r1'].ip.ip}")


@needs_mininet
def test_ina_net_starts_the_rail_builder_and_execs_on_a_nic(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = subprocess.Popen([sys.executable, "-m", "bmv2env.cli", "start", "rails:2,2,2,1", "--bw", "500",
                                "--run-dir", str(run_dir), "--target", "builtin"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not (run_dir / "net.json").exists():
        if started.poll() is not None or time.monotonic() > deadline:
            started.kill()
            pytest.fail(f"ina-net start did not come up: {started.communicate()[0]}")
        time.sleep(0.05)
    shown = subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "n2r1", "--run-dir", str(run_dir), "--",
                            "ip", "-br", "addr"], capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0 and re.search(r"n2-eth1\S*\s+UP\s+10\.1\.1\.1/16", shown.stdout), shown
    shaped = subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "n2", "--run-dir", str(run_dir), "--",
                             "tc", "class", "show", "dev", "n2-eth1"], capture_output=True, text=True, timeout=10)
    assert "rate 500Mbit" in shaped.stdout, shaped
    stopped = subprocess.run([sys.executable, "-m", "bmv2env.cli", "stop", "--run-dir", str(run_dir)],
                             capture_output=True, text=True, timeout=40)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    output = started.communicate(timeout=10)[0]
    assert started.returncode == 0 and "Traceback" not in output, output
    assert "2 hosts (2 machines of several NICs)" in output and "n2r1 (n2-eth1): 10.1.1.1/16" in output, output


@needs_mininet
def test_a_nic_link_is_shaped_and_lossy_on_its_own_interface(tmp_path: Path) -> None:
    spec = rail_optimised(2, 2, 2, 1)
    for link in spec["links"]:
        if link[0] == "n1r1":
            link.append({"bw": 100, "loss": 100})
    with InaNetwork(Topology.from_dict(spec), tmp_path / "net", target="builtin") as net:
        with Controller(net.network, tmp_path / "controller-state.json") as controller:
            controller.setup()
        assert "rate 100Mbit" in net.run("n1", "tc class show dev n1-eth1")
        assert "bpf" in net.run("n1", "tc filter show dev n1-eth1 parent 10:")
        assert net.run("n1", "tc qdisc show dev n1-eth0").count("qdisc") == 1  # rail 0: the default qdisc alone
        assert net.ping_all() == [("n1r1", "n2r1"), ("n2r1", "n1r1")]  # rail 1's link of n1 loses everything


@needs_mininet
def test_ddp_under_torchrun_on_nodes_of_two_ranks_sums_through_each_rail(tmp_path: Path) -> None:
    """torchrun --nproc-per-node 2 on each of 2 machines with a NIC per rank, ``init_process_group("ina")`` and
    nothing else: the model learns, and every rank's gradients reach the switches only through its own
    rail's leaf."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import mininet_train

    topology = Topology.from_dict(rail_optimised(2, 2, 2, 1))
    nodes = mininet_train.Nodes.of(topology, 2)
    config = mininet_train.Config("rails", "cnn", 2, 64, 3e-3, 0.025, None, ("", ""))
    args = type("Args", (), {"seed": 0})()
    with InaNetwork(topology, tmp_path / "net", target="builtin") as net, \
            Controller(net.network, tmp_path / "state.json") as controller:
        controller.setup()
        controller.create_rails("ddp", [nodes.rail(0), nodes.rail(1)], mode="ina")
        epochs, timelines, per_step = mininet_train.train(
            net, nodes, "ina-backend", str(controller.spec_dir / "ddp-rail{rail}.json"), config, args, tmp_path,
            29731)
        counted = controller.status()["jobs"]
    assert [e["epoch"] for e in epochs] == [1, 2] and epochs[-1]["test_accuracy"] > 0.5, epochs
    assert len(timelines) == 4
    for rail in (0, 1):  # each rail's job summed on its own leaf (both machines are under leaf 1 of each rail)
        assert set(counted[f"ddp-rail{rail}"]) == {f"r{rail}leaf1"}, counted
        assert counted[f"ddp-rail{rail}"][f"r{rail}leaf1"]["aggregated"] > 0, counted
    assert per_step["tx"] > 0 and per_step["rx"] > 0
