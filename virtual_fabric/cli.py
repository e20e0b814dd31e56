"""``ina-sim``: the virtual fabric from the command line.

    ina-sim run --topology single --workers 4 --bw 50 --size 2000000    # one job, its figures
    ina-sim run --seed 17                                               # replay a campaign's seed
    ina-sim campaign --seeds 500 [--seed 0]                             # seeded fault campaign

A campaign prints one line per seed, the replay command of each seed that broke an
invariant, and last ``seeds=N violations=K`` (exit status 1 when K > 0).  Its standard output
depends only on the seeds and the commit; timings go to standard error.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter

import numpy as np

from controller.topology import Topology, fat_tree, leaf_spine, single, tree
from virtual_fabric.campaign import run_seed, run_seeds
from virtual_fabric.fabric import Fabric
from worker.cli import gradient


def _topology(args: argparse.Namespace) -> tuple[Topology, list[str]]:
    fabric_bw = args.fabric_bw or args.bw
    if args.topology == "single":
        spec = single(args.workers)
        for link in spec["links"]:
            link.append({"bw": args.bw})
    elif args.topology == "tree":
        spec = tree(2, args.workers // 2)
        for link in spec["links"]:
            link.append({"bw": args.bw if any(e.startswith("h") for e in link) else fabric_bw})
    elif args.topology == "leaf_spine":
        spec = leaf_spine(2, 2, args.workers // 2, host_bw=args.bw, fabric_bw=fabric_bw)
    elif args.topology == "fat_tree":
        spec = fat_tree(4, host_bw=args.bw, fabric_bw=fabric_bw)
    else:
        topology = Topology.load(args.topology)
        return topology, sorted(topology.hosts)[:args.workers]
    if args.delay:
        for link in spec["links"]:
            link[2]["delay"] = args.delay
    topology = Topology.from_dict(spec)
    return topology, sorted(topology.hosts, key=lambda h: int(h[1:]))[:args.workers]


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
    topology, hosts = _topology(args)
    started = time.perf_counter()
    fabric = Fabric(topology, args.rng, values=args.values)
    arrays = [[gradient(call, rank, args.size, args.dtype) for call in range(args.calls)] for rank in range(len(hosts))]
    job = fabric.create_job("sim", hosts, arrays, timeout=args.timeout, pool_size=args.window, trees=args.trees,
                            mode="ina")
    for c in fabric.all_channels():
        c.faults.loss = args.loss / 100
    built = time.perf_counter()
    fabric.run(args.until)
    wall = time.perf_counter() - built
    spec = job.workers[0].spec
    # the controller's model of the job (its planned trees' rate, the protocol's bytes per value)
    predicted = fabric.controller.plan(hosts, trees=args.trees, mode="ina").seconds_per_mb() * args.size * 4 / 1e6
    print(f"job: {len(hosts)} workers on {args.topology}, {len(spec.trees)} tree(s), V={spec.values}, "
          f"W={spec.pool_size}, {args.size} {args.dtype} values per call")
    for c in range(args.calls):
        ends = [w.records[c].ended for w in job.workers if len(w.records) > c and w.records[c].ended is not None]
        starts = [w.records[c].started for w in job.workers if len(w.records) > c]
        errors = {w.records[c].error for w in job.workers if len(w.records) > c and w.records[c].error}
        if errors or len(ends) < len(hosts):
            print(f"call {c}: failed: {sorted(e for e in errors if e)[:1] or ['unfinished']}")
            continue
        took = max(ends) - min(starts)
        print(f"call {c}: {took * 1e3:.3f} ms virtual (link-rate model: {predicted * 1e3:.3f} ms, "
              f"{took / predicted:.3f}x)")
    results = [w.records[-1].result for w in job.workers if w.records and w.records[-1].result is not None]
    same = all(np.array_equal(results[0], r) for r in results[1:]) if results else False
    print(f"every worker's last sum identical: {same}")
    for line in fabric.report():
        print(line)
    passes = sum(s.passes for s in fabric.switches.values())
    deliveries = sum(c.stats.frames for c in fabric.all_channels())
    print(f"wall {wall:.3f} s (setup {built - started:.3f} s): {passes / wall:,.0f} pipeline passes/s, "
          f"{fabric.loop.events / wall:,.0f} events/s, {deliveries / wall:,.0f} link deliveries/s",
          file=sys.stderr if args.quiet_wall else sys.stdout)
    return 0


def campaign(args: argparse.Namespace) -> int:
    violations = 0
    started = time.perf_counter()
    injected: Counter[str] = Counter()
    for outcome in run_seeds(args.seed, args.seeds, args.processes):
        seed = outcome.scenario.seed
        faults = outcome.scenario.faults
        injected.update(k for k in ("loss", "duplication", "reordering") if k in faults)
        injected.update(kind for kind, _ in outcome.injected)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ina-sim", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one job in the fabric, or a campaign's seed again")
    r.add_argument("--seed", type=int, help="replay this campaign seed (everything else is ignored)")
    r.add_argument("--topology", default="single", help="single, tree, leaf_spine, fat_tree (k=4), or a topology file")
    r.add_argument("--workers", type=int, default=4)
    r.add_argument("--bw", type=float, default=50.0, help="host links, Mb/s")
    r.add_argument("--fabric-bw", type=float, help="links between switches, Mb/s (default: --bw)")
    r.add_argument("--delay", help="every link's propagation delay, e.g. 50us")
    r.add_argument("--loss", type=float, default=0.0, help="%% of frames lost on every link")
    r.add_argument("--size", type=int, default=1 << 20, help="values per call")
    r.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "int32"])
    r.add_argument("--calls", type=int, default=1)
    r.add_argument("--values", type=int, help="values per packet (default: the most the program takes)")
    r.add_argument("--window", type=int, default=64, help="the job's pool size (slots per switch)")
    r.add_argument("--trees", default="auto")
    r.add_argument("--timeout", type=float, default=10.0)
    r.add_argument("--until", type=float, default=3600.0, help="virtual seconds at most")
    r.add_argument("--rng", type=int, default=0, help="the run's seed (loss draws)")
    r.add_argument("--quiet-wall", action="store_true", help="wall-clock figures to standard error")
    c = sub.add_parser("campaign", help="N seeded runs with faults, checked against the invariants")
    c.add_argument("--seeds", type=int, default=100)
    c.add_argument("--seed", type=int, default=0, help="the first seed")
    c.add_argument("--processes", type=int, help="seeds run at once (default: one per CPU); the output is the same")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the controller's warnings are the run's, not the user's
    if args.command == "run" and args.trees != "auto":
        args.trees = int(args.trees)
    return run(args) if args.command == "run" else campaign(args)


if __name__ == "__main__":
    sys.exit(main())
