"""Machines with several NICs: one Mininet host per machine, one interface per NIC, each NIC's traffic on its link.

A topology's host is a NIC; the hosts that name the same ``node`` are one machine (``Topology.nodes``, in
rail order), e.g. a training node of ``rail_optimised`` with a NIC per GPU.  bmv2-env makes the machine one
Mininet host named after the node (one network namespace: one process sees every rail), NIC i being its
interface ``<node>-eth<i>`` with the NIC's address, MAC, link shaping and loss (``links.py``) and TX checksum
offload off.  A host without ``node`` stays a Mininet host of its own, set up by ``hosts.py`` as before.

Routing in a machine, for NIC i with address a_i on interface e_i, linked to switch S_i:

* connected routes: a_i's subnet on e_i (the kernel's, source a_i).  ``rail_optimised`` gives every rail a
  /16 of its own, so a peer on rail i is reached by rail i's interface, whatever socket sends;
* static neighbours on e_i (the P4 switches answer no ARP), as a one-NIC host has on its interface: the other
  machines' hosts in a_i's subnet, the switches in it, and S_i;
* S_i's address, a /32 by e_i with source a_i, in the main table: a worker sends aggregation packets only to
  the switch its NIC is linked to, and that address may be outside every NIC's subnet (10.255.x.y);
* source-based policy routing, so that a packet from a_i leaves by e_i whatever its destination:
  ``ip rule add from a_i lookup 100+i`` and table 100+i holding a_i's subnet, S_i's /32 and a default route
  via S_i.  A switch reachable from several NICs of the machine (two NICs on one switch) is reached from each
  by the source address; an unbound socket takes the first of them (the main table's /32);
* the main table's default route via NIC 0's switch, as a one-NIC host's is via its switch.

Across rails: an unbound socket reaches another rail's address by the machine's own NIC on that rail (the
connected route), so rail traffic stays on its rail, as NCCL keeps it.  A socket bound to a_i (``ping -I
a_i``) reaches another rail's NIC by e_i, S_i and the spines (table 100+i's default route), where the
switches route it: the controller routes every host from every switch that reaches it, so with spines
(``rail_optimised`` always has them) it does.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from mininet.node import Host

from controller.topology import Topology

from .hosts import run_checked

TABLE_BASE = 100  # NIC i's routing table
RULE_PRIORITY_BASE = 1000  # NIC i's rule, before the main table's (32766)


@dataclass(frozen=True)
class Placement:
    """Where each topology host runs in Mininet: its Mininet host and the port (interface number) there."""

    ports: dict[str, tuple[str, int]]  # topology host -> (Mininet host, port)
    nodes: dict[str, tuple[str, ...]]  # Mininet host -> its topology hosts, by port
    machines: frozenset[str] = field(default_factory=frozenset)  # the Mininet hosts named by a node

    @classmethod
    def of(cls, topology: Topology) -> Placement:
        ports, nodes, machines = {}, {}, set()
        for name, hosts in topology.nodes.items():
            nodes[name] = hosts
            if any(topology.hosts[h].node for h in hosts):  # a machine's name names no host or switch (Topology)
                machines.add(name)
            for port, host in enumerate(hosts):
                ports[host] = (name, port)
        return cls(ports, nodes, frozenset(machines))

    def node(self, name: str) -> str:
        """The Mininet host of a topology host (a machine's NIC: the machine), or a Mininet host's own name."""
        if name in self.nodes:
            return name
        if name in self.ports:
            return self.ports[name][0]
        raise KeyError(f"no host or machine {name!r}")


def machine_commands(topology: Topology, nics: list[tuple[str, str]]) -> list[str]:
    """The commands that set up a machine's routing (module docstring): ``nics`` is (topology host, interface)
    in port order."""
    own = {host for host, _ in nics}
    commands: list[str] = []
    routed: set[ipaddress.IPv4Address] = set()  # switch addresses given a main-table route
    for i, (host, iface) in enumerate(nics):
        nic = topology.hosts[host]
        switch = topology.switches[topology.attachment[host][0]]
        address, subnet, table = nic.ip.ip, nic.ip.network, TABLE_BASE + i
        commands.append(f"ethtool -K {iface} tx off")
        for other in topology.hosts.values():
            if other.name not in own and other.ip.ip in subnet:
                commands.append(f"ip neigh replace {other.ip.ip} lladdr {other.mac} dev {iface} nud permanent")
        for sw in topology.switches.values():
            if sw.ip in subnet or sw is switch:
                commands.append(f"ip neigh replace {sw.ip} lladdr {sw.mac} dev {iface} nud permanent")
        if switch.ip not in routed:
            commands.append(f"ip route replace {switch.ip}/32 dev {iface} src {address}")
            routed.add(switch.ip)
        commands += [f"ip route replace {subnet} dev {iface} src {address} table {table}",
                     f"ip route replace {switch.ip}/32 dev {iface} src {address} table {table}",
                     f"ip route replace default via {switch.ip} dev {iface} src {address} onlink table {table}",
                     f"ip rule add from {address} lookup {table} priority {RULE_PRIORITY_BASE + i}"]
    first = topology.switches[topology.attachment[nics[0][0]][0]]
    commands.append(f"ip route replace default via {first.ip} dev {nics[0][1]} onlink")
    return commands


def configure_machine(host: Host, topology: Topology, nics: list[tuple[str, str]]) -> None:
    for command in machine_commands(topology, nics):
        run_checked(host, command)
