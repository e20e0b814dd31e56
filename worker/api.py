"""``Worker``: what a training script holds. One UDP socket per tree, one I/O thread, allreduce calls in order.

    from worker import Worker
    w = Worker.from_env()                  # INA_JOB_SPEC=path/to/job.json INA_RANK=0 (or RANK)
    total = w.allreduce(gradient)          # float32/float64/float16 or int32, any shape
    handle = w.allreduce_async(gradient)   # a Future: overlap with computation, then .result()

Every worker of the job must make the same sequence of calls with arrays of the same size
(as with any collective); the sum is the switch's, so every worker gets the same bits back.
A job over several aggregation trees splits each call by the trees' shares, on chunk
boundaries, and runs the parts at once (one socket per tree, one I/O loop).  A hybrid job
also sends a share of each call round a TCP ring of its members (``worker.ring``), on a
second thread, at the same time: the trees take what they can, the ring the rest.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from worker import protocol, quantize
from worker.engine import Allreduce, Link, Pacer, Stats, overflow_error, run_together
from worker.errors import AllreduceError, SwitchOverflowError
from worker.jobspec import JobSpec
from worker.ring import RingError, RingWorker

SUPPORTED = (np.float32, np.float64, np.float16, np.int32)
RING_TCP = "cubic"  # a hybrid's ring keeps shaped links full with CUBIC; BBR left them 30-40% idle (bench_allreduce)


class Worker:
    def __init__(self, spec: JobSpec, rank: int, *, timeout: float = 10.0, window: int | None = None,
                 bind_ip: str | None = None) -> None:
        if not 0 <= rank < len(spec.members):
            raise ValueError(f"rank {rank} is not in job {spec.name} (ranks 0..{len(spec.members) - 1})")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        window = spec.pool_size if window is None else window
        if not 1 <= window <= spec.pool_size:
            raise ValueError(f"window {window} must be within 1..{spec.pool_size} (the job's pool size)")
        self.spec, self.rank = spec, rank
        me = spec.members[rank]
        P = protocol.load(spec.values, spec.udp_port)
        pacer = Pacer(spec.ina_pace_mbps, P.frame_bytes) if spec.ina_pace_mbps else None
        self._links: list[Link] = []
        try:
            for i, tree in enumerate(spec.trees if spec.ina_share > 0 else ()):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._links.append(Link(sock, (me.switch_ip, spec.udp_port), tree.job_id, tree.children[rank],
                                        len(spec.members), window, P, timeout, _tree_name(spec, i), pacer))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                try:
                    sock.bind((bind_ip if bind_ip is not None else me.ip, tree.port))
                except OSError as e:
                    raise OSError(f"rank {rank} cannot listen on {me.ip}:{tree.port} for {_tree_name(spec, i)} "
                                  f"(is it running on {me.host}?): {e}") from e
                sock.setblocking(False)
        except BaseException:
            for link in self._links:
                link.sock.close()
            raise
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-worker-{rank}")
        self._ring_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-ring-{rank}")
        self._ring: RingWorker | None = None  # connected on the first call that needs it
        self._timeout = timeout
        self._broken = False
        self._closed = False
        self.last_parts: dict[str, float] = {}  # seconds each part of the last call took ("trees", "ring")
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, **options) -> Worker:
        """INA_JOB_SPEC (the controller's job file) and INA_RANK, or torchrun's RANK."""
        path = os.environ.get("INA_JOB_SPEC")
        rank = os.environ.get("INA_RANK", os.environ.get("RANK"))
        if not path or rank is None:
            raise RuntimeError("set INA_JOB_SPEC to the job spec file and INA_RANK (or RANK) to this worker's rank")
        return cls(JobSpec.load(Path(path)), int(rank), **options)

    @property
    def stats(self) -> Stats:
        """Counts over the worker's life, all trees together."""
        total = Stats()
        for link in self._links:
            for name, value in vars(link.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    # --- the API -------------------------------------------------------------------------------

    def allreduce(self, array: np.ndarray) -> np.ndarray:
        """The sum over all workers, as a new array of the same shape and dtype."""
        return self.allreduce_async(array).result()

    def allreduce_(self, array: np.ndarray) -> np.ndarray:
        """In place: ``array`` receives the sum (and is returned)."""
        array[...] = self.allreduce(array)
        return array

    def allreduce_async(self, array: np.ndarray) -> Future:
        """Start an allreduce; the Future's result() is the sum (or raises its AllreduceError).  Its
        ``timing`` dict gets ``perf_counter()`` times: submitted, started (on the I/O thread), finished."""
        data = self._checked(array)
        timing = {"submitted": time.perf_counter()}
        with self._lock:
            if self._closed:
                raise RuntimeError("this Worker is closed")
            future = self._io.submit(self._timed, timing, data, array.shape, array.dtype)
        future.timing = timing  # type: ignore[attr-defined]
        return future

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._io.shutdown(wait=True)
        self._ring_io.shutdown(wait=True)
        for link in self._links:
            link.sock.close()
        if self._ring is not None:
            self._ring.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- inside ----------------------------------------------------------------------------

    def _checked(self, array: np.ndarray) -> np.ndarray:
        """A private flat copy; bad input raises here, before anything is sent."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"allreduce takes a numpy array, not {type(array).__name__}")
        if array.dtype.type not in SUPPORTED:
            raise TypeError(f"allreduce sums {', '.join(t.__name__ for t in SUPPORTED)}, not {array.dtype}")
        flat = np.ascontiguousarray(array).reshape(-1)
        if array.dtype.kind == "f":
            if not np.isfinite(flat).all():
                bad = np.flatnonzero(~np.isfinite(flat))
                raise ValueError(f"{len(bad)} non-finite value(s), first at flat index {bad[0]}: {flat[bad[0]]}")
            return flat.astype(np.float64)
        return flat.copy()

    def _timed(self, timing: dict[str, float], *call: object) -> np.ndarray:
        timing["started"] = time.perf_counter()
        try:
            return self._run(*call)  # type: ignore[arg-type]
        finally:
            timing["finished"] = time.perf_counter()

    def _run(self, flat: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        if self._broken or any(link.broken for link in self._links):
            raise AllreduceError("an earlier allreduce of this Worker failed, so its packet sequence no longer "
                                 "matches the other workers'; start a new job")
        V = self.spec.values
        n = -(-len(flat) // V)
        k = self.spec.ina_chunks(n)  # the first k chunks through the trees, the rest round the ring
        chunks = np.zeros((k, V), flat.dtype)
        chunks.reshape(-1)[:min(len(flat), k * V)] = flat[:k * V]
        exact = dtype == np.int32
        parts = [(first, Allreduce(link, chunks[first:end], exact))
                 for link, (first, end) in zip(self._links, self.spec.split(k)) if end > first]
        stop = threading.Event()
        rest = flat[k * V:]
        ring = self._ring_io.submit(self._ring_part, rest.astype(np.int64) if exact else rest, dtype, stop) \
            if len(rest) else None
        started = time.perf_counter()
        try:
            run_together([stream for _, stream in parts], stop)
            self.last_parts = {"trees": time.perf_counter() - started} if parts else {}
        except AllreduceError:
            if ring is None or not stop.is_set():  # the trees failed on their own: the ring gives up too
                self._broken = True
                if self._ring is not None:
                    self._ring.close()
                raise
        finally:
            stop.set()  # a ring still running after the trees failed gives up too
        if ring is not None:
            ring_sum, self.last_parts["ring"] = ring.result()  # raises the ring's error first
        else:
            ring_sum = rest
        sums = np.concatenate([stream.sums for _, stream in parts]) if parts else np.zeros((0, V), np.int32)
        overflowed = [first + c for first, stream in parts for c in stream.overflowed]
        if overflowed:
            raise overflow_error(overflowed, V)
        if exact:
            if np.abs(ring_sum).max(initial=0) > np.iinfo(np.int32).max:
                raise SwitchOverflowError(f"the int32 sum of the ring part (elements {k * V}..) leaves int32")
            out = sums.reshape(-1)[:len(flat)]
        else:
            agreed = np.concatenate([stream.agreed for _, stream in parts]) if parts else np.zeros(0, np.int8)
            out = quantize.dequantize(sums, quantize.shifts(agreed, len(self.spec.members))).reshape(-1)[:len(flat)]
        return np.concatenate([out, ring_sum]).astype(dtype).reshape(shape)

    def _ring_part(self, data: np.ndarray, dtype: np.dtype, stop: threading.Event) -> tuple[np.ndarray, float]:
        """The ring's share of a call, summed in float64 and cast once (int32: summed in int64, checked
        after), and the seconds it took; a failure stops the trees too."""
        try:
            if self._ring is None:
                self._ring = RingWorker(self.rank, self.spec.ring_peers, timeout=self._timeout,
                                        tcp_congestion=RING_TCP, pacing_mbps=self.spec.ring_pace_mbps)
            started = time.perf_counter()
            total = self._ring.allreduce_(data) if data.dtype == np.int64 else self._ring.allreduce_cast(data, dtype)
            return total, time.perf_counter() - started
        except (RingError, OSError) as e:
            self._broken = True
            stop.set()
            raise AllreduceError(f"ring part of job {self.spec.name} (rank {self.rank}): {e}") from e
        except BaseException:
            stop.set()
            raise


def _tree_name(spec: JobSpec, i: int) -> str:
    tree = spec.trees[i]
    return f"tree {i + 1}/{len(spec.trees)} of job {spec.name} (root {tree.root}, job id {tree.job_id})"
