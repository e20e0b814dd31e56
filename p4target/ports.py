"""The switch's port I/O: raw Linux interfaces, pcap files and in-memory ports.

Every port is a non-blocking frame pipe with a ``fileno()`` for ``select``, so the switch
can serve all of them from one loop.  Ports are named like simple_switch's ``-i N@iface``:
``iface`` is a Linux interface, ``pcap:<prefix>`` (``<prefix>_in.pcap`` / ``_out.pcap``,
as with ``--use-files``) or ``mem:<name>`` (tests without root).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from pathlib import Path

MAX_FRAME = 65536  # largest frame we receive; GSO super-frames on veth can approach this
MAX_PORT = 510  # 511 is v1model's drop port
ETH_P_ALL = 0x0003
SOL_PACKET = 263  # these two are not exported by Python 3.11's socket module
SO_RCVBUFFORCE = 33  # SO_RCVBUF beyond net.core.rmem_max, for root
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_AUXDATA = 8
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20
PACKET_OUTGOING = 4
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
LINKTYPE_ETHERNET = 1
STAT_KEYS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_errors")
# Errors that cost one frame, not the switch: a full queue, a link that is down, a frame the
# link cannot carry (too long or shorter than an Ethernet header), an interface gone away.
_DROP_ERRNOS = {errno.EAGAIN, errno.ENOBUFS, errno.ENOMEM, errno.ENETDOWN, errno.EMSGSIZE, errno.EINVAL,
                errno.ENXIO, errno.ENODEV}
_PCAP_ENDIAN = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}


def pcap_file_header() -> bytes:
    """A little-endian, microsecond pcap global header for Ethernet frames."""
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_FRAME, LINKTYPE_ETHERNET)


def pcap_record(data: bytes) -> bytes:
    """One frame as a pcap record stamped now (matching pcap_file_header)."""
    sec, nsec = divmod(time.time_ns(), 1_000_000_000)
    return struct.pack("<IIII", sec, nsec // 1000, len(data), len(data)) + data


def read_pcap(path: Path) -> list[bytes]:
    """All frames of a complete pcap file, in either byte order (an empty or missing file: none)."""
    data = path.read_bytes() if path.exists() else b""
    endian = _PCAP_ENDIAN.get(data[:4])
    if endian is None or len(data) < 24:
        return []
    packets, offset = [], 24
    while offset + 16 <= len(data):
        incl_len = struct.unpack_from(endian + "I", data, offset + 8)[0]
        packets.append(data[offset + 16: offset + 16 + incl_len])
        offset += 16 + incl_len
    return packets


_MSG_TRUNC = int(socket.MSG_TRUNC)  # a plain int: IntFlag's & costs 25x more per packet


class PortError(Exception):
    """A port that cannot be opened or read, with the interface or file it is about."""


class Port(ABC):
    """One switch port: a non-blocking frame source and sink that can sit in a selector.

    ``readable`` turns False once the port can deliver no more frames (a finished pcap
    file); the switch should then stop selecting on it.
    """

    def __init__(self, number: int, name: str) -> None:
        self.number = number
        self.name = name
        self.readable = True
        self.stats: dict[str, int] = dict.fromkeys(STAT_KEYS, 0)

    @abstractmethod
    def fileno(self) -> int: ...

    @abstractmethod
    def recv(self) -> bytes | None:
        """One received frame, or None if nothing is ready or the frame is to be ignored."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Transmit one frame; a frame lost to a transient error is counted in tx_errors."""

    @abstractmethod
    def close(self) -> None: ...

    def _count(self, direction: str, data: bytes) -> None:
        stats = self.stats
        if direction == "rx":
            stats["rx_packets"] += 1
            stats["rx_bytes"] += len(data)
        else:
            stats["tx_packets"] += 1
            stats["tx_bytes"] += len(data)

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.number}, {self.name!r})"


class RawSocketPort(Port):
    """A Linux interface through an AF_PACKET socket, like BMv2's libpcap ports."""

    def __init__(self, number: int, iface: str) -> None:
        super().__init__(number, iface)
        try:
            ifindex = socket.if_nametoindex(iface)
        except (OSError, ValueError) as e:
            raise PortError(f"interface {iface!r} does not exist") from e
        try:
            # Protocol 0 receives nothing until bind(), so no frame of another interface sneaks in.
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as e:
            raise PortError(f"cannot open a raw socket for {iface!r}: {e.strerror} (needs root or CAP_NET_RAW)") from e
        try:
            sock.setblocking(False)
            try:  # a deep buffer absorbs bursts while the (slow, Python) pipeline runs
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            try:  # frames others send out of this interface (kernel ARP, other programs) are not input
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # older kernel: recv() still drops PACKET_OUTGOING frames
            # The kernel strips VLAN tags into metadata; auxdata lets recv() put them back.
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            sock.bind((iface, ETH_P_ALL))
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)  # promiscuous; undone on close
        except OSError as e:
            sock.close()
            raise PortError(f"cannot open interface {iface!r}: {e.strerror or e}") from e
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv(self) -> bytes | None:
        try:
            data, ancdata, flags, addr = self._sock.recvmsg(MAX_FRAME, socket.CMSG_SPACE(20))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:  # e.g. ENETDOWN, reported once when the link goes down
            if e.errno in _DROP_ERRNOS:
                return None
            raise
        if addr[2] == PACKET_OUTGOING or flags & _MSG_TRUNC:
            return None
        data = _restore_vlan_tag(data, ancdata)
        self._count("rx", data)
        return data

    def send(self, data: bytes) -> None:
        try:
            self._sock.send(data)
        except OSError as e:
            if e.errno not in _DROP_ERRNOS:
                raise
            self.stats["tx_errors"] += 1
            return
        self._count("tx", data)

    def close(self) -> None:
        self.readable = False
        self._sock.close()


def _restore_vlan_tag(data: bytes, ancdata: list[tuple[int, int, bytes]]) -> bytes:
    """Re-insert the 802.1Q tag the kernel moved into PACKET_AUXDATA (as libpcap does)."""
    for level, kind, aux in ancdata:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(aux) >= 20:
            status, _len, _snaplen, _mac, _net, tci, tpid = struct.unpack_from("IIIHHHH", aux)
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


class PcapPort(Port):
    """Frames from a pcap file or FIFO in, frames written to a new pcap file out.

    Opening a FIFO waits for its writer and its global header, as simple_switch does, so
    end of file means the writer is done.  After that the input is read without blocking and
    never beyond the current record, so ``select`` on a FIFO stays truthful.
    """

    def __init__(self, number: int, name: str, in_path: str, out_path: str) -> None:
        super().__init__(number, name)
        self._buf = bytearray()
        try:
            self._in = os.open(in_path, os.O_RDONLY)
        except OSError as e:
            raise PortError(f"port {name!r}: {e}") from e
        try:
            self._endian = self._read_global_header(in_path)
            os.set_blocking(self._in, False)
            self._out = open(out_path, "wb")  # owned by the port, closed in close()
            self._out.write(pcap_file_header())
            self._out.flush()
        except (OSError, PortError) as e:
            os.close(self._in)
            if isinstance(e, PortError):
                raise
            raise PortError(f"port {name!r}: {e}") from e

    def _read_global_header(self, path: str) -> str:
        """Check the (blocking) input's pcap header and return its byte order for struct."""
        header = b""
        while len(header) < 24 and (chunk := os.read(self._in, 24 - len(header))):
            header += chunk
        endian = _PCAP_ENDIAN.get(header[:4])
        if endian is None or len(header) < 24:
            raise PortError(f"port {self.name!r}: {path} is not a pcap file (pcapng is not supported)")
        linktype = struct.unpack_from(endian + "I", header, 20)[0] & 0xFFFF
        if linktype != LINKTYPE_ETHERNET:
            raise PortError(f"port {self.name!r}: {path} has linktype {linktype}, not Ethernet")
        return endian

    def fileno(self) -> int:
        return self._in

    def _wanted(self) -> int:
        """How many buffered bytes complete the current record."""
        if len(self._buf) < 16:
            return 16
        length = struct.unpack_from(self._endian + "I", self._buf, 8)[0]
        if length > 4 * MAX_FRAME:
            raise PortError(f"port {self.name!r}: corrupt pcap input (record of {length} bytes)")
        return 16 + length

    def recv(self) -> bytes | None:
        while self.readable and len(self._buf) < (wanted := self._wanted()):
            try:
                chunk = os.read(self._in, wanted - len(self._buf))
            except BlockingIOError:
                return None
            if not chunk:
                self.readable = False  # a partial trailing record is dropped
            self._buf += chunk
        if not self.readable or len(self._buf) < wanted:
            return None
        frame = bytes(self._buf[16:wanted])
        self._buf.clear()
        if not frame:
            return None
        self._count("rx", frame)
        return frame

    def send(self, data: bytes) -> None:
        try:
            self._out.write(pcap_record(data))
            self._out.flush()
        except OSError:
            self.stats["tx_errors"] += 1
            return
        self._count("tx", data)

    def close(self) -> None:
        if self._in >= 0:
            os.close(self._in)
            self._in = -1
        self.readable = False
        self._out.close()


class MemoryPort(Port):
    """An in-memory port for tests: ``inject`` frames in, read ``sent`` frames out.

    A pipe makes it selectable; it holds a byte exactly while frames are queued.
    """

    def __init__(self, number: int, name: str = "") -> None:
        super().__init__(number, name or f"mem{number}")
        self.sent: list[bytes] = []
        self._queue: deque[bytes] = deque()
        self._cond = threading.Condition()
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)

    def fileno(self) -> int:
        return self._rfd

    def inject(self, data: bytes) -> None:
        """Queue a frame for the switch to receive on this port."""
        with self._cond:
            self._queue.append(bytes(data))
            if len(self._queue) == 1:
                os.write(self._wfd, b"!")

    def recv(self) -> bytes | None:
        with self._cond:
            if not self._queue:
                return None
            data = self._queue.popleft()
            if not self._queue:
                os.read(self._rfd, 1)
            self._count("rx", data)
            return data

    def send(self, data: bytes) -> None:
        with self._cond:
            self.sent.append(bytes(data))
            self._count("tx", data)
            self._cond.notify_all()

    def wait_sent(self, count: int, timeout: float = 1.0) -> list[bytes]:
        """All frames sent so far, once there are ``count`` of them or ``timeout`` passed."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.sent) >= count, timeout)
            return list(self.sent)

    def close(self) -> None:
        self.readable = False
        with self._cond:
            for fd in (self._rfd, self._wfd):
                if fd >= 0:
                    os.close(fd)
            self._rfd = self._wfd = -1


def parse_interface_arg(text: str) -> tuple[int, str]:
    """Parse simple_switch's ``-i N@iface``: ``"1@veth0"`` -> ``(1, "veth0")``."""
    number_text, at, iface = text.partition("@")
    if not at or not iface:
        raise ValueError(f"bad interface {text!r}: expected PORT@IFACE, e.g. 1@veth0")
    try:
        number = int(number_text)
    except ValueError:
        raise ValueError(f"bad interface {text!r}: port {number_text!r} is not an integer") from None
    if not 0 <= number <= MAX_PORT:
        raise ValueError(f"bad interface {text!r}: port must be 0..{MAX_PORT} (511 is the drop port)")
    return number, iface


def open_port(number: int, iface: str, mode: str = "raw") -> Port:
    """Open a port: a ``pcap:``/``mem:`` prefix picks its kind, else ``mode`` does.

    ``mode`` is "raw" (a Linux interface), "pcap" (``<iface>_in.pcap``/``<iface>_out.pcap``,
    like simple_switch ``--use-files``) or "mem".
    """
    for kind in ("pcap", "mem"):
        if iface.startswith(kind + ":"):
            mode, iface = kind, iface[len(kind) + 1:]
    if not iface:
        raise ValueError(f"port {number}: empty interface name")
    if mode == "raw":
        return RawSocketPort(number, iface)
    if mode == "pcap":
        return PcapPort(number, iface, f"{iface}_in.pcap", f"{iface}_out.pcap")
    if mode == "mem":
        return MemoryPort(number, iface)
    raise ValueError(f"unknown port mode {mode!r}: expected raw, pcap or mem")
