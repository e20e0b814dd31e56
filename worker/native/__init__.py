"""The worker's protocol core in C (core.c), with the socket loop that runs a whole call without the GIL
(run.c): what every packet touches, at a host's rates.

``worker.engine`` stays the reference: the C mirrors it function for function, and a differential test
(tests/test_native_core.py) hands both the same datagrams at the same times and checks they send the same
datagrams, name the same deadlines and write the same sums.  ``NativeTree`` and ``NativeCall`` have the
engine's ``Tree`` and ``TreeCall`` interface, so ``Worker`` and the virtual fabric take either core
(``core()``).  The C is compiled on first use with the system compiler and cached (as the built-in
switch's is); with no compiler, or ``INA_NATIVE=0``, the worker runs the reference core, and says so once.

The structures are declared once, in core.h, which cffi reads: the per-packet arrays are numpy's, lent to
C, and the call's scalars live in C structures that Python reads by name.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from worker import engine, quantize
from worker.engine import Echo, Outbox, Pacer, Stats, TreeConfig, fail, header_bits, timeout_error
from worker.errors import AllreduceError

log = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
# -ffp-contract=off: no fused multiply-add, so the timers' doubles are computed as numpy computes them
CFLAGS = ("-O2", "-fno-strict-aliasing", "-ffp-contract=off", "-shared", "-fPIC", "-w", "-pthread")
RING_WINDOWS = 2  # a call's packets live in a ring of this many windows (at least 2: core.c's row_of)
_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2}  # core.h's INA_F32 ...


def enabled() -> bool:
    """``INA_NATIVE=0`` runs the reference core (worker.engine) instead."""
    return os.environ.get("INA_NATIVE", "1") != "0"


HEADERS = ("core.h", "relay.h")  # declared once, for the C and for cffi


def source() -> str:
    """One translation unit: the headers once, then core.c, relay.c and run.c (each #includes what it needs
    to stand alone for an editor or a compiler run by hand)."""
    parts = ["#define _GNU_SOURCE", "#include <stdint.h>", *((HERE / h).read_text() for h in HEADERS)]
    for name in ("core.c", "relay.c", "run.c"):
        text = (HERE / name).read_text().replace("#define _GNU_SOURCE", "")
        for header in HEADERS:
            text = text.replace(f'#include "{header}"', "")
        parts.append(f'#line 1 "{name}"\n{text}')
    return "\n".join(parts)


_loading = threading.Lock()
_loaded: list[tuple[Any, Any] | str] = []


def _library() -> tuple[Any, Any] | str:
    """(ffi, lib), or why the native core is not here: built and loaded once per process, whichever thread
    asks first (the workers of one process share it: a cdata of one FFI is refused by another's functions)."""
    with _loading:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> tuple[Any, Any] | str:
    from p4target.cbuild import BuildError, compiled

    try:
        import cffi
    except ImportError as e:
        return f"cffi is not installed ({e})"
    try:
        path = compiled(source(), CFLAGS)
    except BuildError as e:
        return str(e)
    ffi = cffi.FFI()
    ffi.cdef(re.sub(r"/\*.*?\*/", "", "\n".join((HERE / h).read_text() for h in HEADERS), flags=re.S))
    return ffi, ffi.dlopen(str(path))


_said = threading.Lock()
_told = False


def core() -> ModuleType:
    """The core a worker runs: this module where the C builds, else worker.engine (said once, with why)."""
    global _told
    if not enabled():
        return engine
    got = _library()
    if isinstance(got, str):
        with _said:
            if not _told:
                _told = True
                log.warning("the worker runs its reference Python core, slower per packet: %s", got)
        return engine
    return sys.modules[__name__]


def available() -> bool:
    return not isinstance(_library(), str)


def why_not() -> str | None:
    """Why the native core cannot be built here (None: it can)."""
    got = _library()
    return got if isinstance(got, str) else None


def _lib() -> tuple[Any, Any]:
    got = _library()
    if isinstance(got, str):
        raise RuntimeError(f"the native core is not available: {got}")
    return got


def _ptr(ffi: Any, ctype: str, array: np.ndarray) -> Any:
    return ffi.cast(ctype, array.ctypes.data)


class CongestionView:
    """A tree's round-trip estimate and window, read from C (``engine.Congestion``'s fields)."""

    def __init__(self, tree: NativeTree) -> None:
        self._tree = tree

    def __getattr__(self, name: str) -> Any:
        c = self._tree._t.congestion
        if name == "srtt":
            return c.srtt if c.has_srtt else None
        if name in ("rttvar", "rtt_min", "cwnd", "ssthresh", "last_cut", "window", "unsampled"):
            return getattr(c, name)
        if name == "borrowed":
            return bool(c.borrowed)
        raise AttributeError(name)

    def rto(self) -> float:
        ffi, lib = _lib()
        return lib.ina_rto(self._tree._t)


class NativeTree:
    """``engine.Tree`` in C: the same interface, the state in an ``ina_tree``."""

    def __init__(self, config: TreeConfig, name: str = "the job's tree", incarnation: int = 0) -> None:
        ffi, lib = _lib()
        self.config, self.name = config, name
        P = config.protocol
        self.bits = header_bits(P)
        self.buffers = engine.Buffers(P)
        self.hints = engine.Hints()
        self._c = ffi.new("ina_config *")
        self._fill_config(ffi)
        self._t = ffi.new("ina_tree *")
        self._t.config = self._c
        lib.ina_congestion_init(ffi.addressof(self._t.congestion), config.window, engine.INITIAL_IN_FLIGHT)
        self._t.incarnation = self._t.recovered = incarnation
        self.kept = np.zeros((config.window, P.packet_bytes), np.uint8)
        self._t.kept = _ptr(ffi, "uint8_t *", self.kept)
        self._pacer: Pacer | None = None
        # the call's headers: the fixed fields, and where the per-packet ones go (Protocol.layout's)
        self.header_template = np.zeros(16, np.uint8)  # read as two big-endian words
        self.header_template[:P.header_bytes] = P.pack_headers(1, msg_type=P.MSG_DATA, job_id=config.job_id,
                                                               child=config.child)[0]
        self.header_fields = np.array([P.layout[f][:2] for f in ("slot", "set", "seq", "exponent")], np.int32)

    def _fill_config(self, ffi: Any) -> None:
        config, P, c, b = self.config, self.config.protocol, self._c, self.bits
        H = P.header_bytes
        if H > 16:
            raise ValueError("the native core takes headers of at most 16 bytes")
        for name, (offset, dtype), width in (("seq", b.seq_at, ">u4"), ("flags", b.flags_at, ">u1"),
                                             ("exponent", b.exponent_at, ">i1")):
            if np.dtype(dtype) != np.dtype(width):
                raise ValueError(f"ina_t.{name} is {dtype}: the native core reads it as {width}")
            setattr(c, f"{name}_at", offset)
        c.window, c.workers, c.header_bytes = config.window, config.workers, H
        c.packet_bytes, c.values, c.timeout = P.packet_bytes, P.values, config.timeout
        c.flag_overflow = P.FLAG_OVERFLOW
        c.shift_base = int(quantize.shifts(0, config.workers))
        c.exponent_none = quantize.EXPONENT_NONE
        c.frame_overhead = engine.ETH_IP_UDP
        c.rto_min, c.rto_max, c.rto_floor_rtts = engine.RTO_MIN, engine.RTO_MAX, engine.RTO_FLOOR_RTTS
        c.queueing, c.ambiguous, c.look_again = engine.QUEUEING, engine.AMBIGUOUS, engine.LOOK_AGAIN
        c.initial_rto = engine.INITIAL_RTO
        c.initial_in_flight, c.dup_thresh, c.turn = engine.INITIAL_IN_FLIGHT, engine.DUP_THRESH, engine.TURN
        for field, bits in (("retransmit_bits", b.retransmit), ("recover_bits", b.recover),
                            ("result_mask", b.result_mask.view(np.uint8)), ("match_mask", b.match_mask.view(np.uint8)),
                            ("data_to_result", b.data_to_result)):
            row = np.zeros(16, np.uint8)
            row[:H] = np.asarray(bits).view(np.uint8)[:H]
            ffi.memmove(getattr(c, field), row.tobytes(), 16)

    # --- engine.Tree's interface ------------------------------------------------------------------

    @property
    def incarnation(self) -> int:
        return self._t.incarnation

    @incarnation.setter
    def incarnation(self, value: int) -> None:
        self._t.incarnation = value

    @property
    def recovered(self) -> int:
        return self._t.recovered

    @property
    def lost_registers(self) -> bool:
        return self._t.incarnation != self._t.recovered

    def spec_changed(self, incarnation: int, name: str) -> None:
        if incarnation >= self._t.incarnation:
            self._t.incarnation, self.name = incarnation, name

    @property
    def broken(self) -> bool:
        return bool(self._t.broken)

    @broken.setter
    def broken(self, value: bool) -> None:
        self._t.broken = int(value)

    @property
    def next_packet(self) -> int:
        return self._t.next_packet

    @next_packet.setter
    def next_packet(self, value: int) -> None:
        self._t.next_packet = value

    @property
    def echo(self) -> Echo | None:
        t = self._t
        return Echo(t.echo_end, t.echo_at, t.echo_gap, t.echo_stop) if t.has_echo else None

    @property
    def congestion(self) -> CongestionView:
        return CongestionView(self)

    @property
    def stats(self) -> Stats:
        s = self._t.stats
        return Stats(**{name: getattr(s, name) for name in vars(Stats())})

    @property
    def pacer(self) -> Pacer | None:
        return self._pacer

    @pacer.setter
    def pacer(self, pacer: Pacer | None) -> None:
        """A worker's trees share one pacer: its C twin hangs on the Pacer object."""
        ffi, lib = _lib()
        self._pacer = pacer
        if pacer is None:
            self._t.pacer = ffi.NULL
            return
        twin = getattr(pacer, "_native", None)
        if twin is None:
            twin = ffi.new("ina_pacer *")
            lib.ina_pacer_init(twin, pacer.mbps, float(pacer.burst))
            twin.tokens = pacer.tokens  # a late pacer starts in debt (``Pacer``'s ``late``)
            pacer._native = twin  # type: ignore[attr-defined]
        self._t.pacer = twin

    def new_call(self, chunks: np.ndarray, exact: bool, out: np.ndarray,
                 exponents: np.ndarray | None = None, last: np.ndarray | None = None) -> NativeCall:
        return NativeCall(self, chunks, exact, out, exponents, last)


Tree = NativeTree


class NativeCall:
    """``engine.TreeCall`` in C: the per-packet arrays numpy's, the scalars an ``ina_call``."""

    def __init__(self, tree: NativeTree, chunks: np.ndarray, exact: bool, out: np.ndarray,
                 exponents: np.ndarray | None = None, last: np.ndarray | None = None) -> None:
        """``last``: as ``engine.TreeCall``'s, read and written in place."""
        ffi, lib = _lib()
        self.tree, self.exact, self.out, self.last = tree, exact, out, last
        self.chunks = np.ascontiguousarray(chunks)
        if out.dtype not in _DTYPES or self.chunks.dtype != out.dtype or not out.flags.c_contiguous or (
                last is not None and (last.dtype != out.dtype or not last.flags.c_contiguous)):
            raise TypeError(f"the native core sums float32, float64 and int32 into a contiguous array of the same "
                            f"dtype, not {chunks.dtype} into {out.dtype}")
        config = tree.config
        self.n = n = len(self.chunks) + (last is not None)
        # before the buffers are reused: the last call's agreed exponents are learnt from them (engine.Hints)
        self.hint = None if exact else tree.hints.lookup(n, out.dtype)
        self.lead = 0 if exact or self.hint is not None else min(config.window, n)
        self.span = min(config.window, n) if self.hint is not None else 0  # the first window, at its hints
        T = 2 * n if self.hint is not None else n + self.lead  # room for a redo of every chunk
        self.base = tree.next_packet
        if exact:
            exponents = np.full(n, quantize.EXPONENT_NONE, np.int8)
        elif exponents is None:
            exponents = quantize.chunk_exponents(self.chunks if last is None else
                                                 np.concatenate([self.chunks, last.reshape(1, -1)]))
        self._exponents = np.ascontiguousarray(exponents, np.int8)
        self._arrays(T, n)
        c = self._c = ffi.new("ina_call *")
        c.tree = tree._t
        c.n, c.lead, c.total, c.base, c.rows = self.n, self.lead, n + self.lead, self.base, len(self.packets)
        c.capacity, c.span = T, self.span
        c.exact, c.dtype = int(exact), _DTYPES[out.dtype]
        for name, ctype, array in (("chunks", "void *", self.chunks), ("out", "void *", out),
                                   ("agreed", "int8_t *", self.agreed), ("qscale", "void *", self.qscale),
                                   ("dscale", "void *", self.dscale), ("packets", "uint8_t *", self.packets),
                                   ("expected", "uint8_t *", self.expected), ("latest", "int64_t *", self.latest),
                                   ("done", "uint8_t *", self.done), ("sent_at", "double *", self.sent_at),
                                   ("retries", "int64_t *", self.retries), ("wrong", "uint8_t *", self.wrong),
                                   ("redo", "int64_t *", self.redo),
                                   ("hinted_sums", "uint8_t *", self.hinted_sums),
                                   ("overflowed", "int64_t *", self._overflowed)):
            setattr(c, name, _ptr(ffi, ctype, array))
        c.header_template = _ptr(ffi, "uint8_t *", tree.header_template)
        c.header_fields = _ptr(ffi, "int32_t *", tree.header_fields)
        c.exponents = _ptr(ffi, "int8_t *", self._exponents)
        c.last = ffi.NULL if last is None else _ptr(ffi, "void *", last)
        c.hint = ffi.NULL if self.hint is None else _ptr(ffi, "int8_t *", self.hint)
        lib.ina_call_start(c)
        lib.ina_lay_out(c)
        if not exact:
            tree.hints.watch(self)

    def _arrays(self, T: int, n: int) -> None:
        """The call's arrays, reused from call to call (fresh pages cost a fault each): reset as lay_out makes them."""
        tree, out = self.tree, self.out
        P, config = tree.config.protocol, tree.config
        buffers = tree.buffers
        self.packets = buffers.packets(min(T, RING_WINDOWS * config.window))  # a ring: core.c's row_of
        self.expected = buffers.array("expected", T * P.header_bytes, np.uint8)
        self.agreed = buffers.array("agreed", n, np.int8)
        self.agreed[:] = quantize.EXPONENT_NONE
        self.qscale, self.dscale = buffers.array("qscale", n, out.dtype), buffers.array("dscale", n, out.dtype)
        self.qscale[:] = 1
        self.dscale[:] = 1
        self.latest = buffers.array("latest", T, np.int64)
        self.done = buffers.array("done", T, bool)
        self.done[:] = False
        self.sent_at = buffers.array("sent_at", T, np.float64)
        self.sent_at[:] = np.nan
        self.retries = buffers.array("retries", T, np.int64)
        self.retries[:] = 0
        self._overflowed = np.zeros(max(n, 1), np.int64)
        self.wrong = buffers.array("wrong", n, np.uint8)
        self.wrong[:] = 0
        self.redo = buffers.array("redo", n, np.int64)
        self.hinted_sums = buffers.array("hinted_sums", max(self.span, 1) * P.values, np.int32)

    # --- engine.TreeCall's interface ------------------------------------------------------------

    @property
    def next_q(self) -> int:
        return self._c.next_q

    @property
    def finished(self) -> int:
        return self._c.finished

    @property
    def oldest(self) -> int:
        return self._c.oldest

    @property
    def total(self) -> int:
        return self._c.total

    @property
    def redos(self) -> int:
        return self._c.redos

    @property
    def complete(self) -> bool:
        return bool(self._c.finished >= self._c.total and self._c.scanned >= self._c.span)

    @property
    def closed(self) -> bool:
        return bool(self._c.closed)

    @property
    def paced(self) -> bool:
        return bool(self._c.paced)

    @property
    def held(self) -> bool:
        return bool(self._c.held)

    @property
    def retried(self) -> bool:
        return bool(self._c.retried)

    @property
    def last_progress(self) -> float | None:
        return self._c.last_progress if self._c.has_progress else None

    @property
    def overflowed(self) -> list[int]:
        return self._overflowed[:self._c.n_overflowed].tolist()

    def receive(self, rows: np.ndarray, lengths: np.ndarray, now: float) -> None:
        ffi, lib = _lib()
        rows = np.ascontiguousarray(rows)
        lengths = np.ascontiguousarray(lengths, np.int64)
        lib.ina_receive(self._c, _ptr(ffi, "uint8_t *", rows), rows.shape[1] if rows.ndim == 2 else 0,
                        _ptr(ffi, "int64_t *", lengths), len(rows), now)

    def stalled(self, now: float, after: float) -> bool:
        ffi, lib = _lib()
        return bool(lib.ina_stalled(self._c, now, after))

    def excuse(self, now: float) -> None:
        self._c.last_progress, self._c.has_progress = now, 1


TreeCall = NativeCall


class _Scratch:
    """An outbox's memory in C, reused step after step (grown as the trees ask; with ``buffers``, a tree's,
    reused from call to call: 1.4 MB of fresh pages per call cost their faults)."""

    def __init__(self, buffers: engine.Buffers | None = None) -> None:
        self.buffers = buffers
        self.rows = np.empty(0, np.uint8)
        self.segments: Any = None
        self.capacity = 0

    def outbox(self, ffi: Any, room: float, rows: int, packet_bytes: int, segments: int) -> Any:
        if self.buffers is not None:
            self.rows = self.buffers.array("outbox", rows * packet_bytes, np.uint8)
        elif self.rows.size < rows * packet_bytes:
            self.rows = np.empty(rows * packet_bytes, np.uint8)
        if self.capacity < segments:
            self.segments, self.capacity = ffi.new("ina_segment[]", segments), segments
        out = ffi.new("ina_outbox *")
        out.room = room if room < math.inf else float("inf")
        out.segments, out.cap_segments = self.segments, self.capacity
        out.scratch, out.scratch_cap = _ptr(ffi, "uint8_t *", self.rows), self.rows.size // packet_bytes
        return out


_scratch = threading.local()


def step(calls: list[NativeCall], idle: tuple[NativeTree, ...], now: float, room: float = math.inf) -> Outbox:
    """``engine.step`` in C: the same datagrams (copied out of C's scratch) and the same deadline."""
    ffi, lib = _lib()
    trees = [c.tree for c in calls] + list(idle)
    if not trees:
        return Outbox(room)
    P = trees[0].config.protocol
    # every copy a step can make: a recovery (2 W), the timers' and RACK's (W each), per tree
    rows = sum(5 * t.config.window for t in trees) + 64
    scratch = getattr(_scratch, "it", None) or _Scratch()
    _scratch.it = scratch
    out = scratch.outbox(ffi, room, rows, P.packet_bytes, 4 * len(trees) + 64 + len(calls) + 2 * sum(
        math.ceil(c.total / engine.TURN) for c in calls if len(calls) > 1))
    c_calls = ffi.new("ina_call *[]", [c._c for c in calls] or 1)
    c_idle = ffi.new("ina_tree *[]", [t._t for t in idle] or 1)
    failed = lib.ina_step(c_calls, len(calls), c_idle, len(idle), now, out)
    if failed >= 0:
        raise timeout_error(calls[failed])
    result = Outbox(room)
    by_pointer = {int(ffi.cast("uintptr_t", t._t)): t for t in trees}
    for i in range(out.n_segments):
        seg = out.segments[i]
        count = seg.count
        rows_out = np.frombuffer(ffi.buffer(seg.rows, count * P.packet_bytes), np.uint8).reshape(count, -1).copy()
        result.datagrams.append((by_pointer[int(ffi.cast("uintptr_t", seg.tree))], rows_out))
    result.wake, result.full, result.room = out.wake, bool(out.full), out.room
    return result


SLICE = 0.05  # seconds the C loop runs between two looks of the driver (spec changes, stalls, a stop request)

RX_BYTES = 8 * 65536  # receive buffers: run.c's RX_MESSAGES coalesced datagrams of up to 64 KB


class _Ports:
    """The C loop's view of the trees' sockets (``ina_port``), with their buffers: each tree's own, reused
    from call to call (a tree's socket is read and written by one thread at a time)."""

    def __init__(self, ffi: Any, trees: list[NativeTree], sockets: dict, calls: dict) -> None:
        self.ports = ffi.new("ina_port[]", max(1, len(trees)))
        for i, t in enumerate(trees):
            io, p = sockets[t], self.ports[i]
            _enable_gro(io.sock)
            p.fd, p.gso = io.fd, int(io.gso)
            p.address = int.from_bytes(socket.inet_aton(io.destination[0]), sys.byteorder)
            p.port = socket.htons(io.destination[1])
            p.tree = t._t
            call = calls.get(t)
            p.call = call._c if call is not None else ffi.NULL
            pending = t.buffers.array("pending", 4 * t.config.window * t.config.protocol.packet_bytes, np.uint8)
            rx = t.buffers.array("rx", RX_BYTES, np.uint8)
            p.pending_rows, p.pending, p.pending_cap = _ptr(ffi, "uint8_t *", pending), 0, 4 * t.config.window
            p.rx, p.rx_bytes = _ptr(ffi, "uint8_t *", rx), RX_BYTES


def _enable_gro(sock: socket.socket) -> None:
    """Results in runs (UDP GRO, Linux >= 5.0) where the kernel offers it; one by one where not."""
    try:
        sock.setsockopt(socket.SOL_UDP, 104, 1)  # UDP_GRO: not in Python's socket module
    except OSError:
        pass


class _GaveUp(AllreduceError):
    """A thread's loop stopped because another thread's failed (that one's error is the call's)."""


class _Loop:
    """One thread's C loop over some of a call's trees (``ina_run_args``), and what it holds on to."""

    def __init__(self, ffi: Any, calls: list[NativeCall], idle: tuple[NativeTree, ...], sockets: dict,
                 max_wait: float, give_up: Any) -> None:
        self.calls = calls
        trees = [c.tree for c in calls] + list(idle)
        self.ports = _Ports(ffi, trees, sockets, {c.tree: c for c in calls})
        P = trees[0].config.protocol
        self.scratch = _Scratch(trees[0].buffers)  # each tree runs on one loop: its memory is this loop's
        self.out = self.scratch.outbox(ffi, math.inf, sum(5 * t.config.window for t in trees) + 64, P.packet_bytes,
                                       4 * len(trees) + 64 + len(calls)
                                       + 2 * sum(math.ceil(c.total / engine.TURN) for c in calls))
        self.c_calls = ffi.new("ina_call *[]", [c._c for c in calls] or 1)
        self.c_idle = ffi.new("ina_tree *[]", [t._t for t in idle] or 1)
        a = self.args = ffi.new("ina_run_args *")
        a.calls, a.ncalls, a.idle, a.nidle = self.c_calls, len(calls), self.c_idle, len(idle)
        a.ports, a.nports, a.out, a.max_wait, a.stop = self.ports.ports, len(trees), self.out, max_wait, give_up

    def run(self, lib: Any, give_up: Any, between: Callable[[], None] | None = None) -> None:
        """Slices until the calls are done; a failure sets ``give_up`` for the other threads and is raised."""
        try:
            while True:
                if between is not None:
                    between()
                self.args.until = lib.ina_now() + SLICE
                status = lib.ina_run(self.args)
                if status == lib.INA_RUN_DONE:
                    return
                if status == lib.INA_RUN_FAILED:
                    raise timeout_error(self.calls[self.args.failed])
                if status == lib.INA_RUN_OS_ERROR:
                    raise OSError(self.args.error, os.strerror(self.args.error))
                if status == lib.INA_RUN_STOPPED:
                    raise _GaveUp("stopped: another thread of this allreduce failed")
        except BaseException:
            give_up[0] = 1
            raise


def run_calls(calls: list[NativeCall], sockets: dict, stop: threading.Event | None, idle: tuple[NativeTree, ...],
              before_step: Callable[[], None] | None, max_wait: float,
              helpers: ThreadPoolExecutor | None = None) -> None:
    """``driver.run_calls`` in C: the loop runs without the GIL, a slice at a time; between slices the
    driver's own work (``before_step``: spec changes, stall reports) and a stop request.  ``max_wait``:
    the longest wait in one ppoll.  With ``helpers`` (threads), the calls' trees are shared out among
    this thread and the helpers, each tree's socket read and written by one thread."""
    ffi, lib = _lib()
    give_up = ffi.new("int32_t[1]")
    groups = 1 + min(helpers._max_workers if helpers is not None else 0, len(calls) - 1)
    loops = [_Loop(ffi, calls[i::groups], idle if i == 0 else (), sockets, max_wait, give_up) for i in range(groups)]

    def between() -> None:
        if stop is not None and stop.is_set():
            give_up[0] = 1
            raise AllreduceError("stopped: another part of this allreduce failed")
        if before_step is not None:
            before_step()

    try:
        others = [helpers.submit(loop.run, lib, give_up) for loop in loops[1:]] if helpers is not None else []
        try:
            loops[0].run(lib, give_up, between)
            errors: list[BaseException | None] = []
        except BaseException as e:
            errors = [e]
        errors += [f.exception() for f in others]  # waits for every thread: none outlives the call
        failures = [e for e in errors if e is not None]
        if failures:  # the thread that failed first speaks, not those it stopped
            raise next((e for e in failures if not isinstance(e, _GaveUp)), failures[0])
    except BaseException:
        fail(calls)
        raise


def tend_idle(trees: list[NativeTree], sockets: dict) -> None:
    """``driver.tend_idle``: between calls, the recoveries and echoes the trees owe."""
    live = tuple(t for t in trees if not t.broken)
    if not live:
        return
    out = step([], live, time.monotonic())
    for t in live:
        sockets[t].send(np.ascontiguousarray(out.rows(t)))


def prepare_into(flat: np.ndarray, padded: np.ndarray | None, values: int) -> tuple[bool, np.ndarray | None]:
    """``calls.prepare``'s copy and exponents in one pass of C (``padded`` None: the exponents alone, read
    from ``flat``, for a call that reads it as it goes): (True, exponents or None for int32), or (False,
    None) when the input is bad (the caller's numpy way then raises, in its words) or the core is not built."""
    if not enabled() or not available() or flat.dtype not in _DTYPES or (padded is not None and
                                                                           padded.dtype != flat.dtype):
        return False, None
    ffi, lib = _lib()
    size = -(-flat.size // values) * values if padded is None else padded.size
    exps = None if flat.dtype == np.int32 else np.empty(size // values, np.int8)
    status = lib.ina_prepare(_ptr(ffi, "void *", flat), flat.size, _DTYPES[flat.dtype],
                             ffi.NULL if padded is None else _ptr(ffi, "void *", padded), size, values,
                             ffi.NULL if exps is None else _ptr(ffi, "int8_t *", exps),
                             quantize.EXPONENT_MIN, quantize.EXPONENT_MAX, quantize.EXPONENT_NONE)
    return status == 0, exps

