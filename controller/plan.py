"""What a job needs on each switch, computed from the topology alone (no switch is touched).

``build_tree`` picks the root and each switch's children; ``job_entries`` and ``route_entries``
turn that into the exact table entries and multicast groups.  Everything is a pure function
of its inputs, so the controller can recompute a job's entries at any time (to delete them,
to re-provision a restarted switch, or to compare with what a switch holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.schema import Entry
from controller.topology import Topology, mac_int
from worker.protocol import Protocol

HIGH_WATER_CHILD = 0xFE  # jobs-table key child of the inert entry recording a switch's counters


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
    parent: str | None  # None at the root
    parent_port: int  # 0 at the root
    index_at_parent: int


@dataclass(frozen=True)
class Allocation:
    """A job's share of one switch: pool slots, a telemetry/multicast cell and an epoch."""

    pool_base: int
    cell: int  # job_stats cells cell*JOB_STAT_COUNT.., multicast group cell+1
    epoch: int


def build_tree(topology: Topology, members: list[str], max_children: int) -> dict[str, TreeNode]:
    """The aggregation tree: member hosts as leaves, switches on their paths to the root inside.

    The root is the switch with the smallest greatest distance to the members' switches
    (then the smallest total, then the name).  At each switch the member hosts come first,
    in member order, then child switches by name: that order gives the child indexes.
    """
    unknown = [m for m in members if m not in topology.hosts]
    if unknown:
        raise PlanError(f"unknown hosts {unknown}; the topology has {sorted(topology.hosts)}")
    if len(set(members)) != len(members):
        raise PlanError(f"a host is listed twice in {members}")
    if not members:
        raise PlanError("a job needs at least one member")
    edge = sorted({topology.attachment[m][0] for m in members})
    best = None
    for candidate in topology.switches:
        dist = topology.distances(candidate)
        if all(s in dist for s in edge):
            score = (max(dist[s] for s in edge), sum(dist[s] for s in edge), candidate)
            best = min(best or score, score)
    if best is None:
        raise PlanError(f"the members' switches {edge} are not connected to one another")
    root = best[2]
    uplink = topology.next_hops(root)  # switch -> its port towards the root
    parent_of: dict[str, tuple[str, int]] = {}
    for s in edge:
        while s != root and s not in parent_of:
            port = uplink[s]
            parent_of[s] = (topology.ports[s][port].node, port)
            s = parent_of[s][0]
    nodes = {root, *parent_of}
    children: dict[str, list[tuple[int, str]]] = {s: [] for s in nodes}
    for m in members:
        switch, port = topology.attachment[m]
        children[switch].append((port, m))
    for s in sorted(parent_of):
        parent, port = parent_of[s]
        children[parent].append((topology.ports[s][port].peer_port, s))
    for s, kids in children.items():
        if len(kids) > max_children:
            raise PlanError(f"switch {s} would have {len(kids)} children ({', '.join(k for _, k in kids)}), but a slot "
                            f"bitmap has {max_children} bits: spread the members over more switches")
    tree = {}
    for s in sorted(nodes):
        parent, port = parent_of.get(s, (None, 0))
        index = [k for _, k in children[parent]].index(s) if parent else 0
        tree[s] = TreeNode(s, tuple(Child(i, p, k) for i, (p, k) in enumerate(children[s])), parent, port, index)
    return tree


def job_entries(topology: Topology, protocol: Protocol, node: TreeNode, job_id: int, pool_size: int,
                alloc: Allocation, worker_port: int) -> tuple[list[Entry], tuple[int, list[tuple[int, int]]]]:
    """One switch's table entries for a job, and its multicast group as (id, [(port, instance)])."""
    me = topology.switches[node.switch]
    group = alloc.cell + 1  # group 0 means "no multicast"
    stats_base = alloc.cell * protocol.JOB_STAT_COUNT
    member = {"pool_base": alloc.pool_base, "pool_size": pool_size, "children": len(node.children),
              "is_root": int(node.parent is None), "group": group, "parent_port": node.parent_port,
              "index_at_parent": node.index_at_parent, "epoch": alloc.epoch, "stats_base": stats_base}
    entries = []
    for child in node.children:
        entries.append(Entry.of("InaIngress.jobs", {"sm.ingress_port": child.port, "hdr.ina.job_id": job_id,
                                                    "hdr.ina.child": child.index}, "InaIngress.member", member))
        entries.append(_address(job_id, child.index, topology, me, child.node,
                                worker_port if child.node in topology.hosts else protocol.INA_UDP_PORT))
    if node.parent is not None:
        entries.append(Entry.of("InaIngress.jobs", {"sm.ingress_port": node.parent_port, "hdr.ina.job_id": job_id,
                                                    "hdr.ina.child": node.index_at_parent},
                                "InaIngress.result_from_parent", {"group": group, "stats_base": stats_base}))
        entries.append(_address(job_id, protocol.RECEIVER_PARENT, topology, me, node.parent, protocol.INA_UDP_PORT))
    return entries, (group, [(c.port, c.index) for c in node.children])


def _address(job_id: int, receiver: int, topology: Topology, me, peer: str, udp_port: int) -> Entry:
    """Egress rewrite for one receiver: from this switch's address to the peer's."""
    if peer in topology.hosts:
        ip, mac = int(topology.hosts[peer].ip.ip), topology.hosts[peer].mac
    else:
        ip, mac = int(topology.switches[peer].ip), topology.switches[peer].mac
    return Entry.of("InaEgress.receivers", {"hdr.ina.job_id": job_id, "meta.receiver": receiver}, "InaEgress.address",
                    {"dst_mac": mac_int(mac), "src_mac": mac_int(me.mac), "dst_ip": ip, "src_ip": int(me.ip),
                     "dst_port": udp_port})


def route_entries(topology: Topology, switch: str) -> list[Entry]:
    """IPv4 /32 routes from this switch to every host, over shortest paths."""
    me = topology.switches[switch]
    entries = []
    for host in topology.hosts.values():
        edge, port = topology.attachment[host.name]
        if edge != switch:
            hops = topology.next_hops(edge)
            if switch not in hops:
                continue  # unreachable: a disconnected part of the topology
            port = hops[switch]
        entries.append(Entry.of("InaIngress.ipv4_routes", {"hdr.ipv4.dst": (int(host.ip.ip), 32)},
                                "InaIngress.forward", {"port": port, "dst_mac": mac_int(host.mac),
                                                       "src_mac": mac_int(me.mac)}))
    return entries


def high_water_entry(last_epoch: int, last_job_id: int) -> Entry:
    """The inert jobs entry where a switch keeps the last epoch and job id handed out to it.

    ina.p4 looks the jobs table up only for child < 32, so this key never matches a packet.
    """
    return Entry.of("InaIngress.jobs", {"sm.ingress_port": 0, "hdr.ina.job_id": 0, "hdr.ina.child": HIGH_WATER_CHILD},
                    "InaIngress.member", {"pool_base": 0, "pool_size": 0, "children": 0, "is_root": 0,
                                          "group": last_job_id, "parent_port": 0, "index_at_parent": 0,
                                          "epoch": last_epoch, "stats_base": 0})


def read_high_water(entry: Entry) -> tuple[int, int]:
    """(last epoch, last job id) from a high-water entry."""
    return entry.param("epoch"), entry.param("group")
