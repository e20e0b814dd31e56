"""Datagrams in batches: a window of packets leaves in one syscall, results come in dozens at a time.

Sends use UDP GSO (the ``UDP_SEGMENT`` socket option): one buffer of k equal packets leaves as
k datagrams, cut by the kernel (in software where the device cannot, as on bmv2-env's veths,
whose TX checksum offload is off, so the switch's ports see wire-size frames).  Where GSO is
refused (an old kernel, or a route whose device can neither segment nor checksum) the socket
falls back to ``sendmmsg``.  Receives use ``recvmmsg``, up to ``RECEIVE_BATCH`` datagrams per call.
Both go through ctypes, which releases the GIL for the syscall.  ``syscalls`` counts them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

import numpy as np

SOL_UDP = 17
UDP_SEGMENT = 103  # Linux >= 4.18; not in Python's socket module
BATCH = 64  # datagrams per send: the kernel takes at most 64 segments in one GSO send (UDP_MAX_SEGMENTS)
RECEIVE_BATCH = 256  # datagrams per recvmmsg
MAX_DATAGRAM = 65507  # IPv4 UDP
MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20
_GSO_REFUSED = {errno.EIO, errno.EINVAL, errno.ENOPROTOOPT, errno.EOPNOTSUPP}
_LOST = {errno.EAGAIN, errno.ENOBUFS, errno.ENOMEM}  # a full send buffer: the caller's timers resend


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_Iovec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t), ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


class _SockaddrIn(ctypes.Structure):
    _fields_ = [("sin_family", ctypes.c_ushort), ("sin_port", ctypes.c_uint16), ("sin_addr", ctypes.c_uint8 * 4),
                ("sin_zero", ctypes.c_uint8 * 8)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]


class BatchSocket:
    """A non-blocking UDP socket that sends (k, size) arrays of packets to one address and receives
    into a reusable (RECEIVE_BATCH, slot) array."""

    def __init__(self, sock: socket.socket, packet_bytes: int, destination: tuple[str, int]) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.packet_bytes = packet_bytes
        self.destination = destination
        self.per_send = max(1, min(BATCH, MAX_DATAGRAM // packet_bytes))
        self.syscalls = 0
        # INA_UDP_GSO=0 sends with sendmmsg: netfilter sees a GSO send as one packet, so loss emulated
        # with nftables (bmv2-env) would drop whole windows, where a real wire loses single frames
        self.gso = os.environ.get("INA_UDP_GSO", "1") != "0"
        if self.gso:
            try:
                sock.setsockopt(SOL_UDP, UDP_SEGMENT, packet_bytes)
            except OSError:
                self.gso = False
        self._addr = _SockaddrIn(socket.AF_INET, socket.htons(destination[1]),
                                 (ctypes.c_uint8 * 4)(*socket.inet_aton(destination[0])))
        # receiving: one slot per datagram, larger than a packet so that an oversized datagram shows
        self.slot = packet_bytes + 64
        self.inbox = np.zeros((RECEIVE_BATCH, self.slot), np.uint8)
        self._rx = (_Mmsghdr * RECEIVE_BATCH)()
        self._rx_iov = (_Iovec * RECEIVE_BATCH)()
        base = self.inbox.ctypes.data
        for i in range(RECEIVE_BATCH):
            self._rx_iov[i].iov_base, self._rx_iov[i].iov_len = base + i * self.slot, self.slot
            self._rx[i].msg_hdr.msg_iov = ctypes.pointer(self._rx_iov[i])
            self._rx[i].msg_hdr.msg_iovlen = 1
        fields = np.dtype({"names": ["msg_len"], "formats": [np.uint32], "offsets": [_Mmsghdr.msg_len.offset],
                           "itemsize": ctypes.sizeof(_Mmsghdr)})
        self._rx_len = np.frombuffer(self._rx, dtype=fields)["msg_len"]
        self._tx = (_Mmsghdr * BATCH)()
        self._tx_iov = (_Iovec * BATCH)()
        for i in range(BATCH):
            self._tx[i].msg_hdr.msg_name = ctypes.addressof(self._addr)
            self._tx[i].msg_hdr.msg_namelen = ctypes.sizeof(self._addr)
            self._tx[i].msg_hdr.msg_iov = ctypes.pointer(self._tx_iov[i])
            self._tx[i].msg_hdr.msg_iovlen = 1

    def retarget(self, destination: tuple[str, int]) -> None:
        """Send to ``destination`` from now on (a server's tree moved to another server), in the address every
        prepared message points at."""
        self.destination = destination
        self._addr.sin_port = socket.htons(destination[1])
        self._addr.sin_addr[:] = list(socket.inet_aton(destination[0]))

    def send(self, packets: np.ndarray) -> int:
        """Send the rows of a C-contiguous (k, packet_bytes) uint8 array, in order, until the socket's
        send buffer is full; returns how many went (the caller sends the rest once it is writable)."""
        sent = 0
        while sent < len(packets):
            k = min(self.per_send, len(packets) - sent)
            part = packets[sent:sent + k]
            done = self._send_gso(part) if self.gso else self._send_mmsg(part)
            if done <= 0:
                break
            sent += done
        return sent

    def _send_gso(self, part: np.ndarray) -> int:
        self.syscalls += 1
        try:
            self.sock.sendto(part.data, self.destination)
        except OSError as e:
            if e.errno in _GSO_REFUSED:  # the socket's segment size applies to every send: off with it
                self.gso = False
                self.sock.setsockopt(SOL_UDP, UDP_SEGMENT, 0)
                return self._send_mmsg(part)
            if e.errno in _LOST:
                return 0
            raise
        return len(part)

    def _send_mmsg(self, part: np.ndarray) -> int:
        base, size = part.ctypes.data, part.shape[1]
        for i in range(len(part)):
            self._tx_iov[i].iov_base, self._tx_iov[i].iov_len = base + i * size, size
        self.syscalls += 1
        n = _libc.sendmmsg(self.fd, ctypes.addressof(self._tx), len(part), MSG_DONTWAIT)
        if n < 0:
            err = ctypes.get_errno()
            if err in _LOST:
                return 0
            raise OSError(err, os.strerror(err))
        return n

    def receive(self) -> tuple[np.ndarray, np.ndarray]:
        """The datagrams waiting now (at most RECEIVE_BATCH): (rows of ``inbox``, their lengths).  A datagram
        longer than a slot shows with a length above ``packet_bytes``; none waiting gives 0 rows."""
        self.syscalls += 1
        n = _libc.recvmmsg(self.fd, ctypes.addressof(self._rx), RECEIVE_BATCH, MSG_DONTWAIT | MSG_TRUNC, None)
        if n < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EINTR):
                return self.inbox[:0], self._rx_len[:0]
            raise OSError(err, os.strerror(err))
        return self.inbox[:n], self._rx_len[:n].copy()
