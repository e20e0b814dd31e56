"""What each switch should hold, and bringing it there: routes, every live job's table entries and
multicast groups, and the high-water mark of the ids it has seen.  Every write is idempotent (an
entry that exists is modified), so provisioning can run any number of times; a switch whose pipeline
cookie is not ours (it restarted) gets the pipeline and everything live again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from controller import plan
from controller.entries import HIGH_WATER_CHILD, high_water_entry, job_entries, read_high_water, route_entries
from controller.schema import Entry, Schema
from controller.state import ControllerState, JobRecord, TreeRecord
from controller.switch_io import SwitchIO
from controller.topology import Topology

log = logging.getLogger("ina.controller")
# A job's workers listen on WORKER_PORT_BASE + job_id (UDP for a tree, TCP for a ring): below Linux's
# ephemeral range (32768-60999), so no outgoing connection on the host can already hold the port.
WORKER_PORT_BASE = 16384
Groups = list[tuple[int, list[tuple[int, int]]]]  # multicast groups: (id, [(port, instance)])


def worker_port(job_id: int) -> int:
    return WORKER_PORT_BASE + job_id


class Reconciler:
    def __init__(self, topology: Topology, io: SwitchIO, state: Callable[[], ControllerState]) -> None:
        """``state``: the controller's state as it is now (it is read again when its file changes)."""
        self.topology, self.io, self._state = topology, io, state

    def provision(self, switch: str) -> bool:
        """Bring one switch up to date; True when it needed the pipeline (fresh or restarted, so it lost
        its registers under every live job on it)."""
        fresh = not self.io.runs_our_pipeline(switch)
        if fresh:
            log.info("%s: pushing the pipeline", switch)
            self.io.client(switch).set_pipeline(self.io.pipeline(switch).config)
        self.sync_counters(switch)
        entries, groups = self.expected(switch)
        self.remove_unexpected(switch, entries, groups)
        self.io.install(switch, entries, groups)
        return fresh

    def expected(self, switch: str) -> tuple[list[Entry], Groups]:
        """Everything this switch should hold: routes, every live job's entries and groups, the high-water mark."""
        entries, groups = route_entries(self.topology, switch, self.io.pipeline(switch).program), []
        for job in self._state().jobs.values():
            found, found_groups = self.job_entries(job, switch)
            entries += found
            groups += found_groups
        return entries + [self.high_water(switch)], groups

    def job_entries(self, job: JobRecord, switch: str) -> tuple[list[Entry], Groups]:
        """The entries and multicast groups of every tree of the job that passes through this switch."""
        found, groups = [], []
        for tree in job.on(switch):
            node = self.tree_nodes(job, tree)[switch]
            pipe = self.io.pipeline(switch)
            more, its_groups = job_entries(self.topology, pipe.protocol, node, tree.job_id, job.pool_size,
                                           tree.allocations[switch], worker_port(tree.job_id), pipe.program)
            found += more
            groups += its_groups
        return found, groups

    def tree_nodes(self, job: JobRecord, tree: TreeRecord) -> dict[str, plan.TreeNode]:
        """Each switch of the tree with its children (what its registers count, for whoever checks them)."""
        return plan.nodes(self.topology, job.members, tree.tree)

    def high_water(self, switch: str) -> Entry:
        """The switch's record of the last epoch and job id handed out, as a jobs-table entry.

        Its child index (HIGH_WATER_CHILD) is >= 32, a key ina.p4 never looks up, so the entry is
        inert; it lives exactly as long as the switch's registers, so a controller that lost its
        state file still never repeats an epoch those registers could hold.
        """
        state = self._state()
        return high_water_entry(state.next_epoch.get(switch, 1) - 1, state.next_job_id - 1,
                                self.io.pipeline(switch).program)

    def sync_counters(self, switch: str) -> None:
        """Epochs and job ids past what the switch's entries show, so none is handed out twice."""
        state, pipe = self._state(), self.io.pipeline(switch)
        program, schema = pipe.program, Schema(pipe.p4info)
        for e in self.io.client(switch).read([schema.wildcard(program.jobs)]):
            entry = schema.decode(e.table_entry)
            if entry.key("hdr.ina.child") == HIGH_WATER_CHILD:
                epoch, job_id = read_high_water(entry)
                state.next_epoch[switch] = max(state.next_epoch.get(switch, 1), epoch + 1)
                state.next_job_id = max(state.next_job_id, job_id + 1)
            elif entry.action == program.member:
                epoch = entry.param("epoch")
                state.next_epoch[switch] = max(state.next_epoch.get(switch, 1), epoch + 1)

    def remove_unexpected(self, switch: str, entries: list[Entry], groups: Groups) -> None:
        """Delete managed entries and groups not in this list (left by a crash or a failed create)."""
        installed = self.io.installed_entries(switch)
        installed_groups: Groups = [(g, []) for g in self.io.installed_groups(switch)]
        stale, stale_groups = left_over(installed, installed_groups, entries, groups)
        if stale or stale_groups:
            log.warning("%s: removing %d entries and %d multicast groups no live job needs", switch, len(stale),
                        len(stale_groups))
            self.io.remove(switch, stale, stale_groups)

    def counters(self) -> dict[str, dict]:
        """Per job and switch: the job_stats counters by name (packets), and per-switch drops."""
        out: dict[str, dict] = {"jobs": {}, "drops": {}}
        for switch in self.topology.devices:
            pipe = self.io.pipeline(switch)
            cells = self.io.read_counter(switch, pipe.program.job_stats)
            names = _named(pipe.protocol.constants, "JOB_STAT_")
            for job in self._state().jobs.values():
                for tree in job.on(switch):  # a job's trees through one switch add up
                    base = tree.allocations[switch].cell * pipe.protocol.JOB_STAT_COUNT
                    counts = out["jobs"].setdefault(job.name, {}).setdefault(switch, dict.fromkeys(names, 0))
                    for n, i in names.items():
                        counts[n] += cells.get(base + i, 0)
            drops = self.io.read_counter(switch, pipe.program.drops)
            out["drops"][switch] = {n: drops.get(i, 0) for n, i in _named(pipe.protocol.constants, "DROP_").items()}
        return out


def left_over(held: Iterable[Entry], held_groups: Groups, kept: Iterable[Entry],
              kept_groups: Groups) -> tuple[list[Entry], Groups]:
    """Of the entries and groups held, those not kept: an entry is kept when one of ``kept`` has its table
    and match (its action may differ: installing modifies it), a group when one of ``kept_groups`` has its id."""
    keys = {(e.table, e.match) for e in kept}
    wanted = {g for g, _ in kept_groups}
    return [e for e in held if (e.table, e.match) not in keys], [(g, r) for g, r in held_groups if g not in wanted]


def _named(constants: dict[str, int], prefix: str) -> dict[str, int]:
    """Counter cell names from protocol.p4's constants: JOB_STAT_RESULTS -> 'results'."""
    return {k[len(prefix):].lower(): v for k, v in sorted(constants.items(), key=lambda kv: kv[1])
            if k.startswith(prefix) and not k.endswith(("_COUNT", "REASON_COUNT"))}
