"""ina-net: start a topology file as a Mininet network of P4 switches, and tidy up after it.

    ina-net start bmv2-env/topologies/single-4.json [--cli]   # until Ctrl-C / `ina-net stop`
    ina-net start rails:4,2,2,1                               # or a builder of controller/topology.py
    ina-net exec h1 -- ping -c1 10.0.0.2                      # on a host of the running network
    ina-net stop                                              # from another terminal
    ina-net clean                                             # what a crashed run left behind

    ina-net direct site --cluster C.json --circuits CIRCUITS.json --out SITE.json   # a direct-connect cluster:
    ina-net direct start --cluster C.json --circuits CIRCUITS.json --site SITE.json [--cli]
    ina-net direct stop                                       # (or ina-net stop); ina-net exec w0 -- ...
    ina-net direct clean --cluster C.json --circuits CIRCUITS.json

Every command takes ``--run-dir`` (default: ina-net in the temporary directory); the running
network writes ``net.json`` there for the controller, and its logs under ``logs/``.

A topology is a file or a builder, named as ``ina-sim`` names them: ``single:N``, ``tree:LEAVES,PER_LEAF``,
``leaf_spine:SPINES,LEAVES,PER_LEAF``, ``fat_tree:K``, ``rails:NODES,RAILS,PER_LEAF,SPINES`` (rail_optimised:
machines with a NIC per rail); ``--bw``/``--fabric-bw`` shape a builder's host and switch-to-switch links.
``direct`` runs a direct-connect cluster (docs/direct.md) from a plan's circuits (``ina-ctl direct plan
--circuits``) and a site file: ``direct.py``; ``direct site`` writes a site file for Mininet.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from controller.direct import DirectCluster, DirectError
from controller.direct_site import DirectSite
from controller.network import Network
from controller.topology import Topology, TopologyError, fat_tree, leaf_spine, rail_optimised, single, tree
from p4target.netns import remove_stale

from .direct import DirectNetwork, direct_interface_names, load_circuits, mininet_site
from .machines import Placement
from .network import GRPC_PORT_BASE, START_TIMEOUT, InaNetwork, interface_names
from .p4switch import TARGETS, SwitchStartError
from .runstate import NET_FILE, NetworkBusy, RunState, clean_run_dir

DEFAULT_RUN_DIR = Path(tempfile.gettempdir()) / "ina-net"
STOP_WAIT = 30.0
# name -> (builder, whether it takes host_bw/fabric_bw), named as virtual_fabric/runs.py names them
BUILDERS = {"single": (single, False), "tree": (tree, False), "leaf_spine": (leaf_spine, True),
            "fat_tree": (fat_tree, True), "rails": (rail_optimised, True)}


def topology_argument(text: str, bw: float | None = None, fabric_bw: float | None = None) -> Topology:
    """A topology file, or a builder with its integer arguments: ``rails:4,2,2,1`` is ``rail_optimised(4, 2, 2,
    1)`` (nodes, rails, nodes per leaf, spines), with ``bw``/``fabric_bw`` (Mb/s) on its host and fabric links."""
    name, colon, argtext = text.partition(":")
    if not colon or name not in BUILDERS:
        if bw is not None or fabric_bw is not None:
            raise TopologyError("--bw and --fabric-bw shape a builder's links; a topology file gives its own")
        return Topology.load(text)
    build, shaped = BUILDERS[name]
    try:
        args = [int(a) for a in argtext.split(",")]
    except ValueError:
        raise TopologyError(f"topology {text!r}: a builder's arguments are integers, like rails:4,2,2,1") from None
    if not shaped and (bw is not None or fabric_bw is not None):
        raise TopologyError(f"the {name} builder takes no --bw or --fabric-bw (leaf_spine, fat_tree and rails do)")
    try:
        spec = build(*args, host_bw=bw, fabric_bw=fabric_bw) if shaped else build(*args)
    except TypeError as e:
        raise TopologyError(f"topology {text!r}: {e}") from None
    return Topology.from_dict(spec, text)


class StopRequested(BaseException):
    """SIGTERM or SIGHUP: leave like Ctrl-C, but not swallowed by the Mininet CLI's Ctrl-C handling."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise StopRequested(signal.Signals(signum).name)


def _summary(net: InaNetwork) -> str:
    machines = f" ({len(net.placement.machines)} machines of several NICs)" if net.placement.machines else ""
    lines = [f"network up: {len(net.hosts)} hosts{machines}, {len(net.switches)} switches ({net.target} target)"]
    for sw in net.switches:
        lines.append(f"  {sw.name}: device {sw.device_id}, P4Runtime {sw.grpc_address}, log {sw.log_path}")
    for server in net.servers:  # a server host's target, in its namespace (servers.py)
        lines.append(f"  {server.name} (server): device {server.device_id}, P4Runtime {server.grpc_address}, "
                     f"log {server.log_path}")
    for name, host in net.topology.hosts.items():
        where = f" ({net.interface(name)})" if host.node else ""
        lines.append(f"  {name}{where}: {host.ip} {host.mac} on {'-p'.join(map(str, net.topology.attachment[name]))}")
    lines.append(f"the switches start empty: `ina-ctl --net {net.net_file} setup` pushes the pipeline and routes")
    return "\n".join(lines)


def _prepare(args: argparse.Namespace) -> None:
    """Mininet's messages as asked; SIGTERM and SIGHUP stop the network as Ctrl-C does."""
    from mininet.log import setLogLevel

    setLogLevel("info" if args.verbose else "output")  # "output": what the Mininet CLI prints
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)


def cmd_start(args: argparse.Namespace) -> int:
    _prepare(args)
    net = InaNetwork(topology_argument(args.topology, args.bw, args.fabric_bw), args.run_dir, args.target,
                     args.grpc_port_base, args.switch_log, args.start_timeout, args.program, args.management)
    return _run(net, _summary, args.cli)


def _run(net: InaNetwork | DirectNetwork, summary: Callable[[Any], str], cli: bool) -> int:
    """Start the network, print its summary, run until Ctrl-C/SIGTERM (or the Mininet CLI's exit), stop it."""
    from mininet.cli import CLI

    try:
        net.start()
    except (KeyboardInterrupt, StopRequested):
        return 1
    try:
        print(summary(net), flush=True)
        if cli:
            CLI(net.mininet)
        else:
            print(f"running; Ctrl-C or `ina-net stop --run-dir {net.run_dir}` stops it", flush=True)
            while True:
                signal.pause()
    except (KeyboardInterrupt, StopRequested):
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second Ctrl-C must not cut the teardown short
            signal.signal(sig, signal.SIG_IGN)
        print("stopping", flush=True)
        net.stop()
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    state = RunState.load(args.run_dir)
    if state is None or not state.owner.alive():
        print(f"no network is running from {args.run_dir}" +
              (" (a crashed run left state: `ina-net clean` removes it)" if state else ""))
        return 1 if state else 0
    os.kill(state.owner.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT
    while state.owner.alive():
        if time.monotonic() > deadline:
            print(f"pid {state.owner.pid} is still running after {STOP_WAIT:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"stopped the network of pid {state.owner.pid}")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    state = RunState.load(args.run_dir)
    if state is None or not state.owner.alive():
        print(f"no network is running from {args.run_dir}", file=sys.stderr)
        return 1
    shell = state.hosts.get(_mininet_host(args.run_dir, args.host))
    if shell is None or not shell.alive():
        print(f"no host {args.host!r} in the network (hosts: {', '.join(state.hosts)})", file=sys.stderr)
        return 1
    command = args.argv or [os.environ.get("SHELL", "/bin/bash")]
    # mnexec -a: join the network (and mount) namespace of the host's shell, as Mininet's own tools do.
    return subprocess.run(["mnexec", "-a", str(shell.pid), *command]).returncode


def _mininet_host(run_dir: Path, name: str) -> str:
    """The Mininet host a name runs on: a machine's NIC runs on its machine (net.json has the topology)."""
    try:
        return Placement.of(Network.load(run_dir / NET_FILE).topology).node(name)
    except (TopologyError, KeyError):
        return name


def cmd_clean(args: argparse.Namespace) -> int:
    names = interface_names(topology_argument(args.topology)) if args.topology else []
    removed = clean_run_dir(args.run_dir, names, force=args.force) + remove_stale()
    print("\n".join(f"removed {what}" for what in removed) or "nothing to clean")
    return 0


def _direct_summary(net: DirectNetwork) -> str:
    c = net.cluster
    lines = [f"direct-connect cluster up: {c.workers} workers x {c.interfaces} interfaces, {c.devices} device(s)"
             + (", a streaming NIC on each worker" if c.nic_streaming else "")]
    for sw in net.switches:
        lines.append(f"  {sw.name}: device {sw.device_id}, P4Runtime {sw.grpc_address}, log {sw.log_path}"
                     + (f", program {sw.program}" if sw.program else ""))
    delay = f"hop delay {net.hop_delay} (netem)" if net.hop_delay else "no hop delay (this kernel has no netem)" \
        if c.hop_latency > 0 else "no hop delay"
    count = len(net.circuits)
    lines.append(f"  {count} circuit{'' if count == 1 else 's'} at {c.link_gbps * 1e3:g} Mb/s each way, {delay}")
    lines.append(f"  described in {net.direct_file}")
    lines.append("the devices start empty: `ina-ctl direct setup --cluster ... --site ... --size ... --state-dir DIR` "
                 "pushes ina.p4 and the jobs")
    return "\n".join(lines)


def _direct_network(args: argparse.Namespace) -> DirectNetwork:
    cluster = DirectCluster.load(args.cluster)
    return DirectNetwork(cluster, load_circuits(args.circuits, cluster), DirectSite.load(args.site), args.run_dir,
                         args.nic_program, args.switch_log, args.start_timeout, (str(args.circuits), str(args.site)))


def cmd_direct_start(args: argparse.Namespace) -> int:
    net = _direct_network(args)  # a refused input before any signal handler or Mininet message
    _prepare(args)
    return _run(net, _direct_summary, args.cli)


def cmd_direct_site(args: argparse.Namespace) -> int:
    cluster = DirectCluster.load(args.cluster)
    site = mininet_site(cluster, load_circuits(args.circuits, cluster), args.target, args.grpc_port_base)
    args.out.write_text(json.dumps(site.to_dict(), indent=2) + "\n")
    print(f"wrote {args.out}: {cluster.workers} workers' interfaces, {len(site.devices)} device(s)"
          + (", a NIC per worker" if site.nics else "") + " (P4Runtime on 127.0.0.1)")
    return 0


def cmd_direct_clean(args: argparse.Namespace) -> int:
    names = []
    if args.cluster and args.circuits:
        cluster = DirectCluster.load(args.cluster)
        names = direct_interface_names(cluster, load_circuits(args.circuits, cluster))
    elif args.cluster or args.circuits:
        raise DirectError("give both --cluster and --circuits (to delete links named like theirs), or neither")
    removed = clean_run_dir(args.run_dir, names, force=args.force) + remove_stale()
    print("\n".join(f"removed {what}" for what in removed) or "nothing to clean")
    return 0


def _start_options(start: argparse.ArgumentParser) -> None:
    """What every `start` takes: the CLI, the switches' logs, how long they may take to boot, Mininet's chatter."""
    start.add_argument("--cli", action="store_true", help="drop to the Mininet CLI; `exit` stops the network")
    start.add_argument("--switch-log", metavar="LEVEL", choices=["trace", "debug", "info", "warn", "error"],
                       help="switches log at this level (--log-console -L LEVEL) into logs/<switch>.log")
    start.add_argument("--start-timeout", type=float, default=START_TIMEOUT,
                       help=f"seconds to wait for every switch to answer P4Runtime (default {START_TIMEOUT:.0f})")
    start.add_argument("-v", "--verbose", action="store_true", help="show Mininet's progress messages")


def _direct_parser(sub: Any, add_run_dir: Callable[[argparse.ArgumentParser], None]) -> None:
    """`ina-net direct site|start|stop|clean`."""
    actions = sub.add_parser("direct", help="a direct-connect cluster (docs/direct.md): workers, circuits, devices",
                             description="a direct-connect cluster from a plan's circuits and a site file") \
        .add_subparsers(dest="action", required=True, metavar="ACTION")

    def inputs(p: argparse.ArgumentParser, site: bool) -> None:
        p.add_argument("--cluster", type=Path, required=True, help="the cluster file (docs/direct.md)")
        p.add_argument("--circuits", type=Path, required=True,
                       help="the plan's circuits: `ina-ctl direct plan --circuits FILE` writes them")
        if site:
            p.add_argument("--site", type=Path, required=True,
                           help="the site file (every worker's interfaces, every device's P4Runtime on 127.0.0.1): "
                                "`ina-net direct site` writes one")

    site = actions.add_parser("site", help="write a site file for running the cluster in Mininet")
    inputs(site, False)
    site.add_argument("--out", type=Path, required=True, help="the site file to write")
    site.add_argument("--target", choices=TARGETS, default="auto", help="the devices' (and NICs') switch program")
    site.add_argument("--grpc-port-base", type=int, default=GRPC_PORT_BASE,
                      help=f"P4Runtime on the first free ports from this (default {GRPC_PORT_BASE})")
    site.set_defaults(func=cmd_direct_site)

    start = actions.add_parser("start", help="start it; runs until Ctrl-C or `ina-net direct stop`")
    add_run_dir(start)
    inputs(start, True)
    start.add_argument("--nic-program", type=Path,
                       help="the streaming NICs' P4 program, loaded at start (default p4src/nic.p4)")
    _start_options(start)
    start.set_defaults(func=cmd_direct_start)

    stop = actions.add_parser("stop", help="stop the network running from the run directory (as `ina-net stop`)")
    add_run_dir(stop)
    stop.set_defaults(func=cmd_stop)

    clean = actions.add_parser("clean", help="remove what a crashed run left: switch processes, host shells, "
                                             "interfaces")
    add_run_dir(clean)
    clean.add_argument("--cluster", type=Path, help="with --circuits: also delete links named like theirs")
    clean.add_argument("--circuits", type=Path)
    clean.add_argument("--force", action="store_true",
                       help="also kill switch processes of other runs that use these interfaces")
    clean.set_defaults(func=cmd_direct_clean)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ina-net", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    sub = ap.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    def add_run_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR,
                       help=f"net.json (direct.json), state and logs of the network (default {DEFAULT_RUN_DIR})")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_run_dir(p)
        return p

    start = add("start", "start a topology file; runs until Ctrl-C or `ina-net stop`")
    start.add_argument("topology", help="topology file, e.g. bmv2-env/topologies/single-4.json, or a builder: "
                                        "single:N, tree:L,H, leaf_spine:S,L,H, fat_tree:K, "
                                        "rails:NODES,RAILS,PER_LEAF,SPINES")
    start.add_argument("--bw", type=float, metavar="MBPS", help="a builder's host links, Mb/s (default unshaped)")
    start.add_argument("--fabric-bw", type=float, metavar="MBPS",
                       help="a builder's switch-to-switch links, Mb/s (default unshaped)")
    start.add_argument("--target", choices=TARGETS, default="auto",
                       help="switch program: builtin (p4target-switch-grpc), bmv2 (simple_switch_grpc), "
                            "auto (bmv2 when installed; the default)")
    start.add_argument("--program", choices=["v1model", "tna"], default="v1model",
                       help="what the controller will push (net.json's arch): v1model (p4src/ina.p4, the default) "
                            "or tna (p4src/tofino/ina_tna.p4, built-in target only)")
    start.add_argument("--management", action="store_true",
                       help="a management network too: every host reaches the root namespace (172.31.255.254, where "
                            "`ina-ctl serve` listens) on <host>-mgmt; the data path is unchanged")
    start.add_argument("--grpc-port-base", type=int, default=GRPC_PORT_BASE,
                       help=f"switch i serves P4Runtime on the first free port from this + i "
                            f"(default {GRPC_PORT_BASE})")
    _start_options(start)
    start.set_defaults(func=cmd_start)

    add("stop", "stop the network running from the run directory").set_defaults(func=cmd_stop)

    run = add("exec", "run a command on a host of the running network (default: a shell)")
    run.add_argument("host")
    run.add_argument("argv", nargs="*", metavar="-- COMMAND", help="the command and its arguments, after --")
    run.set_defaults(func=cmd_exec)

    clean = add("clean", "remove what a crashed run left: switch processes, host shells, interfaces")
    clean.add_argument("topology", nargs="?", help="also delete links named like this topology's (a file or a "
                                                   "builder, as for start)")
    clean.add_argument("--force", action="store_true",
                       help="also kill switch processes of other runs that use these interfaces")
    clean.set_defaults(func=cmd_clean)
    _direct_parser(sub, add_run_dir)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # exec's command is everything after "--", whatever options come before it.
    own, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser().parse_args(own)
    if args.subcommand == "exec":
        args.argv = args.argv + command
    if os.geteuid() != 0:
        print("ina-net: Mininet needs root", file=sys.stderr)
        return 1
    try:
        return args.func(args)
    except (TopologyError, NetworkBusy, SwitchStartError, ValueError) as e:
        print(f"ina-net: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
