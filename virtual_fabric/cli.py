"""``ina-sim``: the virtual fabric from the command line.

    ina-sim run --topology single --workers 4 --bw 50 --size 2000000    # one job, its figures
    ina-sim run --topology fat_tree:16 --bw 100000 --delay 1us --size 262144 --window 512 [--json]
    ina-sim run --topology fat_tree:8 --bw 100000 --workers 64 --host-cost measured   # hosts whose CPU costs time
    ina-sim run --seed 17                                               # replay a campaign's seed
    ina-sim campaign --seeds 500 [--seed 0]                             # seeded fault campaign
    ina-sim direct --workers 16 --interfaces 3 --gbps 100 --devices 3 --ports 8 --size 4194304   # a direct plan
    ina-sim rails --nodes 128 --rails 8 --per-leaf 32 --spines 32 --gbps 100 --size 8MB   # multi-GPU nodes, rails

A campaign prints one line per seed, the replay command of each seed that broke an
invariant, and last ``seeds=N violations=K`` (exit status 1 when K > 0).  Its standard output
depends only on the seeds and the commit; timings go to standard error.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from controller.direct import DirectCluster, DirectError
from controller.job_plan import JobError, method_lines, pool_size_of
from controller.topology import delay_seconds
from virtual_fabric import direct, host_cost, host_latency, rails, runs
from virtual_fabric.campaign import run_seed, run_seeds
from virtual_fabric.runs import RunConfig
from worker.ring_layout import LAYOUTS
from worker.tuner import MODES


def _fault(text: str) -> tuple[str, float]:
    """"core1@50us" or "root@0.0001": a switch (or the first tree's root) and when it dies."""
    name, at, when = text.partition("@")
    if not at or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: a fault is SWITCH@TIME, like core1@50us or root@50us")
    try:
        return name, delay_seconds(when if when[-1].isalpha() else float(when) * 1e3)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _window(text: str) -> int | None:
    try:
        return pool_size_of(text)
    except JobError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _host_cost(text: str) -> str:
    """--host-cost's text, checked now (the run reads it again)."""
    try:
        host_cost.parse(text)
    except (ValueError, OSError, KeyError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def show(result: dict, as_json: bool, summary: Callable[[dict], list[str]]) -> None:
    """A run's result as JSON, or its summary's lines."""
    print(json.dumps(result, indent=1) if as_json else "\n".join(summary(result)))


def run(args: argparse.Namespace) -> int:
    if args.seed is not None:
        outcome = run_seed(args.seed)
        print(f"seed {args.seed}: {outcome.scenario.describe()}")
        print(f"injected: {'; '.join(what for _, what in outcome.injected) or 'nothing'}")
        print(f"calls completed {outcome.completed}, failed {outcome.failed}; virtual {outcome.virtual:.6f} s, "
              f"{outcome.events} events, {outcome.passes} pipeline passes")
        for v in outcome.violations:
            print(f"VIOLATION {v}")
        return 1 if outcome.violations else 0
    config = config_of(args)
    try:
        if args.dry_run:
            for line in dry_run(config):
                print(line)
            return 0
        result = runs.run(config)
    except (ValueError, OSError) as e:  # a bad topology, host count, option or fault: said by name
        print(f"ina-sim: {e}", file=sys.stderr)
        return 2
    show(result, args.json, runs.summary)
    failed = any(c["error"] for c in result["calls"])
    check = result["check"]
    return 1 if failed or (check and not (check["within_bound"] and check["identical"])) else 0


def config_of(args: argparse.Namespace) -> RunConfig:
    """`run`'s options as a run's config."""
    return RunConfig(
        topology=args.topology, workers=args.workers, bw=args.bw, fabric_bw=args.fabric_bw, delay=args.delay,
        size=args.size, dtype=args.dtype, calls=args.calls, values=args.values, pool_size=args.window,
        trees=int(args.trees) if args.trees != "auto" else "auto", mode=args.mode, alpha=args.alpha,
        ring_layout=args.ring_layout, agg_rate=args.agg_rate, loss=args.loss, fail=args.fail,
        restart=args.restart, cut=args.cut, timeout=args.timeout, until=args.until, seed=args.rng,
        watch_interval=args.watch_interval, check=not args.no_check, host_cost=args.host_cost,
        host_cores=args.host_cores, lanes=int(args.lanes) if args.lanes != "auto" else "auto")


def dry_run(config: RunConfig) -> list[str]:
    """How each call would run and what the model predicts for it, without running anything."""
    planned, choices = runs.expected(config)
    nbytes = config.size * np.dtype(config.dtype).itemsize
    lines = [f"{len(planned.tree_plan.members)} workers, {len(planned.tree_plan.trees)} tree(s), mode {planned.mode}, "
             f"window {planned.pool_size}{' (auto)' if planned.auto_window else ''}, "
             f"ring layouts {', '.join(x.name for x in planned.layouts)}"]
    for i, choice in enumerate(choices):
        lines.append(f"call {i}: {choice.describe()}")
        opening = i == 0  # later calls: the window open once the trees have carried a call
        options = planned.options(nbytes, config.dtype, opening)
        lines += ["  " + line for line in method_lines({m: vars(c) for m, c in options.items()}, choice.method)]
    return lines


def campaign(args: argparse.Namespace) -> int:
    violations = 0
    started = time.perf_counter()
    injected: Counter[str] = Counter()
    for outcome in run_seeds(args.seed, args.seeds, args.processes):
        seed = outcome.scenario.seed
        injected.update(list(outcome.scenario.faults))
        mark = "ok" if not outcome.violations else f"VIOLATIONS {len(outcome.violations)}"
        moments = "; ".join(what for _, what in outcome.injected) or "-"
        print(f"seed {seed}: {mark}; {outcome.scenario.describe()}; injected: {moments}; "
              f"calls {outcome.completed} done, {outcome.failed} failed; virtual {outcome.virtual:.6f} s", flush=True)
        for v in outcome.violations:
            print(f"  {v}")
        if outcome.violations:
            violations += 1
            print(f"  replay: ina-sim run --seed {seed}")
    wall = time.perf_counter() - started
    print(f"{args.seeds} seeds in {wall:.1f} s of wall time: {args.seeds / wall:.2f} seeds/s", file=sys.stderr)
    print("faults injected: " + ", ".join(f"{kind} {n}" for kind, n in sorted(injected.items())))
    print(f"seeds={args.seeds} violations={violations}")
    return 1 if violations else 0


def direct_cluster(args: argparse.Namespace) -> DirectCluster:
    """`direct`'s cluster: the file's, or the options'."""
    if args.cluster:
        return DirectCluster.load(args.cluster)
    missing = [f"--{name}" for name in ("workers", "interfaces", "gbps") if getattr(args, name) is None]
    if missing:
        raise DirectError(f"{', '.join(missing)} (or --cluster FILE) needed")
    return DirectCluster(args.workers, args.interfaces, args.gbps, args.devices, args.ports, args.device_gbps,
                         delay_seconds(args.hop_latency), nic_streaming=args.nic_streaming)


def run_direct(args: argparse.Namespace) -> int:
    try:
        cluster = direct_cluster(args)
        if args.size % direct.DTYPE.itemsize:
            raise DirectError(f"--size {args.size}: a whole number of float32 values (a multiple of 4 bytes)")
        kinds = args.kinds.split(",") if args.kinds else None
        parts = args.parts.split(",") if args.parts else None
        result = direct.run(cluster, args.size, kinds, args.calls, args.rng, args.until, parts)
    except (ValueError, OSError) as e:  # a bad cluster, size or kind, a part the fabric cannot run: by name
        print(f"ina-sim: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        if args.cluster and abs(cluster.host_latency - host_latency.MEAN) > 1e-12:
            print(f"note: host latency {cluster.host_latency * 1e6:g} us replaced by the fabric's hosts' "
                  f"{host_latency.MEAN * 1e6:g} us (the plan is made with it)")
        for line in direct.summary(result):
            print(line)
    check = result["check"]
    failed = result["errors"] or any(c["seconds"] is None for c in result["call_figures"])
    return 1 if failed or not (check["within_bound"] and check["identical"]) else 0


def _bytes(text: str) -> int:
    """"8MB", "512KB" or "1048576" -> bytes (KB, MB, GB: powers of two, as tensors are sized)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", text.strip().upper())
    if not m or float(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size like 8MB, 512KB or 1048576")
    return int(float(m[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m[2]])


def run_rails(args: argparse.Namespace) -> int:
    config = rails.RailsConfig(args.nodes, args.rails, args.per_leaf, args.spines, args.gbps, args.fabric_gbps,
                               args.node_gbps, args.size, args.window, args.delay, args.calls, args.name, args.rng,
                               args.timeout, args.until)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        if args.delay:
            delay_seconds(args.delay)
        result = rails.run(config, progress)
    except (ValueError, OSError) as e:  # a bad fabric, size or delay, a job the controller refused: by name
        print(f"ina-sim: {e}", file=sys.stderr)
        return 2
    show(result, args.json, rails.summary)
    check = result["check"]
    failed = result["errors"] or any(c["seconds"] is None for c in result["calls"])
    return 1 if failed or not (check["within_bound"] and check["identical"]) else 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ina-sim", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="one job in the fabric, or a campaign's seed again")
    _run_fabric_options(run_parser)
    _run_fault_and_host_options(run_parser)
    _direct_options(sub.add_parser("direct", help="a direct-connect cluster's plan (controller.direct), every part "
                                                  "at once"))
    _rails_options(sub.add_parser("rails", help="multi-GPU nodes on a rail-optimised fabric: a hierarchical "
                                                "allreduce, every rail's job at once (issue 44)"))
    campaign_parser = sub.add_parser("campaign", help="N seeded runs with faults, checked against the invariants")
    campaign_parser.add_argument("--seeds", type=int, default=100)
    campaign_parser.add_argument("--seed", type=int, default=0, help="the first seed")
    campaign_parser.add_argument("--processes", type=int,
                                 help="seeds run at once (default: one per CPU); the output is the same")
    return ap


def _run_fabric_options(ap: argparse.ArgumentParser) -> None:
    """`run`: the fabric, the job and its calls."""
    ap.add_argument("--seed", type=int, help="replay this campaign seed (everything else is ignored)")
    ap.add_argument("--topology", default="single",
                    help="a builder (fat_tree:16, leaf_spine:2,4,8, single:4, tree:2,4, rails:NODES,RAILS,PER_LEAF,"
                         "SPINES, servers:WORKERS,SERVERS,CORES[,SWITCHES] (spare servers aggregate, docs/servers.md); "
                         "bare single, tree, leaf_spine "
                         "size themselves to --workers, bare fat_tree is k=4) or a topology file")
    ap.add_argument("--workers", type=int, help="the first N hosts (default: every host; 4 for a bare builder)")
    ap.add_argument("--bw", type=float, default=50.0, help="host links, Mb/s")
    ap.add_argument("--fabric-bw", type=float, help="links between switches, Mb/s (default: --bw)")
    ap.add_argument("--delay", help="every link's propagation delay, e.g. 50us")
    ap.add_argument("--loss", type=float, default=0.0, help="%% of frames lost on every link")
    ap.add_argument("--size", type=int, default=1 << 20, help="values per call")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "int32"])
    ap.add_argument("--calls", type=int, default=1)
    ap.add_argument("--values", type=int, help="values per packet (default: the most the program takes)")
    ap.add_argument("--window", type=_window, default=None, metavar="N|auto",
                    help="the job's pool size (slots per tree and switch; default auto: what its trees' "
                         "bandwidth-delay product needs, controller.windows)")
    ap.add_argument("--trees", default="auto", help="auto (as many as the planner packs) or at most N")
    ap.add_argument("--mode", default="ina", choices=MODES,
                    help="auto: the fastest for each call, as the model predicts; ring and a hybrid's ring part run "
                         "at flow level (docs/fabric.md)")
    ap.add_argument("--alpha", type=float, help="a hybrid's share through the switches (default: the model's)")
    ap.add_argument("--ring-layout", choices=LAYOUTS,
                    help="the ring's layout (default: the model's choice per call; flat is gloo's ring)")
    ap.add_argument("--agg-rate", type=float, help="every switch of the job sums this fraction of the link rate "
                                                   "per child (C = fraction x L; sets the switches' agg_pps)")


def _run_fault_and_host_options(ap: argparse.ArgumentParser) -> None:
    """`run`: faults on the way, the hosts' costs, checks and output."""
    ap.add_argument("--fail", type=_fault, action="append", default=[],
                    help="SWITCH@TIME: the switch dies then (root: the first tree's root), e.g. root@40us")
    ap.add_argument("--restart", type=_fault, action="append", default=[],
                    help="SWITCH@TIME: the switch boots again then (empty, as a restarted process), e.g. root@4ms")
    ap.add_argument("--cut", type=_fault, action="append", default=[],
                    help="PORT@TIME: the link at this switch port loses carrier then (uplink: the first tree's "
                         "first uplink), e.g. agg1-p5@40us")
    ap.add_argument("--watch-interval", type=float, default=0.5, help="the controller's watch period, virtual s")
    ap.add_argument("--host-cost", type=_host_cost, default="none",
                    help="what each datagram costs a host's one CPU, sent and received: none (hosts take no time), "
                         "measured (virtual_fabric/host_cost.json, from `python -m bench.host_cost`), US each way, or "
                         "SEND/RECEIVE in us (0.4/0.6); the model's prediction takes the same cost")
    ap.add_argument("--host-cores", type=int, default=1,
                    help="CPUs per host (default 1): a host's trees take them in turn, as the worker's threads do")
    ap.add_argument("--lanes", default="1",
                    help="each planned tree installed as N trees on its switches (a socket and a core each at a "
                         "host), or auto: a core per lane at the tree's rate, by --host-cost (default 1)")
    ap.add_argument("--no-check", action="store_true", help="skip comparing results with the exact sum")
    ap.add_argument("--dry-run", action="store_true", help="print how each call would run and the model's "
                                                           "predictions, without running")
    ap.add_argument("--json", action="store_true", help="every figure as JSON")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--until", type=float, default=3600.0, help="virtual seconds at most")
    ap.add_argument("--rng", type=int, default=0, help="the run's seed (loss draws)")


def _direct_options(ap: argparse.ArgumentParser) -> None:
    """`direct`: a direct-connect cluster, by file or by its sizes."""
    ap.add_argument("--cluster", help="the cluster as a JSON file (DirectCluster.from_dict's format) instead of the "
                                      "options below")
    ap.add_argument("--workers", type=int, help="N workers")
    ap.add_argument("--interfaces", type=int, help="D interfaces per worker")
    ap.add_argument("--gbps", type=float, help="L: each interface's rate each way, Gbit/s")
    ap.add_argument("--devices", type=int, default=0, help="M aggregation devices (default 0)")
    ap.add_argument("--ports", type=int, default=4, help="E ports per device (default 4)")
    ap.add_argument("--device-gbps", type=float, help="A: what a device sums, Gbit/s per port (default: L)")
    ap.add_argument("--hop-latency", default="1us", help="one circuit's propagation delay (default 1us)")
    ap.add_argument("--nic-streaming", action="store_true",
                    help="the workers' NICs sum as data passes (NIC meshes; each NIC runs p4src/nic.p4)")
    ap.add_argument("--size", type=int, required=True, help="bytes of float32 per worker and call")
    ap.add_argument("--kinds", help="the shapes the planner may use, e.g. tree,ring (default: every shape; the "
                                    "fabric runs trees and rings)")
    ap.add_argument("--parts", help="exactly these parts instead of the planner's choice, e.g. tree,ring (shares "
                                    "that end them together)")
    ap.add_argument("--calls", type=int, default=2, help="calls, each started on every part at once (default 2)")
    ap.add_argument("--until", type=float, default=60.0, help="virtual seconds at most")
    ap.add_argument("--rng", type=int, default=0, help="the run's seed")
    ap.add_argument("--json", action="store_true", help="every figure as JSON")


def _rails_options(ap: argparse.ArgumentParser) -> None:
    """`rails`: multi-GPU nodes on a rail-optimised fabric."""
    ap.add_argument("--nodes", type=int, default=128, help="nodes (machines), default 128")
    ap.add_argument("--rails", type=int, default=8, help="GPUs and NICs per node, so rails (default 8)")
    ap.add_argument("--per-leaf", type=int, default=32, help="nodes under one leaf of a rail (default 32)")
    ap.add_argument("--spines", type=int, default=32, help="spines, each linked to every leaf (default 32)")
    ap.add_argument("--gbps", type=float, default=100.0, help="each NIC's link, Gbit/s each way (default 100)")
    ap.add_argument("--fabric-gbps", type=float, help="leaf-spine links, Gbit/s (default: --gbps)")
    ap.add_argument("--node-gbps", type=float, default=rails.NVLINK_GBPS,
                    help=f"in-node rate per GPU each way, Gbit/s, for the reduce-scatter and all-gather (default "
                         f"{rails.NVLINK_GBPS:g}: H100 NVLink 4, docs/fabric.md)")
    ap.add_argument("--size", type=_bytes, default=8 << 20, help="float32 bytes per rank (GPU) and call (default 8MB)")
    ap.add_argument("--window", type=int, default=64, help="each rail job's pool size (slots per tree and switch)")
    ap.add_argument("--delay", default="1us", help="every link's propagation delay (default 1us)")
    ap.add_argument("--calls", type=int, default=2, help="hierarchical calls, each on every node at once (default 2)")
    ap.add_argument("--name", default="grad", help="rail i's job is NAME-rail<i> (default grad)")
    ap.add_argument("--timeout", type=float, default=3.0, help="a worker's seconds without progress")
    ap.add_argument("--until", type=float, default=60.0, help="virtual seconds at most")
    ap.add_argument("--rng", type=int, default=0, help="the run's seed (every gradient, the fabric's streams)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    ap.add_argument("--json", action="store_true", help="every figure as JSON")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the controller's warnings are the run's, not the user's
    commands = {"run": run, "direct": run_direct, "rails": run_rails, "campaign": campaign}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
