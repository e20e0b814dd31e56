"""A worker on a simulated host: the worker's own protocol core (``worker.engine``) driven in
virtual time, as ``worker.driver`` drives it on sockets.

Each step's datagrams go onto the host's link (the step takes no more than the link's queue has
room for: a full queue is a full send buffer), results come in as frames, and the core's deadlines
become events.  A frame reaches the worker's loop ``rx_delay`` after its last bit arrives, whatever
else wakes the loop meanwhile (its pacer, a timer), and is taken at the loop's next look
(``virtual_fabric.host_latency``).

A host's CPU (``host_cost``; none by default: a host then takes no time) is one serial resource that the
worker's loop runs on: each datagram a step sends leaves the host only once the CPU has spent its send cost on
it, one after another, and the results the loop takes at a look cost their receive cost, one after another,
before the core sees them; the loop's next turn waits for the CPU.  So a turn is: take what has reached the
loop, pay for it, hand it to the core and step, pay for the step's datagrams as they leave.  (The core's own
work is inside these costs: they are a worker's CPU per packet, measured.)  A ring's part is flow-level and
costs the CPU nothing.  A host of several ``cores`` (``HostCost.cores``) serves its trees on them in turn, as
the worker's threads do (``HostCost.core_of``): each core pays for its own trees' datagrams and steps their
calls when it is free, so a tree's lanes on cores of their own move as many packets as the cores.  The worker
makes its calls one after another, each on its own arrays, and
keeps each call's sums or its error; job spec changes (a switch lost its registers, a tree
moved) reach it as they reach a real worker's spec watch, later, between two of its steps.

Each call is composed as ``Worker`` composes it (``worker.calls.ComposedCall``): as its job spec
chooses for its size (``JobSpec.choose``), the first ``round(share x chunks)`` chunks through the
trees, the rest round the ring (``virtual_fabric.ring``, at flow level), both at once; the call ends
when both have, and its sums are the trees' followed by the ring's, or its error the worker's.
"""

from __future__ import annotations

import ipaddress
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from controller.model import NO_HOST_COST, HostCost
from virtual_fabric.events import EventLoop
from virtual_fabric.frames import udp_header, udp_payload
from virtual_fabric.host_latency import HOST_LATENCY, reaches_loop
from virtual_fabric.links import Channel
from virtual_fabric.ring import Ring
from worker import native, protocol
from worker.calls import ComposedCall, prepare
from worker.engine import Outbox, Stats, Tree, TreeCall, TreeConfig, fail
from worker.errors import AllreduceError, SwitchOverflowError
from worker.jobspec import JobSpec, TreeSpec
from worker.tuner import Choice

# what a worker waited on, for ``time_in``: results with its window full, the last results with
# everything sent, room in its link's queue, the pacer, the ring's part alone (the trees' is done
# or there is none), or nothing (no call)
STATES = ("window", "tail", "queue", "paced", "ring", "idle")


@dataclass
class CallRecord:
    """One allreduce of one worker: its sums, or its error and when it was raised."""

    started: float
    ended: float | None = None
    result: np.ndarray | None = None
    error: str | None = None
    last_progress: float | None = None  # of the failed call: when it last had a result
    choice: Choice | None = None  # how it ran (method, share, ring layout, prediction: a first call of its size
    #                               with its exponent window, ``CallModel.as_first``)
    first: bool = False  # some tree's part was of a size it had not carried: it sent an exponent window
    sent: list[int] | None = None  # packets each tree had sent before it (what the choice went by)
    trees_seconds: float | None = None  # how long the trees' part took (None: it had none, or failed)
    ring_seconds: float | None = None  # how long the ring's part took (None: it had none, or failed)


@dataclass(eq=False)
class SimWorker:
    loop: EventLoop
    spec: JobSpec
    rank: int
    arrays: list[np.ndarray]  # one per call, in order
    timeout: float
    mac: str = "02:00:00:00:00:01"  # the host's, as frames carry it
    uplink: Channel | None = None  # set when the fabric wires the host
    ring: Ring | None = None  # the job's ring, when it may use one (set by the fabric)
    gap: float = 0.0  # seconds of "computation" between calls
    rx_delay: float = HOST_LATENCY  # a frame's way from the wire to the worker's loop (interrupts, a syscall)
    host_cost: HostCost = NO_HOST_COST  # what each datagram sent and received costs the host's one CPU
    records: list[CallRecord] = field(default_factory=list)
    alive: bool = True
    foreign: int = 0  # frames for this host that are not for a tree of the job
    time_in: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STATES, 0.0))
    on_done: Callable[[], None] = lambda: None  # called once, when ``done`` turns true
    # each call's sums, as (rank, call, sums), instead of keeping them in its record (a large run checks
    # them as they come and keeps one per call)
    hand_over: Callable[[int, int, np.ndarray], None] | None = None
    # before each call but the first: ``gate(call, go)``, and the call starts ``gap`` after ``go()`` (a direct
    # plan's parts start each call together, ``virtual_fabric.direct``); None: ``gap`` after the last call
    gate: Callable[[int, Callable[[], None]], None] | None = None

    def __post_init__(self) -> None:
        spec, me = self.spec, self.spec.members[self.rank]
        self.P = protocol.load(spec.values, spec.udp_port)
        self.core = native.core()  # the worker's C core where it builds (the same datagrams as the reference)
        self.trees: list[Tree] = []
        self.by_port: dict[int, Tree] = {}
        self.inbox: dict[Tree, list[bytes]] = {}
        n = max(1, min(self.host_cost.cores, len(spec.trees)))
        self.arriving: list[deque[tuple[float, Tree, bytes]]] = [deque() for _ in range(n)]  # per core: (when it
        # reaches the loop, tree, datagram)
        self.core_of: dict[Tree, int] = {}
        self.headers: dict[Tree, bytes] = {}
        for i, t in enumerate(spec.trees if spec.mode != "ring" else ()):
            config = TreeConfig(me.switch, t.job_id, t.children[self.rank], len(spec.members), spec.pool_size, self.P,
                                self.timeout)
            tree = self.core.Tree(config, f"tree {i + 1} of job {spec.name}", incarnation=t.incarnation)
            self.trees.append(tree)
            self.core_of[tree] = self.host_cost.core_of(i, len(spec.trees))
            self.by_port[t.port] = tree
            self.inbox[tree] = []
            self.headers[tree] = self._header(tree, t.destination(self.rank))
        self.ip = ipaddress.IPv4Address(me.ip).packed
        self.calls: list[TreeCall] = []  # the current call's trees' parts
        self.current: CallRecord | None = None
        self._composed: ComposedCall | None = None  # the current call
        self._next_wake: float | None = None
        self._state, self._since = "idle", 0.0
        self._spec_changes: dict[int, tuple[int, str, TreeSpec]] = {}
        self._ring_pending = False  # the current call's ring part is running
        self._ring_result: np.ndarray | None = None
        self.cpu_busy = 0.0  # seconds the host's CPU spent on datagrams (its host cost)
        self._cpu_free = [0.0] * n  # per core: when it is done with what it was given (its next turn is no earlier)
        self._taken: list[list[tuple[Tree, bytes]]] = [[] for _ in range(n)]  # per core: datagrams it took and
        # paid for, for the protocol core next turn
        self._unsent = 0  # datagrams of earlier steps the CPU is still sending (not on the link yet)

    def _header(self, tree: Tree, to_ip: str | None) -> bytes:
        """A tree's frames' headers: to its server (``to_ip``) or the member's switch."""
        me = self.spec.members[self.rank]
        port = next(p for p, t in self.by_port.items() if t is tree)
        return udp_header(self.mac, me.switch_mac, me.ip, to_ip or me.switch_ip, port, self.spec.udp_port,
                          self.P.packet_bytes)

    # --- what the fabric calls ---------------------------------------------------------------

    def start(self, at: float) -> None:
        self.loop.at(at, self._next_call)

    def receive(self, frame: bytes) -> None:
        """A frame off the host's link."""
        if not self.alive:
            return
        got = udp_payload(frame, self.ip)
        tree = self.by_port.get(got[0]) if got is not None else None
        if tree is None:
            self.foreign += 1
            return
        visible = self.loop.now + self.rx_delay
        self.arriving[self.core_of[tree]].append((visible, tree, got[1]))
        self._wake_at(reaches_loop(visible))

    def spec_changed(self, changes: dict[int, tuple[int, str, TreeSpec]]) -> None:
        """What the worker's spec watch would read: job id -> (incarnation, tree name, the tree's new spec, which
        says where this rank's contributions go)."""
        self._spec_changes.update(changes)
        self._wake_at(self.loop.now)

    def kill(self) -> None:
        was_done = self.done
        self.alive = False
        if self.current is not None and self.current.ended is None:
            self.current.ended, self.current.error = self.loop.now, "killed"
        if self.ring is not None:
            self.ring.abort(self.rank, "killed")
        if not was_done:
            self.on_done()

    @property
    def stats(self) -> Stats:
        return Stats.total([t.stats for t in self.trees])

    @property
    def done(self) -> bool:
        """No call left to run or running (it may still owe echoes to the others)."""
        return not self.alive or (self.current is None and len(self.records) == len(self.arrays)) or \
            any(r.error for r in self.records)

    # --- inside --------------------------------------------------------------------------------

    def _transmit(self, out: Outbox) -> None:
        """The step's datagrams onto the host's link (``step`` took no more than the link's queue had room for),
        each once the CPU has spent its send cost on it, after those before it."""
        link, cost = self.uplink, self.host_cost
        costed = bool(cost.send or cost.send_per_byte)
        for tree, rows in out.datagrams:
            header = self.headers[tree]
            for row in rows:
                if not costed:
                    link.send(header + row.tobytes())
                    continue
                spent = cost.send_seconds(row.nbytes)
                self.cpu_busy += spent
                core = self.core_of[tree]
                self._cpu_free[core] = max(self._cpu_free[core], self.loop.now) + spent
                self._unsent += 1
                self.loop.at(self._cpu_free[core], self._leave, header + row.tobytes())

    def _leave(self, frame: bytes) -> None:
        """A datagram the CPU has sent: onto the link (unless the host died meanwhile)."""
        self._unsent -= 1
        if self.alive:
            self.uplink.send(frame)

    def _take(self, core: int, now: float) -> bool:
        """What has reached the loop for this core's trees, paid for at the receive cost (the protocol core gets
        it once that is spent); True when that takes time, and the core's turn goes on then."""
        arriving, cost = self.arriving[core], self.host_cost
        spent = 0.0
        while arriving and arriving[0][0] <= now:
            _, tree, datagram = arriving.popleft()
            self._taken[core].append((tree, datagram))
            spent += cost.receive_seconds(len(datagram))
        if not spent:
            return False
        self.cpu_busy += spent
        self._cpu_free[core] = now + spent
        self._wake_at(self._cpu_free[core])
        return True

    def _next_call(self) -> None:
        if not self.alive or any(r.error for r in self.records):
            return
        i = len(self.records)
        if i == len(self.arrays):
            return
        array = self.arrays[i]
        self.current = CallRecord(self.loop.now)
        self.records.append(self.current)
        padded, exponents = prepare(array, self.spec.values)
        composed = self._composed = ComposedCall(self.spec, self.trees, padded, exponents, array.shape, array.dtype,
                                                 np.empty(len(padded), padded.dtype))
        choice = composed.choice  # chosen as for a later call of the size; a first one sends its exponent window
        self.current.first = any(c.lead for c in composed.tree_calls)
        if self.spec.model is not None and self.current.first:
            choice = self.spec.model.as_first(choice, array.size, array.dtype, composed.sent,
                                              self.spec.ring_sum == "native")
        self.current.sent, self.current.choice = composed.sent, choice
        self.calls = composed.tree_calls
        part = composed.ring_part
        self._ring_pending, self._ring_result = part is not None, None
        if part is not None:
            self.ring.start(self.rank, i, part.data, part.narrow, part.layout, part.pace_mbps,
                            lambda result, error: self._ring_done(i, result, error))
        self._wake_at(self.loop.now)

    def _ring_done(self, index: int, result: np.ndarray | None, error: str | None) -> None:
        record = self.current
        if not self.alive or record is None or len(self.records) - 1 != index or record.ended is not None:
            return
        if error is not None:
            running = [c for c in self.calls if not c.complete]
            fail(running)  # the trees' part stops too: the worker is broken
            self._failed(running, AllreduceError(f"ring part of job {self.spec.name} (rank {self.rank}): {error}"),
                         tell_ring=False)
            return
        self._ring_pending, self._ring_result = False, result
        record.ring_seconds = self.loop.now - record.started
        self._wake_at(self.loop.now)

    def _wake_at(self, when: float) -> None:
        if self._next_wake is not None and self.loop.now <= self._next_wake <= when:
            return  # an earlier (or this) wake is due anyway
        self._next_wake = when
        self.loop.at(when, self._woken, when)

    def _woken(self, when: float) -> None:
        if when != self._next_wake or not self.alive:
            return  # superseded by an earlier wake
        self._next_wake = None
        self._turn()

    def _turn(self) -> None:
        now = self.loop.now
        free = [c for c, busy in enumerate(self._cpu_free) if busy <= now]
        if not free:  # the CPUs are still sending or receiving: the loop turns when one is done
            self._wake_at(min(self._cpu_free))
            return
        self.time_in[self._state] += now - self._since
        self._since = now
        for t in self.trees:
            if t.config.job_id in self._spec_changes:
                incarnation, name, moved = self._spec_changes.pop(t.config.job_id)
                t.spec_changed(incarnation, name)
                self.headers[t] = self._header(t, moved.destination(self.rank))
        stepping = [c for c in free if self._taken[c] or not self._take(c, now)]
        if not stepping:
            return  # the protocol core sees them once the CPU has received them
        for c in stepping:
            for tree, datagram in self._taken[c]:
                self.inbox[tree].append(datagram)
            self._taken[c] = []
        by_tree = {c.tree: c for c in self.calls if not c.complete}
        for tree, datagrams in self.inbox.items():
            call = by_tree.get(tree)
            if datagrams and call is not None:
                self.inbox[tree] = []
                call.receive(*_rows(datagrams, self.P.packet_bytes), now)
            elif datagrams and self.current is None:
                self.inbox[tree] = []  # between calls a socket's old results wait; none of them matters
        running = [c for c in self.calls if not c.complete]
        try:
            wake, full = self._step(stepping, running, by_tree, now)
        except AllreduceError as e:
            self._failed(running, e)  # step marked the trees broken
            return
        if self.current is not None and not running and self.calls and self.current.trees_seconds is None:
            self.current.trees_seconds = now - self.current.started
        if self.current is not None and not running and not self._ring_pending:
            self._finish()
            wake = min(wake, now) if self.current is not None else wake
        self._state = self._what_waits(running, full)
        if full:
            wake = min(wake, self.uplink.next_departure())
        for c, arriving in enumerate(self.arriving):
            if arriving:  # a busy core takes what reached it once it is free (waking before spun at one instant)
                wake = min(wake, max(reaches_loop(arriving[0][0]), self._cpu_free[c]))
            if c not in stepping and self._cpu_free[c] > now:
                wake = min(wake, self._cpu_free[c])
        if wake < math.inf:
            self._wake_at(max(wake, now))

    def _step(self, cores: list[int], running: list[TreeCall], by_tree: dict[Tree, TreeCall], now: float
              ) -> tuple[float, bool]:
        """Each of these cores steps its trees' calls (one core: all of them, in one step) and sends what they
        let go; the earliest deadline, and whether the link's queue was full."""
        frame = protocol.ETH_IP_UDP + self.P.packet_bytes
        wake, full = math.inf, False
        for core in cores:
            mine = [c for c in running if self.core_of[c.tree] == core]
            idle = tuple(t for t in self.trees if t not in by_tree and not t.broken and self.core_of[t] == core)
            room = (self.uplink.room(now) - self._unsent * frame) // frame  # what the CPU still sends takes room too
            out = self.core.step(mine, idle, now, room)
            self._transmit(out)
            wake, full = min(wake, out.wake), full or out.full
        return wake, full

    def _what_waits(self, running: list[TreeCall], full: bool) -> str:
        if not running:
            return "ring" if self._ring_pending else "idle"
        if full:
            return "queue"
        if any(c.paced for c in running):
            return "paced"
        return "window" if any(c.next_q < c.total for c in running) else "tail"

    def _finish(self) -> None:
        record = self.current
        record.ended = self.loop.now
        try:
            result = self._composed.result(self._ring_result)
        except SwitchOverflowError as e:
            record.error = f"{type(e).__name__}: {e}"
        else:
            if self.hand_over is not None:
                self.hand_over(self.rank, len(self.records) - 1, result)
            else:
                record.result = result
        self.current, self.calls, self._ring_result, self._composed = None, [], None, None
        if record.error is None and len(self.records) < len(self.arrays):
            if self.gate is None:
                self.loop.after(self.gap, self._next_call)
            else:
                self.gate(len(self.records), lambda: self.loop.after(self.gap, self._next_call))
        elif self.done:
            self.on_done()

    def _failed(self, running: list[TreeCall], error: AllreduceError, tell_ring: bool = True) -> None:
        record = self.current
        self._ring_pending, self._ring_result = False, None
        if tell_ring and self.ring is not None:  # the worker closes its ring: the others' ring parts fail
            self.ring.abort(self.rank, error.__class__.__name__)
        record.ended = self.loop.now
        record.error = f"{type(error).__name__}: {error}"
        record.last_progress = max((c.last_progress for c in running if c.last_progress is not None), default=None)
        self.current, self.calls, self._composed = None, [], None
        self.on_done()


def _rows(datagrams: list[bytes], packet_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Datagrams as the socket driver hands them in: (k, packet_bytes + 64) rows and their lengths."""
    slot = packet_bytes + 64
    rows = np.zeros((len(datagrams), slot), np.uint8)
    lengths = np.empty(len(datagrams), np.int64)
    for i, d in enumerate(datagrams):
        n = min(len(d), slot)
        rows[i, :n] = np.frombuffer(d, np.uint8, n)
        lengths[i] = len(d)
    return rows, lengths
