"""``Worker``: what a training script holds. One UDP socket per tree, one I/O thread, allreduce calls in order.

    from worker import Worker
    w = Worker.from_env()                  # INA_JOB_SPEC=path/to/job.json INA_RANK=0 (or RANK)
    total = w.allreduce(gradient)          # float32/float64/float16 or int32, any shape
    handle = w.allreduce_async(gradient)   # a Future: overlap with computation, then .result()
    handle = w.allreduce_async_(gradient)  # the same, the sum written into gradient itself

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

from worker import calls, driver, protocol
from worker.batch_io import BatchSocket
from worker.buffers import BufferPool
from worker.engine import Pacer, Stats, Tree, overflow_error
from worker.errors import AllreduceError, SwitchOverflowError
from worker.jobspec import JobSpec, SpecWatch, spec_path
from worker.ring import RingError, RingWorker


class Worker:
    def __init__(self, spec: JobSpec, rank: int, *, timeout: float = 10.0, window: int | None = None,
                 bind_ip: str | None = None, spec_file: str | Path | None = None) -> None:
        """``spec_file``: where ``spec`` came from.  The worker then watches it, and when the controller
        writes that a switch lost its registers (restarted), it sends its last window again, so that
        calls in flight complete exactly (``from_env`` passes it; without it a restart fails them)."""
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
        self._trees: list[Tree] = []
        self._sockets: dict[Tree, BatchSocket] = {}
        try:
            for i, tree in enumerate(spec.trees if spec.ina_share > 0 else ()):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                io = BatchSocket(sock, P.packet_bytes, (me.switch_ip, spec.udp_port))
                t = Tree(io.send, me.switch, tree.job_id, tree.children[rank], len(spec.members), window, P,
                         timeout, _tree_name(spec, i), pacer, incarnation=tree.incarnation)
                self._trees.append(t)
                self._sockets[t] = io
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                try:
                    sock.bind((bind_ip if bind_ip is not None else me.ip, tree.port))
                except OSError as e:
                    raise OSError(f"rank {rank} cannot listen on {me.ip}:{tree.port} for {_tree_name(spec, i)} "
                                  f"(is it running on {me.host}?): {e}") from e
                sock.setblocking(False)
        except BaseException:
            for io in self._sockets.values():
                io.sock.close()
            raise
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-worker-{rank}")
        self._ring_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-ring-{rank}")
        self._ring: RingWorker | None = None  # connected on the first call that needs it
        self._timeout = timeout
        self._broken = False
        self._closed = False
        self.last_parts: dict[str, float] = {}  # seconds each part of the last call took ("trees", "ring")
        self._lock = threading.Lock()
        self._pool = BufferPool()  # calls' private copies of their input, and allreduce_'s sums
        self._watching = threading.Event()  # set: stop watching
        # job spec changes the watch thread saw, for the I/O thread to apply: job id -> (incarnation, name)
        self._spec_changes: dict[int, tuple[int, str]] = {}
        self._idle_failure: BaseException | None = None  # a recovery between calls that failed
        if spec_file is not None and self._trees:
            watch = SpecWatch(spec_file, spec)
            threading.Thread(target=self._watch, args=(watch,), daemon=True, name=f"ina-watch-{rank}").start()

    @classmethod
    def from_env(cls, **options) -> Worker:
        """The spec from INA_JOB_SPEC (else ./ina-job.json) and the rank from INA_RANK, or torchrun's RANK."""
        rank = os.environ.get("INA_RANK", os.environ.get("RANK"))
        if rank is None:
            raise RuntimeError("set INA_RANK (or torchrun's RANK) to this worker's rank, and INA_JOB_SPEC to the job "
                               "spec file")
        path = spec_path()
        return cls(JobSpec.load(path), int(rank), spec_file=path, **options)

    @property
    def stats(self) -> Stats:
        """Counts over the worker's life, all trees together."""
        return Stats.total([t.stats for t in self._trees])

    # --- the API -------------------------------------------------------------------------------

    def allreduce(self, array: np.ndarray) -> np.ndarray:
        """The sum over all workers, as a new array of the same shape and dtype."""
        return self.allreduce_async(array).result()

    def allreduce_(self, array: np.ndarray) -> np.ndarray:
        """In place: ``array`` receives the sum (and is returned)."""
        return self.allreduce_async_(array).result()

    def allreduce_async(self, array: np.ndarray) -> Future:
        """Start an allreduce; the Future's result() is the sum (or raises its AllreduceError).  Its
        ``timing`` dict gets ``perf_counter()`` times: submitted, started (on the I/O thread), finished."""
        return self._submit(array, None)

    def allreduce_async_(self, array: np.ndarray) -> Future:
        """Start an in-place allreduce: the I/O thread writes the sum into ``array``, which the Future's
        result() returns.  ``array`` must not change before then (its values are read at this call)."""
        return self._submit(array, array)

    def _submit(self, array: np.ndarray, target: np.ndarray | None) -> Future:
        """The call, queued for the I/O thread; its result is the sum as ``array`` was, or ``target``
        holding it."""
        data, exponents = self._checked(array)
        timing = {"submitted": time.perf_counter()}
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this Worker is closed")
                future = self._io.submit(self._timed, timing, data, exponents, array.size, array.shape, array.dtype,
                                         target)
        except BaseException:
            self._pool.give(data)
            raise
        future.timing = timing  # type: ignore[attr-defined]
        return future

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._watching.set()
        self._io.shutdown(wait=True)
        self._ring_io.shutdown(wait=True)
        for io in self._sockets.values():
            io.sock.close()
        if self._ring is not None:
            self._ring.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def ring_bytes_sent(self) -> int:
        """Tensor bytes this worker sent round the job's ring (a pure ring's, or a hybrid's ring part)."""
        return 0 if self._ring is None else self._ring.bytes_sent

    # --- inside ----------------------------------------------------------------------------

    def _watch(self, watch: SpecWatch, period: float = 0.2) -> None:
        """Look at the spec file every ``period``; a tree whose switches lost their registers recovers on
        the I/O thread, which alone writes the trees: inside a running call's loop (``_apply_spec``
        before each turn), or between calls in a task of its own, queued while there is work."""
        ids = {t.job_id for t in self._trees}
        queued: Future | None = None
        while not self._watching.wait(period):
            changes = {j: (incarnation, _tree_name(watch.spec, i))  # a tree moved off a dead switch has a new root
                       for j, incarnation in watch.lost_registers().items() if j in ids
                       for i in [next(i for i, t in enumerate(watch.spec.trees) if t.job_id == j)]}
            with self._lock:
                self._spec_changes.update(changes)
                pending = bool(self._spec_changes)
            busy = pending or any(t.echo_end is not None or t.lost_registers for t in self._trees)
            if busy and (queued is None or queued.done()):
                with self._lock:
                    if not self._closed:
                        queued = self._io.submit(self._recover_idle)

    def _apply_spec(self) -> None:
        """On the I/O thread: the job spec changes the watch thread saw."""
        with self._lock:
            changes, self._spec_changes = self._spec_changes, {}
        for t in self._trees:
            if t.job_id in changes:
                t.incarnation, t.name = changes[t.job_id]

    def _recover_idle(self) -> None:
        """Between calls (a call's own loop does the same).  A failure here is kept for the next call
        to raise: this task's Future has no reader."""
        try:
            self._apply_spec()
            driver.tend_idle(self._trees, self._sockets)
        except BaseException as e:
            self._idle_failure = e
            self._broken = True

    def _checked(self, array: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``calls.prepare`` into memory from the pool (given back if the input is bad)."""
        taken: list[np.ndarray] = []

        def take(n: int, dtype: type) -> np.ndarray:
            taken.append(self._pool.take(n, dtype))
            return taken[-1]

        try:
            return calls.prepare(array, self.spec.values, take)
        except BaseException:
            for buffer in taken:
                self._pool.give(buffer)
            raise

    def _timed(self, timing: dict[str, float], padded: np.ndarray, exponents: np.ndarray | None, size: int,
               shape: tuple[int, ...], dtype: np.dtype, target: np.ndarray | None) -> np.ndarray:
        """The sums: into ``target`` through memory lent by the pool, or as a new array (whose fresh
        pages the caller keeps)."""
        timing["started"] = time.perf_counter()
        out = self._pool.take(len(padded), padded.dtype) if target is not None else np.empty(len(padded), padded.dtype)
        try:
            self._run(padded, exponents, size, dtype, out)
            if target is None:
                return out[:size].astype(dtype, copy=False).reshape(shape)
            np.copyto(target, out[:size].reshape(target.shape), casting="unsafe")  # float16 is summed as float32
            return target
        finally:
            if target is not None:
                self._pool.give(out)
            self._pool.give(padded)
            timing["finished"] = time.perf_counter()

    def _run(self, padded: np.ndarray, exponents: np.ndarray | None, size: int, dtype: np.dtype,
             out: np.ndarray) -> None:
        """The sums of ``padded`` (its first ``size`` elements are the call's) into ``out``."""
        if self._idle_failure is not None:
            raise AllreduceError(f"this Worker failed between calls ({type(self._idle_failure).__name__}: "
                                 f"{self._idle_failure}); start a new job") from self._idle_failure
        if self._broken or any(t.broken for t in self._trees):
            raise AllreduceError("an earlier allreduce of this Worker failed, so its packet sequence no longer "
                                 "matches the other workers'; start a new job")
        V = self.spec.values
        exact = dtype == np.int32
        k, parts = calls.tree_parts(self.spec, self._trees, padded, exponents, exact, out)
        stop = threading.Event()
        rest = padded[k * V:size]
        data = rest.astype(self._ring_dtype(dtype))  # a copy: padded goes back to the pool
        ring = self._ring_io.submit(self._ring_part, data, dtype, stop) if len(rest) else None
        started = time.perf_counter()
        try:
            busy = {call.tree for _, call in parts}
            idle = tuple(t for t in self._trees if t not in busy)
            driver.run_calls([call for _, call in parts], self._sockets, stop, idle, self._apply_spec)
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
        overflowed = [first + c for first, call in parts for c in call.overflowed]
        if overflowed:
            raise overflow_error(overflowed, V)
        if exact and np.abs(ring_sum).max(initial=0) > np.iinfo(np.int32).max:
            raise SwitchOverflowError(f"the int32 sum of the ring part (elements {k * V}..) leaves int32")
        out[k * V:size] = ring_sum

    def _ring_dtype(self, dtype: np.dtype) -> type:
        """What the ring sums in.  int32 in int64, so an overflow is seen (as the switches report it), not
        wrapped.  A pure ring in the tensor's own type, as gloo does: 2(N-1)/N of it on each link.  A
        hybrid's ring part (or ``ring_sum="float64"``) in float64 partials, cast once: float32 partial
        sums would err beyond the switches' stated bound (docs/hybrid.md)."""
        if dtype == np.int32:
            return np.int64
        return dtype.type if self.spec.ring_in_tensor_type or dtype == np.float64 else np.float64

    def _ring_part(self, data: np.ndarray, dtype: np.dtype, stop: threading.Event) -> tuple[np.ndarray, float]:
        """The ring's share of a call, in ``data``'s dtype (``_ring_dtype``), cast once to ``dtype``; an
        int32 sum is checked after; and the seconds it took.  A failure stops the trees too."""
        try:
            if self._ring is None:
                self._ring = RingWorker(self.rank, self.spec.ring_peers, timeout=self._timeout,
                                        pacing_mbps=self.spec.ring_pace_mbps)
            started = time.perf_counter()
            summed_as_is = data.dtype in (np.dtype(np.int64), dtype)
            total = self._ring.allreduce_(data) if summed_as_is else self._ring.allreduce_cast(data, dtype)
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
