"""Start a topology file as a Mininet network of P4 switches, for a person (``ina-net``) or a test.

::

    with InaNetwork("bmv2-env/topologies/single-4.json", run_dir) as net:
        Controller(net.network, run_dir / "controller.json").setup()
        print(net.run("h1", "ping -c1 10.0.0.2"))

``start()`` first cleans what a crashed run left in the same run directory, then builds the
hosts (own namespaces), the switches (root namespace, one process each) and the links
(``TCLink`` when the file gives bw/delay/loss), waits until every switch answers P4Runtime,
configures the hosts and writes ``net.json`` (``controller.network.Network``) for the controller.
With ``management=True`` every host also gets a management interface on a bridge in the root
namespace (``hosts.py`` says why), so a service there (``ina-ctl serve``) is reachable from the hosts
at ``net.management_address``; the data path is the same either way.
Run directory: ``net.json``, ``state.json`` (what to clean after a crash), ``logs/<node>.log``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path
from types import TracebackType

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
from .links import add_link
from .p4switch import P4Switch, port_is_free, resolve_target
from .processes import ProcessRef
from .runstate import LOG_DIR, NET_FILE, STATE_FILE, NetworkBusy, RunState, clean_run_dir, link_exists

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
    return [interface_name(sw, port) for sw, ports in topology.ports.items() for port in ports] + \
        [interface_name(host, 0) for host in topology.hosts]


def management_names(topology: Topology) -> list[str]:
    """The root namespace's links of a management network: the bridge and each host's veth end."""
    return [MANAGEMENT_BRIDGE] + [management_interfaces(host)[0] for host in topology.hosts]


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


class InaNetwork:
    """A topology running in Mininet; ``start()``/``stop()`` or a ``with`` block."""

    def __init__(self, topology: Topology | str | Path, run_dir: str | Path, target: str = "auto",
                 grpc_port_base: int = GRPC_PORT_BASE, switch_log_level: str | None = None,
                 start_timeout: float = START_TIMEOUT, arch: str = "v1model", management: bool = False) -> None:
        self.topology = topology if isinstance(topology, Topology) else Topology.load(topology)
        self.run_dir = Path(run_dir).resolve()
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
        self.start_timeout = start_timeout
        self.management = management
        self.mininet: Mininet | None = None
        self.network: Network | None = None  # what net.json holds, once started
        self._owns_run_dir = False  # True from the moment our state.json is written

    @property
    def net_file(self) -> Path:
        return self.run_dir / NET_FILE

    @property
    def log_dir(self) -> Path:
        return self.run_dir / LOG_DIR

    @property
    def management_address(self) -> str:
        """The root namespace's address on the management network (where a service listens for the hosts)."""
        if not self.management:
            raise RuntimeError("this network has no management network (InaNetwork(..., management=True))")
        return str(MANAGEMENT_ADDRESS.ip)

    def management_ip(self, host: str) -> str:
        """A host's address on the management network (``<host>-mgmt``)."""
        if not self.management:
            raise RuntimeError("this network has no management network (InaNetwork(..., management=True))")
        return str(management_ip(self.topology, host).ip)

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> InaNetwork:
        if self.mininet is not None:
            raise RuntimeError("this network is already started")
        if os.geteuid() != 0:  # Mininet itself would exit() the whole process
            raise PermissionError("Mininet networks need root")
        names = interface_names(self.topology)
        if self.management:
            _check_management(self.topology)
            names += management_names(self.topology)  # recorded: a crashed run's are deleted like its links
        self.log_dir.mkdir(parents=True, exist_ok=True)
        clean_run_dir(self.run_dir, names)
        # Recorded before anything exists, so whatever a crash from here on leaves is found again.
        state = RunState(ProcessRef.of(os.getpid()), names)
        state.save(self.run_dir)
        self._owns_run_dir = True
        try:
            self.mininet = self._build()
            state.hosts = _recorded({h.name: h.pid for h in self.mininet.hosts})
            state.save(self.run_dir)
            self.mininet.start()  # launches the switch processes without waiting for them
            state.switches = _recorded({s.name: s.process.pid for s in self.switches})
            state.save(self.run_dir)
            if self.management:
                add_management_bridge()
            for host in self.mininet.hosts:  # while the switches boot
                configure_host(host, self.topology)
                if self.management:
                    add_management_link(host, self.topology)
            deadline = time.monotonic() + self.start_timeout
            for switch in self.switches:
                switch.wait_ready(max(0.0, deadline - time.monotonic()))
            self._run_host_commands()
            self.network = Network(self.topology, {s.name: SwitchAccess(s.grpc_address, s.device_id, s.target,
                                                                        self.program.arch)
                                                   for s in self.switches},
                                   {h.name: ["mnexec", "-a", str(h.pid)] for h in self.mininet.hosts})
            self.network.save(self.net_file)
        except BaseException:
            self.stop()
            raise
        return self

    def _build(self) -> Mininet:
        net = Mininet(topo=None, switch=P4Switch, host=InaHost, controller=None, build=False,
                      inNamespace=False, autoSetMacs=False, autoStaticArp=False)
        self.mininet = net  # so that stop() tears down a half-built network too
        for host in self.topology.hosts.values():
            net.addHost(host.name, ip=str(host.ip), mac=host.mac)
        switches = list(self.topology.switches.values())
        grpc_ports = free_ports(len(switches), self.grpc_port_base)
        thrift_ports: list[int | None] = free_ports(len(switches), THRIFT_PORT_BASE, set(grpc_ports)) \
            if self.target == "bmv2" else [None] * len(switches)
        for sw, grpc_port, thrift_port in zip(switches, grpc_ports, thrift_ports):
            # Device ids count from 1 like the switch names of the shipped topologies (s1 is 1).
            net.addSwitch(sw.name, grpc_port=grpc_port, device_id=sw.index + 1, target=self.target,
                          log_dir=self.log_dir, log_level=self.switch_log_level, thrift_port=thrift_port)
        for link in self.topology.links:
            add_link(net, link)
        net.build()
        return net

    def _run_host_commands(self) -> None:
        """The topology file's per-host ``commands``, in order; output in ``logs/<host>.log``."""
        for spec in self.topology.hosts.values():
            if spec.commands:
                with (self.log_dir / f"{spec.name}.log").open("a") as log:
                    for command in spec.commands:
                        log.write(f"$ {command}\n{self.run(spec.name, command)}")

    def stop(self) -> None:
        """Stop the switch processes (all at once), then Mininet's hosts and links; forget the run."""
        if self.mininet is not None:
            # Mininet deletes links before it stops switches: stop the processes first, so
            # none sees its interfaces vanish under it.
            for switch in self.switches:
                switch.signal_stop()
            for switch in self.switches:
                switch.stop_process()
            self._interrupt_busy_shells()
            self.mininet.stop()
            self.mininet = None
        if self.management and self._owns_run_dir:
            # A veth goes with its host's namespace, but the kernel may free that later: delete them now.
            for name in management_names(self.topology):
                if link_exists(name):
                    delete_link(name)
        self.network = None
        if self._owns_run_dir:  # never another run's files (a start refused as busy owns nothing)
            for name in (NET_FILE, STATE_FILE):
                (self.run_dir / name).unlink(missing_ok=True)
            self._owns_run_dir = False

    def _interrupt_busy_shells(self, timeout: float = 2.0) -> None:
        """Ctrl-C the commands still running in node shells (a stop in mid-``pingall``): Mininet's
        teardown runs ``ip link del`` in those shells and refuses a shell that is busy."""
        busy = [node for node in self.mininet.hosts + self.mininet.switches if node.shell and node.waiting]
        for node in busy:
            node.sendInt()
        deadline = time.monotonic() + timeout
        for node in busy:
            while node.waiting and time.monotonic() < deadline:
                node.monitor(timeoutms=100)
            node.waiting = False  # a command that ignores SIGINT: its output no longer matters

    def __enter__(self) -> InaNetwork:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- nodes -------------------------------------------------------------------------------

    @property
    def switches(self) -> list[P4Switch]:
        return [] if self.mininet is None else list(self.mininet.switches)

    @property
    def hosts(self) -> list[Host]:
        return [] if self.mininet is None else list(self.mininet.hosts)

    def host(self, name: str) -> Host:
        if self.mininet is None or name not in self.topology.hosts:
            raise KeyError(f"no running host {name!r}")
        return self.mininet[name]

    def switch(self, name: str) -> P4Switch:
        if self.mininet is None or name not in self.topology.switches:
            raise KeyError(f"no running switch {name!r}")
        return self.mininet[name]

    def run(self, host: str, command: str) -> str:
        """Run a shell command on a host and return its output (stdout and stderr)."""
        return self.host(host).cmd(command)

    def ping_all(self, timeout: float = 1.0) -> list[tuple[str, str]]:
        """One ping from every host to every other (all sources at once); returns the pairs that failed."""
        names = list(self.topology.hosts)
        for src in names:
            targets = " ".join(str(self.topology.hosts[dst].ip.ip) for dst in names if dst != src)
            self.host(src).sendCmd(f"for ip in {targets}; do ping -c1 -W{timeout:g} -q $ip >/dev/null 2>&1 "
                                   "|| echo unreachable $ip; done")
        by_ip = {str(h.ip.ip): h.name for h in self.topology.hosts.values()}
        failed = []
        for src in names:
            for line in self.host(src).waitOutput().splitlines():
                if line.startswith("unreachable "):
                    failed.append((src, by_ip[line.split()[1]]))
        return failed
