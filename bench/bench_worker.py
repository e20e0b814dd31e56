"""MB/s of the worker's datapath against an ideal switch: one worker, several at once, old and new side by side.

Why: on a Tofino the switch aggregates at line rate, so the worker is what a job's speed
depends on.  This measures the worker alone: a one-member job against a switch that answers
every contribution at once with its own payload as the result (``bench/ideal_switch.c``:
recvmmsg and sendmmsg in C, in a process of its own, so it is never the limit), on loopback.

How: for each V (values per packet), window W (the job's pool) and call size, a worker process
(``bench/worker_runner.py``, with the measured checkout first on its path) makes a checked
warm-up call and ``--calls`` timed calls of float32 (``--call allreduce_``, in place, as
DDP's buckets are reduced, by default; ``--call allreduce`` returns a new array each time, whose
fresh pages the worker's CPU pays for too).  It reports wall and CPU seconds (user +
system, all threads) of the timed calls and the packets it sent; ``perf stat`` counts its
syscalls meanwhile where perf is installed.  Printed per configuration, median over ``--runs``:
MB/s of float32 per wall-second and per CPU-second of the worker, packets/s, syscalls per packet.
``--workers 1,2`` also runs that many workers at once (each its own job on the one ideal
switch), to show how the figure scales with processes on this machine's cores.  ``--against
REV`` measures the worker of commit REV too (a worktree), run by run in alternation.

Sides: each runs in its own process, alternated with the others run by run against the one ideal
switch, with the same V, W and MB.  Besides this checkout's worker ("new") and ``--against``'s ("old
REV"): ``--new-env KEY=VALUE`` runs this checkout's worker again with that variable set, as a side
of its own ("new (KEY=VALUE)"; the option repeats, one side each), e.g. ``--new-env INA_NATIVE=0``;
``--plain`` runs the plain C loop (``bench/plain_loop.c`` in ``bench/plain_runner.py``: the same
socket, UDP GSO and GRO, window and packet size, and a copy in and out of the values, but no
protocol; issue 42), "plain C", with a column new / plain of MB/s per CPU-second.  ``--threads
1,2`` gives the worker that many datapath threads (``Worker(threads=N)``, in checkouts whose
``Worker`` takes it: others run only 1), one configuration each; the plain loop is one thread and
runs in the configurations of 1.

    python -m bench.bench_worker [--values 64,256] [--windows 64,256,512] [--mb 1,64] [--runs 3]
                                 [--workers 1,2] [--threads 1] [--call allreduce_] [--against REV]
                                 [--new-env KEY=VALUE ...] [--plain]
                                 [--bound-windows 1,2] [--bound-mb 2] [--bound-only]

Window-bound calls first (``--bound-windows``, issue 32): W = 1 and 2 at V = 256, unpaced and paced at
the rate the unpaced call measured (what calibration gives a one-slot job), each printed beside its
prediction (W packets per round trip; paced at its own rate, the unpaced rate) with the loop's polls
and the syscalls (perf) per packet; a ratio below 0.85 is flagged.  One worker on loopback leaves the
ideal switch a core, so a spinning loop shows in its syscalls more than in its rate: in Mininet four
spinning workers starved the switch.

Writes bench/results/worker.csv, worker-bound.csv and worker.png (``--publish``: also docs/figures/worker.png).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .common import RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from .compare import REPO, python_env, worktree

FIGURE = RESULTS / "worker.png"  # --publish copies it to docs/figures/
RUNNER = Path(__file__).resolve().parent / "worker_runner.py"
PLAIN_RUNNER = Path(__file__).resolve().parent / "plain_runner.py"
PLAIN = "plain C"  # the plain loop's side
SWITCH_IP, WORKER_IP = "127.0.0.2", "127.0.0.1"
BOUND_VALUES = 256  # the window-bound calls' V: bench_hybrid's


def _serve(port: int, type_offset: int, result_type: int) -> None:
    from p4target.cbuild import build

    lib = build((Path(__file__).resolve().parent / "ideal_switch.c").read_text())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.bind((SWITCH_IP, port))
    lib.ideal_switch(sock.fileno(), type_offset, result_type)


@contextlib.contextmanager
def ideal_switch(values: int) -> Iterator[int]:
    """The ideal switch's process, listening on the protocol's port; yields its pid."""
    from worker import protocol

    P = protocol.load(values)
    shift, width, _ = P.layout["msg_type"]
    if width != 8 or (P.header_bytes * 8 - shift - width) % 8:
        raise RuntimeError("msg_type is not a whole byte: the ideal switch rewrites it as one")
    offset = (P.header_bytes * 8 - shift - width) // 8
    proc = multiprocessing.get_context("spawn").Process(target=_serve, args=(P.INA_UDP_PORT, offset, P.MSG_RESULT),
                                                        daemon=True)
    proc.start()
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.join()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((WORKER_IP, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Side:
    """What one side runs: a checkout's worker (``worker_runner.py`` with ``root`` first on the path and ``env``
    added to the environment), or the plain C loop (``plain_runner.py``, from this checkout)."""

    label: str
    root: Path
    runner: Path = RUNNER
    env: tuple[tuple[str, str], ...] = ()

    @property
    def plain(self) -> bool:
        return self.runner == PLAIN_RUNNER


def sides(args: argparse.Namespace, old: Path | None, plain: bool = True) -> list[Side]:
    """The sides to alternate: old (``--against``), new, new with each ``--new-env``, and the plain loop
    (``--plain``, unless ``plain`` is False)."""
    out = [Side(f"old {args.against}", old)] if old else []
    out.append(Side("new", REPO))
    out += [Side(f"new ({key}={value})", REPO, env=((key, value),)) for key, value in args.new_env]
    if plain and args.plain:
        out.append(Side(PLAIN, REPO, PLAIN_RUNNER))
    return out


@dataclass
class Result:
    side: str
    values: int
    window: int
    mb: float
    workers: int
    threads: int
    run: int
    wall_mbps: float  # per worker: MB of float32 per wall-second
    cpu_mbps: float  # per worker: MB per CPU-second of its process
    pps: float  # per worker
    syscalls_per_packet: float | None
    threads_cpu: str = ""  # the worker's CPU seconds by thread (name=s;...), where its runner reports them


def run_workers(side: Side, tmp: Path, values: int, window: int, mb: float, workers: int, calls: int,
                call: str, pace_mbps: float | None = None, threads: int = 1) -> list[dict]:
    """``workers`` runner processes of ``side`` at once; each one's report, with its syscalls where perf counts
    them."""
    procs = []
    for i in range(workers):
        job = ["--values", str(values), "--job-id", str(1 + i), "--port", str(free_udp_port()),
               "--worker-ip", WORKER_IP, "--switch-ip", SWITCH_IP] + (["--pace", str(pace_mbps)] if pace_mbps else [])
        procs.append(subprocess.Popen([sys.executable, str(side.runner), *job, "--mb", str(mb), "--calls", str(calls),
                                       "--window", str(window), "--call", call, "--threads", str(threads)],
                                      cwd=side.root, env=python_env(side.root, dict(side.env)), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    perfs = []
    try:
        for p in procs:
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a {side.label} runner did not start: {line}{p.stderr.read()[-2000:]}")
        for p in procs:
            perfs.append(_perf(p.pid))
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = [json.loads(p.stdout.readline()) for p in procs]
    finally:
        counts = [_perf_count(perf) for perf in perfs]
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    for report, count in zip(reports, counts + [None] * (len(reports) - len(counts))):
        if "error" in report:
            raise RuntimeError(report["error"])
        report["syscalls"] = count
    return reports


def _perf(pid: int) -> subprocess.Popen | None:
    if shutil.which("perf") is None:
        return None
    return subprocess.Popen(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _perf_count(perf: subprocess.Popen | None) -> int | None:
    if perf is None:
        return None
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=10)
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("raw_syscalls") and fields[0].isdigit():
            return int(fields[0])
    return None


def measure(args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
    configs = [(v, w, mb, 1, t) for t in args.threads for v in args.values for w in args.windows for mb in args.mb]
    configs += [(v, max(args.windows), max(args.mb), k, t) for t in args.threads for v in args.values
                for k in args.workers if k > 1]
    with worktree(args.against) if args.against else contextlib.nullcontext() as old, \
            tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp:
        every = sides(args, old)
        for values in args.values:
            with ideal_switch(values):
                for v, window, mb, workers, threads in (c for c in configs if c[0] == values):
                    # the plain loop is one thread, and an older worker may take no threads
                    here = [s for s in every if threads == 1 or not (s.plain or s.label.startswith("old"))]
                    for run in range(args.runs):
                        for side in here:
                            reports = run_workers(side, Path(tmp), v, window, mb, workers, args.calls, args.call,
                                                  threads=threads)
                            for r in reports:
                                calls_per = r["packets"] / r["wall"]
                                syscalls = r["syscalls"] / r["packets"] if r["syscalls"] is not None else None
                                split = ";".join(f"{k}={v:.3f}" for k, v in sorted(r.get("threads_cpu", {}).items()))
                                results.append(Result(side.label, v, window, mb, workers, threads, run,
                                                      r["bytes"] / r["wall"] / 1e6, r["bytes"] / r["cpu"] / 1e6,
                                                      calls_per, syscalls, split))
                        key = (v, window, mb, workers, threads)
                        mine = [x for x in results if _key(x) == key and x.run == run]
                        each = [(s.label, statistics.mean(x.cpu_mbps for x in mine if x.side == s.label)) for s in here]
                        print(f"  V={v} W={window} {mb:g} MB x{workers} threads {threads} run {run + 1}/{args.runs}: "
                              + "; ".join(f"{label} {cpu:.1f} MB/s per CPU-s" for label, cpu in each), flush=True)
    return results


def _key(r: Result) -> tuple[int, int, float, int, int]:
    return r.values, r.window, r.mb, r.workers, r.threads


@dataclass
class Bound:
    """A window-bound call: W packets in flight, so W per round trip (issue 32)."""

    side: str
    window: int
    run: int
    pace_mbps: float | None  # None: unpaced; else paced at the rate the unpaced call measured
    pps: float
    predicted_pps: float  # unpaced: W x the W = 1 rate (W packets per round trip); paced: its own unpaced rate
    polls_per_packet: float | None  # the I/O loop's waits (Stats.polls; old workers do not count them)
    syscalls_per_packet: float | None  # perf's count, any worker: a loop that spins makes dozens


def measure_bound(args: argparse.Namespace) -> list[Bound]:
    """Calls of W = 1, 2, ... packets in flight against the ideal switch, unpaced, then paced at the rate the
    unpaced call measured (what calibration gives a one-slot job, INA alone or hybrid): each beside its
    prediction.  Unpaced, W packets go per round trip, so W times the W = 1 rate (less where the worker's CPU
    per packet, not the round trip, is the limit); paced at its own rate, the unpaced rate itself.  At issue 32
    the paced loop spun while the window was full (dozens of polls per packet at Mininet's round trips)."""
    from worker import protocol

    frame = protocol.load(BOUND_VALUES).frame_bytes
    out: list[Bound] = []
    with worktree(args.against) if args.against else contextlib.nullcontext() as old, \
            tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp, ideal_switch(BOUND_VALUES):
        for run in range(args.runs):
            for side in sides(args, old, plain=False):  # the plain loop has no pacer
                one: float | None = None  # packets per round trip of W = 1
                for window in args.bound_windows:
                    free = 0.0  # this window's unpaced rate, measured first
                    for paced in (False, True):
                        mbps = free * frame * 8 / 1e6 if paced else None  # wire Mb/s, as calibration measures C
                        r = run_workers(side, Path(tmp), BOUND_VALUES, window, args.bound_mb, 1, args.calls,
                                        args.call, mbps, args.threads[0])[0]
                        pps = r["packets"] / r["wall"]
                        if not paced:
                            free, one = pps, one or pps / window
                        predicted = free if paced else window * (one or free)
                        polls = r.get("polls")
                        out.append(Bound(side.label, window, run, mbps, pps, predicted,
                                         None if polls is None else polls / r["packets"],
                                         None if r["syscalls"] is None else r["syscalls"] / r["packets"]))
                        print(f"  bound W={window} {'unpaced' if mbps is None else f'paced {mbps:.3g} Mb/s'} "
                              f"{side.label} run {run + 1}/{args.runs}: {pps:,.0f} packets/s "
                              f"(predicted {predicted:,.0f})", flush=True)
    return out


def bound_table(results: list[Bound]) -> None:
    print(f"\nwindow-bound calls: V = {BOUND_VALUES}, one worker against the ideal switch, packets/s "
          "(median of runs) beside the prediction")
    print(f"{'side':>20} {'W':>3} {'pace':>8} | {'packets/s':>10} {'predicted':>10} {'ratio':>6} {'polls/pkt':>9} "
          f"{'sys/pkt':>8}")
    for side in dict.fromkeys(r.side for r in results):
        for window in sorted({r.window for r in results}):
            for paced in (False, True):
                mine = [r for r in results
                        if r.side == side and r.window == window and (r.pace_mbps is not None) == paced]
                if not mine:
                    continue
                pps = statistics.median(r.pps for r in mine)
                predicted = statistics.median(r.predicted_pps for r in mine)
                polls = [r.polls_per_packet for r in mine if r.polls_per_packet is not None]
                calls = [r.syscalls_per_packet for r in mine if r.syscalls_per_packet is not None]
                flag = "  <- below 85% of its prediction" if pps < 0.85 * predicted else ""
                print(f"{side:>20} {window:>3} {'own' if paced else 'none':>8} | {pps:>10,.0f} {predicted:>10,.0f} "
                      f"{pps / predicted:>6.2f} {statistics.median(polls) if polls else float('nan'):>9.2f} "
                      f"{statistics.median(calls) if calls else float('nan'):>8.2f}{flag}")


def table(results: list[Result]) -> None:
    """Medians per configuration and side; new / old and new / plain of MB/s per CPU-second where those sides ran."""
    keys = sorted({_key(r) for r in results})
    labels = list(dict.fromkeys(r.side for r in results))
    ratios = [(f"new / {'old' if s.startswith('old') else 'plain'} (CPU)", s) for s in labels
              if s.startswith("old") or s == PLAIN]
    print(f"\n{'V':>4} {'W':>4} {'MB':>5} {'wk':>3} {'thr':>3} " + "".join(f"| {s:^45} " for s in labels)
          + "".join(f"| {name} " for name, _ in ratios))
    print(f"{'':>24}" + "".join(f"| {'MB/s wall':>10} {'MB/s CPU':>10} {'pps':>10} {'sys/pkt':>8} " for _ in labels))
    for key in keys:
        cells, cpus = [], {}
        for s in labels:
            mine = [r for r in results if _key(r) == key and r.side == s]
            if not mine:
                cells.append(f"| {'-':>10} {'-':>10} {'-':>10} {'-':>8} ")
                continue
            wall, cpu = statistics.median(r.wall_mbps for r in mine), statistics.median(r.cpu_mbps for r in mine)
            pps = statistics.median(r.pps for r in mine)
            sc = [r.syscalls_per_packet for r in mine if r.syscalls_per_packet is not None]
            per = statistics.median(sc) if sc else float("nan")
            cells.append(f"| {wall:>10.1f} {cpu:>10.1f} {pps:>10,.0f} {per:>8.2f} ")
            cpus[s] = cpu
        shown = "".join(f"| {_ratio(cpus.get('new'), cpus.get(s)):^{len(name)}} " for name, s in ratios)
        print(f"{key[0]:>4} {key[1]:>4} {key[2]:>5g} {key[3]:>3} {key[4]:>3} " + "".join(cells) + shown)
    splits = [r for r in results if r.threads_cpu and r.side == "new"]
    if splits:
        print("\nthe new worker's CPU by thread (s, last run of each configuration):")
        for key in keys:
            last = [r for r in splits if _key(r) == key]
            if last:
                print(f"  V={key[0]} W={key[1]} {key[2]:g} MB x{key[3]} threads {key[4]}: {last[-1].threads_cpu}")


def _ratio(new: float | None, other: float | None) -> str:
    return f"{new / other:.2f}x" if new and other else "-"


def write(results: list[Result] | list[Bound], path: Path) -> None:
    write_rows(path, [asdict(r) for r in results], digits=None)


def plot(path: Path, figure: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(path)
    rows = [r for r in rows if int(r.get("threads") or 1) == 1]  # the figure is of one datapath thread
    one = [r for r in rows if int(r["workers"]) == 1]
    biggest = max(float(r["mb"]) for r in one)
    fig, (ax, scale) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1.4, 1]})
    for side in dict.fromkeys(r["side"] for r in one):
        for v in sorted({int(r["values"]) for r in one}):
            mine = [r for r in one if r["side"] == side and int(r["values"]) == v and float(r["mb"]) == biggest]
            windows = sorted({int(r["window"]) for r in mine})
            meds = [statistics.median(float(r["cpu_mbps"]) for r in mine if int(r["window"]) == w) for w in windows]
            ax.plot(windows, meds, marker="o", linestyle="-" if side == "new" else "--", label=f"{side}, V = {v}")
    for target, v in ((250, 256), (80, 64)):  # the acceptance figures of issue 23
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"aim at V = {v}: {target} MB/s", (0.01, target), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(0, 3), fontsize=7, color="grey")
    ax.set(xlabel="window (packets in flight)", ylabel="MB/s of float32 per CPU-second", yscale="log",
           title=f"one worker, {biggest:g} MB calls, against an ideal switch (loopback)")
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(sorted({int(r["window"]) for r in one}), [str(w) for w in sorted({int(r["window"]) for r in one})])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    many = [r for r in rows if float(r["mb"]) == biggest and int(r["window"]) == max(int(x["window"]) for x in rows)]
    groups = sorted({(r["side"], int(r["values"])) for r in many})
    counts = sorted({int(r["workers"]) for r in many})
    width = 0.8 / max(len(groups), 1)
    for i, (side, v) in enumerate(groups):
        total = []
        for k in counts:
            runs = {}
            for r in many:
                if (r["side"], int(r["values"]), int(r["workers"])) == (side, v, k):
                    runs.setdefault(r["run"], []).append(float(r["wall_mbps"]))
            total.append(statistics.median(sum(x) for x in runs.values()) if runs else 0)
        scale.bar([c + i * width for c in range(len(counts))], total, width, label=f"{side}, V = {v}")
    scale.set_xticks([c + width * (len(groups) - 1) / 2 for c in range(len(counts))],
                     [f"{k} worker(s)" for k in counts])
    scale.set(ylabel="MB/s of float32, all workers (wall)", title=f"workers at once on {os.cpu_count()} cores")
    scale.set_ylim(0, scale.get_ylim()[1] * 1.3)
    scale.legend(fontsize=8, loc="upper left", ncol=2)
    return save_figure(fig, figure)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _assignment(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=_ints, default=[64, 256])
    ap.add_argument("--windows", type=_ints, default=[64, 256, 512])
    ap.add_argument("--mb", type=lambda t: [float(x) for x in t.split(",")], default=[1.0, 64.0])
    ap.add_argument("--workers", type=_ints, default=[1, 2], help="workers at once, for the largest configuration")
    ap.add_argument("--threads", type=_ints, default=[1],
                    help="the worker's datapath threads (Worker(threads=N)), one configuration each; the window-bound "
                         "calls take the first")
    ap.add_argument("--calls", type=int, default=3, help="timed calls per run")
    ap.add_argument("--call", choices=["allreduce_", "allreduce"], default="allreduce_",
                    help="in place (as DDP's buckets), or a new array per call")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", metavar="REV", help="also measure the worker of this commit, side by side")
    ap.add_argument("--new-env", metavar="KEY=VALUE", type=_assignment, action="append", default=[],
                    help="also measure this checkout's worker with KEY=VALUE in its environment, as a side of its own "
                         "(repeatable: one side each), e.g. INA_NATIVE=0")
    ap.add_argument("--plain", action="store_true",
                    help="also measure the plain C loop (bench/plain_loop.c): the same sockets, GSO/GRO, window and "
                         "packets, no protocol; with a column new / plain (CPU)")
    ap.add_argument("--bound-windows", type=_ints, default=[1, 2],
                    help="window-bound calls (V = 256): these windows, unpaced and paced at their own rate, each "
                         "beside its prediction (empty: none)")
    ap.add_argument("--bound-mb", type=float, default=2.0, help="MB of float32 per window-bound call")
    ap.add_argument("--bound-only", action="store_true", help="only the window-bound calls (no plot)")
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    args = ap.parse_args()
    path = RESULTS / "worker.csv"
    if not args.plot_only:
        if args.bound_windows:
            bound = measure_bound(args)
            bound_table(bound)
            write(bound, RESULTS / "worker-bound.csv")
        if args.bound_only:
            return 0
        results = measure(args)
        table(results)
        write(results, path)
        print(f"\nwrote {path}")
    publish(plot(path, FIGURE), args.publish)
    return 0


if __name__ == "__main__":
    sys.exit(main())
