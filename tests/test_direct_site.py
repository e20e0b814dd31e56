"""controller/direct_site.py and controller/direct_jobs.py: from a plan and a site file to every rank's parts.

Four workers with three "interfaces" each (127.0.1.x, 127.0.2.x, 127.0.3.x) and one device of four ports: the
planner gives a ring on interfaces 0 and 1 and a tree through the device on interface 2.  The device is a
built-in-target switch on loopback with no controller of its own (tests/loopback_net.py's LoopbackSwitch):
`ina-ctl direct setup` sets it up over real gRPC and writes parts.json, and four DirectWorker ranks load it
and sum over real sockets.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from controller import cli
from controller.controller import Controller
from controller.direct import DirectCluster, DirectError, describe, plan, plan_of, tree_topology
from controller.direct_jobs import create_parts, mesh_network, meshes_network, part_network, ring_part, torus_part
from controller.direct_site import DirectSite
from controller.network import Network, SwitchAccess
from controller.p4runtime_client import SwitchError
from tests.conftest import free_port, free_ports
from tests.loopback_net import LoopbackSwitch
from tests.test_direct_worker import check, on_ranks
from worker import DirectWorker
from worker.direct import RingPart, TorusPart, TreePart, parts_from_json

N = 4
SIZE = 20_011  # elements per call: not a multiple of V = 256
CLUSTER = DirectCluster(N, 3, 10.0, devices=1, device_ports=4)
NBYTES = 1 << 20  # the plan's call: at 10 Gbit/s a tree and a ring share it
DEVICE_IP = "127.0.0.250"


def site_dict(grpc_address: str, ring_port: int) -> dict:
    """Worker w's interface i at 127.0.(i+1).(w+1); the device at DEVICE_IP."""
    return {"workers": [{"interfaces": [{"ip": f"127.0.{i + 1}.{w + 1}/24", "mac": f"02:00:0{i + 1}:00:00:{w + 1:02x}"}
                                        for i in range(CLUSTER.interfaces)]} for w in range(N)],
            "devices": [{"p4runtime": grpc_address, "device_id": 1, "target": "builtin", "ip": DEVICE_IP,
                         "mac": "02:00:00:00:fe:fa"}],
            "ring_port": ring_port}


def test_site_file_and_the_parts_it_gives() -> None:
    """The planner's tree + ring, and each part's addresses taken from the site."""
    site = DirectSite.from_dict(site_dict("127.0.0.1:9559", 41000))
    assert DirectSite.from_dict(site.to_dict()) == site
    p = plan(CLUSTER, NBYTES)
    assert [x.shape.kind for x in p.parts] == ["ring", "tree"]
    ring, tree = p.parts
    assert ring.interfaces == (0, 1) and tree.interfaces == (2,) and tree.devices == (0,)
    net = part_network(CLUSTER, p, 1, site)
    hosts = net.topology.hosts
    assert [str(hosts[f"h{w + 1}"].ip) for w in range(N)] == [f"127.0.3.{w + 1}/24" for w in range(N)]
    assert str(net.topology.switches["d0"].ip) == DEVICE_IP and net.topology.switches["d0"].mac == "02:00:00:00:fe:fa"
    assert net.access["d0"].grpc_address == "127.0.0.1:9559" and net.access["d0"].target == "builtin"
    placeholder = tree_topology(CLUSTER, tree)
    assert net.topology.to_dict()["links"] == placeholder["links"]  # only the addresses change
    r = ring_part(p, 0, site)
    assert r.share == ring.share and r.order == ring.order
    # w's interface 0 is a circuit to w+1's interface 1: forward, w hears w-1 on 1; backward, w+1 on 0
    assert r.forward == tuple(f"127.0.2.{w + 1}:41000" for w in range(N))
    assert r.backward == tuple(f"127.0.1.{w + 1}:41001" for w in range(N))
    with pytest.raises(DirectError, match="part 2 of 2 is not a ring part"):
        ring_part(p, 1, site)


def test_two_workers_ring_both_ways_on_one_circuit() -> None:
    cluster = DirectCluster(2, 1, 10.0)
    p = plan(cluster, NBYTES)
    (only,) = p.parts
    site = DirectSite.from_dict({"workers": [{"interfaces": [{"ip": f"10.9.0.{w}/31", "mac": f"02:00:00:00:09:0{w}"}]}
                                             for w in range(2)], "ring_port": 5000})
    r = ring_part(p, 0, site)
    assert only.interfaces == (0,) and r.forward == ("10.9.0.0:5000", "10.9.0.1:5000")
    assert r.backward == ("10.9.0.0:5001", "10.9.0.1:5001")


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["workers"][2]["interfaces"][1].update(ip="127.0.2.3"),
     r"workers\[2\]\.interfaces\[1\]\.ip: an address with its prefix"),
    (lambda d: d["workers"][1]["interfaces"][0].update(mac="02:00"), r"workers\[1\]\.interfaces\[0\]\.mac: a MAC"),
    (lambda d: d["workers"][3]["interfaces"][2].update(ip="127.0.1.1/24"),
     r"workers\[3\]\.interfaces\[2\]\.ip: 127\.0\.1\.1 is also workers\[0\]\.interfaces\[0\]\.ip"),
    (lambda d: d["devices"][0].update(target="tofino"), r"devices\[0\]\.target: one of builtin, bmv2"),
    (lambda d: d["devices"][0].update(p4runtime="nowhere"), r"devices\[0\]\.p4runtime: host:port"),
    (lambda d: d["devices"][0].pop("device_id"), r"devices\[0\]\.device_id is missing"),
    (lambda d: d["devices"][0].update(ip="127.0.0.250/24"), r"devices\[0\]\.ip: the device's own address"),
    (lambda d: d.update(ring_port=70000), "ring_port: a TCP port"),
    (lambda d: d["workers"][0].update(colour="red"), r"unknown field\(s\) \['workers\[0\]\.colour'\]"),
    (lambda d: d["workers"][1].update(nic={**_nic(1), "p4runtime": "nowhere"}),
     r"workers\[1\]\.nic\.p4runtime: host:port"),
    (lambda d: d["workers"][1].update(nic={k: v for k, v in _nic(1).items() if k != "mac"}),
     r"workers\[1\]\.nic\.mac is missing"),
    (lambda d: d["workers"][2].update(nic={**_nic(2), "ip": DEVICE_IP}),
     r"workers\[2\]\.nic\.ip: 127\.0\.0\.250 is also devices\[0\]\.ip"),
    (lambda d: d["workers"][2].update(nic={**_nic(2), "p4runtime": "127.0.0.1:9559", "device_id": 1}),
     r"workers\[2\]\.nic: P4Runtime 127\.0\.0\.1:9559 device_id 1 is also devices\[0\]'s"),
])
def test_a_bad_site_is_refused_naming_the_field(change, message: str) -> None:
    data = copy.deepcopy(site_dict("127.0.0.1:9559", 41000))
    change(data)
    with pytest.raises(DirectError, match=message):
        DirectSite.from_dict(data)


def _nic(w: int) -> dict:
    """Worker w's streaming NIC: a P4Runtime device of its own."""
    return {"p4runtime": f"127.0.0.1:{9600 + w}", "device_id": 10 + w, "target": "builtin", "ip": f"127.0.9.{w + 1}",
            "mac": f"02:00:09:00:00:{w + 1:02x}"}


def test_streaming_nics_in_the_site() -> None:
    """A worker's ``nic`` is parsed as a device is; a cluster with nic_streaming needs one on every worker, one
    without it takes none, and a site without NICs is as it was."""
    streaming = dataclasses.replace(CLUSTER, nic_streaming=True)
    plain = DirectSite.from_dict(site_dict("127.0.0.1:9559", 41000))
    assert plain.nics == () and plain.nic(0) is None and "nic" not in plain.to_dict()["workers"][0]
    with pytest.raises(DirectError, match=r"site: workers\[0\]\.nic is missing: the cluster's workers have streaming"):
        plain.check(streaming)
    data = site_dict("127.0.0.1:9559", 41000)
    for w, worker in enumerate(data["workers"]):
        worker["nic"] = _nic(w)
    site = DirectSite.from_dict(data)
    site.check(streaming)
    assert site.nic(3).p4runtime == "127.0.0.1:9603" and site.nic(3).access.device_id == 13
    assert DirectSite.from_dict(site.to_dict()) == site
    with pytest.raises(DirectError, match=r"workers\[0\]\.nic: the cluster's workers have no streaming NIC"):
        site.check(CLUSTER)
    data["workers"][2].pop("nic")
    with pytest.raises(DirectError, match=r"workers\[2\]\.nic is missing"):
        DirectSite.from_dict(data).check(streaming)


MESH_CLUSTER = DirectCluster(8, 4, 10.0, nic_streaming=True)


def mesh_site() -> DirectSite:
    """MESH_CLUSTER's site: worker w's interface i at 127.0.(i+1).(w+1), its NIC ``_nic(w)``."""
    return DirectSite.from_dict({"workers": [{"interfaces": [{"ip": f"127.0.{i + 1}.{w + 1}/24",
                                                              "mac": f"02:00:0{i + 1}:00:00:{w + 1:02x}"}
                                                             for i in range(4)], "nic": _nic(w)} for w in range(8)],
                                 "devices": []})


def test_a_nic_mesh_part_is_its_nics_network_and_runs_alone(tmp_path: Path) -> None:
    """The planner's nic_mesh(4): hosts at their interface-0 addresses on their NICs' port 1 (the port facing
    interface 0), circuits on ports D + 1 + i, every NIC reached as the site says and written as nic.p4.  A NIC
    mesh beside a ring is refused by name before anything is installed."""
    site, p = mesh_site(), plan(MESH_CLUSTER, NBYTES, ["nic_mesh"])
    assert p.parts[0].to_dict()["runs"] == "fabric and sockets" and not any("only)" in x for x in describe(p))
    net = mesh_network(MESH_CLUSTER, p, 0, site)
    hosts, links = net.topology.hosts, {(lk.a, lk.b) for lk in net.topology.links}
    assert [str(hosts[f"h{w + 1}"].ip) for w in range(8)] == [f"127.0.1.{w + 1}/24" for w in range(8)]
    assert {(f"h{w + 1}", f"n{w}-p1") for w in range(8)} <= links
    assert ("n0-p5", "n1-p5") in links and len(links) == 8 + 16  # w0.0 - w1.0: interface 0's circuit port
    assert net.access["n3"] == SwitchAccess("127.0.0.1:9603", 13, "builtin", "nic")
    assert str(net.topology.switches["n3"].ip) == "127.0.9.4"
    with pytest.raises(DirectError, match=r"part 2/2 is ring beside the NIC mesh part 1 \(nic_mesh\(2\)\): "
                                          r"the streaming NICs pass only their meshes' traffic"):
        create_parts(MESH_CLUSTER, plan_of(MESH_CLUSTER, NBYTES, ["nic_mesh(2)", "ring"]), site, tmp_path / "state")
    assert not (tmp_path / "state").exists()


def test_two_nic_meshes_are_one_network_of_the_nics() -> None:
    """nic_mesh(2) x 2 (NTT's ring with NIC streaming): one network, so one controller, of the 8 NICs; each mesh's
    hosts are the workers at their addresses on the mesh's first interface, on the NIC port facing it."""
    site, p = mesh_site(), plan_of(MESH_CLUSTER, NBYTES, ["nic_mesh(2)", "nic_mesh(2)"])
    assert [list(x.interfaces) for x in p.parts] == [[0, 1], [2, 3]]
    net = meshes_network(MESH_CLUSTER, p, site)
    hosts, links = net.topology.hosts, {(lk.a, lk.b) for lk in net.topology.links}
    assert sorted(net.topology.switches) == [f"n{w}" for w in range(8)] and sorted(net.access) == sorted(
        net.topology.switches)
    assert [str(hosts[f"h{w + 1}"].ip) for w in range(8)] == [f"127.0.1.{w + 1}/24" for w in range(8)]
    assert [str(hosts[f"m1h{w + 1}"].ip) for w in range(8)] == [f"127.0.3.{w + 1}/24" for w in range(8)]
    assert {(f"h{w + 1}", f"n{w}-p1") for w in range(8)} | {(f"m1h{w + 1}", f"n{w}-p3") for w in range(8)} <= links
    assert len(links) == 16 + 2 * 8  # each mesh's hosts, and its 8 circuits


def test_a_site_that_is_not_the_clusters_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = site_dict("127.0.0.1:9559", 41000)
    data["workers"][1]["interfaces"].pop()
    site = tmp_path / "site.json"
    site.write_text(json.dumps(data))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(CLUSTER.to_dict()))
    assert cli.main(["direct", "setup", "--cluster", str(cluster), "--site", str(site), "--size", "1MB",
                     "--state-dir", str(tmp_path / "state")]) == 1
    err = capsys.readouterr().err
    assert f"{site}: workers[1].interfaces: 2 listed, each worker of the cluster has 3" in err, err
    assert not (tmp_path / "state").exists()


def test_circuits_programmed_for_another_plan_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`direct setup --circuits`: the OCS's circuits must be the plan's; a swapped end is named, and nothing
    is set up."""
    site, cluster, circuits = tmp_path / "site.json", tmp_path / "cluster.json", tmp_path / "circuits.json"
    site.write_text(json.dumps(site_dict("127.0.0.1:9559", 41000)))
    cluster.write_text(json.dumps(CLUSTER.to_dict()))
    assert cli.main(["direct", "plan", "--cluster", str(cluster), "--size", "1MB", "--circuits", str(circuits)]) == 0
    wired = json.loads(circuits.read_text())
    (a, b), (c, d) = wired[0], wired[1]
    wired[0], wired[1] = [a, d], [c, b]  # two circuits' far ends swapped
    circuits.write_text(json.dumps(wired))
    capsys.readouterr()
    assert cli.main(["direct", "setup", "--cluster", str(cluster), "--site", str(site), "--size", "1MB",
                     "--state-dir", str(tmp_path / "state"), "--circuits", str(circuits)]) == 1
    err = capsys.readouterr().err
    assert f"{circuits}: the plan needs circuit {[a, b]}" in err and "another plan" in err, err
    assert not (tmp_path / "state").exists()


def torus_site(cluster: DirectCluster, ring_port: int) -> dict:
    """Worker w's interface i at 127.0.(10+i).(w+1); no device."""
    return {"workers": [{"interfaces": [{"ip": f"127.0.{10 + i}.{w + 1}/24", "mac": f"02:00:{i:02x}:00:00:{w + 1:02x}"}
                                        for i in range(cluster.interfaces)]} for w in range(cluster.workers)],
            "ring_port": ring_port}


TORUS_CLUSTER = DirectCluster(8, 6, 10.0)  # a ring on interfaces 0 and 1, a torus of 4 x 2 on 2 to 5


def test_a_torus_part_listens_where_its_circuits_arrive() -> None:
    """At each level and in each direction, a worker's address is on the interface whose circuit comes from its
    predecessor there (the level of 2's pair included); one port, after the ring part's two."""
    p = plan_of(TORUS_CLUSTER, NBYTES, ["torus(4)", "ring"])
    assert [x.shape.name for x in p.parts] == ["ring", "torus(4)"]
    site = DirectSite.from_dict(torus_site(TORUS_CLUSTER, 41000))
    torus = torus_part(p, 1, site)
    assert torus.share == p.parts[1].share and torus.order == tuple(range(8)) and torus.levels == (4, 2)
    far_end = {end: other for pair in p.parts[1].circuits for end, other in (pair, pair[::-1])}
    for direction in range(2):
        layout = torus.layout(direction)
        for level in range(2):
            for w, address in enumerate(torus.listen(direction)[level]):
                ip, port = address.split(":")
                assert port == "41002" and ip.startswith("127.0.") and ip.endswith(f".{w + 1}")
                interface = int(ip.split(".")[2]) - 10
                assert interface in p.parts[1].interfaces[2 * level:2 * level + 2]
                assert far_end[f"w{w}.{interface}"].split(".")[0] == f"w{layout.peers(w, level)[1]}"
    with pytest.raises(DirectError, match="part 1 of 2 is not a torus part"):
        torus_part(p, 0, site)


def test_setup_of_a_torus_then_every_rank_sums(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`ina-ctl direct setup` of a ring and a torus (nothing to install) writes parts.json; eight ranks load it
    and sum round both at once."""
    site, cluster, state = tmp_path / "site.json", tmp_path / "cluster.json", tmp_path / "state"
    site.write_text(json.dumps(torus_site(TORUS_CLUSTER, free_port())))
    cluster.write_text(json.dumps(TORUS_CLUSTER.to_dict()))
    assert cli.main(["direct", "setup", "--cluster", str(cluster), "--site", str(site), "--size", "256KB",
                     "--state-dir", str(state), "--kinds", "torus(4),ring"]) == 0  # the planner's: a ring and a torus
    out = capsys.readouterr().out
    assert "(fabric only)" not in out and "part 2/2: torus(4), share" in out and "levels 4 x 2" in out, out
    parts = parts_from_json((state / "parts.json").read_text())
    assert [type(x) for x in parts] == [RingPart, TorusPart]
    n = TORUS_CLUSTER.workers
    workers = [DirectWorker(parts, r, timeout=5.0) for r in range(n)]
    try:
        rng = np.random.default_rng(12)
        arrays = [(rng.standard_normal(SIZE) * 10 ** rng.uniform(-3, 3, SIZE)).astype(np.float32) for _ in range(n)]
        check(on_ranks(workers, lambda w: w.allreduce(arrays[w.rank])), arrays, workers[0].split(SIZE), parts)
        assert set(workers[0].last_parts) == {"part 1/2 (ring, forward)", "part 1/2 (ring, backward)",
                                              "part 2/2 (torus, forward)", "part 2/2 (torus, backward)"}
    finally:
        for w in workers:
            w.close()


def test_a_part_no_worker_runs_is_refused_by_name_before_anything_is_installed(tmp_path: Path) -> None:
    """A tree part ahead of a nic_mesh (the streaming NICs would drop its traffic): the device (nothing answers
    at its address) is never asked."""
    cluster = DirectCluster(9, 3, 10.0, devices=5, device_ports=16, nic_streaming=True)
    p = plan_of(cluster, NBYTES, ["tree", "nic_mesh(2)"])
    tree_first = dataclasses.replace(p, parts=tuple(sorted(p.parts, key=lambda x: x.shape.kind != "tree")))
    assert [x.shape.name for x in tree_first.parts] == ["tree", "nic_mesh(2)"]
    ports = free_ports(9 + 5)  # all different: the site refuses two devices at one address
    site = DirectSite.from_dict({
        "workers": [{"interfaces": [{"ip": f"10.{i}.0.{w}/31", "mac": f"02:00:00:00:0{i}:0{w}"} for i in range(3)],
                     "nic": {"p4runtime": f"127.0.0.1:{ports[w]}", "device_id": 1, "target": "builtin",
                             "ip": f"10.8.0.{w}", "mac": f"02:00:00:00:08:0{w}"}} for w in range(9)],
        "devices": [{"p4runtime": f"127.0.0.1:{ports[9 + j]}", "device_id": 1, "target": "builtin",
                     "ip": f"10.9.9.{j}", "mac": f"02:00:00:00:09:0{j}"} for j in range(5)]})
    with pytest.raises(DirectError, match=r"part 1/2 is tree beside the NIC mesh part 2 \(nic_mesh\(2\)\)"):
        create_parts(cluster, tree_first, site, tmp_path / "state")
    assert not (tmp_path / "state").exists()


def test_setup_then_every_rank_sums(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`ina-ctl direct setup` sets the device up and writes parts.json; four ranks load it and sum float32 and
    int32 through the device and round the ring at once."""
    grpc_address = f"127.0.0.1:{free_port()}"
    site = tmp_path / "site.json"
    site.write_text(json.dumps(site_dict(grpc_address, free_port())))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(CLUSTER.to_dict()))
    network = part_network(CLUSTER, plan(CLUSTER, NBYTES), 1, DirectSite.load(site))
    with LoopbackSwitch(network.topology, "d0", grpc_address=grpc_address):
        assert cli.main(["direct", "setup", "--cluster", str(cluster), "--site", str(site), "--size", "1MB",
                         "--state-dir", str(tmp_path / "state")]) == 0
        out = capsys.readouterr().out
        assert "part 1/2: ring, share 0.528, interfaces [0, 1]" in out, out
        assert "part 2/2: tree, share 0.472, interface 2, device(s) d0" in out and "job direct-1, pool 36" in out
        parts = parts_from_json((tmp_path / "state" / "parts.json").read_text())
        ring, tree = parts
        assert isinstance(ring, RingPart) and isinstance(tree, TreePart)
        assert [m.ip for m in tree.spec.members] == [f"127.0.3.{w + 1}" for w in range(N)]
        assert {m.switch_ip for m in tree.spec.members} == {DEVICE_IP} and tree.spec.mode == "ina"
        assert tree.spec_file == str((tmp_path / "state" / "part-1" / "jobs" / "direct-1.json").absolute())
        assert (tmp_path / "state" / "part-1" / "net.json").exists()
        workers = [DirectWorker(parts, r, timeout=5.0) for r in range(N)]
        try:
            rng = np.random.default_rng(11)
            ranges = workers[0].split(SIZE)
            for dtype in (np.float32, np.int32):
                if dtype == np.float32:
                    arrays = [(rng.standard_normal(SIZE) * 10 ** rng.uniform(-3, 3, SIZE)).astype(dtype)
                              for _ in range(N)]
                else:
                    arrays = [rng.integers(-2**20, 2**20, SIZE, dtype=np.int32) for _ in range(N)]
                check(on_ranks(workers, lambda w, xs=arrays: w.allreduce(xs[w.rank])), arrays, ranges, parts)
            assert set(workers[0].last_parts) == {"part 1/2 (ring, forward)", "part 1/2 (ring, backward)",
                                                  "part 2/2 (tree, job direct-1)"}
        finally:
            for w in workers:
                w.close()
    with pytest.raises(DirectError, match=r"holds an earlier setup \(parts.json\)"):
        create_parts(CLUSTER, plan(CLUSTER, NBYTES), DirectSite.load(site), tmp_path / "state")


def test_a_device_that_does_not_answer_undoes_the_jobs_made(tmp_path: Path) -> None:
    """Two tree parts; the second device does not answer, so the first part's job is deleted from its device
    and its state, and nothing is left for the ranks."""
    cluster = DirectCluster(N, 3, 10.0, devices=2, device_ports=4)
    p = plan_of(cluster, NBYTES, ["tree", "tree"])
    first_device, ring_port, second_device = free_ports(3)
    data = site_dict(f"127.0.0.1:{first_device}", ring_port)
    data["devices"].append({**data["devices"][0], "p4runtime": f"127.0.0.1:{second_device}", "ip": "127.0.0.251",
                            "mac": "02:00:00:00:fe:fb"})
    site = DirectSite.from_dict(data)
    first = part_network(cluster, p, 0, site)
    with LoopbackSwitch(first.topology, "d0", grpc_address=data["devices"][0]["p4runtime"]):
        with pytest.raises(SwitchError):
            create_parts(cluster, p, site, tmp_path / "state")
        assert not (tmp_path / "state" / "parts.json").exists()
        part0 = tmp_path / "state" / "part-0"
        with Controller(Network.load(part0 / "net.json"), part0 / "controller-state.json") as ctl:
            assert ctl.state.jobs == {}
            assert ctl.installed_entries("d0") == ctl.expected_entries("d0")  # routes, and no job's entries
