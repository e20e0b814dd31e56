"""The real ``p4target-switch-grpc`` command on veth ports, with hosts in network namespaces.

Three hosts h1, h2, h3 (namespaces) each hang off one switch port (a veth pair whose other
end the switch opens in the root namespace).  The program (tests/p4/runtime.p4) is pushed
over P4Runtime by p4runtime-shell, as a controller does with simple_switch_grpc --no-p4.
Also tests the netns helpers themselves.  Root only: skipped elsewhere.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4runtime_sh import shell as sh
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4target import netns
from p4target.frontend import load_program
from p4target.netns import Sandbox, entered
from p4target.p4info import build_p4info
from p4target.ports import PACKET_IGNORE_OUTGOING, SOL_PACKET
from p4target.runtime.device_config import build_device_config

from .conftest import P4_DIR, free_port

USABLE, WHY_NOT = netns.can_use_netns()
pytestmark = pytest.mark.skipif(not USABLE, reason=WHY_NOT or "network namespaces are usable")

ETHERTYPE = 0x88B5  # runtime.p4 parses the tag header after this etherType
TOKEN = f"p4t-netns-test-{os.getpid()}-{time.time_ns()}:".encode()  # only this run's frames count


# --- the helpers themselves ------------------------------------------------------------------


def test_names_are_unique_per_process_and_fit_an_interface() -> None:
    assert netns.unique_name("h1") == f"p4t{os.getpid()}-h1"
    assert len(netns.unique_name("h1", pid=4194304)) <= 15
    with pytest.raises(ValueError, match="at most 15"):
        netns.unique_name("much-too-long")
    with pytest.raises(ValueError):
        netns.unique_name("a b")


def test_sandbox_builds_links_and_leaves_nothing_behind_even_on_failure() -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), Sandbox() as box:
        h = box.netns("t1")
        root = box.veth("t1r", "t1h", b_netns=h)  # one end in the root namespace
        inner = box.veth("t1a", "t1b", a_netns=h)  # both ends inside
        assert root.a in netns.ip("-o", "link", "show") and root.b not in netns.ip("-o", "link", "show")
        states = dict(line.split()[:2] for line in netns.ip("-br", "link", "show", netns=h).splitlines())
        assert {states[f"{name}@{peer}"] for name, peer in ((inner.a, inner.b), (inner.b, inner.a))} == {"UP"}
        assert netns.ip("-br", "link", "show", "dev", root.a).split()[1] == "UP"
        ipv6 = subprocess.run(["ip", "netns", "exec", h, "sysctl", "-n", f"net.ipv6.conf.{root.b}.disable_ipv6"],
                              capture_output=True, text=True).stdout.strip()
        assert ipv6 in ("1", "")  # "" when the kernel has no IPv6 at all
        with entered(h):
            inside = {name for _, name in socket.if_nameindex()}
        assert {root.b, inner.a, inner.b, "lo"} == inside
        assert root.b not in {name for _, name in socket.if_nameindex()}  # back in the root namespace
        raise Boom
    assert netns.leftovers([h], [root.a]) == []
    assert not box.namespaces and not box.links


def test_remove_stale_deletes_what_a_dead_process_left() -> None:
    dead = _dead_pid()
    name = netns.unique_name("x", pid=dead)
    netns.ip("netns", "add", name)
    netns.add_veth(netns.unique_name("xa", pid=dead), netns.unique_name("xb", pid=dead))
    try:
        removed = netns.remove_stale()
        assert f"netns {name}" in removed and f"link {netns.unique_name('xa', pid=dead)}" in removed
        assert netns.leftovers([name], [netns.unique_name("xa", pid=dead)]) == []
    finally:
        netns.delete_netns(name)
        netns.delete_link(netns.unique_name("xa", pid=dead))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # reaped: no such process now (reuse within the test is vanishingly unlikely)


# --- the switch command between three hosts --------------------------------------------------



@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[int, netns.Veth]]:
    """Port n of the switch: veth end ``s<n>`` in the root namespace, ``h<n>`` in namespace h<n>."""
    with Sandbox() as box:
        yield {n: box.veth(f"s{n}", f"h{n}", b_netns=box.netns(f"h{n}")) for n in (1, 2, 3)}


@pytest.fixture(scope="module")
def switch(hosts: dict[int, netns.Veth], tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    """``p4target-switch-grpc --no-p4`` on the three ports, with runtime.p4 pushed by p4runtime-shell."""
    program = P4_DIR / "runtime.p4"
    d: Path = tmp_path_factory.mktemp("pipe")
    (d / "p4info.txt").write_text(text_format.MessageToString(build_p4info(load_program(program))))
    (d / "device_config.bin").write_bytes(build_device_config(program))
    port = free_port()
    ifaces = [arg for n, link in hosts.items() for arg in ("-i", f"{n}@{link.a}")]
    proc = subprocess.Popen([sys.executable, "-m", "p4target.switch_grpc", *ifaces, "--no-p4", "--",
                             "--grpc-server-addr", f"127.0.0.1:{port}", "--cpu-port", "255"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the switch did not start: {proc.poll()=}, {proc.stderr.read() if proc.poll() else ''}")
            time.sleep(0.05)
        sh.setup(device_id=0, grpc_addr=f"127.0.0.1:{port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(d / "p4info.txt"), str(d / "device_config.bin")), verbose=False)
        try:
            yield proc
        finally:
            sh.teardown()
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        assert proc.returncode == 0 and "Traceback" not in err, err


def _host_socket(link: netns.Veth) -> socket.socket:
    """An AF_PACKET socket on a host's end that gets only etherType 0x88B5 and not its own sends."""
    with entered(link.b_netns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.bind((link.b, ETHERTYPE))
    return sock


def _frame(a: int, label: str) -> bytes:
    """Ethernet + runtime.p4's tag (a, b, c, d) + a payload unique to this run."""
    tag = bytes([a, 0, 0, 0])  # c != 0x77, so t_const leaves the frame alone
    return bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", type=ETHERTYPE)
                 / Raw(tag + TOKEN + label.encode()))


def _collect(sock: socket.socket, fence: bytes, timeout: float = 5.0) -> list[bytes]:
    """This run's frames on ``sock`` before ``fence`` (sent last, so everything else came first)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if select.select([sock], [], [], left)[0]:
            data = sock.recv(65536)
            if data == fence:
                return got
            if TOKEN in data:
                got.append(data)
    pytest.fail(f"the fence frame never arrived; got {got!r}")


def test_unicast_multicast_and_drop_between_namespaces(hosts: dict[int, netns.Veth], switch: subprocess.Popen) -> None:
    unicast = sh.TableEntry("I.t_exact")(action="I.forward")
    unicast.match["hdr.tag.a"] = "1"
    unicast.action["port"] = "2"
    unicast.insert()
    for a, group in ((2, 7), (3, 8)):
        flood = sh.TableEntry("I.t_exact")(action="I.flood")
        flood.match["hdr.tag.a"] = str(a)
        flood.action["group"] = str(group)
        flood.insert()
    sh.MulticastGroupEntry(7).add(1, 1).add(3, 1).insert()
    sh.MulticastGroupEntry(8).add(1, 1).add(2, 1).add(3, 1).insert()  # the fence reaches every host

    socks = {n: _host_socket(link) for n, link in hosts.items()}
    try:
        to_h2, to_h1_h3, to_nobody, fence = _frame(1, "unicast"), _frame(2, "multicast"), _frame(5, "drop"), \
            _frame(3, "fence")
        for f in (to_h2, to_h1_h3, to_nobody, fence):  # one port, one switch thread: order is kept
            socks[1].send(f)
        got = {n: _collect(sock, fence) for n, sock in socks.items()}
    finally:
        for sock in socks.values():
            sock.close()
    assert got[2] == [to_h2]  # bytes intact, and no multicast copy
    assert got[1] == [to_h1_h3]  # the group includes the ingress port, as in BMv2
    assert got[3] == [to_h1_h3]
    # tag.a=5 has no entry: the default action drops it, so it is in no list above

    counter = sh.CounterEntry("I.port_counter")
    counter.index = 1
    (cell,) = counter.read()
    assert cell.packet_count == 4  # the switch saw all four frames on port 1, and nothing else
