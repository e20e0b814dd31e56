"""Seeded fault campaigns: each seed draws a network, a job and a fault schedule, runs it in the
fabric, and checks what must hold whatever the faults:

- every call completed on a worker is within the switches' stated bound (``quantize``; a ring
  alone: float summation's) of the exact sum, and bit-identical on every worker that completed it;
- every call that did not complete ended in a clear error (an ``AllreduceError``) within its
  timeout of its last progress, in virtual time; and it may fail only when the controller said
  no tree could join the members any more, or a worker was killed;
- nothing hangs: no living worker waits past its timeout without an error, and by the end every
  worker that lives has finished or failed;
- after a job whose calls all completed, every cell of its trees' pools that holds one of its
  rounds is consistent (arrivals = bits set in the bitmap) and complete (every child counted).

The sums and the workers' progress are checked as the run goes (``virtual_fabric.invariants``):
a broken one stops the run at its virtual time.  The networks are drawn from ``SHAPES`` and the
faults from ``virtual_fabric.faults.KINDS``; every random stream is the seed's, by purpose
(``virtual_fabric.seeds``).  ``run_seed`` is a function of the seed (and this commit): the same
seed prints the same lines.
"""

from __future__ import annotations

import os
import pickle
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from controller.topology import Topology, leaf_spine, single, tree
from virtual_fabric import seeds
from virtual_fabric.fabric import Fabric
from virtual_fabric.faults import KINDS, Target
from virtual_fabric.invariants import Monitor
from virtual_fabric.runs import RunConfig, with_aggregation_rate

TIMEOUT = 10.0  # the workers' (virtual) seconds without progress: above the controller's dead_after + a watch
DTYPES = ("float32", "float32", "float64", "float16", "int32")
FAULTS = tuple(KINDS)
# the networks a seed may draw: name: (workers, the topology's spec for that many)
SHAPES: dict[str, tuple[Callable[[random.Random], int], Callable[[int], dict]]] = {
    "single": (lambda rng: rng.randint(2, 8), single),
    "tree": (lambda rng: rng.choice([4, 6, 8]), lambda n: tree(2, n // 2)),
    "leaf_spine": (lambda rng: 4, lambda n: leaf_spine(2, 2, n // 2)),
}
# link rates a seed may draw, Mb/s, with their propagation delays: a campus's (no delay) or a datacenter's
RATES = {"campus": ((100.0, 1000.0, 10000.0), (None,)),
         "datacenter": ((10000.0, 25000.0, 40000.0, 100000.0), ("1us", "2us", "5us", "10us"))}
MODES = ("ina", "ina", "ina", "hybrid", "auto", "ring")  # hybrids and auto with a known C (``agg_rate``)
TEMPLATES = 16  # fabrics a campaign keeps built, to fork seeds of the same network from


@dataclass
class Scenario:
    seed: int
    topology: str
    workers: int
    values: int
    window: int
    trees: int | str
    dtype: str
    size: int
    calls: int
    host_mbps: float
    fabric_mbps: float
    delay: str | None = None
    mode: str = "ina"
    agg_rate: float | None = None  # each switch sums this fraction of the link rate per child (C), or as fast
    faults: dict[str, dict] = field(default_factory=dict)  # kind: its parameters (``faults.KINDS``)

    def describe(self) -> str:
        faults = ", ".join(f"{k}({', '.join(f'{a}={v}' for a, v in p.items())})" for k, p in self.faults.items())
        return (f"{self.topology}, {self.workers} workers, mode {self.mode}"
                f"{f' C={self.agg_rate:g}L' if self.agg_rate else ''}, V={self.values} W={self.window} "
                f"trees={self.trees} {self.dtype}[{self.size}] x{self.calls}, links "
                f"{self.host_mbps:g}/{self.fabric_mbps:g} Mb/s{f' {self.delay}' if self.delay else ''}; "
                f"faults: {faults or 'none'}")


def draw(seed: int) -> Scenario:
    """The scenario of a seed: everything random about a run comes from here and the seed's other
    streams (the links', the switches', the generators' faults)."""
    rng = seeds.stream(seed, "draw")
    shape = rng.choice(list(SHAPES))
    workers = SHAPES[shape][0](rng)
    values = rng.choice([64, 64, 256])  # 256 (the default) builds a switch 3x slower
    window = rng.choice([1, 2, 4, 8, 16, 64])
    dtype = rng.choice(DTYPES)
    size = values * rng.randint(1, 24) + rng.randint(0, values - 1)
    rates, delays = RATES[rng.choice(list(RATES))]
    host = rng.choice(rates)
    s = Scenario(seed, shape, workers, values, window, rng.choice([1, "auto"]), dtype, size, rng.randint(2, 4), host,
                 host / rng.choice([1, 2]), rng.choice(delays), rng.choice(MODES))
    if s.mode in ("hybrid", "auto"):
        s.agg_rate = rng.choice([0.25, 0.5, 0.75])
    for kind in sorted(rng.sample(FAULTS, rng.randint(0, 3)), key=FAULTS.index):
        s.faults[kind] = KINDS[kind].draw(rng)
    return s


def topology_of(s: Scenario) -> tuple[Topology, list[str]]:
    spec = SHAPES[s.topology][1](s.workers)
    for link in spec["links"]:
        to_host = any(not end.split("-p")[-1].isdigit() or "-p" not in end for end in link[:2])
        options = link[2] if len(link) == 3 else {}
        options["bw"] = s.host_mbps if to_host else s.fabric_mbps
        if s.delay:
            options["delay"] = s.delay
        if len(link) == 2:
            link.append(options)
    topology = Topology.from_dict(spec)
    hosts = sorted(topology.hosts, key=lambda h: int(h[1:]))[:s.workers]
    if s.agg_rate is not None:
        config = RunConfig(values=s.values, trees=s.trees, pool_size=s.window, agg_rate=s.agg_rate)
        topology = with_aggregation_rate(topology, hosts, config)
    return topology, hosts


def arrays_of(s: Scenario, rank: int, call: int) -> np.ndarray:
    rng = np.random.default_rng([s.seed, rank, call])  # a stream per (seed, rank, call): numpy's own spawn
    if s.dtype == "int32":
        return rng.integers(-1000, 1000, s.size, dtype=np.int32)
    scale = 10.0 ** rng.integers(-3, 4)
    return (rng.standard_normal(s.size) * scale).astype(s.dtype)


@dataclass
class Outcome:
    scenario: Scenario
    violations: list[str]
    completed: int  # calls completed, over workers
    failed: int
    virtual: float
    events: int
    passes: int
    injected: list[tuple[str, str]]  # (kind, what and when): the seed's faults as they were injected


def run_seed(seed: int) -> Outcome:
    s = draw(seed)
    return play(s, Fabric(topology_of(s)[0], seed, values=s.values))


def _network_key(s: Scenario) -> tuple:
    """What a fabric is built from, before any seed's job: the same for many seeds."""
    planned = (s.trees, s.window) if s.agg_rate is not None else None  # the switches' agg_pps follow the plan
    return s.topology, s.workers, s.values, s.host_mbps, s.fabric_mbps, s.delay, s.agg_rate, planned


def run_seeds(first: int, count: int, processes: int | None = None) -> Iterator[Outcome]:
    """``run_seed`` for seeds first .. first+count-1, in order, each in a child forked from a fabric
    built once per network (its switches provisioned, no job yet, its streams seeded again in
    the child), ``processes`` at a time.  A fabric takes far longer to build than most runs take,
    and a child's run is exactly ``run_seed``'s: nothing random happens before the job."""
    processes = processes or os.cpu_count() or 1
    built: OrderedDict[tuple, Fabric] = OrderedDict()  # the networks built last, the oldest first
    running: deque[tuple[int, int, int]] = deque()  # (seed, pid, read end of its pipe)
    seeds_left = iter(range(first, first + count))
    while True:
        while len(running) < processes and (seed := next(seeds_left, None)) is not None:
            s = draw(seed)
            key = _network_key(s)
            if key not in built:
                built[key] = Fabric(topology_of(s)[0], 0, values=s.values)
                if len(built) > TEMPLATES:  # each holds its switches' registers: the parent's memory stays bounded
                    built.popitem(last=False)
            built.move_to_end(key)
            running.append((seed, *_fork(s, built[key])))
        if not running:
            return
        seed, pid, fd = running.popleft()
        with os.fdopen(fd, "rb") as pipe:
            data = pipe.read()
        os.waitpid(pid, 0)
        if not data:
            raise RuntimeError(f"seed {seed}: its process died without an outcome (replay: ina-sim run --seed {seed})")
        yield pickle.loads(data)


def _fork(s: Scenario, template: Fabric) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: play the seed on its copy of the fabric, send the outcome, leave at once
        status = 1
        try:
            os.close(read)
            template.reseed(s.seed)
            try:
                outcome = play(s, template)
            except Exception as e:  # noqa: BLE001 - a crash is the seed's violation, not the campaign's end
                outcome = Outcome(s, [f"the run crashed: {type(e).__name__}: {e}"], 0, 0, template.loop.now, 0, 0, [])
            with os.fdopen(write, "wb") as pipe:
                pipe.write(pickle.dumps(outcome))
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def play(s: Scenario, fabric: Fabric) -> Outcome:
    """The seed's job and faults on a fabric built for it (``Fabric(topology_of(s)[0], s.seed, ...)``)."""
    hosts = topology_of(s)[1]
    arrays = [[arrays_of(s, r, c) for c in range(s.calls)] for r in range(s.workers)]
    job = fabric.create_job("job", hosts, arrays, timeout=TIMEOUT, pool_size=s.window, trees=s.trees, mode=s.mode)
    Monitor(fabric, job, arrays, TIMEOUT)
    planned = fabric.controller.job_plan("job")  # the job's length as the model predicts it
    nbytes = s.size * np.dtype(s.dtype).itemsize
    span = sum(planned.choose(nbytes, s.dtype, opening=c == 0).seconds for c in range(s.calls))
    switches = sorted({sw for t in job.spec.trees for sw in _switches_of(fabric, t.job_id)}) or sorted(fabric.switches)
    target = Target(fabric, job, switches, span)
    injected = [(kind, KINDS[kind].inject(target, params)) for kind, params in s.faults.items()]
    limit = span + 4 * TIMEOUT + 10
    fabric.run(limit)
    if fabric.loop.violation is not None:  # the run stopped at the first broken invariant
        when, what = fabric.loop.violation
        violations = [f"at {when:.6f} s: {what}"]
    else:
        violations = check(s, fabric, job, limit)
    completed = sum(1 for w in job.workers for r in w.records if r.result is not None)
    failed = sum(1 for w in job.workers for r in w.records if r.error is not None)
    return Outcome(s, violations, completed, failed, fabric.loop.now, fabric.loop.events,
                   sum(sw.passes for sw in fabric.switches.values()),
                   [(kind, line) for kind, lines in injected for line in lines])


def _switches_of(fabric: Fabric, job_id: int) -> list[str]:
    record = next(t for j in fabric.controller.state.jobs.values() for t in j.trees if t.job_id == job_id)
    return sorted(record.tree.switches())


def check(s: Scenario, fabric: Fabric, job, limit: float) -> list[str]:
    """What can be judged only at the end: nothing hangs, every failure was allowed (a worker may die
    after another's call failed), and the registers of a job that completed.  The sums and each
    failure's error and timing were checked as they came (``Monitor``)."""
    out = []
    workers = job.workers
    killed = any(not w.alive for w in workers)
    cut_off = any("no other tree joins" in line or "does not fit" in line for _, line in fabric.log)
    for w in workers:
        if w.alive and not w.done:
            out.append(f"hang: rank {w.rank} still in call {len(w.records) - 1} at {fabric.loop.now:.3f} s "
                       f"(limit {limit:.3f} s)")
    for c in range(s.calls):
        for rank, r in [(w.rank, w.records[c]) for w in workers if len(w.records) > c]:
            if r.error is None or r.error == "killed":
                continue
            if not killed and not cut_off:
                out.append(f"call {c}: rank {rank} failed though every worker lived and a tree joined them: "
                           f"{r.error[:160]}")
    if not out and all(len(w.records) == s.calls and all(r.result is not None for r in w.records) for w in workers):
        out += registers_consistent(fabric, job)
    return out


def registers_consistent(fabric: Fabric, job) -> list[str]:
    """The pool cells of the job's trees that hold one of its rounds (its epoch on that switch):
    as many arrivals as bits in the bitmap, no bit beyond the switch's children, no round past the
    last packet sent; and every round complete, unless the tree's switches lost their registers
    (then a recovery's echoes may start again a round that every worker had, and some stop
    before all have sent it: harmless, a later round overwrites the cell)."""
    out = []
    controller = fabric.controller
    record = controller.state.jobs[job.spec.name]
    sent = max((t.next_packet for w in job.workers for t in w.trees), default=0)
    for t in record.trees:
        nodes = controller.tree_nodes(record, t)
        for name, alloc in t.allocations.items():
            switch = fabric.switches[name]
            if name not in nodes or not switch.up:
                continue
            regs = switch.registers()
            bitmap, arrivals, epochs, seqs = (np.asarray(list(regs[f"InaIngress.{r}"].cells), dtype=np.int64)
                                              for r in ("bitmap", "arrivals", "round_epoch", "round_seq"))
            cells = np.arange(2 * alloc.pool_base, 2 * (alloc.pool_base + record.pool_size))
            mine = cells[epochs[cells] == alloc.epoch]
            children = len(nodes[name].children)
            bits = np.array([bin(int(b)).count("1") for b in bitmap[mine]], dtype=np.int64)
            bad = (bits != arrivals[mine]) | ((bitmap[mine] >> children) != 0) | (seqs[mine] > sent)
            if t.incarnation == 0:
                bad |= arrivals[mine] != children
            if bad.any():
                c = int(mine[np.argmax(bad)])
                out.append(f"{name}: {int(bad.sum())} cell(s) of tree {t.job_id} wrong after the job, first cell "
                           f"{c}: bitmap {int(bitmap[c]):#x}, arrivals {int(arrivals[c])}, round {int(seqs[c])} "
                           f"(last sent {sent}), {children} children, incarnation {t.incarnation}")
    return out
