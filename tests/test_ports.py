"""Port I/O: memory and pcap ports anywhere; raw-socket ports on a veth pair in a fresh netns (root only)."""

from __future__ import annotations

import errno
import os
import queue
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from p4target import netns, ports
from p4target.executor.switch import Switch
from p4target.frontend import load_program
from p4target.netns import Sandbox, entered
from p4target.portio import BatchedPorts
from p4target.ports import MemoryPort, PcapPort, PortError, RawSocketPort, open_port, parse_interface_arg
from p4target.runtime.port_status import is_up, watch_ports

ETHERTYPE = 0x88B5  # IEEE local experimental: nothing else on the link uses it
MARK = b"p4target-ports-test:"  # every test frame carries it, so stray kernel frames are ignored


def frame(tag: str, dst: str = "02:00:00:00:00:02", vlan: int | None = None) -> bytes:
    payload = Raw(MARK + tag.encode())
    if vlan is None:
        return bytes(Ether(dst=dst, src="02:00:00:00:00:01", type=ETHERTYPE) / payload)
    return bytes(Ether(dst=dst, src="02:00:00:00:00:01") / Dot1Q(vlan=vlan, type=ETHERTYPE) / payload)


def ready(port: object, timeout: float = 1.0) -> bool:
    return bool(select.select([port], [], [], timeout)[0])


def collect(source: object, read: Callable[[], bytes | None], last: bytes, timeout: float = 3.0) -> list[bytes]:
    """The test frames read from ``source`` up to and including ``last``."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if ready(source, left):
            data = read()
            if data and MARK in data:
                got.append(data)
                if data == last:
                    return got
    pytest.fail(f"timed out waiting for {last!r}; got {got!r}")


# --- MemoryPort -----------------------------------------------------------------------------


def test_memory_port_round_trip_and_select() -> None:
    with MemoryPort(3, "m") as port:
        assert not ready(port, 0) and port.recv() is None
        frames = [frame(f"m{i}") for i in range(3)]
        for f in frames:
            port.inject(f)
        got = []
        while ready(port, 0):
            got.append(port.recv())
        assert got == frames and port.recv() is None

        sender = threading.Thread(target=lambda: [port.send(f) for f in frames[:2]])
        sender.start()
        assert port.wait_sent(2, timeout=2) == frames[:2]
        sender.join()
        assert port.wait_sent(3, timeout=0.05) == frames[:2]  # times out, returns what there is
        size = sum(map(len, frames))
        assert port.stats == {"rx_packets": 3, "rx_bytes": size, "tx_packets": 2,
                              "tx_bytes": size - len(frames[2]), "tx_errors": 0}


# --- PcapPort -------------------------------------------------------------------------------


def test_pcap_port_round_trip(tmp_path) -> None:
    frames = [frame(f"p{i}") for i in range(3)]
    wrpcap(str(tmp_path / "in.pcap"), [Ether(f) for f in frames])
    with PcapPort(1, "p", str(tmp_path / "in.pcap"), str(tmp_path / "out.pcap")) as port:
        got = []
        while port.readable and ready(port, 0):
            if (data := port.recv()) is not None:
                got.append(data)
        assert got == frames and not port.readable and port.recv() is None
        for f in reversed(frames):
            port.send(f)
        assert port.stats["rx_packets"] == 3 and port.stats["tx_packets"] == 3
    assert [bytes(p) for p in rdpcap(str(tmp_path / "out.pcap"))] == frames[::-1]


def test_pcap_port_reads_big_endian_nanosecond_files(tmp_path) -> None:
    data = frame("be")
    header = struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    (tmp_path / "in.pcap").write_bytes(header + struct.pack(">IIII", 1, 2, len(data), len(data)) + data)
    with PcapPort(1, "p", str(tmp_path / "in.pcap"), str(tmp_path / "out.pcap")) as port:
        assert port.recv() == data and port.recv() is None and not port.readable


def test_pcap_port_from_fifo_is_select_driven(tmp_path) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    frames = [frame(f"f{i}") for i in range(3)]
    records = [struct.pack("<IIII", 0, 0, len(f), len(f)) + f for f in frames]
    go_on = threading.Event()

    def writer() -> None:
        with open(fifo, "wb", buffering=0) as w:
            w.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + records[0])
            go_on.wait(5)
            w.write(records[1] + records[2])  # two records in one write: both must surface via select

    thread = threading.Thread(target=writer)
    thread.start()
    with PcapPort(1, "f", str(fifo), str(tmp_path / "out.pcap")) as port:  # waits for the writer
        assert collect(port, port.recv, frames[0]) == frames[:1]  # header + 1 record
        assert not ready(port, 0.05) and port.recv() is None and port.readable
        go_on.set()
        assert collect(port, port.recv, frames[2]) == frames[1:]
        thread.join()
        assert ready(port, 1) and port.recv() is None and not port.readable  # writer closed: EOF


def test_pcap_port_errors(tmp_path) -> None:
    with pytest.raises(PortError, match="missing.pcap"):
        PcapPort(1, "p", str(tmp_path / "missing.pcap"), str(tmp_path / "out.pcap"))
    (tmp_path / "bad.pcap").write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))  # pcapng
    with pytest.raises(PortError, match="bad.pcap is not a pcap file"):
        PcapPort(1, "p", str(tmp_path / "bad.pcap"), str(tmp_path / "out.pcap"))
    (tmp_path / "sll.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 113))
    with pytest.raises(PortError, match="linktype 113"):
        PcapPort(1, "p", str(tmp_path / "sll.pcap"), str(tmp_path / "out.pcap"))
    wrpcap(str(tmp_path / "in.pcap"), [Ether(frame("x"))])
    with pytest.raises(PortError, match="nodir"):
        PcapPort(1, "p", str(tmp_path / "in.pcap"), str(tmp_path / "nodir" / "out.pcap"))


# --- argument parsing and open_port ---------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("1@veth0", (1, "veth0")), ("0@eth0", (0, "eth0")), ("510@x", (510, "x")),
    ("2@pcap:/tmp/sw", (2, "pcap:/tmp/sw")),
])
def test_parse_interface_arg(text: str, expected: tuple[int, str]) -> None:
    assert parse_interface_arg(text) == expected


@pytest.mark.parametrize("text, message", [
    ("veth0", "expected PORT@IFACE"), ("1@", "expected PORT@IFACE"), ("", "expected PORT@IFACE"),
    ("@veth0", "not an integer"), ("x@veth0", "not an integer"), ("1.5@veth0", "not an integer"),
    ("-1@veth0", r"0\.\.510"), ("511@veth0", "drop port"), ("4096@veth0", r"0\.\.510"),
])
def test_parse_interface_arg_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_interface_arg(text)


def test_open_port(tmp_path) -> None:
    with open_port(1, "mem:m1") as port:
        assert isinstance(port, MemoryPort) and (port.number, port.name) == (1, "m1")
    wrpcap(str(tmp_path / "sw_in.pcap"), [Ether(frame("o"))])
    with open_port(2, f"pcap:{tmp_path}/sw") as port:
        assert isinstance(port, PcapPort) and port.recv() == frame("o")
    assert (tmp_path / "sw_out.pcap").stat().st_size == 24  # just the global header
    with pytest.raises(ValueError, match="unknown port mode"):
        open_port(1, "veth0", "tap")


# --- RawSocketPort --------------------------------------------------------------------------


def test_raw_port_missing_interface() -> None:
    with pytest.raises(PortError, match="'p4t-no-such-if' does not exist"):
        RawSocketPort(1, "p4t-no-such-if")
    with pytest.raises(PortError, match="p4t-no-such-if"):
        open_port(1, "p4t-no-such-if")


def test_raw_port_without_privileges(monkeypatch) -> None:
    def refuse(*args: object) -> socket.socket:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ports.socket, "socket", refuse)
    with pytest.raises(PortError, match="'lo'.*needs root"):
        RawSocketPort(1, "lo")


@dataclass
class Veth:
    netns: str
    a: str
    b: str

    def inside(self) -> AbstractContextManager[None]:
        """Run the block in the netns; sockets opened there stay bound to it afterwards."""
        return entered(self.netns)

    def ip(self, *args: str) -> str:
        return netns.ip(*args, netns=self.netns)

    def promiscuity(self, iface: str) -> int:
        """The kernel's promiscuity count (``ip link``'s flags show only a user-set PROMISC)."""
        return int(self.ip("-d", "-o", "link", "show", "dev", iface).split(" promiscuity ", 1)[1].split()[0])

    def peer_socket(self, iface: str = "") -> socket.socket:
        """A plain AF_PACKET socket on end b (or ``iface``) that does not see its own sends."""
        with self.inside():
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            sock.setsockopt(ports.SOL_PACKET, ports.PACKET_IGNORE_OUTGOING, 1)
            sock.bind((iface or self.b, ports.ETH_P_ALL))
        return sock

    def port(self) -> RawSocketPort:
        with self.inside():
            return RawSocketPort(1, self.a)


@pytest.fixture
def veth() -> Iterator[Veth]:
    """A veth pair (both ends up, IPv6 off so the kernel stays quiet) in a fresh network namespace."""
    usable, why_not = netns.can_use_netns()
    if not usable:
        pytest.skip(why_not)
    with Sandbox() as box:  # deletes the namespace (and the pair in it) whatever the test did
        ns = box.netns("ports")
        pair = box.veth("pa", "pb", a_netns=ns)
        yield Veth(ns, pair.a, pair.b)


def test_raw_port_round_trip(veth: Veth) -> None:
    with veth.port() as port, veth.peer_socket() as peer:
        out = [frame(f"a->b {i}") for i in range(3)]
        for f in out:
            port.send(f)
        assert collect(peer, lambda: peer.recv(65536), out[-1]) == out
        back = [frame(f"b->a {i}") for i in range(3)]
        for f in back:
            peer.send(f)
        assert collect(port, port.recv, back[-1]) == back  # and none of `out` came back
        assert port.stats["tx_packets"] == 3 and port.stats["tx_bytes"] == sum(map(len, out))
        assert port.stats["rx_packets"] >= 3 and port.stats["tx_errors"] == 0


@pytest.mark.parametrize("kernel_filter", [True, False], ids=["ignore-outgoing", "pkttype-check"])
def test_raw_port_ignores_outgoing_frames(veth: Veth, kernel_filter: bool) -> None:
    # The kernel never loops a packet socket's own sends back to it; the outgoing frames a port
    # must ignore are those others send on its interface (the kernel's ARP, other programs).
    with veth.port() as port, veth.peer_socket() as peer, veth.peer_socket(veth.a) as other:
        if not kernel_filter:  # as on kernels < 4.20: only the PACKET_OUTGOING check in recv() remains
            port._sock.setsockopt(ports.SOL_PACKET, ports.PACKET_IGNORE_OUTGOING, 0)
        own, stranger, fence = frame("own"), frame("stranger"), frame("fence")
        port.send(own)
        other.send(stranger)
        assert collect(peer, lambda: peer.recv(65536), stranger) == [own, stranger]
        peer.send(fence)  # queued behind any echo of `own` or `stranger`
        assert collect(port, port.recv, fence) == [fence]


def test_raw_port_is_promiscuous(veth: Veth) -> None:
    assert veth.promiscuity(veth.a) == 0
    with veth.port() as port, veth.peer_socket() as peer:
        assert veth.promiscuity(veth.a) == 1
        foreign = frame("foreign", dst="02:de:ad:be:ef:00")
        peer.send(foreign)
        assert collect(port, port.recv, foreign) == [foreign]
    assert veth.promiscuity(veth.a) == 0


def test_raw_port_keeps_vlan_tags(veth: Veth) -> None:
    with veth.port() as port, veth.peer_socket() as peer:
        tagged = frame("tagged", vlan=5)
        peer.send(tagged)
        assert collect(port, port.recv, tagged) == [tagged]  # the kernel strips it; recv() restores it


def test_raw_port_survives_transient_errors(veth: Veth) -> None:
    with veth.port() as port, veth.peer_socket() as peer:
        port.send(frame("huge") + bytes(3000))  # EMSGSIZE: beyond the 1500-byte MTU
        port.send(b"\x01" * 5)  # EINVAL: shorter than an Ethernet header
        veth.ip("link", "set", veth.a, "down")
        port.send(frame("down"))  # ENETDOWN
        assert port.recv() is None  # the socket reports ENETDOWN once; recv() swallows it
        assert port.stats["tx_errors"] == 3 and port.stats["tx_packets"] == 0
        veth.ip("link", "set", veth.a, "up")
        again = frame("again")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the link takes a moment to regain carrier
            peer.send(again)
            if ready(port, 0.2) and port.recv() == again:
                break
        else:
            pytest.fail("port did not receive after the link came back up")


# ---------------------------------------------------------------------------- batched ports (portio)
REGISTER64 = Path(__file__).resolve().parent / "p4" / "register64.p4"  # answers on port 1


def _pump_until(batched: BatchedPorts, native, peer: socket.socket | None, count: int,
                timeout: float = 5.0) -> tuple[list[bytes], list[tuple[int, bytes]]]:
    """Serve the port until ``count`` frames reached the peer (or, without a peer, were punted)."""
    got: list[bytes] = []
    punted: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(got if peer is not None else punted) < count and time.monotonic() < deadline:
        if batched.wait(50):
            punted += batched.pump(native)
        while peer is not None and ready(peer, 0):
            got.append(peer.recv(65536))
    return got, punted


def test_batched_ports_run_the_native_pipeline(veth: Veth) -> None:
    """Frames in by recvmmsg, through the native pipeline, out by sendmmsg: the bytes the Python
    executor gives, and the port's counters."""
    fast, python = Switch.from_file(REGISTER64), Switch(load_program(REGISTER64), use_native=False)
    assert fast.native is not None, fast.native_status
    with veth.port() as port, veth.peer_socket() as peer:
        batched = BatchedPorts([port])
        try:
            sent = [frame(f"batch {i}") + bytes(300) for i in range(100)]
            for f in sent:
                peer.send(f)
            want = [o.data for f in sent for o in python.process(1, f)]
            got, punted = _pump_until(batched, fast.native, peer, len(want))
            assert got == want and punted == []
            batched.collect()
            assert port.stats["rx_packets"] == len(sent) and port.stats["tx_packets"] == len(want)
            assert port.stats["tx_bytes"] == sum(map(len, want))
        finally:
            batched.close()


TO_PORT_9 = """#include <core.p4>
#include <v1model.p4>
struct h_t { }
struct m_t { }
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t sm) { state start { transition accept; } }
control N(inout h_t h, inout m_t m) { apply { } }
control I(inout h_t h, inout m_t m, inout standard_metadata_t sm) { apply { sm.egress_spec = 9; } }
control E(inout h_t h, inout m_t m, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in h_t h) { apply { } }
V1Switch(P(), N(), I(), E(), N(), D()) main;
"""


@pytest.mark.parametrize("kernel_filter", [True, False], ids=["ignore-outgoing", "pkttype-check"])
def test_batched_ports_keep_vlan_tags_skip_outgoing_and_punt(veth: Veth, kernel_filter: bool, tmp_path: Path) -> None:
    """Every frame goes to port 9, which the batches do not own: it comes back to Python as it
    left the pipeline.  A tagged frame reaches the pipeline with its tag; a frame another
    program sends out of the interface does not reach it at all."""
    program = tmp_path / "to_port_9.p4"
    program.write_text(TO_PORT_9)
    fast, python = Switch.from_file(program), Switch(load_program(program), use_native=False)
    assert fast.native is not None, fast.native_status
    with veth.inside():
        port = RawSocketPort(2, veth.a)
    with port, veth.peer_socket() as peer, veth.peer_socket(veth.a) as other:
        if not kernel_filter:
            port._sock.setsockopt(ports.SOL_PACKET, ports.PACKET_IGNORE_OUTGOING, 0)
        batched = BatchedPorts([port])
        try:
            tagged, stranger, fence = frame("tagged", vlan=5) + bytes(300), frame("stranger"), frame("fence")
            other.send(stranger)
            peer.send(tagged)
            peer.send(fence)
            want = [(o.port, o.data) for f in (tagged, fence) for o in python.process(2, f)]
            assert [p for p, _ in want] == [9, 9] and want[0][1] == tagged
            _, punted = _pump_until(batched, fast.native, None, len(want))
            assert punted == want
        finally:
            batched.close()


def test_port_status_follows_the_link() -> None:
    """The switch's end (in this namespace, where the switch runs) goes down when the far end
    (in a namespace of its own, as a Mininet host's) does, and up again."""
    usable, why_not = netns.can_use_netns()
    if not usable:
        pytest.skip(why_not)
    with Sandbox() as box:
        far_ns = box.netns("status")
        mine, far = netns.unique_name("sa"), netns.unique_name("sb")
        box.links.append((mine, None))  # deleted with the sandbox
        netns.add_veth(mine, far, None, far_ns)
        netns.link_up(mine)
        netns.link_up(far, far_ns)
        seen: queue.Queue[tuple[int, bool, str]] = queue.Queue()
        stop = threading.Event()
        watcher = threading.Thread(target=watch_ports, args=({7: mine}, lambda *r: seen.put(r), stop, 0.02))
        watcher.start()
        try:
            assert seen.get(timeout=2) == (7, True, mine)
            netns.ip("link", "set", far, "down", netns=far_ns)
            assert seen.get(timeout=2) == (7, False, mine)
            netns.ip("link", "set", far, "up", netns=far_ns)
            assert seen.get(timeout=2) == (7, True, mine)
        finally:
            stop.set()
            watcher.join()
    assert not is_up("no-such-interface")
