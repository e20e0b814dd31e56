"""The table entries and multicast groups a switch needs, computed from the topology alone.

``job_entries`` turns one switch's place in an aggregation tree (``controller.plan``) into its
entries for that tree; ``route_entries`` gives IPv4 routes.  Everything is a pure function of
its inputs, so the controller can recompute a job's entries at any time (to delete them, to
re-provision a restarted switch, or to compare with what a switch holds).  ``program``
(``controller.programs``) names the tables for ina.p4 (the default) or the TNA program: the
entries are otherwise the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.plan import TreeNode
from controller.programs import V1MODEL, Program
from controller.schema import Entry
from controller.topology import Topology, mac_int
from worker.protocol import Protocol

HIGH_WATER_CHILD = 0xFE  # jobs-table key child of the inert entry recording a switch's counters


@dataclass(frozen=True)
class Allocation:
    """A tree's share of one switch: pool slots, a telemetry/multicast cell and an epoch."""

    pool_base: int
    cell: int  # job_stats cells cell*JOB_STAT_COUNT.., multicast group cell+1
    epoch: int


WITH_PEER = 0x8000  # a meeting root's second multicast group: its own group's id with this bit


def job_entries(topology: Topology, protocol: Protocol, node: TreeNode, job_id: int, pool_size: int,
                alloc: Allocation, worker_port: int,
                program: Program = V1MODEL) -> tuple[list[Entry], list[tuple[int, list[tuple[int, int]]]]]:
    """One switch's table entries for one tree of a job, and its multicast groups as (id, [(port, instance)]):
    the children's, and at a meeting root (nic.p4) a second one that holds the peer too."""
    me = topology.switches.get(node.switch) or topology.hosts[node.switch]  # a switch, or a server (a host)
    group = alloc.cell + 1  # group 0 means "no multicast"
    stats_base = alloc.cell * protocol.JOB_STAT_COUNT
    member = {"pool_base": alloc.pool_base, "pool_size": pool_size, "children": len(node.children),
              "is_root": int(node.is_root), "group": group, "parent_port": node.parent_port,
              "index_at_parent": node.index_at_parent, "epoch": alloc.epoch, "stats_base": stats_base}
    entries = []
    for child in node.children:
        entries.append(Entry.of(program.jobs, {program.ingress_port: child.port, "hdr.ina.job_id": job_id,
                                               "hdr.ina.child": child.index}, program.member, member))
        entries.append(_address(job_id, child.index, topology, me, child.node,
                                worker_port if _is_member(topology, child.node) else protocol.INA_UDP_PORT, program))
    if node.parent is not None:
        down = {"group": group, "stats_base": stats_base}
        if program.keeps_results:  # the cell a result is kept in, so repeats from below are answered here
            down.update({k: member[k] for k in ("pool_base", "pool_size", "children", "epoch")})
        entries.append(Entry.of(program.jobs, {program.ingress_port: node.parent_port, "hdr.ina.job_id": job_id,
                                               "hdr.ina.child": node.index_at_parent},
                                program.result_from_parent, down))
        entries.append(_address(job_id, protocol.RECEIVER_PARENT, topology, me, node.parent, protocol.INA_UDP_PORT,
                                program))
    replicas = [(c.port, c.index) for c in node.children]
    if node.peer is None:
        return entries, [(group, replicas)]
    if program.meetings is None:
        raise ValueError(f"{node.switch}: a meeting tree needs the NIC program (nic.p4), not {program.source.name}")
    entries.append(Entry.of(program.meetings, {"hdr.ina.job_id": job_id}, program.meet,
                            {"peer": node.peer, "group_with_peer": group | WITH_PEER}))
    return entries, [(group, [r for r in replicas if r[1] != node.peer]), (group | WITH_PEER, replicas)]


def _is_member(topology: Topology, node: str) -> bool:
    """Whether a child is a job's member (its results go to the worker's port), not a switch or a leaf server."""
    return node in topology.hosts and topology.hosts[node].server is None


def _address(job_id: int, receiver: int, topology: Topology, me, peer: str, udp_port: int,
             program: Program) -> Entry:
    """Egress rewrite for one receiver: from this switch's address to the peer's."""
    if peer in topology.hosts:
        ip, mac = int(topology.hosts[peer].ip.ip), topology.hosts[peer].mac
    else:
        ip, mac = int(topology.switches[peer].ip), topology.switches[peer].mac
    return Entry.of(program.receivers, {"hdr.ina.job_id": job_id, "meta.receiver": receiver}, program.address,
                    {"dst_mac": mac_int(mac), "src_mac": mac_int(me.mac), "dst_ip": ip,
                     "src_ip": int(getattr(me.ip, "ip", me.ip)),
                     "dst_port": udp_port})


def route_entries(topology: Topology, switch: str, program: Program = V1MODEL) -> list[Entry]:
    """IPv4 routes from this switch to every host, over shortest paths, spread over equal ones by the
    destination (``Topology.next_hop``).

    A host on one of this switch's ports gets a /32 that writes its own MAC.  Every other host is
    reached through a neighbour switch, whose MAC the frame gets (as a router writes its next
    hop's), so the hosts sent one way share an action and their routes fold into prefixes
    (``_prefixes``): a fat_tree(16) switch holds at most a few hundred routes, not 1,024.  An aggregation
    server (a host) routes nothing: it sends only its trees' results, by their multicast groups.
    """
    if switch not in topology.switches:
        return []
    me = topology.switches[switch]
    local, remote = [], {}
    for host in topology.hosts.values():
        edge, port = topology.attachment[host.name]
        if edge == switch:
            local.append(Entry.of(program.routes, {"hdr.ipv4.dst": (int(host.ip.ip), 32)}, program.forward,
                                  {"port": port, "dst_mac": mac_int(host.mac), "src_mac": mac_int(me.mac)}))
            continue
        port = topology.next_hop(switch, host.name)
        if port is None:
            continue  # unreachable: a disconnected part of the topology
        remote[int(host.ip.ip)] = (port, mac_int(topology.switches[topology.ports[switch][port].node].mac))
    folded = [Entry.of(program.routes, {"hdr.ipv4.dst": (prefix, length)}, program.forward,
                       {"port": port, "dst_mac": mac, "src_mac": mac_int(me.mac)})
              for prefix, length, (port, mac) in _prefixes(remote)]
    return local + folded


def _prefixes(actions: dict[int, tuple]) -> list[tuple[int, int, tuple]]:
    """Longest-prefix routes that send each address in ``actions`` to its action, and no more routes
    than it takes: under each prefix the most common action is the prefix's, and only the longer
    prefixes that differ from it are added (addresses not in ``actions`` may go anywhere; the
    switch's own hosts have /32s, which win)."""
    if not actions:
        return []
    addresses = sorted(actions)
    length = 32 - (addresses[0] ^ addresses[-1]).bit_length()  # the shortest prefix holding them all
    out: list[tuple[int, int, tuple]] = []

    def fold(lo: int, hi: int, prefix: int, length: int, inherited: tuple | None) -> None:
        counts: dict[tuple, int] = {}
        for a in addresses[lo:hi]:
            counts[actions[a]] = counts.get(actions[a], 0) + 1
        common = max(counts, key=lambda k: (counts[k], k))
        if len(counts) == 1 and common == inherited:
            return
        if common != inherited:
            out.append((prefix, length, common))
        if len(counts) == 1:
            return
        bit = 1 << (31 - length)
        mid = next((i for i in range(lo, hi) if addresses[i] & bit), hi)  # the first in the upper half
        if lo < mid:
            fold(lo, mid, prefix, length + 1, common)
        if mid < hi:
            fold(mid, hi, prefix | bit, length + 1, common)

    fold(0, len(addresses), addresses[0] & ~((1 << (32 - length)) - 1) & 0xFFFFFFFF, length, None)
    return out


def high_water_entry(last_epoch: int, last_job_id: int, program: Program = V1MODEL) -> Entry:
    """The inert jobs entry where a switch keeps the last epoch and job id handed out to it.

    Both programs look the jobs table up only for child < 32, so this key never matches a packet.
    """
    return Entry.of(program.jobs, {program.ingress_port: 0, "hdr.ina.job_id": 0, "hdr.ina.child": HIGH_WATER_CHILD},
                    program.member, {"pool_base": 0, "pool_size": 0, "children": 0, "is_root": 0,
                                     "group": last_job_id, "parent_port": 0, "index_at_parent": 0,
                                     "epoch": last_epoch, "stats_base": 0})


def read_high_water(entry: Entry) -> tuple[int, int]:
    """(last epoch, last job id) from a high-water entry."""
    return entry.param("epoch"), entry.param("group")
