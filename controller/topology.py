"""Topology files in the p4lang tutorials' style, read once and shared by bmv2-env and the controller.

A file names hosts, switches and links; a switch port is written ``"s1-p3"`` (port 3 of s1)::

    {"hosts":    {"h1": {"ip": "10.0.0.1/24", "mac": "02:00:00:00:00:01"}},
     "switches": {"s1": {"ip": "10.0.0.254", "mac": "02:00:00:00:fe:01"}},
     "links":    [["h1", "s1-p1", {"bw": 100, "delay": "1ms", "loss": 1}]]}

Every host has exactly one link, to a switch port.  Switch addresses are optional (derived
from the switch's position: 10.0.0.(254 - i), 02:00:00:00:fe:(i + 1)); workers send
aggregation packets to their switch's address, and the switch sends results from it.  The
link options are Mininet's TCLink ones (Mb/s, delay string, loss %).  The planner reads a
link's capacity from its ``bw``; a link without one counts as ``DEFAULT_BW_MBPS`` (1 Gb/s).
A switch may declare ``"agg_pps"``, the contributions it can sum per second: the hybrid
model (controller/model.py) keeps the switches' share of a job within it.

A host is a network interface.  A machine with several (a training node with a NIC per GPU,
rail-optimised: local rank i on NIC i and rail i's leaves) lists each as a host with the same
``"node"``; its interfaces are its rails in file order (``Topology.nodes``), and bmv2-env puts
them in one namespace.

A host may be a spare **server** that aggregates (issue 62, NTT's Optcast): ``"server": {"cores": 16,
"agg_pps_per_core": 300000}`` runs ina.p4 on its CPU, each core summing ``agg_pps_per_core``
contributions per second (a lane's tree sits on one core).  The planner gives each server a tree of its
own (root the server, children the members) and splits the call over them by rate; members are never
servers.  A switch that cannot run P4 says ``"plain": true``: it forwards, and is never a tree's node.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PORT_NAME = re.compile(r"^(?P<switch>[A-Za-z_][\w]*)-p(?P<port>\d+)$")
_DELAY = re.compile(r"^\s*([\d.]+)\s*(s|ms|us)?\s*$")
MAX_PORT = 510  # v1model: 511 drops, ports are 9 bits
DEFAULT_BW_MBPS = 1000.0  # capacity of a link whose options give no "bw"
# A server core's contributions per second until it is calibrated: the built-in target's native C loop took
# 3.3 us per V = 256 packet on this machine (docs/notes issue 62, "Per-packet cost"), 1 / 3.3 us = 300,000.
SERVER_AGG_PPS_PER_CORE = 300_000.0


class TopologyError(ValueError):
    """A topology file that cannot describe a network."""


@dataclass(frozen=True)
class Server:
    """A host that aggregates: ina.p4 on ``cores`` CPUs, each summing ``agg_pps_per_core`` contributions/s."""

    cores: int
    agg_pps_per_core: float

    def agg_pps(self, lanes: int) -> float:
        """What it sums per second for a tree installed as ``lanes`` lanes (one core each, at most ``cores``)."""
        return self.agg_pps_per_core * max(1, min(self.cores, lanes))

    def to_dict(self) -> dict:
        return {"cores": self.cores, "agg_pps_per_core": self.agg_pps_per_core}


@dataclass(frozen=True)
class Host:
    name: str
    ip: ipaddress.IPv4Interface
    mac: str
    commands: tuple[str, ...] = ()
    node: str | None = None  # the machine this interface is in, if it has several (else the host is its own)
    server: Server | None = None  # it aggregates (a spare server running ina.p4), if so


@dataclass(frozen=True)
class Switch:
    name: str
    index: int  # position in the file (bmv2-env makes index + 1 the device id); default addresses
    ip: ipaddress.IPv4Address
    mac: str
    agg_pps: float | None = None  # contributions it can sum per second, if declared (the hybrid split's C)
    plain: bool = False  # it cannot run P4: it forwards, and is never an aggregation tree's node


@dataclass(frozen=True)
class Link:
    a: str  # "h1" or "s1-p3"
    b: str
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def capacity(self) -> float:
        """Mb/s each way: the file's ``bw``, else DEFAULT_BW_MBPS."""
        bw = self.options.get("bw")
        return DEFAULT_BW_MBPS if bw is None else float(bw)

    @property
    def delay(self) -> float:
        """Seconds of propagation each way: the file's ``delay``, else none."""
        return delay_seconds(self.options.get("delay"))


@dataclass(frozen=True)
class Neighbour:
    """What a switch port leads to."""

    port: int
    node: str  # a host or a switch name
    peer_port: int | None  # the switch port at the other end, None for a host


@dataclass
class Topology:
    hosts: dict[str, Host]
    switches: dict[str, Switch]
    links: list[Link]
    ports: dict[str, dict[int, Neighbour]]  # switch -> port -> neighbour
    attachment: dict[str, tuple[str, int]]  # host -> (switch, port)
    port_links: dict[tuple[str, int], int] = field(default_factory=dict)  # (switch, port) -> index in links
    _near: dict[str, dict[str, int]] = field(default_factory=dict, repr=False, compare=False)  # hops to a switch
    _toward: dict[tuple[str, str], list[int]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        return cls.from_dict(read_json(path, TopologyError), str(path))

    @classmethod
    def from_dict(cls, data: dict, where: str = "topology") -> Topology:
        if isinstance(data, dict) and "topology" in data and "links" not in data:
            raise TopologyError(f"{where} is a network file (net.json), not a topology file: pass it as --net")
        if not isinstance(data, dict) or not {"hosts", "switches", "links"} <= set(data):
            raise TopologyError(f"{where}: needs 'hosts', 'switches' and 'links'")
        hosts = {name: _host(name, spec or {}, where) for name, spec in data["hosts"].items()}
        switches = {name: _switch(name, i, spec or {}, where)
                    for i, (name, spec) in enumerate(data["switches"].items())}
        both = sorted(set(hosts) & set(switches))
        if both:
            raise TopologyError(f"{where}: names used for both a host and a switch: {both}")
        machines = {h.node for h in hosts.values() if h.node}
        clash = sorted(machines & (set(switches) | set(hosts)))
        if clash:
            raise TopologyError(f"{where}: machine name(s) {clash} also name a switch or a host")
        nodes = [*hosts.values(), *switches.values()]
        _check_unique(where, "IP address", [str(getattr(n.ip, "ip", n.ip)) for n in nodes])
        _check_unique(where, "MAC address", [n.mac for n in nodes])
        topo = cls(hosts, switches, [], {s: {} for s in switches}, {})
        for item in data["links"]:
            topo._add_link(item, where)
        unlinked = sorted(set(hosts) - set(topo.attachment))
        if unlinked:
            raise TopologyError(f"{where}: hosts without a link: {unlinked}")
        return topo

    def to_dict(self) -> dict:
        return {
            "hosts": {h.name: {"ip": str(h.ip), "mac": h.mac, **({"commands": list(h.commands)} if h.commands else {}),
                               **({"node": h.node} if h.node else {}),
                               **({"server": h.server.to_dict()} if h.server else {})}
                      for h in self.hosts.values()},
            "switches": {s.name: {"ip": str(s.ip), "mac": s.mac, **({"agg_pps": s.agg_pps} if s.agg_pps else {}),
                                  **({"plain": True} if s.plain else {})}
                         for s in self.switches.values()},
            "links": [[lk.a, lk.b, lk.options] if lk.options else [lk.a, lk.b] for lk in self.links],
        }

    @property
    def servers(self) -> list[str]:
        """The hosts that aggregate, in file order."""
        return [h.name for h in self.hosts.values() if h.server is not None]

    @property
    def devices(self) -> list[str]:
        """What the controller programs: every switch (a plain one forwards only), then every server."""
        return [*self.switches, *self.servers]

    def address(self, device: str) -> tuple[ipaddress.IPv4Address, str]:
        """A switch's or a host's IP address and MAC."""
        node = self.switches.get(device) or self.hosts[device]
        return getattr(node.ip, "ip", node.ip), node.mac

    def device_pps(self, device: str, lanes: int = 1) -> float | None:
        """What a tree's node sums per second (None: as fast as it comes): a switch's ``agg_pps``, or a
        server's for a tree of ``lanes`` lanes on it."""
        if device in self.switches:
            return self.switches[device].agg_pps
        server = self.hosts[device].server
        return None if server is None else server.agg_pps(lanes)

    @property
    def nodes(self) -> dict[str, tuple[str, ...]]:
        """Machine -> its interfaces (hosts), in file order: interface i is the machine's rail i.  A host
        without ``node`` is a machine of its own, named as the host."""
        found: dict[str, list[str]] = {}
        for host in self.hosts.values():
            found.setdefault(host.node or host.name, []).append(host.name)
        return {node: tuple(hosts) for node, hosts in found.items()}

    def _add_link(self, item: Any, where: str) -> None:
        if not isinstance(item, list) or len(item) not in (2, 3) or (len(item) == 3 and not isinstance(item[2], dict)):
            raise TopologyError(f"{where}: a link is [a, b] or [a, b, {{options}}], not {item!r}")
        a, b = (self._endpoint(x, where) for x in item[:2])
        if a[1] is None and b[1] is None:
            raise TopologyError(f"{where}: link {item[:2]} joins two hosts; hosts attach to switch ports")
        bw = item[2].get("bw") if len(item) == 3 else None
        if bw is not None and (isinstance(bw, bool) or not isinstance(bw, int | float) or not 0 < bw < math.inf):
            raise TopologyError(f"{where}: link {item[:2]}: bw must be a positive number of Mb/s, not {bw!r}")
        try:
            delay_seconds(item[2].get("delay") if len(item) == 3 else None)
        except ValueError as e:
            raise TopologyError(f"{where}: link {item[:2]}: {e}") from None
        for (node, port), (peer, peer_port) in ((a, b), (b, a)):
            if port is None:
                if node in self.attachment:
                    raise TopologyError(f"{where}: host {node} has more than one link")
                self.attachment[node] = (peer, peer_port)
            else:
                if port in self.ports[node]:
                    raise TopologyError(f"{where}: {node}-p{port} is used by two links")
                self.ports[node][port] = Neighbour(port, peer, peer_port)
                self.port_links[node, port] = len(self.links)
        self.links.append(Link(item[0], item[1], dict(item[2]) if len(item) == 3 else {}))
        self._near.clear()
        self._toward.clear()

    def _endpoint(self, name: Any, where: str) -> tuple[str, int | None]:
        if isinstance(name, str) and name in self.hosts:
            return name, None
        m = PORT_NAME.match(name) if isinstance(name, str) else None
        if not m or m["switch"] not in self.switches:
            raise TopologyError(f"{where}: link end {name!r} is neither a host nor a switch port like 's1-p3'")
        port = int(m["port"])
        if not 1 <= port <= MAX_PORT:
            raise TopologyError(f"{where}: port {port} of {m['switch']} is outside 1..{MAX_PORT}")
        return m["switch"], port

    def without(self, switches: set[str] | frozenset[str] = frozenset(),
                links: set[int] | frozenset[int] = frozenset()) -> Topology:
        """What survives: these switches cut off (they stay, without links), these links (indexes)
        gone, and the hosts whose link went with them."""
        def switch_of(end: str) -> str | None:
            m = PORT_NAME.match(end)
            return m["switch"] if m and end not in self.hosts else None

        data = self.to_dict()
        kept = [item for i, (item, lk) in enumerate(zip(data["links"], self.links, strict=True))
                if i not in links and not {switch_of(lk.a), switch_of(lk.b)} & set(switches)]
        attached = {end for item in kept for end in item[:2] if end in self.hosts}
        data["hosts"] = {h: spec for h, spec in data["hosts"].items() if h in attached}
        data["links"] = kept
        return Topology.from_dict(data, "the surviving network")

    def host_link(self, host: str) -> int:
        """The index in ``links`` of a host's one link."""
        return self.port_links[self.attachment[host]]

    def slowest_link_mbps(self, hosts: list[str] | tuple[str, ...]) -> float:
        """The smallest capacity among these hosts' links: what each of them can send and receive."""
        return min(self.links[self.host_link(h)].capacity for h in hosts)

    # --- paths -------------------------------------------------------------------------------

    def switch_neighbours(self, switch: str) -> list[Neighbour]:
        return [n for n in self.ports[switch].values() if n.node in self.switches]

    def route(self, src: str, dst: str) -> list[tuple[int, int]]:
        """The link directions from host ``src`` to host ``dst``, as (index in ``links``, 0 for a -> b or 1 for
        b -> a): up its link, switch to switch as the switches forward (``next_hop``), down ``dst``'s link."""
        def direction(index: int, sender: str) -> tuple[int, int]:
            return index, 0 if self.links[index].a == sender else 1

        here, _ = self.attachment[src]
        last, _ = self.attachment[dst]
        path = [direction(self.host_link(src), src)]
        while True:
            port = self.next_hop(here, dst)
            if port is None:
                raise TopologyError(f"no path from {src} to {dst}: {here} cannot reach {last}")
            path.append(direction(self.port_links[here, port], f"{here}-p{port}"))
            if here == last:
                return path
            here = self.ports[here][port].node

    def next_hop(self, switch: str, host: str) -> int | None:
        """The port by which ``switch`` forwards to ``host`` (None: it cannot reach it): the host's own where it
        hangs off the switch, else one towards a switch one hop nearer the host's, over shortest paths.  Where
        several are as near, the host's index among its switch's hosts picks one, as a fat-tree's D-mod-k
        routing spreads destinations over the uplinks: the flows from one leaf to another leaf's hosts leave by
        as many uplinks as there are, not all by the first (a ring's steps send every host of a leaf at once)."""
        edge, port = self.attachment[host]
        if switch == edge:
            return port
        options = self._toward.get((switch, edge))
        if options is None:
            near = self._distances(edge)
            if switch not in near:
                return None
            options = self._toward[switch, edge] = [
                n.port for n in sorted(self.switch_neighbours(switch), key=lambda n: (n.node, n.port))
                if near.get(n.node) == near[switch] - 1]
        return options[self.host_index(host) % len(options)]

    def host_index(self, host: str) -> int:
        """The host's place among its switch's hosts, by port (what spreads routes to it)."""
        edge, port = self.attachment[host]
        return sum(1 for n in self.ports[edge].values() if n.node in self.hosts and n.port < port)

    def _distances(self, target: str) -> dict[str, int]:
        """Hops from every switch that reaches switch ``target`` to it (breadth-first, kept per target: routing
        every switch to every host of a 1,024-host fabric asks for each edge switch's 320 times)."""
        if target not in self._near:
            near, queue = {target: 0}, deque([target])
            while queue:
                here = queue.popleft()
                for n in self.switch_neighbours(here):
                    if n.node not in near:
                        near[n.node] = near[here] + 1
                        queue.append(n.node)
            self._near[target] = near
        return self._near[target]


def read_json(path: str | Path, error: type[ValueError]) -> Any:
    """A JSON file's data; ``error`` naming the file where it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise error(f"{path}: {e}") from None


def delay_seconds(delay: str | float | int | None) -> float:
    """A Mininet delay ("2ms", "50us", "0.1s"; a bare number is milliseconds) in seconds."""
    if delay is None:
        return 0.0
    if isinstance(delay, int | float) and not isinstance(delay, bool):
        return float(delay) / 1e3
    m = _DELAY.match(delay) if isinstance(delay, str) else None
    if not m:
        raise ValueError(f"delay {delay!r} is not like '2ms'")
    return float(m[1]) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, None: 1e-3}[m[2]]


def _host(name: str, spec: dict, where: str) -> Host:
    try:
        ip = ipaddress.IPv4Interface(spec["ip"])
        mac = _mac(spec["mac"])
    except (KeyError, ValueError, TypeError) as e:
        raise TopologyError(f"{where}: host {name} needs a valid 'ip' (a.b.c.d/len) and 'mac': {e}") from None
    if ip.network.prefixlen == 32:
        ip = ipaddress.IPv4Interface(f"{ip.ip}/24")
    node = spec.get("node")
    if node is not None and (not isinstance(node, str) or not re.match(r"^[A-Za-z_]\w*$", node)):
        raise TopologyError(f"{where}: host {name}: 'node' must be a word (it names the machine's interfaces), "
                            f"not {node!r}")
    return Host(name, ip, mac, tuple(spec.get("commands", ())), node, _server(name, spec.get("server"), where))


def _server(name: str, spec: Any, where: str) -> Server | None:
    """A host's ``server`` spec, checked: {"cores": a positive whole number, "agg_pps_per_core": a positive number}."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - {"cores", "agg_pps_per_core"}:
        raise TopologyError(f"{where}: host {name}: 'server' must be {{\"cores\": N, \"agg_pps_per_core\": X}}, "
                            f"not {spec!r}")
    cores, rate = spec.get("cores"), spec.get("agg_pps_per_core", SERVER_AGG_PPS_PER_CORE)
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise TopologyError(f"{where}: host {name}: server.cores must be a positive whole number, not {cores!r}")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < math.inf:
        raise TopologyError(f"{where}: host {name}: server.agg_pps_per_core must be a positive number of "
                            f"contributions/s, not {rate!r}")
    return Server(cores, float(rate))


def _switch(name: str, index: int, spec: dict, where: str) -> Switch:
    if not re.match(r"^[A-Za-z_]\w*$", name):
        raise TopologyError(f"{where}: switch name {name!r} must be a word (it names interfaces like {name}-eth1)")
    try:
        ip = ipaddress.IPv4Address(spec.get("ip", f"10.0.0.{254 - index}"))
        mac = _mac(spec.get("mac", f"02:00:00:00:fe:{index + 1:02x}"))
    except ValueError as e:
        raise TopologyError(f"{where}: switch {name}: {e}") from None
    rate = spec.get("agg_pps")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < math.inf):
        raise TopologyError(f"{where}: switch {name}: agg_pps must be a positive number of contributions/s, "
                            f"not {rate!r}")
    plain = spec.get("plain", False)
    if not isinstance(plain, bool):
        raise TopologyError(f"{where}: switch {name}: plain must be true or false, not {plain!r}")
    return Switch(name, index, ip, mac, rate, plain)


def _mac(text: str) -> str:
    if not isinstance(text, str) or not re.match(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$", text):
        raise ValueError(f"bad MAC address {text!r}")
    return text.lower()


def _check_unique(where: str, what: str, values: list[str]) -> None:
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise TopologyError(f"{where}: {what} used twice: {repeated}")


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


# --- the topologies the project ships, built in code so tests and benches can size them ---------

def single(workers: int) -> dict:
    """One switch s1 with hosts h1..hN on ports 1..N."""
    return {
        "hosts": {f"h{i}": _host_spec(i) for i in range(1, workers + 1)},
        "switches": {"s1": {}},
        "links": [[f"h{i}", f"s1-p{i}"] for i in range(1, workers + 1)],
    }


def tree(leaves: int, per_leaf: int) -> dict:
    """Leaf switches s2..s(leaves+1), each with per_leaf hosts, under the root s1.

    Leaf sK's port 1 goes up to s1's port K-1; its hosts use ports 2, 3, ...
    """
    hosts, links = {}, []
    for leaf in range(leaves):
        sw = f"s{leaf + 2}"
        links.append([f"{sw}-p1", f"s1-p{leaf + 1}"])
        for j in range(per_leaf):
            n = leaf * per_leaf + j + 1
            hosts[f"h{n}"] = _host_spec(n)
            links.append([f"h{n}", f"{sw}-p{j + 2}"])
    return {"hosts": hosts, "switches": {f"s{i}": {} for i in range(1, leaves + 2)}, "links": links}


def _host_spec(n: int) -> dict:
    return {"ip": f"10.0.0.{n}/24", "mac": f"02:00:00:00:00:{n:02x}"}


def leaf_spine(spines: int, leaves: int, hosts_per_leaf: int, host_bw: float | None = None,
               fabric_bw: float | None = None) -> dict:
    """Every leaf linked to every spine: spine1..spineS, leaf1..leafL, hosts h1.. in leaf order.

    Leaf port j (1..S) goes up to spine j's port (leaf number); the leaf's hosts use ports S+1, ...
    ``host_bw``/``fabric_bw`` (Mb/s) shape the host and the leaf-spine links (None: unshaped).
    """
    if min(spines, leaves, hosts_per_leaf) < 1:
        raise TopologyError("a leaf-spine needs at least one spine, one leaf and one host per leaf")
    names = [f"spine{i}" for i in range(1, spines + 1)] + [f"leaf{i}" for i in range(1, leaves + 1)]
    hosts, links = {}, []
    for leaf in range(1, leaves + 1):
        for s in range(1, spines + 1):
            links.append(_link(f"leaf{leaf}-p{s}", f"spine{s}-p{leaf}", fabric_bw))
        for j in range(1, hosts_per_leaf + 1):
            n = (leaf - 1) * hosts_per_leaf + j
            hosts[f"h{n}"] = _placed_host(j - 1, leaf, 1)
            links.append(_link(f"h{n}", f"leaf{leaf}-p{spines + j}", host_bw))
    return {"hosts": hosts, "switches": {name: _numbered_switch(i) for i, name in enumerate(names, 1)},
            "links": links}


def fat_tree(k: int, host_bw: float | None = None, fabric_bw: float | None = None) -> dict:
    """The k-ary fat-tree (k even): (k/2)^2 core, k pods of k/2 aggregation and k/2 edge switches,
    k^3/4 hosts (k = 4: 16 hosts, 20 switches; k = 16: 1,024 hosts, 320 switches).

    Pod p's i-th edge switch (edge<p*k/2+i+1>) has hosts on ports 1..k/2 and the pod's
    aggregation switches on ports k/2+1..k; the pod's i-th aggregation switch (agg<p*k/2+i+1>)
    has the pod's edges on ports 1..k/2 and cores core<i*k/2+1> .. core<i*k/2+k/2> on ports
    k/2+1..k; every core takes pod p on its port p+1.
    """
    if k < 2 or k % 2:
        raise TopologyError(f"a fat-tree needs an even k >= 2, not {k}")
    half = k // 2
    cores = [f"core{c}" for c in range(1, half * half + 1)]
    aggs = [f"agg{a}" for a in range(1, k * half + 1)]
    edges = [f"edge{e}" for e in range(1, k * half + 1)]
    hosts, links = {}, []
    for pod in range(k):
        for i in range(half):
            edge, agg = edges[pod * half + i], aggs[pod * half + i]
            for h in range(half):
                n = (pod * half + i) * half + h + 1
                hosts[f"h{n}"] = _placed_host(pod, h, i + 1)
                links.append(_link(f"h{n}", f"{edge}-p{h + 1}", host_bw))
            for j in range(half):
                links.append(_link(f"{edge}-p{half + j + 1}", f"{aggs[pod * half + j]}-p{i + 1}", fabric_bw))
                links.append(_link(f"{agg}-p{half + j + 1}", f"{cores[i * half + j]}-p{pod + 1}", fabric_bw))
    names = cores + aggs + edges
    return {"hosts": hosts, "switches": {name: _numbered_switch(i) for i, name in enumerate(names, 1)},
            "links": links}


def rail_optimised(nodes: int, rails: int, nodes_per_leaf: int, spines: int = 1, host_bw: float | None = None,
                   fabric_bw: float | None = None) -> dict:
    """Machines with a NIC per rail: NIC i of every machine is on rail i's leaves, and spines join all leaves
    (NVIDIA's rail-optimised layout), so a job of rail i's NICs never crosses another rail's leaf.

    Machine ``n<k>`` (k from 1) has NICs ``n<k>r<i>`` (i from 0) at 10.i.p.(j + 1)/16: its index p under
    leaf ``r<i>leaf<j + 1>`` high in the address (``_placed_host``), and a /16 per rail, so a machine's
    route to a peer leaves by that rail's NIC.  Leaf port s (1..spines) goes up to spine s's port (the
    leaf's number over all rails); its machines use ports spines + 1, ...
    """
    if min(nodes, rails, nodes_per_leaf, spines) < 1:
        raise TopologyError("a rail-optimised fabric needs at least one node, rail, node per leaf and spine")
    if rails > 256 or nodes_per_leaf > 256:
        raise TopologyError(f"a rail-optimised fabric has at most 256 rails and 256 nodes per leaf "
                            f"(the address 10.rail.index.leaf), not {rails} and {nodes_per_leaf}")
    per_rail = -(-nodes // nodes_per_leaf)
    if per_rail > 254 or spines + nodes_per_leaf > MAX_PORT or rails * per_rail > MAX_PORT:
        raise TopologyError(f"{nodes} nodes x {rails} rails at {nodes_per_leaf} per leaf need {rails * per_rail} "
                            f"leaves of {spines + nodes_per_leaf} ports: more than a switch has ({MAX_PORT})")
    hosts, links, leaves = {}, [], []
    for rail in range(rails):
        for j in range(per_rail):
            leaf = f"r{rail}leaf{j + 1}"
            leaves.append(leaf)
            for s in range(1, spines + 1):
                links.append(_link(f"{leaf}-p{s}", f"spine{s}-p{len(leaves)}", fabric_bw))
            for p in range(min(nodes_per_leaf, nodes - j * nodes_per_leaf)):
                k = j * nodes_per_leaf + p + 1
                nic = f"n{k}r{rail}"
                hosts[nic] = {"ip": f"10.{rail}.{p}.{j + 1}/16", "mac": f"02:{rail:02x}:00:{p:02x}:{j + 1:02x}:01",
                              "node": f"n{k}"}
                links.append(_link(nic, f"{leaf}-p{spines + p + 1}", host_bw))
    names = [f"spine{s}" for s in range(1, spines + 1)] + leaves
    ordered = {f"n{k}r{rail}": hosts[f"n{k}r{rail}"] for k in range(1, nodes + 1) for rail in range(rails)}
    return {"hosts": ordered, "switches": {name: _numbered_switch(i) for i, name in enumerate(names, 1)},
            "links": links}


def servers(workers: int, count: int, cores: int, switches: int = 1, host_bw: float | None = None,
            fabric_bw: float | None = None, agg_pps_per_core: float = SERVER_AGG_PPS_PER_CORE) -> dict:
    """Workers h1..hW and ``count`` servers srv1..srvS of ``cores`` cores on plain switches (no P4 anywhere):
    with one switch, s1 holds everyone (workers on ports 1..W, servers after); with two, the workers are on s1
    and the servers on s2, joined by one link (s1's port W + 1 to s2's port S + 1) at ``fabric_bw``."""
    if workers < 1 or count < 1 or cores < 1 or switches not in (1, 2):
        raise TopologyError(f"servers:WORKERS,SERVERS,CORES[,SWITCHES] needs at least one worker, server and core "
                            f"and 1 or 2 switches, not {workers},{count},{cores},{switches}")
    if workers + count + 1 > MAX_PORT or workers + count > 250:
        raise TopologyError(f"{workers} workers and {count} servers: more than the 10.0.0.0/24 addresses hold")
    hosts = {f"h{i}": _host_spec(i) for i in range(1, workers + 1)}
    links = [_link(f"h{i}", f"s1-p{i}", host_bw) for i in range(1, workers + 1)]
    server_switch, first = ("s1", workers + 1) if switches == 1 else ("s2", 1)
    for j in range(1, count + 1):
        n = workers + j
        hosts[f"srv{j}"] = {**_host_spec(n), "server": {"cores": cores, "agg_pps_per_core": agg_pps_per_core}}
        links.append(_link(f"srv{j}", f"{server_switch}-p{first + j - 1}", host_bw))
    if switches == 2:
        links.append(_link(f"s1-p{workers + 1}", f"s2-p{count + 1}", fabric_bw))
    return {"hosts": hosts, "switches": {f"s{i}": {"plain": True} for i in range(1, switches + 1)}, "links": links}


def _link(a: str, b: str, bw: float | None) -> list:
    return [a, b, {"bw": bw}] if bw is not None else [a, b]


def _placed_host(a: int, b: int, c: int) -> dict:
    """A generated fabric's host at 10.a.b.c in one /8, its place in the fabric in the address: routes spread
    by a host's index under its leaf (``Topology.next_hop``), so the index goes high in the address, where a
    switch's routes fold into prefixes (a fat-tree's 10.pod.index.edge: an edge switch holds a route per pod
    and index, an aggregation switch its pod's hosts and one per pod and index, a core one per pod)."""
    return {"ip": f"10.{a}.{b}.{c}/8", "mac": f"02:00:00:{a:02x}:{b:02x}:{c:02x}"}


def _numbered_switch(i: int) -> dict:
    return {"ip": f"10.255.{i >> 8 & 255}.{i & 255}", "mac": f"02:00:00:ff:{i >> 8 & 255:02x}:{i & 255:02x}"}
