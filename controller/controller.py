"""The controller: turns a network of P4 switches into an aggregation service.

It keeps one P4Runtime client per switch, pushes the pipeline, installs IPv4 routes between
all hosts, and creates and deletes jobs.  Every write is idempotent (an entry that exists is
modified), so ``setup`` and re-provisioning can run any number of times; a switch whose
pipeline cookie is not ours (it restarted) gets the pipeline and everything live again.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from controller import capacity, hybrid, plan, programs
from controller.capacity import CapacityError
from controller.entries import (
    HIGH_WATER_CHILD,
    Allocation,
    high_water_entry,
    job_entries,
    read_high_water,
    route_entries,
)
from controller.network import Network
from controller.p4runtime_client import SwitchConnection, SwitchError
from controller.pipeline import Pipeline, PipelineOptions
from controller.programs import V1MODEL
from controller.schema import Entry, Schema
from controller.state import ControllerState, JobRecord, TreeRecord
from controller.switch_io import SwitchIO
from controller.topology import Topology, TopologyError
from worker import protocol
from worker.jobspec import RING_SUMS, JobSpec, Member, TreeSpec

log = logging.getLogger("ina.controller")
# A job's workers listen on WORKER_PORT_BASE + job_id (UDP for a tree, TCP for a ring): below Linux's
# ephemeral range (32768-60999), so no outgoing connection on the host can already hold the port.
WORKER_PORT_BASE = 16384
DEAD_AFTER = 3.0  # seconds unreachable before a switch counts as down (a restart takes less)
# Slots per switch for each of a job's trees, so the workers' window: 8 already fill 50 Mbit/s links
# (bench_allreduce), and 64 keep them full at 1-5% loss, where a lost packet's slot waits a while
# (bench_loss), in 1/16 of ina.p4's pool.  tests/test_defaults.py keeps the benchmarks on it.
DEFAULT_POOL_SIZE = 64
MAX_JOB_ID = 32767 - WORKER_PORT_BASE
MANAGED_TABLES = V1MODEL.managed_tables  # ina.p4's; a switch's own are pipeline(switch).program.managed_tables
Pending = list[tuple[Allocation, int]]  # trees' allocations on one switch, with their pool sizes


class JobError(ValueError):
    """A job request that cannot be carried out; nothing was changed."""


class JobExists(JobError):
    """The name is taken by a live job."""


class NoSuchJob(JobError):
    """No live job has that name."""


@dataclasses.dataclass(frozen=True)
class JobPlan:
    """A job's packed trees and its split between them and a host ring.  Held apart: the tree planner
    knows nothing of rings, and the split model reads the trees (``hybrid`` imports ``plan``)."""

    tree_plan: plan.Plan  # the packed trees (none for a pure ring)
    split: hybrid.Split

    def seconds_per_mb(self) -> float:
        """Predicted time to allreduce 1 MB of tensor in the mode that runs."""
        return self.split.seconds_per_mb[self.split.mode]

    def to_dict(self, topology: Topology) -> dict:
        return {**self.tree_plan.to_dict(topology), "seconds_per_mb": self.seconds_per_mb(),
                "split": self.split.to_dict()}


def plan_job(topology: Topology, members: list[str], P: protocol.Protocol, trees: int | str | None = "auto",
             mode: str = "auto", alpha: float | None = None, ring_sum: str = "native") -> JobPlan:
    """The packed trees for these members and the split between them and a host ring, from the topology
    alone (``trees``: "auto" or at most N; ``mode``: ina, ring, hybrid or auto): no switch is needed."""
    try:
        if mode == "ring":  # no trees at all: the links alone bound it
            plan.check_members(topology, members)
            found = plan.Plan(tuple(members), (), 0.0, 0.0, (), 0, 0.0, P.wire_factor,
                              ("a pure ring: no aggregation trees",))
            links, limit, why = topology.slowest_link_mbps(members), math.inf, ""
        else:
            found = plan.plan_job(topology, members, P.MAX_CHILDREN, _tree_count(trees), P.wire_factor)
            links = found.rate  # every tree crosses every member's link, and a ring the same fabric
            limit, why = hybrid.aggregation_limit(topology, found, P.frame_bytes)
    except plan.PlanError as e:
        raise JobError(str(e)) from None
    return JobPlan(found, choose_split(P.wire_factor, len(members), links, limit, why, mode, alpha,
                                       ring_sum=ring_sum))


def choose_split(wire_factor: float, workers: int, links: float, limit: float, why: str, mode: str,
                 alpha: float | None, ring_mbps: float | None = None,
                 measured: dict[str, float] | None = None, ring_sum: str = "native") -> hybrid.Split:
    """``hybrid.choose`` on these capacities, its refusals as JobError (the controller's one error)."""
    if ring_sum not in RING_SUMS:
        raise JobError(f"ring_sum must be one of {', '.join(RING_SUMS)}, not {ring_sum!r}")
    capacity = hybrid.Capacity(workers, links, limit, wire_factor, why, ring_mbps, ring_sum)
    try:
        return hybrid.choose(capacity, mode, alpha, measured)
    except hybrid.SplitError as e:
        raise JobError(str(e)) from None


def fastest(options: PipelineOptions, network: Network) -> PipelineOptions:
    """``options`` with the values per packet fixed: where unset, the most every switch's program takes."""
    if options.values is not None:
        return options
    most = min((programs.by_arch(access.arch).max_values for access in network.access.values()),
               default=programs.V1MODEL.max_values)
    return dataclasses.replace(options, values=most)


class Controller:
    def __init__(self, network: Network, state_path: Path | None = None, options: PipelineOptions | None = None,
                 election_id: int | None = 1, spec_dir: Path | None = None,
                 connect: Callable[[str], SwitchConnection] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``connect`` opens a switch's connection by its name (default: a SwitchClient over gRPC to its
        access's address, with ``election_id``); ``clock`` tells how long a switch has been unreachable.
        A simulated fabric passes in-process connections and its virtual time."""
        self.network = network
        self.topology = network.topology
        self.state_path = state_path
        options = None if options is None else fastest(options, network)
        if state_path is not None and state_path.exists():
            self.state = ControllerState.load(state_path)
            if options is not None and options != self.state.options:
                raise JobError(f"{state_path} was made with {self.state.options}, not {options}")
        else:
            self.state = ControllerState(options or fastest(PipelineOptions(), network))
        self.spec_dir = spec_dir or (state_path.parent / "jobs" if state_path else None)
        self._state_mtime = state_path.stat().st_mtime_ns if state_path is not None and state_path.exists() else 0
        self.io = SwitchIO(network, lambda: self.state.options, election_id, connect)
        self.clock = clock
        self._lock = threading.RLock()
        self.dead_after = DEAD_AFTER  # seconds a switch may stay unreachable (a restart) before its trees move
        self._unreachable: dict[str, float] = {}  # switch: since when (self.clock)
        self._told: set[tuple] = set()  # failures already reported as leaving a tree without a path
        self._unsynced: set[str] = set()  # switches a write missed (a tree moved while they were away)

    # --- switches ------------------------------------------------------------------------------

    def pipeline(self, switch: str) -> Pipeline:
        return self.io.pipeline(switch)

    def client(self, switch: str) -> SwitchConnection:
        return self.io.client(switch)

    def close(self) -> None:
        self.io.close()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def setup(self) -> None:
        """Pipeline, routes and every live job on every switch; safe to repeat."""
        with self._lock:
            for switch in self.topology.switches:
                self.provision(switch)

    def provision(self, switch: str) -> bool:
        """Bring one switch up to date; True when it needed the pipeline (fresh or restarted).

        A switch that needed it has lost its registers under every live job on it: once its entries
        are back, each such tree's incarnation grows and its job spec is written again, which tells the
        job's workers to send their last window again (docs/protocol.md, "A switch restart")."""
        with self._lock:
            fresh = not self.io.runs_our_pipeline(switch)
            if fresh:
                log.info("%s: pushing the pipeline", switch)
                self.client(switch).set_pipeline(self.pipeline(switch).config)
            self._sync_counters(switch)
            entries, groups = self._expected(switch)
            self._remove_unexpected(switch, entries, groups)
            self.io.install(switch, entries, groups)
            if fresh:
                self._lost_registers(switch)
            return fresh

    def _lost_registers(self, switch: str) -> None:
        jobs = [job for job in self.state.jobs.values() if job.on(switch)]
        for job in jobs:
            for tree in job.on(switch):
                tree.incarnation += 1
        if not jobs:
            return
        self._save()
        for job in jobs:
            if self.spec_dir is not None:
                self.job_spec(job.name).save(self.spec_dir / f"{job.name}.json")
            log.warning("%s lost its registers under job %s: tree(s) %s now at incarnation %s; spec written again, "
                        "so the workers send their last window again", switch, job.name,
                        [t.job_id for t in job.on(switch)], [t.incarnation for t in job.on(switch)])

    def reachable(self, switch: str) -> bool:
        """Whether the switch answered last time it was asked (without asking it now)."""
        client = self.io.known(switch)
        return client is not None and client.alive and switch not in self._unreachable

    def check_switches(self) -> list[str]:
        """Re-provision switches that restarted (or lost their pipeline), and those a tree's move could not
        reach; returns the names of those that needed the pipeline."""
        restarted = []
        for switch in self.topology.switches:
            try:
                client = self.io.known(switch)
                if client is None or not client.alive or not self.io.runs_our_pipeline(switch) \
                        or switch in self._unsynced:
                    self._unreachable.setdefault(switch, self.clock())
                    if self.provision(switch):
                        restarted.append(switch)
                    self._unsynced.discard(switch)
                self._unreachable.pop(switch, None)
            except SwitchError as e:
                log.warning("%s: not reachable yet: %s", switch, e)
        return restarted

    def watch(self, interval: float = 1.0, stop: threading.Event | None = None) -> None:
        """Keep every switch provisioned until ``stop`` is set, and move trees off what stays down."""
        stop = stop or threading.Event()
        while not stop.wait(interval):
            self.watch_once()

    def watch_once(self) -> list[str]:
        """One round of ``watch``: follow the state file, provision restarted switches, move trees off
        what stayed down; returns (and logs) a line per thing done.  A simulated fabric calls it in
        virtual time."""
        self._reload_state()  # `ina-ctl job create/delete` run by others since
        lines = []
        for switch in self.check_switches():
            jobs = sum(bool(j.on(switch)) for j in self.state.jobs.values())
            lines.append(f"{switch} restarted: pipeline, routes and {jobs} job(s) installed again")
            log.warning("%s", lines[-1])
        for line in self.route_around(*self.failures()):
            lines.append(line)
            log.warning("%s", line)
        return lines

    # --- failures ------------------------------------------------------------------------------

    def failures(self) -> tuple[set[str], set[int]]:
        """The switches unreachable for ``dead_after`` seconds, and the links (indexes in the topology)
        that a reachable switch reports down (the built-in target reports its ports; BMv2 does not)."""
        now = self.clock()
        dead = {s for s, since in self._unreachable.items() if now - since >= self.dead_after}
        links = set()
        for switch, client in self.io.connections():
            if switch not in self._unreachable and client.alive:
                links |= {self.topology.port_links[switch, p] for p in client.ports_down
                          if (switch, p) in self.topology.port_links}
        return dead, links

    def route_around(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree that crosses a dead switch or link onto the best single tree of what survives;
        returns one line per tree moved (or left without a path).

        A moved tree keeps its job id, its share and its allocations on the switches it keeps (their
        cells hold its rounds), gets slots and a fresh epoch on the ones it gains, and its incarnation
        grows: its workers send their last window again (docs/protocol.md, "A switch restart"), and
        the rounds lost with the dead parts complete on the new path.  A packed job's trees may then
        share a root: each keeps its own slots, and the job runs at what the survivors carry."""
        if not dead and not links:
            return []
        lines = []
        with self._lock:
            P = self._protocol()
            for job in self.state.jobs.values():
                for tree in job.trees:
                    crossed = sorted(set(tree.tree.switches()) & dead) + \
                        [plan.link_name(self.topology, i) for i in sorted(self._links_of(job, tree) & links)]
                    if crossed:
                        lines += self._move_tree(job, tree, crossed, dead, links, P)
        return lines

    def _links_of(self, job: JobRecord, tree: TreeRecord) -> set[int]:
        return set(plan.fabric_links(self.topology, tree.tree)) | {self.topology.host_link(m) for m in job.members}

    def _move_tree(self, job: JobRecord, tree: TreeRecord, crossed: list[str], dead: set[str], links: set[int],
                   P: protocol.Protocol) -> list[str]:
        where = f"job {job.name}: tree {tree.job_id} (root {tree.tree.root}) crosses {', '.join(crossed)}, down"
        try:
            planned = plan.plan_job(self.topology.without(dead, links), job.members, P.MAX_CHILDREN, 1,
                                    P.wire_factor).trees[0]
        except (plan.PlanError, TopologyError) as e:
            key = (job.name, tree.job_id, frozenset(dead), frozenset(links))
            if key in self._told:
                return []
            self._told.add(key)
            return [f"{where}; no other tree joins its members ({e}): its workers will time out"]
        before = copy.deepcopy(job)
        allocations = {}
        try:
            for switch in planned.tree.switches():
                pipe = self.pipeline(switch)
                allocations[switch] = tree.allocations.get(switch) or Allocation(
                    self._free_pool(switch, job.pool_size, None, pipe.pool_slots, []),
                    self._free_cell(switch, pipe.max_jobs, []), self.state.take_epoch(switch))
        except (JobError, CapacityError) as e:
            return [f"{where}; the surviving tree (root {planned.tree.root}) does not fit: {e}"]
        tree.tree, tree.rate, tree.allocations = planned.tree, planned.rate, allocations
        tree.incarnation += 1
        job.version += 1
        self._save()
        gained = [s for s in planned.tree.switches() if s not in before.trees[job.trees.index(tree)].allocations]
        for switch in sorted(set(planned.tree.switches()) | (set(before.switches()) - dead)):
            try:  # each switch on its own: one that cannot be reached must not keep the others from the new tree
                if switch in gained:
                    self.io.install(switch, [self._high_water(switch)], [])
                if switch in planned.tree.switches():
                    self.io.install(switch, *self._job_entries(job, switch))
                if switch in before.switches():
                    old, old_groups = self._job_entries(before, switch)
                    new, new_groups = self._job_entries(job, switch) if switch in job.switches() else ([], [])
                    keys, group_ids = {(e.table, e.match) for e in new}, {g for g, _ in new_groups}
                    self.io.remove(switch, [e for e in old if (e.table, e.match) not in keys],
                                 [(g, r) for g, r in old_groups if g not in group_ids])
            except SwitchError as e:
                self._unsynced.add(switch)
                log.warning("job %s: moving tree %d: %s (watch provisions %s once it answers)", job.name, tree.job_id,
                            e, switch)
        if self.spec_dir is not None:
            self.job_spec(job.name).save(self.spec_dir / f"{job.name}.json")
        return [f"{where}; moved to root {planned.tree.root} over {', '.join(planned.tree.switches())} "
                f"({planned.rate:.3g} Mb/s alone): incarnation {tree.incarnation}, plan version {job.version}; "
                f"its workers send their last window again"]

    # --- jobs ----------------------------------------------------------------------------------

    def plan(self, members: list[str], trees: int | str | None = "auto", mode: str = "auto",
             alpha: float | None = None, ring_sum: str = "native") -> JobPlan:
        """The job's plan (``plan_job``) with this controller's protocol options, without touching a switch."""
        return plan_job(self.topology, members, self._protocol(), trees, mode, alpha, ring_sum)  # no compiler

    def _protocol(self) -> protocol.Protocol:
        return protocol.load(self.state.options.values, self.state.options.udp_port)

    def _split(self, workers: int, links: float, limit: float, why: str, mode: str, alpha: float | None,
               ring_mbps: float | None = None, measured: dict[str, float] | None = None,
               ring_sum: str = "native") -> hybrid.Split:
        return choose_split(self._protocol().wire_factor, workers, links, limit, why, mode, alpha, ring_mbps,
                            measured, ring_sum)

    def create_job(self, name: str, members: list[str], pool_size: int = DEFAULT_POOL_SIZE,
                   pool_base: int | None = None, trees: int | str | None = "auto", mode: str = "auto",
                   alpha: float | None = None, ring_sum: str = "native", *, admit: bool = False,
                   lease: tuple[float, str] | None = None) -> JobSpec:
        """Plan the job's trees (``trees``: "auto", or at most N) and its split between them and a host
        ring (``mode``: ina, ring, hybrid or auto, ``alpha`` a hybrid's share through the trees), and
        install every tree.

        ``admit``: a job the switches have no room for gets less rather than an error (``_admit``), and
        its record says what and why.  ``lease``: (seconds, sha256 of its secret), for the service."""
        self._check_name(name)
        planned = self.plan(members, trees, mode, alpha, ring_sum)  # the topology alone: no lock held
        with self._lock:
            if admit:
                job = self._admit(name, members, pool_size, planned, mode, alpha, ring_sum)
            else:
                try:
                    job = self._plan_job(name, members, pool_size, pool_base, planned, mode, alpha, ring_sum)
                except CapacityError as e:
                    raise JobError(str(e)) from None
            if lease is not None:
                job.lease_seconds, job.secret_hash = lease
            self.state.jobs[name] = job  # saved before any write: a crash leaves a job setup() completes
            try:
                self._save()
                for switch in job.switches():  # first the switch's own record of the ids it has seen
                    self.io.install(switch, [self._high_water(switch)], [])
                for switch in job.switches():
                    self.io.install(switch, *self._job_entries(job, switch))
            except (SwitchError, OSError):
                del self.state.jobs[name]
                for switch in job.switches():  # best effort, every switch: a failed batch may be half applied
                    try:
                        self.io.remove(switch, *self._job_entries(job, switch))
                    except SwitchError as e:
                        log.warning("%s: rollback of job %s incomplete (setup() removes the rest): %s",
                                    switch, name, e)
                self._save()
                raise
            spec = self.job_spec(name)
            if self.spec_dir is not None:
                spec.save(self.spec_dir / f"{name}.json")
            log.info("job %s: %d members, %d tree(s) (ids %s) over %s", name, len(members), len(job.trees),
                     [t.job_id for t in job.trees], sorted(job.switches()))
            return spec

    def delete_job(self, name: str, force: bool = False) -> None:
        """Remove the job's entries from every switch, then the job.  ``force`` (an expired lease): a switch
        that cannot be reached does not keep the job alive; it is provisioned without it once it answers."""
        with self._lock:
            job = self._job(name)
            for switch in job.switches():
                try:
                    self.io.remove(switch, *self._job_entries(job, switch))
                except SwitchError as e:
                    if not force:
                        raise
                    self._unsynced.add(switch)
                    log.warning("job %s: %s keeps its entries until it answers: %s", name, switch, e)
            del self.state.jobs[name]
            self._save()  # a switch that was down keeps stale entries until setup() converges it
            if self.spec_dir is not None:
                (self.spec_dir / f"{name}.json").unlink(missing_ok=True)

    def calibrated(self, name: str, ina_mbps: float | None, ring_mbps: float | None,
                   measured: dict[str, float] | None = None) -> JobSpec:
        """Record what a calibration measured (``controller.calibrate``) and split the job again with the
        measured C, within what it has installed (a job without trees stays a ring); ``measured`` (seconds
        per MB of bursts by method) overrules the model's pick in auto mode.  Returns the new spec."""
        with self._lock:
            job = self._job(name)
            links = sum(t.rate for t in job.trees) or self.topology.slowest_link_mbps(job.members)
            limit = ina_mbps if ina_mbps is not None and ina_mbps < links * 0.98 else math.inf
            why = f"measured {ina_mbps:.3g} Mb/s per worker" if ina_mbps is not None else ""
            mode = job.asked_mode if job.trees else "ring"
            split = self._split(len(job.members), links, limit, why, mode,
                                job.asked_alpha if mode == "hybrid" else None, ring_mbps, measured, job.ring_sum)
            job.mode, job.ina_share, job.pace_mbps, job.ring_pace_mbps = \
                split.mode, split.alpha, split.pace_mbps, split.ring_pace_mbps
            job.calibration = {"ina_mbps": ina_mbps, "ring_mbps": ring_mbps, "link_mbps": links,
                               "measured_seconds_per_mb": measured or {}, "split": split.to_dict()}
            self._save()
            spec = self.job_spec(name)
            if self.spec_dir is not None:
                spec.save(self.spec_dir / f"{name}.json")
            return spec

    def job_spec(self, name: str) -> JobSpec:
        job = self._job(name)
        P = self._protocol()
        members = []
        for rank, host in enumerate(job.members):
            switch = self.topology.switches[self.topology.attachment[host][0]]
            members.append(Member(rank, host, str(self.topology.hosts[host].ip.ip), switch.name, str(switch.ip),
                                  switch.mac))
        trees = []
        for t in job.trees:
            nodes = self.tree_nodes(job, t)
            children = tuple(next(c.index for c in nodes[m.switch].children if c.node == m.host) for m in members)
            trees.append(TreeSpec(t.job_id, t.tree.root, t.share, t.rate, _worker_port(t.job_id), children,
                                  t.incarnation))
        return JobSpec(name, P.values, P.INA_UDP_PORT, job.pool_size, tuple(members), tuple(trees), job.ina_share,
                       None if job.ring_id is None else _worker_port(job.ring_id), job.pace_mbps, job.ring_pace_mbps,
                       job.version, job.ring_sum)

    def status(self) -> dict[str, dict]:
        """Per job and switch: the job_stats counters by name (packets), and per-switch drops."""
        out: dict[str, dict] = {"jobs": {}, "drops": {}}
        for switch in self.topology.switches:
            pipe = self.pipeline(switch)
            cells = self.io.read_counter(switch, pipe.program.job_stats)
            names = _named(pipe.protocol.constants, "JOB_STAT_")
            for job in self.state.jobs.values():
                for tree in job.on(switch):  # a job's trees through one switch add up
                    base = tree.allocations[switch].cell * pipe.protocol.JOB_STAT_COUNT
                    counts = out["jobs"].setdefault(job.name, {}).setdefault(switch, dict.fromkeys(names, 0))
                    for n, i in names.items():
                        counts[n] += cells.get(base + i, 0)
            drops = self.io.read_counter(switch, pipe.program.drops)
            out["drops"][switch] = {n: drops.get(i, 0) for n, i in _named(pipe.protocol.constants, "DROP_").items()}
        return out

    def installed_entries(self, switch: str, table: str | None = None) -> set[Entry]:
        return self.io.installed_entries(switch, table)

    def installed_groups(self, switch: str) -> dict[int, list[tuple[int, int]]]:
        return self.io.installed_groups(switch)

    def expected_entries(self, switch: str) -> set[Entry]:
        return set(self._expected(switch)[0])

    def _expected(self, switch: str) -> tuple[list[Entry], list[tuple[int, list[tuple[int, int]]]]]:
        """Everything this switch should hold: routes, every live job's entries and groups, the high-water mark."""
        entries, groups = route_entries(self.topology, switch, self.pipeline(switch).program), []
        for job in self.state.jobs.values():
            job_entries, job_groups = self._job_entries(job, switch)
            entries += job_entries
            groups += job_groups
        return entries + [self._high_water(switch)], groups

    # --- what a switch remembers ----------------------------------------------------------------

    def _high_water(self, switch: str) -> Entry:
        """The switch's record of the last epoch and job id handed out, as a jobs-table entry.

        Its child index (HIGH_WATER_CHILD) is >= 32, a key ina.p4 never looks up, so the entry is
        inert; it lives exactly as long as the switch's registers, so a controller that lost its
        state file still never repeats an epoch those registers could hold.
        """
        return high_water_entry(self.state.next_epoch.get(switch, 1) - 1, self.state.next_job_id - 1,
                                self.pipeline(switch).program)

    def _sync_counters(self, switch: str) -> None:
        pipe = self.pipeline(switch)
        program, schema = pipe.program, Schema(pipe.p4info)
        for e in self.client(switch).read([schema.wildcard(program.jobs)]):
            entry = schema.decode(e.table_entry)
            if entry.key("hdr.ina.child") == HIGH_WATER_CHILD:
                epoch, job_id = read_high_water(entry)
                self.state.next_epoch[switch] = max(self.state.next_epoch.get(switch, 1), epoch + 1)
                self.state.next_job_id = max(self.state.next_job_id, job_id + 1)
            elif entry.action == program.member:
                epoch = entry.param("epoch")
                self.state.next_epoch[switch] = max(self.state.next_epoch.get(switch, 1), epoch + 1)

    def _remove_unexpected(self, switch: str, entries: list[Entry], groups) -> None:
        """Delete managed entries and groups not in this list (left by a crash or a failed create)."""
        keys = {(e.table, e.match) for e in entries}
        stale = [e for e in self.installed_entries(switch) if (e.table, e.match) not in keys]
        wanted = {g for g, _ in groups}
        stale_groups = [(g, []) for g in self.installed_groups(switch) if g not in wanted]
        if stale or stale_groups:
            log.warning("%s: removing %d entries and %d multicast groups no live job needs", switch, len(stale),
                        len(stale_groups))
            self.io.remove(switch, stale, stale_groups)

    # --- planning ------------------------------------------------------------------------------

    def _check_name(self, name: str) -> None:
        if not name or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
            raise JobError(f"job name {name!r}: use letters, digits, '-' and '_'")
        if name in self.state.jobs:
            raise JobExists(f"job {name} exists already")

    def _admit(self, name: str, members: list[str], pool_size: int, planned: JobPlan, mode: str,
               alpha: float | None, ring_sum: str) -> JobRecord:
        """The job as planned if it fits; else planned again around the switches that are full; else the most
        aggregation that fits (``capacity.fallbacks``: fewer trees, then a smaller pool), the rest round the
        host ring; else the ring alone.  Never fails for lack of room; ``JobRecord.admission`` says what the
        job got and why."""
        try:
            return self._plan_job(name, members, pool_size, None, planned, mode, alpha, ring_sum)
        except CapacityError as e:
            short = e
        full = [s for s in self.topology.switches if not self._has_room(s, pool_size)]
        try:  # the planner knows links, not slots: show it only the switches that have room
            around = plan_job(self.topology.without(set(full)), members, self._protocol(), "auto", mode, alpha,
                              ring_sum)
            job = self._plan_job(name, members, pool_size, None, around, mode, alpha, ring_sum)
            job.admission = f"planned around full switch(es) {', '.join(full)} ({short})"
            log.warning("job %s: %s", name, job.admission)
            return job
        except (JobError, CapacityError, TopologyError):
            pass
        for trees, size in capacity.fallbacks(len(planned.tree_plan.trees), pool_size):
            smaller = planned if trees == len(planned.tree_plan.trees) else self._fewer_trees(
                members, trees, len(planned.tree_plan.trees), mode, alpha, ring_sum)
            try:
                job = self._plan_job(name, members, size, None, smaller, mode, alpha, ring_sum)
            except CapacityError:
                continue
            job.admission = (f"{trees} of {len(planned.tree_plan.trees)} tree(s), pool {size} of {pool_size} asked "
                             f"({short}): {job.mode}, {job.ina_share:.0%} through the switches")
            log.warning("job %s admitted with less: %s", name, job.admission)
            return job
        ring = self.plan(members, None, "ring", None, ring_sum)
        job = self._plan_job(name, members, pool_size, None, ring, "ring", None, ring_sum)
        job.admission = f"ring alone: no tree fits ({short})"
        log.warning("job %s admitted with less: %s", name, job.admission)
        return job

    def _has_room(self, switch: str, pool_size: int) -> bool:
        """Whether one more tree with this pool fits the switch (slots and a job cell)."""
        pipe, taken = self.pipeline(switch), self._allocations(switch, [])
        try:
            capacity.free_pool(switch, pool_size, pipe.pool_slots, [(a.pool_base, n) for a, n in taken])
            capacity.free_cell(switch, pipe.max_jobs, {a.cell for a, _ in taken})
        except CapacityError:
            return False
        return True

    def _fewer_trees(self, members: list[str], trees: int, planned: int, mode: str, alpha: float | None,
                     ring_sum: str) -> JobPlan:
        """At most ``trees`` trees, which take less of each member's link than the job's planned ones: the
        split puts the rest round the ring (C is what the fewer trees carry, L the host link)."""
        P = self._protocol()
        try:
            found = plan.plan_job(self.topology, members, P.MAX_CHILDREN, trees, P.wire_factor)
        except plan.PlanError as e:
            raise JobError(str(e)) from None
        limit, why = hybrid.aggregation_limit(self.topology, found, P.frame_bytes)
        links = self.topology.slowest_link_mbps(members)
        if found.rate < min(limit, links) * 0.98:
            limit, why = found.rate, f"only {trees} of {planned} planned trees fit the switches"
        return JobPlan(found, choose_split(P.wire_factor, len(members), links, limit, why,
                                           "hybrid" if mode == "ina" else mode, alpha, ring_sum=ring_sum))

    def _plan_job(self, name: str, members: list[str], pool_size: int, pool_base: int | None, planned: JobPlan,
                  mode: str, alpha: float | None, ring_sum: str) -> JobRecord:
        self._check_name(name)
        most = max(self.pipeline(s).pool_slots for s in self.topology.switches)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or not 1 <= pool_size <= most:
            raise JobError(f"pool size {pool_size} is outside 1..{most} (the switches' slot pools)")
        split = planned.split
        installed = () if split.mode == "ring" else planned.tree_plan.trees
        placed: list[dict[str, Allocation]] = []
        for i, p in enumerate(installed):
            allocations: dict[str, Allocation] = {}
            for switch in p.tree.switches():
                taken = [(a[switch], pool_size) for a in placed if switch in a]
                pipe = self.pipeline(switch)
                try:
                    cell = self._free_cell(switch, pipe.max_jobs, taken)
                    base = self._free_pool(switch, pool_size, None if pool_base is None else pool_base + i * pool_size,
                                           pipe.pool_slots, taken)
                except CapacityError as e:
                    if len(installed) == 1:
                        raise
                    raise CapacityError(f"tree {i + 1} of {len(installed)} (root {p.tree.root}): {e}") from None
                allocations[switch] = Allocation(base, cell, 0)
            placed.append(allocations)
        # job ids and epochs only once the job is certain to fit: a refused job changes nothing
        live = {t.job_id for j in self.state.jobs.values() for t in j.trees} | \
            {j.ring_id for j in self.state.jobs.values() if j.ring_id is not None}
        first_free = self.state.next_job_id
        ids = []
        for _ in range(len(placed) + 1):  # and one for the ring's port: any job may turn hybrid when calibrated
            job_id = self.state.take_job_id(live, MAX_JOB_ID)
            if job_id is None:
                self.state.next_job_id = first_free
                raise JobError(f"no free job id for {len(placed)} tree(s) and a ring")
            live.add(job_id)
            ids.append(job_id)
        records = []
        for job_id, p, allocations in zip(ids, installed, placed):
            epochs = {sw: Allocation(a.pool_base, a.cell, self.state.take_epoch(sw)) for sw, a in allocations.items()}
            records.append(TreeRecord(job_id, p.tree, p.rate, p.share, epochs))
        return JobRecord(name, list(members), pool_size, records, split.mode, split.alpha, ids[-1],
                         split.pace_mbps, split.ring_pace_mbps, asked_mode=mode, asked_alpha=alpha, ring_sum=ring_sum)

    def _allocations(self, switch: str, pending: Pending) -> Pending:
        """(allocation, pool size) of every tree on this switch: live jobs' and the ones being planned."""
        return [(t.allocations[switch], j.pool_size) for j in self.state.jobs.values() for t in j.on(switch)] + pending

    def _free_cell(self, switch: str, max_jobs: int, pending: Pending) -> int:
        return capacity.free_cell(switch, max_jobs, {a.cell for a, _ in self._allocations(switch, pending)})

    def room(self, switch: str) -> capacity.Room:
        """The switch's pool and cells, and what of them live jobs leave free."""
        pipe, taken = self.pipeline(switch), self._allocations(switch, [])
        return capacity.room(switch, self.network.access[switch].arch, pipe.pool_slots, pipe.max_jobs,
                             [(a.pool_base, n) for a, n in taken], {a.cell for a, _ in taken})

    def _free_pool(self, switch: str, size: int, wanted: int | None, slots: int, pending: Pending) -> int:
        taken = sorted((a.pool_base, a.pool_base + n) for a, n in self._allocations(switch, pending))
        if wanted is not None:
            if not (0 <= wanted and wanted + size <= slots):
                raise CapacityError(f"pool {wanted}..{wanted + size - 1} does not fit switch {switch}'s {slots} slots")
            clash = [(a, b) for a, b in taken if a < wanted + size and wanted < b]
            if clash:
                raise CapacityError(f"pool {wanted}..{wanted + size - 1} overlaps slots {clash[0][0]}.."
                                    f"{clash[0][1] - 1} of another tree on switch {switch}")
            return wanted
        return capacity.free_pool(switch, size, slots, [(a, b - a) for a, b in taken])

    def _job(self, name: str) -> JobRecord:
        try:
            return self.state.jobs[name]
        except KeyError:
            raise NoSuchJob(f"no job named {name!r} (jobs: {sorted(self.state.jobs)})") from None

    def tree_nodes(self, job: JobRecord, tree: TreeRecord) -> dict[str, plan.TreeNode]:
        """Each switch of the tree with its children (what its registers count, for whoever checks them)."""
        return plan.nodes(self.topology, job.members, tree.tree)

    def _job_entries(self, job: JobRecord, switch: str) -> tuple[list[Entry], list[tuple[int, list[tuple[int, int]]]]]:
        """The entries and multicast groups of every tree of the job that passes through this switch."""
        found, groups = [], []
        for tree in job.on(switch):
            node = self.tree_nodes(job, tree)[switch]
            pipe = self.pipeline(switch)
            more, group = job_entries(self.topology, pipe.protocol, node, tree.job_id, job.pool_size,
                                      tree.allocations[switch], _worker_port(tree.job_id), pipe.program)
            found += more
            groups.append(group)
        return found, groups

    def _save(self) -> None:
        if self.state_path is not None:
            self.state.save(self.state_path)
            self._state_mtime = self.state_path.stat().st_mtime_ns

    def _reload_state(self) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        mtime = self.state_path.stat().st_mtime_ns
        if mtime != self._state_mtime:
            with self._lock:
                self.state, self._state_mtime = ControllerState.load(self.state_path), mtime


def _worker_port(job_id: int) -> int:
    return WORKER_PORT_BASE + job_id


def _tree_count(trees: int | str | None) -> int | None:
    """"auto" (or None) lets the planner choose; a whole number (or its text) is the most trees to use."""
    if trees is None or trees == "auto":
        return None
    if isinstance(trees, str) and trees.strip().isdigit():
        trees = int(trees)
    if isinstance(trees, bool) or not isinstance(trees, int) or trees < 1:
        raise JobError(f"trees must be 'auto' or a positive whole number, not {trees!r}")
    return trees


def _named(constants: dict[str, int], prefix: str) -> dict[str, int]:
    """Counter cell names from protocol.p4's constants: JOB_STAT_RESULTS -> 'results'."""
    return {k[len(prefix):].lower(): v for k, v in sorted(constants.items(), key=lambda kv: kv[1])
            if k.startswith(prefix) and not k.endswith(("_COUNT", "REASON_COUNT"))}
