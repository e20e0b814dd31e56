"""The one model of a job's calls, built from the topology (each link's own rate and delay, each switch's
aggregation rate), the plan (its trees) and the hosts' latency: the numbers a worker chooses and paces
each call with (``worker.tuner.CallModel``, which evaluates them), and every prediction the controller
makes: `ina-ctl job plan`, the service's replies, admission, `ina-sim` and its campaign.

In-network aggregation, per tree (``tree_pipe``): a round trip is a frame's way from the deepest member up
to the root and its result's back (each hop's frame time at the rate packets get there, plus its
propagation), each switch's turn at its aggregation engine for the children it sums, and the host's
latency (wire to the worker's loop: measured by `ina-ctl calibrate`, ``DEFAULT_HOST_LATENCY`` until
then; the virtual fabric passes its own).  A tree's frames leave at the planner's rate for it, or at
its share of C where the switches sum slower than the links (the worker paces them there), or as fast
as the host's CPU sends them and takes their results (``HostCost``, where it is known: the virtual
fabric's ``--host-cost``): its send and receive cost per packet add to every round trip, and a CPU serving
several trees spaces a tree's packets by their sum over the tree's part of what that CPU serves (the host's
``cores`` take the trees in turn, as the worker's threads do: a lane of a tree on a core of its own).

A server's tree (issue 62, ``topology.Server``): its way up is the member's route to its server (and, in a
tree of two levels, that leaf server's route to the root), its engines those servers, a lane's tree on one of
their cores (``turn`` = children / ``agg_pps_per_core``); what a server sums in all is ``agg_pps_per_core`` x the
cores the lanes of its trees take (``device_rate``), which bounds C as a switch's ``agg_pps`` does, and its link
carries a tree once per frame a slot brings it, each member's and each leaf's partial (``trees_load``).

A ring, per layout: ``controller.rings``.  A hybrid, per layout: the trees at C' = min(C, L, what their
windows carry in a round trip), the ring's flows in what C' leaves of every link the trees use (each
level paced at its slowest flow's share, so several flows on one fabric link do not take the trees'
part), C' found by iteration because the ring's flows slow the trees' frames on the links they share
(packets get what flows leave).

A direct-connect cluster's parts (``controller.direct``'s catalogue; docs/direct.md): each a line, latency +
seconds per byte of its share (``PartCost``), a ring of circuits and a torus as ``controller.rings`` costs a
ring on links of its own, a tree of devices through its ``TreePipe`` with the window open; the shares that end
a plan's parts at once are the hybrid split's closed form (``worker.tuner.equal_finish``).

A calibration (`ina-ctl calibrate`) inverts the model: C from a float call's time, a later call of its size
(no exponent-only packets: ``sent_mbps``); a ring's rate and efficiency through ``rings.ring_wire_mbps`` and
``rings.ring_efficiency``.

A multi-GPU node's call, hierarchical (issue 44; ``hierarchical_call``): a reduce-scatter among the node's ranks
(NVLink, at an in-node rate), then each rank's shard summed across the nodes by its rail's job (the rails' jobs
run at once, so the slowest, by this model, sets the middle), then an all-gather among the node's ranks.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.fair_share import FLOOR
from controller.plan import Tree, is_server_tree, nodes, server_links, server_of
from controller.rings import TCP_WIRE, Direction, layouts, ring_cost
from controller.topology import Topology
from worker import protocol
from worker.ring import HEADER
from worker.ring_layout import Layout
from worker.tuner import PURE, CallModel, HybridCost, InaCost, TreePipe, equal_finish

DEFAULT_HOST_LATENCY = 20e-6  # seconds from the wire to a worker's loop, until `ina-ctl calibrate` measures it


@dataclass(frozen=True)
class HostCost:
    """What a packet costs a host's one CPU: seconds per datagram sent and per datagram received, and per byte
    of the datagram (UDP payload) each way.  Serial: a packet and its result cost the sum, and nothing else
    runs meanwhile, so a host moves at most one packet per ``per_packet`` seconds on each of its ``cores``.
    A host's trees go to its cores in turn (tree i on core i mod min(cores, trees)), as ``Worker(threads=)``
    shares them out among its threads."""

    send: float = 0.0
    receive: float = 0.0
    send_per_byte: float = 0.0
    receive_per_byte: float = 0.0
    cores: int = 1

    def core_of(self, tree: int, trees: int) -> int:
        """The core that serves tree ``tree`` of ``trees``."""
        return tree % max(1, min(self.cores, trees))

    def send_seconds(self, nbytes: int) -> float:
        return self.send + self.send_per_byte * nbytes

    def receive_seconds(self, nbytes: int) -> float:
        return self.receive + self.receive_per_byte * nbytes

    def per_packet(self, nbytes: int) -> float:
        """One packet of ``nbytes`` sent and its result of as many received, on the one CPU."""
        return self.send_seconds(nbytes) + self.receive_seconds(nbytes)

    def core_mbps(self, packet_bytes: int, frame_bytes: int) -> float:
        """The wire Mb/s one core keeps up with: a frame per packet sent and its result taken."""
        return frame_bytes * 8 / self.per_packet(packet_bytes) / 1e6

    @property
    def free(self) -> bool:
        """Hosts that take no time (the fabric's default, and every figure before host costs)."""
        return not (self.send or self.receive or self.send_per_byte or self.receive_per_byte)


NO_HOST_COST = HostCost()


@dataclass(frozen=True)
class JobTree:
    """A tree as the model needs it: its shape, the planner's rate for it (wire Mb/s) and its share."""

    tree: Tree
    rate: float
    share: float


def switch_loads(topology: Topology, members: Sequence[str], trees: Sequence[JobTree]) -> dict[str, float]:
    """The contributions each switch sums per slot of the job: a switch with c children in a tree sums c per
    slot of it, and the job's slots are spread over its trees by their shares: sum_t(share_t c_st)."""
    children: dict[str, float] = {}
    for t in trees:
        for node in nodes(topology, list(members), t.tree).values():
            children[node.switch] = children.get(node.switch, 0.0) + t.share * len(node.children)
    return children


def device_rate(topology: Topology, device: str, trees: Sequence[JobTree]) -> float | None:
    """Contributions a tree node sums per second for the job (None: as fast as they come): a switch's
    ``agg_pps``; a server's per-core rate on as many cores as the job's trees it is a node of (their lanes, a
    core each; lanes' consecutive job ids spread over its cores)."""
    if device in topology.switches:
        return topology.switches[device].agg_pps
    return topology.device_pps(device, sum(1 for t in trees if device in t.tree.switches()))


def engine_pps(topology: Topology, device: str) -> float | None:
    """What one tree's engine sums per second at this node: a switch's ``agg_pps``, one server core's rate."""
    if device in topology.switches:
        return topology.switches[device].agg_pps
    server = topology.hosts[device].server
    return None if server is None else server.agg_pps_per_core


def aggregation_limit(topology: Topology, members: Sequence[str], trees: Sequence[JobTree],
                      frame_bytes: int) -> tuple[float, str]:
    """C: the wire Mb/s each worker may offer the trees given the devices' declared aggregation rates
    (``device_rate``: contributions summed per second).  Device s allows S <= its rate / ``switch_loads`` slots
    per second, and each worker sends one frame per slot.  math.inf where no device of the job declares a rate."""
    best, why = math.inf, ""
    for switch, load in sorted(switch_loads(topology, members, trees).items()):
        rate = device_rate(topology, switch, trees)
        if rate is not None and rate / load * frame_bytes * 8 / 1e6 < best:
            best = rate / load * frame_bytes * 8 / 1e6
            why = f"{switch} sums {rate:g} contributions/s"
    return best, why


def aggregation_rates(topology: Topology, members: Sequence[str], trees: Sequence[JobTree], frame_bytes: int,
                      limit_mbps: float) -> dict[str, float]:
    """``aggregation_limit`` backwards: the ``agg_pps`` each switch of the trees declares for C to be
    ``limit_mbps`` (every switch a bound at once)."""
    frames = limit_mbps * 1e6 / (frame_bytes * 8)  # per child and second
    return {switch: frames * load for switch, load in switch_loads(topology, members, trees).items()
            if switch in topology.switches}


def tree_pipe(topology: Topology, members: Sequence[str], t: JobTree, pace_mbps: float, frame_bytes: int,
              host_latency: float, taken: dict[Direction, float] | None = None, host_seconds: float = 0.0,
              core_share: float = 1.0) -> TreePipe:
    """One tree whose frames leave at ``pace_mbps``, with ``taken`` bits/s of each link direction used by
    flows beside it (its frames get the rest, and its planned rate shrinks with its busiest link's rest);
    ``host_seconds``: the host's CPU per packet, sent and its result received (``HostCost.per_packet``), on a
    core that serves trees of ``core_share`` of the job's data in all (one core: all of it)."""
    bits = frame_bytes * 8
    taken = taken or {}
    up = dict(t.tree.uplinks)
    tree_nodes = nodes(topology, list(members), t.tree)

    def left(direction: Direction) -> float:
        capacity = topology.links[direction[0]].capacity * 1e6
        return max(capacity - taken.get(direction, 0.0), FLOOR * capacity)

    def hop(direction: Direction) -> float:
        return bits / left(direction) + topology.links[direction[0]].delay

    def turn(switch: str) -> float:
        rate = engine_pps(topology, switch)
        return len(tree_nodes[switch].children) / rate if rate else 0.0

    deepest, fraction = 0.0, 1.0
    for m in members:
        way, engines = _way_up(topology, up, m, t.tree, members)
        deepest = max(deepest, sum(hop(d) + hop((d[0], 1 - d[1])) for d in way) + sum(map(turn, engines)))
        for index, _ in way:
            fraction = min(fraction, *(left((index, d)) / (topology.links[index].capacity * 1e6) for d in (0, 1)))
    return TreePipe(t.share, deepest + host_latency + host_seconds, bits / (min(pace_mbps, t.rate * fraction) * 1e6),
                    host_seconds * core_share / t.share if host_seconds else 0.0)


def _way_up(topology: Topology, up: Mapping[str, int], member: str, tree: Tree | None = None,
            members: Sequence[str] = ()) -> tuple[list[Direction], list[str]]:
    """The link directions from a member up to its tree's root (``up``: each switch's uplink port), and
    the switches on the way (a server's tree: the member's route to its server, then a leaf's to the root,
    and those servers)."""
    if tree is not None and is_server_tree(topology, tree):
        server = server_of(members, tree)[member]
        if server == tree.root:
            return topology.route(member, server), [server]
        return topology.route(member, server) + topology.route(server, tree.root), [server, tree.root]
    here, port = topology.attachment[member]
    index = topology.port_links[here, port]
    way = [(index, 0 if topology.links[index].a == member else 1)]
    engines = [here]
    while here in up:
        index = topology.port_links[here, up[here]]
        way.append((index, 0 if topology.links[index].a == f"{here}-p{up[here]}" else 1))
        here = topology.ports[here][up[here]].node
        engines.append(here)
    return way, engines


def trees_load(topology: Topology, members: Sequence[str], trees: Sequence[JobTree],
               pace_mbps: float) -> dict[Direction, float]:
    """Bits/s the trees put on each link direction when each worker offers them ``pace_mbps`` in all: tree t
    carries its share of it on each of its links, up (the sums) and down (the results)."""
    load: dict[Direction, float] = {}
    for t in trees:
        if is_server_tree(topology, t.tree):  # a server takes every member's frames on its link, and its leaves'
            links = Counter(server_links(topology, members, t.tree, own_links=True))
        else:  # a switch's tree sums hop by hop (a link once)
            up = dict(t.tree.uplinks)
            links = Counter({index for m in members for index, _ in _way_up(topology, up, m, t.tree)[0]})
        for index, times in links.items():
            for d in (0, 1):
                load[index, d] = load.get((index, d), 0.0) + times * t.share * pace_mbps * 1e6
    return load


def _ina(topology: Topology, members: Sequence[str], trees: Sequence[JobTree], P: protocol.Protocol,
         pool_size: int, host_latency: float, pace_mbps: float | None,
         taken: dict[Direction, float] | None = None, host_cost: HostCost = NO_HOST_COST) -> InaCost:
    total = sum(t.rate for t in trees)
    scale = min(1.0, pace_mbps / total) if pace_mbps else 1.0
    cpu = host_cost.per_packet(P.packet_bytes)
    cores = [host_cost.core_of(i, len(trees)) for i in range(len(trees))]
    served = [sum(t.share for t, c in zip(trees, cores) if c == core) if max(cores, default=0) else 1.0
              for core in cores]  # one core serves all the data: 1, as the shares sum to
    pipes = [tree_pipe(topology, members, t, t.rate * scale, P.frame_bytes, host_latency, taken, cpu, load)
             for t, load in zip(trees, served)]
    if pace_mbps and any(is_server_tree(topology, t.tree) for t in trees):
        pipes = [dataclasses.replace(p, late=phased(i, len(pipes)) * p.spacing) for i, p in enumerate(pipes)]
    return InaCost(tuple(pipes), pool_size, pace_mbps)


def phased(index: int, trees: int) -> float:
    """Intervals tree ``index``'s first frame waits when each tree has a pacer of its own (a server's:
    ``worker.calls.pace`` starts tree i i/n of a burst in debt, and a pacer in debt waits until it holds half
    a burst), so the trees' frames reach the servers spread over an interval, not all at once."""
    return 0.0 if index == 0 else 0.5 + index / trees


def window_mbps(ina: InaCost, frame_bytes: int) -> float:
    """What the trees' windows carry: each tree W frames per round trip, at most its pace."""
    return sum(min(ina.window / t.round_trip, 1 / t.pace) for t in ina.trees) * frame_bytes * 8 / 1e6


def sent_mbps(ina: InaCost, chunks: int, seconds: float, frame_bytes: int, first: bool = False) -> float:
    """The wire Mb/s each worker sent its trees in a float call of ``chunks`` that took ``seconds`` (what
    `ina-ctl calibrate` measures C by): a frame per packet, as ``InaCost.packets`` counts them; ``first``: the
    first call of its size, each tree's exponent packets (min(W, n) of n chunks) in (the calibration's timed
    calls come after a warm-up of their size: none)."""
    return sum(ina.packets(chunks, exact=False, first=first)) * frame_bytes * 8 / seconds / 1e6


def call_model(topology: Topology, members: Sequence[str], trees: Sequence[JobTree], P: protocol.Protocol,
               pool_size: int, ring_layouts: Sequence[Layout] | None = None,
               host_latency: float = DEFAULT_HOST_LATENCY, limit_mbps: float | None = None,
               ring_efficiency: Mapping[str, float] | None = None, host_cost: HostCost = NO_HOST_COST) -> CallModel:
    """The job's model.  ``trees``: none for a job that runs a ring alone; ``ring_layouts``: the layouts
    its workers may use (default ``rings.layouts``); ``limit_mbps``: C where it was measured (default:
    the switches' declared rates); ``ring_efficiency``: by layout, what TCP got of its fair share where
    it was measured (``rings.ring_cost``); ``host_cost``: what a packet costs the hosts' CPU (the trees'
    packets only: a ring's flows are modelled without it)."""
    members = list(members)
    ring_layouts = list(ring_layouts) if ring_layouts is not None else layouts(topology, members)
    link = topology.slowest_link_mbps(members)
    limit = limit_mbps if limit_mbps is not None else aggregation_limit(topology, members, trees, P.frame_bytes)[0]
    efficiency = dict(ring_efficiency or {})
    rings = tuple(ring_cost(topology, members, layout, host_latency, None, efficiency.get(layout.name, 1.0))[0]
                  for layout in ring_layouts)
    if not trees:
        return CallModel(P.values, None, rings)
    ina = _ina(topology, members, trees, P, pool_size, host_latency, limit if limit < link else None,
               host_cost=host_cost)
    hybrids = tuple(_hybrid(topology, members, trees, P, pool_size, host_latency, layout, min(limit, link), link,
                            efficiency.get(layout.name, 1.0), host_cost)
                    for layout in (ring_layouts if len(members) > 1 else ()))
    return CallModel(P.values, ina, rings, hybrids)


def _hybrid(topology: Topology, members: list[str], trees: Sequence[JobTree], P: protocol.Protocol, pool_size: int,
            host_latency: float, layout: Layout, limit: float, link: float, efficiency: float = 1.0,
            host_cost: HostCost = NO_HOST_COST) -> HybridCost:
    """The trees beside this layout's ring, at C' where it settles.  It starts from what the trees carry on
    empty links (C, or their windows' worth) and comes down: the ring's flows, in what C' leaves of each
    link (``rings.ring_cost``'s ``reserved``), lengthen the trees' round trips, which lowers what their
    windows carry, which leaves the ring more.  (From an unpaced ring it would settle at the bottom: flows
    that fill the links leave the trees' frames 1% of them.)
    Where the trees would take the whole link anyway, neither part is paced (a hybrid then only runs when
    asked)."""
    pace = min(limit, window_mbps(_ina(topology, members, trees, P, pool_size, host_latency, None,
                                       host_cost=host_cost), P.frame_bytes))
    for _ in range(8):
        paced = pace < link * (1 - PURE)
        reserved = trees_load(topology, members, trees, pace) if paced else None
        ring, load = ring_cost(topology, members, layout, host_latency, reserved, efficiency)
        ina = _ina(topology, members, trees, P, pool_size, host_latency, pace if paced else None, load, host_cost)
        settled = min(pace, window_mbps(ina, P.frame_bytes))
        if not paced or settled >= pace * (1 - 1e-3):
            break
        pace = settled
    return HybridCost(ina, ring)


# --- direct-connect parts -------------------------------------------------------------------------

@dataclass(frozen=True)
class PartCost:
    """What a share costs one part of a direct-connect plan (``controller.direct.Shape``): a line, ``latency``
    + ``per_byte`` x its bytes (headers in), which the knapsack and the shares use; a tree's exact time
    through its ``pipe`` and ``window`` (``exact_seconds``)."""

    steps: int  # transfers one after another on the longest way (NTT's "transfer steps")
    latency: float  # seconds that do not grow with the share
    per_byte: float  # seconds per byte of the share
    volume: float = 1.0  # payload bytes on the busiest interface, each way, per byte of the share
    pipe: TreePipe | None = None  # a tree's
    window: int = 0  # a tree's slots on every device

    def seconds(self, nbytes: float) -> float:
        return self.latency + self.transfer_seconds(nbytes) if nbytes > 0 else 0.0

    def transfer_seconds(self, nbytes: float) -> float:
        """The bandwidth term: ``nbytes`` over the part's rate, headers in."""
        return self.per_byte * nbytes

    def carries(self, seconds: float) -> float:
        """The most bytes this part finishes within ``seconds``."""
        return max(0.0, (seconds - self.latency) / self.per_byte)

    def exact_seconds(self, nbytes: float, values: int) -> float:
        """``nbytes`` of float32 as the one model times them: a tree's packets through ``InaCost`` with the
        window open (exponent packets in); others as the line."""
        if self.pipe is None or nbytes <= 0:
            return self.seconds(nbytes)
        return InaCost((self.pipe,), self.window).seconds(math.ceil(nbytes / 4 / values), exact=False)

    def mean_step(self, nbytes: float) -> float:
        """A step's time in a share of ``nbytes``, on average (a ring's, which the fabric measures)."""
        return self.latency / self.steps + self.per_byte * nbytes / self.steps


def part_shares(parts: Sequence[PartCost], nbytes: float) -> list[float]:
    """The shares of a call of ``nbytes`` that end every part at once (a part whose latency alone is longer
    gets none): ``worker.tuner.equal_finish``, the hybrid split's closed form."""
    return equal_finish([(p.latency, p.per_byte) for p in parts], nbytes)


def circuit_ring_step(hop: float, host: float, link_bytes: float) -> float:
    """One step of a ring of circuits: the hop, the host's latency and the ring's header in TCP segments at the
    link's ``link_bytes`` per second."""
    return hop + host + HEADER.size * TCP_WIRE / link_bytes


def circuit_ring_cost(workers: int, link_bytes: float, step: float) -> PartCost:
    """A ring of circuits run both ways (two directed rings, half the share each): 2(N-1) steps, (N-1)/N of the
    share on each interface each way, as ``rings.ring_cost`` costs a flat ring on links of its own; two workers
    exchange halves over one circuit."""
    if workers == 2:
        return PartCost(2, 2 * step, 0.5 * TCP_WIRE / link_bytes, 0.5)
    n = workers
    return PartCost(2 * (n - 1), 2 * (n - 1) * step, (n - 1) / n * TCP_WIRE / link_bytes, (n - 1) / n)


def circuit_torus_cost(workers: int, group: int, link_bytes: float, step: float) -> PartCost:
    """Rings of ``group`` workers, then rings of N/g across them, both run both ways: the second level works on
    the 1/g each worker owns after the first, one level after the other (``rings.ring_cost``'s sum over
    levels)."""
    n, g = workers, group
    second = (n // g - 1) / (n // g) / g
    return PartCost(2 * (g - 1) + 2 * (n // g - 1), (2 * (g - 1) + 2 * (n // g - 1)) * step,
                    ((g - 1) / g + second) * TCP_WIRE / link_bytes, (g - 1) / g)


def device_tree_cost(depth: int, link_bytes: float, device_bytes: float, hop: float, host: float,
                     frame_bytes: int, values: int, most_slots: int) -> PartCost:
    """A full tree of devices as the one model sees it (``TreePipe``): its round trip (each device level a hop up
    and down, the frame's time on each, the host's latency), frames at the slower of the link and what a device
    sums (``windowed``)."""
    round_trip = 2 * depth * (hop + frame_bytes / link_bytes) + host
    return windowed(2 * depth, round_trip, frame_bytes / min(link_bytes, device_bytes), most_slots, values)


def windowed(steps: int, round_trip: float, spacing: float, most_slots: int, values: int, volume: float = 1.0,
             routes: int = 1) -> PartCost:
    """A part whose chunks go as INA packets (a tree, partial trees, a NIC mesh): ``routes`` trees of as many
    slots each as keep the frames' ``spacing`` over the round trip (x 1.25), at most ``most_slots`` over all;
    linear for the knapsack: the round trip and a window of exponent packets, then the frames' time."""
    per_route = max(1, min(most_slots // routes, math.ceil(1.25 * round_trip / spacing / routes) + 1))
    window = per_route * routes
    pace = max(spacing, round_trip / window)
    return PartCost(steps, round_trip + window * pace, pace / (4 * values), volume,
                    TreePipe(1.0, round_trip, spacing), window)


def ring_tree_cost(chain: int, above: int, link_bytes: float, device_bytes: float, hop: float, host: float,
                   frame_bytes: int, values: int, most_slots: int) -> PartCost:
    """Partial trees joined by rings, as they run (``controller.ring_tree``): the farthest worker's contribution
    goes along ``chain`` circuits to its group's device, each host on the way taking it into its loop (``host``),
    adding its own and sending the sum on, then ``above`` circuits up the devices to the root, and the result
    back the same way, every host on the chain taking it into its loop again; each circuit a frame's time at L
    and the hop (a host's own contribution and result pass to its relay in its own loop).  Frames at the slower
    of the link and what a device sums, windowed as a tree's."""
    circuits = 2 * (chain + above)
    round_trip = circuits * (frame_bytes / link_bytes + hop) + (2 * chain - 1) * host
    return windowed(circuits, round_trip, frame_bytes / min(link_bytes, device_bytes), most_slots, values)


def nic_mesh_cost(depth: int, load: float, routes: int, link_bytes: float, bus_bytes: float, hop: float,
                  host: float, frame_bytes: int, values: int, most_slots: int) -> PartCost:
    """A NIC mesh (``controller.nic_mesh``): a chunk goes from its host to its NIC over the bus, up ``depth``
    circuits, across its route's meeting circuit, down ``depth``, and its result back over the bus to the host's
    loop: each circuit a frame's time at L and the hop, the NICs summing at line rate.  The ``routes`` share the
    circuits, the busiest direction carrying ``load`` of the call, so the worker's frames are spaced by that
    share of a frame's time at L (or the bus's, if slower); each route its part of the NIC's slots."""
    circuit = frame_bytes / link_bytes + hop
    round_trip = 2 * frame_bytes / bus_bytes + (2 * depth + 1) * circuit + host
    spacing = max(load * frame_bytes / link_bytes, frame_bytes / bus_bytes)
    return windowed(2 * depth + 1, round_trip, spacing, most_slots, values, load, routes)


# The in-node rate of a hierarchical call's reduce-scatter and all-gather where none is given, each way per GPU:
# NVLink 4 on an H100 SXM5, 18 links, "900 GB/s" in NVIDIA's H100 datasheet (both ways together), so 450 GB/s =
# 3,600 Gbit/s each way.
NVLINK_GBPS = 3600.0


@dataclass(frozen=True)
class HierarchicalCall:
    """The three phases of a multi-GPU node's allreduce, in seconds; they run one after another."""

    reduce_scatter: float
    rails: float  # the slowest rail job's call
    all_gather: float

    @property
    def seconds(self) -> float:
        return self.reduce_scatter + self.rails + self.all_gather


def in_node_seconds(nbytes: int, gpus: int, node_gbps: float) -> float:
    """A reduce-scatter (or an all-gather) of ``nbytes`` per rank among a node's ``gpus`` ranks: each rank sends
    (gpus - 1) / gpus of the tensor, all at once at ``node_gbps`` each way (a switched fabric, NVSwitch: no rank
    waits for another's link, whatever the algorithm); its latency (a few us) is left out."""
    if gpus < 1 or node_gbps <= 0:
        raise ValueError(f"a node of {gpus} GPU(s) at {node_gbps} Gbit/s: at least one GPU and a positive rate")
    return (gpus - 1) / gpus * nbytes * 8 / (node_gbps * 1e9)


def hierarchical_call(nbytes: int, gpus: int, node_gbps: float, rail_seconds: Sequence[float]) -> HierarchicalCall:
    """A hierarchical allreduce of ``nbytes`` per rank on nodes of ``gpus`` ranks, whose rail jobs (one per GPU
    of a node) take ``rail_seconds`` each (their model's call, ``worker.tuner.CallModel.choose``): the rails
    start together once the reduce-scatter is done, and the all-gather waits for the last."""
    if len(rail_seconds) != gpus:
        raise ValueError(f"{len(rail_seconds)} rail time(s) for nodes of {gpus} GPUs: one per rail")
    phase = in_node_seconds(nbytes, gpus, node_gbps)
    return HierarchicalCall(phase, max(rail_seconds), phase)

