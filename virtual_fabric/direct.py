"""A direct-connect plan (``controller.direct``) run in the virtual fabric: every part at once, in one
event loop and one virtual time, so the plan's predicted call time can be held against what its parts do
together.

- Tree parts: every tree part's topology (``controller.direct.tree_topology``) merged into one network
  (part k's worker w is host ``t<k>h<w+1>``, devices keep their names ``d<j>``, which no two parts share),
  one ``Fabric`` on it: the real P4 program on every device, the real controller creating one job per tree
  part (``tree<k>``: one tree, the part's window as its pool), the worker's own core on every host.
- Ring parts: at flow level (``virtual_fabric.ring.Ring`` on the fabric's ``FlowNetwork``), on channels of
  their own for the part's circuits (L each way, the hop's delay), as the plan runs them: two directed flat
  rings, one in the part's order and one in reverse, each with half of the part's slice (a circuit is full
  duplex, so the directions do not share it).

A worker's call is each part's slice of one array (``DirectPlan.slices``).  Every part of every worker
starts call k at one moment, when the last part of call k-1 ended on the last worker (a barrier, so each
call has one start: ``SimWorker.gate`` holds the trees' workers), and the call's time is from that start to
the last part's end on any worker.  The results are checked as ``virtual_fabric.runs`` checks a job's: each
part's within its bound (trees: the switches', ``worker.quantize``; rings: float summation's,
``worker.ring.summation_bound``) and the same bits on every worker, and the whole call's result too.

The hosts take ``virtual_fabric.host_latency`` from wire to loop, so the plan is made for a cluster with
that host latency (``fabric_cluster``).
"""

from __future__ import annotations

import dataclasses
import re
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from controller.circuits import end_of
from controller.direct import RUNS_IN_FABRIC, DirectCluster, DirectError, DirectPlan, Part, plan, plan_of, tree_topology
from controller.nic_mesh import host, mesh_job, mesh_topology, nic
from controller.ring_tree import RelayRole, chain_ends, chain_spec, device_topology, relay_port, relay_roles
from controller.topology import Topology
from virtual_fabric import host_latency, seeds
from virtual_fabric.events import EventLoop
from virtual_fabric.fabric import QUEUE_BYTES, CallSlices, Fabric, Job, Sums
from virtual_fabric.flows import FlowNetwork
from virtual_fabric.frames import udp_header
from virtual_fabric.hosts import SimWorker
from virtual_fabric.links import Channel
from virtual_fabric.relays import InProcess, SimRelay
from virtual_fabric.ring import Ring
from virtual_fabric.steps import StepTrace, node_of
from worker import protocol, quantize
from worker.gradients import gradient
from worker.jobspec import JobSpec
from worker.native.relay import relay_class
from worker.ring import summation_bound
from worker.ring_layout import Layout

DTYPE = np.dtype(np.float32)  # what the plan times: float32 values
INA_KINDS = ("tree", "nic_mesh", "ring_tree")  # parts whose sums are the switches' (quantized): the rest are host rings
FAILURE_CHECK = 1e-3  # virtual seconds between two looks for a failed part (the run stops at the first)


def fabric_cluster(cluster: DirectCluster) -> DirectCluster:
    """The cluster with the host latency the fabric's hosts take (a frame waits ``host_latency.MEAN`` on
    average from the wire to the worker's loop), so the plan and the fabric count the same."""
    return dataclasses.replace(cluster, host_latency=host_latency.MEAN)


def check_runnable(p: DirectPlan) -> None:
    """DirectError naming the first part the fabric cannot run."""
    for k, part in enumerate(p.parts):
        if part.shape.kind not in RUNS_IN_FABRIC:
            raise DirectError(f"part {k} ({part.shape.name} on interfaces {list(part.interfaces)}, share "
                              f"{part.share:.3f}) is not runnable: the fabric runs {', '.join(RUNS_IN_FABRIC)} parts; "
                              f"plan with kinds among them")


def merged_topology(cluster: DirectCluster, p: DirectPlan) -> tuple[Topology | None, dict[int, list[str]]]:
    """Every tree part's and NIC mesh part's topology as one network (None: the plan has neither), and each such
    part's hosts in worker order.  Names and addresses are made unique across parts: part k's worker w is host
    ``t<k>h<w+1>`` at 10.<k+1>.x.y; a device keeps its name and is addressed by its number; a NIC mesh's NICs
    are ``t<k>n<w>`` (``controller.nic_mesh``), at 10.<k+1>.(200 + x).y."""
    hosts: dict[str, dict] = {}
    switches: dict[str, dict] = {}
    links: list[list] = []
    members: dict[int, list[str]] = {}
    for k, part in enumerate(p.parts):
        if part.shape.kind not in INA_KINDS:
            continue
        if k > 250:
            raise DirectError(f"part {k}: more tree parts than the fabric's addresses (10.<part>.x.y) take")
        if part.shape.kind == "ring_tree":  # the devices' job: the chain ends are its members
            data = device_topology(cluster, part)
            ends = chain_ends(cluster, part)
            for w in ends:
                hosts[f"t{k}h{w + 1}"] = _address(k, w, 0, 0, "/8")
            _add_devices(switches, data)
            links += [[f"t{k}{a}" if a.startswith("h") else a, f"t{k}{b}" if b.startswith("h") else b, options]
                      for a, b, options in data["links"]]
            members[k] = [f"t{k}h{w + 1}" for w in ends]
            continue
        if part.shape.kind == "nic_mesh":
            data = mesh_topology(cluster, part, f"t{k}")
            for w in range(cluster.workers):
                hosts[host(w, f"t{k}")] = _address(k, w, 0, 0, "/8")
                switches[nic(w, f"t{k}")] = _address(k, w, 200, 0x80)
            links += data["links"]
            members[k] = [host(w, f"t{k}") for w in range(cluster.workers)]
            continue
        data = tree_topology(cluster, part)
        names = {f"h{w + 1}": f"t{k}h{w + 1}" for w in range(cluster.workers)}
        for w in range(cluster.workers):
            hosts[names[f"h{w + 1}"]] = _address(k, w, 0, 0, "/8")
        _add_devices(switches, data)
        links += [[names.get(a, a), names.get(b, b), options] for a, b, options in data["links"]]
        members[k] = [names[f"h{w + 1}"] for w in range(cluster.workers)]
    if not members:
        return None, {}
    return Topology.from_dict({"hosts": hosts, "switches": switches, "links": links}), members


def _add_devices(switches: dict[str, dict], data: dict) -> None:
    """A part's devices, each addressed by its number (a device is in one part only)."""
    for name, spec in data["switches"].items():
        j = int(name[1:])
        switches[name] = {**spec, "ip": f"10.254.{j >> 8 & 255}.{j & 255}",
                          "mac": f"02:00:00:fe:{j >> 8 & 255:02x}:{j & 255:02x}"}


def _address(k: int, w: int, third: int, mac: int, prefix: str = "") -> dict:
    """Part k's worker w's address (``third`` added to the address's third byte, ``mac`` the MAC's fourth)."""
    return {"ip": f"10.{k + 1}.{third + (w >> 8 & 255)}.{w & 255}{prefix}",
            "mac": f"02:00:{k + 1:02x}:{mac:02x}:{w >> 8 & 255:02x}:{w & 255:02x}"}


class Inputs:
    """Every worker's array of each call (``worker.gradients.gradient``, as ``ina-sim run``'s), made when first
    asked for and kept for the current call only (1 call x N workers in memory, not every call's)."""

    def __init__(self, elements: int) -> None:
        self.elements = elements
        self._call = -1
        self._arrays: dict[int, np.ndarray] = {}

    def get(self, call: int, worker: int) -> np.ndarray:
        if call != self._call:
            self._call, self._arrays = call, {}
        if worker not in self._arrays:
            self._arrays[worker] = gradient(call, worker, self.elements, DTYPE.name)
        return self._arrays[worker]


class CircuitRings:
    """A ring or torus part on its circuits: two directed rings (``order`` and its reverse; a torus's are rings
    of rings, ``worker.ring_layout``'s hierarchical layout), half of the part's slice each, on one channel per
    circuit and direction.  Each level has two interfaces: in ``order`` a worker hears its predecessor on the
    level's second, in reverse on its first (``worker.direct.TorusPart``'s addresses), so a level of 2's pair,
    joined by two circuits, sends each direction's ring on one of them."""

    def __init__(self, loop: EventLoop, flows: FlowNetwork, cluster: DirectCluster, part: Part, seed: int) -> None:
        n = cluster.workers
        if n < 3 or len(part.interfaces) != (4 if part.shape.kind == "torus" else 2):
            raise DirectError(f"{part.shape.name} part on interfaces {list(part.interfaces)}: the fabric runs rings of "
                              f"3 or more workers over 2 interfaces each, and tori over 4")
        heard_on = (part.interfaces[1::2], part.interfaces[0::2])  # where each direction's rings arrive
        # (direction, from worker, to worker): the direction of a circuit that the directed ring sends on
        self.channels: dict[tuple[int, int, int], Channel] = {}
        for a, b in part.circuits:
            (wa, ia), (wb, ib) = _port(a), _port(b)
            for (src, si), (dst, di) in (((wa, ia), (wb, ib)), ((wb, ib), (wa, ia))):
                name = f"w{src}.{si} -> w{dst}.{di}"
                channel = Channel(loop, name, cluster.link_gbps * 1e9, cluster.hop_latency, QUEUE_BYTES,
                                  seeds.stream(seed, f"link {name}"), _nowhere)
                for direction, heard in enumerate(heard_on):
                    if di in heard:
                        self.channels[direction, src, dst] = channel
        order = tuple(part.order)
        name, levels = ("hierarchical", (part.shape.group, n // part.shape.group)) if part.shape.kind == "torus" \
            else ("flat", (n,))
        self.layouts = (Layout(name, levels, order), Layout(name, levels, order[::-1]))
        self.rings = tuple(Ring(loop, flows, n, lambda a, b, d=direction: [self.channels[d, a, b]],
                                host_latency.HOST_LATENCY) for direction in range(2))
        self.n = n

    def start(self, call: int, worker: int, data: np.ndarray,
              on_done: Callable[[np.ndarray | None, str | None], None]) -> None:
        """Worker ``worker``'s part of call ``call``: the first half round ``order``, the second half the other
        way; ``on_done(result, None)`` with both halves' sums, or ``(None, error)``."""
        mid = (data.size + 1) // 2
        halves: dict[int, np.ndarray] = {}
        failed: list[str] = []

        def half_done(which: int, result: np.ndarray | None, error: str | None) -> None:
            if failed:
                return
            if error is not None:
                failed.append(error)
                on_done(None, error)
                return
            halves[which] = result
            if len(halves) == 2:
                on_done(np.concatenate([halves[0], halves[1]]), None)

        for which, (ring, layout, piece) in enumerate(zip(self.rings, self.layouts, (data[:mid], data[mid:]))):
            # the ring sums in the tensor's type, in place: its own copy
            ring.start(worker, call, np.array(piece, DTYPE), DTYPE, layout, None,
                       lambda result, error, which=which: half_done(which, result, error))

    def mean_step(self) -> float:
        times = [t for r in self.rings for t in r.step_times]
        return sum(times) / len(times) if times else 0.0

    def steps(self) -> int:
        """The most steps a worker went through in a call, in either direction: each waits for the one before."""
        return max((n for r in self.rings for n in r.steps_taken.values()), default=0)


def _is_circuit(channel: Channel) -> bool:
    """Every link of the merged network is a circuit but a host's bus to its own NIC."""
    ends = channel.name.split(" -> ")
    return not (any(_is_nic(node_of(e)) for e in ends) and any(node_of(e) == e for e in ends))


def _is_nic(switch: str) -> bool:
    """A NIC mesh's NIC (``t<k>n<w>``), not a device (``d<j>``)."""
    return re.fullmatch(r"t\d+n\d+", switch) is not None


def _port(name: str) -> tuple[int, int]:
    """"w3.1" -> (3, 1)."""
    kind, worker, interface = end_of(name)
    if kind != "w":
        raise DirectError(f"ring circuit end {name!r}: a ring joins workers' interfaces (w<worker>.<interface>)")
    return worker, interface


@dataclass(eq=False)
class _Deliver:
    """A chain end's relay as the fabric's host: the devices' results go to its device port."""

    receive: Callable[[bytes], None]


def _nowhere(frame: bytes) -> None:
    """A ring circuit carries flows, never frames."""


class DirectRun:
    """A plan's parts built in one fabric, ready to run ``calls`` calls."""

    def __init__(self, p: DirectPlan, calls: int = 2, seed: int = 0, timeout: float = 3.0) -> None:
        check_runnable(p)
        if calls < 1:
            raise DirectError(f"calls: a whole number >= 1, not {calls!r}")
        c = p.cluster
        self.plan, self.calls, self.n, self.seed = p, calls, c.workers, seed
        self.elements = p.nbytes // DTYPE.itemsize
        if self.elements < 1:
            raise DirectError(f"bytes: {p.nbytes} per worker is less than one float32")
        self.spans = p.slices(self.elements)
        self.inputs = Inputs(self.elements)
        topology, members = merged_topology(c, p)
        nics = {name: "nic" for name in (topology.switches if topology is not None else ()) if _is_nic(name)}
        self.fabric = Fabric(topology, seed, values=p.values, programs=nics) if topology is not None else None
        self.trace = StepTrace(self.fabric.all_channels(), _is_circuit, protocol.load(p.values)) \
            if self.fabric is not None else None
        self.loop = self.fabric.loop if self.fabric else EventLoop()
        self.flows = self.fabric.flows if self.fabric else FlowNetwork(self.loop)
        # per call: when it started, when each part ended on each worker, what is still running
        self.started: dict[int, float] = {}
        self.ended: dict[int, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        self.running: dict[int, int] = {}
        self.errors: list[str] = []
        self.results = Sums()  # (part, call): the first sums to come, and whether the rest agree
        self._opened = -1
        self._waiting: dict[int, list[Callable[[], None]]] = defaultdict(list)
        self.jobs, self.rings, self.relays = {}, {}, {}
        self._circuit_channels: dict[tuple[str, str], list[Channel]] = {}  # a relay circuit's two directions
        self._down: list[str] = []  # circuits cut, as errors name them
        for k, part in enumerate(p.parts):
            if part.shape.kind in ("tree", "nic_mesh"):
                arrays = [CallSlices(lambda call, w=w: self.inputs.get(call, w), self.spans[k], calls)
                          for w in range(self.n)]
                if part.shape.kind == "tree":
                    trees, pool = 1, part.shape.window
                else:  # the routes' meeting trees, each an equal share and its part of the window
                    trees, pool = mesh_job(c, part, f"t{k}")
                job = self.fabric.create_job(f"tree{k}", members[k], arrays, timeout=timeout, mode="ina", trees=trees,
                                             pool_size=pool)
                for w in job.workers:
                    w.hand_over = lambda rank, call, result, k=k: self._done(k, rank, call, result)
                    w.gate = self._gate
                self.jobs[k] = job
            elif part.shape.kind == "ring_tree":
                self.jobs[k] = self._chains(k, part, members[k], timeout)
            else:
                self.rings[k] = CircuitRings(self.loop, self.flows, c, part, seed)
        self.loop.at(self.loop.now, self._open, 0)
        self.loop.check_every(FAILURE_CHECK, self._failure)

    def _chains(self, k: int, part: Part, ends: list[str], timeout: float) -> Job:
        """A ring_tree part: the devices' job (its members the chain ends, ``controller.ring_tree``), a relay on
        every worker's host (``virtual_fabric.relays``) wired to its circuits, and every worker's own calls
        through its relay (``SimWorker`` on an in-process link)."""
        c, fabric, P = self.plan.cluster, self.fabric, protocol.load(self.plan.values)
        devices = fabric.controller.create_job(f"tree{k}", ends, part.shape.window, trees=1, mode="ina")
        (tree,) = devices.trees
        at_device = {chain_ends(c, part)[rank]: child for rank, child in enumerate(tree.children)}
        roles = relay_roles(c, part, tree.job_id, devices.pool_size, at_device)
        names = [f"t{k}h{w + 1}" for w in range(self.n)]
        address = [_address(k, w, 0, 0) for w in range(self.n)]
        local = _address(k, 0, 100, 0xAA)  # the relays' address towards their own workers: host-local
        spec = chain_spec(devices, [a["ip"] for a in address], (local["ip"], local["mac"]))
        relays: list[SimRelay] = []
        circuits: dict[tuple[int, int], Channel] = {}  # (worker, port): the channel out of it
        for role in roles:
            w, links, headers = role.worker, {}, {}
            for port, far in role.far.items():
                kind, node, there = end_of(far)
                if kind == "d":  # the devices' network's link (the fabric built it)
                    index = fabric.topology.host_link(names[w])
                    link = fabric.topology.links[index]
                    links[port] = fabric.channels[index][0 if link.a == names[w] else 1]
                    device = fabric.topology.switches[f"d{node}"]
                    headers[port] = udp_header(address[w]["mac"], device.mac, address[w]["ip"], str(device.ip),
                                               tree.port, P.INA_UDP_PORT, P.packet_bytes)
                else:
                    rate, name = c.link_gbps * 1e9, f"{names[w]}-p{port} -> {names[node]}-p{relay_port(there)}"
                    links[port] = circuits[w, port] = Channel(self.loop, name, rate, c.hop_latency, QUEUE_BYTES,
                                                              seeds.stream(self.seed, f"link {name}"), _nowhere)
                    headers[port] = udp_header(address[w]["mac"], address[node]["mac"], address[w]["ip"],
                                               address[node]["ip"], P.INA_UDP_PORT, P.INA_UDP_PORT, P.packet_bytes)
            headers[0] = udp_header(local["mac"], address[w]["mac"], local["ip"], address[w]["ip"], P.INA_UDP_PORT,
                                    tree.port, P.packet_bytes)
            relays.append(SimRelay(self.loop, names[w], relay_class()([role.tree], P), links, headers, lambda _: None,
                                   on_result=self.trace.result_at, on_process=self.trace.processing))
        for role, relay in zip(roles, relays):  # each circuit's far end delivers to the neighbour's relay port
            for port, far in role.far.items():
                kind, node, there = end_of(far)
                if kind == "w":
                    circuits[role.worker, port].deliver = relays[node].port(relay_port(there))
                else:
                    fabric.hosts[names[role.worker]] = _Deliver(relay.port(port))
        self.trace.watch(list(circuits.values()))
        for (w, port), channel in circuits.items():  # each relay circuit's two directions, by the plan's ends
            here, there = f"w{w}.{port - 1}", roles[w].far[port]
            key = next((c for c in part.circuits if set(c) == {here, there}), None)
            if key is not None:
                self._circuit_channels.setdefault(key, []).append(channel)
        self.trace.relays |= set(names)
        workers = self._relayed_workers(k, spec, relays, roles, [a["mac"] for a in address], timeout)
        self.relays[k] = relays
        return Job(spec, workers)

    def _relayed_workers(self, k: int, spec: JobSpec, relays: list[SimRelay], roles: list[RelayRole], macs: list[str],
                         timeout: float) -> list[SimWorker]:
        """Part ``k``'s workers, each calling through its own host's relay (in process) and started now."""
        workers = []
        for w, relay in enumerate(relays):
            arrays = [CallSlices(lambda call, w=w: self.inputs.get(call, w), self.spans[k], self.calls)]
            worker = SimWorker(self.loop, spec, w, arrays[0], timeout, macs[w], rx_delay=0.0)
            worker.uplink = InProcess(self.loop, relay.from_worker, relay.links.get(roles[w].tree.parent_port))
            relay.to_worker = worker.receive
            worker.hand_over = lambda rank, call, result, k=k: self._done(k, rank, call, result)
            worker.gate = self._gate
            worker.start(self.loop.now)
            workers.append(worker)
        return workers

    # --- the barrier ---------------------------------------------------------------------------

    def _open(self, call: int) -> None:
        """Call ``call`` starts on every part of every worker now."""
        self._opened = call
        self.started[call] = self.loop.now
        self.running[call] = self.n * len(self.plan.parts)
        for go in self._waiting.pop(call, []):
            go()
        for k, ring in self.rings.items():
            lo, hi = self.spans[k]
            for w in range(self.n):
                ring.start(call, w, self.inputs.get(call, w)[lo:hi],
                           lambda result, error, k=k, w=w: self._ring_done(k, w, call, result, error))

    def _gate(self, call: int, go: Callable[[], None]) -> None:
        """A tree part's worker is ready for ``call``: it starts once the call has (at once if it has)."""
        if call <= self._opened:
            go()
        else:
            self._waiting[call].append(go)

    def _ring_done(self, k: int, w: int, call: int, result: np.ndarray | None, error: str | None) -> None:
        if error is not None:
            self.errors.append(f"part {k} (ring), worker {w}, call {call}: {error}")
            self.loop.stopped = True
            return
        self._done(k, w, call, result)

    def _done(self, k: int, w: int, call: int, result: np.ndarray) -> None:
        """Part ``k`` of worker ``w``'s call ended with these sums."""
        self.ended[call][k][w] = self.loop.now
        key = (k, call)
        self.results.agree(key, result)
        self.running[call] -= 1
        if self.running[call] == 0:
            if call + 1 < self.calls:
                self._open(call + 1)
            else:
                self.loop.stopped = True

    def _failure(self) -> str | None:
        """The first part that failed on some worker (the run stops: the barrier would wait for it forever)."""
        if not self.errors:
            self.errors = [f"part {k} ({self.plan.parts[k].shape.name}), worker {rank}, call {call}: {r.error}"
                           + self._circuits_down(k)
                           for k, job in self.jobs.items() for rank, w in enumerate(job.workers)
                           for call, r in enumerate(w.records) if r.error]
        return self.errors[0] if self.errors else None

    def cut(self, circuit: tuple[str, str]) -> None:
        """A circuit of the plan goes down now, both ways (the OCS lost it, or a fibre broke)."""
        a, b = circuit
        if circuit not in self._circuit_channels:
            raise DirectError(f"circuit {list(circuit)} is not one of the plan's")
        for channel in self._circuit_channels[circuit]:
            channel.faults.up = False
        self._down.append(f"{a} <-> {b}")

    def _circuits_down(self, k: int) -> str:
        """The part's circuits that are down, as an error names them."""
        mine = {f"{a} <-> {b}" for a, b in self.plan.parts[k].circuits}
        down = [c for c in self._down if c in mine]
        return f" (circuits down: {', '.join(down)})" if down else ""

    # --- running -------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return len(self.started) == self.calls and self.running[self.calls - 1] == 0

    def run(self, until: float = 60.0) -> None:
        """Until every call ended on every part, a part failed, or virtual time ``until``."""
        while not self.finished and not self.errors and self.loop.now < until:
            events = self.loop.events
            self.loop.run(until)  # the fabric stops it when its workers are done; the rings may not be
            if self.loop.events == events:
                break

    def calls_figures(self) -> list[dict]:
        """Each call: its time (common start to the last part's end), and each part's (to its last worker's end)."""
        out = []
        for call in range(self.calls):
            ends = self.ended.get(call, {})
            complete = call in self.started and all(len(ends.get(k, {})) == self.n for k in range(len(self.plan.parts)))
            start = self.started.get(call)
            parts = [max(ends[k].values()) - start if complete else None for k in range(len(self.plan.parts))]
            out.append({"seconds": max(parts) if complete else None, "parts": parts,
                        "ratio": max(parts) / self.plan.seconds if complete and self.plan.seconds else None})
        return out

    def check(self) -> dict:
        """Every completed call against the exact sum: each part within its bound (``quantize.elementwise_bound``
        for a tree's slice, ``ring.summation_bound`` for a ring's) and the same bits on every worker, and the
        whole result (the parts' sums in slice order) within the parts' bounds."""
        parts = self.plan.parts
        out = {"within_bound": True, "identical": True, "max_error": 0.0, "calls_checked": 0,
               "parts": [{"within_bound": True, "identical": True, "max_error": 0.0} for _ in parts]}
        for call in range(self.calls):
            if any((k, call) not in self.results.first for k in range(len(parts))):
                continue
            arrays = [self.inputs.get(call, w) for w in range(self.n)]  # the call's, kept by Inputs
            exact = np.zeros(self.elements)
            for x in arrays:
                exact += x
            bound = np.empty(self.elements)
            for k, part in enumerate(parts):
                lo, hi = self.spans[k]
                mine = [x[lo:hi] for x in arrays]  # every worker chunks its own slice
                bound[lo:hi] = quantize.elementwise_bound(mine, self.plan.values) if part.shape.kind in INA_KINDS \
                    else summation_bound(mine)
            bound += np.abs(exact) * float(np.finfo(DTYPE).eps)  # the final cast
            whole = np.concatenate([self.results.first[k, call] for k in range(len(parts))]).astype(np.float64)
            if whole.size != self.elements:
                out["within_bound"] = False
                continue
            err = np.abs(whole - exact)
            for k in range(len(parts)):
                lo, hi = self.spans[k]
                mine = out["parts"][k]
                mine["max_error"] = max(mine["max_error"], float(err[lo:hi].max(initial=0.0)))
                mine["within_bound"] &= bool((err[lo:hi] <= bound[lo:hi]).all())
                mine["identical"] &= self.results.identical[k, call]
            out["max_error"] = max(out["max_error"], float(err.max(initial=0.0)))
            out["within_bound"] &= bool((err <= bound).all())
            out["identical"] &= all(self.results.identical[k, call] for k in range(len(parts)))
            out["calls_checked"] += 1
        if out["calls_checked"] < self.calls:
            out["within_bound"] = out["identical"] = False
        return out


def run_plan(p: DirectPlan, calls: int = 2, seed: int = 0, until: float = 60.0) -> dict:
    """Build, run and check a plan; the figures as a dict (``summary`` prints them)."""
    started = time.perf_counter()
    r = DirectRun(p, calls, seed)
    built = time.perf_counter()
    r.run(until)
    ran = time.perf_counter()
    check = r.check()
    checked = time.perf_counter()
    figures = r.calls_figures()
    values = p.values
    parts = []
    for k, part in enumerate(p.parts):
        lo, hi = r.spans[k]
        entry = {"kind": part.shape.kind, "interfaces": list(part.interfaces), "devices": len(part.devices),
                 "share": part.share, "elements": [lo, hi], "steps": part.shape.steps,
                 "predicted": part.shape.exact_seconds((hi - lo) * DTYPE.itemsize, values),
                 "measured": [f["parts"][k] for f in figures], **check["parts"][k]}
        if k in r.jobs:
            spec = r.jobs[k].spec
            entry.update(root=part.root, fabric_root=spec.trees[0].root, window=spec.pool_size,
                         steps_run=r.trace.longest(t.job_id for t in spec.trees),
                         steps_counts=r.trace.counts(t.job_id for t in spec.trees))
        else:
            ring = r.rings[k]
            entry.update(mean_step=ring.mean_step(), steps_run=ring.steps(),
                         planned_step=part.shape.cost.mean_step((hi - lo) * DTYPE.itemsize))
        parts.append(entry)
    return {
        "cluster": p.cluster.to_dict(), "bytes": p.nbytes, "calls": calls,
        "plan": {"seconds": p.seconds, "steps": p.steps, "devices_used": p.devices_used, "baselines": p.baselines,
                 "planning_seconds": p.planning_seconds, "transfer_lb": p.transfer_lb},
        "steps_run": max((part["steps_run"] for part in parts), default=0),
        "parts": parts,
        "call_figures": figures,
        "errors": r.errors,
        "check": check,
        "virtual": r.loop.now, "events": r.loop.events,
        "passes": sum(s.passes for s in r.fabric.switches.values()) if r.fabric else 0,
        "wall": {"setup": built - started, "run": ran - built, "check": checked - ran, "total": checked - started},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "report": r.fabric.report() if r.fabric else [],
    }


def run(cluster: DirectCluster, nbytes: int, kinds: Iterable[str] | None = None, calls: int = 2,
        seed: int = 0, until: float = 60.0, parts: Sequence[str] | None = None) -> dict:
    """Plan a call of ``nbytes`` per worker for the cluster (with the fabric's host latency: ``kinds`` the shapes
    the planner may use, or ``parts`` exactly these, ``controller.direct.plan_of``) and run it."""
    cluster = fabric_cluster(cluster)
    p = plan_of(cluster, nbytes, parts) if parts else plan(cluster, nbytes, kinds)
    return run_plan(p, calls, seed, until)


def summary(result: dict) -> list[str]:
    """What ``ina-sim direct`` prints."""
    c = result["cluster"]
    w, d = c["workers"], c["devices"]
    lines = [f"cluster: {w['count']} workers x {w['interfaces']} interfaces at {w['gbps']:g} Gbit/s; {d['count']} "
             f"device(s) of {d['ports']} ports; hop {result['cluster']['hop_latency_us']:g} us, host "
             f"{result['cluster']['host_latency_us']:g} us; {result['bytes']:,} bytes per worker, "
             f"{result['calls']} call(s)"]
    plan_ = result["plan"]
    lines.append(f"plan: {plan_['seconds'] * 1e3:.3f} ms, {plan_['steps']} steps ({result['steps_run']} counted in the "
                 f"run), transfer {plan_['transfer_lb']:.4f} L.b, {plan_['devices_used']} device(s)"
                 + "".join(f"; beside {name.replace('_', ' ')} "
                           + (f"{t * 1e3:.3f} ms" if t is not None else "(does not fit)")
                           for name, t in plan_["baselines"].items()))
    for k, part in enumerate(result["parts"]):
        measured = ", ".join("failed" if m is None else f"{m * 1e3:.3f}" for m in part["measured"])
        extra = (f"root {part['fabric_root']} (planned {'d' + str(part['root'])}), window {part['window']}"
                 if part["kind"] in INA_KINDS else
                 f"step {part['mean_step'] * 1e6:.2f} us (planned {part['planned_step'] * 1e6:.2f})")
        lines.append(f"  part {k}: {part['kind']} on interfaces {part['interfaces']}, {part['devices']} device(s), "
                     f"share {part['share']:.3f}, {part['steps']} steps planned, {part['steps_run']} run"
                     + (f" (rounds by steps: {part['steps_counts']})" if part.get("steps_counts") else "")
                     + f"; predicted {part['predicted'] * 1e3:.3f} ms, "
                     f"measured {measured} ms; {extra}; within bound {part['within_bound']}, identical "
                     f"{part['identical']}")
    for i, f in enumerate(result["call_figures"]):
        if f["seconds"] is None:
            lines.append(f"call {i}: failed")
        else:
            lines.append(f"call {i}: {f['seconds'] * 1e3:.3f} ms virtual; the plan said "
                         f"{plan_['seconds'] * 1e3:.3f} ms ({f['ratio']:.3f}x)")
    lines += [f"error: {e}" for e in result["errors"][:5]]
    check = result["check"]
    lines.append(f"every result within the bound: {check['within_bound']}; identical on every worker: "
                 f"{check['identical']}; max |error| {check['max_error']:.3g} ({check['calls_checked']} call(s))")
    lines += result["report"]
    wall = result["wall"]
    lines.append(f"wall {wall['total']:.1f} s (setup {wall['setup']:.1f}, run {wall['run']:.1f}, check "
                 f"{wall['check']:.1f}); peak memory {result['peak_rss_mb']:,.0f} MB")
    return lines
