"""A ring_tree part on real sockets (issue 58): this rank's relay between its own contribution and its circuits.

A ring_tree part (docs/direct.md) sums through chains of host relays towards each group's device, and the
devices' job over the chain ends.  A ``ChainPart`` is what every rank needs of it: the chain spec (the devices'
job seen from behind a relay: ``controller.ring_tree.chain_spec``), and per rank its relay's tree and, per relay
port (1 + interface), the address its socket binds (that interface's) and the far end's (a neighbour's
interface, or the device's aggregation port).

``ChainLoop`` runs one rank's share, like a ``Worker``'s I/O thread: one thread that alone reads the clock and
touches the sockets, for the part's life (a neighbour may still ask this relay for a result after this rank's
own call is done).  It steps the rank's own ``TreeCall`` (``worker.engine``) and hands its datagrams to the relay
in-process (port 0), sends the relay's outputs out of each port's socket, feeds what arrives on a port to the
relay, and the relay's port-0 outputs to the TreeCall.  The relay and the core stay sans-I/O; ``new_relay`` is
the one seam where a native relay drops in.  A call that gets no result for the timeout fails naming the circuit
that has been silent longest at this rank (a dead neighbour, a cut circuit, a device gone): every rank's own
call then stops getting results, so every rank fails within its timeout.
"""

from __future__ import annotations

import math
import os
import select
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from worker import calls, protocol
from worker.engine import Tree, TreeCall, TreeConfig, step
from worker.errors import AllreduceError
from worker.jobspec import JobSpec
from worker.relay import Output, Relay, RelayTree

OWN = 0  # a relay's port for its own host's contribution
MAX_WAIT = 0.1  # seconds in one select: a close is seen within this
RECEIVE_BATCH = 256  # datagrams taken from one socket per turn (the others get theirs in between)


def new_relay(trees: Sequence[RelayTree], P: protocol.Protocol) -> Relay:
    """The relay a chain runs: the native mirror of ``worker.relay.Relay`` where the native core builds."""
    from worker.native.relay import relay_class  # the native core builds on first use, not at import

    return relay_class()(list(trees), P)


@dataclass(frozen=True)
class ChainLink:
    """One relay port's circuit: ``local`` "ip:port" this rank's socket binds (its interface's address),
    ``far`` where the other end listens, ``circuit`` how errors name it ("w3.0 <-> w4.1", "w0.1 <-> d0.1")."""

    port: int
    local: str
    far: str
    circuit: str


@dataclass(frozen=True)
class ChainRelay:
    """One rank's relay in a ring_tree part: its tree (``controller.ring_tree.relay_roles``) and its circuits."""

    tree: RelayTree
    links: tuple[ChainLink, ...]


@dataclass(frozen=True)
class ChainPart:
    """A ring_tree part: ``spec`` is what every rank's own contribution runs as (one tree, mode ina: the devices'
    job id, pool, values and aggregation port, each rank's child index at its relay), ``relays`` every rank's."""

    share: float
    spec: JobSpec
    relays: tuple[ChainRelay, ...]

    @property
    def workers(self) -> int:
        return len(self.spec.members)


def check_chain(p: ChainPart, n: int, where: str) -> None:
    """A ValueError naming the field of a ring_tree part that does not fit: its spec, a rank's relay tree, or a
    relay port without its circuit's addresses (or one listening twice)."""
    if p.spec.mode != "ina" or len(p.spec.trees) != 1:
        raise ValueError(f"{where} (ring_tree, job {p.spec.name}): the chain spec is one tree of mode ina, not "
                         f"{len(p.spec.trees)} of mode {p.spec.mode}")
    (tree,) = p.spec.trees
    if len(p.relays) != n:
        raise ValueError(f"{where}: a ring_tree part has a relay per worker: {len(p.relays)} for {n} workers")
    bound: dict[str, int] = {}
    for w, relay in enumerate(p.relays):
        at = f"{where}: relays[{w}]"
        t = relay.tree
        if not isinstance(t, RelayTree) or t.job_id != tree.job_id or t.pool_size != p.spec.pool_size:
            raise ValueError(f"{at}.tree: job {getattr(t, 'job_id', t)!r} pool {getattr(t, 'pool_size', '?')}, "
                             f"not the chain spec's job {tree.job_id} pool {p.spec.pool_size}")
        if (tree.children[w], OWN) not in t.children:
            raise ValueError(f"{at}.tree: its own contribution (child {tree.children[w]}, port {OWN}) is not a child")
        ports = {port for _, port in t.children if port != OWN} | {t.parent_port} - {None}
        linked = [link.port for link in relay.links]
        if sorted(linked) != sorted(ports):
            raise ValueError(f"{at}.links: ports {sorted(linked)}, the relay's circuits are on ports {sorted(ports)}")
        for k, link in enumerate(relay.links):
            for name in ("local", "far"):
                try:
                    _address(getattr(link, name))
                except (ValueError, AttributeError):
                    raise ValueError(f"{at}.links[{k}].{name} = {getattr(link, name)!r} is not ip:port") from None
            if link.local in bound:
                raise ValueError(f"{at}.links[{k}].local: {link.local} is also relays[{bound[link.local]}]'s")
            bound[link.local] = w


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 1 << 16:
        raise ValueError(f"{text!r} is not ip:port")
    socket.inet_aton(host)
    return host, int(port)


@dataclass
class _Pending:
    """A call queued for the loop: ``calls.prepare``'s padded copy of ``into`` and its exponents; the loop
    composes it when it starts (the tree's packet numbers are the loop's to move on)."""

    into: np.ndarray
    padded: np.ndarray
    exponents: np.ndarray | None
    future: Future
    composed: calls.ComposedCall | None = None

    @property
    def call(self) -> TreeCall:
        assert self.composed is not None
        (call,) = self.composed.tree_calls
        return call


class ChainLoop:
    """One rank's relay of a ring_tree part and its own calls, on one thread (``allreduce_async_`` queues them)."""

    def __init__(self, part: ChainPart, rank: int, timeout: float, name: str) -> None:
        self.part, self.rank, self.name = part, rank, name
        spec = part.spec
        (tree,) = spec.trees
        self.P = protocol.load(spec.values, spec.udp_port)
        mine = part.relays[rank]
        self.relay = new_relay([mine.tree], self.P)
        config = TreeConfig(f"the relay of rank {rank}", tree.job_id, tree.children[rank], part.workers,
                            spec.pool_size, self.P, timeout)
        self.tree = Tree(config, f"rank {rank}'s chain (job id {tree.job_id})")
        self.links = {link.port: link for link in mine.links}
        self.far = {link.port: _address(link.far) for link in mine.links}
        self.sockets: dict[int, socket.socket] = {}
        try:
            for link in mine.links:
                sock = self.sockets[link.port] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                try:
                    sock.bind(_address(link.local))
                except OSError as e:
                    raise OSError(f"{name}: rank {rank} cannot listen on {link.local} for circuit {link.circuit}: "
                                  f"{e}") from e
                sock.setblocking(False)
        except BaseException:
            self._close_sockets()
            raise
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._stop = threading.Event()  # set by close, or by the loop when it ends: no call is taken after
        self._closed = False
        self.heard = {port: -math.inf for port in self.links}  # when each port last brought a datagram
        self.sent_lost = 0  # datagrams a full send buffer refused (the timers resend)
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"ina-chain-{rank}")
        self._thread.start()

    # --- the caller's side ---------------------------------------------------------------------

    def allreduce_async_(self, view: np.ndarray) -> Future:
        """The part's sum of ``view`` (C-contiguous, of a type ``calls.prepare`` takes) written into it; the
        Future's result is ``view``, or the call's AllreduceError."""
        padded, exponents = calls.prepare(view, self.part.spec.values)
        future: Future = Future()
        with self._lock:
            if self._stop.is_set() or self.tree.broken:
                raise AllreduceError(f"rank {self.rank}'s relay is closed, or an earlier call failed")
            self._queue.append(_Pending(view, padded, exponents, future))
        os.write(self._wake_w, b"x")
        return future

    def close(self) -> None:
        """Stops the loop (a call in progress fails, naming the part) and closes the sockets; again: nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _close_sockets(self) -> None:
        for sock in self.sockets.values():
            sock.close()

    # --- the loop ------------------------------------------------------------------------------

    def _serve(self) -> None:
        current: _Pending | None = None
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if current is None:
                    with self._lock:
                        current = self._queue.pop(0) if self._queue else None
                    if current is not None:
                        current.composed = calls.ComposedCall(self.part.spec, [self.tree], current.padded,
                                                              current.exponents, current.into.shape,
                                                              current.into.dtype, np.empty_like(current.padded))
                wait = MAX_WAIT
                if current is not None:
                    try:
                        out = step([current.call], (), now)
                    except AllreduceError as e:
                        current.future.set_exception(self._silent(e, now))
                        current = None
                        continue
                    results: list[bytes] = []
                    for _, rows in out.datagrams:
                        for row in rows:
                            self._route(self.relay.receive(OWN, row.tobytes()), results)
                    if self._deliver(current, results):
                        current = None
                        continue
                    wait = min(max(0.0, out.wake - time.monotonic()), MAX_WAIT)
                ready = select.select([*self.sockets.values(), self._wake_r], [], [], wait)[0]
                results = []
                for port, sock in self.sockets.items():
                    if sock in ready:
                        self._take(port, sock, results)
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                if current is not None and self._deliver(current, results):
                    current = None
        except BaseException as e:  # noqa: BLE001 - the call in progress reports it
            if current is not None and not current.future.done():
                current.future.set_exception(AllreduceError(f"rank {self.rank}'s relay failed: {e!r}"))
                current = None
        finally:
            self.tree.broken = self.tree.broken or current is not None or bool(self._queue)
            self._close_sockets()
            with self._lock:
                self._stop.set()  # a loop ended by a failure takes no call either
                left, self._queue = ([current] if current is not None else []) + self._queue, []
            for p in left:
                if not p.future.done():
                    p.future.set_exception(AllreduceError(f"rank {self.rank}'s relay was closed mid-call"))

    def _take(self, port: int, sock: socket.socket, results: list[bytes]) -> None:
        """What waits on a port's socket (a batch at most), through the relay."""
        for _ in range(RECEIVE_BATCH):
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # an ICMP error for an earlier send (a far end not listening): the timers tell
            self.heard[port] = time.monotonic()
            self._route(self.relay.receive(port, data), results)

    def _route(self, outputs: list[Output], results: list[bytes]) -> None:
        """The relay's outputs: port 0's to this rank's call, the others out of their port's socket."""
        for out in outputs:
            if out.port == OWN:
                results.append(out.payload)
                continue
            try:
                self.sockets[out.port].sendto(out.payload, self.far[out.port])
            except (BlockingIOError, InterruptedError):
                self.sent_lost += 1
            except OSError:
                self.sent_lost += 1  # ECONNREFUSED from an earlier send's ICMP: a lost datagram, as on a wire

    def _deliver(self, pending: _Pending, results: list[bytes]) -> bool:
        """Results to the call; True once it is complete (its Future then has the sum, or the overflow)."""
        if results:
            rows = np.frombuffer(b"".join(results), np.uint8).reshape(len(results), -1)
            pending.call.receive(rows, np.full(len(results), self.P.packet_bytes), time.monotonic())
        if not pending.call.complete:
            return False
        try:
            pending.composed.result(None, into=pending.into)
            pending.future.set_result(pending.into)
        except BaseException as e:  # noqa: BLE001 - an overflow: the caller's
            pending.future.set_exception(e)
        return True

    def _silent(self, error: AllreduceError, now: float) -> AllreduceError:
        """The call's timeout, naming the circuit silent longest at this rank (and any other silent as long as
        the timeout), so that a dead neighbour, a cut circuit or a device gone shows where it is."""
        order = sorted(self.links, key=lambda port: self.heard[port])
        timeout = self.tree.config.timeout

        def said(port: int) -> str:
            link, heard = self.links[port], self.heard[port]
            since = "nothing ever came" if heard == -math.inf else f"nothing for {now - heard:.1f} s"
            return f"circuit {link.circuit} (relay port {port}, far end {link.far}: {since})"

        others = [said(p) for p in order[1:] if now - self.heard[p] >= timeout]
        return AllreduceError(f"silent longest at rank {self.rank}: {said(order[0])}"
                              + (f"; also silent: {', '.join(others)}" if others else "") + f". {error}")
