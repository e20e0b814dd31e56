"""bmv2-env's management network: Mininet hosts reach a service in the root namespace, beside the data path.

Root and Mininet only (skipped elsewhere, as tests/test_mininet.py).
"""

from __future__ import annotations

import socket
from pathlib import Path

from controller.controller import Controller
from tests.mininet_env import USABLE, needs_mininet

REPO = Path(__file__).resolve().parent.parent

if USABLE:
    from bmv2env.network import InaNetwork
    from bmv2env.runstate import link_exists


@needs_mininet
def test_hosts_reach_the_root_namespace_and_the_data_path_still_works(tmp_path: Path) -> None:
    with InaNetwork(REPO / "bmv2-env" / "topologies" / "single-4.json", tmp_path, target="builtin",
                    management=True) as net:
        with socket.create_server((net.management_address, 0)) as listener:
            listener.settimeout(10)
            port = listener.getsockname()[1]
            connect = f"import socket; socket.create_connection(('{net.management_address}', {port}), 5).sendall(b'hi')"
            net.host("h3").sendCmd(f"/usr/bin/python3 -c \"{connect}\"")
            peer, (address, _) = listener.accept()
            with peer:
                assert peer.recv(2) == b"hi"
            assert net.host("h3").waitOutput() == ""
        assert address == net.management_ip("h3") == "172.31.0.3"
        assert "0% packet loss" in net.run("h1", f"ping -c1 -W1 {net.management_ip('h4')}")  # host to host too

        with Controller(net.network, tmp_path / "controller-state.json") as controller:
            controller.setup()
        assert net.ping_all() == []
        route = net.run("h1", "ip route get 10.0.0.2")
        assert "dev h1-eth0" in route, route  # data through the switch, not the management bridge
    assert not link_exists("inamgmt0") and not link_exists("h1-mgr")
