"""`ina-ctl`: the controller from a shell.  Every subcommand is one call of ``Controller``.

    ina-ctl --net RUN/net.json setup [--values 64]
    ina-ctl --net RUN/net.json job plan --hosts h1,h2,h3 [--trees auto|N] [--size 1MB,25MB] [--json]
    ina-ctl job plan --topology TOPOLOGY.json --hosts h1,h2,h3 [--size 1MB] [--json]   # no network needed
    ina-ctl --net RUN/net.json job create NAME --hosts h1,h2,h3 --pool-size 64 [--trees auto|N]
    ina-ctl --net RUN/net.json job create NAME --nodes n1,n2,n3   # a rail set: NAME-rail<i> of each node's NIC i
    ina-ctl --net RUN/net.json job delete NAME
    ina-ctl --net RUN/net.json status [--json]
    ina-ctl --net RUN/net.json watch          # re-provisions switches that restart, moves trees off dead ones
    ina-ctl --net RUN/net.json serve --listen 0.0.0.0:50051 --token-file TOKEN   # the controller service
    ina-ctl direct plan --workers 128 --interfaces 4 --gbps 100 --devices 63 --ports 4 --size 25MB [--json]
    ina-ctl direct plan --cluster CLUSTER.json --size 25MB [--kinds tree,ring] [--circuits OUT.json]
    ina-ctl direct setup --cluster CLUSTER.json --site SITE.json --size 25MB --state-dir DIR   # DIR/parts.json

With a service running, `job create/delete/list` and `status` go to it: `--controller HOST:PORT
--token-file TOKEN` (or INA_CONTROLLER and INA_TOKEN_FILE), no --net.

State (jobs, allocations, epochs, leases) lives in RUN/controller-state.json, job specs for workers
in RUN/jobs/NAME.json, unless --state says otherwise.  One process writes it at a time: a service
holds it while it runs; each other command for its own run.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shlex
import signal
import sys
import threading
from pathlib import Path

from controller import direct
from controller.calibrate import calibrate, calibrate_server
from controller.controller import DEAD_AFTER, DEFAULT_POOL_SIZE, Controller, JobError
from controller.direct_jobs import create_parts, write_parts
from controller.direct_site import DirectSite
from controller.job_plan import JobPlan, method_lines, plan_job, pool_size_of, predictions
from controller.model import DEFAULT_HOST_LATENCY
from controller.network import Network
from controller.p4runtime_client import SwitchError
from controller.pipeline import PipelineError, PipelineOptions
from controller.plan import depth, link_name
from controller.service import DEFAULT_LEASE, start
from controller.state import STATE_FILE, StateLock
from controller.topology import Topology, TopologyError
from ina_api.client import CONTROLLER_ENV, TOKEN_ENV, JobsClient, LeaseKeeper, ServiceError, read_token
from worker import protocol
from worker.chain import ChainPart
from worker.direct import TorusPart, TreePart
from worker.jobspec import RING_SUMS, JobSpec
from worker.ring_layout import LAYOUTS
from worker.tuner import MODES

_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ina-ctl", description="Aggregation jobs on a network of P4 switches.")
    ap.add_argument("--net", type=Path, help="the network file bmv2-env wrote (RUN/net.json); every command but "
                                             "`job plan --topology` needs it")
    ap.add_argument("--state", type=Path, help="controller state file (default: beside --net)")
    ap.add_argument("--election-id", type=int,
                    help="P4Runtime election id (default: 1 for watch, 2 for other commands, so they can run "
                         "while watch holds the switches)")
    ap.add_argument("--controller", default=os.environ.get(CONTROLLER_ENV),
                    help=f"HOST:PORT of a running service (`serve`): `job create/delete/list` and `status` ask it "
                         f"(default: ${CONTROLLER_ENV})")
    ap.add_argument("--token-file", type=Path, default=os.environ.get(TOKEN_ENV),
                    help=f"the file holding the cluster's token, for `serve` and --controller (default: ${TOKEN_ENV})")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="push the pipeline, install routes and every live job")
    setup.add_argument("--values", type=int, help="int32 values per packet (INA_VALUES; default: the most every "
                       "switch's program takes, 256 for ina.p4 and 64 for the TNA program)")
    setup.add_argument("--udp-port", type=int, help="aggregation UDP port (INA_UDP_PORT_NUMBER)")
    _direct(sub)
    job = sub.add_parser("job", help="plan, create or delete a job").add_subparsers(dest="action", required=True)
    trees = {"default": "auto", "help": "aggregation trees: auto (the packing planner decides) or N (at most N)"}
    show = job.add_parser("plan", help="print the job's packed trees and its model without installing anything")
    _plan_arguments(show, trees)
    create = job.add_parser("create", help="plan the job's trees and install them")
    create.add_argument("name")
    who = create.add_mutually_exclusive_group(required=True)
    who.add_argument("--hosts", help="member hosts in rank order, comma-separated")
    who.add_argument("--nodes", help="a rail set instead: these machines of the topology (a host's \"node\"; a "
                                     "host without one is its own), comma-separated, each with the same number of "
                                     "NICs; job NAME-rail<i> of every node's NIC i, its spec in NAME-rail<i>.json")
    create.add_argument("--pool-size", type=_pool_size, default=None, metavar="N|auto",
                        help="slots per switch for each of the job's trees, and so its workers' window (default "
                             "auto: what the trees' bandwidth-delay product needs, at least "
                             f"{DEFAULT_POOL_SIZE}, shared fairly where the switches are short)")
    create.add_argument("--pool-base", type=int,
                        help="first slot of the first tree on every switch, the next tree's right after it "
                             "(default: first fit)")
    create.add_argument("--trees", **trees)
    create.add_argument("--export", action="store_true",
                        help="print only `export INA_JOB_SPEC=<the spec>` on stdout (the summary on stderr), for "
                             "eval in the shell that starts torchrun")
    for command in (show, create):
        _split_arguments(command)
    _at_service(create)
    delete = job.add_parser("delete", help="remove exactly this job's entries")
    delete.add_argument("name")
    delete.add_argument("--secret", help="with --controller: the secret `job create` printed")
    job.add_parser("list", help="jobs and their specs")
    _calibrate_parser(sub)
    status = sub.add_parser("status", help="each job's counters per switch, and each switch's drops")
    status.add_argument("--json", action="store_true", help="as JSON")
    _watch_and_serve(sub)
    return ap


def _plan_arguments(show: argparse.ArgumentParser, trees: dict) -> None:
    """`job plan`'s own options: where it plans, and the calls it predicts."""
    show.add_argument("--hosts", required=True, help="member hosts in rank order, comma-separated")
    show.add_argument("--topology", type=Path,
                      help="plan on this topology file (e.g. bmv2-env/topologies/fattree-4.json) instead of --net's: "
                           "no network needs to run")
    show.add_argument("--values", type=int,
                      help="with --topology: int32 values per packet (INA_VALUES, default 256: ina.p4's most); "
                           "with --net the network's state file fixes it")
    show.add_argument("--trees", **trees)
    show.add_argument("--size", type=_sizes, default=[1 << 20],
                      help="call sizes to predict, comma-separated (64KB,1MB,25MB; default 1MB): each method's time "
                           "with its latency and bandwidth terms, and the one that runs")
    show.add_argument("--pool-size", type=_pool_size, default=None, metavar="N|auto",
                      help="slots per tree on each switch, the workers' window (default auto: the trees' "
                           f"bandwidth-delay product, at least {DEFAULT_POOL_SIZE})")
    show.add_argument("--host-latency", type=_microseconds, default=None, metavar="US",
                      help="the hosts' latency, wire to worker loop, in us (default: what `calibrate` measured, else "
                           f"{DEFAULT_HOST_LATENCY * 1e6:g}; ina-sim's hosts wait "
                           "20.5 on average: 20 and half a 1-us poll)")
    show.add_argument("--json", action="store_true", help="the plan as JSON")


def _at_service(create: argparse.ArgumentParser) -> None:
    """`job create --controller`'s own options: the service's job is leased."""
    create.add_argument("--token-file", type=Path, default=argparse.SUPPRESS, help="with --controller: the "
                        "file holding the cluster's token (here or before the command)")
    create.add_argument("--lease-seconds", type=float, default=0.0,
                        help="with --controller: the job's lease (default: the service's); it expires unless held")
    create.add_argument("--hold", action="store_true",
                        help="with --controller: keep the lease alive until interrupted, then delete the job")
    create.add_argument("--spec-out", type=Path, help="with --controller: where to write the spec (default NAME.json)")


def _watch_and_serve(sub) -> None:
    """The long-running commands: `watch` beside hand-run commands, or `serve` instead of them."""
    watch = sub.add_parser("watch", help="keep switches provisioned (re-provision on restart) and move trees off "
                                         "switches and links that stay down")
    serve = sub.add_parser("serve", help="the controller service: jobs on demand over gRPC (ina_api/jobs.proto), "
                                         "with leases and admission, and what watch does")
    serve.add_argument("--listen", default="0.0.0.0:50051", help="HOST:PORT to serve on (default 0.0.0.0:50051)")
    serve.add_argument("--token-file", type=Path, default=argparse.SUPPRESS,
                       help="the file holding the cluster's token (here or before the command)")
    serve.add_argument("--lease-seconds", type=float, default=DEFAULT_LEASE,
                       help=f"a job's lease unless it asks for another (default {DEFAULT_LEASE:g}; owners renew at "
                            f"a third of it)")
    serve.add_argument("--pool-size", type=_pool_size, default=None, metavar="N|auto",
                       help="slots per tree for a job that asks for none (default auto: its trees' bandwidth-delay "
                            "product, shared fairly); admission gives less when the switches are full")
    serve.add_argument("--grace", type=float,
                       help="seconds the jobs found at start live before their first renewal is due (default: "
                            "twice the lease)")
    for command in (watch, serve):
        command.add_argument("--interval", type=float, default=1.0)
        command.add_argument("--dead-after", type=float, default=DEAD_AFTER,
                             help="seconds a switch may stay unreachable (a restart) before its trees move")


def _direct(sub) -> None:
    """`direct plan`: a direct-connect cluster's parts and circuits (controller.direct; no network needed);
    `direct setup`: every tree part's job on a real cluster's devices, and the parts every rank loads."""
    actions = sub.add_parser("direct", help="direct-connect clusters (optical circuits and aggregation devices)") \
        .add_subparsers(dest="action", required=True)
    plan = actions.add_parser("plan", help="the parts, shares and circuits for a call, beside the plain ring and a "
                                           "tree per interface")
    plan.add_argument("--cluster", type=Path, help="a cluster file (docs/direct.md); or the options below")
    plan.add_argument("--workers", type=int)
    plan.add_argument("--interfaces", type=int, help="D: each worker's circuit interfaces")
    plan.add_argument("--gbps", type=float, help="L: each interface's rate, each way")
    plan.add_argument("--devices", type=int, default=0, help="M: aggregation devices")
    plan.add_argument("--ports", type=int, default=4, help="E: each device's ports (default 4)")
    plan.add_argument("--device-gbps", type=float, help="what a device sums (default: L; `ina-ctl calibrate` "
                                                        "measures a device)")
    plan.add_argument("--hop-latency-us", type=float, default=1.0, help="one circuit, each way (default 1)")
    plan.add_argument("--host-latency-us", type=float, default=DEFAULT_HOST_LATENCY * 1e6)
    plan.add_argument("--nic-streaming", action="store_true", help="the workers' NICs sum as data passes")
    plan.add_argument("--size", type=_sizes, default=[25 << 20], help="bytes per worker and call (default 25MB)")
    plan.add_argument("--kinds", help="only these part shapes (ring, tree, ring_tree, nic_mesh, or one like "
                                      "ring_tree(16)), comma-separated")
    plan.add_argument("--circuits", type=Path, help="write the circuits to program (pairs of ports) to this file")
    plan.add_argument("--json", action="store_true")
    setup = actions.add_parser("setup", help="plan a call, create every tree and NIC mesh part's job on the site's "
                                             "devices and NICs, "
                                             "and write the parts every rank's DirectWorker loads")
    setup.add_argument("--cluster", type=Path, required=True, help="the cluster file (docs/direct.md)")
    setup.add_argument("--site", type=Path, required=True, help="the site file: every worker's interfaces, every "
                                                                "device's P4Runtime access and address")
    setup.add_argument("--size", type=_sizes, required=True, help="bytes per worker and call the plan is for")
    setup.add_argument("--state-dir", type=Path, required=True,
                       help="a fresh directory: DIR/parts.json, and each tree part's net.json, state and spec in "
                            "DIR/part-K")
    setup.add_argument("--kinds", help="only these part shapes, comma-separated (DirectWorker runs tree, ring, "
                                       "torus and nic_mesh)")
    setup.add_argument("--values", type=int, help="int32 values per packet (default: the most the devices take)")
    setup.add_argument("--circuits", type=Path, help="the circuits the OCS was programmed with (`direct plan "
                                                     "--circuits`): refused unless they are this plan's")


def _plan_direct(args: argparse.Namespace) -> int:
    if args.cluster is not None:
        cluster = direct.DirectCluster.load(args.cluster)
    else:
        missing = [f"--{n}" for n in ("workers", "interfaces", "gbps") if getattr(args, n) is None]
        if missing:
            raise direct.DirectError(f"give --cluster FILE, or {', '.join(missing)}")
        cluster = direct.DirectCluster.from_dict(
            {"workers": {"count": args.workers, "interfaces": args.interfaces, "gbps": args.gbps,
                         "nic_streaming": args.nic_streaming},
             "devices": {"count": args.devices, "ports": args.ports,
                         **({"gbps": args.device_gbps} if args.device_gbps else {})},
             "hop_latency_us": args.hop_latency_us, "host_latency_us": args.host_latency_us}, "the options")
    kinds = args.kinds.split(",") if args.kinds else None
    plans = [direct.plan(cluster, size, kinds) for size in args.size]
    if args.circuits:
        args.circuits.write_text("[\n" + ",\n".join(json.dumps(list(c)) for c in plans[-1].circuits) + "\n]\n")
    if args.json:
        print(json.dumps([p.to_dict() for p in plans] if len(plans) > 1 else plans[0].to_dict(), indent=2))
    else:
        for p in plans:
            print("\n".join(direct.describe(p)))
    return 0


def _setup_direct(args: argparse.Namespace) -> int:
    """`direct setup`: the plan, its tree parts' jobs (controller.direct_jobs) and DIR/parts.json."""
    if len(args.size) != 1:
        raise direct.DirectError("direct setup plans for one --size")
    cluster, site = direct.DirectCluster.load(args.cluster), DirectSite.load(args.site)
    site.check(cluster, str(args.site))
    found = direct.plan(cluster, args.size[0], args.kinds.split(",") if args.kinds else None,
                        protocol.load(args.values))  # the trees' packets, so their windows, at the values asked
    print("\n".join(direct.describe(found)))
    if args.circuits:
        direct.check_programmed(found, direct.read_circuits(args.circuits), str(args.circuits))
    parts = create_parts(cluster, found, site, args.state_dir, PipelineOptions(args.values) if args.values else None)
    for k, (planned, part) in enumerate(zip(found.parts, parts)):
        head = f"part {k + 1}/{len(parts)}: {planned.shape.name}, share {part.share:.3f}"
        if isinstance(part, TreePart):
            devices = ", ".join(f"d{j} ({site.devices[j].p4runtime})" for j in planned.devices) \
                if planned.shape.kind == "tree" else f"the {cluster.workers} workers' NICs"
            trees = len(part.spec.trees)
            print(f"{head}, interface {planned.interfaces[0]}, device(s) {devices}: job {part.spec.name}, pool "
                  f"{part.spec.pool_size}" + (f" in each of {trees} trees" if trees > 1 else "")
                  + f", spec in {part.spec_file}")
        elif isinstance(part, ChainPart):
            ends = sum(any(link.circuit.split(" <-> ")[1].startswith("d") for link in r.links) for r in part.relays)
            print(f"{head}, interfaces {list(planned.interfaces)}, device(s) "
                  f"{', '.join(f'd{j}' for j in planned.devices)}: job {part.spec.name} over {ends} chain ends, pool "
                  f"{part.spec.pool_size}; relays on {part.relays[0].links[0].local}, ... (the job's tree port)")
        elif isinstance(part, TorusPart):
            (f1, f2), (b1, b2) = ([a[0] for a in p] for p in (part.forward, part.backward))
            print(f"{head}, interfaces {list(planned.interfaces)}, levels {part.levels[0]} x {part.levels[1]}: "
                  f"listening on {f1} and {f2} forward, {b1} and {b2} backward, ... (levels 1 and 2)")
        else:
            print(f"{head}, interfaces {list(planned.interfaces)}: listening on {part.forward[0]} and "
                  f"{part.backward[0]}, ... (forward, backward)")
    out = write_parts(parts, args.state_dir)
    print(f"parts for every rank in {out.absolute()}: DirectWorker(parts_from_json(text), rank)")
    return 0


def _split_arguments(command: argparse.ArgumentParser) -> None:
    """How a job's calls split between the switches and a host ring (`job plan` and `job create`)."""
    command.add_argument("--mode", default="auto", choices=MODES,
                         help="ina: all through the switches; ring: all round a TCP ring of the hosts; "
                              "hybrid: both at once; auto (default): for each call, what the model predicts fastest")
    command.add_argument("--alpha", type=float, help="hybrid: the share through the switches (default: the "
                                                     "model's for each call, which makes both parts finish together)")
    command.add_argument("--ring-layout", choices=LAYOUTS,
                         help="the ring's layout (default: the model's for each call; flat is gloo's ring)")
    command.add_argument("--ring-sum", default="native", choices=RING_SUMS,
                         help="a pure ring's sums: native (default: in the tensor's type, as gloo; 2(N-1)/N "
                              "of it on each link) or float64 (float32 in float64 partials: 3(N-1)/N, 1.5x "
                              "the bytes, an error of one rounding); a hybrid's ring part is always float64")
    command.add_argument("--lanes", default="1",
                         help="each planned tree installed as N trees on its switches (each with a job id, "
                              "pool-size/N slots and a socket at every worker, so its own thread), or auto: as many "
                              "as a host core per lane needs at the tree's rate, by the controller's host cost "
                              "(default 1)")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose or args.command in ("watch", "serve") else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        if args.command == "job" and args.action == "plan" and args.topology is not None:
            return _plan_topology(args)
        if args.command == "direct":
            return _plan_direct(args) if args.action == "plan" else _setup_direct(args)
        if args.controller and (args.command == "status" or (args.command == "job" and args.action != "plan")):
            return _ask_service(args)
        if args.net is None:
            raise TopologyError("--net RUN/net.json is needed (only `job plan --topology FILE` plans without it)")
        if args.command == "job" and args.action == "plan" and args.values is not None:
            raise TopologyError("--values goes with --topology: with --net, the network's state file fixes it")
        state = args.state or args.net.parent / STATE_FILE
        network = Network.load(args.net)
        options = PipelineOptions(args.values, args.udp_port) if args.command == "setup" else None
        # watch and serve hold id 1; changes use 2 (primary while they run); reading needs no arbitration
        read_only = args.command == "status" or (args.command == "job" and args.action in ("list", "plan"))
        election_id = args.election_id or (1 if args.command in ("watch", "serve") else None if read_only else 2)
        lock = StateLock(state)
        if not read_only and args.command != "watch" and not _take(lock, wait=args.command != "serve"):
            raise OSError(f"{state} is held by the controller service at {lock.holder() or '?'}: "
                          f"ask it with --controller")
        try:
            with Controller(network, state, options, election_id,
                            host_latency=getattr(args, "host_latency", None)) as ctl:
                return _serve(ctl, args, lock) if args.command == "serve" else _run(ctl, args, lock)
        finally:
            lock.release()
    except (ValueError, OSError, SwitchError, PipelineError, ServiceError) as e:  # JobError, TopologyError, ...
        print(f"ina-ctl: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _plan_topology(args: argparse.Namespace) -> int:
    """`job plan --topology`: the topology file alone, no network file, state or switch."""
    if args.net is not None:
        raise TopologyError("give either --net or --topology to `job plan`, not both")
    topology = Topology.load(args.topology)
    P = protocol.load(args.values)  # None: protocol.p4's default, ina.p4's most
    found = plan_job(topology, _hosts(args.hosts), P, args.trees, args.mode, args.alpha, args.ring_sum,
                     args.pool_size, args.ring_layout,
                     DEFAULT_HOST_LATENCY if args.host_latency is None else args.host_latency, lanes=args.lanes)
    print(json.dumps(found.to_dict(topology, tuple(args.size)), indent=2) if args.json
          else describe(found, topology, args.size))
    return 0


def _take(lock: StateLock, wait: bool) -> bool:
    """The state lock; a command waits for another command's run, never for a service (which never ends)."""
    if lock.acquire(wait=False):
        return True
    if not wait or lock.holder():  # a service notes its address in the lock file
        return False
    return lock.acquire(wait=True)


def _serve(ctl: Controller, args: argparse.Namespace, lock: StateLock) -> int:
    """`serve`: set every switch up, then serve until SIGTERM or SIGINT."""
    if args.token_file is None:
        raise ServiceError(f"serve needs --token-file (or {TOKEN_ENV}): the cluster's token")
    token = read_token(args.token_file)
    ctl.dead_after = args.dead_after
    running = start(ctl, args.listen, token, args.lease_seconds, args.grace, args.interval, pool_size=args.pool_size)
    lock.note(running.address)
    ctl.setup(strict=False)  # after the service answers: its jobs' owners renew while the switches are checked
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    logging.getLogger("ina.service").info("serving on %s: %d switch(es), %d job(s) from %s", running.address,
                                          len(ctl.topology.switches), len(ctl.state.jobs), ctl.state_path)
    print(f"ina-ctl: serving on {running.address}", flush=True)
    done.wait()
    running.stop()
    lock.note("")
    return 0


def _ask_service(args: argparse.Namespace) -> int:
    """`job create/delete/list` and `status` against a running service."""
    if args.token_file is None:
        raise ServiceError(f"--controller needs --token-file (or {TOKEN_ENV}): the cluster's token")
    with JobsClient(args.controller, read_token(args.token_file)) as client:
        if args.command == "status":
            reply = client.status(counters=True)
            for s in reply.switches:
                print(f"{s.name} ({s.program}{'' if s.reachable else ', unreachable'}): {s.free_slots} of "
                      f"{s.pool_slots} slots and {s.free_cells} of {s.cells} cells free")
            for j in reply.jobs:
                print(_job_line(j) + "".join(f"\n  {k} {v}" for k, v in sorted(j.packets.items())))
        elif args.action == "list":
            for j in client.list():
                print(_job_line(j))
        elif args.action == "delete":
            if not args.secret:
                raise ServiceError("job delete --controller needs --secret (what job create printed)")
            client.delete(args.name, args.secret)
            print(f"job {args.name} deleted")
        else:
            _create_at_service(client, args)
    return 0


def _create_at_service(client: JobsClient, args: argparse.Namespace) -> None:
    if args.alpha is not None:
        raise ServiceError("job create --controller takes no --alpha: the service's jobs split each call by the model")
    if args.nodes is not None:
        raise ServiceError("job create --nodes runs without --controller (it reads the machines from --net's "
                           "topology); a service's rail set comes from JobsClient.create_rails")
    job, secret = client.create(args.name, _hosts(args.hosts), mode=args.mode,
                                trees=0 if args.trees == "auto" else int(args.trees), pool_size=args.pool_size or 0,
                                lease_seconds=args.lease_seconds, ring_sum=args.ring_sum,
                                ring_layout=args.ring_layout or "", lanes=args.lanes)
    path = (args.spec_out or Path(f"{job.name}.json")).absolute()
    path.write_text(job.spec_json + "\n")
    print(f"{_job_line(job)}\nspec in {path}; secret {secret}", file=sys.stderr if args.export else sys.stdout)
    if args.export:
        print(f"export INA_JOB_SPEC={shlex.quote(str(path))}", flush=True)
    if args.hold:
        keeper = LeaseKeeper(client, job, secret)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            keeper.stop()
            client.delete(job.name, secret)
            print(f"job {job.name} deleted", file=sys.stderr)


def _job_line(job) -> str:
    admission = f"; {job.admission}" if job.admission else ""
    calls = ", ".join(f"{_size(p.bytes)} {p.method}" + (f" {p.ina_share:.0%}" if p.method == "hybrid" else "")
                      for p in job.predictions)
    rail = f"; rail {job.rail} of set {job.rail_set}" if job.rail_set else ""
    return (f"{job.name}: mode {job.mode} ({calls}), {job.trees} tree(s) of pool {job.pool_size} on "
            f"{', '.join(job.switches) or 'no switch'}; lease {job.lease_seconds:g} s, "
            f"{job.lease_remaining:.3g} s left{admission}{rail}")


def _run(ctl: Controller, args: argparse.Namespace, lock: StateLock) -> int:
    if args.command == "setup":
        ctl.setup()
        print(f"{len(ctl.topology.switches)} switch(es) ready, {len(ctl.state.jobs)} job(s) installed")
    elif args.command == "job" and args.action == "plan":
        plan = ctl.plan(_hosts(args.hosts), args.trees, args.mode, args.alpha, args.ring_sum, args.pool_size,
                        args.ring_layout, args.lanes)
        print(json.dumps(plan.to_dict(ctl.topology, tuple(args.size)), indent=2) if args.json
              else describe(plan, ctl.topology, args.size))
    elif args.command == "job" and args.action == "create" and args.nodes is not None:
        for spec in _create_rails(ctl, args):
            print(_created(ctl, spec))
    elif args.command == "job" and args.action == "create":
        spec = ctl.create_job(args.name, _hosts(args.hosts), args.pool_size, args.pool_base, args.trees, args.mode,
                              args.alpha, args.ring_sum, args.ring_layout, lanes=args.lanes)
        print(_created(ctl, spec), file=sys.stderr if args.export else sys.stdout)
        if args.export:
            print(f"export INA_JOB_SPEC={shlex.quote(str((ctl.spec_dir / f'{spec.name}.json').absolute()))}")
    elif args.command == "job" and args.action == "delete":
        ctl.delete_job(args.name)
        print(f"job {args.name} deleted")
    elif args.command == "job":
        for name in ctl.state.jobs:
            spec = ctl.job_spec(name)
            trees = ", ".join(f"{t.root}/{t.job_id} {t.share:.0%}" for t in spec.trees)
            rail = f", rail {spec.rail.index} of {spec.rail.count} of set {spec.rail.set}" if spec.rail else ""
            print(f"{name}: {len(spec.members)} members, pool {spec.pool_size} per tree, trees (root/id share) "
                  f"{trees}{rail}")
    elif args.command == "calibrate" and (args.server or not args.name):
        if not args.server or not args.members or args.name:
            raise JobError("calibrate takes a job's NAME, or --server SERVER --members H1,H2,... (not both)")
        print(calibrate_server(ctl, args.server, args.members, args.values, args.timeout).line())
    elif args.command == "calibrate":
        measured = calibrate(ctl, args.name, args.values, args.timeout)
        ina = f"{measured.ina_mbps:.4g} Mb/s per worker through the switches" if measured.ina_mbps else "no trees"
        latency = f"{measured.host_latency * 1e6:.1f} us" if measured.host_latency is not None else "not measured"
        print(f"job {args.name}: {ina}; per link, a ring alone: {measured.rings()}; host latency {latency}; "
              "its model now:")
        print(describe(ctl.job_plan(args.name), ctl.topology, [args.values * 4], trees=False))
    elif args.command == "status":
        rails = [f"{name}: rail {job.rail.index} of {job.rail.count} of set {job.rail.set}"
                 for name, job in ctl.state.jobs.items() if job.rail is not None]
        print(json.dumps(ctl.status(), indent=2) if args.json else
              "\n".join([status_table(ctl.status()), *(["", *rails] if rails else [])]))
    elif args.command == "watch":  # the lock for each round, so `job create` and others run between them
        _locked(lock, lambda: ctl.setup(strict=False))  # a switch that does not answer yet is left to the rounds
        ctl.dead_after = args.dead_after
        while True:
            ctl.wait(args.interval)  # or less: a switch reported a port change, or its stream ended
            _locked(lock, ctl.watch_once)
    return 0


def _created(ctl: Controller, spec: JobSpec) -> str:
    """What `job create` made: the job's trees and rings, and where its spec is."""
    trees = ", ".join(f"root {t.root} (id {t.job_id}, {t.share:.1%}"
                      + (f", lane of tree {t.lane_of + 1}" if spec.lanes > 1 else "") + ")"
                      for t in spec.trees)
    ring = f"; rings ({', '.join(x.name for x in spec.ring_arrangements)}) on port {spec.ring_port}" \
        if spec.mode != "ina" else ""
    rail = f" (rail {spec.rail.index} of {spec.rail.count} of set {spec.rail.set})" if spec.rail else ""
    path = (ctl.spec_dir / f"{spec.name}.json").absolute()
    return (f"job {spec.name}{rail}: mode {spec.mode}, {len(spec.trees)} tree(s): {trees or 'none'}{ring}; "
            f"spec in {path}")


def _create_rails(ctl: Controller, args: argparse.Namespace) -> list[JobSpec]:
    """`job create NAME --nodes`: a rail set by hand, rail i's job of every node's NIC i (``Topology.nodes``:
    a machine's hosts in rail order), for spec-file users without the service."""
    if args.export or args.pool_base is not None:
        raise JobError("job create --nodes takes neither --export (each rail has its spec, NAME-rail<i>.json) nor "
                       "--pool-base (each rail's trees go where they fit)")
    machines, names = ctl.topology.nodes, _hosts(args.nodes)
    unknown = [n for n in names if n not in machines]
    if not names or unknown:
        raise TopologyError(f"--nodes: {', '.join(unknown) or 'none given'}: not a node of the topology (its nodes: "
                            f"{', '.join(list(machines)[:12])}{', ...' if len(machines) > 12 else ''})")
    twice = sorted({n for n in names if names.count(n) > 1})
    counts = {len(machines[n]) for n in names}
    if twice or len(counts) > 1:
        raise TopologyError(f"--nodes: node(s) {', '.join(twice)} given twice" if twice else
                            "--nodes: every node needs the same number of NICs, not " +
                            ", ".join(f"{n} {len(machines[n])}" for n in names))
    rails = [[machines[n][i] for n in names] for i in range(counts.pop())]
    return ctl.create_rails(args.name, rails, pool_size=args.pool_size, trees=args.trees, mode=args.mode,
                            alpha=args.alpha, ring_sum=args.ring_sum, ring_layout=args.ring_layout, lanes=args.lanes)


def _locked(lock: StateLock, work) -> None:
    if not _take(lock, wait=True):
        raise OSError(f"{lock.path} is held by the controller service at {lock.holder()}: watch is not needed")
    try:
        work()
    finally:
        lock.release()


def _calibrate_parser(sub) -> None:
    calibrate = sub.add_parser("calibrate", help="measure a job's aggregation capacity and ring rate on its hosts, "
                                                 "and split it again between the switches and the ring; "
                                                 "--server: an aggregation server's rate per core")
    calibrate.add_argument("name", nargs="?", help="the job (not with --server)")
    calibrate.add_argument("--server", help="measure this aggregation server's contributions/s per core, with a "
                                            "temporary job of --members through it alone, and keep it for every plan")
    calibrate.add_argument("--members", type=_hosts, help="with --server: the hosts that send it (at most 32)")
    calibrate.add_argument("--values", type=int, default=1 << 18, help="float32 values per burst call")
    calibrate.add_argument("--timeout", type=float, default=20.0)


def _hosts(text: str) -> list[str]:
    return [h for h in text.split(",") if h]


def status_table(status: dict[str, dict]) -> str:
    """``Controller.status()`` as tables a person reads: a row per job and switch, a row per switch's drops
    (the JSON nests them, which hides a zero column)."""
    rows = [[job, switch, *counts.values()] for job, per_switch in status["jobs"].items()
            for switch, counts in per_switch.items()]
    counters = next((list(c) for per_switch in status["jobs"].values() for c in per_switch.values()), [])
    lines = _table(["job", "switch", *counters], rows) if rows else ["no jobs"]
    drops = status["drops"]
    names = next((list(d) for d in drops.values()), [])
    return "\n".join(lines + [""] + _table(["switch", *(f"drop {n}" for n in names)],
                                          [[switch, *d.values()] for switch, d in drops.items()]))


def _table(header: list[str], rows: list[list]) -> list[str]:
    """Left-aligned names, right-aligned numbers, columns as wide as their widest cell."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) if isinstance(raw, str) else c.rjust(w)
                      for c, w, raw in zip(row, widths, source)).rstrip()
            for row, source in zip(cells, [header, *rows])]


def _lanes_line(job: JobPlan) -> list[str]:
    if job.lanes == 1:
        return []
    return [f"each tree in {job.lanes} lanes: trees on its switches with a job id, {job.pool_size} slots and a "
            f"worker socket each, so a thread each at a worker"]


def _tree_rows(job: JobPlan, topology: Topology) -> list[str]:
    """A row per planned tree (its lanes taken together)."""
    plan, lanes = job.tree_plan, job.lanes
    rows = [f"{'tree':>4}  {'root':<10} {'share':>6} {'Mb/s':>9} {'depth':>5}  switches"]
    for i, p in enumerate(plan.trees[::lanes], 1):
        switches = sorted(p.tree.switches(), key=lambda name: [int(t) if t.isdigit() else t
                                                               for t in re.split(r"(\d+)", name)])
        shown = ", ".join(switches[:6]) + (f", ... ({len(switches)} in all)" if len(switches) > 6 else "")
        rows.append(f"{i:>4}  {p.tree.root:<10} {p.share * lanes:>6.1%} {p.rate * lanes:>9.4g} "
                    f"{depth(topology, plan.members, p.tree):>5}  {shown}" + (f"  (in {lanes} lanes)" if lanes > 1
                                                                             else ""))
    return rows


def describe(job: JobPlan, topology: Topology, sizes: list[int], trees: bool = True) -> str:
    """The plan as a person reads it: the trees, then each call size's prediction per method, then where
    the method that runs changes."""
    plan = job.tree_plan
    lines = []
    if trees and not plan.trees:
        lines = [f"{len(plan.members)} members, no aggregation trees (a ring alone)"]
    elif trees:
        status = "optimal" if plan.optimal else f"{plan.rate / plan.upper_bound:.0%} of it"
        lines = [f"{len(plan.members)} members, {len(plan.trees) // job.lanes} tree(s) of {plan.candidates} "
                 f"candidates (planned in {plan.seconds:.2f} s)",
                 f"rate {plan.rate:g} Mb/s on each member's link (cut bound {plan.upper_bound:g} Mb/s: {status}), "
                 f"{plan.wire_factor:.3f} wire bytes per byte", *_lanes_line(job), "", *_tree_rows(job, topology)]
        lines += ["", f"links at capacity ({len(plan.bottlenecks)}):"]
        lines += [f"  {link_name(topology, i)}" for i in plan.bottlenecks[:12]]
        if len(plan.bottlenecks) > 12:
            lines.append(f"  ... and {len(plan.bottlenecks) - 12} more")
        lines += [f"note: {n}" for n in plan.notes]
        lines.append("")
    limit = f"C = {job.limit_mbps:g} Mb/s per worker ({job.why})" if job.limit_mbps < math.inf else \
        "no aggregation limit known"
    window = f"window {job.pool_size}" + (" (auto)" if job.auto_window else "")
    lines.append(f"mode {job.mode}; {window}; {limit}; ring layouts {', '.join(x.name for x in job.layouts)}")
    for size in sizes:
        found = predictions(job, size)
        for when in ("later", "first"):
            call = found[when]
            lines.append(f"a {_size(size)} call ({'the first: windows opening' if when == 'first' else 'window open'})"
                         f": {call['runs']}, {call['seconds'] * 1e6:,.1f} us")
            lines += ["  " + line for line in method_lines(call["methods"], call["runs"])]
    crossings = job.crossovers()
    lines.append("crossovers: " + ("; ".join(f"{below} below {_size(b)}, {above} from there" for b, below, above
                                             in crossings) if crossings else "none (one method at every size)"))
    return "\n".join(lines)


def _size(nbytes: int) -> str:
    for unit in ("GB", "MB", "KB"):
        if nbytes >= _UNITS[unit] and nbytes % (_UNITS[unit] // 1024 or 1) == 0:
            return f"{nbytes / _UNITS[unit]:g} {unit}"
    return f"{nbytes} B"


def _sizes(text: str) -> list[int]:
    """"64KB,1MB" -> bytes (KB, MB and GB are powers of two, as tensors are sized)."""
    out = []
    for part in (t.strip().upper() for t in text.split(",") if t.strip()):
        m = re.fullmatch(r"([\d.]+)\s*([KMG]?B?)", part)
        if not m or float(m[1]) <= 0:
            raise argparse.ArgumentTypeError(f"{part!r}: a size like 64KB, 1MB or 1048576")
        out.append(int(float(m[1]) * _UNITS[m[2]]))
    return out


def _pool_size(text: str) -> int | None:
    try:
        return pool_size_of(text)
    except JobError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _microseconds(text: str) -> float:
    """"20.5" (us) -> seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: microseconds, like 20 or 20.5") from None
    if not 0 <= value < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r}: microseconds from 0 to under a second")
    return value * 1e-6


if __name__ == "__main__":
    sys.exit(main())
