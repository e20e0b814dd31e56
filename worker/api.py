"""``Worker``: what a training script holds. One UDP socket per tree, one I/O thread, allreduce calls in order.

    from worker import Worker
    w = Worker.from_env()                  # INA_JOB_SPEC=path/to/job.json INA_RANK=0 (or RANK)
    w = Worker.from_controller(["h1", "h2"], rank, "train")  # the controller service's job (INA_CONTROLLER)
    total = w.allreduce(gradient)          # float32/float64/float16 or int32, any shape
    handle = w.allreduce_async(gradient)   # a Future: overlap with computation, then .result()
    handle = w.allreduce_async_(gradient)  # the same, the sum written into gradient itself

Every worker of the job must make the same sequence of calls with arrays of the same size
(as with any collective); the sum is the switch's, so every worker gets the same bits back.
Each call runs as its job's spec chooses for its size (``JobSpec.choose``: through the trees, round a
TCP ring of the members, or both at once).  A call's part through several aggregation trees is split
by the trees' shares, on chunk boundaries, and the parts run at once (one socket per tree, one I/O
loop); a ring part runs on a second thread at the same time (``worker.ring``).
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import numpy as np

from ina_api.client import CONTROLLER_ENV, JobsClient
from worker import calls, driver, native, protocol
from worker.batch_io import BatchSocket
from worker.buffers import BufferPool
from worker.engine import Stats, Tree, TreeConfig
from worker.errors import AllreduceError
from worker.jobspec import SPEC_PERIOD, JobSpec, SpecWatch, spec_path
from worker.ring import RingError, RingWorker
from worker.service_job import JOIN_TIMEOUT, ServiceJob
from worker.tuner import Choice

_OPEN: weakref.WeakSet[Worker] = weakref.WeakSet()  # workers whose watch thread runs


@atexit.register
def _close_open_workers() -> None:
    """A worker left open is closed at exit, before the interpreter tears down: a DDP rank that never closed
    its worker sometimes aborted in torch's exit while the daemon watch thread still ran (2 of 17 runs)."""
    for w in list(_OPEN):
        w.close()


class Worker:
    _stalled: frozenset[int] = frozenset()  # the running call's stalled trees: replaced whole by the I/O thread

    def __init__(self, spec: JobSpec, rank: int, *, timeout: float = 10.0, window: int | None = None,
                 bind_ip: str | None = None, spec_file: str | Path | None = None,
                 service: ServiceJob | None = None, threads: int | None = None) -> None:
        """``spec_file``: where ``spec`` came from.  The worker then watches it, and when the controller
        writes that a switch lost its registers (restarted), it sends its last window again, so that
        calls in flight complete exactly (``from_env`` passes it; without it a restart fails them).
        ``service``: the job as the controller service gave it; the worker follows its spec the same way,
        and closes it at ``close`` (which deletes the job if this rank owns it).
        ``threads``: how many threads run a call's trees at once, each tree's socket on one of them (the
        native core; default: the cores this process may use, at most one per tree)."""
        if not 0 <= rank < len(spec.members):
            raise ValueError(f"rank {rank} is not in job {spec.name} (ranks 0..{len(spec.members) - 1})")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        window = spec.pool_size if window is None else window
        if not 1 <= window <= spec.pool_size:
            raise ValueError(f"window {window} must be within 1..{spec.pool_size} (the job's pool size)")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self.spec, self.rank = spec, rank
        self._P = protocol.load(spec.values, spec.udp_port)
        core = native.core()  # the C core where it builds, else the reference (said once)
        self._trees, self._sockets = self._open_trees(core, window, timeout, bind_ip)
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-worker-{rank}")
        cores = len(os.sched_getaffinity(0))
        self.threads = min(threads or cores, max(1, len(self._trees))) if core is native else 1
        self._helpers = ThreadPoolExecutor(max_workers=self.threads - 1, thread_name_prefix=f"ina-lane-{rank}") \
            if self.threads > 1 else None
        self._ring_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ina-ring-{rank}")
        self._ring: RingWorker | None = None  # connected on the first call that needs it
        self._timeout = timeout
        self._broken = False
        self._closed = False
        self.last_parts: dict[str, float] = {}  # seconds each part of the last call took ("trees", "ring")
        self.last_choice: Choice | None = None  # how the last call ran (its method, share, layout, prediction)
        self._lock = threading.Lock()
        self._pool = BufferPool()  # calls' private copies of their input, and allreduce_'s sums
        self._watching = threading.Event()  # set: stop watching
        self._watcher: threading.Thread | None = None
        # job spec changes the watch thread saw, for the I/O thread to apply: job id -> (incarnation, name, where
        # its contributions go: a server's address, or None for the member's switch)
        self._spec_changes: dict[int, tuple[int, str, str | None]] = {}
        self._idle_failure: BaseException | None = None  # a recovery between calls that failed
        self._incarnations = {t.job_id: t.incarnation for t in spec.trees}  # the latest spec's, update_spec's
        self.service = service
        if self._trees:
            watch = SpecWatch(spec_file) if spec_file is not None else None
            self._watcher = threading.Thread(target=self._watch, args=(watch,), daemon=True, name=f"ina-watch-{rank}")
            self._watcher.start()
            _OPEN.add(self)
        if service is not None:
            service.follow(self.update_spec, stalled=lambda: self.stalled_trees)

    @classmethod
    def from_env(cls, **options) -> Worker:
        """The rank from INA_RANK, or torchrun's RANK.  The spec from INA_JOB_SPEC; else, with INA_CONTROLLER
        set, from the controller service: a job of INA_MEMBERS (comma-separated, each rank's host name or
        address, in rank order) named INA_JOB_NAME (``from_controller``); else from ./ina-job.json."""
        rank = os.environ.get("INA_RANK", os.environ.get("RANK"))
        if rank is None:
            raise RuntimeError("set INA_RANK (or torchrun's RANK) to this worker's rank, and INA_JOB_SPEC to the job "
                               "spec file")
        if not os.environ.get("INA_JOB_SPEC") and os.environ.get(CONTROLLER_ENV):
            members = [m.strip() for m in os.environ.get("INA_MEMBERS", "").split(",") if m.strip()]
            name = os.environ.get("INA_JOB_NAME", "")
            if not members or not name:
                raise RuntimeError(f"with {CONTROLLER_ENV} set, set INA_MEMBERS (every rank's host, comma-separated) "
                                   f"and INA_JOB_NAME (the same on every rank), or INA_JOB_SPEC to a job spec file")
            return cls.from_controller(members, int(rank), name, **options)
        path = spec_path()
        return cls(JobSpec.load(path), int(rank), spec_file=path, **options)

    @classmethod
    def from_controller(cls, members: Sequence[str | Sequence[str]], rank: int, name: str, *,
                        client: JobsClient | None = None, join_timeout: float = JOIN_TIMEOUT, timeout: float = 10.0,
                        window: int | None = None, bind_ip: str | None = None, **job_options) -> Worker:
        """A worker of the job ``name`` of the controller service (``client``, default
        ``JobsClient.from_env()``): every rank passes the same ``members`` (each rank's host name or
        address, or a list of its addresses) and ``name``.  Rank 0 creates the job (``job_options``:
        ``JobsClient.create``'s) and keeps its lease; the others wait up to ``join_timeout`` for it.  Every
        rank follows the job's spec; ``close`` on rank 0 deletes the job, so close it last."""
        if not 0 <= rank < len(members):
            raise ValueError(f"rank {rank} is not one of the {len(members)} members given")
        own = client is None
        client = JobsClient.from_env() if client is None else client
        try:
            job = ServiceJob.create(client, name, members, own_client=own, **job_options) if rank == 0 else \
                ServiceJob.join(client, name, join_timeout, own_client=own)
        except BaseException:
            if own:
                client.close()
            raise
        try:
            _check_members(job.spec, rank, members)
            return cls(job.spec, rank, timeout=timeout, window=window, bind_ip=bind_ip, service=job)
        except BaseException:
            job.close()
            raise

    def _open_trees(self, core: ModuleType, window: int, timeout: float,
                    bind_ip: str | None) -> tuple[list[Tree], dict[Tree, BatchSocket]]:
        """One tree of ``core`` per tree of the job, each with its socket bound to this rank's port for it."""
        spec, rank, P = self.spec, self.rank, self._P
        me = spec.members[rank]
        trees: list[Tree] = []
        sockets: dict[Tree, BatchSocket] = {}
        try:
            for i, tree in enumerate(spec.trees if spec.mode != "ring" else ()):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                io = BatchSocket(sock, P.packet_bytes, (tree.destination(rank) or me.switch_ip, spec.udp_port))
                config = TreeConfig(me.switch, tree.job_id, tree.children[rank], len(spec.members), window, P, timeout)
                t = core.Tree(config, _tree_name(spec, i), incarnation=tree.incarnation)
                trees.append(t)
                sockets[t] = io
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                try:
                    sock.bind((bind_ip if bind_ip is not None else me.ip, tree.port))
                except OSError as e:
                    raise OSError(f"rank {rank} cannot listen on {me.ip}:{tree.port} for {_tree_name(spec, i)} "
                                  f"(is it running on {me.host}?): {e}") from e
                sock.setblocking(False)
        except BaseException:
            for io in sockets.values():
                io.sock.close()
            raise
        return trees, sockets

    @property
    def stalled_trees(self) -> frozenset[int]:
        """The job ids of the trees of the running call that have had no result for a few retransmission
        timeouts (``driver.stall_after``) with packets in flight: a switch of theirs may be gone.  The lease
        renewal reports them to the service, which probes their switches.  Safe from any thread."""
        return self._stalled

    @property
    def stats(self) -> Stats:
        """Counts over the worker's life, all trees together."""
        return Stats.total([t.stats for t in self._trees])

    @property
    def round_trip_min(self) -> float | None:
        """The shortest round trip any tree saw, send to result in the worker's loop (seconds; None before
        a result): what a window waits for per round trip, where a call's time also holds its setup."""
        seen = [t.congestion.rtt_min for t in self._trees if t.congestion.srtt is not None]
        return min(seen) if seen else None

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
        result() returns.  ``array`` must not change before then: a contiguous float32, float64 or int32 array
        (``calls.summed_in_place``) is read as the call runs and its sums written into it as they come (a call
        that fails leaves it part summed), any other is read at this call."""
        return self._submit(array, array)

    def _submit(self, array: np.ndarray, target: np.ndarray | None) -> Future:
        """The call, queued for the I/O thread; its result is the sum as ``array`` was, or ``target``
        holding it."""
        data, exponents, lent = self._checked(array, in_place=target is not None)
        timing = {"submitted": time.perf_counter()}
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this Worker is closed")
                future = self._io.submit(self._timed, timing, data, exponents, array.shape, array.dtype, target,
                                         lent)
        except BaseException:
            if lent:
                self._pool.give(data)
            raise
        future.timing = timing  # type: ignore[attr-defined]
        return future

    def close(self) -> None:
        """Waits for the calls made; then the job's lease, if the service gave it, ends (rank 0 deletes it)."""
        with self._lock:
            self._closed = True
        _OPEN.discard(self)
        self._watching.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()  # no thread of this worker outlives it (torch's teardown aborts beside one)
        self._io.shutdown(wait=True)
        self._ring_io.shutdown(wait=True)
        if self._helpers is not None:
            self._helpers.shutdown(wait=True)
        for io in self._sockets.values():
            io.sock.close()
        if self._ring is not None:
            self._ring.close()
        if self.service is not None:
            self.service.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def ring_bytes_sent(self) -> int:
        """Tensor bytes this worker sent round the job's ring (a pure ring's, or a hybrid's ring part)."""
        return 0 if self._ring is None else self._ring.bytes_sent

    def update_spec(self, spec: JobSpec) -> None:
        """A newer spec of this job, from its file or the controller service: each tree whose incarnation
        grew (its switches lost their registers) sends its last window again, so that calls in flight
        complete exactly.  That happens on the I/O thread: inside a running call, or between calls
        within SPEC_PERIOD.  An older or the same spec changes nothing."""
        if spec.name != self.spec.name or len(spec.members) != len(self.spec.members):
            raise ValueError(f"the spec of job {spec.name} ({len(spec.members)} members) is not one of job "
                             f"{self.spec.name} ({len(self.spec.members)} members)")
        ids = {t.config.job_id for t in self._trees}
        with self._lock:
            for i, tree in enumerate(spec.trees):
                if tree.job_id in ids and tree.incarnation > self._incarnations[tree.job_id]:
                    self._incarnations[tree.job_id] = tree.incarnation
                    # a tree moved off a dead switch has a new root (a server's, a new address)
                    self._spec_changes[tree.job_id] = (tree.incarnation, _tree_name(spec, i),
                                                       tree.destination(self.rank))

    # --- inside ----------------------------------------------------------------------------

    def _watch(self, watch: SpecWatch | None, period: float = SPEC_PERIOD) -> None:
        """Every ``period``: the spec file (if any) into ``update_spec``; and a tree whose switches lost
        their registers recovers on the I/O thread, which alone writes the trees: inside a running call's
        loop (``_apply_spec`` before each turn), or between calls in a task of its own, queued while there
        is work."""
        queued: Future | None = None
        while not self._watching.wait(period):
            spec = watch.changed() if watch is not None else None
            if spec is not None:
                try:
                    self.update_spec(spec)
                except ValueError:
                    pass  # the file holds another job's spec now: ignored, as an unreadable one is
            with self._lock:
                pending = bool(self._spec_changes)
            busy = pending or any(t.echo is not None or t.lost_registers for t in self._trees)
            if busy and (queued is None or queued.done()):
                with self._lock:
                    if not self._closed:
                        queued = self._io.submit(self._recover_idle)

    def _turn(self, tree_calls: list) -> None:
        """On the I/O thread, before each turn of a call's loop: the spec changes, and the stalled trees
        (a tree newly stalled renews the lease at once, to report it)."""
        self._apply_spec()
        self._note_stalls(driver.stalled(tree_calls))

    def _note_stalls(self, now: frozenset[int]) -> None:
        before, self._stalled = self._stalled, now
        if now - before and self.service is not None:
            self.service.stalled_now()

    def _apply_spec(self) -> None:
        """On the I/O thread: the job spec changes the watch thread saw."""
        with self._lock:
            changes, self._spec_changes = self._spec_changes, {}
        me = self.spec.members[self.rank]
        for t in self._trees:
            if t.config.job_id in changes:
                incarnation, name, to_ip = changes[t.config.job_id]
                t.spec_changed(incarnation, name)
                destination = (to_ip or me.switch_ip, self.spec.udp_port)
                if self._sockets[t].destination != destination:
                    self._sockets[t].retarget(destination)

    def _recover_idle(self) -> None:
        """Between calls (a call's own loop does the same).  A failure here is kept for the next call
        to raise: this task's Future has no reader."""
        try:
            self._apply_spec()
            driver.tend_idle(self._trees, self._sockets)
        except BaseException as e:
            self._idle_failure = e
            self._broken = True

    def _checked(self, array: np.ndarray, in_place: bool) -> tuple[np.ndarray, np.ndarray | None, bool]:
        """``calls.prepare`` into memory from the pool (given back if the input is bad), or ``array`` itself
        (``in_place``, where it can be); and whether the memory is the pool's."""
        taken: list[np.ndarray] = []

        def take(n: int, dtype: type) -> np.ndarray:
            taken.append(self._pool.take(n, dtype))
            return taken[-1]

        try:
            padded, exponents = calls.prepare(array, self.spec.values, take, in_place)
            return padded, exponents, bool(taken)
        except BaseException:
            for buffer in taken:
                self._pool.give(buffer)
            raise

    def _timed(self, timing: dict[str, float], padded: np.ndarray, exponents: np.ndarray | None,
               shape: tuple[int, ...], dtype: np.dtype, target: np.ndarray | None, lent: bool) -> np.ndarray:
        """The sums: into ``target`` directly (``padded`` is ``target``, flat: not ``lent`` by the pool), or
        through memory lent by the pool, or as a new array (whose fresh pages the caller keeps)."""
        timing["started"] = time.perf_counter()
        if not lent:
            out = padded
        else:
            out = self._pool.take(len(padded), padded.dtype) if target is not None else np.empty(len(padded),
                                                                                                   padded.dtype)
        try:
            sums = self._run(padded, exponents, shape, dtype, out, target if lent else None)
            return sums if lent or target is None else target
        finally:
            if lent:
                if target is not None:
                    self._pool.give(out)
                self._pool.give(padded)
            timing["finished"] = time.perf_counter()

    def _run(self, padded: np.ndarray, exponents: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype,
             out: np.ndarray, target: np.ndarray | None) -> np.ndarray:
        """The call composed (``calls.ComposedCall``), its trees' part and its ring's run at once, and its
        result (``out`` holds the sums on the way; ``target``, if given, receives them)."""
        if self._idle_failure is not None:
            raise AllreduceError(f"this Worker failed between calls ({type(self._idle_failure).__name__}: "
                                 f"{self._idle_failure}); start a new job") from self._idle_failure
        if self._broken or any(t.broken for t in self._trees):
            raise AllreduceError("an earlier allreduce of this Worker failed, so its packet sequence no longer "
                                 "matches the other workers'; start a new job")
        composed = calls.ComposedCall(self.spec, self._trees, padded, exponents, shape, dtype, out)
        self.last_choice = composed.choice
        stop = threading.Event()
        part = composed.ring_part
        ring = self._ring_io.submit(self._ring_part, part, stop) if part is not None else None
        started = time.perf_counter()
        try:
            tree_calls = composed.tree_calls
            busy = {c.tree for c in tree_calls}
            idle = tuple(t for t in self._trees if t not in busy)
            driver.run_calls(tree_calls, self._sockets, stop, idle, lambda: self._turn(tree_calls), self._helpers)
            self.last_parts = {"trees": time.perf_counter() - started} if tree_calls else {}
        except AllreduceError:
            if ring is None or not stop.is_set():  # the trees failed on their own: the ring gives up too
                self._broken = True
                if self._ring is not None:
                    self._ring.close()
                raise
        finally:
            stop.set()  # a ring still running after the trees failed gives up too
            self._stalled = frozenset()
        ring_sum = None
        if ring is not None:
            ring_sum, self.last_parts["ring"] = ring.result()  # raises the ring's error first
        return composed.result(ring_sum, target)

    def _ring_part(self, part: calls.RingPart, stop: threading.Event) -> tuple[np.ndarray, float]:
        """The ring's share of a call, summed in ``part.data``'s dtype and cast once to ``part.narrow``, in
        the call's layout and pace; and the seconds it took.  A failure stops the trees too."""
        try:
            if self._ring is None:
                self._ring = RingWorker(self.rank, self.spec.ring_peers, timeout=self._timeout,
                                        layouts=self.spec.ring_arrangements)
            started = time.perf_counter()
            if part.data.dtype == part.narrow:
                total = self._ring.allreduce_(part.data, part.layout, part.pace_mbps)
            else:
                total = self._ring.allreduce_cast(part.data, part.narrow, part.layout, part.pace_mbps)
            return total, time.perf_counter() - started
        except (RingError, OSError) as e:
            self._broken = True
            stop.set()
            raise AllreduceError(f"ring part of job {self.spec.name} (rank {self.rank}): {e}") from e
        except BaseException:
            stop.set()
            raise


def _check_members(spec: JobSpec, rank: int, members: Sequence[str | Sequence[str]]) -> None:
    """The service's job is the one these ranks asked for (not an older job of the same name)."""
    given, again = members[rank], "another job of that name? (every rank must give the same members and name)"
    if len(spec.members) != len(members):
        raise ValueError(f"job {spec.name} of the controller service has {len(spec.members)} members, not "
                         f"{len(members)}: {again}")
    me = spec.members[rank]
    if not ({given} if isinstance(given, str) else set(given)) & {me.host, me.ip}:
        raise ValueError(f"job {spec.name} of the controller service has {me.host} ({me.ip}) as rank {rank}, not "
                         f"{given}: {again}")


def _tree_name(spec: JobSpec, i: int) -> str:
    tree = spec.trees[i]
    return f"tree {i + 1}/{len(spec.trees)} of job {spec.name} (root {tree.root}, job id {tree.job_id})"
