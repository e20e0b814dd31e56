"""``p4target-switch-grpc``: the built-in target with simple_switch_grpc's command line.

A script that starts ``simple_switch_grpc`` starts this by changing only the program name:

    p4target-switch-grpc -i 1@veth1 -i 2@veth2 --device-id 0 --log-console prog.p4 \\
        -- --grpc-server-addr 127.0.0.1:9559 --cpu-port 255

The positional config is a P4 source file (or a device config from ``build_device_config``)
where BMv2 takes p4c's JSON; ``--no-p4`` waits for SetForwardingPipelineConfig instead.
BMv2 options that make no sense here (Thrift, nanolog, debugger...) are accepted and ignored.

An aggregation server takes datagrams on a UDP socket instead of ports (udpio.py), on one or more
threads, each flow on one thread by a field of the program's header:

    p4target-switch-grpc --udp 10.0.0.5:48864 --threads 2 --steer ina_t.job_id p4src/ina.p4
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from p4.v1 import p4runtime_pb2

from .cli import parse_defines
from .dataplane import Dataplane, UdpDataplane
from .executor.tna_switch import switch_for
from .frontend import P4Error, load_declarations, load_program
from .p4info import build_p4info
from .ports import PortError, open_port, parse_interface_arg
from .runtime.device_config import DeviceConfigError, build_device_config, compile_device_config
from .runtime.entities import PipelineState
from .runtime.port_status import watch_ports
from .runtime.service import P4RuntimeServer, serve
from .udpio import open_sockets, parse_address, steering_field

DEFAULT_GRPC_ADDR = "127.0.0.1:9559"
_IGNORED_WITH_VALUE = ["--thrift-port", "--nanolog", "--notifications-addr", "--log-file", "--debugger-addr",
                       "--use-files", "--packet-in", "--restore-state", "--dump-packet-data", "--max-port-count",
                       "--priority-queues", "--drop-port", "--dp-grpc-server-addr"]
_IGNORED_FLAGS = ["--debugger", "--log-flush", "--enable-swap", "--no-ssl"]


def _accept_ignored(ap: argparse.ArgumentParser) -> None:
    """BMv2 options that mean nothing here: accepted so launch scripts work unchanged."""
    for opt in _IGNORED_WITH_VALUE:
        ap.add_argument(opt, help=argparse.SUPPRESS)
    for opt in _IGNORED_FLAGS:
        ap.add_argument(opt, action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--pcap", nargs="?", const="", help=argparse.SUPPRESS)  # BMv2: --pcap [dir]


def _target_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4target-switch-grpc --", add_help=False)
    ap.add_argument("--grpc-server-addr", default=DEFAULT_GRPC_ADDR)
    ap.add_argument("--cpu-port", type=int, default=None)
    _accept_ignored(ap)
    return ap


def parse_args(argv: list[str]) -> argparse.Namespace:
    own, target = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(prog="p4target-switch-grpc", description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", help="P4 program (.p4) or device config file")
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="N@IFACE",
                    help="attach port N to a Linux interface (pcap:PREFIX and mem: also work)")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--no-p4", action="store_true", help="start without a program")
    ap.add_argument("--log-console", action="store_true", help="log to the console")
    ap.add_argument("-L", "--log-level", default="info",
                    choices=["trace", "debug", "info", "warn", "error", "off"])
    ap.add_argument("--udp", metavar="IP:PORT", help="serve datagrams on this UDP address (an aggregation "
                    "server) instead of ports; the program sees each on port 1")
    ap.add_argument("--threads", type=int, default=1, help="with --udp: sockets and threads serving them")
    ap.add_argument("--steer", metavar="HEADER.FIELD", help="with --udp and threads: the field of the header "
                    "each datagram starts with that keeps a flow on one thread (ina.p4: ina_t.job_id)")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="preprocessor definition for a .p4 config")
    _accept_ignored(ap)
    args = ap.parse_args(own)
    args.target = _target_parser().parse_args(target)
    if args.config is None and not args.no_p4:
        ap.error("give a P4 program or --no-p4")
    try:
        args.ports = [parse_interface_arg(text) for text in args.interface]
        args.udp = None if args.udp is None else parse_address(args.udp)
    except ValueError as err:
        ap.error(str(err))
    if args.udp is not None and args.ports:
        ap.error("--udp serves datagrams instead of ports: give one or the other")
    if args.threads < 1 or (args.threads > 1 and args.udp is None):
        ap.error(f"--threads {args.threads}: give a positive number, with --udp")
    if args.threads > 1 and args.steer is None:
        ap.error("--threads needs --steer HEADER.FIELD: the field that keeps each flow on one thread")
    if args.steer is not None and (args.config is None or Path(args.config).suffix != ".p4"):
        ap.error("--steer reads the field from the P4 program: give the program's .p4 file")
    return args


def _initial_pipeline(config: str, defines: dict[str, str]) -> PipelineState:
    """What a config file on the command line starts with (as BMv2 does with its JSON)."""
    path = Path(config)
    if path.suffix == ".p4":  # errors name the user's own files
        prog = load_program(path, defines)
        switch, p4info, blob = switch_for(prog), build_p4info(prog), build_device_config(path, defines)
    else:  # a device config, compiled as a SetForwardingPipelineConfig would compile it
        blob = path.read_bytes()
        switch, p4info = compile_device_config(blob)
    return PipelineState(switch, p4info, p4runtime_pb2.ForwardingPipelineConfig(p4info=p4info, p4_device_config=blob))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    level = {"trace": logging.DEBUG, "warn": logging.WARNING, "off": logging.CRITICAL + 1}.get(
        args.log_level, getattr(logging, args.log_level.upper(), logging.INFO))
    logging.basicConfig(level=level if args.log_console else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        pipeline = None if args.no_p4 else _initial_pipeline(args.config, parse_defines(args.defines))
        ports = [open_port(number, iface) for number, iface in args.ports]
        steer = None if args.steer is None else \
            steering_field(load_declarations(args.config, parse_defines(args.defines)), args.steer)
        sockets = [] if args.udp is None else open_sockets(args.udp, args.threads, steer)
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    except (PortError, DeviceConfigError, OSError, ValueError) as err:
        print(f"p4target-switch-grpc: {err}", file=sys.stderr)
        return 1
    dataplane = Dataplane(ports, cpu_port=args.target.cpu_port) if args.udp is None else \
        UdpDataplane(sockets, cpu_port=args.target.cpu_port)
    service = P4RuntimeServer(dataplane, device_id=args.device_id)
    if pipeline is not None:
        service.commit(pipeline)
    try:
        server = serve(service, args.target.grpc_server_addr)
    except RuntimeError as err:
        print(f"p4target-switch-grpc: {err}", file=sys.stderr)
        return 1
    dataplane.start()
    where = f"UDP {args.udp[0]}:{args.udp[1]} on {args.threads} thread(s)" if args.udp else \
        f"ports {({n: i for n, i in args.ports})}"
    logging.getLogger(__name__).warning("device %d serving P4Runtime on %s with %s", args.device_id,
                                        args.target.grpc_server_addr, where)
    stop = threading.Event()
    threading.Thread(target=watch_ports, args=(dict(args.ports), service.port_status, stop), daemon=True,
                     name="port-status").start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=1)
    dataplane.stop()
    if isinstance(dataplane, UdpDataplane):  # what the sockets saw, for whoever runs the server
        per_thread = {f"thread{i}_rx_segments": s.stats["rx_segments"] for i, s in enumerate(dataplane.sockets)}
        counts = sorted(dataplane.udp_stats().items()) + list(per_thread.items())
        print("p4target-switch-grpc: udp " + " ".join(f"{k}={v}" for k, v in counts), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
