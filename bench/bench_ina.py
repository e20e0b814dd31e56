"""Aggregated packets per second of the aggregation programs on the built-in target, in-process
(one core): p4src/ina.p4 (v1model) at V = 64 and 256, p4src/tofino/ina_tna.p4 (TNA) at V = 64.

Two workers on one root switch sum chunks round after round (window of 32 slots), so every
packet does the full slot work: round check, bitmap pair, V lanes read-add-write, and every
second packet completes a slot and is multicast.  The TNA program also pays for its passes
(a contribution three ingress passes, a completion five: p4src/tofino/README.md), which the
built-in target runs one after the other.  Each case runs for ``--seconds`` of
processing (fresh rounds all along, built outside the timed part) and prints its rate and
the gradient bytes/s it implies (4 bytes per value per packet); medians over ``--runs``.

The switch runs the native fast path (the default); ``--python`` adds the Python executor
(``P4TARGET_NATIVE=0``) as a column, and ``--against REV`` the same benchmark from a
worktree of commit REV: old and new side by side, alternated run by run, each in its own
process; those two also plot the sides to bench/results/target-speed.png (``--publish``:
and copy it to docs/figures/).  Through real veth ports: bench/bench_veth_ina.py.

``--batch`` times ina.p4's native pipeline alone instead: each chunk of frames goes through the C in
one call (p4t_process_batch), so it prints CPU microseconds per packet with no Python per packet.

    python -m bench.bench_ina [--runs 5] [--seconds 2] [--against 3193974] [--python] [--publish]
    python -m bench.bench_ina --batch [--runs 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import time
from pathlib import Path

import numpy as np
from scapy.all import IP, UDP, Ether, raw

from controller.programs import TNA, V1MODEL, Program
from p4target.executor.native.engine import FrameBatch
from p4target.executor.switch import Switch
from p4target.executor.tables import exact
from p4target.executor.tna_switch import TnaSwitch, load_switch
from worker import protocol

from .common import RESULTS, add_publish_argument, publish, save_figure
from .compare import REPO, run_module, worktree

JOB, GROUP, WINDOW = 7, 5, 32
CASES = ((V1MODEL, 64), (TNA, 64), (V1MODEL, 256))
BATCH_VALUES = (64, 256)  # --batch: ina.p4's native pipeline alone
CHUNK = 5000  # rounds built at a time, outside the timed part
FIGURE = RESULTS / "target-speed.png"  # --publish copies it to docs/figures/
LINE = re.compile(r"^(\w+) V=(\d+): median ([\d,]+) aggregated pps", re.M)


def root_switch(program: Program, values: int) -> Switch | TnaSwitch:
    sw = load_switch(program.source, {"INA_VALUES": str(values)})
    for child in (0, 1):
        sw.tables[program.jobs].add([exact(child + 1), exact(JOB), exact(child)], program.member,
                                    [0, WINDOW, 2, 1, GROUP, 0, 0, 1, 0])
        sw.tables[program.receivers].add([exact(JOB), exact(child)], program.address,
                                         [0x020000000010 + child, 0x0200000000FE, 0x0A000001 + child,
                                          0x0A0000FE, 40000])
    sw.set_multicast_group(GROUP, [(1, 0), (2, 1)])
    return sw


def ina_headers(P: protocol.Protocol, n: int, **fields: np.ndarray) -> np.ndarray:
    """n ina_t headers (n x header_bytes) from columns of field values, laid out as P.layout says."""
    if P.header_bytes != 16:
        raise RuntimeError("this benchmark builds 16-byte headers")
    halves = [np.zeros(n, np.uint64), np.zeros(n, np.uint64)]  # high, low 64 bits
    for name, column in fields.items():
        shift, width, _ = P.layout[name]
        v = (column.astype(np.int64) & ((1 << width) - 1)).astype(np.uint64)
        for half, base in ((0, 64), (1, 0)):
            s = shift - base
            if -width < s < 64:
                halves[half] |= v << np.uint64(s) if s >= 0 else v >> np.uint64(-s)
    return np.concatenate([h.astype(">u8").view(np.uint8).reshape(n, 8) for h in halves], axis=1)


def frames(values: int, first: int, rounds: int) -> list[tuple[int, bytes]]:
    """Rounds first .. first + rounds - 1, each a contribution of child 0 then child 1."""
    P = protocol.load(values)
    rng = np.random.default_rng(first)
    seq = np.repeat(np.arange(first, first + rounds, dtype=np.int64), 2)
    child = np.tile(np.arange(2, dtype=np.int64), rounds)
    n = len(seq)
    heads = ina_headers(P, n, msg_type=np.full(n, P.MSG_DATA), job_id=np.full(n, JOB), child=child,
                        slot=seq % WINDOW, set=(seq // WINDOW) % 2, seq=seq)
    vals = rng.integers(-1000, 1000, (n, values), dtype=np.int32).astype(">i4").view(np.uint8).reshape(n, -1)
    prefixes = np.array([list(raw(Ether() / IP(src=f"10.0.0.{c + 1}", dst="10.0.0.254", len=28 + P.packet_bytes)
                                  / UDP(sport=40000, dport=P.INA_UDP_PORT, len=8 + P.packet_bytes)))
                         for c in (0, 1)], dtype=np.uint8)
    rows = np.concatenate([prefixes[child], heads, vals], axis=1)
    return [(int(c) + 1, row.tobytes()) for c, row in zip(child, rows)]


def measure(program: Program, values: int, seconds: float) -> float:
    """Aggregated packets per second over at least ``seconds`` of processing."""
    sw = root_switch(program, values)
    process = sw.process
    done, elapsed, first = 0, 0.0, 1
    while elapsed < seconds:
        work = frames(values, first, CHUNK)
        first += CHUNK
        start = time.perf_counter()
        results = sum(len(process(port, data)) for port, data in work)
        elapsed += time.perf_counter() - start
        assert results == len(work), f"expected one result copy per packet sent, got {results}/{len(work)}"
        done += len(work)
    return done / elapsed


def measure_batch(values: int, seconds: float) -> float:
    """ina.p4's native pipeline alone, packets per CPU-second of the thread that runs it: each chunk of
    frames goes in one C call (p4t_process_batch), so no Python or ctypes cost per packet is counted,
    and CPU time, not wall time, so other jobs on a busy machine count less (they still share caches)."""
    sw = root_switch(V1MODEL, values)
    if sw.native is None:
        raise SystemExit(f"--batch needs the native path: {sw.native_status}")
    done, elapsed, first = 0, 0.0, 1
    while elapsed < seconds:
        batch = FrameBatch.pack(frames(values, first, CHUNK))
        first += CHUNK
        start = time.thread_time()
        results = sw.native.process_batch(batch)
        elapsed += time.thread_time() - start
        assert results == len(batch), f"expected one result copy per packet sent, got {results}/{len(batch)}"
        done += len(batch)
    return done / elapsed


def batch_main(args: argparse.Namespace) -> None:
    rates: dict[int, list[float]] = {v: [] for v in BATCH_VALUES}
    for run in range(args.runs):
        for values in BATCH_VALUES:
            rates[values].append(measure_batch(values, args.seconds))
            print(f"  native pipeline V={values} run {run + 1}/{args.runs}: {rates[values][-1]:,.0f} pps", flush=True)
    for values, r in rates.items():
        med = statistics.median(r)
        print(f"v1model V={values} native pipeline alone: {1e6 / med:.2f} CPU us/packet, median {med:,.0f} pps "
              f"({min(r):,.0f}-{max(r):,.0f})")


def report(rates: dict[tuple[str, int], list[float]]) -> None:
    for (arch, values), r in rates.items():
        med = statistics.median(r)
        print(f"{arch} V={values}: median {med:,.0f} aggregated pps = {med * values * 4 / 1e6:,.1f} MB/s of "
              f"int32 gradient in ({min(r):,.0f}-{max(r):,.0f})")


def side_by_side(args: argparse.Namespace) -> None:
    """Each side in its own process, alternated run by run; medians per side and case."""
    sides: dict[str, dict[tuple[str, int], list[float]]] = {}
    with worktree(args.against) if args.against else contextlib.nullcontext() as old:
        plan = ([(f"old ({args.against})", old, {})] if old else []) \
            + ([("new, Python executor", REPO, {"P4TARGET_NATIVE": "0"})] if args.python else []) \
            + [("new, native", REPO, {})]
        for run in range(args.runs):
            for name, root, env in plan:
                out = _run_side(root, env, args.seconds)
                for arch, values, pps in LINE.findall(out):
                    sides.setdefault(name, {}).setdefault((arch, int(values)), []).append(float(pps.replace(",", "")))
                print(f"  run {run + 1}/{args.runs} {name}: " + ", ".join(
                    f"{a} V={v} {r[-1]:,.0f}" for (a, v), r in sides[name].items()), flush=True)
    names = list(sides)
    print(f"\n{'case':<14}" + "".join(f"{n:>24}" for n in names) + "   new / first")
    for arch, values in ((p.arch, v) for p, v in CASES):
        meds = [statistics.median(sides[n][arch, values]) for n in names]
        print(f"{arch + ' V=' + str(values):<14}" + "".join(f"{m:>20,.0f} pps" for m in meds)
              + f"   {meds[-1] / meds[0]:.1f}x")
    plot(sides, args)


def _run_side(root: Path, env: dict[str, str], seconds: float) -> str:
    """One run of one side; an older bench_ina takes no --seconds: it gets only --runs."""
    extra = ["--seconds", str(seconds)] if root == REPO else []
    return run_module(root, "bench.bench_ina", ["--runs", "1", *extra], env)


def plot(sides: dict[str, dict[tuple[str, int], list[float]]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [(p.arch, v) for p, v in CASES]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.8 / len(sides)
    for i, (name, rates) in enumerate(sides.items()):
        meds = [statistics.median(rates[c]) for c in cases]
        bars = ax.bar([k + i * width for k in range(len(cases))], meds, width, label=name)
        ax.bar_label(bars, [f"{m / 1000:,.0f}k" for m in meds], fontsize=8)
    ax.set_xticks([k + width * (len(sides) - 1) / 2 for k in range(len(cases))])
    ax.set_xticklabels([f"{'ina.p4' if a == 'v1model' else 'ina_tna.p4'}\nV = {v}" for a, v in cases])
    ax.set_yscale("log")
    top = max(statistics.median(r) for rates in sides.values() for r in rates.values())
    ax.set_ylim(top=top * 8)
    ax.set_ylabel("aggregated packets/s, one core (log)")
    ax.set_title(f"The built-in target on the aggregation programs, in-process (median of {args.runs} runs)")
    ax.legend(fontsize=8, loc="upper left", ncol=len(sides))
    publish(save_figure(fig, FIGURE), args.publish)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="processing time per case and run")
    ap.add_argument("--against", metavar="REV", help="also run this commit's bench_ina, side by side")
    ap.add_argument("--python", action="store_true", help="also run the Python executor (P4TARGET_NATIVE=0)")
    add_publish_argument(ap)
    ap.add_argument("--batch", action="store_true",
                    help="time ina.p4's native pipeline alone (one C call per chunk of frames), V = 64 and 256")
    args = ap.parse_args()
    if args.batch:
        batch_main(args)
        return
    if args.against or args.python:
        side_by_side(args)
        return
    rates: dict[tuple[str, int], list[float]] = {(p.arch, v): [] for p, v in CASES}
    for run in range(args.runs):
        for program, values in CASES:
            rates[program.arch, values].append(measure(program, values, args.seconds))
            print(f"  {program.arch} V={values} run {run + 1}/{args.runs}: "
                  f"{rates[program.arch, values][-1]:,.0f} pps", flush=True)
    report(rates)


if __name__ == "__main__":
    main()
