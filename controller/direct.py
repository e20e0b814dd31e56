"""Direct-connect clusters (NTT's optical-circuit case): workers with D interfaces joined by circuits
that the plan chooses, and a few aggregation devices (P4 switches, or p4target on a spare server) on
free circuit ports.  Pure planning: no switch, no socket, no clock.

A tree through devices needs about N/(E-2) of them (a device of E ports keeps one for its parent and
one more is spent per device joined), so few clusters can give every job a full tree per interface.
The plan therefore combines *parts*: each part is a small topology with its own algorithm, using some
of every worker's interfaces and some devices, and carrying its own share of the call.  The catalogue
(``shapes``):

- ``ring``: a ring of circuits over 2 interfaces, run both ways (two directed rings, half each):
  2(N-1) steps, each worker sends (N-1)/N of its share on each interface.
- ``tree``: one interface per worker into a tree of ceil((N-2)/(E-2)) devices: a round trip through
  the tree's depth, each worker's share once each way.
- ``torus`` (g): a ring of rings over 4 interfaces (the hierarchical ring layout of ``worker.ring_layout``):
  rings of g workers, then rings of N/g across them, both run both ways: a ring's bandwidth on twice the
  interfaces, in 2(g-1) + 2(N/g-1) steps instead of 2(N-1).
- ``ring_tree`` (g): partial trees joined by rings.  Groups of g workers each form a ring of circuits
  through one device; the group's two halves stream their partial sums towards it along the ring
  (hosts add their own as a chunk passes), the devices of the groups sum across groups in a small tree
  of devices, and the result flows back along the rings.  Each worker uses 2 interfaces and moves its
  share once each way on each (a ring's bandwidth), in g + 2 x depth steps instead of 2(N-1), with
  N/g + about N/(g(E-2)) devices.
- with NIC streaming (a worker's NIC sums as data passes: SmartNICs): ``nic_mesh`` (d): a d-regular
  graph of circuits in which each chunk is summed towards a meeting circuit along a tree and spread
  back the same way: 2h + 1 steps, h the farthest worker's distance from the circuit (``mesh_offsets``);
  d = 2 is the ring with NIC streaming (N - 1 steps), d = D NTT's optimised topology (3 steps at 8
  nodes of 4 interfaces).  Every circuit carries its equal part of the 2(N-1) transfers a chunk
  needs (balanced: exact for 8 nodes on K_{4,4}, assumed beyond).

A part's time is latency + bytes / bandwidth (``Shape.seconds``), as the one model costs it
(``controller.model``: ``circuit_ring_cost``, ``circuit_torus_cost``, ``device_tree_cost``,
``ring_tree_cost``, ``nic_mesh_cost``; this module only says which shapes fit).  The plan is the least
time T at which some combination of parts carries the call: for a given T a part of shape k carries at
most (T - latency_k) / seconds_per_byte_k, and the best combination under the devices M and the
interfaces D of every worker is a two-dimensional knapsack, solved exactly as a small MILP
(``scipy.optimize.milp``); T is found by bisection (the carried amount only grows with T).  Shares
then make every part end at once (``model.part_shares``: the hybrid split's closed form).  Every worker
uses the same interfaces for the same part, so assigning interfaces and devices to parts is a walk over
them (``_assign``), and the circuits follow (``controller.circuits``: the wiring of each kind of part).

Every kind is what the virtual fabric and ``worker.direct.DirectWorker`` (on sockets) run (``runs`` says where
each kind runs; docs/direct.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize

from controller.circuits import (
    DeviceTree,
    device_tree,
    end_of,
    mesh_circuits,
    mesh_routes,
    ring_circuits,
    ring_tree_chains,
    ring_tree_circuits,
    route_loads,
    torus_circuits,
    tree_circuits,
    tree_devices,
)
from controller.model import (
    DEFAULT_HOST_LATENCY,
    PartCost,
    circuit_ring_cost,
    circuit_ring_step,
    circuit_torus_cost,
    device_tree_cost,
    nic_mesh_cost,
    part_shares,
    ring_tree_cost,
)
from controller.topology import MAX_PORT, read_json
from worker import protocol
from worker.direct import split
from worker.tuner import TreePipe

RUNS_IN_FABRIC = ("ring", "torus", "tree", "nic_mesh", "ring_tree")  # what the virtual fabric runs
RUNS_ON_SOCKETS = ("ring", "torus", "tree", "nic_mesh", "ring_tree")  # what a worker runs (DirectWorker)
# slots a device gives a tree: ina.p4's whole default pool (INA_POOL_SLOTS), as a device serves one part
# (tests/test_direct.py checks it against the built program)
DEVICE_POOL = 1024
BISECTION_STEPS = 60
MOST = {"workers.count": 1 << 16, "workers.interfaces": 64, "devices.count": 1 << 20}  # beyond: refused, by name
GROUP_SIZES = 24  # ring_tree group sizes tried: about this many, spread geometrically from 3 to N


class DirectError(ValueError):
    """A direct-connect cluster that cannot be described or planned; the message names the field."""


@dataclass(frozen=True)
class DirectCluster:
    """N workers with D interfaces at L each way, M aggregation devices of E ports summing at A, and the
    latency of one circuit hop and of a host (wire to the worker's loop)."""

    workers: int
    interfaces: int
    link_gbps: float
    devices: int = 0
    device_ports: int = 4
    device_gbps: float | None = None  # the summed stream a device can put out (None: at the link rate)
    hop_latency: float = 1e-6  # seconds per circuit, each way (propagation through the OCS)
    host_latency: float = DEFAULT_HOST_LATENCY
    nic_streaming: bool = False  # the workers' NICs sum as data passes (SmartNICs)

    def __post_init__(self) -> None:
        _whole("workers.count", self.workers, 2)
        _whole("workers.interfaces", self.interfaces, 1)
        _positive("workers.gbps", self.link_gbps)
        _whole("devices.count", self.devices, 0)
        _whole("devices.ports", self.device_ports, 3)
        if self.device_gbps is not None:
            _positive("devices.gbps", self.device_gbps)
        for name, value in (("hop_latency_us", self.hop_latency), ("host_latency_us", self.host_latency)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise DirectError(f"{name}: a latency is a number of microseconds >= 0, not {value!r}")
        if not isinstance(self.nic_streaming, bool):
            raise DirectError(f"workers.nic_streaming: true or false, not {self.nic_streaming!r}")

    @property
    def link_bytes(self) -> float:
        """L in bytes per second, each way."""
        return self.link_gbps * 1e9 / 8

    @property
    def device_bytes(self) -> float:
        return (self.device_gbps or self.link_gbps) * 1e9 / 8

    def to_dict(self) -> dict:
        return {"workers": {"count": self.workers, "interfaces": self.interfaces, "gbps": self.link_gbps,
                            "nic_streaming": self.nic_streaming},
                "devices": {"count": self.devices, "ports": self.device_ports,
                            **({"gbps": self.device_gbps} if self.device_gbps is not None else {})},
                "hop_latency_us": self.hop_latency * 1e6, "host_latency_us": self.host_latency * 1e6}

    @classmethod
    def from_dict(cls, data: Any, where: str = "cluster") -> DirectCluster:
        if not isinstance(data, dict):
            raise DirectError(f"{where}: a cluster is a JSON object with 'workers' and 'devices'")
        unknown = sorted(set(data) - {"workers", "devices", "hop_latency_us", "host_latency_us"})
        if unknown:
            raise DirectError(f"{where}: unknown field(s) {unknown}")
        workers = _section(data, "workers", {"count", "interfaces", "gbps", "nic_streaming"}, where)
        devices = _section(data, "devices", {"count", "ports", "gbps"}, where, required=False)
        for name in ("count", "interfaces", "gbps"):
            if name not in workers:
                raise DirectError(f"{where}: workers.{name} is missing")
        try:
            return cls(workers["count"], workers["interfaces"], workers["gbps"], devices.get("count", 0),
                       devices.get("ports", 4), devices.get("gbps"),
                       _microseconds(data.get("hop_latency_us", 1.0), "hop_latency_us"),
                       _microseconds(data.get("host_latency_us", DEFAULT_HOST_LATENCY * 1e6), "host_latency_us"),
                       workers.get("nic_streaming", False))
        except DirectError as e:
            raise DirectError(f"{where}: {e}") from None

    @classmethod
    def load(cls, path: str | Path) -> DirectCluster:
        return cls.from_dict(read_json(path, DirectError), str(path))


def _section(data: dict, name: str, fields: set[str], where: str, required: bool = True) -> dict:
    section = data.get(name)
    if section is None and not required:
        return {}
    if not isinstance(section, dict):
        raise DirectError(f"{where}: {name} must be an object with {', '.join(sorted(fields))}")
    unknown = sorted(set(section) - fields)
    if unknown:
        raise DirectError(f"{where}: unknown field(s) {[f'{name}.{u}' for u in unknown]}")
    return section


def _whole(name: str, value: Any, least: int) -> None:
    most = MOST.get(name, MAX_PORT if name == "devices.ports" else None)
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most and value > most):
        raise DirectError(f"{name}: a whole number from {least} to {most}, not {value!r}" if most else
                          f"{name}: a whole number >= {least}, not {value!r}")


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise DirectError(f"{name}: a positive number of Gbit/s, not {value!r}")


def _microseconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise DirectError(f"{name}: a latency is a number of microseconds >= 0, not {value!r}")
    return float(value) * 1e-6


# --- the catalogue -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """A kind of part: what it takes of every worker and of the devices, and what a share costs it (the one
    model's ``controller.model.PartCost``)."""

    kind: str  # ring, torus, tree, ring_tree, nic_mesh
    group: int  # torus, ring_tree: workers per group; nic_mesh: circuits per worker; else 0
    interfaces: int  # of every worker's
    devices: int
    cost: PartCost

    @property
    def steps(self) -> int:
        return self.cost.steps

    @property
    def latency(self) -> float:
        return self.cost.latency

    @property
    def per_byte(self) -> float:
        return self.cost.per_byte

    @property
    def volume(self) -> float:
        return self.cost.volume

    @property
    def pipe(self) -> TreePipe | None:
        return self.cost.pipe

    @property
    def window(self) -> int:
        return self.cost.window

    def exact_seconds(self, nbytes: float, values: int) -> float:
        return self.cost.exact_seconds(nbytes, values)

    def seconds(self, nbytes: float) -> float:
        return self.cost.seconds(nbytes)

    def carries(self, seconds: float) -> float:
        return self.cost.carries(seconds)

    @property
    def name(self) -> str:
        return f"{self.kind}({self.group})" if self.group else self.kind


def shapes(cluster: DirectCluster, P: protocol.Protocol | None = None) -> list[Shape]:
    """The catalogue for this cluster (what fits in its interfaces and devices), each costed by the model."""
    P = P or protocol.load()
    n, c = cluster.workers, cluster
    step = circuit_ring_step(c.hop_latency, c.host_latency, c.link_bytes)
    found = []
    if n >= 3 and c.interfaces >= 2:  # two directed rings, half the share each
        found.append(Shape("ring", 0, 2, 0, circuit_ring_cost(n, c.link_bytes, step)))
    if n == 2:  # one circuit: an exchange of halves
        found.append(Shape("ring", 0, 1, 0, circuit_ring_cost(n, c.link_bytes, step)))
    t = device_tree(n, c.device_ports)
    if t.devices <= c.devices:
        found.append(tree_shape(c, t, P))
    if c.interfaces >= 4:  # rings of rings: g workers per first-level ring, n/g per second-level one
        for g in _torus_sizes(n):
            found.append(Shape("torus", g, 4, 0, circuit_torus_cost(n, g, c.link_bytes, step)))
    for g in _group_sizes(n):
        s = _ring_tree_shape(c, g, P)
        if s.devices <= c.devices and s.interfaces <= c.interfaces:
            found.append(s)
    if c.nic_streaming:
        for d in range(2, c.interfaces + 1):
            if d % 2 and n % 2:
                continue  # an odd degree needs an even number of workers
            found.append(nic_mesh_shape(c, d, P))
    return found


def nic_mesh_shape(cluster: DirectCluster, d: int, P: protocol.Protocol) -> Shape:
    """A NIC mesh of degree d (``controller.nic_mesh``), costed by ``model.nic_mesh_cost`` from its routes: the
    deepest meeting tree and the busiest circuit direction, the NICs' pool shared by the routes."""
    routes = mesh_routes(cluster.workers, d)
    cost = nic_mesh_cost(max(r.depth for r in routes), max(route_loads(routes).values()), len(routes),
                         cluster.link_bytes, cluster.link_bytes * cluster.interfaces, cluster.hop_latency,
                         cluster.host_latency, P.frame_bytes, P.values, DEVICE_POOL)
    return Shape("nic_mesh", d, d, 0, cost)


def tree_shape(cluster: DirectCluster, t: DeviceTree, P: protocol.Protocol) -> Shape:
    """A full tree of devices on one interface of every worker, costed by ``controller.model.device_tree_cost``
    (at most ``DEVICE_POOL`` slots)."""
    return Shape("tree", 0, 1, t.devices, device_tree_cost(t.depth, cluster.link_bytes, cluster.device_bytes,
                                                           cluster.hop_latency, cluster.host_latency,
                                                           P.frame_bytes, P.values, DEVICE_POOL))


def _ring_tree_shape(c: DirectCluster, g: int, P: protocol.Protocol) -> Shape:
    """Groups of g workers, each a ring of circuits through its device whose two halves are chains of host relays
    streaming towards it (``circuits.ring_tree_chains``), the groups' devices joined by a tree of devices above
    them; costed by ``model.ring_tree_cost``."""
    groups = math.ceil(c.workers / g)
    joining = 0 if groups <= 2 else tree_devices(groups, c.device_ports)  # devices above the groups' devices
    above = 1 if groups == 2 else device_tree(groups, c.device_ports).depth  # circuits from a group's device up
    chain = max(len(x) for x in ring_tree_chains(g))
    return Shape("ring_tree", g, 2, groups + joining,
                 ring_tree_cost(chain, above, c.link_bytes, c.device_bytes, c.hop_latency, c.host_latency,
                                P.frame_bytes, P.values, DEVICE_POOL))


def _torus_sizes(n: int) -> list[int]:
    """First-level ring sizes g of a torus: divisors of n with both levels at least 2 and one at least 3 (a
    level of 2 is a pair exchanging over its two circuits, one each way, as a ring's two directions do: the
    same steps and bytes per interface as a ring's; 2 x 2 is left to the ring); the few nearest sqrt(n) on
    each side, where the steps are fewest."""
    sizes = [g for g in range(2, n // 2 + 1) if n % g == 0 and max(g, n // g) >= 3]
    return sorted(sorted(sizes, key=lambda g: abs(math.log(g * g / n)))[:6])


def _group_sizes(n: int) -> list[int]:
    """ring_tree group sizes worth trying: 3..n, geometrically spaced (the step count is what changes)."""
    if n < 4:
        return []
    sizes = {round(3 * (n / 3) ** (i / (GROUP_SIZES - 1))) for i in range(GROUP_SIZES)}
    return sorted(g for g in sizes if 3 <= g < n)


# --- the plan ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One part of a plan: its shape, which of every worker's interfaces and which devices it has, its
    share of the call, and its circuits (pairs of ports: "w3.1" is worker 3's interface 1, "d7.2" device
    7's port 2)."""

    shape: Shape
    interfaces: tuple[int, ...]
    devices: tuple[int, ...]
    share: float
    circuits: tuple[tuple[str, str], ...]
    order: tuple[int, ...] = ()  # a ring's workers in ring order
    root: int | None = None  # a tree's root device

    def to_dict(self) -> dict:
        return {"kind": self.shape.kind, "group": self.shape.group, "interfaces": list(self.interfaces),
                "devices": list(self.devices), "share": self.share, "steps": self.shape.steps,
                "latency_us": self.shape.latency * 1e6, "ns_per_byte": self.shape.per_byte * 1e9,
                "runs": runs(self.shape.kind), "root": self.root, "order": list(self.order),
                "pool_size": self.shape.window or None,
                "circuits": [list(c) for c in self.circuits]}


@dataclass(frozen=True)
class DirectPlan:
    cluster: DirectCluster
    nbytes: int  # per worker and call
    parts: tuple[Part, ...]
    seconds: float  # the plan's time for the call
    values: int  # per packet, as the trees' windows and times were planned (the devices' INA_VALUES)
    baselines: dict[str, float | None] = field(default_factory=dict)  # the plain ring; a full tree per interface
    planning_seconds: float = 0.0

    @property
    def devices_used(self) -> int:
        return sum(len(p.devices) for p in self.parts)

    @property
    def circuits(self) -> list[tuple[str, str]]:
        return [c for p in self.parts for c in p.circuits]

    @property
    def steps(self) -> int:
        return max((p.shape.steps for p in self.parts), default=0)

    @property
    def transfer_seconds(self) -> float:
        """The bandwidth term: the slowest part's bytes over its rate, headers in."""
        return max((p.shape.cost.transfer_seconds(p.share * self.nbytes) for p in self.parts), default=0.0)

    @property
    def transfer_lb(self) -> float:
        """NTT's transfer time in units of L x b (the call's bits times the seconds per bit of one interface):
        the busiest interface's payload, headers left out."""
        return max((p.shape.volume * p.share for p in self.parts), default=0.0)

    def slices(self, elements: int) -> list[tuple[int, int]]:
        """Each part's element range of a call of ``elements``, as every worker splits it."""
        return split(self.parts, elements)

    def to_dict(self) -> dict:
        return {"cluster": self.cluster.to_dict(), "bytes": self.nbytes, "values": self.values, "seconds": self.seconds,
                "steps": self.steps, "transfer_seconds": self.transfer_seconds, "devices_used": self.devices_used,
                "baselines": self.baselines, "planning_seconds": self.planning_seconds,
                "parts": [p.to_dict() for p in self.parts], "circuits": [list(c) for c in self.circuits]}


def plan(cluster: DirectCluster, nbytes: int, kinds: Iterable[str] | None = None,
         P: protocol.Protocol | None = None) -> DirectPlan:
    """The fastest combination of parts for a call of ``nbytes`` per worker (``kinds``: only these shapes)."""
    started = time.perf_counter()
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise DirectError(f"bytes: a whole number >= 1, not {nbytes!r}")
    P = P or protocol.load()
    wanted = None if kinds is None else set(kinds)
    catalogue = [s for s in shapes(cluster, P) if wanted is None or {s.kind, s.name} & wanted]
    if not catalogue:
        raise DirectError(f"no part fits {cluster.workers} workers with {cluster.interfaces} interface(s) and "
                          f"{cluster.devices} device(s)" + (f" among {sorted(wanted)}" if wanted else ""))
    parts, seconds = _solve(cluster, catalogue, nbytes, P)
    return DirectPlan(cluster, nbytes, tuple(parts), seconds, P.values, baselines(cluster, nbytes, P),
                      time.perf_counter() - started)


def plan_of(cluster: DirectCluster, nbytes: int, names: Sequence[str],
            P: protocol.Protocol | None = None) -> DirectPlan:
    """A plan of exactly these parts (a shape's name each: ``("tree", "ring")`` is one tree and one ring), with
    the shares that end them together (a part whose latency alone is longer gets none, and is left out): to
    run or show a combination the planner did not choose."""
    started = time.perf_counter()
    P = P or protocol.load()
    catalogue = {s.name: s for s in shapes(cluster, P)}
    missing = sorted(set(names) - set(catalogue))
    if missing or not names:
        raise DirectError(f"parts {list(names)}: {', '.join(missing) or 'none'} not among the shapes that fit this "
                          f"cluster ({', '.join(sorted(catalogue)) or 'none'})")
    chosen = [catalogue[k] for k in names]
    interfaces, devices = sum(s.interfaces for s in chosen), sum(s.devices for s in chosen)
    if interfaces > cluster.interfaces or devices > cluster.devices:
        raise DirectError(f"parts {list(names)} take {interfaces} interface(s) and {devices} device(s); the "
                          f"cluster has {cluster.interfaces} and {cluster.devices}")
    parts, seconds = _combine(cluster, chosen, nbytes, P)
    return DirectPlan(cluster, nbytes, tuple(parts), seconds, P.values, baselines(cluster, nbytes, P),
                      time.perf_counter() - started)


def _solve(cluster: DirectCluster, catalogue: list[Shape], nbytes: int,
           P: protocol.Protocol) -> tuple[list[Part], float]:
    counts, _ = best_combination(catalogue, cluster.interfaces, cluster.devices, nbytes)
    return _combine(cluster, [s for s, k in zip(catalogue, counts) for _ in range(k)], nbytes, P)


def _combine(cluster: DirectCluster, chosen: list[Shape], nbytes: int,
             P: protocol.Protocol) -> tuple[list[Part], float]:
    """These parts, with shares that end them together, their interfaces, devices and circuits, and the time."""
    shares = part_shares([s.cost for s in chosen], nbytes)
    parts = _assign(cluster, [(s, x) for s, x in zip(chosen, shares) if x > 0])
    return parts, max(p.shape.exact_seconds(p.share * nbytes, P.values) for p in parts)


def baselines(cluster: DirectCluster, nbytes: int, P: protocol.Protocol) -> dict[str, float | None]:
    """The plain ring on every pair of interfaces, and one full tree per interface (None: does not fit)."""
    out: dict[str, float | None] = {}
    for name, kind, devices in (("ring", "ring", 0),
                                ("tree_per_interface", "tree", cluster.interfaces * tree_devices(
                                    cluster.workers, cluster.device_ports))):
        roomy = replace(cluster, devices=devices, nic_streaming=False)
        shape = [s for s in shapes(roomy, P) if s.kind == kind]
        out[name] = _solve(roomy, shape, nbytes, P)[1] if shape else None
    return out


def best_combination(catalogue: list[Shape], interfaces: int, devices: int, nbytes: float) -> tuple[list[int], float]:
    """How many parts of each shape, and the least time T at which they carry ``nbytes``: bisection on T,
    each T a knapsack (maximise the bytes carried by T under the interfaces and devices) solved as a MILP."""
    def best(t: float) -> tuple[list[int], float]:
        value = np.array([s.carries(t) for s in catalogue])
        if not value.any():
            return [0] * len(catalogue), 0.0
        use = np.array([[s.interfaces for s in catalogue], [s.devices for s in catalogue]], dtype=float)
        found = optimize.milp(-value / value.max(), integrality=np.ones(len(catalogue)),
                              bounds=optimize.Bounds(0, interfaces),
                              constraints=optimize.LinearConstraint(use, -np.inf, [interfaces, devices]))
        x = np.round(found.x).astype(int) if found.x is not None else np.zeros(len(catalogue), int)
        return list(x), float(value @ x)

    fits = [s for s in catalogue if s.interfaces <= interfaces and s.devices <= devices]
    if not fits:
        return [0] * len(catalogue), math.inf
    hi = min(s.seconds(nbytes) for s in fits) * (1 + 1e-9)  # one part alone carries the call by then
    lo = 0.0
    counts, _ = best(hi)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        x, got = best(mid)
        if got >= nbytes:
            hi, counts = mid, x
        else:
            lo = mid
        if hi - lo <= hi * 1e-6:
            break
    return counts, hi


def _assign(cluster: DirectCluster, chosen: list[tuple[Shape, float]]) -> list[Part]:
    """Interfaces and devices to the parts, in turn, and each part's circuits (every worker the same
    interfaces for the same part: workers are re-assigned as a whole)."""
    parts, interface, device = [], 0, 0
    n = cluster.workers
    for shape, share in sorted(chosen, key=lambda x: (x[0].kind, -x[0].interfaces)):
        ifaces = tuple(range(interface, interface + shape.interfaces))
        devs = tuple(range(device, device + shape.devices))
        interface, device = interface + shape.interfaces, device + shape.devices
        order, root = tuple(range(n)), None
        if shape.kind == "ring" or (shape.kind == "nic_mesh" and shape.group == 2):
            circuits = ring_circuits(order, ifaces)
        elif shape.kind == "torus":
            circuits = torus_circuits(n, shape.group, ifaces)
        elif shape.kind == "tree":
            circuits, root = tree_circuits(n, ifaces[0], devs, cluster.device_ports), devs[0]
        elif shape.kind == "ring_tree":
            circuits = ring_tree_circuits(n, shape.group, ifaces, devs, cluster.device_ports)
        else:
            circuits = mesh_circuits(n, shape.group, ifaces)
        parts.append(Part(shape, ifaces, devs, share, tuple(circuits),
                          order if shape.kind in ("ring", "torus") else (), root))
    return parts


def check_circuits(cluster: DirectCluster, circuits: Iterable[tuple[str, str]]) -> None:
    """Every port in at most one circuit, every port one the cluster has (a plan's invariant; tests use it)."""
    seen: set[str] = set()
    for pair in circuits:
        for end in pair:
            kind, node, port = end_of(end)
            ok = (kind == "w" and 0 <= node < cluster.workers and 0 <= port < cluster.interfaces) or \
                 (kind == "d" and 0 <= node < cluster.devices and 1 <= port <= cluster.device_ports)
            if not ok or end in seen:
                raise DirectError(f"circuit {pair}: port {end} " + ("is used twice" if ok else "does not exist"))
            seen.add(end)


def read_circuits(path: str | Path) -> list[tuple[str, str]]:
    """A circuits file (`ina-ctl direct plan --circuits`: a JSON list of [end, end] pairs), checked for form."""
    data = read_json(path, DirectError)
    if not isinstance(data, list) or not all(isinstance(c, list) and len(c) == 2 and all(isinstance(e, str) for e in c)
                                             for c in data):
        raise DirectError(f"{path}: a circuits file is a JSON list of [end, end] pairs like [\"w0.1\", \"d3.2\"]")
    return [(a, b) for a, b in data]


def check_programmed(p: DirectPlan, circuits: Sequence[tuple[str, str]], where: str = "circuits") -> None:
    """DirectError naming the first circuit the plan needs that ``circuits`` lacks (or has that it does not):
    a plan run on circuits programmed for another would send to the wrong ports."""
    check_circuits(p.cluster, circuits)
    want, have = {frozenset(c) for c in p.circuits}, {frozenset(c) for c in circuits}
    for c in p.circuits:
        if frozenset(c) not in have:
            raise DirectError(f"{where}: the plan needs circuit {list(c)} (part {_part_of(p, c) + 1}), which is "
                              f"not there: the OCS was programmed for another plan (same cluster, size and kinds?)")
    for i, c in enumerate(circuits):
        if frozenset(c) not in want:
            raise DirectError(f"{where}[{i}]: circuit {list(c)} is not in the plan")


def _part_of(p: DirectPlan, circuit: tuple[str, str]) -> int:
    return next(k for k, part in enumerate(p.parts) if circuit in part.circuits)


def tree_topology(cluster: DirectCluster, part: Part, P: protocol.Protocol | None = None) -> dict:
    """A tree part as a topology file (controller.topology): worker w's interface as host h<w+1>, each device
    as switch d<j> with its aggregation rate, the circuits as links at L with the hop's delay.  The
    controller plans and installs it like any network, and the model predicts it."""
    P = P or protocol.load()
    link = {"bw": cluster.link_gbps * 1e3, "delay": f"{cluster.hop_latency * 1e6:g}us"}
    hosts = {f"h{w}": {"ip": f"10.{1 + (w >> 16)}.{w >> 8 & 255}.{w & 255}/8",
                       "mac": f"02:00:01:{w >> 16 & 255:02x}:{w >> 8 & 255:02x}:{w & 255:02x}"}
             for w in range(1, cluster.workers + 1)}
    switches = {}
    for i, d in enumerate(part.devices):
        spec = {"ip": f"10.254.{i >> 8 & 255}.{i & 255}", "mac": f"02:00:00:fe:{i >> 8 & 255:02x}:{i & 255:02x}"}
        if cluster.device_gbps is not None:  # contributions/s: E children at A each
            spec["agg_pps"] = cluster.device_bytes / P.frame_bytes * cluster.device_ports
        switches[f"d{d}"] = spec

    def end(name: str) -> str:
        kind, node, port = end_of(name)
        return f"h{node + 1}" if kind == "w" else f"d{node}-p{port}"

    return {"hosts": hosts, "switches": switches, "links": [[end(a), end(b), dict(link)] for a, b in part.circuits]}


def runs(kind: str) -> str:
    """Where a kind of part runs."""
    return "fabric and sockets" if kind in RUNS_ON_SOCKETS else "fabric only" if kind in RUNS_IN_FABRIC \
        else "planned only"


def describe(p: DirectPlan) -> list[str]:
    """What `ina-ctl direct plan` prints."""
    c = p.cluster
    lines = [f"cluster: {c.workers} workers x {c.interfaces} interfaces at {c.link_gbps:g} Gbit/s; {c.devices} "
             f"device(s) of {c.device_ports} ports; hop {c.hop_latency * 1e6:g} us, host {c.host_latency * 1e6:g} us"
             + ("; NIC streaming" if c.nic_streaming else ""),
             f"call: {p.nbytes:,} bytes per worker: {p.seconds * 1e3:.3f} ms ({p.steps} steps, transfer "
             f"{p.transfer_seconds * 1e3:.3f} ms), {p.devices_used} device(s), planned in "
             f"{p.planning_seconds:.2f} s"]
    for name, t in p.baselines.items():
        said = f"{t * 1e3:.3f} ms" if t is not None else "does not fit"
        lines.append(f"  beside {name.replace('_', ' ')}: {said}")
    for part in p.parts:
        s = part.shape
        took = s.exact_seconds(part.share * p.nbytes, p.values)
        lines.append(f"  {s.name}: interfaces {list(part.interfaces)}, {len(part.devices)} device(s), share "
                     f"{part.share:.3f}, {s.steps} steps, {took * 1e3:.3f} ms"
                     + ("" if s.kind in RUNS_ON_SOCKETS else f" ({runs(s.kind)})"))
    return lines
