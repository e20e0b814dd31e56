"""What is down, on the failover's own clock: switches whose neighbours lost carrier to them or whose control
stream ended (at once), switches that did not answer a probe (``probe``: a worker reported one of their trees
stalled), switches silent for ``dead_after`` (the backstop), links a reachable switch reports down, and
switches a tree's move could not reach (provisioned once they answer).  It decides; the controller
moves the trees (``Controller.route_around``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller import plan
from controller.p4runtime_client import SwitchError
from controller.state import JobRecord, TreeRecord
from controller.switch_io import SwitchIO
from controller.topology import Topology

log = logging.getLogger("ina.controller")
DEAD_AFTER = 3.0  # seconds unreachable before a switch counts as down (a restart takes less)
# A probe's deadline: a live switch answers a cookie read in milliseconds, even loaded; a probe runs on the watch
# thread, so a switch that hangs must not hold the round (and the trees it would move) for the client's 10 s.
PROBE_DEADLINE = 0.2
# Seconds between two probes of one switch: every rank of a job reports the same stall with its renewal (1,000
# ranks, each once per stall), and one answer (or silence) is all the controller needs.
PROBE_GAP = 1.0


class Failover:
    def __init__(self, clock: Callable[[], float], dead_after: float = DEAD_AFTER) -> None:
        self.clock, self.dead_after = clock, dead_after
        self.unreachable: dict[str, float] = {}  # switch: since when (``clock``)
        self.unsynced: set[str] = set()  # switches a write missed (a tree moved while they were away)
        self.gone: set[str] = set()  # switches whose control stream ended, or a probe found silent, until they answer
        self.probed: dict[str, float] = {}  # switch: when it was last probed (``clock``)
        self._told: set[tuple] = set()  # failures already reported as leaving a tree without a path

    def reachable(self, io: SwitchIO, switch: str) -> bool:
        """Whether the switch answered last time it was asked (without asking it now)."""
        client = io.known(switch)
        return client is not None and client.alive and switch not in self.unreachable

    def check(self, io: SwitchIO, topology: Topology, provision: Callable[[str], bool]) -> list[str]:
        """``provision`` the switches that restarted (or lost their pipeline), and those a tree's move could
        not reach; returns the names of those that needed the pipeline."""
        restarted = []
        for switch in topology.devices:
            try:
                client = io.known(switch)
                if client is not None and not client.alive:
                    self.gone.add(switch)  # until it answers below
                deadline = PROBE_DEADLINE if switch in self.gone else None  # a dead one must not hold the round
                if client is None or not client.alive or not io.runs_our_pipeline(switch, deadline) \
                        or switch in self.unsynced:
                    self.unreachable.setdefault(switch, self.clock())
                    if provision(switch):
                        restarted.append(switch)
                    self.unsynced.discard(switch)
                self.unreachable.pop(switch, None)
                self.gone.discard(switch)
            except SwitchError as e:
                log.warning("%s: not reachable yet: %s", switch, e)
        return restarted

    def failures(self, io: SwitchIO, topology: Topology) -> tuple[set[str], set[int]]:
        """The dead switches, and the links (indexes in the topology) that a reachable switch reports down
        (the built-in target reports its ports; BMv2 does not).

        A switch is dead at once when every switch next to it that answers has lost carrier to it (a box
        that died takes its links down), or when its control stream ended and it does not answer again (a
        killed process: in Mininet its veths stay up).  A restart that answers by then is provisioned and
        never counted; one that takes longer has its trees moved and given back (``return_home``).
        Silence alone (unreachable for ``dead_after``) is the backstop, for a switch never reached.  An aggregation
        server is a device like a switch: dead when its stream ended, it is silent, or its switch reports its one
        port down."""
        now = self.clock()
        dead = set(self.gone) | {s for s, since in self.unreachable.items() if now - since >= self.dead_after}
        down = set()
        for switch, client in io.connections():
            if switch not in self.unreachable and client.alive:
                down |= {(switch, p) for p in client.ports_down}
        links = {topology.port_links[end] for end in down if end in topology.port_links}
        for switch, ports in topology.ports.items():
            facing = [(n.node, n.peer_port) for n in ports.values() if n.node in topology.switches]
            heard = [end for end in facing if self.reachable(io, end[0])]
            if heard and all(end in down for end in heard):
                dead.add(switch)
        # an aggregation server: dead when the switch its one link leads to answers and has lost carrier to it
        dead |= {s for s in topology.servers if topology.attachment[s] in down}
        return dead, links

    def probe(self, io: SwitchIO, switches: list[str]) -> list[str]:
        """Ask each switch (not asked within ``PROBE_GAP``) for its pipeline cookie with ``PROBE_DEADLINE``;
        those whose stream ended or that do not answer are ``gone`` (dead in ``failures`` at once, until
        ``check`` finds them answering).  Returns them.  A switch never connected is left to the watch."""
        now, silent = self.clock(), []
        for switch in switches:
            if now - self.probed.get(switch, -float("inf")) < PROBE_GAP:
                continue
            self.probed[switch] = now
            client = io.known(switch)
            if client is None:
                continue
            try:
                if client.alive:
                    client.pipeline_cookie(PROBE_DEADLINE)
                    continue
            except SwitchError as e:
                log.warning("%s: no answer to a probe within %g s: %s", switch, PROBE_DEADLINE, e)
            self.gone.add(switch)
            silent.append(switch)
        return silent

    @staticmethod
    def crossed(topology: Topology, job: JobRecord, tree: TreeRecord, dead: set[str], links: set[int]) -> list[str]:
        """What of these failures the tree crosses, by name (none: it is unharmed)."""
        ours = set(plan.fabric_links(topology, tree.tree)) | {topology.host_link(m) for m in job.members}
        if plan.is_server_tree(topology, tree.tree):  # every member's way to the server, its own link last
            ours |= set(plan.server_links(topology, job.members, tree.tree, own_links=True))
        return sorted(set(tree.tree.switches()) & dead) + [plan.link_name(topology, i) for i in sorted(ours & links)]

    def first_report(self, key: tuple) -> bool:
        """True the first time a failure is reported this way (a tree left without a path is said once)."""
        if key in self._told:
            return False
        self._told.add(key)
        return True
