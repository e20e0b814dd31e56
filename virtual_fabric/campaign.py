"""Seeded fault campaigns: each seed draws a network, a job and a fault schedule, runs it in the
fabric, and checks what must hold whatever the faults:

- every call completed on a worker is within the switches' stated bound (``quantize``) of the
  exact sum, and bit-identical on every worker that completed it;
- every call that did not complete ended in a clear error (an ``AllreduceError``) within its
  timeout of its last progress, in virtual time; and it may fail only when the controller said
  no tree could join the members any more, or a worker was killed;
- nothing hangs: by the end every worker that lives has finished or failed;
- after a job whose calls all completed, every cell of its trees' pools that holds one of its
  rounds is consistent (arrivals = bits set in the bitmap) and complete (every child counted).

``run_seed`` is a function of the seed (and this commit): the same seed prints the same lines.
"""

from __future__ import annotations

import os
import pickle
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from controller.topology import Topology, leaf_spine, single, tree
from virtual_fabric.fabric import Fabric
from worker import quantize

TIMEOUT = 10.0  # the workers' (virtual) seconds without progress: above the controller's dead_after + a watch
DTYPES = ("float32", "float32", "float64", "float16", "int32")
FAULTS = ("loss", "duplication", "reordering", "restart", "switch_down", "link_down", "worker_dies")


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
    faults: dict[str, float | str] = field(default_factory=dict)

    def describe(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in self.faults.items()) or "none"
        return (f"{self.topology}, {self.workers} workers, V={self.values} W={self.window} trees={self.trees} "
                f"{self.dtype}[{self.size}] x{self.calls}, links {self.host_mbps:g}/{self.fabric_mbps:g} Mb/s; "
                f"faults: {faults}")


def draw(seed: int) -> Scenario:
    """The scenario of a seed: everything random about a run comes from here and the fabric's generator."""
    rng = random.Random(seed)
    shape = rng.choice(["single", "tree", "leaf_spine"])
    workers = rng.randint(2, 8) if shape == "single" else rng.choice([4, 6, 8]) if shape == "tree" else 4
    values = rng.choice([64, 64, 256])  # 256 (the default) builds a switch 3x slower
    window = rng.choice([1, 2, 4, 8, 16, 64])
    dtype = rng.choice(DTYPES)
    size = values * rng.randint(1, 24) + rng.randint(0, values - 1)
    host = rng.choice([100.0, 1000.0, 10000.0])
    s = Scenario(seed, shape, workers, values, window, rng.choice([1, "auto"]), dtype, size, rng.randint(2, 4), host,
                 host / rng.choice([1, 2]))
    faults = rng.sample(FAULTS, rng.randint(0, 3))
    if "loss" in faults:
        s.faults["loss"] = round(rng.uniform(0.005, 0.08), 4)
    if "duplication" in faults:
        s.faults["duplication"] = round(rng.uniform(0.005, 0.05), 4)
    if "reordering" in faults:
        s.faults["reordering"] = round(rng.uniform(0.01, 0.2), 3)
    if "duplication" in faults or "reordering" in faults:
        s.faults["late_by"] = round(rng.uniform(0.0002, 0.03), 4)  # seconds: past the RTO, past a slot's reuse
    # moments as a share of the job's length (a restart may come before, during or after it)
    for kind in ("switch_down", "link_down", "worker_dies"):
        if kind in faults:
            s.faults[kind] = round(rng.uniform(0.0, 1.5), 3)
    if "restart" in faults:  # one or two, each down for a while (the controller looks every 0.5 s)
        s.faults["restart"] = "/".join(f"{rng.uniform(0.0, 1.5):.3f}+{rng.uniform(0.01, 1.0):.2f}s"
                                       for _ in range(rng.randint(1, 2)))
    return s


def topology_of(s: Scenario) -> tuple[Topology, list[str]]:
    if s.topology == "single":
        spec = single(s.workers)
    elif s.topology == "tree":
        spec = tree(2, s.workers // 2)
    else:
        spec = leaf_spine(2, 2, s.workers // 2)
    for link in spec["links"]:
        to_host = any(not end.split("-p")[-1].isdigit() or "-p" not in end for end in link[:2])
        options = link[2] if len(link) == 3 else {}
        options["bw"] = s.host_mbps if to_host else s.fabric_mbps
        if len(link) == 2:
            link.append(options)
    topology = Topology.from_dict(spec)
    return topology, sorted(topology.hosts, key=lambda h: int(h[1:]))[:s.workers]


def arrays_of(s: Scenario, rank: int, call: int) -> np.ndarray:
    rng = np.random.default_rng([s.seed, rank, call])
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
    injected: list[tuple[str, str]]  # (kind, what and when): the moments of the seed's faults


def run_seed(seed: int) -> Outcome:
    s = draw(seed)
    return play(s, Fabric(topology_of(s)[0], seed, values=s.values))


def _network_key(s: Scenario) -> tuple:
    """What a fabric is built from, before any seed's job: the same for many seeds."""
    return s.topology, s.workers, s.values, s.host_mbps, s.fabric_mbps


def run_seeds(first: int, count: int, processes: int | None = None) -> Iterator[Outcome]:
    """``run_seed`` for seeds first .. first+count-1, in order, each in a child forked from a fabric
    built once per network (its switches provisioned, no job yet, its generator seeded again in
    the child), ``processes`` at a time.  A fabric takes far longer to build than most runs take,
    and a child's run is exactly ``run_seed``'s: nothing random happens before the job."""
    processes = processes or os.cpu_count() or 1
    built: dict[tuple, Fabric] = {}
    running: deque[tuple[int, int, int]] = deque()  # (seed, pid, read end of its pipe)
    seeds = iter(range(first, first + count))
    while True:
        while len(running) < processes and (seed := next(seeds, None)) is not None:
            s = draw(seed)
            key = _network_key(s)
            if key not in built:
                built[key] = Fabric(topology_of(s)[0], 0, values=s.values)
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
            template.rng.seed(s.seed)
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
    seed, topology, hosts = s.seed, fabric.topology, topology_of(s)[1]
    arrays = [[arrays_of(s, r, c) for c in range(s.calls)] for r in range(s.workers)]
    job = fabric.create_job("job", hosts, arrays, timeout=TIMEOUT, pool_size=s.window, trees=s.trees, mode="ina")
    channels = fabric.all_channels()
    for c in channels:
        c.faults.loss = float(s.faults.get("loss", 0.0))
        c.faults.duplication = float(s.faults.get("duplication", 0.0))
        c.faults.reorder = float(s.faults.get("reordering", 0.0))
        c.faults.reorder_delay = float(s.faults.get("late_by", 0.0))
    planned = fabric.controller.job_plan("job")  # the job's length as the model predicts it
    nbytes = s.size * np.dtype(s.dtype).itemsize
    span = sum(planned.choose(nbytes, s.dtype, opening=c == 0).seconds for c in range(s.calls))
    rng = random.Random(seed * 7919 + 1)
    injected = []
    switches = sorted({sw for t in job.spec.trees for sw in _switches_of(fabric, t.job_id)})
    for restart in str(s.faults.get("restart", "")).split("/") if "restart" in s.faults else ():
        moment, down = restart.rstrip("s").split("+")
        victim = rng.choice(switches)
        at = float(moment) * span
        fabric.loop.at(at, fabric.kill_switch, victim)
        fabric.loop.at(at + float(down), fabric.restart_switch, victim)
        injected.append(("switch restart", f"restart {victim} at {at:.4f} s for {down} s"))
    if "switch_down" in s.faults:
        victim = rng.choice(switches)
        at = float(s.faults["switch_down"]) * span
        fabric.loop.at(at, fabric.kill_switch, victim)
        injected.append(("switch down", f"{victim} down at {at:.4f} s"))
    if "link_down" in s.faults:
        index = rng.randrange(len(topology.links))
        at = float(s.faults["link_down"]) * span
        fabric.loop.at(at, fabric.set_link, index, False)
        link = topology.links[index]
        injected.append(("link down", f"link {link.a} -- {link.b} down at {at:.4f} s"))
    if "worker_dies" in s.faults:
        victim = rng.randrange(s.workers)
        at = float(s.faults["worker_dies"]) * span
        fabric.loop.at(at, job.workers[victim].kill)
        injected.append(("worker dies", f"rank {victim} dies at {at:.4f} s"))
    limit = span + 4 * TIMEOUT + 10
    fabric.run(limit)
    violations = check(s, fabric, job, arrays, limit)
    completed = sum(1 for w in job.workers for r in w.records if r.result is not None)
    failed = sum(1 for w in job.workers for r in w.records if r.error is not None)
    return Outcome(s, violations, completed, failed, fabric.loop.now, fabric.loop.events,
                   sum(sw.passes for sw in fabric.switches.values()), injected)


def _switches_of(fabric: Fabric, job_id: int) -> list[str]:
    record = next(t for j in fabric.controller.state.jobs.values() for t in j.trees if t.job_id == job_id)
    return sorted(record.tree.switches())


def check(s: Scenario, fabric: Fabric, job, arrays: list[list[np.ndarray]], limit: float) -> list[str]:
    out = []
    workers = job.workers
    killed = any(not w.alive for w in workers)
    cut_off = any("no other tree joins" in line or "does not fit" in line for _, line in fabric.log)
    for w in workers:
        if w.alive and not w.done:
            out.append(f"hang: rank {w.rank} still in call {len(w.records) - 1} at {fabric.loop.now:.3f} s "
                       f"(limit {limit:.3f} s)")
    for c in range(s.calls):
        results = [(w.rank, w.records[c]) for w in workers if len(w.records) > c]
        done = [(rank, r.result) for rank, r in results if r.result is not None]
        if done:
            exact = np.sum([a[c].astype(np.float64) for a in arrays], axis=0)
            if s.dtype == "int32":
                bound = np.zeros_like(exact)
            else:
                bound = quantize.elementwise_bound([a[c] for a in arrays], s.values)
                bound = bound + np.abs(exact) * float(np.finfo(np.dtype(s.dtype)).eps)
            rank0, first = done[0]
            err = np.abs(first.astype(np.float64) - exact)
            if not (err <= bound).all():
                i = int(np.argmax(err - bound))
                out.append(f"call {c}: rank {rank0}'s sum is off by {err[i]:.3g} at {i} (bound {bound[i]:.3g})")
            for rank, result in done[1:]:
                if result.tobytes() != first.tobytes():
                    out.append(f"call {c}: rank {rank}'s sum differs from rank {rank0}'s")
        for rank, r in results:
            if r.error is None or r.error == "killed":
                continue
            if not r.error.startswith(("AllreduceTimeout", "AllreduceError", "SwitchOverflowError")):
                out.append(f"call {c}: rank {rank} failed unclearly: {r.error}")
            if r.error.startswith("AllreduceTimeout") and r.last_progress is not None \
                    and r.ended - r.last_progress > TIMEOUT + 0.1:
                out.append(f"call {c}: rank {rank} timed out {r.ended - r.last_progress:.3f} s after its last "
                           f"progress (timeout {TIMEOUT} s)")
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
    sent = max(t.next_packet for w in job.workers for t in w.trees)
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
