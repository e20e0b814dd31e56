"""Which aggregation trees a job gets and at what rate: the packing planner (pure functions, no switch).

A job's members hang off edge switches; an aggregation tree joins those switches to a root
switch, every member's partial sum going up one shortest path and the result coming back
down the same links.  One tree uses one path per edge switch, so on a fabric with several
paths (two spines, a fat-tree's cores) most links idle.  Like Blink, we pack several trees
and give each a share of the data in proportion to the rate it gets.

**What is solved.**  A tree t at rate x_t (wire Mb/s) puts x_t on every one of its links,
in both directions at once (contributions up, results down).  The planner maximises
sum(x_t) subject to, for every link, sum(x_t over the trees using it) <= its capacity
(the topology's ``bw``, per direction; both directions carry the same load, so one row
stands for both), with ``scipy.optimize.linprog`` (HiGHS).  Trees are shortest-path trees
towards a root (each switch's uplink is one of its ports towards the root, so no tree is
longer than needed); a tree must give no switch more than ``max_children`` children (the
slot bitmap's width): where the cheapest uplinks would, the tree's parents are chosen level
by level by a min-cost assignment within each switch's room.  The tree family is too large
to list, so the LP is solved by column generation: it starts with one tree per root, and
each round asks every root for its cheapest shortest-path tree under the LP's link prices
(its duals), adding any tree that would raise the rate, until none would (then once more
for trees as good as the LP's, which may be shallower).  The LP is then exact over the
trees it has seen; the pricing step is a heuristic (per-switch cheapest uplink, which may
miss the cheapest tree where paths share links), so the plan also carries a cut bound:
every tree crosses each member's host link and each member switch's fabric links, so no
packing can beat the smallest of those capacities.  When the plan meets that bound it is
optimal over all trees (leaf-spines and fat-trees whose switches take all their children
reach it); otherwise the gap is shown.  A second LP keeps the optimal rate and prefers
shallow trees (then fewer fabric links).  Every tree costs a job id, slots and a cell on
each of its switches, so the plan keeps few: trees below ``MIN_SHARE`` of the rate are
dropped and the rest packed again (unless that loses more than ``MAX_DROP_LOSS``), and at
most ``max_trees`` (``MAX_AUTO_TREES`` by default) are chosen by a MILP (a binary pick per
tree) among the LP's trees and the widest single trees.  Capacities are scaled for the
solver, so plans depend on capacity ratios only.

**Servers** (issue 62, NTT's Optcast: ``topology.Server``).  Each server host gets one tree of its own,
``Tree(root=server, uplinks=())``: every member sends to it along its route, so its links carry the tree's
rate once per member that crosses them (the server's own link ``members x x_t`` each way: the column's
coefficients are counts, not 1), and a row per server keeps ``members x x_t`` within what it sums
(``agg_pps_per_core x min(cores, lanes)`` frames of ``frame_bytes`` a second).  Plain switches
(``"plain": true``) are never a tree's node.  The rates split the call as for any trees: a slow server gets less.
More members than a server takes (``max_children``, ina.p4's slot bitmap) make trees of two levels
(``server_nodes``): the root sums its own part of the members and one partial per leaf server, each leaf its
part; a leaf is told its parent's result from a member's contribution by the child index alone (one port,
one job id), so it takes one member fewer.  Each server roots one such tree with the next servers as its
leaves, and a server's row counts every contribution a slot of each of its trees brings it, the leaves'
partials too: 64 members over 3 or more servers, but never over 2 (their 64 keys (port, job, child) would
all be members', with none left for a result or a partial).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, sparse

from controller.topology import Topology, TopologyError
from p4target.udpio import INGRESS_PORT
from worker import protocol

MIN_SHARE = 0.02  # a tree below this share of the job's rate is not worth its switch state...
MAX_DROP_LOSS = 0.05  # ...unless dropping the small trees would cost more than this share of the rate
MAX_ROUNDS = 30  # column generation rounds (each asks every root for a better tree)
MAX_AUTO_TREES = 16  # "auto" packs at most this many trees: each costs a job id, slots and a cell per switch
MILP_SECONDS = 3.0  # time limit of the tree-count MILP (the best found so far is kept)
_EPS = 1e-9


class PlanError(ValueError):
    """A job that this topology cannot carry."""


@dataclass(frozen=True)
class Child:
    index: int  # the child's index at this switch (its bit in the slot bitmap)
    port: int  # this switch's port towards the child
    node: str  # a member host or a child switch


@dataclass(frozen=True)
class TreeNode:
    switch: str
    children: tuple[Child, ...]
    parent: str | None  # None at the root (at a meeting root: the other end)
    parent_port: int  # 0 at the root
    index_at_parent: int
    peer: int | None = None  # a meeting root's: the other end's index among its children

    @property
    def is_root(self) -> bool:
        """It multicasts the result: the root, or either end of a meeting."""
        return self.parent is None or self.peer is not None


@dataclass(frozen=True)
class Tree:
    """An aggregation tree as the ports it goes up by: what the controller stores and re-derives from."""

    root: str
    uplinks: tuple[tuple[str, int], ...]  # (switch, its port towards its parent), by switch; not the root
    # a meeting tree (nic.p4, NTT's optimised topologies): this child switch of the root and the root are both
    # roots, each of its own half, and exchange their halves' sums over the circuit between them
    meeting: str | None = None

    def switches(self) -> list[str]:
        return sorted({self.root, *(s for s, _ in self.uplinks)})


@dataclass(frozen=True)
class PlannedTree:
    tree: Tree
    rate: float  # wire Mb/s on each of its links, each way
    share: float  # of the job's data


@dataclass(frozen=True)
class Plan:
    members: tuple[str, ...]
    trees: tuple[PlannedTree, ...]
    rate: float  # Mb/s of all trees together, as each member's host link carries it
    upper_bound: float  # no packing of trees can beat this (a cut bound)
    bottlenecks: tuple[int, ...]  # indexes in topology.links of the links at capacity
    candidates: int  # trees the LP considered
    seconds: float  # time spent planning
    wire_factor: float = 1.0  # wire bytes per tensor byte (headers)
    notes: tuple[str, ...] = field(default=())

    @property
    def optimal(self) -> bool:
        return self.rate >= self.upper_bound * (1 - 1e-6)

    def to_dict(self, topology: Topology) -> dict:
        return {"members": list(self.members), "rate_mbps": self.rate, "upper_bound_mbps": self.upper_bound,
                "optimal": self.optimal, "wire_factor": self.wire_factor,
                "candidates": self.candidates, "planning_seconds": self.seconds, "notes": list(self.notes),
                "bottlenecks": [link_name(topology, i) for i in self.bottlenecks],
                "trees": [{"root": p.tree.root, "rate_mbps": p.rate, "share": p.share,
                           "switches": p.tree.switches(), "depth": depth(topology, self.members, p.tree),
                           "uplinks": [list(u) for u in p.tree.uplinks]} for p in self.trees]}


def link_name(topology: Topology, index: int) -> str:
    link = topology.links[index]
    return f"{link.a} -- {link.b} ({link.capacity:g} Mb/s)"


# --- trees ---------------------------------------------------------------------------------------

def check_members(topology: Topology, members: list[str] | tuple[str, ...]) -> list[str]:
    """The members' edge switches, sorted; PlanError for unknown or repeated hosts, or servers."""
    if not members:
        raise PlanError("a job needs at least one member")
    unknown = [m for m in members if m not in topology.hosts]
    if unknown:
        raise PlanError(f"{', '.join(map(str, unknown))}: not hosts of the topology (hosts: "
                        f"{', '.join(sorted(topology.hosts)[:8])}{', ...' if len(topology.hosts) > 8 else ''})")
    if len(set(members)) != len(members):
        raise PlanError(f"a host is listed twice in {list(members)}")
    servers = [m for m in members if topology.hosts[m].server is not None]
    if servers:
        raise PlanError(f"{', '.join(servers)}: aggregation server(s) (the topology's \"server\"), not workers: "
                        f"a job's members must not be servers")
    return sorted({topology.attachment[m][0] for m in members})


def nodes(topology: Topology, members: list[str] | tuple[str, ...], tree: Tree) -> dict[str, TreeNode]:
    """Each switch's place in the tree: children (member hosts first, in member order, then child
    switches by name; that order gives the child indexes), parent and uplink port.  A server's tree is the
    server alone, every member a child on its one port (1)."""
    if is_server_tree(topology, tree):
        return server_nodes(members, tree)
    up = dict(tree.uplinks)
    children: dict[str, list[tuple[int, str]]] = {s: [] for s in tree.switches()}
    for m in members:
        switch, port = topology.attachment[m]
        children[switch].append((port, m))
    parent_of = {}
    for s, port in sorted(up.items()):
        n = topology.ports[s][port]
        parent_of[s] = n.node
        children[n.node].append((n.peer_port, s))
    peer = tree.meeting
    if peer is not None:  # the root takes its peer first, the peer the root last: their two indexes differ
        at_root = next(c for c in children[tree.root] if c[1] == peer)
        children[tree.root].remove(at_root)
        children[tree.root].insert(0, at_root)
        children[peer].append((up[peer], tree.root))  # the peer reaches the root by its uplink
    out = {}
    for s in sorted(children):
        parent = parent_of.get(s)
        index = [k for _, k in children[parent]].index(s) if parent else 0
        out[s] = TreeNode(s, tuple(Child(i, p, k) for i, (p, k) in enumerate(children[s])), parent,
                          up.get(s, 0), index)
    if peer is not None:
        last = len(children[peer]) - 1
        out[tree.root] = TreeNode(tree.root, out[tree.root].children, peer, children[tree.root][0][0], last, 0)
        out[peer] = TreeNode(peer, out[peer].children, tree.root, up[peer], 0, last)
    return out


SERVER_PORT = INGRESS_PORT  # a server's one port: every datagram comes in there (p4target.udpio)


def is_server_tree(topology: Topology, tree: Tree) -> bool:
    """Whether the tree is a server's (its root a host that aggregates)."""
    return tree.root in topology.hosts


def server_leaves(members: int, max_children: int) -> int:
    """The leaf servers a server tree of ``members`` needs below its root (0: the root takes them all).

    A server has one port, so its entries (port, job, child) tell a member's contribution from its parent's
    result by the child index alone: a leaf's index at the root is one its own members do not use, so a leaf
    sums at most ``max_children`` - 1 members and the root its own part plus one child per leaf."""
    leaves = 0
    while -(-members // (leaves + 1)) + leaves > max_children:
        leaves += 1
    return leaves


def server_groups(members: list[str] | tuple[str, ...], tree: Tree) -> list[tuple[str, tuple[str, ...]]]:
    """Which members each server of a server tree sums, root first, then its leaves (``uplinks`` order):
    near-equal parts in member order, the root's the largest, so a leaf's index at the root (after the
    root's own members) is above every index its own members take."""
    servers = [tree.root, *(s for s, _ in tree.uplinks)]
    size, extra = divmod(len(members), len(servers))
    groups, start = [], 0
    for i, server in enumerate(servers):
        end = start + size + (1 if i < extra else 0)
        groups.append((server, tuple(members[start:end])))
        start = end
    return groups


def server_nodes(members: list[str] | tuple[str, ...], tree: Tree) -> dict[str, TreeNode]:
    """A server tree's nodes: the root's children are its members, then its leaf servers; a leaf's are its
    members, each on the server's one port (1), its parent the root (``index_at_parent`` past the root's
    members, which no leaf member's index reaches: one port, no clash of a child's key with the parent's)."""
    (root, own), *leaves = server_groups(members, tree)
    at_root = [Child(i, SERVER_PORT, m) for i, m in enumerate(own)]
    at_root += [Child(len(own) + i, SERVER_PORT, leaf) for i, (leaf, _) in enumerate(leaves)]
    out = {root: TreeNode(root, tuple(at_root), None, 0, 0)}
    for i, (leaf, group) in enumerate(leaves):
        out[leaf] = TreeNode(leaf, tuple(Child(j, SERVER_PORT, m) for j, m in enumerate(group)), root,
                             SERVER_PORT, len(own) + i)
    return out


def server_of(members: list[str] | tuple[str, ...], tree: Tree) -> dict[str, str]:
    """The server each member of a server tree sends its contributions to (and hears its results from)."""
    return {m: server for server, group in server_groups(members, tree) for m in group}


def server_links(topology: Topology, members: list[str] | tuple[str, ...], tree: Tree,
                 own_links: bool = False) -> list[int]:
    """The links a server's tree loads, once per frame a slot puts on them: each member's route to its
    server (less the member's own link unless ``own_links``: the host-link row stands for those) and each
    leaf's route to the root (its partial up, the result down)."""
    skip = 0 if own_links else 1
    groups = server_groups(members, tree)
    links = [index for server, group in groups for m in group for index, _ in topology.route(m, server)[skip:]]
    return links + [index for leaf, _ in groups[1:] for index, _ in topology.route(leaf, tree.root)]


def depth(topology: Topology, members: list[str] | tuple[str, ...], tree: Tree) -> int:
    """Switch-to-switch hops from the deepest member's switch to the root."""
    up = dict(tree.uplinks)
    deepest = 0
    for m in members:
        s, hops = topology.attachment[m][0], 0
        while s in up:
            s, hops = topology.ports[s][up[s]].node, hops + 1
        deepest = max(deepest, hops)
    return deepest


def check_tree(topology: Topology, members: list[str] | tuple[str, ...], tree: Tree, max_children: int) -> None:
    """PlanError unless the tree joins every member's switch to its root within the fan-in limit."""
    up = dict(tree.uplinks)
    if is_server_tree(topology, tree):
        check_server_tree(topology, members, tree, max_children)
        return
    if tree.root not in topology.switches:
        raise PlanError(f"tree root {tree.root} is not a switch")
    plain = sorted(s for s in {tree.root, *up} if topology.switches[s].plain)
    if plain:
        raise PlanError(f"tree of root {tree.root}: {', '.join(plain)} cannot run P4 (plain) and cannot aggregate")
    for s, port in up.items():
        n = topology.ports.get(s, {}).get(port)
        if n is None or n.node not in topology.switches:
            raise PlanError(f"tree of root {tree.root}: {s}-p{port} does not lead to a switch")
    outside = sorted({topology.ports[s][p].node for s, p in up.items()} - {tree.root, *up})
    if outside:
        raise PlanError(f"tree of root {tree.root}: {', '.join(outside)} has no uplink of its own")
    for m in members:
        s, seen = topology.attachment[m][0], set()
        while s != tree.root:
            if s in seen or s not in up:
                raise PlanError(f"tree of root {tree.root}: {m}'s switch {s} has no path up to the root")
            seen.add(s)
            s = topology.ports[s][up[s]].node
    if tree.meeting is not None and tree.meeting not in up or \
            tree.meeting is not None and topology.ports[tree.meeting][up[tree.meeting]].node != tree.root:
        raise PlanError(f"tree of root {tree.root}: its meeting peer {tree.meeting} is not a child switch of the root")
    for node in nodes(topology, members, tree).values():
        if len(node.children) > max_children:
            raise PlanError(f"switch {node.switch} would have {len(node.children)} children "
                            f"({', '.join(c.node for c in node.children[:6])}...), but a slot bitmap has "
                            f"{max_children} bits: spread the members over more switches")


def check_server_tree(topology: Topology, members: list[str] | tuple[str, ...], tree: Tree,
                      max_children: int) -> None:
    """PlanError unless every node of a server tree is a server within the fan-in limit (a leaf one fewer:
    its parent's result takes an index); TopologyError where a member cannot reach its server."""
    servers = [tree.root, *(s for s, _ in tree.uplinks)]
    if any(s not in topology.hosts or topology.hosts[s].server is None for s in servers) or tree.meeting \
            or any(port != SERVER_PORT for _, port in tree.uplinks) or len(set(servers)) != len(servers):
        raise PlanError(f"tree of root {tree.root}: a server's tree has servers as its nodes, each once, a leaf "
                        f"on its port {SERVER_PORT}")
    for node in server_nodes(members, tree).values():
        room = max_children - (node.parent is not None)  # a leaf: one index is its parent's result
        if len(node.children) > room:
            raise PlanError(f"server {node.switch} would have {len(node.children)} children, but it takes "
                            f"{room} (a slot bitmap of {max_children} bits): {len(members)} members need a server "
                            f"tree of {server_leaves(len(members), max_children)} leaf server(s) below its root")
    server_links(topology, members, tree)


class _Fabric:
    """The switch graph of a topology, with breadth-first distances cached per root."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.neighbours = {s: sorted((n.node, n.port, topology.port_links[s, n.port])
                                     for n in topology.switch_neighbours(s)) for s in topology.switches}
        self._dist: dict[str, dict[str, int]] = {}

    def distances(self, root: str) -> dict[str, int]:
        if root not in self._dist:
            dist, queue = {root: 0}, deque([root])
            while queue:
                here = queue.popleft()
                for other, _, _ in self.neighbours[here]:
                    if other not in dist:
                        dist[other] = dist[here] + 1
                        queue.append(other)
            self._dist[root] = dist
        return self._dist[root]

    def _costs(self, root: str, dist: dict[str, int], reach: int,
               price: np.ndarray) -> tuple[dict[str, float], dict[str, int]]:
        """Each switch's cheapest price up to the root along shortest paths, and the uplink port giving it."""
        cost, uplink = {root: 0.0}, {}
        for s in sorted((s for s in dist if 0 < dist[s] <= reach), key=dist.__getitem__):
            best = None
            for other, port, link in self.neighbours[s]:
                if dist.get(other) == dist[s] - 1:
                    c = price[link] + cost[other]
                    if best is None or c < best[0] - _EPS:
                        best = (c, port)
            cost[s], uplink[s] = best
        return cost, uplink

    def cheapest_tree(self, root: str, edges: list[str], price: np.ndarray, hosts_at: dict[str, int],
                      max_children: int) -> Tree | None:
        """The shortest-path tree to ``root`` in which each switch goes up its cheapest way (uplink
        price plus the price beyond), re-assigned level by level where that gives a switch more than
        ``max_children`` children; None when some edge switch cannot reach the root or no tree fits."""
        dist = self.distances(root)
        if any(e not in dist for e in edges):
            return None
        cost, uplink = self._costs(root, dist, max(dist[e] for e in edges), price)
        used: dict[str, int] = {}
        for e in edges:
            s = e
            while s != root and s not in used:
                used[s] = uplink[s]
                s = self.topology.ports[s][uplink[s]].node
        children = dict(hosts_at)
        for s, port in used.items():
            parent = self.topology.ports[s][port].node
            children[parent] = children.get(parent, 0) + 1
        greedy = Tree(root, tuple(sorted(used.items())))
        if max(children.values()) <= max_children:
            return greedy
        # too many children somewhere: assign parents within the limit (or keep the greedy tree, which the
        # caller refuses with the fan-in named)
        return self._assigned_tree(root, edges, price, cost, hosts_at, max_children) or greedy

    def _assigned_tree(self, root: str, edges: list[str], price: np.ndarray, cost: dict[str, float],
                       hosts_at: dict[str, int], max_children: int) -> Tree | None:
        """From the deepest level up, the switches a tree needs pick their parents one hop nearer the
        root by a min-cost assignment (link price plus the parent's price beyond) within each parent's
        room for children: exact per level, so a fan-in limit is met wherever one level allows it."""
        dist = self.distances(root)
        needed, used = {e for e in edges if e != root}, {}
        for level in range(max((dist[e] for e in edges), default=0), 0, -1):
            here = sorted(s for s in needed if dist[s] == level)
            if not here:
                continue
            links = {}  # (child, parent) -> (cost, port): the cheapest of parallel links
            for s in here:
                for other, port, link in self.neighbours[s]:
                    if dist.get(other) == level - 1:
                        c = price[link] + cost[other]
                        if (s, other) not in links or c < links[s, other][0] - _EPS:
                            links[s, other] = (c, port)
            parents = sorted({p for _, p in links})
            seats = [p for p in parents for _ in range(max(0, max_children - hosts_at.get(p, 0)))]
            if len(seats) < len(here):
                return None
            big = 1e6 * (1 + max(c for c, _ in links.values()))
            matrix = np.array([[links.get((s, p), (big, 0))[0] for p in seats] for s in here])
            rows, cols = optimize.linear_sum_assignment(matrix)
            if any(matrix[r, c] >= big for r, c in zip(rows, cols)):
                return None
            for r, c in zip(rows, cols):
                child, parent = here[r], seats[c]
                used[child] = links[child, parent][1]
                if parent != root:
                    needed.add(parent)
        return Tree(root, tuple(sorted(used.items())))


def fabric_links(topology: Topology, tree: Tree) -> list[int]:
    """The links a tree's uplinks take: a switch's port up, a leaf server's route to its root."""
    if is_server_tree(topology, tree):
        return sorted({index for leaf, _ in tree.uplinks for index, _ in topology.route(leaf, tree.root)})
    return sorted(topology.port_links[s, p] for s, p in tree.uplinks)


# --- packing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlanRequest:
    """What every planning step reads, checked once: the fabric, the members, their switches, the fan-in."""

    topology: Topology
    fabric: _Fabric
    members: tuple[str, ...]
    edges: list[str]  # the members' switches, sorted
    hosts_at: dict[str, int]  # member hosts per switch
    max_children: int
    host_cap: float  # the slowest member's host link (Mb/s): every tree crosses it
    frame_bytes: int = 0  # a frame's bytes on the wire (what a server's rate is counted in); 0: no servers
    lanes: int = 1  # the lanes each tree is installed as (a server gives a tree a core per lane)

    @classmethod
    def of(cls, topology: Topology, members: list[str] | tuple[str, ...], max_children: int,
           frame_bytes: int | None = None, lanes: int = 1) -> PlanRequest:
        members = tuple(members)
        edges = check_members(topology, members)
        if frame_bytes is None:
            frame_bytes = protocol.load().frame_bytes if topology.servers else 0
        return cls(topology, _Fabric(topology), members, edges,
                   dict(Counter(topology.attachment[m][0] for m in members)), max_children,
                   topology.slowest_link_mbps(members), frame_bytes, lanes)

    def server_mbps(self, server: str, trees: int = 1) -> float:
        """Wire Mb/s of contributions a server sums, node of ``trees`` trees of ``lanes`` lanes each (a core
        per lane, at most its cores)."""
        return self.topology.hosts[server].server.agg_pps(self.lanes * trees) * self.frame_bytes * 8 / 1e6

    def server_rows(self, trees: Iterable[Tree]) -> list[tuple[dict[Tree, int], float]]:
        """One row per server the trees use: the contributions each tree's slot brings it (its children
        there), within the Mb/s it sums for all of them."""
        rows: dict[str, dict[Tree, int]] = {}
        for t in trees:
            if is_server_tree(self.topology, t):
                for node in server_nodes(self.members, t).values():
                    rows.setdefault(node.switch, {})[t] = len(node.children)
        return [(counts, self.server_mbps(s, len(counts))) for s, counts in sorted(rows.items())]

    def server_cap(self, trees: Iterable[Tree]) -> float:
        """The most these server trees carry together, per member: what their servers sum over the
        contributions a slot brings them (each member's, and each leaf's partial)."""
        rows = self.server_rows(trees)
        return sum(cap for _, cap in rows) / (len(self.members) + server_leaves(len(self.members), self.max_children))

    def server_alone(self, tree: Tree) -> float:
        """The most one server tree carries alone, per member: its busiest server's rate over its children."""
        return min(cap / counts[tree] for counts, cap in self.server_rows([tree]))

    def server_columns(self) -> tuple[dict[Tree, list[int]], list[str]]:
        """A tree per server with the links it loads (with multiplicity), and notes on servers left out.  Where
        the members are more than a server takes, each server roots a tree of two levels whose leaves are the
        servers after it (in turn), so every server is a root once and a leaf as often as a tree has leaves."""
        servers = self.topology.servers
        if not servers:
            return {}, []
        leaves = server_leaves(len(self.members), self.max_children)
        if leaves + 1 > len(servers):
            return {}, [f"no server trees: {len(self.members)} members need a server tree of {leaves + 1} servers (a "
                        f"server takes {self.max_children} children on its one port, a leaf one fewer), but the "
                        f"topology has {len(servers)}"]
        columns = {}
        for i, server in enumerate(servers):
            below = sorted(servers[(i + k) % len(servers)] for k in range(1, leaves + 1))
            tree = Tree(server, tuple((leaf, SERVER_PORT) for leaf in below))
            try:
                columns[tree] = server_links(self.topology, self.members, tree)
            except TopologyError:
                continue  # a server the members cannot reach carries nothing
        return columns, []

    def packing(self, columns: dict[Tree, list[int]], trees: Iterable[Tree] | None = None) -> _Packing:
        """The LP over ``trees`` (default: every column)."""
        chosen = columns if trees is None else {t: columns[t] for t in trees}
        return _Packing(self.topology, chosen, self.host_cap, self.server_rows(chosen))


def pack_trees(topology: Topology, members: list[str] | tuple[str, ...], max_children: int,
               max_trees: int | None = None, wire_factor: float = 1.0, frame_bytes: int | None = None,
               lanes: int = 1) -> Plan:
    """The packed trees for these members (``max_trees``: at most that many; None: as many as pay);
    ``frame_bytes`` and ``lanes`` size the servers' rows (default: the protocol's frame, one lane)."""
    started = time.perf_counter()
    request = PlanRequest.of(topology, members, max_children, frame_bytes, lanes)
    if max_trees is not None and (isinstance(max_trees, bool) or not isinstance(max_trees, int) or max_trees < 1):
        raise PlanError(f"the number of trees must be a positive integer, not {max_trees!r}")
    columns, notes = generate_columns(request)
    if max_trees is not None and max_trees > len(columns):
        raise PlanError(f"{max_trees} trees asked for, but the planner found only {len(columns)} candidate tree(s) "
                        f"for these members (at least one per switch that can be the root)")
    best_rates = request.packing(columns).solve(request.members)
    best = sum(best_rates.values())
    limited, limit_notes = limit_trees(request, columns, best_rates, MAX_AUTO_TREES if max_trees is None else max_trees)
    rates, prune_notes = prune_trees(request, columns, limited, best)
    notes += limit_notes + prune_notes
    total = sum(rates.values())
    if max_trees is None and total < best * (1 - 1e-6):
        notes.append(f"fewer, larger trees: {1 - total / best:.1%} of the best rate given up")
    order = sorted(rates, key=lambda t: (-round(rates[t], 9), depth(topology, request.members, t), t.root))
    planned = tuple(PlannedTree(t, rates[t], rates[t] / total) for t in order)
    if max_trees is not None and len(planned) < max_trees:
        notes.append(f"{len(planned)} tree(s) carry the best rate; more would add nothing")
    edges = request.edges
    bound = min([request.host_cap] + [_edge_cut(topology, request.fabric, e) for e in edges if len(edges) > 1])
    if all(is_server_tree(topology, t) for t in columns):  # no switch aggregates: the servers' sum bounds too
        bound = min(bound, request.server_cap(columns))
    host_links = [topology.host_link(m) for m in request.members]
    bottlenecks = request.packing(columns, rates).bottlenecks(rates, host_links)
    return Plan(request.members, planned, total, bound, bottlenecks, len(columns), time.perf_counter() - started,
                wire_factor, tuple(notes))


def generate_columns(request: PlanRequest) -> tuple[dict[Tree, list[int]], list[str]]:
    """The candidate trees (with the fabric links each uses) by column generation, and notes: the LP
    over every tree is too large to write down, so trees are added only while one would raise the rate."""
    columns, too_wide, reachable = priced_trees(request, np.zeros(len(request.topology.links)), {})
    served, notes = request.server_columns()
    if not columns and not served:
        if not reachable and not too_wide:
            if all(s.plain for s in request.topology.switches.values()):
                raise PlanError("no device can aggregate for these members: every switch is plain and no server "
                                "takes them" + (f" ({notes[0]})" if notes else ""))
            raise PlanError(f"the members' switches {request.edges} have no common root: they are not connected to "
                            f"one another")
        raise PlanError(f"every candidate tree exceeds the fan-in limit; e.g. {too_wide[0]}")
    columns = {**columns, **served}
    if not any(not is_server_tree(request.topology, t) for t in columns):
        return columns, notes  # servers' trees only: nothing to generate
    for _ in range(MAX_ROUNDS):
        _, price, host_price = request.packing(columns).max_rate()
        better, _, _ = priced_trees(request, price, columns, host_price, 1 - 1e-7)
        if not better:  # no tree would raise the rate: add trees as good as the LP's, maybe shallower ones
            as_good, _, _ = priced_trees(request, price, columns, host_price, 1 + 1e-7)
            return {**columns, **as_good}, notes
        columns = {**columns, **better}
    return columns, [*notes, f"column generation stopped after {MAX_ROUNDS} rounds"]


def priced_trees(request: PlanRequest, price: np.ndarray, known: dict[Tree, list[int]],
                 host_price: float | None = None, below: float = 1.0
                 ) -> tuple[dict[Tree, list[int]], list[str], bool]:
    """Each root's cheapest tree under these link prices that is not ``known``, fits the fan-in and (with a
    host price) costs less than ``below``: the new trees with their links, why others did not fit, and
    whether any root reached every member's switch at all."""
    topology, new, too_wide, reachable = request.topology, {}, [], False
    for root in topology.switches:
        if topology.switches[root].plain:
            continue
        tree = request.fabric.cheapest_tree(root, request.edges, price, request.hosts_at, request.max_children)
        if tree is not None and any(topology.switches[s].plain for s in tree.switches()):
            continue  # its shortest paths cross a switch that cannot aggregate
        reachable |= tree is not None
        if tree is None or tree in known or tree in new:
            continue
        links = fabric_links(topology, tree)
        if host_price is not None and host_price + sum(price[i] for i in links) >= below:
            continue
        try:
            check_tree(topology, request.members, tree, request.max_children)
        except PlanError as e:
            too_wide.append(str(e))
            continue
        new[tree] = links
    return new, too_wide, reachable


def limit_trees(request: PlanRequest, columns: dict[Tree, list[int]], rates: dict[Tree, float],
                limit: int) -> tuple[dict[Tree, float], list[str]]:
    """At most ``limit`` trees (each costs a job id, slots and a cell per switch), chosen by a MILP among
    the LP's trees and the widest single trees; the rates and notes on what that gave up."""
    if len(rates) <= limit:
        return rates, []
    topology = request.topology
    alone = {t: min([request.host_cap] + [topology.links[i].capacity / n for i, n in Counter(links).items()]
                    + ([request.server_alone(t)] if is_server_tree(topology, t) else []))
             for t, links in columns.items()}
    pool = set(rates) | set(sorted(alone, key=lambda t: -alone[t])[:2 * limit])
    chosen, proven = request.packing(columns, [t for t in columns if t in pool]).best_subset(limit)
    notes = [] if proven else [f"the MILP choosing {limit} tree(s) hit its {MILP_SECONDS:g} s limit: best found kept"]
    return chosen, notes


def prune_trees(request: PlanRequest, columns: dict[Tree, list[int]], rates: dict[Tree, float],
                best: float) -> tuple[dict[Tree, float], list[str]]:
    """Without the trees under ``MIN_SHARE`` of the rate (not worth their switch state), packed again,
    unless that loses more than ``MAX_DROP_LOSS`` of the ``best`` rate; the rates and notes."""
    while small := [t for t, x in rates.items() if x < MIN_SHARE * sum(rates.values())]:
        trial = request.packing(columns, [t for t in rates if t not in small]).solve(request.members)
        if sum(trial.values()) < best * (1 - MAX_DROP_LOSS):
            return rates, [f"{len(small)} tree(s) under {MIN_SHARE:.0%} of the rate kept: without them the plan "
                           f"would lose {1 - sum(trial.values()) / best:.0%} of its rate"]
        rates = trial
    return rates, []


def _edge_cut(topology: Topology, fabric: _Fabric, edge: str) -> float:
    """Capacity of an edge switch's links to other switches: every tree crosses them once."""
    return sum(topology.links[link].capacity for _, _, link in fabric.neighbours[edge])


class _Packing:
    """The LP over a set of trees: one row per fabric link they use (a link a tree lists n times carries n
    times its rate), one for the members' host links (every tree uses all of them, so the slowest stands
    for all), and one per server (``servers``: the contributions each tree's slot brings it, within the Mb/s
    it sums).  Capacities are scaled to at most 1 for the solver, so any unit of Mb/s plans alike."""

    def __init__(self, topology: Topology, columns: dict[Tree, list[int]], host_cap: float,
                 servers: list[tuple[dict[Tree, int], float]] | None = None) -> None:
        self.topology, self.trees = topology, list(columns)
        servers = servers or []
        self.rows = sorted({i for links in columns.values() for i in links})
        index = {link: r + 1 for r, link in enumerate(self.rows)}
        data, ri, ci = [], [], []
        for c, tree in enumerate(self.trees):
            for link in [None, *columns[tree]]:
                ri.append(0 if link is None else index[link])
                ci.append(c)
                data.append(1.0)  # repeated (row, column) pairs add up: a link's multiplicity
            for r, (counts, _) in enumerate(servers):
                if tree in counts:
                    ri.append(len(self.rows) + 1 + r)
                    ci.append(c)
                    data.append(float(counts[tree]))
        self.A = sparse.csr_matrix((data, (ri, ci)), shape=(len(self.rows) + 1 + len(servers), len(self.trees)))
        capacity = np.array([host_cap] + [topology.links[i].capacity for i in self.rows] + [cap for _, cap in servers])
        self.scale = float(capacity.max())
        self.b = capacity / self.scale

    def _lp(self, c: np.ndarray, **constraints) -> optimize.OptimizeResult:
        res = optimize.linprog(c, A_ub=self.A, b_ub=self.b, bounds=(0, None), method="highs", **constraints)
        if res.status != 0:
            raise PlanError(f"the packing LP failed: {res.message}")
        return res

    def _rates(self, x: np.ndarray) -> dict[Tree, float]:
        return {t: float(v) * self.scale for t, v in zip(self.trees, x) if v > _EPS}

    def max_rate(self) -> tuple[float, np.ndarray, float]:
        """The best total rate, each fabric link's price (the LP's duals, indexed like topology.links)
        and the host links' price."""
        res = self._lp(-np.ones(len(self.trees)))
        duals = -res.ineqlin.marginals
        price = np.zeros(len(self.topology.links))
        price[self.rows] = duals[1:len(self.rows) + 1]
        return -res.fun * self.scale, price, float(duals[0])

    def solve(self, members: tuple[str, ...]) -> dict[Tree, float]:
        """Rates at the best total; among those, shallow trees with few fabric links first."""
        best = -self._lp(-np.ones(len(self.trees))).fun
        links = np.asarray(self.A.sum(axis=0)).ravel()
        cost = np.array([1000.0 * depth(self.topology, members, t) for t in self.trees]) + links
        try:
            res = self._lp(cost, A_eq=np.ones((1, len(self.trees))), b_eq=[best])
        except PlanError:  # the solver's tolerance missed the exact best: settle for a hair less
            res = self._lp(cost, A_ub=sparse.vstack([self.A, -np.ones((1, len(self.trees)))]),
                           b_ub=np.append(self.b, -best * (1 - 1e-9)))
        return self._rates(res.x)
    def best_subset(self, count: int) -> tuple[dict[Tree, float], bool]:
        """At most ``count`` trees, at the best total rate they can reach (MILP: rate and a pick per tree)."""
        n = len(self.trees)
        big = float(self.b.max())
        c = np.concatenate([-np.ones(n), np.zeros(n)])
        rows = [sparse.hstack([self.A, sparse.csr_matrix(self.A.shape)]),
                sparse.hstack([sparse.identity(n), -big * sparse.identity(n)]),
                sparse.hstack([sparse.csr_matrix((1, n)), np.ones((1, n))])]
        upper = np.concatenate([self.b, np.zeros(n), [count]])
        res = optimize.milp(c, constraints=optimize.LinearConstraint(sparse.vstack(rows), -np.inf, upper),
                            integrality=np.concatenate([np.zeros(n), np.ones(n)]),
                            bounds=optimize.Bounds(0, np.concatenate([np.full(n, np.inf), np.ones(n)])),
                            options={"time_limit": MILP_SECONDS})
        if res.x is None:
            raise PlanError(f"choosing {count} tree(s) failed: {res.message}")
        return self._rates(np.where(res.x[n:] > 0.5, res.x[:n], 0.0)), res.status == 0

    def bottlenecks(self, rates: dict[Tree, float], host_links: list[int]) -> tuple[int, ...]:
        """The links these rates fill to capacity."""
        load = self.A @ np.array([rates.get(t, 0.0) / self.scale for t in self.trees])
        full = [self.rows[r - 1] for r in range(1, len(self.rows) + 1) if load[r] >= self.b[r] * (1 - 1e-6)]
        if load[0] >= self.b[0] * (1 - 1e-6):
            slowest = self.b[0] * self.scale
            full += [i for i in host_links if self.topology.links[i].capacity <= slowest * (1 + 1e-9)]
        return tuple(sorted(full))
