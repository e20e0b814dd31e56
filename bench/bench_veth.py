"""Packets per second through the ``p4target-switch-grpc`` command on real veth ports (root only).

The switch runs as the real command on the root-namespace ends of two veth pairs; a sender
process sits in namespace h1 (port 1) and a receiver process in the namespace the program
sends to.  The offered load steps up (5k, 10k, 20k... pps, until the delivered rate stops
growing), each step a fixed time; delivered = frames the receiver's kernel timestamped inside
the step, per second.  (a) IPv4 LPM forwarding, tests/p4/basic.p4 (10.0.0.0/8 -> port 2:
received in h2); (b) 64 register lanes, tests/p4/register64.p4, which sends every frame back
out of its ingress port: received in h1, by a socket that ignores the sender's frames.
The figure is the largest per-step median over ``--runs`` runs.  For scale, the latest
measurement of real BMv2 (1.15.5, built from source) through veth ports, peak delivered:
27,400 packets/s for IPv4 LPM, 3,183 for 64 register lanes and 1,026 for 256 lanes.

    python -m bench.bench_veth [--runs 3] [--duration 2] [--quick]

Writes bench/results/veth.csv (and veth.png when matplotlib is installed).  Namespaces,
links, workers and the switch are cleaned up on any exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from p4target import netns
from p4target.ports import PACKET_IGNORE_OUTGOING, SO_RCVBUFFORCE, SOL_PACKET

from .common import RESULTS, save_figure, write_rows
from .veth_common import SO_TIMESTAMPNS, cpu_during, prepare, switch_process

P4 = Path(__file__).resolve().parent.parent / "tests" / "p4"
RATES = [5_000, 10_000, 20_000, 40_000, 80_000, 160_000]
BATCH = 64  # frames sent between two looks at the clock
PACKET_STATISTICS = 6
QUIET = 0.5  # a step is over once its frames stop arriving for this long


# --- the two processes in the namespaces -----------------------------------------------------


def _sender(sock: socket.socket, frame: bytes, start: float, duration: float, rate: int) -> tuple[int, int]:
    """Send ``rate * duration`` frames evenly from ``start``, in batches of due frames; (sent, errors).

    If sending is slower than the rate, the step still ends at ``start + duration``: the caller
    sees it as a lower achieved rate.
    """
    send, clock = sock.send, time.perf_counter
    while (wait := start - time.time()) > 0:
        time.sleep(min(wait, 0.01))
    t0 = clock()
    total, sent, errors = round(rate * duration), 0, 0
    while sent < total:
        elapsed = clock() - t0
        if elapsed >= duration:
            break
        due = min(total, int(elapsed * rate) + 1)
        if due <= sent:
            time.sleep(sent / rate - elapsed)  # until the next frame is due (~60 us at best: then batches)
            continue
        for _ in range(min(due - sent, BATCH)):
            try:
                send(frame)
            except OSError:  # ENOBUFS: the frame was not offered
                errors += 1
            sent += 1
    return sent - errors, errors


def _receiver(sock: socket.socket, offset: int, tag: bytes, start: float, end: float) -> tuple[int, int, int]:
    """Count this step's frames (``tag`` at ``offset``): (inside [start, end), in all, dropped by the socket)."""
    in_window = total = 0
    last = time.time()
    sock.settimeout(0.1)
    while True:
        try:
            data, anc, _, _ = sock.recvmsg(2048, 64)
        except TimeoutError:
            now = time.time()
            if now > end + 30 or now > end and now - last > QUIET:
                break
            continue
        if data[offset:offset + len(tag)] != tag:
            continue  # a late frame of an earlier step
        last = time.time()
        sec, nsec = struct.unpack("qq", anc[0][2][:16]) if anc else (0, 0)
        stamp = sec + nsec * 1e-9
        if abs(stamp - last) > 5:  # no kernel timestamp (yet): the time we read it will do
            stamp = last
        total += 1
        if start <= stamp < end:
            in_window += 1
    _, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))  # read and reset
    return in_window, total, drops


def _worker(conn: Connection, role: str, ns: str, iface: str) -> None:
    """A sender or receiver in namespace ``ns``: runs the steps it is sent until it gets None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group: the parent stops us
    with netns.entered(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing yet
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)  # register64 answers on the sender's link
    if role == "receiver":
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)  # never lose frames to a late wakeup
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((iface, 0x0003))  # ETH_P_ALL
    else:
        sock.bind((iface, 0))
    work = _receiver if role == "receiver" else _sender
    try:
        conn.send("ready")  # frames sent before the receiver's socket is bound would be lost
        while (args := conn.recv()) is not None:
            conn.send(work(sock, *args))
    except EOFError:
        pass  # the parent went away
    finally:
        sock.close()


@contextmanager
def workers(tx: netns.Veth, rx: netns.Veth) -> Iterator[tuple[Connection, Connection, dict[str, int]]]:
    """Sender on ``tx``'s host end and receiver on ``rx``'s, each its own process (no shared GIL)."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs gRPC threads
    procs, conns = [], []
    try:
        for role, link in (("sender", tx), ("receiver", rx)):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(theirs, role, link.b_netns, link.b), name=role, daemon=True)
            procs.append(proc)
            proc.start()
            conns.append(mine)
        for conn, proc in zip(conns, procs):
            if not conn.poll(60) or conn.recv() != "ready":
                raise RuntimeError(f"the {proc.name} process did not start")
        yield conns[0], conns[1], {p.name: p.pid for p in procs}
        for conn in conns:
            conn.send(None)
        for proc in procs:
            proc.join(5)
    finally:
        for proc in procs:  # after an error or Ctrl-C, without waiting
            if proc.is_alive():
                proc.terminate()
                proc.join()


# --- the switch and the programs -------------------------------------------------------------


@dataclass
class Case:
    name: str
    program: Path
    rx_port: int  # where the program sends our frames
    frame: Callable[[int], bytes]  # the frame of step k
    tag: Callable[[int], tuple[int, bytes]]  # (offset, bytes) that mark step k's frames on the way out
    install: Callable[[str], None] = lambda address: None  # table entries, over P4Runtime


def _ipv4_frame(step: int) -> bytes:
    from scapy.all import IP, UDP, Ether, raw

    return raw(Ether(dst="02:00:00:00:00:10", src="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64)
               / UDP(sport=1234, dport=5678) / (b"p4tb" + struct.pack("!I", step) + bytes(56)))


def _ipv4_route(address: str) -> None:
    """The LPM entry 10.0.0.0/8 -> port 2, written with p4runtime-shell as a controller would."""
    from p4runtime_sh import shell as sh

    sh.setup(device_id=0, grpc_addr=address, election_id=(0, 1), verbose=False)  # the switch's own program
    try:
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
        te.match["hdr.ipv4.dstAddr"] = "10.0.0.0/8"
        te.action["dstAddr"] = "02:00:00:00:00:02"  # not h2's own MAC: its IP stack ignores the flood
        te.action["port"] = "2"
        te.insert()
    finally:
        sh.teardown()


def _lanes_frame(step: int) -> bytes:
    return struct.pack("!I", step % 1024) + b"".join(struct.pack("!I", i) for i in range(64))  # slot, 64 lanes


CASES = [
    Case("ipv4 lpm + checksum (basic.p4)", P4 / "basic.p4", 2, _ipv4_frame,
         lambda step: (42, b"p4tb" + struct.pack("!I", step)), _ipv4_route),
    Case("64 register lanes (register64.p4)", P4 / "register64.p4", 1, _lanes_frame,
         lambda step: (0, struct.pack("!I", step % 1024))),  # the slot comes back unchanged
]


@contextmanager
def running_switch(case: Case, links: dict[int, netns.Veth]) -> Iterator[subprocess.Popen]:
    """``p4target-switch-grpc -i 1@.. -i 2@.. prog.p4`` serving on a free port, with the case's entries."""
    with switch_process([str(case.program)], links) as (proc, address):
        case.install(address)
        yield proc


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Step:
    offered: int  # target pps
    achieved: float  # pps the sender really offered
    delivered: float  # pps received inside the step
    sent: int
    in_window: int  # frames received inside the step
    received: int  # frames of the step received in all (late ones too)
    send_errors: int
    rx_drops: int
    cpu: dict[str, float]  # share of one core each process used during the step


def run_step(case: Case, tx: Connection, rx: Connection, pids: dict[str, int], step: int, rate: int,
             duration: float) -> Step:
    frame, (offset, tag) = case.frame(step), case.tag(step)
    start = time.time() + 0.2  # both workers have their orders by then
    rx.send((offset, tag, start, start + duration))
    tx.send((frame, start, duration, rate))
    cpu = cpu_during(pids, start, duration)
    sent, errors = tx.recv()
    in_window, received, drops = rx.recv()
    return Step(rate, sent / duration, in_window / duration, sent, in_window, received, errors, drops, cpu)


def measure(case: Case, links: dict[int, netns.Veth], rates: list[int], runs: int, duration: float,
            steps: Iterator[int]) -> list[list[Step]]:
    """``runs`` runs of the rate ladder; the first run stops the ladder where delivery stops growing."""
    results: list[list[Step]] = []
    with running_switch(case, links) as switch, workers(links[1], links[case.rx_port]) as (tx, rx, pids):
        pids = {"switch": switch.pid, **pids}
        probe = run_step(case, tx, rx, pids, next(steps), 200, 0.25)
        if probe.received != probe.sent or probe.sent == 0:
            raise RuntimeError(f"{case.name}: {probe.received} of {probe.sent} probe frames came through the switch")
        for run in range(runs):
            results.append([])
            for rate in rates:
                s = run_step(case, tx, rx, pids, next(steps), rate, duration)
                results[-1].append(s)
                short = f"  (sender reached only {s.achieved:,.0f})" if s.achieved < 0.98 * rate else ""
                drops = f"  (receiver socket dropped {s.rx_drops})" if s.rx_drops else ""
                print(f"  run {run + 1}/{runs}: offered {rate:>9,} pps  delivered {s.delivered:>9,.0f} pps"
                      f"  late {s.received - s.in_window:>7,}  cpu "
                      + " ".join(f"{name} {share:.0%}" for name, share in s.cpu.items()) + short + drops, flush=True)
                if run == 0 and _stopped_growing(results[-1]):
                    rates = rates[:len(results[-1])]  # later runs stop here too
                    break
    return results


def _stopped_growing(steps: list[Step]) -> bool:
    """The last two steps were saturated and neither delivered 10% more than the steps before.

    Two, not one: a burst of other load on the machine can make a single step look saturated.
    """
    def flat(i: int) -> bool:
        s = steps[i]
        return s.delivered < 0.9 * s.achieved and s.delivered < 1.1 * max(p.delivered for p in steps[:i])

    return len(steps) >= 3 and flat(-1) and flat(-2)


def report(case: Case, results: list[list[Step]], duration: float) -> list[float]:
    runs = len(results)
    print(f"\n{case.name}: delivered pps, {runs} run(s) of {duration:g} s per step")
    print(f"  {'offered':>9}  {'achieved':>9}  " + "  ".join(f"{f'run {r + 1}':>9}" for r in range(runs))
          + f"  {'median':>9}  {'loss':>6}  {'switch cpu':>10}  {'machine cpu':>11}")
    medians = []
    for i, offered in enumerate(s.offered for s in results[0]):
        row = [run[i] for run in results]
        median = statistics.median(s.delivered for s in row)
        achieved = statistics.median(s.achieved for s in row)
        medians.append(median)
        cpu = {k: statistics.median(s.cpu[k] for s in row) for k in ("switch", "all")}
        print(f"  {offered:>9,}  {achieved:>9,.0f}  " + "  ".join(f"{s.delivered:>9,.0f}" for s in row)
              + f"  {median:>9,.0f}  {max(0.0, 1 - median / achieved):>6.1%}  {cpu['switch']:>10.0%}"
              + f"  {cpu['all']:>7.0%} of {os.cpu_count()}")
    print(f"  figure: {max(medians):,.0f} pps (largest per-step median)")
    print("  (cpu: medians over the runs; 100% = one core; the machine's includes softirq and other processes)\n",
          flush=True)
    return medians


def write_results(all_results: dict[str, list[list[Step]]]) -> None:
    rows = [{"program": name, "run": run, "offered_pps": s.offered, "achieved_pps": round(s.achieved),
             "delivered_pps": round(s.delivered), "sent": s.sent, "received_in_step": s.in_window,
             "received": s.received, "send_errors": s.send_errors, "rx_drops": s.rx_drops,
             **{f"{k}_cpu": round(s.cpu[k if k != "machine" else "all"], 2)
                for k in ("switch", "sender", "receiver", "machine")}}
            for name, results in all_results.items() for run, steps in enumerate(results, 1) for s in steps]
    print(f"wrote {write_rows(RESULTS / 'veth.csv', rows, digits=None)}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, results in all_results.items():
        offered = [s.offered for s in results[0]]
        ax.plot(offered, [statistics.median(run[i].delivered for run in results) for i in range(len(offered))],
                "o-", label=name)
    ax.set(xscale="log", xlabel="offered (pps)", ylabel="delivered (pps, median)", title="p4target on veth ports")
    ax.legend()
    print(f"wrote {save_figure(fig, RESULTS / 'veth.png', dpi=100)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per step")
    ap.add_argument("--rates", type=lambda t: [int(r) for r in t.split(",")], default=RATES,
                    help="offered loads in pps, comma-separated")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 run, 0.5 s steps, 3 loads")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.duration, args.rates = 1, 0.5, [5_000, 20_000, 80_000]
    if not prepare("bench_veth"):
        return 1
    all_results: dict[str, list[list[Step]]] = {}
    try:
        with netns.Sandbox() as box:
            links = {n: box.veth(f"s{n}", f"h{n}", b_netns=box.netns(f"h{n}")) for n in (1, 2)}
            steps = itertools.count(1)  # every step tags its frames differently
            for case in CASES:
                print(f"{case.name}: switch on {links[1].a}, {links[2].a}; sender in h1, receiver in "
                      f"h{case.rx_port}", flush=True)
                all_results[case.name] = measure(case, links, args.rates, args.runs, args.duration, steps)
                report(case, all_results[case.name], args.duration)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    write_results(all_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
