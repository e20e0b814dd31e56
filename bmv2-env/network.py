"""Start a topology file as a Mininet network of P4 switches, for a person (``ina-net``) or a test.

::

    with InaNetwork("bmv2-env/topologies/single-4.json", run_dir) as net:
        Controller(net.network, run_dir / "controller.json").setup()
        print(net.run("h1", "ping -c1 10.0.0.2"))

``start()`` first cleans what a crashed run left in the same run directory, then builds the
hosts (own namespaces; the hosts that name the same ``node`` are the NICs of one machine, one
Mininet host named after it with an interface per NIC: ``machines.py``), the switches (root
namespace, one process each) and the links (``TCLink`` when the file gives bw/delay/loss), waits
until every switch answers P4Runtime, configures the hosts and writes ``net.json``
(``controller.network.Network``) for the controller.
With ``management=True`` every host (every machine, once) also gets a management interface on a
bridge in the root namespace (``hosts.py`` says why), so a service there (``ina-ctl serve``) is
reachable from the hosts at ``net.management_address``; the data path is the same either way.
Server hosts (``"server"``) also run the aggregation server process on their UDP address, in their namespace
(``servers.py``), its P4Runtime reached over the management network, which a topology with servers therefore
always gets.
Run directory: ``net.json``, ``state.json`` (what to clean after a crash), ``logs/<node>.log``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path
from types import TracebackType
from typing import Self

from mininet.net import Mininet
from mininet.node import Host

from controller.network import Network, SwitchAccess
from controller.programs import V1MODEL, by_arch
from controller.topology import Topology, TopologyError
from p4target.executor.tna_switch import RECIRCULATION_PORTS
from p4target.netns import delete_link

from .hosts import (
    MANAGEMENT_ADDRESS,
    MANAGEMENT_BRIDGE,
    MANAGEMENT_NETWORK,
    InaHost,
    add_management_bridge,
    add_management_link,
    bridge_ports,
    configure_host,
    management_interfaces,
    management_ip,
)
from .links import HostEnd, add_link
from .machines import Placement, configure_machine
from .p4switch import P4Switch, port_is_free, resolve_target
from .processes import ProcessRef
from .runstate import LOG_DIR, NET_FILE, STATE_FILE, NetworkBusy, RunState, clean_run_dir, link_exists
from .servers import ServerProcess

GRPC_PORT_BASE = 50001  # switch i asks for GRPC_PORT_BASE + i first
THRIFT_PORT_BASE = 9090  # BMv2 only: each simple_switch_grpc also needs its own Thrift port
START_TIMEOUT = 30.0
IFNAMSIZ = 16


def interface_name(node: str, port: int) -> str:
    """Mininet's name for port ``port`` of ``node`` (hosts use port 0): ``s1-eth3``."""
    name = f"{node}-eth{port}"
    if len(name) >= IFNAMSIZ:
        raise TopologyError(f"interface name {name} is longer than {IFNAMSIZ - 1} characters: shorten {node!r}")
    return name


def interface_names(topology: Topology) -> list[str]:
    """Every data interface of the network: the switches' ports, then each host's (a machine's NIC i: its ethi)."""
    return [interface_name(sw, port) for sw, ports in topology.ports.items() for port in ports] + \
        [interface_name(node, port) for node, port in Placement.of(topology).ports.values()]


def management_names(topology: Topology) -> list[str]:
    """The root namespace's links of a management network: the bridge and each host's (machine's) veth end."""
    return [MANAGEMENT_BRIDGE] + [management_interfaces(node)[0] for node in Placement.of(topology).nodes]


def _check_management(topology: Topology) -> None:
    """The management network must not overlap the topology's addresses, nor another live network's bridge."""
    inside = sorted(n for n, a in [*((h.name, h.ip.ip) for h in topology.hosts.values()),
                                   *((s.name, s.ip) for s in topology.switches.values())]
                    if a in MANAGEMENT_NETWORK)
    if inside:
        raise TopologyError(f"{', '.join(inside)}: addresses inside the management network {MANAGEMENT_NETWORK}")
    ours = set(management_names(topology))
    foreign = [port for port in bridge_ports() if port not in ours]
    if foreign:  # a crashed run's ports go with its host namespaces: these belong to a live network
        raise NetworkBusy(f"another network uses the management bridge {MANAGEMENT_BRIDGE} "
                          f"(ports {', '.join(foreign)}): stop it first")


def free_ports(count: int, base: int, avoid: Collection[int] = ()) -> list[int]:
    """``count`` free TCP ports on 127.0.0.1, from ``base`` upwards (taken ones are skipped)."""
    ports: list[int] = []
    candidate = base
    while len(ports) < count:
        if candidate > 65535:
            raise RuntimeError(f"fewer than {count} free TCP ports above {base}")
        if candidate not in avoid and port_is_free(candidate):
            ports.append(candidate)
        candidate += 1
    return ports


def _check_recirculation_ports(topology: Topology) -> None:
    """A TNA switch loops ports 68-71 back into ingress (the program recirculates on 68): no link may use them."""
    used = sorted(f"{sw}-p{port}" for sw, ports in topology.ports.items() for port in ports
                  if port in RECIRCULATION_PORTS)
    if used:
        raise TopologyError(f"ports {', '.join(used)} are TNA recirculation ports "
                            f"({min(RECIRCULATION_PORTS)}-{max(RECIRCULATION_PORTS)}, internal to the switch): "
                            f"renumber those links")


def _recorded(pids: dict[str, int]) -> dict[str, ProcessRef]:
    """Name -> ProcessRef of the processes that run (one that died at once has nothing to clean)."""
    refs = {name: ProcessRef.of(pid) for name, pid in pids.items()}
    return {name: ref for name, ref in refs.items() if ref is not None}


def wait_ready(switches: list[P4Switch] | list[ServerProcess], timeout: float) -> None:
    """Every switch answers P4Runtime within ``timeout`` (they boot at once: one deadline for all)."""
    deadline = time.monotonic() + timeout
    for switch in switches:
        switch.wait_ready(max(0.0, deadline - time.monotonic()))


def stop_mininet(net: Mininet) -> None:
    """Stop the switch processes (all at once), then Mininet's hosts and links.

    Mininet deletes links before it stops switches: the processes stop first, so none sees its interfaces
    vanish under it."""
    for switch in net.switches:
        switch.signal_stop()
    for switch in net.switches:
        switch.stop_process()
    _interrupt_busy_shells(net)
    net.stop()


def _interrupt_busy_shells(net: Mininet, timeout: float = 2.0) -> None:
    """Ctrl-C the commands still running in node shells (a stop in mid-``pingall``): Mininet's
    teardown runs ``ip link del`` in those shells and refuses a shell that is busy."""
    busy = [node for node in net.hosts + net.switches if node.shell and node.waiting]
    for node in busy:
        node.sendInt()
    deadline = time.monotonic() + timeout
    for node in busy:
        while node.waiting and time.monotonic() < deadline:
            node.monitor(timeoutms=100)
        node.waiting = False  # a command that ignores SIGINT: its output no longer matters


class MininetRun:
    """What every network of bmv2-env shares: a Mininet of P4 switches owned by a run directory, which records
    what a crash would leave (``state.json``) and, once up, what the network is (``run_file``)."""

    run_file_name = NET_FILE

    def __init__(self, run_dir: str | Path, start_timeout: float = START_TIMEOUT) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.start_timeout = start_timeout
        self.mininet: Mininet | None = None
        self._owns_run_dir = False  # True from the moment our state.json is written

    @property
    def run_file(self) -> Path:
        return self.run_dir / self.run_file_name

    @property
    def log_dir(self) -> Path:
        return self.run_dir / LOG_DIR

    def start(self) -> Self:
        """Clean up after a crashed run, build the network, launch the switches, configure the hosts while the
        switches boot, wait until every switch answers P4Runtime, then write ``run_file``; a failure on the way
        stops whatever was made."""
        state = self._claim(self._interfaces())
        try:
            self._build()
            self._launch(state)
            self._configure()
            wait_ready(self.switches, self.start_timeout)
            self._up()
        except BaseException:
            self.stop()
            raise
        return self

    def _interfaces(self) -> list[str]:
        """Every interface the network makes (what a crashed run's cleanup deletes)."""
        raise NotImplementedError

    def _build(self) -> Mininet:
        """The Mininet network, built (``_new_mininet``, nodes and links, ``build()``), its switches not started."""
        raise NotImplementedError

    def _configure(self) -> None:
        """The hosts set up (addresses, neighbours, routes), while the switches boot."""

    def _up(self) -> None:
        """Every switch answers: what is left to do, and ``run_file`` written."""

    def _claim(self, interfaces: list[str]) -> RunState:
        """Clean what a crashed run left in the run directory (and on these interfaces), and record ours before
        anything exists, so whatever a crash from here on leaves is found again."""
        if self.mininet is not None:
            raise RuntimeError("this network is already started")
        if os.geteuid() != 0:  # Mininet itself would exit() the whole process
            raise PermissionError("Mininet networks need root")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        clean_run_dir(self.run_dir, interfaces)
        state = RunState(ProcessRef.of(os.getpid()), interfaces)
        state.save(self.run_dir)
        self._owns_run_dir = True
        return state

    def _new_mininet(self) -> Mininet:
        """An empty Mininet of P4 switches and IPv6-less hosts, no controller, no automatic MACs or ARP (we set
        them); ours from the start, so that stop() tears down a half-built network too."""
        self.mininet = Mininet(topo=None, switch=P4Switch, host=InaHost, controller=None, build=False,
                               inNamespace=False, autoSetMacs=False, autoStaticArp=False)
        return self.mininet

    def _launch(self, state: RunState) -> None:
        """The built network's hosts recorded, its switch processes launched (not waited for) and recorded."""
        state.hosts = _recorded({h.name: h.pid for h in self.mininet.hosts})
        state.save(self.run_dir)
        self.mininet.start()
        state.switches = _recorded({s.name: s.process.pid for s in self.switches})
        state.save(self.run_dir)

    def stop(self) -> None:
        """Stop the switch processes, then Mininet's hosts and links (``stop_mininet``); forget the run."""
        if self.mininet is not None:
            stop_mininet(self.mininet)
            self.mininet = None
        self._stopped()
        if self._owns_run_dir:  # never another run's files (a start refused as busy owns nothing)
            for name in (self.run_file_name, STATE_FILE):
                (self.run_dir / name).unlink(missing_ok=True)
            self._owns_run_dir = False

    def _stopped(self) -> None:
        """What a network tidies after Mininet has stopped, while it still owns the run directory."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def switches(self) -> list[P4Switch]:
        return [] if self.mininet is None else list(self.mininet.switches)

    @property
    def hosts(self) -> list[Host]:
        return [] if self.mininet is None else list(self.mininet.hosts)


class InaNetwork(MininetRun):
    """A topology running in Mininet; ``start()``/``stop()`` or a ``with`` block."""

    def __init__(self, topology: Topology | str | Path, run_dir: str | Path, target: str = "auto",
                 grpc_port_base: int = GRPC_PORT_BASE, switch_log_level: str | None = None,
                 start_timeout: float = START_TIMEOUT, arch: str = "v1model", management: bool = False) -> None:
        super().__init__(run_dir, start_timeout)
        self.topology = topology if isinstance(topology, Topology) else Topology.load(topology)
        self.placement = Placement.of(self.topology)  # which Mininet host (and interface) each topology host is
        # The program the switches will run (net.json tells the controller): only the built-in
        # target runs the TNA program, so "auto" means builtin for it.
        self.program = by_arch(arch)
        if self.program is not V1MODEL:
            if target == "bmv2":
                raise ValueError(f"BMv2 cannot run the {self.program.arch} program: use the built-in target")
            target = "builtin"
            _check_recirculation_ports(self.topology)
        self.target = resolve_target(target)
        self.grpc_port_base = grpc_port_base
        self.switch_log_level = switch_log_level
        # A server's P4Runtime listens in its host's namespace: the controller reaches it by the management network.
        self.management = management or bool(self.topology.servers)
        self.network: Network | None = None  # what net.json holds, once started
        self.servers: list[ServerProcess] = []  # the server hosts' targets, once launched
        self._state: RunState | None = None

    @property
    def net_file(self) -> Path:
        return self.run_file

    @property
    def management_address(self) -> str:
        """The root namespace's address on the management network (where a service listens for the hosts)."""
        if not self.management:
            raise RuntimeError("this network has no management network (InaNetwork(..., management=True))")
        return str(MANAGEMENT_ADDRESS.ip)

    def management_ip(self, host: str) -> str:
        """A host's (a machine's, or a NIC's machine's) address on the management network (``<host>-mgmt``)."""
        if not self.management:
            raise RuntimeError("this network has no management network (InaNetwork(..., management=True))")
        return str(management_ip(self.topology, host).ip)

    # --- life cycle --------------------------------------------------------------------------

    def _interfaces(self) -> list[str]:
        names = interface_names(self.topology)
        if self.management:
            _check_management(self.topology)
            names += management_names(self.topology)  # recorded: a crashed run's are deleted like its links
        return names

    def _launch(self, state: RunState) -> None:
        self._state = state  # the server hosts' targets are recorded in it once launched (``_configure``)
        super()._launch(state)

    def _configure(self) -> None:
        if self.management:
            add_management_bridge()
        for host in self.mininet.hosts:
            if host.name in self.placement.machines:
                configure_machine(host, self.topology, [(nic, self.interface(nic))
                                                        for nic in self.placement.nodes[host.name]])
            else:
                configure_host(host, self.topology)
            if self.management:
                add_management_link(host, self.topology)
        self._launch_servers()

    def _launch_servers(self) -> None:
        """Each server host's target (``servers.py``), device ids after the switches', recorded in ``state.json``
        with the switches, so a crashed run's are stopped as theirs are."""
        for i, name in enumerate(self.topology.servers):
            server = ServerProcess(name, self.host(name), self.topology.hosts[name],
                                   len(self.topology.switches) + i + 1, self.management_ip(name), self.program,
                                   self.log_dir)
            self.servers.append(server)
            server.start()
        self._state.switches.update(_recorded({s.name: s.process.pid for s in self.servers}))
        self._state.save(self.run_dir)

    def _up(self) -> None:
        wait_ready(self.servers, self.start_timeout)
        self._run_host_commands()
        self.network = Network(self.topology, {**{s.name: SwitchAccess(s.grpc_address, s.device_id, s.target,
                                                                       self.program.arch)
                                                  for s in self.switches},
                                               **{s.name: SwitchAccess(s.grpc_address, s.device_id, "builtin",
                                                                       self.program.arch)
                                                  for s in self.servers}},
                               # keyed by topology host, as the controller names job members: a NIC runs
                               # its commands in its machine
                               {nic: ["mnexec", "-a", str(self.host(nic).pid)] for nic in self.topology.hosts})
        self.network.save(self.net_file)

    def _build(self) -> Mininet:
        net = self._new_mininet()
        ends: dict[str, HostEnd] = {}
        for name, nics in self.placement.nodes.items():
            first = self.topology.hosts[nics[0]]  # Mininet configures a host's port 0 (a machine's NIC 0)
            net.addHost(name, ip=str(first.ip), mac=first.mac)
            if name in self.placement.machines:
                for port, nic in enumerate(nics):
                    spec = self.topology.hosts[nic]
                    ends[nic] = HostEnd(name, port, {"mac": spec.mac, "ip": str(spec.ip)})
        switches = list(self.topology.switches.values())
        grpc_ports = free_ports(len(switches), self.grpc_port_base)
        thrift_ports: list[int | None] = free_ports(len(switches), THRIFT_PORT_BASE, set(grpc_ports)) \
            if self.target == "bmv2" else [None] * len(switches)
        for sw, grpc_port, thrift_port in zip(switches, grpc_ports, thrift_ports):
            # Device ids count from 1 like the switch names of the shipped topologies (s1 is 1).
            net.addSwitch(sw.name, grpc_port=grpc_port, device_id=sw.index + 1, target=self.target,
                          log_dir=self.log_dir, log_level=self.switch_log_level, thrift_port=thrift_port)
        for link in self.topology.links:
            add_link(net, link, ends)
        net.build()
        return net

    def _run_host_commands(self) -> None:
        """The topology file's per-host ``commands``, in order (a NIC's in its machine); output in
        ``logs/<host>.log``."""
        for spec in self.topology.hosts.values():
            if spec.commands:
                with (self.log_dir / f"{spec.name}.log").open("a") as log:
                    for command in spec.commands:
                        log.write(f"$ {command}\n{self.run(spec.name, command)}")

    def stop(self) -> None:
        """The servers' targets first (all at once, as the switches), then the network."""
        for server in self.servers:
            server.signal_stop()
        for server in self.servers:
            server.stop()
        self.servers = []
        super().stop()

    def _stopped(self) -> None:
        if self.management and self._owns_run_dir:
            # A veth goes with its host's namespace, but the kernel may free that later: delete them now.
            for name in management_names(self.topology):
                if link_exists(name):
                    delete_link(name)
        self.network = None

    # --- nodes -------------------------------------------------------------------------------

    def host(self, name: str) -> Host:
        """The Mininet host of a topology host, or of a machine by name (a NIC's is its machine's)."""
        if self.mininet is None:
            raise KeyError(f"no running host {name!r}")
        try:
            return self.mininet[self.placement.node(name)]
        except KeyError:
            raise KeyError(f"no running host {name!r}") from None

    def interface(self, host: str) -> str:
        """The interface of a topology host in its Mininet host: ``h1-eth0``, a machine's NIC i ``n1-ethi``."""
        return interface_name(*self.placement.ports[host])

    def switch(self, name: str) -> P4Switch:
        if self.mininet is None or name not in self.topology.switches:
            raise KeyError(f"no running switch {name!r}")
        return self.mininet[name]

    def run(self, host: str, command: str) -> str:
        """Run a shell command on a host (a NIC's machine, or a machine) and return its output (stdout and stderr)."""
        return self.host(host).cmd(command)

    def ping_pairs(self, across_rails: bool = False) -> list[tuple[str, str]]:
        """What ``ping_all`` pings: every host to every host of another Mininet host on the same rail (its
        interface number: 0 for a host without ``node``, i for a machine's NIC i); ``across_rails``: on any rail."""
        port = self.placement.ports
        return [(src, dst) for src in self.topology.hosts for dst in self.topology.hosts
                if port[src][0] != port[dst][0] and (across_rails or port[src][1] == port[dst][1])]

    def ping_all(self, timeout: float = 1.0, across_rails: bool = False) -> list[tuple[str, str]]:
        """One ping for each of ``ping_pairs`` (all Mininet hosts at once); returns the pairs that failed.

        A machine's NIC pings from its own address (``ping -I``), so a pair tests that NIC's path: with
        ``across_rails``, another rail's NIC is reached by the source's rail, its switch and the spines
        (``machines.py``), which needs a topology whose switches join the rails."""
        pairs = self.ping_pairs(across_rails)
        ip = {name: str(h.ip.ip) for name, h in self.topology.hosts.items()}
        by_ip = {address: name for name, address in ip.items()}
        nodes = [node for node in self.placement.nodes if any(self.placement.node(src) == node for src, _ in pairs)]
        for node in nodes:
            bind = node in self.placement.machines
            targets = " ".join(f"{ip[src] if bind else '-'},{ip[dst]}" for src, dst in pairs
                               if self.placement.node(src) == node)
            self.host(node).sendCmd(f"for pair in {targets}; do src=${{pair%,*}}; dst=${{pair#*,}}; "
                                    f"if [ $src = - ]; then bind=; else bind=\"-I $src\"; fi; "
                                    f"ping -c1 -W{timeout:g} -q $bind $dst >/dev/null 2>&1 "
                                    "|| echo unreachable $src $dst; done")
        failed = []
        for node in nodes:
            for line in self.host(node).waitOutput().splitlines():
                if line.startswith("unreachable "):
                    _, src, dst = line.split()
                    failed.append((self.placement.nodes[node][0] if src == "-" else by_ip[src], by_ip[dst]))
        return failed
