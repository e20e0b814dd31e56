"""The wiring of a direct-connect cluster's parts (controller/direct.py): trees of devices, rings and rings of
rings of circuits, circulant meshes, as the pairs of ports an optical circuit switch joins ("w3.1": worker 3's
interface 1; "d7.2": device 7's port 2).  Pure functions of the sizes."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph


class WiringError(ValueError):
    """Sizes that no wiring of this kind takes, or a port name that is not one."""


def end_of(name: str) -> tuple[str, int, int]:
    """"w3.1" -> ("w", 3, 1): worker 3's interface 1; "d7.2" -> ("d", 7, 2): device 7's port 2."""
    node, _, port = name.partition(".")
    if node[:1] not in ("w", "d") or not node[1:].isdigit() or not port.isdigit():
        raise WiringError(f"port {name!r} is neither w<worker>.<interface> nor d<device>.<port>")
    return node[0], int(node[1:]), int(port)


def tree_devices(leaves: int, ports: int) -> int:
    """Devices of ``ports`` ports that a tree needs to take ``leaves`` leaves: each device but the root
    gives one port to its parent, so m devices offer m(E-2) + 2 ports below them (at least one device)."""
    return max(1, math.ceil((leaves - 2) / (ports - 2)))


@dataclass(frozen=True)
class DeviceTree:
    """A tree of devices 0..m-1 (0 the root; numbered breadth first): each non-root device's port 1 goes to
    its parent, the rest take children; ``leaves[i]`` = (device, port) of leaf i."""

    parent: tuple[tuple[int, int], ...]  # device j >= 1: (its parent, the parent's port)
    leaves: tuple[tuple[int, int], ...]
    depth: int  # devices on the longest way from a leaf to the root

    @property
    def devices(self) -> int:
        return len(self.parent) + 1


def device_tree(leaves: int, ports: int) -> DeviceTree:
    """The shallowest tree of ``tree_devices(leaves, ports)`` devices: devices take the free ports breadth
    first, then the leaves take the rest, deepest devices' ports first only where they must."""
    m = tree_devices(leaves, ports)
    level = [0]
    free: list[tuple[int, int]] = [(0, p) for p in range(1, ports + 1)]  # (device, port), breadth first
    parent: list[tuple[int, int]] = []
    for j in range(1, m):
        parent.append(free.pop(0))
        level.append(level[parent[-1][0]] + 1)
        free += [(j, p) for p in range(2, ports + 1)]
    if len(free) < leaves:
        raise WiringError(f"{m} devices of {ports} ports take {len(free)} leaves, not {leaves}")
    # leaves go to the devices with no child device first (every device then has a child), deepest last
    childless = {j for j in range(m)} - {p for p, _ in parent}
    free.sort(key=lambda dp: (dp[0] not in childless, level[dp[0]], dp))
    taken = sorted(free[:leaves], key=lambda dp: (level[dp[0]], dp))
    return DeviceTree(tuple(parent), tuple(taken), max(level[d] for d, _ in taken) + 1)


def ring_circuits(order: tuple[int, ...], ifaces: tuple[int, ...]) -> list[tuple[str, str]]:
    """Each worker's first interface to the next worker's second, round the ring (two workers: one circuit)."""
    if len(order) == 2:
        return [(f"w{order[0]}.{ifaces[0]}", f"w{order[1]}.{ifaces[0]}")]
    a, b = ifaces
    return [(f"w{w}.{a}", f"w{order[(i + 1) % len(order)]}.{b}") for i, w in enumerate(order)]


def torus_circuits(n: int, g: int, ifaces: tuple[int, ...]) -> list[tuple[str, str]]:
    """Rings of g consecutive workers on the first two interfaces, rings of every g-th worker on the other two
    (``worker.ring_layout.Layout("hierarchical", (g, n // g), ...)``'s peers)."""
    a, b, c, d = ifaces
    first = [(f"w{w}.{a}", f"w{w - w % g + (w + 1) % g}.{b}") for w in range(n)]
    return first + [(f"w{w}.{c}", f"w{(w + g) % n}.{d}") for w in range(n)]


def tree_circuits(n: int, iface: int, devs: tuple[int, ...], ports: int) -> list[tuple[str, str]]:
    t = device_tree(n, ports)
    return ([(f"d{devs[j + 1]}.1", f"d{devs[p]}.{port}") for j, (p, port) in enumerate(t.parent)]
            + [(f"w{w}.{iface}", f"d{devs[d]}.{port}") for w, (d, port) in enumerate(t.leaves)])


def ring_tree_chains(g: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A ring_tree group's two chains, as positions in the group: the first half drains towards the device's
    port 1 (position 0 is next to it), the second towards port 2 (position g - 1 next to it); each in order
    from the device outwards."""
    first = (g + 1) // 2
    return tuple(range(first)), tuple(range(g - 1, first - 1, -1))


def ring_tree_circuits(n: int, g: int, ifaces: tuple[int, ...], devs: tuple[int, ...],
                        ports: int) -> list[tuple[str, str]]:
    """Each group's ring through its device (ports 1 and 2), the group devices joined by a tree (port 3)."""
    groups = math.ceil(n / g)
    a, b = ifaces
    out = []
    for k in range(groups):
        members = list(range(k * g, min(n, (k + 1) * g)))
        dev = devs[k]
        ends = [f"d{dev}.1", *(f"w{w}" for w in members), f"d{dev}.2"]
        for x, y in zip(ends[:-1], ends[1:]):
            out.append((x if x.startswith("d") else f"{x}.{a}", y if y.startswith("d") else f"{y}.{b}"))
    if groups == 2:
        out.append((f"d{devs[0]}.3", f"d{devs[1]}.3"))
    elif groups > 2:
        joining = devs[groups:]
        t = device_tree(groups, ports)
        out += [(f"d{joining[j + 1]}.1", f"d{joining[p]}.{port}") for j, (p, port) in enumerate(t.parent)]
        out += [(f"d{devs[k]}.3", f"d{joining[d]}.{port}") for k, (d, port) in enumerate(t.leaves)]
    return out


@functools.cache
def mesh_offsets(n: int, d: int) -> tuple[tuple[int, ...], int]:
    """A d-regular circulant graph on n workers (offsets; n/2 for an odd degree) whose meeting trees are
    shallow, and their depth h: offsets are added greedily, each the candidate that brings every worker
    nearest to some circuit's two ends (breadth first, by ``scipy.sparse.csgraph``)."""
    fixed = [n // 2] if d % 2 else []
    candidates = sorted({max(1, min((n - 1) // 2, round((n / 2) ** (k / 32)))) for k in range(33)} | {1, 2, 3})
    offsets: list[int] = []
    depth = n
    for _ in range(d // 2):
        best = None
        for o in candidates:
            if o in offsets or (n % 2 == 0 and o == n // 2):
                continue
            h = _meeting_eccentricity(n, (*offsets, o, *fixed))
            if best is None or h < best[0]:
                best = (h, o)
        if best is None:
            break
        depth = best[0]
        offsets.append(best[1])
    if not offsets:  # degree 1: the n/2 circuits alone
        depth = _meeting_eccentricity(n, tuple(fixed))
    return tuple(offsets + fixed), depth


def _meeting_eccentricity(n: int, offsets: tuple[int, ...]) -> int:
    """How far the farthest worker is from the nearer end of the best circuit (0, o)."""
    rows = np.repeat(np.arange(n), len(offsets))
    cols = (rows + np.tile(np.array(offsets), n)) % n
    graph = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    far = np.nan_to_num(csgraph.shortest_path(graph, directed=False, unweighted=True, indices=[0, *offsets]),
                        posinf=n)  # not reached: as far as can be
    return int(min(np.minimum(far[0], far[1 + i]).max() for i in range(len(offsets))))


def mesh_circuits(n: int, d: int, ifaces: tuple[int, ...]) -> list[tuple[str, str]]:
    """``mesh_offsets``' graph, each circuit on the next free interface of its two ends."""
    offsets, _ = mesh_offsets(n, d)
    edges = [(w, (w + o) % n) for o in offsets if not (n % 2 == 0 and o == n // 2) for w in range(n)]
    edges += [(w, w + n // 2) for w in range(n // 2)] if n % 2 == 0 and n // 2 in offsets else []
    used: dict[int, int] = {}
    out = []
    for u, v in edges:
        iu, iv = used.get(u, 0), used.get(v, 0)
        used[u], used[v] = iu + 1, iv + 1
        out.append((f"w{u}.{ifaces[iu]}", f"w{v}.{ifaces[iv]}"))
    return out


# --- a NIC mesh's routes ---------------------------------------------------------------------------

MESH_ROUTES = 64  # the most meeting trees a NIC mesh part gets: each is a job id, slots and a cell on every NIC


@dataclass(frozen=True)
class MeetingTree:
    """One route of a NIC mesh: a chunk class summed towards the circuit ``ends`` (two workers whose NICs are
    both roots, each of its own half, and exchange their halves' sums over it) and back.  ``parent[w]`` is
    the neighbour worker w's NIC sends its partial sum to (-1 at the two ends)."""

    ends: tuple[int, int]
    parent: tuple[int, ...]
    depth: int  # h: the farthest worker's hops to its end, so 2h + 1 transfers one after another

    def uses(self) -> list[tuple[int, int]]:
        """The circuit directions a chunk of this route crosses, once each: up (a partial sum), down (the result),
        and both ways across the meeting circuit."""
        u, v = self.ends
        up = [(w, p) for w, p in enumerate(self.parent) if p >= 0]
        return up + [(p, w) for w, p in up] + [(u, v), (v, u)]


def mesh_edges(n: int, d: int) -> list[tuple[int, int]]:
    """The workers each circuit of ``mesh_circuits(n, d, ...)`` joins, in the same order."""
    offsets, _ = mesh_offsets(n, d)
    edges = [(w, (w + o) % n) for o in offsets if not (n % 2 == 0 and o == n // 2) for w in range(n)]
    return edges + ([(w, w + n // 2) for w in range(n // 2)] if n % 2 == 0 and n // 2 in offsets else [])


@functools.cache
def mesh_routes(n: int, d: int, most: int = MESH_ROUTES) -> tuple[MeetingTree, ...]:
    """The mesh's routes: a meeting tree on each of its circuits (on every s-th rotation of each offset class
    where there are more than ``most`` circuits: the graph is a circulant, so rotations carry alike), each
    worker sending towards the nearer end (breadth first from both), and among equally near neighbours to the
    one whose circuit direction the routes so far load least, so the load spreads over the circuits."""
    edges = mesh_edges(n, d)
    step = next(s for s in range(1, n + 1) if n % s == 0 and len(edges) // s <= most)
    chosen = [(u, v) for u, v in edges if u % step == 0]
    around: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        around[u].append(v)
        around[v].append(u)
    load: dict[tuple[int, int], int] = {}
    routes = []
    for u, v in chosen:
        far = _distances(around, (u, v))
        parent = [-1] * n
        for w in sorted(range(n), key=lambda w: (far[w], w)):
            if w in (u, v):
                continue
            nearer = [x for x in around[w] if far[x] == far[w] - 1]
            parent[w] = min(nearer, key=lambda x: (load.get((w, x), 0) + load.get((x, w), 0), x))
        route = MeetingTree((u, v), tuple(parent), max(far))
        for direction in route.uses():
            load[direction] = load.get(direction, 0) + 1
        routes.append(route)
    return tuple(routes)


def _distances(around: list[list[int]], ends: tuple[int, ...]) -> list[int]:
    """Hops from each worker to the nearest of ``ends`` (breadth first); a worker not reached is refused."""
    far = [-1] * len(around)
    frontier = list(ends)
    for e in ends:
        far[e] = 0
    while frontier:
        nxt = []
        for w in frontier:
            for x in around[w]:
                if far[x] < 0:
                    far[x] = far[w] + 1
                    nxt.append(x)
        frontier = nxt
    if min(far) < 0:
        raise WiringError(f"a mesh of {len(around)} workers is not connected")
    return far


def route_loads(routes: tuple[MeetingTree, ...]) -> dict[tuple[int, int], float]:
    """The share of a call each circuit direction carries, the routes taking equal shares."""
    load: dict[tuple[int, int], float] = {}
    for r in routes:
        for direction in r.uses():
            load[direction] = load.get(direction, 0.0) + 1 / len(routes)
    return load
