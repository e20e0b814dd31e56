"""Host-based ring allreduce over TCP: the baseline that in-network aggregation is compared against.

This is the classic bandwidth-optimal ring: reduce-scatter (N-1 steps), then allgather (N-1 steps),
over N nearly equal contiguous segments. For a K-byte array each worker sends 2(N-1)/N * K payload
bytes (``bytes_sent``), against K for the switch. Each rank listens on its own port, connects to its
right neighbour (rank+1 mod N) and receives from its left one.

Sums are computed in the input dtype (float16/32/64, int32, int64), one segment at a time in ring
order, so float results differ from ``np.sum`` over the stacked inputs by rounding, but every rank
ends with the same bits. Integers wrap like numpy's fixed-width addition.

    with RingWorker(rank, ["10.0.0.1:7000", "10.0.0.2:7000"], timeout=30) as w:
        total = w.allreduce(grad)

Loopback figure, one process per rank: ``python -m worker.ring --rank R --peers P0,P1,... --mb 8``.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import struct
import time
from collections.abc import Callable, Sequence

import numpy as np

DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int32", "int64"))
SO_MAX_PACING_RATE = 47  # Linux; not in Python's socket module
# CUBIC keeps shaped links 98-100% busy; BBR (v1), some machines' default, left them 30-40% idle
# between the ring's steps (bench_allreduce's docstring).  tests/test_defaults.py keeps them equal.
DEFAULT_TCP_CONGESTION = "cubic"
_MAGIC = b"RING"
_HELLO = struct.Struct("!4sII")  # magic, sender rank, world size
_HEADER = struct.Struct("!4sIQ8s")  # magic, call number, element count, dtype.str: catches ranks out of step


class RingError(RuntimeError):
    """A peer vanished, misbehaved or missed the deadline; the worker is closed afterwards."""


def summation_bound(arrays: list[np.ndarray]) -> np.ndarray:
    """Per element, how far a ring's sum in the arrays' own float type may be from the exact sum: N-1
    roundings of partial sums, (N-1) eps of the sum of magnitudes (before the final cast)."""
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


def segments(count: int, parts: int) -> list[tuple[int, int]]:
    """Bounds of `parts` contiguous segments of `count` elements; the first count % parts are one longer."""
    base, extra = divmod(count, parts)
    bounds = [i * base + min(i, extra) for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _raw(array: np.ndarray) -> memoryview:
    return memoryview(array.view(np.uint8))


class RingWorker:
    """One rank of a TCP ring; connect once, then call ``allreduce`` as often as needed (not thread-safe).

    `timeout` bounds connection setup and each of the 2(N-1) steps of an allreduce, so a dead or stuck
    peer raises RingError instead of hanging.
    """

    def __init__(self, rank: int, peers: Sequence[str], timeout: float = 30.0,
                 tcp_congestion: str | None = DEFAULT_TCP_CONGESTION, pacing_mbps: float | None = None) -> None:
        self.peers = [parse_peer(p) for p in peers]
        self.size, self.rank, self.timeout = len(self.peers), rank, timeout
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside 0..{self.size - 1}")
        self.left_rank, self.right_rank = (rank - 1) % self.size, (rank + 1) % self.size
        self.bytes_sent = self.bytes_received = self.calls = 0
        self.tcp_congestion = tcp_congestion  # e.g. "cubic": BBR under-fills rate-limited links between steps
        self.pacing_mbps = pacing_mbps  # most each connection sends (SO_MAX_PACING_RATE): leave room on the link
        self._left: socket.socket | None = None
        self._right: socket.socket | None = None
        self._closed = False
        if self.size > 1:
            self._connect()

    @classmethod
    def from_env(cls) -> RingWorker:
        """RING_RANK, RING_PEERS ("ip:port,ip:port,..."), optional RING_TIMEOUT (seconds)."""
        return cls(int(os.environ["RING_RANK"]), os.environ["RING_PEERS"].split(","),
                   float(os.environ.get("RING_TIMEOUT", "30")))

    def _name(self, rank: int) -> str:
        host, port = self.peers[rank]
        return f"rank {rank} ({host}:{port})"

    def _connect(self) -> None:
        """Listen, then alternate connect attempts to the right with accepting the left: any start order works."""
        deadline = time.monotonic() + self.timeout
        right_addr, delay, last_error = self.peers[self.right_rank], 0.01, "no attempt"
        with socket.create_server(self.peers[self.rank], backlog=self.size) as listener:
            while self._left is None or self._right is None:
                remaining = deadline - time.monotonic()
                if self._right is None:
                    try:
                        conn = socket.create_connection(right_addr, timeout=max(0.01, min(remaining, 5.0)))
                        conn.sendall(_HELLO.pack(_MAGIC, self.rank, self.size))
                        self._right = conn
                    except OSError as e:
                        last_error = str(e)
                if self._left is not None and self._right is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    why = (f"could not connect to {self._name(self.right_rank)} ({last_error})" if self._right is None
                           else f"{self._name(self.left_rank)} did not connect to us")
                    self.close()
                    raise RingError(f"setup: {why} within {self.timeout}s")
                if self._left is None:  # wait for the left peer during the backoff instead of sleeping
                    listener.settimeout(min(delay, remaining) if self._right is None else remaining)
                    try:
                        self._left = self._check_hello(listener.accept()[0], deadline)
                    except OSError:  # timed out: try the right neighbour again
                        pass
                else:
                    time.sleep(min(delay, remaining))
                delay = min(2 * delay, 0.25)
        for s in (self._left, self._right):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tcp_congestion:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.tcp_congestion.encode())
            if self.pacing_mbps:
                s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, int(self.pacing_mbps * 1e6 / 8))
            s.setblocking(False)

    @property
    def congestion_control(self) -> str:
        """The TCP congestion control of the ring's connections (reported by benchmarks)."""
        used = {s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
                for s in (self._left, self._right) if s is not None}
        return ",".join(sorted(used))

    def _check_hello(self, conn: socket.socket, deadline: float) -> socket.socket | None:
        """Keep the connection only if it is our left neighbour of the same ring (strays are dropped)."""
        try:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            hello = b""
            while len(hello) < _HELLO.size and (chunk := conn.recv(_HELLO.size - len(hello))):
                hello += chunk
            if len(hello) == _HELLO.size and _HELLO.unpack(hello) == (_MAGIC, self.left_rank, self.size):
                return conn
        except OSError:
            pass
        conn.close()
        return None

    def _fail(self, message: str) -> RingError:
        """Close first, so the neighbours see EOF at once and the error travels round the ring."""
        self.close()
        return RingError(message)

    def _exchange(self, sends: list, recvs: list, step: str, on_first: Callable[[], None] | None = None) -> None:
        """Send to the right while receiving from the left: blocking sends could fill both TCP buffers and deadlock."""
        assert self._left is not None and self._right is not None
        sends = [memoryview(b).cast("B") for b in sends if len(b)]
        recvs = [memoryview(b).cast("B") for b in recvs if len(b)]
        si = so = ri = ro = 0
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as sel:
            if sends:
                sel.register(self._right, selectors.EVENT_WRITE)
            if recvs:
                sel.register(self._left, selectors.EVENT_READ)
            while si < len(sends) or ri < len(recvs):
                remaining = deadline - time.monotonic()
                ready = sel.select(remaining) if remaining > 0 else []
                if not ready:
                    who = f"receiving from {self._name(self.left_rank)}" if ri < len(recvs) else \
                        f"sending to {self._name(self.right_rank)}"
                    raise self._fail(f"{step}: timed out after {self.timeout}s {who}")
                for key, _ in ready:
                    try:
                        if key.fileobj is self._right:
                            so += self._right.send(sends[si][so:])
                            if so == len(sends[si]):
                                si, so = si + 1, 0
                                if si == len(sends):
                                    sel.unregister(self._right)
                        else:
                            n = self._left.recv_into(recvs[ri][ro:])
                            if n == 0:
                                raise self._fail(f"{step}: {self._name(self.left_rank)} closed the connection")
                            ro += n
                            if ro == len(recvs[ri]):
                                ri, ro = ri + 1, 0
                                if ri == 1 and on_first is not None:
                                    on_first()
                                if ri == len(recvs):
                                    sel.unregister(self._left)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as e:
                        peer = self.right_rank if key.fileobj is self._right else self.left_rank
                        raise self._fail(f"{step}: connection to {self._name(peer)} failed: {e}") from e

    def allreduce(self, array: np.ndarray) -> np.ndarray:
        """The elementwise sum of `array` over all ranks, as a new array (the input is untouched)."""
        return self.allreduce_(np.array(array, order="C", copy=True))

    def allreduce_(self, array: np.ndarray) -> np.ndarray:
        """Sum in place (C-contiguous, writeable, native byte order) and return `array`; saves one copy."""
        flat = self._start(array)
        if self.size > 1:
            self._allgather(self._reduce_scatter(flat))
        return array

    def allreduce_cast(self, array: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The sum in ``array``'s (wide) dtype, cast once to ``dtype``: partial sums travel wide in the
        reduce-scatter, each finished segment is cast by its owner and travels narrow in the allgather
        (float32 gradients summed in float64: 3(N-1)/N of the tensor on the wire, not 4(N-1)/N)."""
        flat = self._start(array)
        out = np.empty(flat.size, dtype)
        if self.size == 1:
            out[:] = flat
            return out
        wide = self._reduce_scatter(flat)
        narrow = [out[lo:lo + len(w)] for lo, w in zip((lo for lo, _ in segments(flat.size, self.size)), wide)]
        own = (self.rank + 1) % self.size
        narrow[own][:] = wide[own]
        self._allgather(narrow)
        return out

    def _start(self, array: np.ndarray) -> np.ndarray:
        if self._closed:
            raise RingError(f"{self._name(self.rank)}: worker is closed")
        if array.dtype not in DTYPES or not array.dtype.isnative:
            raise TypeError(f"dtype {array.dtype} is not one of {sorted(str(d) for d in DTYPES)} (native order)")
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError("allreduce_ needs a C-contiguous writeable array")
        self.calls += 1
        return array.reshape(-1)

    def _reduce_scatter(self, flat: np.ndarray) -> list[np.ndarray]:
        """N-1 steps; afterwards this rank's segment (rank + 1) holds the complete sum.  Returns the segments."""
        n, r = self.size, self.rank
        seg = [flat[lo:hi] for lo, hi in segments(flat.size, n)]
        scratch = np.empty(len(seg[0]), flat.dtype)  # segment 0 is a longest one
        header = _HEADER.pack(_MAGIC, self.calls & 0xFFFFFFFF, flat.size, flat.dtype.str.encode())
        theirs = bytearray(_HEADER.size)

        def check_header() -> None:
            if bytes(theirs) != header:
                _, calls, count, dt = _HEADER.unpack(theirs)
                dt = dt.rstrip(b"\0").decode(errors="replace")
                raise self._fail(f"reduce-scatter step 1/{n - 1}: {self._name(self.left_rank)} is at call {calls} "
                                 f"with {count} x {dt}, we are at call "
                                 f"{self.calls} with {flat.size} x {flat.dtype.str}")

        for s in range(n - 1):
            out, into = seg[(r - s) % n], seg[(r - s - 1) % n]
            buf = scratch[:len(into)]
            first = s == 0
            self._exchange([header, _raw(out)] if first else [_raw(out)],
                           [theirs, _raw(buf)] if first else [_raw(buf)],
                           f"reduce-scatter step {s + 1}/{n - 1}", check_header if first else None)
            np.add(into, buf, out=into)
            self.bytes_sent += out.nbytes
            self.bytes_received += buf.nbytes
        return seg

    def _allgather(self, seg: list[np.ndarray]) -> None:
        """N-1 steps: rank r owns the complete segment r+1 and passes it on, until every rank has all."""
        n, r = self.size, self.rank
        for s in range(n - 1):
            out, into = seg[(r + 1 - s) % n], seg[(r - s) % n]
            self._exchange([_raw(out)], [_raw(into)], f"allgather step {s + 1}/{n - 1}")
            self.bytes_sent += out.nbytes
            self.bytes_received += into.nbytes

    def close(self) -> None:
        """Drop both connections (idempotent); shutdown wakes any peer blocked on them."""
        self._closed = True
        for s in (self._left, self._right):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        self._left = self._right = None

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
