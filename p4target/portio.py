"""Raw ports served in batches by C (portio.c) when the pipeline runs natively.

One ``recvmmsg`` per port takes up to 64 frames, the pipeline runs on each in C, and every
port's outputs leave with one ``sendmmsg``: a few syscalls per batch instead of two per frame,
and no Python object per frame.  Outputs to a port the loop does not own (the CPU port) come
back to Python.  The library is generic (no program in it), built once and cached like the
programs' (cbuild.py).
"""

from __future__ import annotations

import ctypes
import logging
import time
from pathlib import Path

from .cbuild import BuildError, build
from .executor.native import NativePipeline
from .ports import STAT_KEYS, RawSocketPort

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("portio.c")
BUDGET = 1024  # frames per pump: the control plane waits at most this long for the lock
STATS_EVERY = 0.1  # seconds between two updates of the ports' counters (a pump may serve one frame)
_P = ctypes.c_void_p


class BatchedPorts:
    """The raw ports of one dataplane; ``wait`` without the switch's lock, ``pump`` with it."""

    def __init__(self, ports: list[RawSocketPort]) -> None:
        lib = build(SOURCE.read_text())
        for name, restype in (("p4io_new", _P), ("p4io_port_stats", _P), ("p4io_punt_port", _P),
                              ("p4io_punt_off", _P), ("p4io_punt_size", _P), ("p4io_punt_buf", _P)):
            getattr(lib, name).restype = restype
        self.lib = lib
        self.io = lib.p4io_new()
        if not self.io:
            raise MemoryError("cannot allocate the port batches")
        self.ports = ports
        for p in ports:
            if lib.p4io_add_port(_P(self.io), p.fileno(), p.number) != 0:
                raise ValueError(f"port {p.number} cannot be served in batches")
        self._stats = [(ctypes.c_int64 * len(STAT_KEYS)).from_address(lib.p4io_port_stats(_P(self.io), i))
                       for i in range(len(ports))]
        self._dead = [False] * len(ports)
        self._punt_port = (ctypes.c_int32 * 1024).from_address(lib.p4io_punt_port(_P(self.io)))
        self._punt_off = (ctypes.c_int64 * 1024).from_address(lib.p4io_punt_off(_P(self.io)))
        self._punt_size = (ctypes.c_int64 * 1024).from_address(lib.p4io_punt_size(_P(self.io)))
        self._punt_buf = lib.p4io_punt_buf(_P(self.io))
        self._bound: NativePipeline | None = None
        self._collected = 0.0

    @staticmethod
    def available(ports: list) -> BatchedPorts | None:
        """Batches for these ports, or None if they are not all raw interfaces or the library
        cannot be built (the dataplane then serves them one frame at a time)."""
        if not ports or not all(isinstance(p, RawSocketPort) for p in ports):
            return None
        try:
            return BatchedPorts(ports)
        except (BuildError, ValueError, MemoryError) as e:
            log.warning("ports served one frame at a time: %s", e)
            return None

    def close(self) -> None:
        if self.io:
            self.collect()
        io, self.io = self.io, None
        if io:
            self.lib.p4io_free(_P(io))

    def wait(self, timeout_ms: int) -> bool:
        """Whether a port has frames; False after ``timeout_ms``."""
        return self.lib.p4io_wait(_P(self.io), timeout_ms) > 0

    def pump(self, native: NativePipeline) -> list[tuple[int, bytes]]:
        """Serve what has arrived through ``native`` (the caller holds the switch's lock);
        returns the outputs for ports this loop does not own, as (port, frame)."""
        if native is not self._bound:
            self.lib.p4io_bind(_P(self.io), *(_P(x) for x in native.io_binding()))
            self._bound = native
        native.sync_if_dirty()
        self.lib.p4io_pump(_P(self.io), BUDGET)
        if (now := time.monotonic()) - self._collected > STATS_EVERY:
            self._collected = now
            self.collect()
        n = self.lib.p4io_n_punt(_P(self.io))
        return [(self._punt_port[i], ctypes.string_at(self._punt_buf + self._punt_off[i], self._punt_size[i]))
                for i in range(n)]

    def collect(self) -> None:
        """Add the C's per-port counts to the ports' ``stats`` and note ports that died."""
        for i, (port, counts) in enumerate(zip(self.ports, self._stats)):
            for k, key in enumerate(STAT_KEYS):
                if counts[k]:
                    port.stats[key] += counts[k]
                    counts[k] = 0
            if not self._dead[i] and self.lib.p4io_port_dead(_P(self.io), i):
                self._dead[i] = True
                log.warning("port %d (%s): an I/O error; no longer served", port.number, port.name)
