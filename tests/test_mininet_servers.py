"""Spare servers in Mininet (issue 62): server hosts run the aggregation server process (ina.p4 on a UDP socket of
the host's address) in their own namespace, provisioned by the controller over the management network; the plain
switch only routes.  A job of 4 workers
through 2 servers sums exactly, each server summing its half.  Root and Mininet only: skipped elsewhere."""

from __future__ import annotations

from pathlib import Path

from controller.controller import Controller
from controller.network import Network
from controller.topology import Topology, servers
from tests.mininet_env import USABLE, needs_mininet
from tests.test_e2e import assert_all_exact, reports, start_workers

if USABLE:
    from bmv2env.network import InaNetwork

pytestmark = needs_mininet
TOPOLOGY = Path(__file__).resolve().parents[1] / "bmv2-env" / "topologies" / "servers-4x2.json"
SIZE = 1 << 19  # values per call: 2 MB of float32 per worker


def test_a_job_through_two_server_hosts_sums_exactly(tmp_path):
    with InaNetwork(TOPOLOGY, tmp_path / "net", target="builtin") as net:
        server_processes = list(net.servers)  # the network forgets them when it stops
        saved = Network.load(net.net_file)  # what the controller reads: servers are devices with an access
        assert {"srv1", "srv2"} <= set(saved.access)
        assert saved.access["srv1"].grpc_address == f"{net.management_ip('srv1')}:9559"
        assert len({a.device_id for a in saved.access.values()}) == 3
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            assert net.ping_all() == []  # the plain switch routes everyone, servers included
            hosts = ["h1", "h2", "h3", "h4"]
            spec = controller.create_job("srv", hosts, pool_size=16, mode="ina", lanes="auto")
            assert sorted(t.to_ip for t in spec.trees) == ["10.0.0.5", "10.0.0.6"]
            assert_all_exact(reports(start_workers(net, controller.spec_dir / "srv.json", hosts, size=SIZE)), 4)
            stats = controller.status()["jobs"]["srv"]
            V = controller.state.options.values
            for server in ("srv1", "srv2"):  # each summed about half the call (4 contributions a packet)
                assert stats[server]["aggregated"] >= SIZE // V, stats
            assert "s1" not in stats  # the plain switch is in no tree
            for server in ("srv1", "srv2"):  # the host's kernel carried them to the server's socket, and only there
                counters = _snmp(net.run(server, "cat /proc/net/snmp"))
                assert counters["Udp"]["InDatagrams"] > 0, counters["Udp"]
                assert counters["Udp"]["NoPorts"] == counters["Udp"]["InErrors"] == 0, counters["Udp"]
                assert counters["Icmp"]["OutDestUnreachs"] == 0, counters["Icmp"]
    assert [s.name for s in server_processes] == ["srv1", "srv2"]
    for server in server_processes:  # stopped: each printed its sockets' counters, every contribution through them
        udp = server.udp_counters()
        assert udp["rx_segments"] >= stats[server.name]["aggregated"] and udp["tx_messages"] > 0, udp
        assert udp.get("tx_errors", 0) == 0, udp


def test_a_server_of_two_cores_serves_a_lane_on_each_thread(tmp_path):
    """``server.cores`` 2: the server process runs two threads steered by job id, and the job's two lanes (one per
    core) land one on each."""
    with InaNetwork(Topology.from_dict(servers(4, 1, 2)), tmp_path / "net", target="builtin") as net:
        [server] = net.servers
        assert server.argv[server.argv.index("--threads") + 1] == "2"
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            hosts = ["h1", "h2", "h3", "h4"]
            spec = controller.create_job("two", hosts, pool_size=16, mode="ina", lanes="auto")
            assert len(spec.trees) == 2 and {t.to_ip for t in spec.trees} == {"10.0.0.5"}
            assert_all_exact(reports(start_workers(net, controller.spec_dir / "two.json", hosts, size=SIZE // 4)), 4)
    udp = server.udp_counters()
    assert udp["thread0_rx_segments"] > 0 and udp["thread1_rx_segments"] > 0, udp
    assert udp["rx_segments"] == udp["thread0_rx_segments"] + udp["thread1_rx_segments"], udp


def _snmp(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/snmp (the namespace's): each protocol's header line, then its values line."""
    lines = [line.split() for line in text.splitlines() if ":" in line]
    return {names[0].rstrip(":"): dict(zip(names[1:], map(int, values[1:])))
            for names, values in zip(lines[::2], lines[1::2])}
