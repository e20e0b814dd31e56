"""Host-based ring allreduce over TCP: the baseline that in-network aggregation is compared against,
and a hybrid job's ring part.

A reduce-scatter then an allgather over nearly equal contiguous segments, arranged by a
``worker.ring_layout.Layout``: the flat ring (N-1 steps each way, as gloo's), recursive halving
and doubling, or rings of rings that follow the topology (the hosts under one leaf, then the
leaves of a pod, then the pods).  Every rank sends 2(N-1)/N * K payload bytes for a K-byte array
(``bytes_sent``), against K for the switch, in 2 sum(g_i - 1) steps.  Each rank listens on its own
port and keeps one connection to each rank it sends to and one from each it receives from.  A ring of rings
whose levels run on different interfaces (a direct-connect torus: ``worker.direct.TorusPart``) gives one
address list per level: each rank then listens on one address per level and reaches a level's neighbours
at their address of that level.

Sums are computed in the input dtype (float16/32/64, int32, int64), one segment at a time in ring
order, so float results differ from ``np.sum`` over the stacked inputs by rounding, but every rank
ends with the same bits (``ring_layout.reduce_sum`` computes them without a network). Integers wrap
like numpy's fixed-width addition.

    with RingWorker(rank, ["10.0.0.1:7000", "10.0.0.2:7000"], timeout=30) as w:
        total = w.allreduce(grad)

Loopback figure, one process per rank: ``python -m worker.ring --rank R --peers P0,P1,... --mb 8``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import statistics
import struct
import time
from collections.abc import Callable, Sequence

import numpy as np

from worker.ring_layout import Layout, Step, level_pace, schedule

DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int32", "int64"))
SO_MAX_PACING_RATE = 47  # Linux; not in Python's socket module
_UNPACED = 0xFFFFFFFF  # SO_MAX_PACING_RATE's "no limit" (a 4-byte value caps pacing at 34 Gb/s)
# CUBIC keeps shaped links 98-100% busy; BBR (v1), some machines' default, left them 30-40% idle
# between the ring's steps (bench_allreduce's docstring).  tests/test_defaults.py keeps them equal.
DEFAULT_TCP_CONGESTION = "cubic"
_MAGIC = b"RING"
_HELLO = struct.Struct("!4sII")  # magic, sender rank, world size
# magic, call number, step, element count, dtype.str: every step's message starts with it, so a rank out
# of step (another call, size or layout) is caught at once and named
HEADER = struct.Struct("!4sIIQ8s")


class RingError(RuntimeError):
    """A peer vanished, misbehaved or missed the deadline; the worker is closed afterwards."""


def summation_bound(arrays: list[np.ndarray]) -> np.ndarray:
    """Per element, how far a ring's sum in the arrays' own float type may be from the exact sum: N-1
    roundings of partial sums, (N-1) eps of the sum of magnitudes (before the final cast).  Any layout's
    sum is a tree of N-1 additions, so it holds for all of them."""
    eps = float(np.finfo(arrays[0].dtype).eps)
    magnitude = np.zeros(arrays[0].shape)
    for a in arrays:  # one at a time: 1,024 workers' arrays are never stacked
        magnitude += np.abs(a.astype(np.float64))
    return (len(arrays) - 1) * eps * magnitude


def parse_peer(text: str) -> tuple[str, int]:
    """"ip:port" -> (ip, port); the last colon splits, so bracket-less IPv6 is not supported."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"peer {text!r} is not ip:port")
    return host, int(port)


def _raw(array: np.ndarray) -> memoryview:
    return memoryview(array.view(np.uint8))


class RingWorker:
    """One rank of a TCP ring; connect once, then call ``allreduce`` as often as needed (not thread-safe).

    ``peers``: every rank's "ip:port" in rank order, or one such list per level of the layouts (level i's
    rings connect on ``peers[i]``: a rank listens on each of its addresses).  ``layouts``: every arrangement
    the calls may use (default: the flat ring), all connected at once.  ``timeout`` bounds connection setup
    and each step of an allreduce, so a dead or stuck peer raises RingError instead of hanging.
    """

    def __init__(self, rank: int, peers: Sequence[str] | Sequence[Sequence[str]], timeout: float = 30.0,
                 tcp_congestion: str | None = DEFAULT_TCP_CONGESTION, pacing_mbps: float | None = None,
                 layouts: Sequence[Layout] = ()) -> None:
        per_level = bool(peers) and not isinstance(peers[0], str)
        lists = [[parse_peer(p) for p in level] for level in (peers if per_level else [peers])]
        # the distinct address lists ("channels": a rank listens once on each), and each level's
        self._addresses = [a for i, a in enumerate(lists) if a not in lists[:i]]
        self._level_channel = [self._addresses.index(a) for a in lists] if per_level else None
        self.peers = self._addresses[0]
        self.size, self.rank, self.timeout = len(self.peers), rank, timeout
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside 0..{self.size - 1}")
        if any(len(a) != self.size for a in self._addresses):
            raise ValueError(f"peers: every level lists every rank, not {[len(a) for a in lists]} addresses")
        mine = [a[rank] for a in self._addresses]
        if len(set(mine)) != len(mine):
            raise ValueError(f"peers: rank {rank} listens on {mine}: one address per level, not one twice")
        self.layouts = tuple(layouts) or (Layout.flat(self.size),)
        for layout in self.layouts:
            if len(layout.order) != self.size:
                raise ValueError(f"ring layout {layout.name} has {len(layout.order)} ranks, not {self.size}")
            if per_level and len(layout.levels) > len(lists):
                raise ValueError(f"ring layout {layout.name} has {len(layout.levels)} levels, peers give "
                                 f"{len(lists)}")
        self.bytes_sent = self.bytes_received = self.calls = 0
        self.tcp_congestion = tcp_congestion  # e.g. "cubic": BBR under-fills rate-limited links between steps
        self.pacing_mbps = pacing_mbps  # most each connection sends (SO_MAX_PACING_RATE): leave room on the link
        # connections by (channel, the peer's rank): one list of addresses is one channel for every level
        self._to: dict[tuple[int, int], socket.socket] = {}  # the connections we send on
        self._from: dict[tuple[int, int], socket.socket] = {}  # the connections we receive on
        self._paced: dict[tuple[int, int], float | None] = {}  # each connection we send on: its rate now (Mb/s)
        self._closed = False
        if self.size > 1:
            self._connect()

    @classmethod
    def from_env(cls) -> RingWorker:
        """RING_RANK, RING_PEERS ("ip:port,ip:port,..."), optional RING_TIMEOUT (seconds)."""
        return cls(int(os.environ["RING_RANK"]), os.environ["RING_PEERS"].split(","),
                   float(os.environ.get("RING_TIMEOUT", "30")))

    def _name(self, channel: int, rank: int) -> str:
        host, port = self._addresses[channel][rank]
        return f"rank {rank} ({host}:{port})"

    def _channel(self, level: int) -> int:
        """Which address list a level's rings connect on."""
        return 0 if self._level_channel is None else self._level_channel[level]

    def _connect(self) -> None:
        """Listen, then alternate connect attempts with accepting: any start order works.  Each rank
        connects to the ranks it sends to in any layout, and accepts the ones it receives from, on each
        level's addresses (a connection's level is the address it reached)."""
        steps = [(self._channel(level), *layout.peers(self.rank, level)) for layout in self.layouts
                 for level in range(len(layout.levels)) if layout.levels[level] > 1]
        wanted_to = sorted({(channel, to) for channel, to, _ in steps})
        wanted_from = {(channel, frm) for channel, _, frm in steps}
        deadline = time.monotonic() + self.timeout
        delay, last_error = 0.01, "no attempt"
        with contextlib.ExitStack() as stack, selectors.DefaultSelector() as listening:
            for channel in sorted({channel for channel, _ in wanted_from}):
                listener = stack.enter_context(socket.create_server(self._addresses[channel][self.rank],
                                                                    backlog=max(self.size, 16)))
                listening.register(listener, selectors.EVENT_READ, channel)
            while True:
                for channel, peer in (link for link in wanted_to if link not in self._to):
                    remaining = deadline - time.monotonic()
                    try:
                        conn = socket.create_connection(self._addresses[channel][peer],
                                                        timeout=max(0.01, min(remaining, 5.0)))
                        conn.sendall(_HELLO.pack(_MAGIC, self.rank, self.size))
                        self._to[channel, peer] = conn
                    except OSError as e:
                        last_error = str(e)
                missing_to = [link for link in wanted_to if link not in self._to]
                missing_from = sorted(wanted_from - set(self._from))
                if not missing_to and not missing_from:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    why = (f"could not connect to {self._name(*missing_to[0])} ({last_error})" if missing_to
                           else f"{self._name(*missing_from[0])} did not connect to us")
                    self.close()
                    raise RingError(f"setup: {why} within {self.timeout}s")
                if missing_from:  # wait for the senders during the backoff instead of sleeping
                    for key, _ in listening.select(min(delay, remaining) if missing_to else remaining):
                        try:
                            peer, conn = self._check_hello(key.fileobj.accept()[0], deadline)
                        except OSError:  # gone before we took it: try again
                            continue
                        link = (key.data, peer)
                        if conn is not None and link in wanted_from and link not in self._from:
                            self._from[link] = conn
                        elif conn is not None:
                            conn.close()
                else:
                    time.sleep(min(delay, remaining))
                delay = min(2 * delay, 0.25)
        for s in (*self._to.values(), *self._from.values()):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tcp_congestion:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.tcp_congestion.encode())
            s.setblocking(False)
        for link in self._to:
            self._pace(link, self.pacing_mbps)

    def _pace(self, link: tuple[int, int], mbps: float | None) -> None:
        """The connection ``link`` (channel, peer) at most ``mbps`` (None: as fast as it goes)."""
        if link in self._paced and mbps == self._paced[link]:
            return
        rate = min(int(mbps * 1e6 / 8), _UNPACED - 1) if mbps else _UNPACED  # bytes/s; ~0U: no limit
        self._to[link].setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack("=I", rate))
        self._paced[link] = mbps

    def connections(self) -> list[socket.socket]:
        """The connections this rank sends on (benchmarks and tests read their options)."""
        return list(self._to.values())

    @property
    def congestion_control(self) -> str:
        """The TCP congestion control of the ring's connections (reported by benchmarks)."""
        used = {s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
                for s in (*self._to.values(), *self._from.values())}
        return ",".join(sorted(used))

    def _check_hello(self, conn: socket.socket, deadline: float) -> tuple[int, socket.socket | None]:
        """The sender's rank, and the connection if it is a rank of the same ring (strays are dropped)."""
        try:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            hello = b""
            while len(hello) < _HELLO.size and (chunk := conn.recv(_HELLO.size - len(hello))):
                hello += chunk
            if len(hello) == _HELLO.size:
                magic, sender, size = _HELLO.unpack(hello)
                if magic == _MAGIC and size == self.size and 0 <= sender < self.size:
                    return sender, conn
        except OSError:
            pass
        conn.close()
        return -1, None

    def _fail(self, message: str) -> RingError:
        """Close first, so the neighbours see EOF at once and the error travels round the ring."""
        self.close()
        return RingError(message)

    def _exchange(self, channel: int, to: int, frm: int, sends: list, recvs: list, step: str,
                  on_first: Callable[[], None] | None = None) -> None:
        """Send to ``to`` while receiving from ``frm`` (on ``channel``'s connections): blocking sends could fill
        both TCP buffers and deadlock."""
        out, into = self._to[channel, to], self._from[channel, frm]
        sends = [memoryview(b).cast("B") for b in sends if len(b)]
        recvs = [memoryview(b).cast("B") for b in recvs if len(b)]
        si = so = ri = ro = 0
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as sel:
            if sends:
                sel.register(out, selectors.EVENT_WRITE, "out")
            if recvs:
                sel.register(into, selectors.EVENT_READ, "in")
            while si < len(sends) or ri < len(recvs):
                remaining = deadline - time.monotonic()
                ready = sel.select(remaining) if remaining > 0 else []
                if not ready:
                    who = (f"receiving from {self._name(channel, frm)}" if ri < len(recvs)
                           else f"sending to {self._name(channel, to)}")
                    raise self._fail(f"{step}: timed out after {self.timeout}s {who}")
                for key, _ in ready:
                    try:
                        if key.data == "out":
                            so += out.send(sends[si][so:])
                            if so == len(sends[si]):
                                si, so = si + 1, 0
                                if si == len(sends):
                                    sel.unregister(out)
                        else:
                            n = into.recv_into(recvs[ri][ro:])
                            if n == 0:
                                raise self._fail(f"{step}: {self._name(channel, frm)} closed the connection")
                            ro += n
                            if ro == len(recvs[ri]):
                                ri, ro = ri + 1, 0
                                if ri == 1 and on_first is not None:
                                    on_first()
                                if ri == len(recvs):
                                    sel.unregister(into)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as e:
                        peer = to if key.data == "out" else frm
                        raise self._fail(f"{step}: connection to {self._name(channel, peer)} failed: {e}") from e

    def allreduce(self, array: np.ndarray, layout: Layout | None = None) -> np.ndarray:
        """The elementwise sum of `array` over all ranks, as a new array (the input is untouched)."""
        return self.allreduce_(np.array(array, order="C", copy=True), layout)

    def allreduce_(self, array: np.ndarray, layout: Layout | None = None,
                   pacing_mbps: float | Sequence[float] | None = None) -> np.ndarray:
        """Sum in place (C-contiguous, writeable, native byte order) and return `array`; saves one copy.
        ``layout``: one of the worker's (default its first); ``pacing_mbps``: this call's rate per
        connection, or one per level of the layout (``ring_layout.level_pace``; default the worker's)."""
        flat = self._start(array)
        if self.size > 1:
            self._run(flat, flat, self._layout(layout), pacing_mbps)
        return array

    def allreduce_cast(self, array: np.ndarray, dtype: np.dtype, layout: Layout | None = None,
                       pacing_mbps: float | Sequence[float] | None = None) -> np.ndarray:
        """The sum in ``array``'s (wide) dtype, cast once to ``dtype``: partial sums travel wide in the
        reduce-scatter, each finished part is cast by its owner and travels narrow in the allgather
        (float32 gradients summed in float64: 3(N-1)/N of the tensor on the wire, not 4(N-1)/N)."""
        flat = self._start(array)
        out = np.empty(flat.size, dtype)
        if self.size == 1:
            out[:] = flat
            return out
        self._run(flat, out, self._layout(layout), pacing_mbps)
        return out

    def _layout(self, layout: Layout | None) -> Layout:
        if layout is None:
            return self.layouts[0]
        if layout not in self.layouts:
            raise ValueError(f"ring layout {layout.name} {layout.levels} is not one this worker connected")
        return layout

    def _start(self, array: np.ndarray) -> np.ndarray:
        if self._closed:
            raise RingError(f"{self._name(0, self.rank)}: worker is closed")
        if array.dtype not in DTYPES or not array.dtype.isnative:
            raise TypeError(f"dtype {array.dtype} is not one of {sorted(str(d) for d in DTYPES)} (native order)")
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError("allreduce_ needs a C-contiguous writeable array")
        self.calls += 1
        return array.reshape(-1)

    def _run(self, wide: np.ndarray, narrow: np.ndarray, layout: Layout,
             pacing_mbps: float | Sequence[float] | None) -> None:
        """The layout's steps: the reduce-scatter on ``wide`` (in place), the owned part cast into ``narrow``,
        the allgather on ``narrow`` (the same array when no cast is wanted)."""
        pace = pacing_mbps if pacing_mbps is not None else self.pacing_mbps
        steps, owned = schedule(layout, self.rank, wide.size)
        scratch = np.empty(max((hi - lo for s in steps if s.reduce for lo, hi in (s.recv,)), default=0), wide.dtype)
        for i, step in enumerate(steps):
            if not step.reduce and narrow is not wide and (i == 0 or steps[i - 1].reduce):
                narrow[owned[0]:owned[1]] = wide[owned[0]:owned[1]]
            self._pace((self._channel(step.level), step.to), level_pace(pace, step.level))
            self._step(i, len(steps), step, wide if step.reduce else narrow, scratch)

    def _step(self, i: int, count: int, step: Step, array: np.ndarray, scratch: np.ndarray) -> None:
        (slo, shi), (rlo, rhi) = step.send, step.recv
        out = array[slo:shi]
        into = scratch[:rhi - rlo] if step.reduce else array[rlo:rhi]
        header = HEADER.pack(_MAGIC, self.calls & 0xFFFFFFFF, i, array.size, array.dtype.str.encode())
        theirs = bytearray(HEADER.size)
        name = f"{'reduce-scatter' if step.reduce else 'allgather'} step {i + 1}/{count}"
        channel = self._channel(step.level)

        def check_header() -> None:
            if bytes(theirs) != header:
                _, calls, at, size, dt = HEADER.unpack(theirs)
                dt = dt.rstrip(b"\0").decode(errors="replace")
                raise self._fail(f"{name}: {self._name(channel, step.frm)} is at call {calls} step {at + 1} with "
                                 f"{size} x {dt}, we are at call {self.calls} with {array.size} x {array.dtype.str}")

        self._exchange(channel, step.to, step.frm, [header, _raw(out)], [theirs, _raw(into)], name, check_header)
        if step.reduce:
            np.add(array[rlo:rhi], into, out=array[rlo:rhi])
        self.bytes_sent += out.nbytes
        self.bytes_received += into.nbytes

    def close(self) -> None:
        """Drop every connection (idempotent); shutdown wakes any peer blocked on them."""
        self._closed = True
        for s in (*self._to.values(), *self._from.values()):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._to, self._from = {}, {}

    def __enter__(self) -> RingWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Time allreduce of a float32 array at one rank; run it once per rank (per Mininet host)."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--peers", required=True, help="ip:port,ip:port,... in rank order")
    ap.add_argument("--mb", type=float, default=8.0, help="array size in MiB (float32)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    x = np.ones(int(args.mb * 2**20) // 4, np.float32)
    with RingWorker(args.rank, args.peers.split(","), args.timeout) as w:
        buf = x.copy()
        w.allreduce_(buf)  # warm-up, and a barrier so the timed calls start together
        sent, times = w.bytes_sent, []
        for _ in range(args.iters):
            buf[:] = x
            t0 = time.perf_counter()
            w.allreduce_(buf)
            times.append(time.perf_counter() - t0)
        print(f"rank {w.rank}/{w.size}: {x.nbytes / 2**20:g} MiB float32, median {statistics.median(times) * 1e3:.1f}"
              f" ms over {args.iters} (min {min(times) * 1e3:.1f}), {(w.bytes_sent - sent) // args.iters} B sent/call")


if __name__ == "__main__":
    main()
