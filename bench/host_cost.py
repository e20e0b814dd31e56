"""The host cost the virtual fabric charges (``ina-sim run --host-cost measured``): what a packet costs a worker's CPU.

Why: a simulated host is infinitely fast unless told otherwise, so at 100 Gbit/s the fabric shows calls a real
worker could not make.  This measures the worker this checkout has against bench_worker's ideal switch (a C
process that answers every contribution at once, on loopback: ``ideal_switch()``, ``run_workers()``), so the
switch and the network cost nothing and the worker's CPU seconds per packet are its host cost.

How: one worker, ``--calls`` timed calls of ``--mb`` MB of float32 per run (in place, as DDP's buckets), window
``--window``, at two packet sizes, V = 64 and V = 256 values, alternated run by run: CPU seconds of the worker
(user + system, all threads) per packet it sent (each packet's result comes back and is taken too), median of
``--runs``.  The line
through the two points separates a part per datagram from a part per byte of datagram (its UDP payload).

The split between send and receive is not measured: the worker sends and receives in one loop on one core, and
the fabric's host spends the sum on every packet either way (one serial CPU), so half of each part is charged
to the send and half to the receive.  (The split only moves when a packet leaves against when its result is
seen, within the sum.)

    python -m bench.host_cost [--values 64,256] [--window 256] [--mb 32] [--calls 3] [--runs 7] [--publish]

Writes bench/results/host_cost.json; ``--publish`` writes virtual_fabric/host_cost.json, the calibration
``--host-cost measured`` reads (commit it).  Run it again when the worker changes (its native datapath will).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .bench_worker import SWITCH_IP, Side, ideal_switch, run_workers
from .common import RESULTS
from .compare import REPO

CALIBRATION = REPO / "virtual_fabric" / "host_cost.json"  # --publish writes it (tracked)


def switch_port_free(values: int) -> bool:
    """Whether the ideal switch can listen: another benchmark's switch on its port would answer this worker
    instead, while that benchmark takes the CPUs too."""
    from worker import protocol

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((SWITCH_IP, protocol.load(values).INA_UDP_PORT))
        except OSError:
            return False
    return True


def cpu_per_packet(sizes: list[int], window: int, mb: float, calls: int, runs: int) -> dict[int, list[float]]:
    """Seconds of the worker's CPU per packet at each V, one figure per run (a runner process each), the sizes
    alternated run by run so that what else the machine does weighs on both alike."""
    side = Side("new", REPO)
    out: dict[int, list[float]] = {values: [] for values in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-host-cost-") as tmp:
        for run in range(runs):
            for values in sizes:
                with ideal_switch(values):
                    report = run_workers(side, Path(tmp), values, window, mb, 1, calls, "allreduce_")[0]
                out[values].append(report["cpu"] / report["packets"])
                print(f"  V={values} run {run + 1}/{runs}: {out[values][-1] * 1e6:.3f} us of CPU per packet "
                      f"({report['packets']} packets, {report['cpu']:.3f} s of CPU)", flush=True)
    return out


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(seconds per datagram, seconds per byte) of the line through two (datagram bytes, seconds per packet)
    points; a slope below zero (noise) is taken as none, with the mean as the per-datagram part."""
    (b1, c1), (b2, c2) = points
    per_byte = (c2 - c1) / (b2 - b1)
    if per_byte < 0:
        return (c1 + c2) / 2, 0.0
    return c1 - per_byte * b1, per_byte


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "load_average_before": os.getloadavg()[0]}


def commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=lambda t: [int(x) for x in t.split(",")], default=[64, 256],
                    help="the two packet sizes, values per packet")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--mb", type=float, default=32.0, help="MB of float32 per call")
    ap.add_argument("--calls", type=int, default=3, help="timed calls per run")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--publish", action="store_true", help=f"write {CALIBRATION.relative_to(REPO)} (commit it)")
    args = ap.parse_args()
    if len(args.values) != 2 or args.values[0] == args.values[1]:
        ap.error("--values: two different packet sizes")
    from worker import protocol

    if not switch_port_free(args.values[0]):
        print(f"another benchmark's ideal switch is listening on {SWITCH_IP}: run this when it is done",
              file=sys.stderr)
        return 1
    before = machine()
    points, measured = [], []
    every = cpu_per_packet(args.values, args.window, args.mb, args.calls, args.runs)
    for values, runs in every.items():
        nbytes = protocol.load(values).packet_bytes
        points.append((nbytes, statistics.median(runs)))
        measured.append({"values": values, "datagram_bytes": nbytes, "cpu_us_per_packet": points[-1][1] * 1e6,
                         "runs_us": [round(r * 1e6, 4) for r in runs]})
    per_datagram, per_byte = fit(points)
    us = 1e6
    data = {
        "send_us": per_datagram / 2 * us, "receive_us": per_datagram / 2 * us,
        "send_us_per_byte": per_byte / 2 * us, "receive_us_per_byte": per_byte / 2 * us,
        "split": "half each: the worker's CPU per packet (a datagram sent and its result received) is measured "
                 "as one figure, and the fabric's host, one serial CPU, spends the sum on every packet either way",
        "fit": "CPU per packet = per datagram + per byte x datagram bytes (UDP payload), the line through the "
               "two points (medians over the runs)",
        "points": measured,
        "how": f"one worker (this checkout's Worker, bench/worker_runner.py) against bench_worker's ideal switch on "
               f"loopback, window {args.window}, {args.calls} timed calls of {args.mb:g} MB of float32 per run, "
               f"{args.runs} runs per point (the sizes alternated); CPU seconds of the worker process (user + system, "
               "all threads) per packet sent",
        "machine": before,
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit(),
        "command": "python -m bench.host_cost " + " ".join(sys.argv[1:]),
    }
    print(f"per datagram {per_datagram * us:.3f} us, per byte {per_byte * 1e9:.3f} ns: each way half "
          f"(send {data['send_us']:.3f} us + {data['send_us_per_byte'] * 1e3:.4f} ns/B)")
    path = CALIBRATION if args.publish else RESULTS / "host_cost.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
