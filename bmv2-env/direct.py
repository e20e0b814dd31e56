"""Direct-connect clusters (docs/direct.md) as Mininet networks: workers with several interfaces, the plan's
optical circuits as links, aggregation devices as P4 switches on circuit ports and, when the cluster's workers
stream (``workers.nic_streaming``), a NIC switch on each worker's interfaces.

    circuits = load_circuits("circuits.json")           # `ina-ctl direct plan --circuits circuits.json`
    site = mininet_site(cluster, circuits)               # addresses and P4Runtime ports for Mininet
    with DirectNetwork(cluster, circuits, site, run_dir) as net:
        ...                                              # `ina-ctl direct setup --site ...` sets the devices up

From the cluster file, the circuits and the site file (``controller.direct_site``):

* worker w is Mininet host ``w<w>``; the plan's interface ``w<w>.<i>`` is its interface ``w<w>-eth<i>``, with the
  site's address/prefix and MAC, IPv6 off and TX checksum offload off (``hosts.py`` says why).  An interface
  that no circuit uses is not made (a port without a fibre).
* device j is the P4 switch ``d<j>`` of the site's target, its port p (``d<j>.<p>``) the interface ``d<j>-eth<p>``,
  serving P4Runtime at the site's address (in Mininet 127.0.0.1:<port>: the switches run in the root namespace)
  with the site's device id.  It starts empty (``--no-p4``), as ``ina-net start``'s switches do: the controller
  pushes ina.p4 and the jobs (``ina-ctl direct setup``).
* each circuit is one link (worker-worker, worker-device or device-device) at the cluster's ``workers.gbps``,
  shaped by ``links.py``; the cluster's ``hop_latency_us`` is the link's netem delay where the kernel has netem,
  and left out where it has not (``DirectNetwork.hop_delay`` says which; veth and a switch process already take
  far longer than a microsecond).
* a worker's routes (``worker_commands``): for each circuit of its interface e_i (address a_i), the far end's
  address (a neighbour worker's interface, or the device's own ip) is a /32 by e_i with source a_i, with a
  permanent neighbour entry for its MAC (a P4 switch answers no ARP); a rule sends whatever is bound to a_i to
  table 100+i, which holds e_i's routes alone, so a worker's socket on a part's interface leaves by it even when
  another circuit reaches the same device (``machines.py`` does the same for a machine's NICs).
* streaming NICs: worker w's NIC is the P4 switch ``n<w>`` (the site's ``workers[w].nic``), a bump in the wire:
  its port i+1 is linked to the worker's interface i (unshaped: inside the machine), its port D+1+i to interface
  i's circuit.  The NIC starts with ``nic_program`` loaded (p4src/nic.p4 by default), and ``ina-ctl direct
  setup`` of a NIC mesh part sets it up as the mesh's switch.  The worker reaches its NIC's own address and MAC
  (the site's ``nic``) by each of its interfaces (a neighbour entry on each, the /32 in each interface's table,
  and in the main table by its first), so a part's socket bound to its interface's address sends to the NIC by
  that interface, whose NIC port is the part's host port (``controller.nic_mesh``).  The far ends beyond the NIC
  are routed as if it were a wire; nic.p4 passes only the traffic of its mesh's hosts.

The run directory holds ``state.json`` (``runstate.py``: what ``ina-net clean`` removes after a crash), the
switches' logs and, once every switch answers, ``direct.json`` (what runs where; removed on stop).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mininet.net import Mininet
from mininet.node import Host

from controller.circuits import end_of
from controller.direct import DirectCluster, DirectError, check_circuits
from controller.direct_site import DEFAULT_RING_PORT, Device, DirectSite, Interface
from controller.programs import NIC
from controller.topology import Link as TopologyLink
from controller.topology import read_json

from .hosts import run_checked
from .links import HostEnd, add_link, kernel_has_netem
from .machines import RULE_PRIORITY_BASE, TABLE_BASE
from .network import (
    GRPC_PORT_BASE,
    START_TIMEOUT,
    THRIFT_PORT_BASE,
    MininetRun,
    free_ports,
    interface_name,
)
from .p4switch import P4Switch, resolve_target

DIRECT_FILE = "direct.json"
CIRCUIT_ADDRESSES = ipaddress.IPv4Network("10.0.0.0/9")  # mininet_site: a /31 per circuit
DEVICE_ADDRESSES = ipaddress.IPv4Network("10.128.0.0/10")  # device j: + 1 + j
NIC_ADDRESSES = ipaddress.IPv4Network("10.192.0.0/10")  # worker w's NIC: + 1 + w
LOCAL_HOSTS = ("127.0.0.1", "localhost")  # where a Mininet switch's P4Runtime listens


# --- the inputs ----------------------------------------------------------------------------------------

def load_circuits(path: str | Path, cluster: DirectCluster) -> list[tuple[str, str]]:
    """A circuits file (a JSON list of [end, end] pairs, as ``ina-ctl direct plan --circuits`` writes), checked
    against the cluster: every end one the cluster has, none used twice (a DirectError naming the file)."""
    return checked_circuits(read_json(path, DirectError), cluster, str(path))


def checked_circuits(data: Any, cluster: DirectCluster, where: str = "circuits") -> list[tuple[str, str]]:
    if not isinstance(data, list):
        raise DirectError(f"{where}: a list of circuits, each a pair of ports like [\"w0.1\", \"d0.2\"], not "
                          f"{type(data).__name__}")
    circuits = []
    for k, pair in enumerate(data):
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(e, str) for e in pair)):
            raise DirectError(f"{where}: circuit {k}: a pair of ports like [\"w0.1\", \"d0.2\"], not {pair!r}")
        circuits.append((pair[0], pair[1]))
    try:
        check_circuits(cluster, circuits)
    except ValueError as e:  # DirectError, or the WiringError of a name that is no port
        raise DirectError(f"{where}: {e}") from None
    return circuits


def check_site(site: DirectSite, cluster: DirectCluster, where: str = "site") -> None:
    """The site has the cluster's workers, interfaces, devices and NICs, and each switch's P4Runtime is on this
    machine's loopback (a Mininet switch runs in the root namespace): a DirectError naming the field."""
    site.check(cluster, where)
    for name, device in _site_switches(site):
        host, _, _ = device.p4runtime.rpartition(":")
        if host not in LOCAL_HOSTS:
            raise DirectError(f"{where}: {name}.p4runtime: in Mininet a switch serves P4Runtime on 127.0.0.1:<port>, "
                              f"not {device.p4runtime!r}")


def _site_switches(site: DirectSite) -> list[tuple[str, Device]]:
    """(site field, device) of every switch: the devices, then the NICs."""
    return [(f"devices[{j}]", d) for j, d in enumerate(site.devices)] + \
        [(f"workers[{w}].nic", n) for w in range(len(site.workers)) if (n := site.nic(w)) is not None]


def mininet_site(cluster: DirectCluster, circuits: Sequence[tuple[str, str]], target: str = "auto",
                 grpc_port_base: int = GRPC_PORT_BASE, ring_port: int = DEFAULT_RING_PORT) -> DirectSite:
    """A site for running the cluster in Mininet: each circuit a /31 of 10.0.0.0/9 (its first worker end the even
    address), then each interface without a circuit a /31 of its own; device j at 10.128.0.0 + 1 + j, worker w's
    NIC (with ``nic_streaming``) at 10.192.0.0 + 1 + w; MACs 02:00:<w>:<i>:01 (interfaces), 02:01:<1 + j> (devices)
    and 02:02:<1 + w> (NICs); every switch's P4Runtime on the first free 127.0.0.1 ports from ``grpc_port_base``,
    device ids 1.. (devices, then NICs)."""
    checked_circuits(list(circuits), cluster)
    resolved = resolve_target(target)
    addresses: dict[tuple[int, int], ipaddress.IPv4Interface] = {}
    subnets = 0

    def subnet() -> ipaddress.IPv4Address:
        nonlocal subnets
        base = CIRCUIT_ADDRESSES.network_address + 2 * subnets
        if base + 1 not in CIRCUIT_ADDRESSES:
            raise DirectError(f"more than {CIRCUIT_ADDRESSES.num_addresses // 2} circuits and free interfaces: "
                              f"{CIRCUIT_ADDRESSES} has no /31 left")
        subnets += 1
        return base

    for pair in circuits:
        base = subnet()
        for offset, end in enumerate(pair):
            kind, node, port = _end(end)
            if kind == "w":
                addresses[node, port] = ipaddress.IPv4Interface(f"{base + offset}/31")
    for w in range(cluster.workers):
        for i in range(cluster.interfaces):
            if (w, i) not in addresses:
                addresses[w, i] = ipaddress.IPv4Interface(f"{subnet()}/31")
    switches = cluster.devices + (cluster.workers if cluster.nic_streaming else 0)
    ports = free_ports(switches, grpc_port_base)

    def device(index: int, network: ipaddress.IPv4Network, number: int, mac_prefix: str) -> dict:
        return {"p4runtime": f"127.0.0.1:{ports[index]}", "device_id": index + 1, "target": resolved,
                "ip": str(network.network_address + 1 + number), "mac": f"{mac_prefix}:{_mac_bytes(1 + number, 4)}"}

    workers = []
    for w in range(cluster.workers):
        worker: dict[str, Any] = {"interfaces": [{"ip": str(addresses[w, i]),
                                                  "mac": f"02:00:{_mac_bytes(w, 2)}:{i:02x}:01"}
                                                 for i in range(cluster.interfaces)]}
        if cluster.nic_streaming:
            worker["nic"] = device(cluster.devices + w, NIC_ADDRESSES, w, "02:02")
        workers.append(worker)
    return DirectSite.from_dict({"workers": workers, "ring_port": ring_port,
                                 "devices": [device(j, DEVICE_ADDRESSES, j, "02:01") for j in range(cluster.devices)]},
                                "the Mininet site")


def _mac_bytes(number: int, count: int) -> str:
    return ":".join(f"{b:02x}" for b in number.to_bytes(count, "big"))


def _end(name: str) -> tuple[str, int, int]:
    """A checked circuit end: ("w", worker, interface) or ("d", device, port)."""
    return end_of(name)


# --- where everything is in Mininet ---------------------------------------------------------------------

def worker_host(w: int) -> str:
    return f"w{w}"


def device_switch(j: int) -> str:
    return f"d{j}"


def nic_switch(w: int) -> str:
    return f"n{w}"


def ends(cluster: DirectCluster, circuits: Iterable[tuple[str, str]]) -> dict[str, HostEnd]:
    """Each circuit end as (Mininet node, port, interface params): a worker's interface i is port i of its host
    (or, with streaming NICs, port D+1+i of its NIC); a device's port p is port p of its switch."""
    placed = {}
    for end in (e for pair in circuits for e in pair):
        kind, node, port = _end(end)
        if kind == "d":
            placed[end] = HostEnd(device_switch(node), port, {})
        elif cluster.nic_streaming:
            placed[end] = HostEnd(nic_switch(node), cluster.interfaces + 1 + port, {})
        else:
            placed[end] = HostEnd(worker_host(node), port, {})
    return placed


def worker_interfaces(cluster: DirectCluster, circuits: Iterable[tuple[str, str]]) -> dict[int, list[int]]:
    """Worker -> its interfaces that some circuit uses, in interface order (the ones Mininet makes)."""
    used: dict[int, set[int]] = {w: set() for w in range(cluster.workers)}
    for end in (e for pair in circuits for e in pair):
        kind, node, port = _end(end)
        if kind == "w":
            used[node].add(port)
    return {w: sorted(ports) for w, ports in used.items()}


def direct_interface_names(cluster: DirectCluster, circuits: Sequence[tuple[str, str]]) -> list[str]:
    """Every data interface of the network (what a crashed run's cleanup deletes): each circuit's two ends, and
    with streaming NICs each NIC's host-side ports and the workers' interfaces."""
    names = [interface_name(end.node, end.port) for end in ends(cluster, circuits).values()]
    if cluster.nic_streaming:
        for w, ports in worker_interfaces(cluster, circuits).items():
            names += [interface_name(nic_switch(w), i + 1) for i in ports]
            names += [interface_name(worker_host(w), i) for i in ports]
    return names


def far_ends(site: DirectSite, circuits: Iterable[tuple[str, str]]) -> dict[tuple[int, int], tuple[str, str, str]]:
    """(worker, interface) -> (far end's name, its address, its MAC) for each worker end of a circuit: a neighbour
    worker's interface, or a device (its own address: where a worker sends aggregation packets)."""
    out = {}
    for a, b in circuits:
        for near, far in ((a, b), (b, a)):
            kind, node, port = _end(near)
            if kind != "w":
                continue
            far_kind, far_node, far_port = _end(far)
            there: Interface | Device = site.workers[far_node][far_port] if far_kind == "w" else site.devices[far_node]
            address = there.ip.ip if isinstance(there, Interface) else there.ip
            out[node, port] = (far, str(address), there.mac)
    return out


def worker_commands(w: int, site: DirectSite, cluster: DirectCluster,
                    circuits: Sequence[tuple[str, str]]) -> list[str]:
    """What sets worker w's interfaces up (the module docstring): address, offload off, and per circuit its far
    end's route, neighbour entry and the interface's table and rule."""
    far = far_ends(site, circuits)
    card = site.nic(w) if cluster.nic_streaming else None
    commands = []
    for k, i in enumerate(worker_interfaces(cluster, circuits)[w]):
        iface, me = interface_name(worker_host(w), i), site.workers[w][i]
        name, address, mac = far[w, i]
        table = TABLE_BASE + i
        commands += [f"ip address flush dev {iface}",  # Mininet's ifconfig may have set a broadcast on the /31
                     f"ip address add {me.ip} dev {iface}",
                     f"ethtool -K {iface} tx off",
                     *_reach(address, mac, iface, me, table, main=True),
                     f"ip rule add from {me.ip.ip} lookup {table} priority {RULE_PRIORITY_BASE + i}"]
        if card is not None:  # its own NIC, through whichever interface a part binds (the first in main)
            commands += _reach(str(card.ip), card.mac, iface, me, table, main=k == 0)
    return commands


def _reach(address: str, mac: str, iface: str, me: Interface, table: int, main: bool) -> list[str]:
    """``address`` by ``iface`` from ``me``: a permanent neighbour entry for its MAC, its /32 in the interface's
    table (and in the main table when ``main``)."""
    route = f"ip route replace {address}/32 dev {iface} src {me.ip.ip}"
    return [f"ip neigh replace {address} lladdr {mac} dev {iface} nud permanent",
            *([route] if main else []), f"{route} table {table}"]


# --- the network ----------------------------------------------------------------------------------------

class DirectNetwork(MininetRun):
    """A direct-connect cluster running in Mininet; ``start()``/``stop()`` or a ``with`` block."""

    run_file_name = DIRECT_FILE

    def __init__(self, cluster: DirectCluster, circuits: Sequence[tuple[str, str]], site: DirectSite,
                 run_dir: str | Path, nic_program: str | Path | None = None, switch_log_level: str | None = None,
                 start_timeout: float = START_TIMEOUT, where: tuple[str, str] = ("circuits", "site")) -> None:
        super().__init__(run_dir, start_timeout)
        self.cluster = cluster
        self.circuits = checked_circuits(list(circuits), cluster, where[0])
        check_site(site, cluster, where[1])
        self.site = site
        self.nic_program = Path(nic_program) if nic_program is not None else NIC.source
        if cluster.nic_streaming and not self.nic_program.is_file():
            raise DirectError(f"the NICs' program {self.nic_program} is not a file")
        self.switch_log_level = switch_log_level
        self.hop_delay: str | None = None  # the circuits' netem delay, once started (None: the kernel has no netem)

    @property
    def direct_file(self) -> Path:
        return self.run_file

    def _interfaces(self) -> list[str]:
        return direct_interface_names(self.cluster, self.circuits)

    def _configure(self) -> None:
        for w in range(self.cluster.workers):
            for command in worker_commands(w, self.site, self.cluster, self.circuits):
                run_checked(self.host(worker_host(w)), command)

    def _up(self) -> None:
        self.direct_file.write_text(json.dumps(self.describe(), indent=2) + "\n")

    def _build(self) -> Mininet:
        self.hop_delay = f"{self.cluster.hop_latency * 1e6:g}us" \
            if self.cluster.hop_latency > 0 and kernel_has_netem() else None
        net = self._new_mininet()
        used = worker_interfaces(self.cluster, self.circuits)
        for w, ports in used.items():
            first = self.site.workers[w][ports[0]] if ports else None
            net.addHost(worker_host(w), ip=str(first.ip) if first else None, mac=first.mac if first else None)
        switches: list[tuple[str, Device, dict[str, Any]]] = \
            [(device_switch(j), d, {}) for j, d in enumerate(self.site.devices)]
        if self.cluster.nic_streaming:
            switches += [(nic_switch(w), self.site.nic(w), {"program": self.nic_program})
                         for w in range(self.cluster.workers)]
        bmv2 = sum(d.target == "bmv2" for _, d, _ in switches)
        thrift = iter(free_ports(bmv2, THRIFT_PORT_BASE, {int(d.p4runtime.rsplit(":", 1)[1]) for _, d, _ in switches}))
        for name, device, extra in switches:
            net.addSwitch(name, grpc_port=int(device.p4runtime.rsplit(":", 1)[1]), device_id=device.device_id,
                          target=device.target, log_dir=self.log_dir, log_level=self.switch_log_level,
                          thrift_port=next(thrift) if device.target == "bmv2" else None, **extra)
        placed = ends(self.cluster, self.circuits)
        if not self.cluster.nic_streaming:  # the worker ends carry the site's MAC (and address) from creation
            placed = {end: self._with_site(end, spot) for end, spot in placed.items()}
        shaping: dict[str, Any] = {"bw": self.cluster.link_gbps * 1e3}
        if self.hop_delay:
            shaping["delay"] = self.hop_delay
        for a, b in self.circuits:
            add_link(net, TopologyLink(a, b, dict(shaping)), placed)
        if self.cluster.nic_streaming:  # each NIC between its worker's interfaces and their circuits
            for w, ports in used.items():
                for i in ports:
                    inside = {f"w{w}.{i}": self._with_site(f"w{w}.{i}", HostEnd(worker_host(w), i, {})),
                              f"n{w}.{i}": HostEnd(nic_switch(w), i + 1, {})}
                    add_link(net, TopologyLink(f"w{w}.{i}", f"n{w}.{i}"), inside)
        net.build()
        return net

    def _with_site(self, end: str, spot: HostEnd) -> HostEnd:
        """A worker's end with its site MAC and address (Mininet makes the interface with them)."""
        kind, w, i = _end(end)
        if kind != "w":
            return spot
        me = self.site.workers[w][i]
        return HostEnd(spot.node, spot.port, {"mac": me.mac, "ip": str(me.ip)})

    def describe(self) -> dict:
        """What ``direct.json`` holds: each host's shell (``mnexec -a PID`` runs a command there), each switch's
        P4Runtime, device id, target and program, and the circuits' shaping."""
        return {"cluster": self.cluster.to_dict(), "circuits": [list(c) for c in self.circuits],
                "site": self.site.to_dict(),
                "hosts": {h.name: {"pid": h.pid, "interfaces": [i.name for i in h.intfList() if i.name != "lo"]}
                          for h in self.hosts},
                "switches": {s.name: {"p4runtime": s.grpc_address, "device_id": s.device_id, "target": s.target,
                                      "program": str(s.program) if s.program else None, "log": str(s.log_path)}
                             for s in self.switches},
                "link_mbps": self.cluster.link_gbps * 1e3, "hop_delay": self.hop_delay}

    # --- nodes -------------------------------------------------------------------------------------------

    def host(self, name: str) -> Host:
        """Worker ``w<k>``'s Mininet host."""
        if self.mininet is None or name not in {h.name for h in self.mininet.hosts}:
            raise KeyError(f"no running worker host {name!r}")
        return self.mininet[name]

    def switch(self, name: str) -> P4Switch:
        """Device ``d<j>``'s switch, or worker w's NIC ``n<w>``."""
        if self.mininet is None or name not in {s.name for s in self.mininet.switches}:
            raise KeyError(f"no running switch {name!r}")
        return self.mininet[name]

    def run(self, host: str, command: str) -> str:
        return self.host(host).cmd(command)

    def neighbour_pairs(self) -> list[tuple[str, str]]:
        """(worker end, worker end) of each worker-worker circuit, both ways: what ``ping_circuits`` pings."""
        far = far_ends(self.site, self.circuits)
        return [(f"w{w}.{i}", name) for (w, i), (name, _, _) in sorted(far.items()) if name.startswith("w")]

    def ping_circuits(self, timeout: float = 1.0) -> list[tuple[str, str]]:
        """One ping over each worker-worker circuit, each way, from the near interface's address (all workers at
        once); the pairs that failed."""
        far = far_ends(self.site, self.circuits)
        pairs = self.neighbour_pairs()
        busy = []
        for w in range(self.cluster.workers):
            mine = [(near, far[w, int(near.split(".")[1])][1]) for near, _ in pairs if near.startswith(f"w{w}.")]
            if not mine:
                continue
            targets = " ".join(f"{self.site.workers[w][int(near.split('.')[1])].ip.ip},{address},{near}"
                               for near, address in mine)
            self.host(worker_host(w)).sendCmd(
                f"for t in {targets}; do set -- $(echo $t | tr , ' '); "
                f"ping -c1 -W{timeout:g} -q -I $1 $2 >/dev/null 2>&1 || echo unreachable $3; done")
            busy.append(w)
        failed = []
        for w in busy:
            for line in self.host(worker_host(w)).waitOutput().splitlines():
                if line.startswith("unreachable "):
                    near = line.split()[1]
                    failed.append((near, dict(pairs)[near]))
        return failed
