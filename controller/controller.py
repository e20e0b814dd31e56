"""The controller: turns a network of P4 switches into an aggregation service.

It owns what must survive a restart (``state``: jobs, their trees and allocations, epochs), and
keeps the switches holding it: the pipeline, IPv4 routes between all hosts, every live job's
entries (``reconcile``).  A job is planned without a switch (``job_plan``: its trees, ring layouts
and the model that chooses each call's method), placed where the switches have room
(``admission``), and its trees move off switches and links that stay down (``failover``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from controller import admission, plan, programs
from controller.admission import Admitted, Held, Placement, Pools
from controller.capacity import MIN_POOL, CapacityError, Room, room
from controller.entries import Allocation
from controller.failover import DEAD_AFTER, PROBE_DEADLINE, Failover
from controller.job_plan import (
    DEFAULT_POOL_SIZE,
    JobError,
    JobPlan,
    in_lanes,
    is_auto,
    plan_job,
    sized,
    tree_count,
    with_trees,
)
from controller.model import DEFAULT_HOST_LATENCY, NO_HOST_COST, HostCost
from controller.network import Network
from controller.p4runtime_client import SwitchConnection, SwitchError
from controller.pipeline import Pipeline, PipelineOptions
from controller.programs import V1MODEL
from controller.reconcile import WORKER_PORT_BASE, Reconciler, worker_port
from controller.schema import Entry
from controller.servers import RunningServerTree, contributions_pps, free_shares, server_loads, with_rates, with_shares
from controller.shared_fabric import BUSY_FLOOR, RunningTree, fabric_loads, new_job_trees, view
from controller.state import ControllerState, JobRecord, TreeRecord
from controller.switch_io import SwitchIO
from controller.topology import Topology, TopologyError
from controller.windows import fair_windows
from worker import protocol
from worker.jobspec import JobSpec, Member, Rail, TreeSpec, rail_name

__all__ = ["DEAD_AFTER", "DEFAULT_POOL_SIZE", "Controller", "JobError", "JobExists", "NoSuchJob", "fastest"]

log = logging.getLogger("ina.controller")
MAX_JOB_ID = 32767 - WORKER_PORT_BASE  # a job id's worker port stays below Linux's ephemeral range
MANAGED_TABLES = V1MODEL.managed_tables  # ina.p4's; a switch's own are pipeline(switch).program.managed_tables


class JobExists(JobError):
    """The name is taken by a live job."""


class NoSuchJob(JobError):
    """No live job has that name."""


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
                 clock: Callable[[], float] = time.monotonic, host_latency: float | None = None,
                 host_cost: HostCost = NO_HOST_COST) -> None:
        """``connect`` opens a switch's connection by its name (default: a SwitchClient over gRPC to its
        access's address, with ``election_id``); ``clock`` tells how long a switch has been unreachable;
        ``host_latency`` is the model's (default: what a calibration measured, else the model's default);
        ``host_cost`` what a packet costs the hosts' CPU, for the model (default: nothing).
        A simulated fabric passes in-process connections, its virtual time and its hosts' latency and cost."""
        self.network = network
        self._topology: tuple[tuple, Topology] = ((), network.topology)  # the servers' rates it has, and it
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
        self.wake = threading.Event()  # a switch reported a port change or its stream ended: watch now
        self.io = SwitchIO(network, lambda: self.state.options, election_id, connect, self.wake)
        self.reconciler = Reconciler(self.topology, self.io, lambda: self.state)
        self.failover = Failover(clock)
        self._host_latency = host_latency
        self.host_cost = host_cost
        self._plans: dict[str, tuple[tuple, JobPlan]] = {}  # a live job's plan, while what it is made of holds
        self._lock = threading.RLock()
        self._rounds = threading.Lock()  # one watch round (or probe) at a time: they share the failover's books

    @property
    def dead_after(self) -> float:
        """Seconds a switch may stay unreachable (a restart) before its trees move."""
        return self.failover.dead_after

    @dead_after.setter
    def dead_after(self, seconds: float) -> None:
        self.failover.dead_after = seconds

    @property
    def topology(self) -> Topology:
        """The network's topology with each server's per-core rate as calibrated (``server_calibrated``): what
        plans, models, admission and failover see."""
        rates = tuple(sorted(self.state.server_rates.items()))
        if rates != self._topology[0]:
            self._topology = (rates, with_rates(self.network.topology, dict(rates)))
        return self._topology[1]

    @property
    def host_latency(self) -> float:
        """Seconds from the wire to a worker's loop, as the model takes it."""
        if self._host_latency is not None:
            return self._host_latency
        return self.state.host_latency if self.state.host_latency is not None else DEFAULT_HOST_LATENCY

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

    def setup(self, strict: bool = True) -> list[str]:
        """Pipeline, routes and every live job on every switch; safe to repeat.

        ``strict`` False (a watch or the service starting): a switch that does not answer, or stops
        answering meanwhile, is left for the watch (``check_switches`` provisions it once it answers)
        and every other switch is provisioned; returns the switches left."""
        left = []
        with self._lock:
            for switch in self.topology.devices:
                try:
                    self.provision(switch)
                except SwitchError as e:
                    if strict:
                        raise
                    self.failover.unsynced.add(switch)
                    left.append(switch)
                    log.warning("%s: not provisioned (%s); the watch provisions it once it answers", switch, e)
        return left

    def provision(self, switch: str) -> bool:
        """Bring one switch up to date; True when it needed the pipeline (fresh or restarted).

        A switch that needed it has lost its registers under every live job on it: once its entries
        are back, each such tree's incarnation grows and its job spec is written again, which tells the
        job's workers to send their last window again (docs/protocol.md, "A switch restart")."""
        with self._lock:
            fresh = self.reconciler.provision(switch)
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
            self._write_spec(job.name)
            log.warning("%s lost its registers under job %s: tree(s) %s now at incarnation %s; spec written again, "
                        "so the workers send their last window again", switch, job.name,
                        [t.job_id for t in job.on(switch)], [t.incarnation for t in job.on(switch)])

    def reachable(self, switch: str) -> bool:
        """Whether the switch answered last time it was asked (without asking it now)."""
        return self.failover.reachable(self.io, switch)

    def check_switches(self) -> list[str]:
        """Re-provision switches that restarted (or lost their pipeline), and those a tree's move could not
        reach; returns the names of those that needed the pipeline."""
        return self.failover.check(self.io, self.topology, self.provision)

    def watch(self, interval: float = 1.0, stop: threading.Event | None = None) -> None:
        """Keep every switch provisioned until ``stop`` is set, and move trees off what stays down: a round
        every ``interval``, and at once when a switch reports something (``wait``; set ``wake`` after
        ``stop`` to end a long wait)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            self.wait(interval)
            if not stop.is_set():
                self.watch_once()

    def wait(self, interval: float) -> bool:
        """Until ``interval`` passes or a switch reports a port change or its stream ends (``wake``, which
        this clears); True when woken.  Whatever happens during the round that follows wakes the next."""
        woken = self.wake.wait(interval)
        self.wake.clear()
        return woken

    def watch_once(self) -> list[str]:
        """One round of ``watch``: follow the state file, provision restarted switches, move trees off
        what stayed down; returns (and logs) a line per thing done.  A simulated fabric calls it in
        virtual time."""
        with self._rounds:
            return self._watch_round()

    def _watch_round(self) -> list[str]:
        self._reload_state()  # `ina-ctl job create/delete` run by others since
        lines = []
        for switch in self.check_switches():
            jobs = sum(bool(j.on(switch)) for j in self.state.jobs.values())
            lines.append(f"{switch} restarted: pipeline, routes and {jobs} job(s) installed again")
            log.warning("%s", lines[-1])
        failures = self.failures()
        for line in self.route_around(*failures) + self.return_home(*failures):
            lines.append(line)
            log.warning("%s", line)
        return lines

    def probe(self, name: str, job_ids: Collection[int]) -> list[str]:
        """A worker of job ``name`` reports these trees stalled: ask each of their switches for its pipeline
        cookie with a short deadline (``failover.PROBE_DEADLINE``; a switch asked within ``PROBE_GAP`` is
        not asked again), take those that do not answer for dead, and run a watch round, so their trees move
        now rather than after ``dead_after`` of silence.  Ids that are not the job's trees are ignored.
        Returns (and logs) a line per switch found silent and per thing the round did."""
        job = self.state.jobs.get(name)
        ids = set(job_ids)
        trees = [t for t in job.trees if t.job_id in ids] if job is not None else []
        if not trees:
            return []
        switches = sorted({s for t in trees for s in t.tree.switches()})
        with self._rounds:
            lines = [f"{s}: does not answer within {PROBE_DEADLINE:g} s, and job {name} reports tree(s) "
                     f"{sorted(t.job_id for t in trees)} stalled: down"
                     for s in self.failover.probe(self.io, switches)]
            for line in lines:
                log.warning("%s", line)
            return lines + (self._watch_round() if lines else [])

    # --- failures ------------------------------------------------------------------------------

    def failures(self) -> tuple[set[str], set[int]]:
        """The switches unreachable for ``dead_after`` seconds, and the links (indexes in the topology)
        that a reachable switch reports down."""
        return self.failover.failures(self.io, self.topology)

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
                    crossed = self.failover.crossed(self.topology, job, tree, dead, links)
                    if crossed:
                        lines += self._move_tree(job, tree, crossed, dead, links, P)
        return lines

    def _move_tree(self, job: JobRecord, tree: TreeRecord, crossed: list[str], dead: set[str], links: set[int],
                   P: protocol.Protocol) -> list[str]:
        where = f"job {job.name}: tree {tree.job_id} (root {tree.tree.root}) crosses {', '.join(crossed)}, down"
        gone = links | {self.topology.host_link(s) for s in dead if s in self.topology.hosts}  # a dead server's link
        try:  # a server's tree in the job's lanes, a core each (its rate is the lanes')
            planned = plan.pack_trees(self.topology.without(dead, gone), job.members, P.MAX_CHILDREN, 1,
                                      P.wire_factor, lanes=job.lanes).trees[0]
        except (plan.PlanError, TopologyError) as e:
            if not self.failover.first_report((job.name, tree.job_id, frozenset(dead), frozenset(links))):
                return []
            return [f"{where}; no other tree joins its members ({e}): its workers will time out"]
        if tree.home is None:  # where the planner put it: it goes back once that is whole again
            tree.home, tree.home_rate = tree.tree, tree.rate
        # a tree's lanes cross the same switches, so they move together and share the new tree's rate
        return self._relocate(job, tree, planned.tree, planned.rate / job.lanes, dead, where, "moved to")

    def return_home(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree that was moved off a failure back to where the planner put it, once every switch
        there answers and nothing down crosses it (the packing the planner prefers)."""
        lines = []
        with self._lock:
            for job in self.state.jobs.values():
                for tree in job.trees:
                    home = tree.home
                    if home is None or not all(self.reachable(s) for s in home.switches()):
                        continue
                    if self.failover.crossed(self.topology, job, dataclasses.replace(tree, tree=home), dead, links):
                        continue
                    where = f"job {job.name}: tree {tree.job_id} (root {tree.tree.root}): its planned tree is up again"
                    lines += self._relocate(job, tree, home, tree.home_rate, dead, where, "back at")
                    if tree.tree == home:
                        tree.home = None
                        self._save()
        return lines

    def _relocate(self, job: JobRecord, tree: TreeRecord, new: plan.Tree, rate: float, dead: set[str], where: str,
                  verb: str) -> list[str]:
        """Put the tree on ``new``: slots and a fresh epoch on the switches it gains, its entries there, the old
        ones removed where it leaves, and a grown incarnation (its workers send their last window again)."""
        before = copy.deepcopy(job)
        gained = [s for s in new.switches() if s not in tree.allocations]
        try:
            placed = admission.place_switches(gained, job.pool_size, self._pools(), self._held())
        except CapacityError as e:
            return [f"{where}; the tree (root {new.root}) does not fit: {e}"]
        tree.allocations = {s: tree.allocations.get(s) or Allocation(*placed[s], self.state.take_epoch(s))
                            for s in new.switches()}
        tree.tree, tree.rate = new, rate
        tree.incarnation += 1
        job.version += 1
        self._save()
        for switch in sorted(set(new.switches()) | (set(before.switches()) - dead)):
            try:  # each switch on its own: one that cannot be reached must not keep the others from the new tree
                if switch in gained:
                    self.io.install(switch, [self.reconciler.high_water(switch)], [])
                if switch in new.switches():
                    self.io.install(switch, *self.reconciler.job_entries(job, switch))
                if switch in before.switches():
                    old, old_groups = self.reconciler.job_entries(before, switch)
                    kept, kept_groups = (self.reconciler.job_entries(job, switch) if switch in job.switches()
                                         else ([], []))
                    keys, group_ids = {(e.table, e.match) for e in kept}, {g for g, _ in kept_groups}
                    self.io.remove(switch, [e for e in old if (e.table, e.match) not in keys],
                                   [(g, r) for g, r in old_groups if g not in group_ids])
            except SwitchError as e:
                self.failover.unsynced.add(switch)
                log.warning("job %s: moving tree %d: %s (watch provisions %s once it answers)", job.name, tree.job_id,
                            e, switch)
        self._write_spec(job.name)
        return [f"{where}; {verb} root {new.root} over {', '.join(new.switches())} "
                f"({rate:.3g} Mb/s alone): incarnation {tree.incarnation}, plan version {job.version}; "
                f"its workers send their last window again"]

    # --- jobs ----------------------------------------------------------------------------------

    def plan(self, members: list[str], trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
             alpha: float | None = None, ring_sum: str = "native", pool_size: int | str | None = None,
             ring_layout: str | None = None, lanes: int | str = 1) -> JobPlan:
        """The job's plan (``job_plan.plan_job``) with this controller's options, without touching a switch, on the
        fabric as a new job finds it: its trees where running jobs leave links free, its model on its fair share of
        the links they use (``shared_fabric``)."""
        view, found = self._new_job_trees(members, trees, mode)
        return plan_job(view, members, self._protocol(), found or trees, mode, alpha, ring_sum, pool_size,
                        ring_layout, self.host_latency, host_cost=self.host_cost, lanes=lanes)

    def new_job_fabric(self) -> Topology:
        """The topology as a new job finds it: each link between switches offers what running jobs' trees leave
        of it, at least a fair share beside them (``shared_fabric``)."""
        return view(self.topology, fabric_loads(self.topology, self._running_trees()),
                    server_loads(self._running_servers()), fair=True)

    def _running_trees(self) -> list[RunningTree]:
        with self._lock:
            return [(job.name, t.tree, t.rate) for job in self.state.jobs.values() for t in job.trees]

    def _running_servers(self) -> list[RunningServerTree]:
        frame = self._protocol().frame_bytes
        with self._lock:
            return [(job.name, t.tree.root, contributions_pps(t.rate, len(job.members), frame))
                    for job in self.state.jobs.values() for t in job.trees
                    if plan.is_server_tree(self.topology, t.tree)]

    def _new_job_trees(self, members: list[str], trees: int | str | plan.Plan | None,
                       mode: str) -> tuple[Topology, plan.Plan | None]:
        """The fabric a new job finds (its links and servers as running jobs leave them), and its trees where running
        jobs leave links free (None: the planner's own packing of that fabric, or the trees given)."""
        if mode == "ring" or isinstance(trees, plan.Plan):
            return self.new_job_fabric(), None
        P = self._protocol()
        try:
            seen, found = new_job_trees(self.topology, self._running_trees(), members, P.MAX_CHILDREN,
                                        tree_count(trees), P.wire_factor, server_loads(self._running_servers()))
        except plan.PlanError as e:
            raise JobError(str(e)) from None
        if found is not None and any(plan.is_server_tree(seen, t.tree) for t in found.trees):
            return seen, None  # packed in the job's lanes (a core each) by the planner itself, on the fair view
        return seen, found

    def _protocol(self) -> protocol.Protocol:
        return protocol.load(self.state.options.values, self.state.options.udp_port)

    def create_job(self, name: str, members: list[str], pool_size: int | str | None = None,
                   pool_base: int | None = None, trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
                   alpha: float | None = None, ring_sum: str = "native", ring_layout: str | None = None, *,
                   admit: bool = False, lease: tuple[float, str] | None = None, lanes: int | str = 1,
                   rail: Rail | None = None) -> JobSpec:
        """Plan the job (``trees``: "auto", or at most N; ``mode``: ina, ring, hybrid, or auto, which picks
        per call; ``alpha`` a hybrid's share through the trees; ``ring_layout`` the ring's; ``lanes``: each
        planned tree installed as that many trees, or "auto", sharing ``pool_size``) and install every tree.
        ``pool_size`` None or "auto": each tree's window is what its bandwidth-delay product needs, within what
        its switches have free now and its fair share where auto-sized jobs meet (``auto_windows``); a job keeps
        its window while it lives.

        ``admit``: a job the switches have no room for gets less rather than an error (``admission``), and
        its record says what and why.  ``lease``: (seconds, sha256 of its secret), for the service.
        ``rail``: the rail of a set it is (``create_rails``), in its record and spec."""
        self._check_name(name)
        auto = is_auto(pool_size)
        if not auto:
            self._check_pool(pool_size)
        planned = self.plan(members, trees, mode, alpha, ring_sum, pool_size, ring_layout, lanes)  # no lock held
        need = planned.pool_size
        with self._lock:
            self._check_name(name)
            if auto and planned.tree_plan.trees:
                planned = self._fair_sized(name, planned)
            pool_size = planned.pool_size  # each installed (lane) tree's
            if admit:
                admitted = self._admit(name, planned, members, trees, pool_size, alpha, ring_sum, ring_layout)
                if admitted.note:
                    log.warning("job %s admitted with less: %s", name, admitted.note)
            else:
                try:
                    trees_planned = [p.tree for p in planned.tree_plan.trees]
                    admitted = Admitted(planned, pool_size, admission.place(trees_planned, pool_size, self._pools(),
                                                                            self._held(), pool_base))
                except CapacityError as e:
                    raise JobError(str(e)) from None
            job = self._record(name, admitted)
            if lease is not None:
                job.lease_seconds, job.secret_hash = lease
            job.rail = rail
            job.auto_window = need if auto and job.trees else None  # a ring alone holds no window
            self._install_job(name, job)
            spec = self._write_spec(name)
            log.info("job %s: %d members, %d tree(s) (ids %s) over %s, mode %s", name, len(members), len(job.trees),
                     [t.job_id for t in job.trees], sorted(job.switches()), job.mode)
            return spec

    def _install_job(self, name: str, job: JobRecord) -> None:
        """The job recorded, saved, and its entries on every switch of its trees; on a switch's failure, taken off
        them again (best effort) and out of the record."""
        self.state.jobs[name] = job  # saved before any write: a crash leaves a job setup() completes
        try:
            self._save()
            for switch in job.switches():  # first the switch's own record of the ids it has seen
                self.io.install(switch, [self.reconciler.high_water(switch)], [])
            for switch in job.switches():
                self.io.install(switch, *self.reconciler.job_entries(job, switch))
        except (SwitchError, OSError):
            del self.state.jobs[name]
            for switch in job.switches():  # best effort, every switch: a failed batch may be half applied
                try:
                    self.io.remove(switch, *self.reconciler.job_entries(job, switch))
                except SwitchError as e:
                    log.warning("%s: rollback of job %s incomplete (setup() removes the rest): %s",
                                switch, name, e)
            self._save()
            raise

    def create_rails(self, name: str, rails: Sequence[Sequence[str]], **options) -> list[JobSpec]:
        """A rail set: rail i's job, ``NAME-rail<i>`` (``rail_name``), of ``rails[i]``'s hosts (every node's
        local rank i, in node order), with ``create_job``'s keyword ``options`` for each.  All or none: every
        name is checked first, and a rail that fails takes the rails made before it away again, so no node
        is left with half a set (its ranks would wait for a rail that is not there)."""
        names = [rail_name(name, i) for i in range(len(rails))]
        if not names:
            raise JobError(f"rail set {name}: no rails")
        for each in names:
            self._check_name(each)
        specs: list[JobSpec] = []
        try:
            for i, (each, members) in enumerate(zip(names, rails)):
                specs.append(self.create_job(each, list(members), rail=Rail(name, i, len(names)), **options))
        except BaseException:
            for made in reversed(specs):
                try:
                    self.delete_job(made.name, force=True)
                except Exception as e:  # noqa: BLE001 - the rail's own failure is the one to report
                    log.error("rail set %s: %s not rolled back (delete it): %s", name, made.name, e)
            raise
        return specs

    def _admit(self, name: str, planned: JobPlan, members: list[str], trees: int | str | None, pool_size: int,
               alpha: float | None, ring_sum: str, ring_layout: str | None) -> Admitted:
        """Admission (``admission.admit``) on the switches that answer: a job planned over one known to be
        down is planned again without it, or refused naming it (SwitchError) when nothing else joins its
        members."""
        replan = self._replan(members, alpha, ring_sum, ring_layout, planned.lanes)
        down = self.down()
        seen = self.new_job_fabric()
        topology = seen.without(down) if down else seen
        crossed = sorted(down & {s for p in planned.tree_plan.trees for s in p.tree.switches()})
        if crossed:
            try:
                planned = replan(topology, None if trees in (None, "auto") else int(trees), planned.mode, pool_size)
            except JobError as e:
                raise SwitchError(f"job {name}: switch(es) {', '.join(crossed)} do not answer, and no tree joins "
                                  f"its members without them ({e}); the watch provisions them once they answer"
                                  ) from None
        admitted = admission.admit(planned, pool_size, topology, self._pools(), self._held(), replan)
        if crossed:
            around = f"planned around unreachable switch(es) {', '.join(crossed)}"
            admitted = dataclasses.replace(admitted, note=f"{around}; {admitted.note}" if admitted.note else around)
        return admitted

    def auto_windows(self, extra: dict[str, tuple[int, dict[str, int]]] | None = None) -> dict[str, int]:
        """Each auto-sized job's fair window now (``windows.fair_windows``): its need where the switches have
        room, else its max-min share of the slots that jobs of an asked size leave; ``extra``: a job not
        created yet, name: (need, its trees on each switch)."""
        demands = {j.name: j.auto_window for j in self.state.jobs.values() if j.auto_window is not None}
        uses = {name: dict(Counter(s for t in self.state.jobs[name].trees for s in t.allocations))
                for name in demands}
        for name, (need, on) in (extra or {}).items():
            demands[name], uses[name] = need, on
        room = {s: slots for s, (slots, _) in self._pools().items()}
        for job in self.state.jobs.values():
            if job.auto_window is None:
                for t in job.trees:
                    for switch in t.allocations:
                        room[switch] -= job.pool_size
        return fair_windows(demands, uses, room)

    def _fair_sized(self, name: str, planned: JobPlan) -> JobPlan:
        """An auto-sized job's plan at its fair window (``auto_windows``), within the slots its switches have
        free now (jobs already running keep theirs: their workers hold their window for the job's life)."""
        on = dict(Counter(s for p in planned.tree_plan.trees for s in p.tree.switches()))
        fair = self.auto_windows({name: (planned.pool_size, on)})[name]
        held = self._held()
        pools = self._pools()
        free = min((pools[s][0] - sum(n for _, n, _ in held.get(s, []))) // trees for s, trees in on.items())
        window = min(fair, free)
        if window == planned.pool_size or window < MIN_POOL:  # too small a window: admission's fallbacks decide
            return planned
        return sized(self.new_job_fabric(), planned, self._protocol(), window, self.host_latency,
                     host_cost=self.host_cost)

    def down(self) -> set[str]:
        """The switches known not to answer now: unreachable since a watch round, left out of a setup or a
        write, or whose stream ended (a switch never asked is taken to answer)."""
        found = set(self.failover.unreachable) | self.failover.unsynced
        found |= {s for s, c in self.io.connections() if not c.alive}
        return found & set(self.topology.devices)

    def _replan(self, members: list[str], alpha: float | None, ring_sum: str, ring_layout: str | None,
                lanes: int = 1) -> admission.Replan:
        """Admission's planner: trees packed on the topology it shows (in the job's ``lanes``, each on the pool
        it is given; a server's rows a core per lane), the model on the whole network."""
        P = self._protocol()

        def replan(topology: Topology, trees: int | None, mode: str, pool_size: int) -> JobPlan:
            if mode == "ring":
                return plan_job(self.topology, members, P, None, "ring", None, ring_sum, pool_size, ring_layout,
                                self.host_latency, host_cost=self.host_cost)
            try:
                found = plan.pack_trees(topology, members, P.MAX_CHILDREN, trees, P.wire_factor, lanes=lanes)
            except plan.PlanError as e:
                raise JobError(str(e)) from None
            return with_trees(self.topology, in_lanes(found, lanes), P, mode, alpha if mode == "hybrid" else None,
                              ring_sum, pool_size, ring_layout, self.host_latency, host_cost=self.host_cost,
                              lanes=lanes)

        return replan

    def delete_job(self, name: str, force: bool = False) -> None:
        """Remove the job's entries from every switch, then the job.  ``force`` (an expired lease): a switch
        that cannot be reached does not keep the job alive; it is provisioned without it once it answers."""
        with self._lock:
            job = self._job(name)
            for switch in job.switches():
                try:
                    self.io.remove(switch, *self.reconciler.job_entries(job, switch))
                except SwitchError as e:
                    if not force:
                        raise
                    self.failover.unsynced.add(switch)
                    log.warning("job %s: %s keeps its entries until it answers: %s", name, switch, e)
            del self.state.jobs[name]
            self._plans.pop(name, None)
            self._save()  # a switch that was down keeps stale entries until setup() converges it
            if self.spec_dir is not None:
                (self.spec_dir / f"{name}.json").unlink(missing_ok=True)

    def calibrated(self, name: str, ina_mbps: float | None, ring_mbps: Mapping[str, float] | None,
                   host_latency: float | None = None, ring_efficiency: Mapping[str, float] | None = None) -> JobSpec:
        """Record what a calibration measured (``controller.calibrate``): C where the trees carried less than
        their links, each ring layout's rate and what TCP got of its fair share, and the hosts' latency (also
        the controller's for later jobs).  The job's model is made again from them; returns the new spec."""
        with self._lock:
            job = self._job(name)
            links = sum(t.rate for t in job.trees) or self.topology.slowest_link_mbps(job.members)
            job.calibration = {"ina_mbps": ina_mbps if ina_mbps is not None and ina_mbps < links * 0.98 else None,
                               "ring_mbps": dict(ring_mbps or {}), "ring_efficiency": dict(ring_efficiency or {}),
                               "host_latency": host_latency, "link_mbps": links}
            if host_latency is not None:
                self.state.host_latency = host_latency
            self._save()
            return self._write_spec(name)

    def server_calibrated(self, server: str, per_core_pps: float) -> list[str]:
        """Record a server's measured per-core rate (``calibrate.calibrate_server``): from now on the topology every
        plan, model, admission and move sees says so.  Live jobs' models are made again (their specs written);
        returns their names.  A job keeps its trees and their shares (``ina-ctl job delete/create`` plans anew)."""
        if server not in self.network.topology.servers:
            raise JobError(f"{server} is not an aggregation server of the topology (servers: "
                           f"{', '.join(self.network.topology.servers) or 'none'})")
        if not per_core_pps > 0:
            raise JobError(f"{server}: a measured rate must be positive, not {per_core_pps!r}")
        with self._lock:
            self.state.server_rates[server] = float(per_core_pps)
            self._save()
            jobs = sorted(j.name for j in self.state.jobs.values() if any(t.tree.root == server for t in j.trees))
            for name in jobs:
                self._write_spec(name)
            return jobs

    def job_plan(self, name: str) -> JobPlan:
        """A live job's plan: the trees it holds now, its layouts and its model (made again only when the
        trees move, a calibration measures, or the hosts' latency or cost changes: for 1,024 hosts it takes
        seconds, and the service answers with it)."""
        job = self._job(name)
        measured = job.calibration or {}
        key = (tuple(job.members), [(t.tree, t.rate, t.share) for t in job.trees], json.dumps(measured, sort_keys=True),
               self.host_latency, self.host_cost, job.mode, job.alpha, job.ring_layout, job.ring_sum, job.pool_size,
               job.lanes, tuple(sorted(self.state.server_rates.items())), tuple(sorted(job.server_shares.items())))
        cached = self._plans.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        P = self._protocol()
        trees = tuple(plan.PlannedTree(t.tree, t.rate, t.share) for t in job.trees)
        found = plan.Plan(tuple(job.members), trees, sum(t.rate for t in trees), 0.0, (), 0, 0.0, P.wire_factor)
        latency = measured.get("host_latency") or self.host_latency
        shared = with_shares(self.topology, job.server_shares)  # of each server, what it found when planned
        planned = with_trees(shared, found, P, job.mode, job.alpha, job.ring_sum, job.pool_size, job.ring_layout,
                             latency, measured.get("ina_mbps"), _efficiencies(measured), self.host_cost, job.lanes)
        self._plans[name] = (key, planned)
        return planned

    def job_spec(self, name: str) -> JobSpec:
        job = self._job(name)
        P = self._protocol()
        members = []
        for rank, host in enumerate(job.members):
            switch = self.topology.switches[self.topology.attachment[host][0]]
            members.append(Member(rank, host, str(self.topology.hosts[host].ip.ip), switch.name, str(switch.ip),
                                  switch.mac))
        planned = self.job_plan(name)
        trees = []
        for i, t in enumerate(job.trees):
            nodes = self.reconciler.tree_nodes(job, t)
            server = plan.is_server_tree(self.topology, t.tree)  # the members send to it, not to their switch
            at = plan.server_of(job.members, t.tree) if server else {m.host: m.switch for m in members}
            children = tuple(next(c.index for c in nodes[at[m.host]].children if c.node == m.host) for m in members)
            ips = tuple(str(self.topology.hosts[at[m.host]].ip.ip) for m in members) if server else None
            trees.append(TreeSpec(t.job_id, t.tree.root, t.share, t.rate, worker_port(t.job_id), children,
                                  t.incarnation, planned.lane_of(i),
                                  str(self.topology.hosts[t.tree.root].ip.ip) if server else None,
                                  ips if t.tree.uplinks else None))
        return JobSpec(name, P.values, P.INA_UDP_PORT, job.pool_size, tuple(members), tuple(trees), job.mode,
                       None if job.ring_id is None else worker_port(job.ring_id), planned.layouts, planned.model,
                       job.alpha, job.ring_layout, job.version, job.ring_sum, job.rail)

    def status(self) -> dict[str, dict]:
        """Per job and switch: the job_stats counters by name (packets), and per-switch drops."""
        return self.reconciler.counters()

    def room(self, switch: str) -> Room:
        """The switch's pool and cells, and what of them live jobs leave free."""
        pipe, held = self.pipeline(switch), self._held().get(switch, [])
        return room(switch, self.network.access[switch].arch, pipe.pool_slots, pipe.max_jobs,
                    [(a, n) for a, n, _ in held], {c for _, _, c in held})

    def installed_entries(self, switch: str, table: str | None = None) -> set[Entry]:
        return self.io.installed_entries(switch, table)

    def installed_groups(self, switch: str) -> dict[int, list[tuple[int, int]]]:
        return self.io.installed_groups(switch)

    def expected_entries(self, switch: str) -> set[Entry]:
        return set(self.reconciler.expected(switch)[0])

    def tree_nodes(self, job: JobRecord, tree: TreeRecord) -> dict[str, plan.TreeNode]:
        """Each switch of the tree with its children (what its registers count, for whoever checks them)."""
        return self.reconciler.tree_nodes(job, tree)

    # --- inside --------------------------------------------------------------------------------

    def _check_name(self, name: str) -> None:
        if not name or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
            raise JobError(f"job name {name!r}: use letters, digits, '-' and '_'")
        if name in self.state.jobs:
            raise JobExists(f"job {name} exists already")

    def _check_pool(self, pool_size: int) -> None:
        most = max(self.pipeline(s).pool_slots for s in self.topology.devices)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or not 1 <= pool_size <= most:
            raise JobError(f"pool size {pool_size} is outside 1..{most} (the switches' slot pools)")

    def _pools(self) -> Pools:
        return {s: (self.pipeline(s).pool_slots, self.pipeline(s).max_jobs) for s in self.topology.devices}

    def _held(self) -> Held:
        held: Held = {}
        for job in self.state.jobs.values():
            for t in job.trees:
                for switch, a in t.allocations.items():
                    held.setdefault(switch, []).append((a.pool_base, job.pool_size, a.cell))
        return held

    def _record(self, name: str, admitted: Admitted) -> JobRecord:
        """The job's record: its trees with job ids and fresh epochs, and an id for its ring's port.  Ids
        and epochs are taken only here, once the job is certain to fit: a refused job changes nothing."""
        planned = admitted.plan
        live = {t.job_id for j in self.state.jobs.values() for t in j.trees} | \
            {j.ring_id for j in self.state.jobs.values() if j.ring_id is not None}
        first_free = self.state.next_job_id
        ids = []
        for _ in range(len(admitted.placements) + 1):  # and one for the ring's port: any call may go round it
            job_id = self.state.take_job_id(live, MAX_JOB_ID)
            if job_id is None:
                self.state.next_job_id = first_free
                raise JobError(f"no free job id for {len(admitted.placements)} tree(s) and a ring")
            live.add(job_id)
            ids.append(job_id)
        records = []
        for job_id, p, placed in zip(ids, planned.tree_plan.trees, admitted.placements):
            records.append(TreeRecord(job_id, p.tree, p.rate, p.share, _allocations(placed, self.state)))
        found = free_shares(self.topology, server_loads(self._running_servers()), True, BUSY_FLOOR)
        return JobRecord(name, list(planned.tree_plan.members), admitted.pool_size, records, planned.mode,
                         planned.alpha, ids[-1], planned.ring_layout, ring_sum=planned.ring_sum,
                         admission=admitted.note, lanes=planned.lanes,
                         server_shares={r.tree.root: found[r.tree.root] for r in records if r.tree.root in found})

    def _write_spec(self, name: str) -> JobSpec:
        spec = self.job_spec(name)
        if self.spec_dir is not None:
            spec.save(self.spec_dir / f"{name}.json")
        return spec

    def _job(self, name: str) -> JobRecord:
        try:
            return self.state.jobs[name]
        except KeyError:
            raise NoSuchJob(f"no job named {name!r} (jobs: {sorted(self.state.jobs)})") from None

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


def _allocations(placed: Placement, state: ControllerState) -> dict[str, Allocation]:
    return {switch: Allocation(base, cell, state.take_epoch(switch)) for switch, (base, cell) in placed.items()}


def _efficiencies(measured: dict) -> dict[str, float]:
    """A calibration's ring efficiencies by layout; a state file written before they were measured (or
    edited by hand) has none, or values the model cannot use, which count as unmeasured."""
    found = measured.get("ring_efficiency")
    if not isinstance(found, dict):
        return {}
    return {k: float(v) for k, v in found.items()
            if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1}
