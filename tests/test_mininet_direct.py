"""Direct-connect clusters in Mininet (bmv2-env/direct.py, issue 58).

4 workers with 3 interfaces each and one device of 4 ports, from the plan `ina-ctl direct plan --kinds tree,ring
--circuits` writes (a ring of circuits on interfaces 0 and 1, a tree through the device on interface 2): the
network is started from the circuits and a Mininet site file, every circuit neighbour answers a ping over its
circuit, the device answers P4Runtime; then `ina-ctl direct setup` sets the device up and creates the tree part's
job, and four DirectWorker ranks, one process in each worker's host, sum float32 and int32 through the device and
round the ring at once.  Then a circuit is cut mid-call, and every rank fails within its timeout, naming the part.
A cluster with streaming NICs gets a NIC switch on each worker's interfaces; 8 such workers of 4 interfaces run the
planner's NIC mesh (NTT's optimised topology, K_{4,4}) through their NICs, set up by `ina-ctl direct setup`, and a
NIC that dies mid-call fails every rank, naming the part.  Root and Mininet only (the pure checks need Mininet
importable).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller import cli
from controller.direct import DirectCluster, DirectError
from controller.direct_site import DirectSite
from tests.mininet_env import HAVE_MININET, USABLE, needs_mininet, needs_mininet_module
from worker.direct import TreePart, parts_from_json

if HAVE_MININET:
    from bmv2env.direct import checked_circuits, direct_interface_names, load_circuits, mininet_site, worker_commands
if USABLE:
    from bmv2env.direct import DirectNetwork
    from bmv2env.p4switch import p4runtime_answers
    from bmv2env.runstate import link_exists

CLUSTER = DirectCluster(4, 3, 10.0, devices=1, device_ports=4)  # 10 Gbit/s: beyond TCLink, links.py shapes it
SIZE = "1MB"  # the plan's call: a ring and a tree share it at 10 Gbit/s
ELEMENTS = 20_011  # per rank call: not a multiple of V
TIMEOUT = 3.0  # each rank's DirectWorker timeout
RING = [("w0.0", "w1.1"), ("w1.0", "w2.1"), ("w2.0", "w3.1"), ("w3.0", "w0.1")]
TREE = [("w0.2", "d0.1"), ("w1.2", "d0.2"), ("w2.2", "d0.3"), ("w3.2", "d0.4")]


def _files(tmp_path: Path, cluster: DirectCluster = CLUSTER, kinds: str = "tree,ring") -> tuple[Path, Path]:
    """The cluster file and the plan's circuits, as `ina-ctl direct plan --circuits` writes them."""
    cluster_file, circuits = tmp_path / "cluster.json", tmp_path / "circuits.json"
    cluster_file.write_text(json.dumps(cluster.to_dict()))
    assert cli.main(["direct", "plan", "--cluster", str(cluster_file), "--size", SIZE, "--kinds", kinds,
                     "--circuits", str(circuits)]) == 0
    return cluster_file, circuits


@needs_mininet_module
def test_the_mininet_site_and_the_circuits_refused(tmp_path: Path) -> None:
    _, circuits_file = _files(tmp_path)
    circuits = load_circuits(circuits_file, CLUSTER)
    assert sorted(circuits) == sorted(RING + TREE)
    site = mininet_site(CLUSTER, circuits, target="builtin", grpc_port_base=52001)
    # each circuit a /31 of its own, its two worker ends the two addresses; the device on loopback's P4Runtime
    for a, b in RING:
        ends = [site.workers[int(e[1])][int(e[3])].ip for e in (a, b)]
        assert ends[0].network == ends[1].network and ends[0].network.prefixlen == 31 and ends[0] != ends[1]
    device = site.devices[0]
    assert device.p4runtime.startswith("127.0.0.1:") and int(device.p4runtime.rsplit(":")[1]) >= 52001
    assert (device.device_id, device.target, str(device.ip)) == (1, "builtin", "10.128.0.1")
    assert DirectSite.from_dict(site.to_dict()) == site
    assert "w0-eth2" in direct_interface_names(CLUSTER, circuits) and "d0-eth4" in direct_interface_names(
        CLUSTER, circuits)
    # w0's tree interface sends to the device's own address, by that interface, from its own address
    me, commands = site.workers[0][2].ip.ip, worker_commands(0, site, CLUSTER, circuits)
    assert f"ip neigh replace 10.128.0.1 lladdr {device.mac} dev w0-eth2 nud permanent" in commands
    assert f"ip route replace 10.128.0.1/32 dev w0-eth2 src {me}" in commands
    assert f"ip rule add from {me} lookup 102 priority 1002" in commands

    with pytest.raises(DirectError, match=r"c\.json: circuit \('w0\.0', 'w4\.1'\): port w4\.1 does not exist"):
        checked_circuits([["w0.0", "w4.1"]], CLUSTER, "c.json")
    with pytest.raises(DirectError, match=r"c\.json: circuit \('w1\.0', 'd0\.2'\): port w1\.0 is used twice"):
        checked_circuits([["w1.0", "w2.1"], ["w1.0", "d0.2"]], CLUSTER, "c.json")
    with pytest.raises(DirectError, match=r"c\.json: circuit 1: a pair of ports"):
        checked_circuits([["w1.0", "w2.1"], ["w1.1"]], CLUSTER, "c.json")
    with pytest.raises(DirectError, match=r"neither w<worker>\.<interface> nor d<device>\.<port>"):
        checked_circuits([["w1.0", "x2.1"]], CLUSTER, "c.json")


@needs_mininet
def test_ina_net_direct_start_names_the_file_and_field_it_refuses(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """Before anything is made (ina-net needs root, so this runs where the Mininet tests do)."""
    cluster_file, circuits_file = _files(tmp_path)
    site = mininet_site(CLUSTER, load_circuits(circuits_file, CLUSTER), target="builtin")
    site_file = tmp_path / "site.json"
    lacking = site.to_dict()
    lacking["workers"][1]["interfaces"].pop()
    remote = site.to_dict()
    remote["devices"][0]["p4runtime"] = "10.0.0.21:9559"
    streaming = tmp_path / "streaming.json"
    streaming.write_text(json.dumps({**CLUSTER.to_dict(), "workers": {**CLUSTER.to_dict()["workers"],
                                                                      "nic_streaming": True}}))
    for data, cluster, message in (
            (lacking, cluster_file, f"{site_file}: workers[1].interfaces: 2 listed, each worker of the cluster has 3"),
            (remote, cluster_file, f"{site_file}: devices[0].p4runtime: in Mininet a switch serves P4Runtime on "
                                   f"127.0.0.1:<port>, not '10.0.0.21:9559'"),
            (site.to_dict(), streaming, f"{site_file}: workers[0].nic is missing")):
        site_file.write_text(json.dumps(data))
        assert _ina_net_direct("start", "--cluster", str(cluster), "--circuits", str(circuits_file), "--site",
                               str(site_file), "--run-dir", str(tmp_path / "run")) == 1
        assert not (tmp_path / "run").exists()
        err = capsys.readouterr().err
        assert message in err, err
    site_file.write_text(json.dumps(site.to_dict()))
    bad = tmp_path / "bad-circuits.json"
    bad.write_text(json.dumps([["w0.0", "w1.1"], ["w0.0", "d0.1"]]))
    assert _ina_net_direct("start", "--cluster", str(cluster_file), "--circuits", str(bad), "--site",
                           str(site_file), "--run-dir", str(tmp_path / "run")) == 1
    err = capsys.readouterr().err
    assert f"{bad}: circuit ('w0.0', 'd0.1'): port w0.0 is used twice" in err, err


def _ina_net_direct(*args: str) -> int:
    from bmv2env import cli as net_cli

    return net_cli.main(["direct", *args])


def _lines(procs: list[subprocess.Popen], count: int, wait: float) -> list[list[dict]]:
    """``count`` JSON lines from each process (fewer from one that ends first), never waiting past ``wait``."""
    deadline, out = time.monotonic() + wait, []
    for p in procs:
        got: list[dict] = []
        buffer = b""
        while len(got) < count:
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"a rank printed {len(got)} of {count} lines in {wait} s: {got}"
            byte = os.read(p.stdout.fileno(), 1)
            if not byte:
                break
            buffer += byte
            if buffer.endswith(b"\n"):
                got.append(json.loads(buffer))
                buffer = b""
        out.append(got)
    return out


def _ranks(net: DirectNetwork, parts: Path, calls: int, seed: int) -> list[subprocess.Popen]:
    """One rank process in each worker's host, as tests/test_mininet.py runs workers."""
    n = net.cluster.workers
    return [net.host(f"w{r}").popen([sys.executable, "-m", "tests.direct_rank", str(parts), str(r), str(n),
                                     str(ELEMENTS), str(seed), "--calls", str(calls), "--timeout", str(TIMEOUT)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for r in range(n)]


def _all_fail_naming(procs: list[subprocess.Popen], part: str, since: float) -> list[tuple[dict, float]]:
    """Every rank's last line is a failed call naming ``part``; each (line, seconds after ``since``)."""
    ends = []
    for p in procs:
        out, err = p.communicate(timeout=6 * TIMEOUT + 10)
        last = json.loads(out.decode().strip().splitlines()[-1])
        assert "error" in last, (last, err.decode()[-2000:])
        assert part in last["failed"], last
        ends.append((last, time.monotonic() - since))
    return ends


@needs_mininet
def test_a_planned_cluster_sums_through_its_device_and_round_its_ring(tmp_path: Path) -> None:
    cluster_file, circuits_file = _files(tmp_path)
    circuits = load_circuits(circuits_file, CLUSTER)
    site_file = tmp_path / "site.json"
    site = mininet_site(CLUSTER, circuits, target="builtin")
    site_file.write_text(json.dumps(site.to_dict()))
    with DirectNetwork(CLUSTER, circuits, DirectSite.load(site_file), tmp_path / "run") as net:
        # worker w's interface i is w<w>-eth<i> with the site's address and MAC; the circuits are shaped at L
        for w in range(4):
            shown = net.run(f"w{w}", "ip -br addr; ip -br link")
            for i, me in enumerate(site.workers[w]):
                assert f"w{w}-eth{i}" in shown and str(me.ip) in shown and me.mac in shown, shown
        assert "rate 10Gbit" in net.run("w0", "tc class show dev w0-eth2")
        assert net.hop_delay is None or net.hop_delay == "1us"  # netem only where the kernel has it
        argv = Path(f"/proc/{net.switch('d0').process.pid}/cmdline").read_bytes().decode().split("\0")
        assert [a for a in argv if "@" in a] == [f"{p}@d0-eth{p}" for p in (1, 2, 3, 4)] and "--no-p4" in argv
        described = json.loads((tmp_path / "run" / "direct.json").read_text())
        assert described["switches"]["d0"]["p4runtime"] == site.devices[0].p4runtime

        assert len(net.neighbour_pairs()) == 8  # the ring's 4 circuits, each way
        assert net.ping_circuits() == []
        assert p4runtime_answers(site.devices[0].p4runtime, timeout=2.0)

        state = tmp_path / "state"
        assert cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size", SIZE,
                         "--kinds", "tree,ring", "--state-dir", str(state)]) == 0
        procs = _ranks(net, state / "parts.json", calls=50, seed=7)
        try:
            first = _lines(procs, 2, wait=40)  # a float32 and an int32 call on every rank
            for call in (0, 1):
                results = [lines[call] for lines in first]
                assert all(r.get("within_bound") for r in results), results
                assert len({r["digest"] for r in results}) == 1, results  # every rank the same bits
                assert set(results[0]["parts"]) == {"part 1/2 (ring, forward)", "part 1/2 (ring, backward)",
                                                    "part 2/2 (tree, job direct-1)"}
            # cut w0's circuit to the device mid-call: every rank's call fails, naming the tree part
            cut = time.monotonic()
            net.run("w0", "ip link set w0-eth2 down")
            ends = _all_fail_naming(procs, "part 2/2 (tree, job direct-1)", cut)
            assert all(after < 2 * TIMEOUT + 2 for _, after in ends), ends  # the worker's own timeout
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    assert not link_exists("d0-eth1") and not (tmp_path / "run" / "state.json").exists()


@needs_mininet
def test_streaming_nics_sit_between_each_worker_and_its_circuits(tmp_path: Path) -> None:
    """Two workers of one interface, one circuit: each worker's NIC n<w> is a bump in the wire (port 1 its
    worker's interface, port 2 the circuit), with its program loaded and P4Runtime where the site says."""
    cluster = DirectCluster(2, 1, 1.0, nic_streaming=True)
    circuits = [("w0.0", "w1.0")]
    site = mininet_site(cluster, circuits, target="builtin")
    assert [str(site.nic(w).ip) for w in (0, 1)] == ["10.192.0.1", "10.192.0.2"]
    with DirectNetwork(cluster, circuits, site, tmp_path / "run") as net:
        for w in (0, 1):
            nic = net.switch(f"n{w}")
            assert (nic.device_id, nic.grpc_address) == (site.nic(w).device_id, site.nic(w).p4runtime)
            argv = Path(f"/proc/{nic.process.pid}/cmdline").read_bytes().decode().split("\0")
            assert [a for a in argv if "@" in a] == [f"1@n{w}-eth1", f"2@n{w}-eth2"] and "--no-p4" not in argv
            assert any(a.endswith("p4src/nic.p4") for a in argv), argv
            # the worker's interface is cabled to its NIC's port 1, the circuit joins the NICs' ports 2
            peer = net.run(f"w{w}", f"ip -o link show w{w}-eth0")
            assert f"@if{Path(f'/sys/class/net/n{w}-eth1/ifindex').read_text().strip()}" in peer, peer
        assert Path("/sys/class/net/n0-eth2").exists() and "n1-eth2" in subprocess.run(
            ["ip", "-o", "link", "show", "n0-eth2"], capture_output=True, text=True).stdout
        for w in (0, 1):
            assert p4runtime_answers(site.nic(w).p4runtime, timeout=2.0)
    assert not link_exists("n0-eth1") and not link_exists("n0-eth2")


@needs_mininet
def test_ina_net_direct_writes_a_site_starts_execs_and_stops(tmp_path: Path) -> None:
    """`ina-net direct site`, then `start` in its own process, `exec` on a worker, `direct stop`."""
    cluster_file, circuits_file, site_file = tmp_path / "c.json", tmp_path / "circuits.json", tmp_path / "site.json"
    cluster_file.write_text(json.dumps(DirectCluster(2, 2, 0.5).to_dict()))
    circuits_file.write_text(json.dumps([["w0.1", "w1.0"]]))  # interface 0 of w0 and 1 of w1: no circuit
    net_cli = [sys.executable, "-m", "bmv2env.cli", "direct"]
    inputs = ["--cluster", str(cluster_file), "--circuits", str(circuits_file)]
    wrote = subprocess.run([*net_cli, "site", *inputs, "--out", str(site_file), "--target", "builtin"],
                           capture_output=True, text=True, timeout=30)
    assert wrote.returncode == 0 and "2 workers' interfaces, 0 device(s)" in wrote.stdout, wrote
    run_dir = tmp_path / "run"
    started = subprocess.Popen([*net_cli, "start", *inputs, "--site", str(site_file), "--run-dir", str(run_dir)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not (run_dir / "direct.json").exists():
        if started.poll() is not None or time.monotonic() > deadline:
            started.kill()
            pytest.fail(f"ina-net direct start did not come up: {started.communicate()[0]}")
        time.sleep(0.05)
    site = DirectSite.load(site_file)
    shown = subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "w1", "--run-dir", str(run_dir), "--",
                            "ping", "-c1", "-W2", str(site.workers[0][1].ip.ip)], capture_output=True, text=True,
                           timeout=10)
    assert shown.returncode == 0 and "1 received" in shown.stdout, shown
    links = subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "w0", "--run-dir", str(run_dir), "--",
                            "ls", "/sys/class/net"], capture_output=True, text=True, timeout=10)
    assert links.stdout.split() == ["lo", "w0-eth1"], links  # a port without a circuit is not made
    assert "rate 500Mbit" in subprocess.run([sys.executable, "-m", "bmv2env.cli", "exec", "w0", "--run-dir",
                                             str(run_dir), "--", "tc", "class", "show", "dev", "w0-eth1"],
                                            capture_output=True, text=True, timeout=10).stdout
    stopped = subprocess.run([*net_cli, "stop", "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=40)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    output = started.communicate(timeout=10)[0]
    assert started.returncode == 0 and "Traceback" not in output, output
    assert "direct-connect cluster up: 2 workers x 2 interfaces, 0 device(s)" in output, output
    assert "1 circuit at 500 Mb/s each way" in output, output
    assert not (run_dir / "state.json").exists() and not (run_dir / "direct.json").exists()


NIC_CLUSTER = DirectCluster(8, 4, 10.0, nic_streaming=True)


@needs_mininet_module
def test_a_worker_reaches_its_nic_by_each_interface(tmp_path: Path) -> None:
    """Whichever interface a part binds, its packets to the NIC's own address leave by that interface."""
    _, circuits_file = _files(tmp_path, NIC_CLUSTER, "nic_mesh")
    circuits = load_circuits(circuits_file, NIC_CLUSTER)
    site = mininet_site(NIC_CLUSTER, circuits, target="builtin", grpc_port_base=52101)
    card, commands = site.nic(2), worker_commands(2, site, NIC_CLUSTER, circuits)
    for i, me in enumerate(site.workers[2]):
        assert f"ip neigh replace {card.ip} lladdr {card.mac} dev w2-eth{i} nud permanent" in commands
        assert f"ip route replace {card.ip}/32 dev w2-eth{i} src {me.ip.ip} table {100 + i}" in commands
    assert [c for c in commands if c.startswith(f"ip route replace {card.ip}/32") and "table" not in c] == \
        [f"ip route replace {card.ip}/32 dev w2-eth0 src {site.workers[2][0].ip.ip}"]


@needs_mininet
def test_a_nic_mesh_sums_through_the_streaming_nics(tmp_path: Path) -> None:
    """8 workers x 4 interfaces with streaming NICs, the planner's nic_mesh(4) (K_{4,4}: 16 meeting trees through
    every NIC); `ina-ctl direct setup` sets the NICs up, 8 ranks sum float32 and int32 through them; then n5's
    switch process dies mid-call, and every rank fails within its timeout, naming the part."""
    cluster_file, circuits_file = _files(tmp_path, NIC_CLUSTER, "nic_mesh")
    circuits = load_circuits(circuits_file, NIC_CLUSTER)
    site_file = tmp_path / "site.json"
    site_file.write_text(json.dumps(mininet_site(NIC_CLUSTER, circuits, target="builtin").to_dict()))
    site = DirectSite.load(site_file)
    with DirectNetwork(NIC_CLUSTER, circuits, site, tmp_path / "run") as net:
        state = tmp_path / "state"
        assert cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size", SIZE,
                         "--kinds", "nic_mesh", "--state-dir", str(state)]) == 0
        (mesh,) = parts_from_json((state / "parts.json").read_text())
        assert isinstance(mesh, TreePart) and len(mesh.spec.trees) == 16
        assert [(m.ip, m.switch_ip) for m in mesh.spec.members] == \
            [(str(site.workers[w][0].ip.ip), str(site.nic(w).ip)) for w in range(8)]
        procs = _ranks(net, state / "parts.json", calls=50, seed=9)
        try:
            first = _lines(procs, 4, wait=60)  # two rounds of a float32 and an int32 call on every rank
            for call in range(4):
                results = [lines[call] for lines in first]
                assert all(r.get("within_bound") for r in results), results
                assert len({r["digest"] for r in results}) == 1, results
                assert set(results[0]["parts"]) == {"part 1/1 (tree, job nic-mesh-0)"}
            slowest = [max(lines[k]["seconds"] for lines in first) for k in range(4)]
            print(f"NIC mesh calls of {ELEMENTS} elements per rank, the slowest rank's: "
                  + ", ".join(f"{r['dtype']} {t * 1e3:.1f} ms" for r, t in zip(first[0], slowest)))
            dead = time.monotonic()
            net.switch("n5").stop_process()
            ends = _all_fail_naming(procs, "part 1/1 (tree, job nic-mesh-0)", dead)
            print("failed after " + ", ".join(f"{after:.1f}" for _, after in ends) + " s")
            assert all(after < 2 * TIMEOUT + 2 for _, after in ends), ends
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    assert not link_exists("n0-eth1") and not (tmp_path / "run" / "state.json").exists()


CHAIN_CLUSTER = DirectCluster(8, 4, 10.0, devices=2, device_ports=8)  # the issue's: 8 x 4, 2 devices of 8 ports


def _started(tmp_path: Path, cluster: DirectCluster, kinds: str) -> tuple[Path, Path, list[tuple[str, str]]]:
    """The plan's files and a Mininet site for its circuits: (cluster file, site file, circuits)."""
    cluster_file, circuits_file = _files(tmp_path, cluster, kinds)
    circuits = load_circuits(circuits_file, cluster)
    site_file = tmp_path / "site.json"
    site_file.write_text(json.dumps(mininet_site(cluster, circuits, target="builtin").to_dict()))
    return cluster_file, site_file, circuits


def _same_sums(first: list[list[dict]], calls: int, parts: set[str]) -> list[float]:
    """Every call within the bound with the same bits on every rank, run by ``parts``; the slowest rank's times."""
    for call in range(calls):
        results = [lines[call] for lines in first]
        assert all(r.get("within_bound") for r in results), results
        assert len({r["digest"] for r in results}) == 1, results
        assert set(results[0]["parts"]) == parts, results[0]
    return [max(lines[k]["seconds"] for lines in first) for k in range(calls)]


@needs_mininet
def test_a_ring_tree_and_a_ring_sum_on_sockets_and_a_cut_circuit_fails_every_rank(tmp_path: Path) -> None:
    """The issue's cluster, 8 workers x 4 interfaces and 2 devices of 8 ports, no NICs: the planner's ring_tree(4)
    + ring (a ring_tree takes 2 interfaces, so a torus, which takes 4, cannot join it: the next test runs one).
    `ina-ctl direct setup --circuits` makes the devices' job over the chain ends and every rank's relay; 8 ranks,
    one process in each worker's host, sum float32 and int32 through the relays and devices and round the ring.
    Then the circuit w0.2 <-> w1.3 of group 0's chain goes down mid-call: every rank fails within its timeout,
    naming the ring_tree part, and the ranks at the circuit's ends name it."""
    cluster_file, site_file, circuits = _started(tmp_path, CHAIN_CLUSTER, "ring_tree,ring")
    assert ("w0.2", "w1.3") in circuits and ("d0.3", "d1.3") in circuits  # a chain's circuit, the devices' own
    with DirectNetwork(CHAIN_CLUSTER, circuits, DirectSite.load(site_file), tmp_path / "run") as net:
        state = tmp_path / "state"
        assert cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size", SIZE,
                         "--kinds", "ring_tree,ring", "--state-dir", str(state),
                         "--circuits", str(tmp_path / "circuits.json")]) == 0
        part = "part 2/2 (ring_tree, job direct-1-chains)"
        procs = _ranks(net, state / "parts.json", calls=50, seed=11)
        try:
            slowest = _same_sums(_lines(procs, 2, wait=40), 2, {"part 1/2 (ring, forward)",
                                                                "part 1/2 (ring, backward)", part})
            print("ring_tree + ring calls of 20,011 elements per rank, the slowest rank's: "
                  f"float32 {slowest[0] * 1e3:.0f} ms, int32 {slowest[1] * 1e3:.0f} ms")
            cut = time.monotonic()
            net.run("w0", "ip link set w0-eth2 down")
            ends = _all_fail_naming(procs, part, cut)
            print("failed after " + ", ".join(f"{after:.1f}" for _, after in ends)
                  + f" s; rank 0: {ends[0][0]['error']}")
            assert all(after < 2 * TIMEOUT + 2 for _, after in ends), ends
            assert all("silent longest at rank" in line["error"] and "circuit" in line["error"]
                       for line, _ in ends), ends
            assert any("circuit w0.2 <-> w1.3" in ends[r][0]["error"] or "circuit w1.3 <-> w0.2" in ends[r][0]["error"]
                       for r in (0, 1)), [ends[r] for r in (0, 1)]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    assert not link_exists("d0-eth1") and not (tmp_path / "run" / "state.json").exists()


@needs_mininet
def test_a_torus_sums_on_sockets_over_four_interfaces(tmp_path: Path) -> None:
    """The same 8 workers x 4 interfaces, the planner's torus (rings of 2 on interfaces 0 and 1, rings of 4 across
    them on 2 and 3: 16 circuits, no device): `ina-ctl direct setup --circuits`, 8 ranks in their hosts sum float32
    and int32 round the rings of rings both ways, within the bound and with the same bits on every rank."""
    cluster_file, site_file, circuits = _started(tmp_path, CHAIN_CLUSTER, "torus")
    assert len(circuits) == 16
    with DirectNetwork(CHAIN_CLUSTER, circuits, DirectSite.load(site_file), tmp_path / "run") as net:
        state = tmp_path / "state"
        assert cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size", SIZE,
                         "--kinds", "torus", "--state-dir", str(state),
                         "--circuits", str(tmp_path / "circuits.json")]) == 0
        procs = _ranks(net, state / "parts.json", calls=1, seed=13)
        try:
            _same_sums(_lines(procs, 2, wait=40), 2, {"part 1/1 (torus, forward)", "part 1/1 (torus, backward)"})
            assert all(p.wait(timeout=10) == 0 for p in procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()


@needs_mininet
def test_two_nic_meshes_share_the_nics_and_sum_through_them(tmp_path: Path) -> None:
    """NTT's ring with NIC streaming, nic_mesh(2) x 2, on 4 workers x 4 interfaces: `ina-ctl direct setup` sets the
    four NICs up with one controller and makes a job per mesh (each mesh's hosts the workers' addresses on its
    first interface); 4 ranks sum float32 and int32 through both meshes at once, within the bound, the same bits on
    every rank."""
    cluster = DirectCluster(4, 4, 10.0, nic_streaming=True)
    cluster_file, site_file, circuits = _started(tmp_path, cluster, "nic_mesh(2)")
    site = DirectSite.load(site_file)
    with DirectNetwork(cluster, circuits, site, tmp_path / "run") as net:
        state = tmp_path / "state"
        assert cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size", SIZE,
                         "--kinds", "nic_mesh(2)", "--state-dir", str(state),
                         "--circuits", str(tmp_path / "circuits.json")]) == 0
        meshes = parts_from_json((state / "parts.json").read_text())
        assert [m.spec.name for m in meshes] == ["nic-mesh-0", "nic-mesh-1"] and not (state / "part-1").exists()
        assert [[m.ip for m in mesh.spec.members] for mesh in meshes] == \
            [[str(site.workers[w][i].ip.ip) for w in range(4)] for i in (0, 2)]
        procs = _ranks(net, state / "parts.json", calls=1, seed=17)
        try:
            _same_sums(_lines(procs, 2, wait=40), 2, {"part 1/2 (tree, job nic-mesh-0)",
                                                      "part 2/2 (tree, job nic-mesh-1)"})
            assert all(p.wait(timeout=10) == 0 for p in procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
