"""The controller: turns a network of P4 switches into an aggregation service.

It keeps one P4Runtime client per switch, pushes the pipeline, installs IPv4 routes between
all hosts, and creates and deletes jobs.  Every write is idempotent (an entry that exists is
modified), so ``setup`` and re-provisioning can run any number of times; a switch whose
pipeline cookie is not ours (it restarted) gets the pipeline and everything live again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from p4.v1 import p4runtime_pb2

from controller import plan
from controller.jobspec import JobSpec, Member
from controller.network import Network
from controller.p4runtime_client import SwitchClient, SwitchError, WriteError
from controller.pipeline import Pipeline, PipelineOptions, build
from controller.schema import Entry, Schema, multicast_group
from controller.state import ControllerState, JobRecord

log = logging.getLogger("ina.controller")
WORKER_PORT_BASE = 40000  # a job's workers listen on WORKER_PORT_BASE + job_id
MAX_JOB_ID = 65535 - WORKER_PORT_BASE
MANAGED_TABLES = ("InaIngress.ipv4_routes", "InaIngress.jobs", "InaEgress.receivers")
Update = p4runtime_pb2.Update


class JobError(ValueError):
    """A job request that cannot be carried out; nothing was changed."""


class Controller:
    def __init__(self, network: Network, state_path: Path | None = None, options: PipelineOptions | None = None,
                 election_id: int | None = 1, spec_dir: Path | None = None) -> None:
        self.network = network
        self.topology = network.topology
        self.state_path = state_path
        if state_path is not None and state_path.exists():
            self.state = ControllerState.load(state_path)
            if options is not None and options != self.state.options:
                raise JobError(f"{state_path} was made with {self.state.options}, not {options}")
        else:
            self.state = ControllerState(options or PipelineOptions())
        self.spec_dir = spec_dir or (state_path.parent / "jobs" if state_path else None)
        self._state_mtime = state_path.stat().st_mtime_ns if state_path is not None and state_path.exists() else 0
        self.election_id = election_id
        self._clients: dict[str, SwitchClient] = {}
        self._lock = threading.RLock()

    # --- switches ------------------------------------------------------------------------------

    def pipeline(self, switch: str) -> Pipeline:
        return build(self.network.access[switch].target, self.state.options)

    def client(self, switch: str) -> SwitchClient:
        """The switch's connection, opened again if the switch went away since."""
        c = self._clients.get(switch)
        if c is None or not c.alive:
            if c is not None:
                c.close()
            access = self.network.access[switch]
            c = self._clients[switch] = SwitchClient(access.grpc_address, access.device_id, self.election_id)
        return c

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()

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
        """Bring one switch up to date; True when it needed the pipeline (fresh or restarted)."""
        with self._lock:
            fresh = not self._runs_our_pipeline(switch)
            if fresh:
                log.info("%s: pushing the pipeline", switch)
                self.client(switch).set_pipeline(self.pipeline(switch).config)
            self._sync_counters(switch)
            entries, groups = self._expected(switch)
            self._remove_unexpected(switch, entries, groups)
            self._install(switch, entries, groups)
            return fresh

    def _runs_our_pipeline(self, switch: str) -> bool:
        return self.client(switch).pipeline_cookie() == self.pipeline(switch).config.cookie.cookie

    def check_switches(self) -> list[str]:
        """Re-provision switches that restarted (or lost their pipeline); returns their names."""
        restarted = []
        for switch in self.topology.switches:
            try:
                client = self._clients.get(switch)
                if client is None or not client.alive or not self._runs_our_pipeline(switch):
                    if self.provision(switch):
                        restarted.append(switch)
            except SwitchError as e:
                log.warning("%s: not reachable yet: %s", switch, e)
        return restarted

    def watch(self, interval: float = 1.0, stop: threading.Event | None = None) -> None:
        """Keep every switch provisioned until ``stop`` is set."""
        stop = stop or threading.Event()
        while not stop.wait(interval):
            self._reload_state()  # `ina-ctl job create/delete` run by others since
            for switch in self.check_switches():
                log.warning("%s restarted: pipeline, routes and %d job(s) installed again", switch,
                            sum(switch in j.allocations for j in self.state.jobs.values()))

    # --- jobs ----------------------------------------------------------------------------------

    def create_job(self, name: str, members: list[str], pool_size: int, pool_base: int | None = None) -> JobSpec:
        with self._lock:
            job = self._plan_job(name, members, pool_size, pool_base)
            self.state.jobs[name] = job  # saved before any write: a crash leaves a job setup() completes
            try:
                self._save()
                for switch in job.allocations:  # first the switch's own record of the ids it has seen
                    self._install(switch, [self._high_water(switch)], [])
                for switch in job.allocations:
                    self._install(switch, *self._job_entries(job, switch))
            except (SwitchError, OSError):
                del self.state.jobs[name]
                for switch in job.allocations:  # best effort, every switch: a failed batch may be half applied
                    try:
                        self._remove(switch, *self._job_entries(job, switch))
                    except SwitchError as e:
                        log.warning("%s: rollback of job %s incomplete (setup() removes the rest): %s",
                                    switch, name, e)
                self._save()
                raise
            spec = self.job_spec(name)
            if self.spec_dir is not None:
                spec.save(self.spec_dir / f"{name}.json")
            log.info("job %s (id %d): %d members over %s", name, job.job_id, len(members), sorted(job.allocations))
            return spec

    def delete_job(self, name: str) -> None:
        with self._lock:
            job = self._job(name)
            for switch in job.allocations:
                self._remove(switch, *self._job_entries(job, switch))
            del self.state.jobs[name]
            self._save()  # a switch that was down keeps stale entries until setup() converges it
            if self.spec_dir is not None:
                (self.spec_dir / f"{name}.json").unlink(missing_ok=True)

    def job_spec(self, name: str) -> JobSpec:
        job = self._job(name)
        pipe = self.pipeline(next(iter(job.allocations)))
        tree = self._tree(job)
        members = []
        for rank, host in enumerate(job.members):
            switch, port = self.topology.attachment[host]
            child = next(c.index for c in tree[switch].children if c.node == host)
            sw = self.topology.switches[switch]
            members.append(Member(rank, host, str(self.topology.hosts[host].ip.ip), self._worker_port(job), child,
                                  switch, str(sw.ip), sw.mac))
        return JobSpec(name, job.job_id, pipe.protocol.values, pipe.protocol.INA_UDP_PORT, job.pool_size,
                       tuple(members))

    def status(self) -> dict[str, dict]:
        """Per job and switch: the job_stats counters by name (packets), and per-switch drops."""
        out: dict[str, dict] = {"jobs": {}, "drops": {}}
        for switch in self.topology.switches:
            pipe = self.pipeline(switch)
            cells = self._read_counter(switch, "InaIngress.job_stats")
            names = _named(pipe.protocol.constants, "JOB_STAT_")
            for job in self.state.jobs.values():
                if switch in job.allocations:
                    base = job.allocations[switch].cell * pipe.protocol.JOB_STAT_COUNT
                    out["jobs"].setdefault(job.name, {})[switch] = {n: cells.get(base + i, 0) for n, i in names.items()}
            drops = self._read_counter(switch, "InaIngress.drops")
            out["drops"][switch] = {n: drops.get(i, 0) for n, i in _named(pipe.protocol.constants, "DROP_").items()}
        return out

    def installed_entries(self, switch: str, table: str | None = None) -> set[Entry]:
        """What the switch holds in one table (default: every table we fill), read back over P4Runtime."""
        schema = Schema(self.pipeline(switch).p4info)
        tables = [table] if table else list(MANAGED_TABLES)
        return {schema.decode(e.table_entry) for e in self.client(switch).read(schema.wildcard(t) for t in tables)}

    def installed_groups(self, switch: str) -> dict[int, list[tuple[int, int]]]:
        """Multicast groups as {id: sorted [(port, instance)]}, read back over P4Runtime."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        groups = {}
        for e in self.client(switch).read([entity]):
            g = e.packet_replication_engine_entry.multicast_group_entry
            groups[g.multicast_group_id] = sorted((r.egress_port, r.instance) for r in g.replicas)
        return groups

    def expected_entries(self, switch: str) -> set[Entry]:
        return set(self._expected(switch)[0])

    def _expected(self, switch: str) -> tuple[list[Entry], list[tuple[int, list[tuple[int, int]]]]]:
        """Everything this switch should hold: routes, every live job's entries and groups, the high-water mark."""
        entries, groups = plan.route_entries(self.topology, switch), []
        for job in self.state.jobs.values():
            if switch in job.allocations:
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
        return plan.high_water_entry(self.state.next_epoch.get(switch, 1) - 1, self.state.next_job_id - 1)

    def _sync_counters(self, switch: str) -> None:
        schema = Schema(self.pipeline(switch).p4info)
        for e in self.client(switch).read([schema.wildcard("InaIngress.jobs")]):
            entry = schema.decode(e.table_entry)
            if entry.key("hdr.ina.child") == plan.HIGH_WATER_CHILD:
                epoch, job_id = plan.read_high_water(entry)
                self.state.next_epoch[switch] = max(self.state.next_epoch.get(switch, 1), epoch + 1)
                self.state.next_job_id = max(self.state.next_job_id, job_id + 1)
            elif entry.action == "InaIngress.member":
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
            self._remove(switch, stale, stale_groups)

    # --- planning ------------------------------------------------------------------------------

    def _plan_job(self, name: str, members: list[str], pool_size: int, pool_base: int | None) -> JobRecord:
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise JobError(f"job name {name!r}: use letters, digits, '-' and '_'")
        if name in self.state.jobs:
            raise JobError(f"job {name} exists already")
        some_switch = next(iter(self.topology.switches))
        pipe = self.pipeline(some_switch)
        if not isinstance(pool_size, int) or not 1 <= pool_size <= pipe.pool_slots:
            raise JobError(f"pool size {pool_size} is outside 1..{pipe.pool_slots} (the switch's slot pool)")
        try:
            tree = plan.build_tree(self.topology, members, pipe.protocol.MAX_CHILDREN)
        except plan.PlanError as e:
            raise JobError(str(e)) from None
        job_id = self.state.take_job_id({j.job_id for j in self.state.jobs.values()}, MAX_JOB_ID)
        if job_id is None:
            raise JobError("no free job id")
        allocations = {}
        for switch in tree:
            cell = self._free_cell(switch, pipe.max_jobs)
            base = self._free_pool(switch, pool_size, pool_base, pipe.pool_slots)
            allocations[switch] = plan.Allocation(base, cell, 0)
        for switch, a in allocations.items():  # epochs only once the job is certain to fit
            allocations[switch] = plan.Allocation(a.pool_base, a.cell, self.state.take_epoch(switch))
        return JobRecord(name, job_id, list(members), pool_size, allocations)

    def _free_cell(self, switch: str, max_jobs: int) -> int:
        used = {j.allocations[switch].cell for j in self.state.jobs.values() if switch in j.allocations}
        cell = next((c for c in range(max_jobs) if c not in used), None)
        if cell is None:
            raise JobError(f"switch {switch} carries {max_jobs} jobs already (INA_MAX_JOBS)")
        return cell

    def _free_pool(self, switch: str, size: int, wanted: int | None, slots: int) -> int:
        taken = sorted((j.allocations[switch].pool_base, j.allocations[switch].pool_base + j.pool_size)
                       for j in self.state.jobs.values() if switch in j.allocations)
        if wanted is not None:
            if not (0 <= wanted and wanted + size <= slots):
                raise JobError(f"pool {wanted}..{wanted + size - 1} does not fit switch {switch}'s {slots} slots")
            clash = [(a, b) for a, b in taken if a < wanted + size and wanted < b]
            if clash:
                raise JobError(f"pool {wanted}..{wanted + size - 1} overlaps slots {clash[0][0]}..{clash[0][1] - 1} "
                               f"of another job on switch {switch}")
            return wanted
        start = 0
        for a, b in taken + [(slots, slots)]:
            if a - start >= size:
                return start
            start = max(start, b)
        raise JobError(f"switch {switch} has no {size} free consecutive slots (of {slots}; "
                       f"in use: {', '.join(f'{a}..{b - 1}' for a, b in taken)})")

    def _job(self, name: str) -> JobRecord:
        try:
            return self.state.jobs[name]
        except KeyError:
            raise JobError(f"no job named {name!r} (jobs: {sorted(self.state.jobs)})") from None

    def _tree(self, job: JobRecord) -> dict[str, plan.TreeNode]:
        protocol = self.pipeline(next(iter(job.allocations))).protocol
        return plan.build_tree(self.topology, job.members, protocol.MAX_CHILDREN)

    def _worker_port(self, job: JobRecord) -> int:
        return WORKER_PORT_BASE + job.job_id

    def _job_entries(self, job: JobRecord, switch: str) -> tuple[list[Entry], list[tuple[int, list[tuple[int, int]]]]]:
        node = self._tree(job)[switch]
        entries, group = plan.job_entries(self.topology, self.pipeline(switch).protocol, node, job.job_id,
                                          job.pool_size, job.allocations[switch], self._worker_port(job))
        return entries, [group]

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

    # --- writes --------------------------------------------------------------------------------

    def _entities(self, switch: str, entries: Iterable[Entry], groups, match_only: bool = False):
        schema = Schema(self.pipeline(switch).p4info)
        for e in entries:
            te = schema.match_only(e) if match_only else schema.table_entry(e)
            yield p4runtime_pb2.Entity(table_entry=te)
        for group_id, replicas in groups:
            yield multicast_group(group_id, [] if match_only else replicas)

    def _install(self, switch: str, entries: list[Entry], groups) -> None:
        """Insert, and modify whatever already exists: the same call converges from any state."""
        entities = list(self._entities(switch, entries, groups))
        client = self.client(switch)
        try:
            client.write([Update(type=Update.INSERT, entity=e) for e in entities])
        except WriteError as err:
            if set(err.codes) - {"OK", "ALREADY_EXISTS"}:
                raise
            client.write([Update(type=Update.MODIFY, entity=e) for e, c in zip(entities, err.codes)
                          if c == "ALREADY_EXISTS"])

    def _remove(self, switch: str, entries: list[Entry], groups) -> None:
        entities = list(self._entities(switch, entries, groups, match_only=True))
        try:
            self.client(switch).write([Update(type=Update.DELETE, entity=e) for e in entities])
        except WriteError as err:
            if set(err.codes) - {"OK", "NOT_FOUND"}:
                raise

    def _read_counter(self, switch: str, name: str) -> dict[int, int]:
        schema = Schema(self.pipeline(switch).p4info)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = schema.counter_id(name)
        cells = self.client(switch).read([entity])
        return {e.counter_entry.index.index: e.counter_entry.data.packet_count for e in cells}


def _named(constants: dict[str, int], prefix: str) -> dict[str, int]:
    """Counter cell names from protocol.p4's constants: JOB_STAT_RESULTS -> 'results'."""
    return {k[len(prefix):].lower(): v for k, v in sorted(constants.items(), key=lambda kv: kv[1])
            if k.startswith(prefix) and not k.endswith(("_COUNT", "REASON_COUNT"))}
