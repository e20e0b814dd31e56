"""Aggregated packets per second of p4src/ina.p4 through the ``p4target-switch-grpc`` command on veth ports.

Why: bench_ina measures the pipeline alone, in-process; this is the end-to-end figure a
worker sees.  The real switch command runs ina.p4 (``-D INA_VALUES=V``) on the root-namespace
ends of two veth pairs, and the job is filled over P4Runtime as a controller would (p4runtime-
shell): two children (child 0 on port 1, child 1 on port 2) of a root, a multicast group to
both, and per-child receiver addresses.  Each child is a namespace (h1, h2) with two
processes: a sender that blasts DATA over an AF_PACKET socket, round after round at a fixed
rate (pre-built frame, only slot/set/seq and lane 0 patched; slot = round mod W, set =
(round div W) mod 2, seq = round), and a receiver on a UDP socket that counts the RESULTs and
checks every sum (lane 0 carries seq, so each round's sum differs).

Both senders follow the same time schedule (round i due at start + i/rate), open loop: no
window discipline and no retransmission, so a contribution the kernel drops leaves its round
incomplete forever.  That costs only that round: the cell is next used 2W rounds later, with
a newer seq, which opens a new round over the stale contents (docs/protocol.md, step 1).
W = 1024 (the whole pool), so the two senders may drift 2048 rounds apart (51 ms at 40k pps)
before rounds are lost to it; such losses show up as STALE in the switch's counters.  Only
completed rounds count: aggregated pps = 2 x results completed per second (every result used
one contribution from each child), counted by kernel receive timestamp inside the step; MB/s =
aggregated pps x V x 4 bytes of int32 gradient.  Losses are split, from the switch's job
counters, into contributions that never reached the pipeline (kernel socket overflow), ones
absorbed into rounds that never completed, and stale ones.  A step is over once the results
stop and the counters settle (the switch's backlog is worked off), so steps do not overlap.

Offered load steps up per worker (1k ... 60k pps, each step ``--duration`` s); a run's
figure is its largest delivered step (saturation); the reported figure is the median over
``--runs`` runs, for V = 64 and V = 256.  ``--against REV`` runs the switch of a worktree of
commit REV too, run by run in alternation with this checkout's, on the same links and
workers: old and new side by side.

    python -m bench.bench_veth_ina [--runs 3] [--duration 2] [--rates 1000,...] [--values 64,256] [--quick]
                                   [--against 3193974]

Writes bench/results/veth_ina.csv and, from it, bench/results/veth-ina.png (``--plot-only``
redraws the plot; ``--publish`` also copies it to docs/figures/).  Namespaces, links,
workers and the switch are cleaned up on any exit, Ctrl-C included.  Root only.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from controller.reconcile import WORKER_PORT_BASE
from p4target import netns
from p4target.ports import SO_RCVBUFFORCE
from worker.protocol import ETH_IP_UDP

from .common import RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from .compare import worktree
from .veth_common import SO_TIMESTAMPNS, cpu_during, prepare, sleep_until, switch_process

FIGURE = RESULTS / "veth-ina.png"  # --publish copies it to docs/figures/
RATES = [1_000, 2_000, 5_000, 10_000, 20_000, 40_000, 60_000]  # offered per worker (pps)
VALUES = [64, 256]
WINDOW = 1024  # slots per job = INA_POOL_SLOTS' default: the whole pool
JOB = 1  # the id a fresh controller gives its first job
CHILDREN = 2
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"
WORKER_UDP_PORT = WORKER_PORT_BASE + JOB
BATCH = 64  # frames sent between two looks at the clock
GRACE = 0.05  # a sender may finish its step's rounds this late
QUIET = 0.5  # a step is over once its results stop arriving for this long
SO_RXQ_OVFL = 40  # ancillary count of datagrams the socket dropped; not in Python's socket module
PATCH = struct.Struct(">BHI4xi")  # at ina_t byte 5: reserved|set, slot, seq, (exponent, reserved), lane 0
RESULT = struct.Struct(">4sB3xI4xi")  # (msg_type, flags, job_id), child, seq, lane 0
STAT_NAMES = ("aggregated", "results", "retransmits", "stale", "bad_slot", "bad_type")


def worker_mac(child: int) -> str:
    return f"02:00:00:00:01:{child + 1:02x}"


def worker_ip(child: int) -> str:
    return f"10.0.0.{child + 1}"


# --- the processes in the namespaces ---------------------------------------------------------


def _send_step(sock: socket.socket, template: bytes, scale: int, window: int, first: int, rounds: int,
               start: float, duration: float, rate: int) -> tuple[int, int, float]:
    """Send rounds ``first...`` evenly from ``start`` at ``rate``: (sent, errors, largest lag behind schedule in s).

    If sending is slower than the rate, the step still ends at ``start + duration`` (plus a
    little grace, so that a late wakeup for the last frames does not leave rounds unpaired):
    the caller sees fewer rounds sent.
    """
    buf = bytearray(template)
    pack, send, clock = PATCH.pack_into, sock.send, time.perf_counter
    sleep_until(start)
    t0 = clock()
    sent = errors = 0
    lag = 0.0
    while sent < rounds:
        elapsed = clock() - t0
        if elapsed >= duration + GRACE:
            break
        due = min(rounds, int(elapsed * rate) + 1)
        if due <= sent:
            time.sleep(sent / rate - elapsed)  # until the next frame is due
            continue
        lag = max(lag, elapsed - sent / rate)
        upto = min(due, sent + BATCH)
        for r in range(first + sent, first + upto):
            pack(buf, ETH_IP_UDP + 5, (r // window) & 1, r % window, r, scale * r)
            try:
                send(buf)
            except OSError:  # ENOBUFS: the frame was not offered
                errors += 1
        sent = upto
    return sent, errors, lag


class _Receiver:
    """One child's result socket; ``step`` counts one step's results."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.overflows = 0  # the socket's cumulative drop count, as last reported

    def step(self, child: int, head: bytes, rest: bytes, first: int, rounds: int, start: float,
             end: float) -> tuple[bytes, bytes, int, int, str, int]:
        """(received map, inside-[start, end) map, duplicates, wrong results, first wrong one, socket drops).

        A right result starts with ``head`` (msg_type, flags, job_id), is addressed to ``child``,
        has 3 x seq in lane 0 and ``rest`` after it.  The maps hold one byte per round of the
        step; results of other steps are ignored.
        """
        got, inside = bytearray(rounds), bytearray(rounds)
        dups = bad = 0
        first_bad = ""
        size = RESULT.size + len(rest)
        overflows_before = self.overflows
        sock, unpack = self.sock, RESULT.unpack_from
        sock.settimeout(0.1)
        last = time.time()
        while True:
            try:
                data, anc, _, _ = sock.recvmsg(2048, 128)
            except TimeoutError:
                now = time.time()
                if now > end + 30 or now > end and now - last > QUIET:
                    break
                continue
            now = time.time()
            if len(data) < RESULT.size:
                bad += 1
                first_bad = first_bad or f"{len(data)}-byte datagram"
                continue
            h, c, seq, lane0 = unpack(data)
            i = seq - first
            if not 0 <= i < rounds:
                continue  # a late result of an earlier step
            last = stamp = now
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", value[:16])
                    stamp = sec + nsec * 1e-9
                elif level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL:
                    self.overflows = struct.unpack("I", value[:4])[0]
            if got[i]:
                dups += 1
                continue
            got[i] = 1
            if start <= stamp < end:
                inside[i] = 1
            if len(data) != size or h != head or c != child or lane0 != 3 * seq or data[RESULT.size:] != rest:
                bad += 1
                first_bad = first_bad or f"seq {seq}: header {data[:16].hex()} lane0 {lane0} (want {3 * seq})"
        return bytes(got), bytes(inside), dups, bad, first_bad, self.overflows - overflows_before


def _worker(conn: Connection, role: str, ns: str, iface: str, address: str) -> None:
    """A sender or receiver in namespace ``ns``: runs the steps it is sent until it gets None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group: the parent stops us
    with netns.entered(ns):
        if role == "sender":
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
            sock.bind((iface, 0))
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)  # never lose results to a late wakeup
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)
            sock.bind((address, WORKER_UDP_PORT))
    work = (lambda *args: _send_step(sock, *args)) if role == "sender" else _Receiver(sock).step
    try:
        conn.send("ready")
        while (args := conn.recv()) is not None:
            conn.send(work(*args))
    except EOFError:
        pass  # the parent went away
    finally:
        sock.close()


@dataclass
class Workers:
    senders: list[Connection]
    receivers: list[Connection]
    pids: dict[str, int]


@contextmanager
def workers(links: dict[int, netns.Veth]) -> Iterator[Workers]:
    """A sender and a receiver per child, each its own process (no shared GIL), in the child's namespace."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs gRPC threads
    procs, conns = [], {}
    try:
        for role in ("sender", "receiver"):
            for child in range(CHILDREN):
                link = links[child + 1]
                mine, theirs = ctx.Pipe()
                name = f"{role}{child}"
                proc = ctx.Process(target=_worker, args=(theirs, role, link.b_netns, link.b, worker_ip(child)),
                                   name=name, daemon=True)
                procs.append(proc)
                proc.start()
                conns[name] = mine
        for proc in procs:
            conn = conns[proc.name]
            if not conn.poll(60) or conn.recv() != "ready":
                raise RuntimeError(f"the {proc.name} process did not start")
        yield Workers([conns[f"sender{c}"] for c in range(CHILDREN)],
                      [conns[f"receiver{c}"] for c in range(CHILDREN)], {p.name: p.pid for p in procs})
        for conn in conns.values():
            conn.send(None)
        for proc in procs:
            proc.join(5)
    finally:
        for proc in procs:  # after an error or Ctrl-C, without waiting
            if proc.is_alive():
                proc.terminate()
                proc.join()


@contextmanager
def network() -> Iterator[tuple[dict[int, netns.Veth], Workers]]:
    """The children's namespaces, their veth links to the switch's ports (1, 2) and their workers."""
    with netns.Sandbox() as box:
        links = {n: box.veth(f"s{n}", f"h{n}", b_netns=box.netns(f"h{n}")) for n in range(1, CHILDREN + 1)}
        address_hosts(links)
        with workers(links) as w:
            yield links, w


def run(values: int, rates: list[int], runs: int, duration: float, window: int = WINDOW) -> list[list[Step]]:
    """``measure`` on a network of its own, for another benchmark that puts this path beside its own (root)."""
    if not prepare("bench_veth_ina"):
        raise RuntimeError("bench_veth_ina needs network namespaces (root)")
    with network() as (links, w):
        return measure(w, links, values, rates, runs, duration, window)


def address_hosts(links: dict[int, netns.Veth]) -> None:
    """Give child c's end (port c + 1) the MAC and IPv4 address the switch's receivers entries name."""
    for child in range(CHILDREN):
        link = links[child + 1]
        netns.ip("link", "set", "dev", link.b, "address", worker_mac(child), netns=link.b_netns)
        netns.ip("addr", "add", f"{worker_ip(child)}/24", "dev", link.b, netns=link.b_netns)


# --- the switch: pipeline, job and telemetry ---------------------------------------------------


@dataclass
class Pipeline:
    """What one V needs on both sides: the frames each child sends, the sums it expects back."""

    values: int
    templates: list[bytes]  # child c's DATA frame; lane 0 and slot/set/seq are patched per round
    head: bytes  # a result's msg_type, flags and job_id
    rest: bytes  # the result's lanes 1..V-1 (lane 0 is 3 x seq)

    @classmethod
    def build(cls, values: int) -> Pipeline:
        import numpy as np
        from scapy.all import IP, UDP, Ether, raw

        from worker import protocol

        P = protocol.load(values)
        rng = np.random.default_rng(values)
        vectors = [rng.integers(-1000, 1000, values, dtype=np.int32) for _ in range(CHILDREN)]
        templates = []
        for child, vector in enumerate(vectors):
            payload = P.pack(vector, msg_type=P.MSG_DATA, job_id=JOB, child=child, seq=0)
            templates.append(raw(Ether(dst=SWITCH_MAC, src=worker_mac(child))
                                 / IP(src=worker_ip(child), dst=SWITCH_IP, ttl=64)
                                 / UDP(sport=WORKER_UDP_PORT, dport=P.INA_UDP_PORT, chksum=0) / payload))
        if len(templates[0]) != ETH_IP_UDP + P.packet_bytes or P.header_bytes != 16:
            raise RuntimeError("the frame layout is not the one this benchmark patches")
        rest = sum(vectors)[1:].astype(">i4").tobytes()
        head = bytes([P.MSG_RESULT, 0]) + JOB.to_bytes(2, "big")  # flags: neither OVERFLOW nor RETRANSMIT
        return cls(values, templates, head, rest)


@contextmanager
def controller(address: str, values: int, window: int) -> Iterator[Callable[[], dict[str, int]]]:
    """The job, created by the project's controller over P4Runtime; yields a reader of its counters."""
    from controller.controller import Controller
    from controller.network import Network, SwitchAccess
    from controller.pipeline import PipelineOptions
    from controller.topology import Topology

    hosts = {f"h{c + 1}": {"ip": f"{worker_ip(c)}/24", "mac": worker_mac(c)} for c in range(CHILDREN)}
    topology = Topology.from_dict({"hosts": hosts, "switches": {"s1": {"ip": SWITCH_IP, "mac": SWITCH_MAC}},
                                   "links": [[f"h{c + 1}", f"s1-p{c + 1}"] for c in range(CHILDREN)]})
    network = Network(topology, {"s1": SwitchAccess(address, 0, "builtin")})
    options = PipelineOptions(values=values, pool_slots=window if window > 1024 else None)
    with tempfile.TemporaryDirectory(prefix="bench-veth-ina-") as state, \
            Controller(network, Path(state) / "state.json", options) as ctl:
        ctl.setup()
        spec = ctl.create_job("bench", list(hosts), pool_size=window)
        (tree,) = spec.trees
        if tree.job_id != JOB or tree.port != WORKER_UDP_PORT or tree.children[1] != 1:
            raise RuntimeError(f"the frames were built for job {JOB} on port {WORKER_UDP_PORT}, not {spec}")

        def read() -> dict[str, int]:
            status = ctl.status()
            return {**status["jobs"]["bench"]["s1"], **status["drops"]["s1"]}

        yield read


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Step:
    values: int
    offered: int  # target pps per worker
    duration: float
    achieved: float  # pps per worker the slower sender reached
    rounds: int  # rounds both workers sent
    sent: int  # contributions handed to the kernel (both workers)
    send_errors: int
    lag: float  # largest lag of a sender behind the schedule (s)
    results: int  # rounds whose result reached a worker
    in_step: int  # ... with a receive time inside the step
    both: int  # ... that reached both workers
    dups: int
    bad: int  # wrong sums or headers
    rx_drops: int  # results the workers' sockets dropped
    switch: dict[str, int]  # counter deltas over the step
    cpu: dict[str, float]  # share of one core each process used during the step

    @property
    def results_per_s(self) -> float:
        return self.in_step / self.duration

    @property
    def aggregated_pps(self) -> float:
        return CHILDREN * self.results_per_s

    @property
    def mbytes_per_s(self) -> float:
        return self.aggregated_pps * self.values * 4 / 1e6

    @property
    def loss(self) -> float:
        return 1 - self.results / self.rounds if self.rounds else 0.0

    @property
    def seen(self) -> int:
        """Contributions the pipeline saw (counted under some job statistic)."""
        return sum(self.switch[name] for name in STAT_NAMES if name != "results")

    @property
    def before_pipeline(self) -> int:
        """Contributions lost between the sender and the pipeline (the switch's socket overflowing)."""
        return self.sent - self.send_errors - self.seen - self.switch["unknown_member"] - self.switch["truncated"]

    @property
    def incomplete(self) -> int:
        """Contributions summed into rounds that never completed (their partner was lost)."""
        return self.switch["aggregated"] - CHILDREN * self.switch["results"]


def settled(read: Callable[[], dict[str, int]], timeout: float = 60) -> dict[str, int]:
    """The counters once the switch has worked off its backlog (two reads 0.3 s apart agree)."""
    last = read()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = read()
        if now == last:
            return now
        last = now
    raise RuntimeError("the switch's counters did not settle within a minute")


class Bench:
    def __init__(self, w: Workers, switch_pid: int, pipe: Pipeline, read: Callable[[], dict[str, int]],
                 window: int) -> None:
        self.w, self.pipe, self.read, self.window = w, pipe, read, window
        self.pids = {"switch": switch_pid, **w.pids}
        self.next_round = 1  # seq 0 would match a fresh cell's round_seq
        self.counters = settled(read)

    def step(self, rate: int, duration: float) -> Step:
        first, rounds = self.next_round, max(1, round(rate * duration))
        self.next_round += rounds
        start = time.time() + 0.2  # every worker has its orders by then
        for child, conn in enumerate(self.w.receivers):
            conn.send((child, self.pipe.head, self.pipe.rest, first, rounds, start, start + duration))
        for child, conn in enumerate(self.w.senders):
            conn.send((self.pipe.templates[child], child + 1, self.window, first, rounds, start, duration, rate))
        cpu = cpu_during(self.pids, start, duration)
        sends = [conn.recv() for conn in self.w.senders]
        received = [conn.recv() for conn in self.w.receivers]
        counters = settled(self.read)
        delta = {k: counters[k] - self.counters[k] for k in counters}
        self.counters = counters
        got = [int.from_bytes(r[0], "little") for r in received]  # one byte per round: OR/AND work bytewise
        inside = [int.from_bytes(r[1], "little") for r in received]
        union, both = got[0] | got[1], got[0] & got[1]
        for r in received:
            if r[3]:
                print(f"    wrong result at a worker: {r[4]}", flush=True)
        return Step(self.pipe.values, rate, duration, min(s[0] for s in sends) / duration, min(s[0] for s in sends),
                    sum(s[0] for s in sends), sum(s[1] for s in sends), max(s[2] for s in sends),
                    union.bit_count(), (inside[0] | inside[1]).bit_count(), both.bit_count(),
                    sum(r[2] for r in received), sum(r[3] for r in received), sum(r[5] for r in received), delta, cpu)


def measure(w: Workers, links: dict[int, netns.Veth], values: int, rates: list[int], runs: int, duration: float,
            window: int, root: Path | None = None, side: str = "") -> list[list[Step]]:
    """``root``: the checkout whose switch runs (None: this one); ``side`` names it in the output."""
    pipe = Pipeline.build(values)
    config = ["--no-p4"]  # the controller pushes ina.p4 built for V (and the pool)
    results: list[list[Step]] = []
    with switch_process(config, links, own_group=True, root=root) as (switch, address), \
            controller(address, values, window) as read:
        bench = Bench(w, switch.pid, pipe, read, window)
        probe = bench.step(200, 0.25)
        if probe.results != probe.rounds or probe.both != probe.rounds or probe.bad or probe.rounds == 0:
            raise RuntimeError(f"V={values}: {probe.both} of {probe.rounds} probe rounds came back to both workers "
                               f"({probe.bad} wrong); switch counters {probe.switch}")
        for run in range(runs):
            results.append([])
            for rate in rates:
                s = bench.step(rate, duration)
                results[-1].append(s)
                print(f"  {side}V={values} run {run + 1}/{runs}: offered {CHILDREN} x {rate:>6,} pps"
                      f"  results {s.results_per_s:>7,.0f}/s = {s.aggregated_pps:>7,.0f} aggregated pps"
                      f" ({s.mbytes_per_s:5.1f} MB/s)  loss {s.loss:6.1%} [pre-pipeline {s.before_pipeline:,},"
                      f" incomplete {s.incomplete:,}, stale {s.switch['stale']:,}]  late {s.results - s.in_step:,}"
                      f"  cpu " + " ".join(f"{name} {share:.0%}" for name, share in s.cpu.items())
                      + _oddities(s), flush=True)
            if switch.poll() is not None:
                raise RuntimeError(f"the switch exited ({switch.returncode})")
    return results


def _oddities(s: Step) -> str:
    notes = []
    if s.achieved < 0.98 * s.offered:
        notes.append(f"a sender reached only {s.achieved:,.0f} pps")
    if s.lag > 0.05:
        notes.append(f"a sender fell {s.lag * 1e3:.0f} ms behind")
    for what, n in (("rounds only one sender sent", s.sent - CHILDREN * s.rounds), ("send errors", s.send_errors),
                    ("wrong results", s.bad), ("duplicate results", s.dups),
                    ("results dropped by a worker socket", s.rx_drops),
                    ("result copies missing at one worker", s.results - s.both),
                    ("unknown-member drops", s.switch["unknown_member"]), ("truncated drops", s.switch["truncated"]),
                    ("results the switch made but nobody got", s.switch["results"] - s.results)):
        if n:
            notes.append(f"{n:,} {what}")
    return "".join(f"  ({n})" for n in notes)


def summarize(values: int, results: list[list[Step]], side: str = "") -> dict[str, float]:
    runs, duration = len(results), results[0][0].duration
    frame = ETH_IP_UDP + 16 + 4 * values
    print(f"\n{side}V={values} ({frame}-byte frames): medians over {runs} run(s) of {duration:g} s steps; "
          f"loss = rounds without a result")
    print(f"  {'offered/worker':>14}  {'achieved':>8}  {'results/s':>9}  {'aggr pps':>8}  {'MB/s':>6}  {'loss':>6}"
          f"  {'pre-pipe':>8}  {'incompl.':>8}  {'stale':>5}  {'switch cpu':>10}  {'machine cpu':>11}")
    for i, offered in enumerate(s.offered for s in results[0]):
        row = [run[i] for run in results]

        def med(f: Callable[[Step], float], row: list[Step] = row) -> float:
            return statistics.median(f(s) for s in row)

        print(f"  {offered:>14,}  {med(lambda s: s.achieved):>8,.0f}  {med(lambda s: s.results_per_s):>9,.0f}"
              f"  {med(lambda s: s.aggregated_pps):>8,.0f}  {med(lambda s: s.mbytes_per_s):>6.1f}"
              f"  {med(lambda s: s.loss):>6.1%}  {med(lambda s: s.before_pipeline):>8,.0f}"
              f"  {med(lambda s: s.incomplete):>8,.0f}  {med(lambda s: s.switch['stale']):>5,.0f}"
              f"  {med(lambda s: s.cpu['switch']):>10.0%}  {med(lambda s: s.cpu['all']):>7.0%} of {os.cpu_count()}")
    peaks = [max(run, key=lambda s: s.aggregated_pps) for run in results]
    agg = statistics.median(s.aggregated_pps for s in peaks)
    print("  saturation per run: " + ", ".join(f"{s.aggregated_pps:,.0f} aggregated pps at {s.offered:,}/worker"
                                               for s in peaks))
    print(f"  figure: {agg:,.0f} aggregated pps = {agg / CHILDREN:,.0f} results/s = "
          f"{agg * values * 4 / 1e6:.1f} MB/s of int32 gradient (median of the runs' saturation)", flush=True)
    return {"side": side.strip(), "values": values, "aggregated_pps": agg, "results_per_s": agg / CHILDREN,
            "mbytes_per_s": agg * values * 4 / 1e6}


def write_results(all_results: dict[tuple[str, int], list[list[Step]]]) -> Path:
    cpu_keys = ["switch", *(f"{r}{c}" for r in ("sender", "receiver") for c in range(CHILDREN)), "all"]
    rows = [{"switch": side.split(":")[0] or "new", "values": values, "run": run, "offered_pps_per_worker": s.offered,
             "achieved_pps_per_worker": round(s.achieved), "rounds": s.rounds, "results": s.results,
             "results_in_step": s.in_step, "results_per_s": round(s.results_per_s),
             "aggregated_pps": round(s.aggregated_pps), "gradient_MBps": round(s.mbytes_per_s, 2),
             "loss": round(s.loss, 4), "lost_before_pipeline": s.before_pipeline,
             "incomplete_contributions": s.incomplete, "stale": s.switch["stale"],
             "switch_aggregated": s.switch["aggregated"], "switch_results": s.switch["results"],
             "results_at_both": s.both, "duplicates": s.dups, "wrong": s.bad, "send_errors": s.send_errors,
             "rx_drops": s.rx_drops, "sender_lag_ms": round(s.lag * 1e3, 1),
             **{f"{k}_cpu": round(s.cpu[k], 2) for k in cpu_keys}}
            for (side, values), results in all_results.items() for run, steps in enumerate(results, 1) for s in steps]
    return write_rows(RESULTS / "veth_ina.csv", rows, digits=None)


def plot(csv_path: Path, path: Path) -> Path:
    """Delivered against offered load, per switch and V: the median over runs of each step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for (switch, values) in dict.fromkeys((r["switch"], r["values"]) for r in rows):
        mine = [r for r in rows if (r["switch"], r["values"]) == (switch, values)]
        offered = sorted({int(r["offered_pps_per_worker"]) for r in mine})
        delivered = [statistics.median(float(r["aggregated_pps"]) for r in mine
                                       if int(r["offered_pps_per_worker"]) == o) for o in offered]
        ax.plot([CHILDREN * o for o in offered], delivered, marker="o",
                linestyle="-" if switch == "new" else "--", label=f"{switch} switch, V = {values}")
    top = max(float(r["aggregated_pps"]) for r in rows)
    ax.plot([0, top * 1.1], [0, top * 1.1], color="grey", linewidth=0.8, linestyle=":", label="all delivered")
    ax.set(xlabel="contributions offered per second (both workers)", ylabel="aggregated packets/s delivered",
           xscale="log", yscale="log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("ina.p4 on the built-in target through veth ports (p4target-switch-grpc), median of runs",
                 fontsize=9)
    return save_figure(fig, path)


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per step")
    ap.add_argument("--rates", type=_ints, default=RATES, help="offered loads per worker in pps, comma-separated")
    ap.add_argument("--values", type=_ints, default=VALUES, help="INA_VALUES to measure, comma-separated")
    ap.add_argument("--window", type=int, default=WINDOW, help="slots the job cycles through (pool size)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 run, 0.5 s steps, 3 loads")
    ap.add_argument("--against", metavar="REV", help="also run this commit's switch, side by side")
    ap.add_argument("--plot-only", action="store_true", help="redraw the plot from bench/results/veth_ina.csv")
    add_publish_argument(ap)
    args = ap.parse_args()
    if args.plot_only:
        publish(plot(RESULTS / "veth_ina.csv", FIGURE), args.publish)
        return 0
    if args.quick:
        args.runs, args.duration, args.rates = 1, 0.5, [1_000, 5_000, 20_000]
    if not 1 <= args.window <= 0xFFFF:
        ap.error("--window must be 1..65535")
    if not prepare("bench_veth_ina"):
        return 1
    all_results: dict[tuple[str, int], list[list[Step]]] = {}
    figures = []
    try:
        with worktree(args.against) if args.against else contextlib.nullcontext() as old:
            sides = ([(f"old {args.against}: ", old)] if old else []) + [("new: " if old else "", None)]
            with network() as (links, w):
                for values in args.values:
                    print(f"V={values}: switch on {links[1].a}, {links[2].a}; a sender and a receiver in each of "
                          f"h1, h2; window {args.window} slots", flush=True)
                    for _ in range(args.runs):  # the sides alternate run by run
                        for side, root in sides:
                            all_results.setdefault((side, values), []).extend(
                                measure(w, links, values, args.rates, 1, args.duration, args.window, root, side))
                    figures += [summarize(values, all_results[side, values], side) for side, _ in sides]
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    finally:
        if all_results:
            complete = len(figures) == len(args.values) * (2 if args.against else 1)
            print(f"\nwrote {write_results(all_results)}" + ("" if complete else " (partial)"))
            if complete and not args.quick:
                publish(plot(RESULTS / "veth_ina.csv", FIGURE), args.publish)
    print("\nsummary (median over runs of each run's saturation):")
    for f in figures:
        print(f"  {f['side'] + ' ' if f['side'] else ''}V={f['values']:>3}: {f['aggregated_pps']:>7,.0f} aggregated pps"
              f"  {f['results_per_s']:>7,.0f} results/s  {f['mbytes_per_s']:5.1f} MB/s of int32 gradient")
    if args.against:
        for values in args.values:
            old, new = (f["aggregated_pps"] for f in figures if f["values"] == values)
            print(f"  V={values}: new / old = {new / old:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
