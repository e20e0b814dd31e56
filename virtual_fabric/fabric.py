"""A whole network in virtual time: the topology's links, a simulated switch per switch, the real
controller, and the workers of the jobs it creates.

Every random choice (loss, duplication, reordering on each link direction, each switch's
``random`` extern) comes from its own stream of the seed (``virtual_fabric.seeds``), every
action is an event of one loop, and the switches' pipelines read the loop's clock, so a run is
a function of its seed and its inputs.
The controller runs as ``ina-ctl watch`` would: one ``watch_once`` every ``watch_interval``
seconds of virtual time, and its job spec reaches each worker ``spec_delay`` later (a real
worker looks at the file every 0.2 s).  Control-plane calls take no virtual time.

A job whose calls may go round a host ring (any but mode ina) runs its ring at flow level
(``virtual_fabric.flows``, ``virtual_fabric.ring``) on the same links as the packets.  The
controller's model is given the hosts' latency (``virtual_fabric.host_latency.MEAN``), and their CPU's cost
per datagram where the fabric has one (``host_cost``: none by default, so hosts take no time).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from controller.controller import Controller
from controller.model import NO_HOST_COST, HostCost
from controller.network import Network, SwitchAccess
from controller.p4runtime_client import SwitchError
from controller.pipeline import PipelineOptions
from controller.plan import SERVER_PORT
from controller.topology import Topology, delay_seconds
from p4target.runtime.device_config import DeviceConfigCache
from virtual_fabric import host_latency, seeds
from virtual_fabric.events import EventLoop
from virtual_fabric.flows import FlowNetwork, route
from virtual_fabric.host_cost import describe
from virtual_fabric.hosts import STATES, SimWorker
from virtual_fabric.links import Channel, Faults
from virtual_fabric.p4runtime_local import LocalSwitchClient
from virtual_fabric.ring import Ring
from virtual_fabric.switches import SERVER_QUEUE, SimSwitch
from worker import protocol
from worker.jobspec import SPEC_PERIOD, JobSpec

QUEUE_BYTES = 1_000_000  # per link direction, unless the link says "queue_bytes"
WATCH_INTERVAL = 0.5  # seconds between two rounds of the controller's watch
SPEC_DELAY = SPEC_PERIOD  # seconds until a worker sees a job spec the controller wrote (it looks this often)
REACTION = 1e-3  # seconds from a port status a switch publishes to the controller's round on it
COMPILED = DeviceConfigCache()  # one image per program for every fabric of this process


@dataclass
class Job:
    spec: JobSpec
    workers: list[SimWorker]
    seen: dict[int, int] = field(default_factory=dict)  # job id: incarnation the workers were told
    ring: Ring | None = None  # when its calls may go round a host ring


class CallSlices(Sequence):
    """One worker's arrays, call by call, made only when the call starts (a large run cannot hold every call's
    at once): the span [lo, hi) of what ``array_of(call)`` gives."""

    def __init__(self, array_of: Callable[[int], np.ndarray], span: tuple[int, int], calls: int) -> None:
        self.array_of, self.span, self.calls = array_of, span, calls

    def __len__(self) -> int:
        return self.calls

    def __getitem__(self, call: int) -> np.ndarray:
        if not 0 <= call < self.calls:
            raise IndexError(call)
        lo, hi = self.span
        return self.array_of(call)[lo:hi]


class Sums:
    """Results as the workers finish: the first for each key (kept, to check against the bound) and whether
    every later one was the same, bit for bit."""

    def __init__(self) -> None:
        self.first: dict[Hashable, np.ndarray] = {}
        self.identical: dict[Hashable, bool] = {}

    def agree(self, key: Hashable, result: np.ndarray) -> None:
        if key not in self.first:
            self.first[key], self.identical[key] = result.copy(), True
        elif self.identical[key] and not np.array_equal(result, self.first[key]):
            self.identical[key] = False

    def take(self, rank: int, call: int, result: np.ndarray) -> None:
        """A worker's ``hand_over``: one job's calls, keyed by call."""
        self.agree(call, result)


class Fabric:
    def __init__(self, topology: Topology, seed: int = 0, values: int | None = None,
                 watch_interval: float = WATCH_INTERVAL, spec_delay: float = SPEC_DELAY,
                 host_cost: HostCost = NO_HOST_COST, programs: Mapping[str, str] | None = None) -> None:
        """``programs``: the program a switch runs where not ina.p4 (``controller.programs`` names: "nic" for a
        streaming NIC's nic.p4)."""
        self.topology, self.seed, self.host_cost = topology, seed, host_cost
        self.loop = EventLoop()
        self.spec_delay, self.watch_interval = spec_delay, watch_interval
        P = protocol.load(values)  # what a contribution looks like, for switches that sum at a rate
        self.switches = {name: SimSwitch(name, s.index + 1, COMPILED, agg_pps=s.agg_pps, loop=self.loop, protocol=P,
                                         on_port_status=self._port_status,
                                         rng=seeds.stream(seed, f"switch {name}"))
                         for name, s in topology.switches.items()}
        for i, name in enumerate(topology.servers):  # a device at the server's end of its link, on port 1
            server = topology.hosts[name].server
            self.switches[name] = SimSwitch(name, len(topology.switches) + i + 1, COMPILED,
                                            agg_pps=server.agg_pps_per_core, cores=server.cores,
                                            agg_queue=SERVER_QUEUE, loop=self.loop,
                                            protocol=P, on_port_status=self._port_status,
                                            rng=seeds.stream(seed, f"server {name}"))
        self._reaction_due = False  # a round on a port status is scheduled
        self.hosts: dict[str, SimWorker] = {}  # host: the worker running there
        self.channels: list[tuple[Channel, Channel]] = []  # per topology link: (a -> b, b -> a)
        self.log: list[tuple[float, str]] = []  # what the controller did, when
        self.jobs: dict[str, Job] = {}
        self.flows = FlowNetwork(self.loop)  # host rings' transfers, at flow level
        self._running = 0  # workers not done
        for link in topology.links:
            self.channels.append((self._channel(link, link.a, link.b), self._channel(link, link.b, link.a)))
        programs = programs or {}
        access = {name: SwitchAccess(f"virtual:{name}", s.device_id, "builtin", programs.get(name, "v1model"))
                  for name, s in self.switches.items()}
        options = PipelineOptions() if values is None else PipelineOptions(values=values)
        self.controller = Controller(Network(topology, access), options=options, connect=self._connect,
                                     clock=self.loop.clock, host_latency=host_latency.MEAN, host_cost=host_cost)
        self.controller.setup()
        self._watching = True  # a watch round is scheduled (the rounds stop when every worker is done)
        self.loop.at(watch_interval, self._watch)

    # --- building ------------------------------------------------------------------------------

    def _channel(self, link, sender: str, receiver: str) -> Channel:
        options = link.options
        name = f"{sender} -> {receiver}"
        deliver = self._deliverer(receiver)
        channel = Channel(self.loop, name, link.capacity * 1e6, delay_seconds(options.get("delay")),
                          int(options.get("queue_bytes", QUEUE_BYTES)), seeds.stream(self.seed, f"link {name}"),
                          deliver, Faults(loss=float(options.get("loss", 0)) / 100))
        m = re.match(r"^(\w+)-p(\d+)$", sender) or re.match(r"^(\w+)()$", sender)
        if m and m[1] in self.switches:
            port = int(m[2] or SERVER_PORT)
            self.switches[m[1]].ports[port] = channel
            self.switches[m[1]].interfaces[port] = f"{m[1]}-eth{port}"
        return channel

    def _deliverer(self, end: str):
        m = re.match(r"^(\w+)-p(\d+)$", end) or re.match(r"^(\w+)()$", end)
        if m and m[1] in self.switches:  # a switch's port, or a server's one port
            switch, port = self.switches[m[1]], int(m[2] or SERVER_PORT)
            return lambda frame: switch.receive(port, frame)
        return lambda frame: self._to_host(end, frame)

    def _to_host(self, host: str, frame: bytes) -> None:
        worker = self.hosts.get(host)
        if worker is not None:
            worker.receive(frame)

    def _connect(self, name: str) -> LocalSwitchClient:
        switch = self.switches[name]
        if not switch.up:
            raise SwitchError(f"{name}: not reachable (the simulated switch is down)")
        return LocalSwitchClient(switch.server, switch.device_id, self.controller.io.election_id, name)

    def reseed(self, seed: int) -> None:
        """Every stream as a fabric built with ``seed`` starts it (a campaign's child, forked from a
        fabric built once per network, before anything random happened)."""
        self.seed = seed
        for channel in self.all_channels():
            seeds.reseed(channel.rng, seed, f"link {channel.name}")
        for name, switch in self.switches.items():
            seeds.reseed(switch.rng, seed, f"switch {name}")

    # --- jobs ----------------------------------------------------------------------------------

    def create_job(self, name: str, hosts: list[str], arrays: list[list[np.ndarray]], timeout: float = 3.0,
                   gap: float = 0.0, start: float | None = None, **options) -> Job:
        """The controller creates the job; a worker on each host makes the calls ``arrays[rank]``,
        from ``start`` (now) on.  A job whose calls may go round a ring (any mode but ina) runs it at flow
        level (``virtual_fabric.ring``)."""
        return self.start_workers(self.controller.create_job(name, hosts, **options), hosts, arrays, timeout, gap,
                                  start)

    def start_workers(self, spec: JobSpec, hosts: list[str], arrays: list[list[np.ndarray]], timeout: float = 3.0,
                      gap: float = 0.0, start: float | None = None) -> Job:
        """A worker on each host of a job the controller made (``spec``, as the workers read it), making the calls
        ``arrays[rank]`` from ``start`` (now) on."""
        name = spec.name
        ring = None
        if spec.mode != "ina":
            @cache
            def paths(a: int, b: int) -> list:
                return route(self.topology, self.channels, hosts[a], hosts[b])

            ring = Ring(self.loop, self.flows, len(hosts), paths, host_latency.HOST_LATENCY)
        workers = []
        for rank, host in enumerate(hosts):
            w = SimWorker(self.loop, spec, rank, arrays[rank], timeout, self.topology.hosts[host].mac, gap=gap,
                          on_done=self._worker_done, ring=ring, host_cost=self.host_cost)
            self._running += 1
            w.uplink = self.channels[self.topology.host_link(host)][0 if self.topology.links[
                self.topology.host_link(host)].a == host else 1]
            self.hosts[host] = w
            w.start(self.loop.now if start is None else start)
            workers.append(w)
        job = self.jobs[name] = Job(spec, workers, {t.job_id: t.incarnation for t in spec.trees}, ring)
        if not self._watching:  # workers of an earlier run are done: the watch starts again with these
            self._watching = True
            self.loop.after(self.watch_interval, self._watch)
        return job

    def _watch(self) -> None:
        self._look()
        self._watching = not self.finished()
        if self._watching:
            self.loop.after(self.watch_interval, self._watch)

    def _port_status(self) -> None:
        """A switch published a port's carrier change: the controller, subscribed to it, takes a round at
        once (as ``ina-ctl watch`` wakes on it), not at its next period."""
        if not self._reaction_due:
            self._reaction_due = True
            self.loop.after(REACTION, self._react)

    def _react(self) -> None:
        self._reaction_due = False
        self._look()

    def _look(self) -> None:
        """One round of the controller's watch, and the job specs it changed on their way to the workers."""
        for line in self.controller.watch_once():
            self.log.append((self.loop.now, line))
        for name, job in self.jobs.items():
            spec = self.controller.job_spec(name)
            changes = {t.job_id: (t.incarnation, f"tree {i + 1} of job {name} (root {t.root})", t)
                       for i, t in enumerate(spec.trees) if t.incarnation != job.seen.get(t.job_id)}
            if changes:
                job.seen.update({j: inc for j, (inc, _, _) in changes.items()})
                for w in job.workers:
                    self.loop.after(self.spec_delay, w.spec_changed, dict(changes))

    # --- faults --------------------------------------------------------------------------------

    def kill_switch(self, name: str) -> None:
        """The switch dies (power, a crash of the whole box): its neighbours lose carrier to it at once."""
        self.switches[name].kill()
        for neighbour, port in self._facing(name):
            neighbour.port_status(port, False)

    def restart_switch(self, name: str) -> None:
        """A killed switch's process starts again, empty; it finds the carrier of its ports as it is, and
        its neighbours find carrier to it again where the link is up."""
        switch = self.switches[name]
        switch.boot()
        for port, channel in switch.ports.items():
            if not channel.faults.up:
                switch.port_status(port, False)
        for neighbour, port in self._facing(name):
            if neighbour.ports[port].faults.up:
                neighbour.port_status(port, True)

    def _facing(self, name: str) -> list[tuple[SimSwitch, int]]:
        """The switches linked to this one, each with its port toward it."""
        if name in self.topology.hosts:  # a server: the switch its link leads to
            edge, port = self.topology.attachment[name]
            return [(self.switches[edge], port)]
        return [(self.switches[n.node], n.peer_port) for n in self.topology.ports[name].values()
                if n.node in self.switches]

    def set_link(self, index: int, up: bool) -> None:
        """A topology link's carrier goes down (or up): both directions, and both switch ends say so."""
        for channel in self.channels[index]:
            channel.faults.up = up
        link = self.topology.links[index]
        for end in (link.a, link.b):
            m = re.match(r"^(\w+)-p(\d+)$", end)
            if m and m[1] in self.switches:
                self.switches[m[1]].port_status(int(m[2]), up)

    def all_channels(self) -> list[Channel]:
        return [c for pair in self.channels for c in pair]

    # --- running -------------------------------------------------------------------------------

    def _worker_done(self) -> None:
        self._running -= 1
        if self._running == 0:
            self.loop.stopped = True

    def finished(self) -> bool:
        return self._running == 0

    def run(self, until: float) -> None:
        """Until every worker is done with its calls, or virtual time ``until``."""
        if not self.finished():
            gc.freeze()  # what the run starts with lives to its end: the collector need not walk it
            self.loop.run(until)

    def report(self) -> list[str]:
        """Where the virtual time went: the links, the queues in front of them, the workers' windows."""
        elapsed = max(self.loop.now, 1e-12)
        self.flows.settle_stats()
        lines = [f"virtual time {elapsed:.6f} s, {self.loop.events} events, "
                 f"{sum(s.passes for s in self.switches.values())} pipeline passes"]
        busiest = sorted(self.all_channels(), key=lambda c: -c.busy_by(elapsed))[:4]
        lines.append("links (busiest): " + ", ".join(
            f"{c.name} {100 * c.busy_by(elapsed) / elapsed:.0f}% busy"
            + (f" ({100 * c.stats.flow_busy / elapsed:.0f}% ring flows)" if c.stats.flow_busy else "")
            for c in busiest))
        for kind, chans in (("switch egress", [c for c in self.all_channels() if "-p" in c.name.split(" -> ")[0]]),
                            ("host uplinks", [c for c in self.all_channels() if "-p" not in c.name.split(" -> ")[0]])):
            frames = sum(c.stats.frames + c.stats.dropped_fault for c in chans)
            waited = sum(c.stats.queued for c in chans)
            drops = sum(c.stats.dropped_queue for c in chans)
            lost = sum(c.stats.dropped_fault for c in chans)
            wait = 1e6 * waited / max(frames, 1)
            lines.append(f"{kind} queues: {wait:.1f} us per frame waiting, {drops} tail drops, "
                         f"{lost} lost to faults")
        for name, job in self.jobs.items():
            if job.ring is not None:
                ring = [r.ring_seconds for w in job.workers for r in w.records if r.ring_seconds is not None]
                trees = [r.trees_seconds for w in job.workers for r in w.records if r.trees_seconds is not None]
                parts = [f"{what} {sum(t) / len(t):.6f} s" for what, t in (("trees", trees), ("ring", ring)) if t]
                parts = f"; per call (mean): {', '.join(parts)}" if parts else ""
                lines.append(f"job {name} (mode {job.spec.mode}): {job.ring.summary()}{parts}")
        workers = [w for job in self.jobs.values() for w in job.workers]
        if workers:
            total = {s: sum(w.time_in[s] for w in workers) / len(workers) for s in STATES}
            lines.append("worker windows (mean s per worker): " + ", ".join(f"{s} {v:.4f}" for s, v in total.items()))
            if not self.host_cost.free:
                busy = sum(w.cpu_busy for w in workers) / len(workers)
                lines.append(f"host CPUs: {describe(self.host_cost)}; busy {busy:.6f} s per worker "
                             f"(on average {busy / elapsed:.2f} of its CPUs busy over the run)")
        return lines
