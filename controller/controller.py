"""The controller: turns a network of P4 switches into an aggregation service.

It owns what must survive a restart (``state``: jobs, their trees and allocations, epochs), and
keeps the switches holding it: the pipeline, IPv4 routes between all hosts, every live job's
entries (``reconcile``).  A job is planned without a switch (``job_plan``: its trees, ring layouts
and the model that chooses each call's method), placed where the switches have room
(``admission``), and its trees move off switches and links that stay down (``failover``).

``Controller`` is a thin front over units with one job each, sharing a ``Context``: the state store
(``store``), the book of jobs (``jobs``), planning and admission (``planning``), plans and specs
(``specs``), provisioning (``provisioning``), relocation on failure (``relocation``) and the watch
(``watch``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from controller import plan
from controller.capacity import Room, room
from controller.context import Context
from controller.failover import DEAD_AFTER, Failover
from controller.job_plan import DEFAULT_POOL_SIZE, JobError, JobPlan
from controller.jobs import JobBook
from controller.model import NO_HOST_COST, HostCost
from controller.network import Network
from controller.p4runtime_client import SwitchConnection
from controller.pipeline import Pipeline, PipelineOptions
from controller.planning import Planning
from controller.provisioning import Provisioning
from controller.reconcile import Reconciler
from controller.relocation import Relocation
from controller.schema import Entry
from controller.specs import Specs
from controller.state import ControllerState, JobRecord, TreeRecord
from controller.store import JobExists, NoSuchJob, StateStore, fastest
from controller.switch_io import SwitchIO
from controller.topology import Topology
from controller.watch import Watch
from worker.jobspec import JobSpec, Rail

__all__ = ["DEAD_AFTER", "DEFAULT_POOL_SIZE", "Controller", "JobError", "JobExists", "NoSuchJob", "fastest"]


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
        self.store = StateStore(network, state_path, options, spec_dir)
        self.state_path, self.spec_dir = state_path, self.store.spec_dir  # the store's: read, never set
        self.wake = threading.Event()  # a switch reported a port change or its stream ended: watch now
        self.io = SwitchIO(network, lambda: self.store.state.options, election_id, connect, self.wake)
        self.failover = Failover(clock)
        self.ctx = Context(network, self.store, self.io, self.failover, self.wake, host_latency, host_cost)
        self.reconciler: Reconciler = self.ctx.reconciler
        self.host_cost = host_cost
        self.specs = Specs(self.ctx)
        self.planning = Planning(self.ctx)
        self.jobs = JobBook(self.ctx, self.planning, self.specs)
        self.provisioning = Provisioning(self.ctx, self.specs)
        self.relocation = Relocation(self.ctx, self.specs)
        self.watcher = Watch(self.ctx, self.provisioning, self.relocation)
        self._lock = self.ctx.lock  # the one lock every unit takes (tests hold it to pause the controller)

    @property
    def state(self) -> ControllerState:
        """The state now (a new object when another process wrote the file: read it each time)."""
        return self.store.state

    @property
    def topology(self) -> Topology:
        """The network's topology with each server's per-core rate as calibrated (``server_calibrated``): what
        plans, models, admission and failover see."""
        return self.ctx.topology

    @property
    def host_latency(self) -> float:
        """Seconds from the wire to a worker's loop, as the model takes it."""
        return self.ctx.host_latency

    @property
    def dead_after(self) -> float:
        """Seconds a switch may stay unreachable (a restart) before its trees move."""
        return self.failover.dead_after

    @dead_after.setter
    def dead_after(self, seconds: float) -> None:
        self.failover.dead_after = seconds

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
        """Pipeline, routes and every live job on every switch; safe to repeat (``Provisioning.setup``)."""
        return self.provisioning.setup(strict)

    def provision(self, switch: str) -> bool:
        """Bring one switch up to date; True when it needed the pipeline (``Provisioning.provision``)."""
        return self.provisioning.provision(switch)

    def reachable(self, switch: str) -> bool:
        """Whether the switch answered last time it was asked (without asking it now)."""
        return self.provisioning.reachable(switch)

    def check_switches(self) -> list[str]:
        """Re-provision switches that restarted, and those a tree's move could not reach; returns the names of
        those that needed the pipeline."""
        return self.provisioning.check_switches()

    def status(self) -> dict[str, dict]:
        """Per job and switch: the job_stats counters by name (packets), and per-switch drops."""
        return self.reconciler.counters()

    def room(self, switch: str) -> Room:
        """The switch's pool and cells, and what of them live jobs leave free."""
        pipe, held = self.pipeline(switch), self.ctx.held().get(switch, [])
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

    # --- the watch and failures ------------------------------------------------------------------

    def watch(self, interval: float = 1.0, stop: threading.Event | None = None) -> None:
        """Keep every switch provisioned until ``stop`` is set, and move trees off what stays down: a round every
        ``interval``, and at once when a switch reports something (set ``wake`` after ``stop`` to end a wait)."""
        self.watcher.watch(interval, stop)

    def wait(self, interval: float) -> bool:
        """Until ``interval`` passes or a switch reports something (``wake``, which this clears); True when woken."""
        return self.watcher.wait(interval)

    def watch_once(self) -> list[str]:
        """One round of ``watch``: follow the state file, provision restarted switches, move trees off
        what stayed down; returns (and logs) a line per thing done.  A simulated fabric calls it in
        virtual time."""
        return self.watcher.once()

    def probe(self, name: str, job_ids: Collection[int]) -> list[str]:
        """A worker of job ``name`` reports these trees stalled: their switches are asked now with a short
        deadline (``failover.PROBE_DEADLINE``), those silent taken for dead and a watch round run, so their
        trees move now rather than after ``dead_after``.  A line per switch found silent and thing done."""
        return self.watcher.probe(name, job_ids)

    def failures(self) -> tuple[set[str], set[int]]:
        """The switches unreachable for ``dead_after`` seconds, and the links a reachable switch reports down."""
        return self.relocation.failures()

    def route_around(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree that crosses a dead switch or link onto the best single tree of what survives
        (``Relocation.route_around``); returns one line per tree moved (or left without a path)."""
        return self.relocation.route_around(dead, links)

    def return_home(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree moved off a failure back where the planner put it, once that is whole again."""
        return self.relocation.return_home(dead, links)

    # --- jobs ----------------------------------------------------------------------------------

    def plan(self, members: list[str], trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
             alpha: float | None = None, ring_sum: str = "native", pool_size: int | str | None = None,
             ring_layout: str | None = None, lanes: int | str = 1) -> JobPlan:
        """The job's plan on the fabric as a new job finds it, without touching a switch (``Planning.plan``)."""
        return self.planning.plan(members, trees, mode, alpha, ring_sum, pool_size, ring_layout, lanes)

    def new_job_fabric(self) -> Topology:
        """The topology as a new job finds it (``shared_fabric``)."""
        return self.planning.new_job_fabric()

    def auto_windows(self, extra: dict[str, tuple[int, dict[str, int]]] | None = None) -> dict[str, int]:
        """Each auto-sized job's fair window now (``Planning.auto_windows``)."""
        return self.planning.auto_windows(extra)

    def down(self) -> set[str]:
        """The switches known not to answer now."""
        return self.planning.down()

    def create_job(self, name: str, members: list[str], pool_size: int | str | None = None,
                   pool_base: int | None = None, trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
                   alpha: float | None = None, ring_sum: str = "native", ring_layout: str | None = None, *,
                   admit: bool = False, lease: tuple[float, str] | None = None, lanes: int | str = 1,
                   rail: Rail | None = None) -> JobSpec:
        """Plan the job and install every tree (``JobBook.create`` says what each argument does)."""
        return self.jobs.create(name, members, pool_size, pool_base, trees, mode, alpha, ring_sum, ring_layout,
                                admit=admit, lease=lease, lanes=lanes, rail=rail)

    def create_rails(self, name: str, rails: Sequence[Sequence[str]], **options) -> list[JobSpec]:
        """A rail set, all or none: ``NAME-rail<i>`` of ``rails[i]``'s hosts (``JobBook.create_rails``)."""
        return self.jobs.create_rails(name, rails, **options)

    def delete_job(self, name: str, force: bool = False) -> None:
        """Remove the job's entries from every switch, then the job.  ``force`` (an expired lease): a switch
        that cannot be reached does not keep the job alive; it is provisioned without it once it answers."""
        self.jobs.delete(name, force)

    def calibrated(self, name: str, ina_mbps: float | None, ring_mbps: Mapping[str, float] | None,
                   host_latency: float | None = None, ring_efficiency: Mapping[str, float] | None = None) -> JobSpec:
        """Record what a calibration measured (``Specs.calibrated``); returns the job's new spec."""
        return self.specs.calibrated(name, ina_mbps, ring_mbps, host_latency, ring_efficiency)

    def server_calibrated(self, server: str, per_core_pps: float) -> list[str]:
        """Record a server's measured per-core rate (``Specs.server_calibrated``); returns the live jobs whose
        models were made again."""
        return self.specs.server_calibrated(server, per_core_pps)

    def job_plan(self, name: str) -> JobPlan:
        """A live job's plan: the trees it holds now, its layouts and its model (``Specs.job_plan``, cached)."""
        return self.specs.job_plan(name)

    def job_spec(self, name: str) -> JobSpec:
        return self.specs.job_spec(name)
