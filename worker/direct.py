"""``DirectWorker``: one rank of a direct-connect plan (controller/direct.py) on real sockets.

A direct-connect cluster's workers have several interfaces joined by optical circuits, and the plan
splits every call into *parts*, each on some of every worker's interfaces and carrying its share of the
call's elements at the same time as the others:

- a ``TreePart`` is an ordinary INA job on the part's devices: the controller's ``JobSpec``, whose
  members have each worker's address on the part's interface.  A ``Worker`` runs it.
- a ``RingPart`` is a ring of circuits over two interfaces, run both ways: two directed flat rings
  (``RingWorker``), one in ``order`` and one reversed, each summing half of the part's slice.
- a ``ChainPart`` (``worker.chain``) is a ring_tree part: every rank's relay streams partial sums along its
  group's chain of circuits towards the group's device, and the devices sum as one INA job over the chain
  ends; a ``ChainLoop`` per rank runs its relay and its own contribution on that part's interfaces.
- a ``TorusPart`` is a ring of rings over four interfaces, run both ways: rings of ``levels[0]`` workers
  on two interfaces, then rings of ``levels[1]`` across them on the other two (``ring_layout``'s
  hierarchical layout of ``order``, and of ``order`` reversed), as the virtual fabric runs it, so the
  sums are ``ring_layout.reduce_sum``'s in those layouts.  A rank listens on one address per level and
  direction.

    parts = [RingPart(0.4, (0, 1, 2, 3), forward, backward), TreePart(spec_a, 0.3), TreePart(spec_b, 0.3)]
    with DirectWorker(parts, rank, timeout=10) as w:
        total = w.allreduce(grad)

Every rank passes the same parts (``parts_to_json``/``parts_from_json`` carry them as a file) and makes the
same calls.  A part that fails (a dead peer, a device gone) fails the call on every rank within the
parts' timeouts, with an error naming the part; the other parts run to their end first, so nothing is
left half-way, and the DirectWorker is then broken (its parts' sequences no longer match): start anew.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worker.api import Worker
from worker.chain import ChainLink, ChainLoop, ChainPart, ChainRelay, check_chain
from worker.errors import AllreduceError
from worker.jobspec import JobSpec
from worker.relay import RelayTree
from worker.ring import RingWorker, parse_peer
from worker.ring_layout import Layout
from worker.tuner import split_chunks

FORMAT = "ina-direct/1"
# what a tree (Worker) and a ring (RingWorker) both sum
DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int32"))
DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class TreePart:
    """A tree part: the INA job the controller created on the part's devices (mode ina: a tree part has
    no ring of its own).  ``spec_file``: where the spec is written, watched so that a device's restart
    is survived (``Worker``'s ``spec_file``)."""

    spec: JobSpec
    share: float
    spec_file: str | None = None

    @property
    def workers(self) -> int:
        return len(self.spec.members)


@dataclass(frozen=True)
class RingPart:
    """A ring part.  ``order``: the workers round the ring; ``forward[w]``/``backward[w]``: "ip:port" where
    worker w listens in the ring in ``order`` / in the reversed ring (its address on the interface whose
    circuit comes from its predecessor in that ring)."""

    share: float
    order: tuple[int, ...]
    forward: tuple[str, ...]
    backward: tuple[str, ...]

    @property
    def workers(self) -> int:
        return len(self.order)

    def ring(self, direction: int, rank: int) -> tuple[int, list[str]]:
        """This rank's position in the directed ring, and the ring's peers by position."""
        order = self.order if direction == 0 else self.order[::-1]
        listen = self.forward if direction == 0 else self.backward
        return order.index(rank), [listen[w] for w in order]


@dataclass(frozen=True)
class TorusPart:
    """A torus part: rings of ``levels[0]`` consecutive workers of ``order``, then rings of ``levels[1]``
    across them.  ``forward[level][w]``/``backward[level][w]``: "ip:port" where worker w listens at that
    level in the rings of rings in ``order`` / reversed (its address on the interface whose circuit comes
    from its predecessor at that level in that direction; a level of 2's pair has a circuit each way)."""

    share: float
    order: tuple[int, ...]
    levels: tuple[int, int]
    forward: tuple[tuple[str, ...], tuple[str, ...]]
    backward: tuple[tuple[str, ...], tuple[str, ...]]

    @property
    def workers(self) -> int:
        return len(self.order)

    def layout(self, direction: int) -> Layout:
        """The directed ring of rings (``CircuitRings``' in the fabric): ``order``, or ``order`` reversed."""
        return Layout("hierarchical", tuple(self.levels), self.order if direction == 0 else self.order[::-1])

    def listen(self, direction: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Every worker's address at each level, in this direction."""
        return self.forward if direction == 0 else self.backward


Part = TreePart | RingPart | TorusPart | ChainPart
BOTH_WAYS = (RingPart, TorusPart)  # parts run as two directed rings, each on a DirectWorker thread


class DirectAllreduceError(AllreduceError):
    """Parts of a call failed: ``failures`` maps each failed part's name to its error."""

    def __init__(self, message: str, failures: dict[str, BaseException]) -> None:
        super().__init__(message)
        self.failures = failures


def check_parts(parts: Sequence[Part]) -> int:
    """The number of workers the parts agree on; a ValueError naming the part that is not well formed."""
    if not parts:
        raise ValueError("a direct plan needs at least one part")
    n = parts[0].workers
    shares = [p.share for p in parts]
    if any(isinstance(s, bool) or not isinstance(s, int | float) or not s > 0 for s in shares) \
            or not math.isclose(sum(shares), 1.0, abs_tol=1e-6):
        raise ValueError(f"part shares {shares} must be positive and sum to 1")
    for i, p in enumerate(parts):
        where = f"part {i + 1}/{len(parts)}"
        if p.workers != n:
            raise ValueError(f"{where} has {p.workers} workers, part 1 has {n}")
        if isinstance(p, TreePart) and p.spec.mode != "ina":
            raise ValueError(f"{where} (job {p.spec.name}): a tree part runs through its devices alone (mode "
                             f"ina), not mode {p.spec.mode}")
        if isinstance(p, RingPart) and (sorted(p.order) != list(range(n)) or len(p.forward) != n
                                        or len(p.backward) != n):
            raise ValueError(f"{where}: a ring's order must hold the workers 0..{n - 1} once each, and forward "
                             f"and backward one address each")
        if isinstance(p, TorusPart):
            _check_torus(p, n, where)
        if isinstance(p, ChainPart):
            check_chain(p, n, where)
    return n


def _check_torus(p: TorusPart, n: int, where: str) -> None:
    """A torus part's levels multiply to its workers, and every worker has four addresses of its own."""
    if sorted(p.order) != list(range(n)):
        raise ValueError(f"{where}: a torus's order must hold the workers 0..{n - 1} once each")
    if len(p.levels) != 2 or any(isinstance(g, bool) or not isinstance(g, int) or g < 2 for g in p.levels) \
            or p.levels[0] * p.levels[1] != n:
        raise ValueError(f"{where}: a torus's levels are two ring sizes of at least 2 whose product is {n}, "
                         f"not {list(p.levels)}")
    lists = {(d, level): p.listen(i)[level] for i, d in enumerate(DIRECTIONS) for level in range(2)
             if len(p.listen(i)) == 2}
    if len(lists) != 4 or any(len(a) != n for a in lists.values()):
        raise ValueError(f"{where}: a torus's forward and backward give each level's {n} addresses")
    for (direction, level), addresses in lists.items():
        for w, a in enumerate(addresses):
            try:
                parse_peer(a)
            except (ValueError, AttributeError):
                raise ValueError(f"{where}: {direction}[{level}][{w}] = {a!r} is not ip:port") from None
    for w in range(n):
        mine = [a[w] for a in lists.values()]
        if len(set(mine)) != len(mine):
            raise ValueError(f"{where}: worker {w} listens on {mine}: one address per level and direction, "
                             f"not one twice")


def split(parts: Sequence[Part], elements: int) -> list[tuple[int, int]]:
    """Each part's [first, end) elements of a call: consecutive, by share (``tuner.split_chunks``'s largest
    remainder), so every rank splits alike."""
    edges = np.cumsum([0, *split_chunks([p.share for p in parts], elements)])
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


class DirectWorker:
    """One rank of a direct-connect plan: a ``Worker`` per tree part, a ``ChainLoop`` per ring_tree part, two
    ``RingWorker``s per ring or torus part (connected at the first call that uses them); calls run one at a
    time, every part at once."""

    def __init__(self, parts: Sequence[Part], rank: int, *, timeout: float = 10.0) -> None:
        n = check_parts(parts)
        if not 0 <= rank < n:
            raise ValueError(f"rank {rank} is not in the plan (ranks 0..{n - 1})")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        self.parts, self.rank, self.timeout = tuple(parts), rank, timeout
        self.names = [self._name(i) for i in range(len(parts))]
        self._trees: dict[int, Worker | ChainLoop] = {}  # what runs each tree or ring_tree part
        try:
            for i, p in enumerate(parts):
                if isinstance(p, TreePart):  # bound to the member's address: this rank's on the part's interface
                    self._trees[i] = Worker(p.spec, rank, timeout=timeout, bind_ip=p.spec.members[rank].ip,
                                            spec_file=p.spec_file)
                elif isinstance(p, ChainPart):  # bound to this rank's addresses on the part's interfaces
                    self._trees[i] = ChainLoop(p, rank, timeout, self.names[i])
        except BaseException:
            for w in self._trees.values():
                w.close()
            raise
        self._rings: dict[tuple[int, int], RingWorker] = {}
        rings = 2 * sum(isinstance(p, BOTH_WAYS) for p in parts)
        self._ring_threads = ThreadPoolExecutor(max_workers=max(1, rings), thread_name_prefix=f"direct-ring-{rank}")
        self._lock = threading.Lock()  # one call at a time (a RingWorker is not thread-safe)
        self._broken: str | None = None
        self._closed = False
        self.last_parts: dict[str, float] = {}  # seconds each part (each ring direction) of the last call took

    def _name(self, i: int, direction: int | None = None) -> str:
        """How errors and ``last_parts`` name part ``i`` (and one direction of its rings)."""
        p = self.parts[i]
        what = f"tree, job {p.spec.name}" if isinstance(p, TreePart) else \
            f"ring_tree, job {p.spec.name}" if isinstance(p, ChainPart) else \
            "ring" if isinstance(p, RingPart) else "torus"
        if direction is not None:
            what += f", {DIRECTIONS[direction]}"
        return f"part {i + 1}/{len(self.parts)} ({what})"

    def split(self, elements: int) -> list[tuple[int, int]]:
        return split(self.parts, elements)

    def allreduce(self, array: np.ndarray) -> np.ndarray:
        """The sum over all workers, as a new array of the same shape and dtype (``array`` is untouched)."""
        return self.allreduce_(np.array(array, order="C", copy=True))

    def allreduce_(self, array: np.ndarray) -> np.ndarray:
        """In place: ``array`` (C-contiguous, writeable) receives the sum and is returned.  A call that fails
        leaves it part summed."""
        flat = self._checked(array)
        with self._lock:
            if self._closed:
                raise RuntimeError("this DirectWorker is closed")
            if self._broken is not None:
                raise AllreduceError(f"an earlier allreduce of this DirectWorker failed ({self._broken}), so its "
                                     f"parts no longer match the other workers': start a new plan's jobs")
            calls = self._start(flat)
            failures = self._wait(calls)
            if failures:
                self._broken = "; ".join(failures)
                for ring in self._rings.values():  # the neighbours' next ring step fails at once, not at a timeout
                    ring.close()
                raise DirectAllreduceError(f"rank {self.rank}: " + "; ".join(f"{name}: {type(e).__name__}: {e}"
                                                                             for name, e in failures.items()),
                                           failures) from next(iter(failures.values()))
        return array

    def _checked(self, array: np.ndarray) -> np.ndarray:
        """The array, flat; bad input raises here, before any part sends (so every part or none runs)."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"allreduce takes a numpy array, not {type(array).__name__}")
        if array.dtype not in DTYPES or not array.dtype.isnative:
            raise TypeError(f"a direct plan sums {', '.join(sorted(str(d) for d in DTYPES))}, not {array.dtype}")
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError("allreduce_ needs a C-contiguous writeable array")
        flat = array.reshape(-1)
        if flat.dtype.kind == "f" and not np.isfinite(flat).all():
            bad = int(np.flatnonzero(~np.isfinite(flat))[0])
            raise ValueError(f"non-finite value at flat index {bad}: {flat[bad]}")
        return flat

    def _start(self, flat: np.ndarray) -> dict[str, Future]:
        """Every part's call on ``flat``'s slices, at once: trees on their Workers' I/O threads, ring_trees on
        their ChainLoops' threads, each ring direction on a thread of its own.  A part that cannot start is a
        failed Future like any other."""
        calls: dict[str, Future] = {}
        self.last_parts = {}
        started = time.perf_counter()
        for i, (lo, hi) in enumerate(self.split(flat.size)):
            if not isinstance(self.parts[i], BOTH_WAYS):
                pieces = [(self.names[i], None, lo, hi)]
            else:  # the first half forward, the second (not longer) backward, as the fabric's CircuitRings
                mid = lo + (hi - lo + 1) // 2
                pieces = [(self._name(i, 0), 0, lo, mid), (self._name(i, 1), 1, mid, hi)]
            for name, direction, a, b in pieces:
                if a == b:
                    continue  # the same on every rank
                try:
                    f = self._trees[i].allreduce_async_(flat[a:b]) if direction is None else \
                        self._ring_threads.submit(self._ring_call, i, direction, flat[a:b])
                except BaseException as e:  # noqa: BLE001 - reported as this part's failure
                    f = Future()
                    f.set_exception(e)
                f.add_done_callback(lambda _, name=name: self.last_parts.__setitem__(
                    name, time.perf_counter() - started))
                calls[name] = f
        return calls

    def _wait(self, calls: dict[str, Future]) -> dict[str, BaseException]:
        """Every part's end (each bounded by its timeouts); the failed ones' errors by name."""
        failures: dict[str, BaseException] = {}
        for name, f in calls.items():
            e = f.exception()
            if e is not None:
                failures[name] = e
        return failures

    def _ring_call(self, i: int, direction: int, view: np.ndarray) -> None:
        """One direction of ring or torus part ``i`` on ``view``, in place (connected on its first call)."""
        ring = self._rings.get((i, direction))
        if ring is None:
            part = self.parts[i]
            if isinstance(part, RingPart):
                position, peers = part.ring(direction, self.rank)
                ring = RingWorker(position, peers, timeout=self.timeout)
            else:
                assert isinstance(part, TorusPart)
                ring = RingWorker(self.rank, part.listen(direction), timeout=self.timeout,
                                  layouts=(part.layout(direction),))
            self._rings[(i, direction)] = ring
        ring.allreduce_(view)

    def close(self) -> None:
        """Waits for a call in progress, then closes every part."""
        with self._lock:
            self._closed = True
            for w in self._trees.values():
                w.close()
            for ring in self._rings.values():
                ring.close()
            self._ring_threads.shutdown(wait=True)

    def __enter__(self) -> DirectWorker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def parts_to_json(parts: Sequence[Part]) -> str:
    """The parts as one JSON document (a tree part's spec inside it, as ``JobSpec.to_json`` writes it)."""
    out = []
    for p in parts:
        if isinstance(p, TreePart):
            out.append({"kind": "tree", "share": p.share, "spec": json.loads(p.spec.to_json()),
                        "spec_file": p.spec_file})
        elif isinstance(p, ChainPart):
            out.append({"kind": "ring_tree", "share": p.share, "spec": json.loads(p.spec.to_json()),
                        "relays": [_relay_to_dict(r) for r in p.relays]})
        elif isinstance(p, RingPart):
            out.append({"kind": "ring", "share": p.share, "order": list(p.order), "forward": list(p.forward),
                        "backward": list(p.backward)})
        else:
            out.append({"kind": "torus", "share": p.share, "order": list(p.order), "levels": list(p.levels),
                        "forward": [list(a) for a in p.forward], "backward": [list(a) for a in p.backward]})
    return json.dumps({"format": FORMAT, "parts": out}, indent=2)


def parts_from_json(text: str, where: str | Path = "direct plan") -> list[Part]:
    """What ``parts_to_json`` wrote, checked (``check_parts``); ``where`` names the source in errors."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a direct plan of format {FORMAT}")
        parts: list[Part] = []
        for d in data["parts"]:
            if d["kind"] == "tree":
                parts.append(TreePart(JobSpec.from_json(json.dumps(d["spec"]), where), d["share"],
                                      d.get("spec_file")))
            elif d["kind"] == "ring":
                parts.append(RingPart(d["share"], tuple(d["order"]), tuple(d["forward"]), tuple(d["backward"])))
            elif d["kind"] == "ring_tree":
                parts.append(ChainPart(d["share"], JobSpec.from_json(json.dumps(d["spec"]), where),
                                       tuple(_relay_from_dict(r) for r in d["relays"])))
            elif d["kind"] == "torus":
                parts.append(TorusPart(d["share"], tuple(d["order"]), tuple(d["levels"]),
                                       tuple(tuple(a) for a in d["forward"]), tuple(tuple(a) for a in d["backward"])))
            else:
                raise ValueError(f"a part is a tree, a ring_tree, a ring or a torus, not {d['kind']!r}")
        check_parts(parts)
        return parts
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _relay_to_dict(relay: ChainRelay) -> dict:
    """A rank's relay in parts.json: its RelayTree's numbers and its links."""
    t = relay.tree
    return {"tree": {"job_id": t.job_id, "pool_size": t.pool_size, "children": [list(c) for c in t.children],
                     "is_root": t.is_root, "parent_port": t.parent_port, "index_at_parent": t.index_at_parent,
                     "peer": t.peer, "epoch": t.epoch},
            "links": [{"port": k.port, "local": k.local, "far": k.far, "circuit": k.circuit} for k in relay.links]}


def _relay_from_dict(d: dict) -> ChainRelay:
    t = d["tree"]
    tree = RelayTree(t["job_id"], t["pool_size"], tuple(tuple(c) for c in t["children"]), t["is_root"],
                     t.get("parent_port"), t.get("index_at_parent"), t.get("peer"), t.get("epoch", 1))
    return ChainRelay(tree, tuple(ChainLink(k["port"], k["local"], k["far"], k["circuit"]) for k in d["links"]))
