"""An aggregation server's UDP sockets served in batches by C (udpio.c) through a native pipeline.

Where raw ports (portio.py) take whole frames, a server takes datagrams on an L3 socket with the
kernel's batching: recvmmsg with UDP_GRO on the way in, sendmmsg with UDP_SEGMENT (GSO) on the way
out.  The C writes the Ethernet/IPv4/UDP header the program parses in front of each datagram, as if
it arrived on the server's one port (``INGRESS_PORT``), and sends each output to the IPv4/UDP
destination the program deparsed.  Several sockets (one per thread) share the address with
SO_REUSEPORT; a classic BPF program steers each datagram by a 16-bit field of its payload, so
a flow keyed by that field (a tree's job id) stays on one thread.
"""

from __future__ import annotations

import ctypes
import logging
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .cbuild import build
from .executor.native import NativeFork, NativePipeline

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("udpio.c")
INGRESS_PORT = 1  # the port every datagram arrives on, as the controller's entries for a server say
SERVE_MS = 20  # a thread serves its socket this long at most before it lets a table swap in
IDLE_MS = 1  # ... and returns sooner once no datagram came for this long
RECEIVE_BUFFER = 16 << 20  # bytes; the kernel caps it at net.core.rmem_max
SEND_BUFFER = 16 << 20  # bytes (net.core.wmem_max caps it): a batch's results in flight, not EAGAIN and lost
STATS_EVERY = 0.1  # seconds between two updates of the Python counters
SOL_UDP = 17
UDP_GRO = 104  # Linux >= 5.0; not in Python's socket module
_P = ctypes.c_void_p


def parse_address(text: str) -> tuple[str, int]:
    """``IP:PORT`` as (ip, port), or a ValueError that says what is wrong with it."""
    ip, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--udp {text!r}: give IP:PORT, the port 1..65535")
    try:
        socket.inet_aton(ip)
    except OSError:
        raise ValueError(f"--udp {text!r}: {ip!r} is not an IPv4 address") from None
    return ip, int(port)


def _library() -> ctypes.CDLL:
    lib = build(SOURCE.read_text())
    for name, restype in (("p4udp_new", _P), ("p4udp_stats", _P), ("p4udp_stat_names", ctypes.c_char_p),
                          ("p4udp_wire_header", ctypes.c_long), ("p4udp_serve", ctypes.c_long)):
        getattr(lib, name).restype = restype
    lib.p4udp_new.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint16, ctypes.c_int]
    return lib


class UdpSocket:
    """One thread's socket at the server's address, and its batches in C: ``wait`` without a lock,
    ``pump`` holding the lock that keeps table swaps out."""

    def __init__(self, address: tuple[str, int], reuse_port: bool = False) -> None:
        self.lib = lib = _library()
        self.stat_names = tuple(lib.p4udp_stat_names().decode().split(","))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if reuse_port:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            self.sock.bind(address)
            try:
                self.sock.setsockopt(SOL_UDP, UDP_GRO, 1)
            except OSError as e:  # an old kernel: datagrams come one by one
                log.info("no UDP_GRO on this kernel (%s): datagrams are received one at a time", e)
            ip, port = self.sock.getsockname()
            self.io = lib.p4udp_new(self.sock.fileno(), INGRESS_PORT,
                                    int.from_bytes(socket.inet_aton(ip), "little"), socket.htons(port), 1)
            if not self.io:
                raise MemoryError("cannot allocate the UDP batches")
        except BaseException:
            self.sock.close()
            raise
        self.address: tuple[str, int] = (ip, port)
        self._counts = (ctypes.c_int64 * len(self.stat_names)).from_address(lib.p4udp_stats(_P(self.io)))
        self.stats: Counter[str] = Counter()
        self._bound: NativePipeline | NativeFork | None = None
        self._collected = 0.0
        self._dead_logged = False

    def close(self) -> None:
        io, self.io = self.io, None
        if io:
            self.collect()
            self.lib.p4udp_free(_P(io))
        self.sock.close()

    def steer(self, field: tuple[int, int], sockets: int) -> None:
        """Send each datagram of the address's group to socket (the big-endian field at (offset, bytes) of
        its UDP payload) mod ``sockets``, in the order they were bound."""
        offset, size = field
        err = self.lib.p4udp_steer(self.sock.fileno(), offset, size, sockets)
        if err:
            raise OSError(-err, f"cannot steer the UDP sockets by payload byte {offset}: SO_ATTACH_REUSEPORT_CBPF")

    def wait(self, timeout_ms: int) -> bool:
        """Whether datagrams are waiting; False after ``timeout_ms``."""
        return self.lib.p4udp_wait(_P(self.io), timeout_ms) > 0

    def pump(self, native: NativePipeline | NativeFork) -> int:
        """Serve what arrives through ``native`` (its tables in sync, held still by the caller) until it stops
        coming (``IDLE_MS``) or for ``SERVE_MS`` at most; returns the segments run."""
        if native is not self._bound:
            self.lib.p4udp_bind(_P(self.io), *(_P(x) for x in native.io_binding()))
            self._bound = native
        n = self.lib.p4udp_serve(_P(self.io), SERVE_MS, IDLE_MS)
        if (now := time.monotonic()) - self._collected > STATS_EVERY:
            self._collected = now
            self.collect()
        return n

    def collect(self) -> None:
        """Add the C's counts to ``stats``; log once if the socket died."""
        for k, key in enumerate(self.stat_names):
            if self._counts[k]:
                self.stats[key] += self._counts[k]
                self._counts[k] = 0
        if not self._dead_logged and self.io and self.lib.p4udp_dead(_P(self.io)):
            self._dead_logged = True
            log.warning("UDP socket %s:%d: an I/O error; no longer served", *self.address)

    @property
    def wire_header(self) -> int:
        """Bytes of the Ethernet/IPv4/UDP header written in front of each datagram."""
        return int(self.lib.p4udp_wire_header())

    @property
    def gso(self) -> bool:
        return bool(self.io) and bool(self.lib.p4udp_gso(_P(self.io)))


def steering_field(declarations: Any, name: str) -> tuple[int, int]:
    """(offset, bytes) in a UDP payload of ``HEADER_TYPE.FIELD`` (say ``ina_t.job_id``), read from the program's
    declarations: the payload starts with that header, and the field is 1, 2 or 4 whole bytes."""
    type_name, _, field = name.partition(".")
    header = declarations.types.get(type_name)
    fields = getattr(header, "fields", None)
    if not isinstance(fields, dict) or field not in fields:
        raise ValueError(f"--steer {name}: the program declares no header type {type_name!r} with a field {field!r}")
    bits = 0
    for f, t in fields.items():
        if f == field:
            break
        bits += t.width
    width = fields[field].width
    if bits % 8 or width not in (8, 16, 32):
        raise ValueError(f"--steer {name}: the field must be 1, 2 or 4 whole bytes (it is {width} bits at bit {bits})")
    return bits // 8, width // 8


def open_sockets(address: tuple[str, int], count: int, steer: tuple[int, int] | None) -> list[UdpSocket]:
    """``count`` sockets at ``address`` (one per thread); with several, steered by the payload field ``steer``
    (offset, bytes) (required: without it the kernel spreads by sender, and a flow's packets would meet on
    several threads)."""
    if count < 1:
        raise ValueError(f"--threads {count}: give at least 1")
    if count > 1 and steer is None:
        raise ValueError("several threads need a steering field (--steer HEADER.FIELD): each flow on one thread")
    sockets: list[UdpSocket] = []
    try:
        for _ in range(count):
            sockets.append(UdpSocket(address if not sockets else sockets[0].address, reuse_port=count > 1))
        if count > 1 and steer is not None:
            sockets[0].steer(steer, count)
    except BaseException:
        for s in sockets:
            s.close()
        raise
    return sockets
