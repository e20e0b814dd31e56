"""The worker's batched datagrams (worker/batch_io.py) on real sockets, and what leaves the host.

A GSO send is one buffer of k packets; a switch must see k ordinary frames.  The host end of
a veth (here in a namespace of its own, the switch's end in another) is set up as bmv2-env's
hosts are (``ethtool -K <if> tx off``, bmv2-env/hosts.py), and the frames are read on the
switch's end by the built-in target's raw port: an AF_PACKET socket, which is also what BMv2's
libpcap reads.
"""

from __future__ import annotations

import select
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target import netns
from p4target.netns import Sandbox, entered
from p4target.ports import RawSocketPort
from worker import protocol
from worker.batch_io import BatchSocket

SO_NO_CHECK = 11  # Linux: send UDP without checksums (not in Python's socket module)
HOST_IP, SWITCH_IP, SWITCH_MAC = "10.77.0.1", "10.77.0.254", "02:00:00:00:fe:77"


def packets(count: int, P: protocol.Protocol) -> np.ndarray:
    """``count`` distinct packets of the protocol's size (their bytes, not their meaning, matter here)."""
    rng = np.random.default_rng(count)
    return rng.integers(0, 256, (count, P.packet_bytes), dtype=np.uint8)


@dataclass
class Wire:
    host_ns: str
    host_if: str
    switch_ns: str
    switch_if: str

    def host_socket(self) -> socket.socket:
        with entered(self.host_ns):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((HOST_IP, 0))
        return sock

    def switch_port(self) -> RawSocketPort:
        with entered(self.switch_ns):
            return RawSocketPort(1, self.switch_if)


@pytest.fixture(params=["tx off", "veth default"])
def wire(request: pytest.FixtureRequest) -> Iterator[tuple[Wire, str]]:
    usable, why_not = netns.can_use_netns()
    if not usable:
        pytest.skip(why_not)
    with Sandbox() as box:
        host, switch = box.netns("gsoh"), box.netns("gsos")
        link = box.veth("gh", "gs", a_netns=host, b_netns=switch)
        netns.ip("addr", "add", f"{HOST_IP}/24", "dev", link.a, netns=host)
        netns.ip("neigh", "replace", SWITCH_IP, "lladdr", SWITCH_MAC, "dev", link.a, "nud", "permanent", netns=host)
        if request.param == "tx off":
            subprocess.run(["ip", "netns", "exec", host, "ethtool", "-K", link.a, "tx", "off"], check=True,
                           capture_output=True)
        yield Wire(host, link.a, switch, link.b), request.param


def frames_on(port: RawSocketPort, expect_bytes: int, timeout: float = 3.0) -> list[bytes]:
    """The UDP frames that reach the port until ``expect_bytes`` of them are in (or the timeout)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while sum(len(f) for f in got) < expect_bytes and time.monotonic() < deadline:
        if select.select([port], [], [], 0.1)[0]:
            data = port.recv()
            if data is not None and UDP in Ether(data):
                got.append(data)
    return got


def test_a_gso_window_reaches_the_switch_port_as_wire_size_frames(wire: tuple[Wire, str]) -> None:
    link, setup = wire
    P = protocol.load(256)
    window = packets(40, P)
    with link.switch_port() as port, link.host_socket() as sock:
        io = BatchSocket(sock, P.packet_bytes, (SWITCH_IP, P.INA_UDP_PORT))
        assert io.send(window) == 40
        assert io.gso and io.syscalls == 1  # one sendmsg for the 40
        frames = frames_on(port, 40 * P.frame_bytes)
    if setup == "veth default":
        # why bmv2-env turns TX offloads off: the veth passes the GSO buffer on whole, as one frame
        assert [len(f) for f in frames] == [protocol.ETH_IP_UDP + 40 * P.packet_bytes]
        return
    assert [len(f) for f in frames] == [P.frame_bytes] * 40
    for f, row in zip(frames, window):
        pkt = Ether(f)
        assert pkt[IP].dst == SWITCH_IP and pkt[UDP].dport == P.INA_UDP_PORT and pkt[UDP].len == 8 + P.packet_bytes
        assert bytes(pkt[UDP].payload) == row.tobytes()
        checksum = pkt[UDP].chksum
        del pkt[UDP].chksum
        assert Ether(bytes(pkt))[UDP].chksum == checksum  # complete, not left partial for an offload


@pytest.fixture
def loopback_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # every datagram of a test waits here
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def received(sock: socket.socket, count: int, timeout: float = 3.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        if select.select([sock], [], [], 0.1)[0]:
            got.append(sock.recv(65536))
    return got


def test_a_socket_that_refuses_gso_falls_back_to_sendmmsg(loopback_pair) -> None:
    """A socket without UDP checksums cannot segment (the kernel answers EINVAL): sendmmsg instead."""
    a, b = loopback_pair
    a.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    io = BatchSocket(a, 100, b.getsockname())
    rows = np.arange(150 * 100, dtype=np.uint32).astype(np.uint8).reshape(150, 100)
    assert io.send(rows) == 150
    assert not io.gso
    assert received(b, 150) == [r.tobytes() for r in rows]
    assert io.syscalls == 1 + 3  # the refused GSO send, then 64 + 64 + 22 per sendmmsg


def test_a_window_larger_than_one_gso_send_goes_in_several(loopback_pair) -> None:
    a, b = loopback_pair
    io = BatchSocket(a, 1000, b.getsockname())
    rows = packets(130, protocol.load(246))[:, :1000].copy()
    assert io.send(rows) == 130 and io.gso
    assert io.syscalls == 3  # 64 + 64 + 2
    assert received(b, 130) == [r.tobytes() for r in rows]


def test_receive_takes_what_is_waiting_and_shows_oversized_datagrams(loopback_pair) -> None:
    a, b = loopback_pair
    io = BatchSocket(b, 100, a.getsockname())
    rows, lengths = io.receive()
    assert len(rows) == 0 and len(lengths) == 0  # nothing waiting: no rows, no error
    sent = [bytes([i]) * n for i, n in enumerate([100, 7, 100, 400])]
    for d in sent:
        a.sendto(d, b.getsockname())
    deadline = time.monotonic() + 3
    got_rows, got_lengths = [], []
    while sum(map(len, got_rows)) < 4 and time.monotonic() < deadline:
        rows, lengths = io.receive()
        got_rows.append(rows.copy())
        got_lengths += lengths.tolist()
    rows = np.concatenate(got_rows)
    assert got_lengths == [100, 7, 100, 400]  # the 400-byte one is longer than a slot: its true length shows
    assert rows[0, :100].tobytes() == sent[0] and rows[1, :7].tobytes() == sent[1]
    assert rows[3, :io.slot].tobytes() == sent[3][:io.slot]
