"""The host ring layouts a job's members can use, from the topology, and what a call costs on each (the
model's ring part).  Pure functions of the topology.

Layouts (``worker.ring_layout``): the flat ring in rank order (gloo's); the hierarchical ring, whose
level-1 rings are the members under one leaf (edge) switch, level 2 the leaves of one pod (leaves
with the same neighbours), level 3 the pods; and recursive halving and doubling where the number of
members is a power of two, over the same locality order, so the large early exchanges stay under one
leaf.  A level is kept only where every group of it has as many members (a ring of rings needs
equal rings); where one is uneven it is merged into the next.

Costs: every rank of a level's rings sends at once, one flow to its successor along the switches'
routes; the flows get max-min fair rates (``fair_share``) capped at the ring's pace, and a level's
steps go at its slowest flow.  A rank waits for its predecessor, which waited for its own, so over a
ring's steps the wait goes once round it: a step pays the ring's mean path propagation (the slowest
ring's, for a level of several) plus the host's latency.  On
the wire each byte of payload is its TCP segments' (``TCP_WIRE``: Ethernet, IPv4 and TCP with
timestamps, as Linux sends), and each step carries the ring's header (``worker.ring.HEADER``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from controller.fair_share import FLOOR, max_min_rates
from controller.topology import Topology
from worker.ring import HEADER
from worker.ring_layout import Layout
from worker.tuner import RingCost

ETH_IP_TCP = 14 + 20 + 32  # a ring segment's headers (TCP with timestamps, as Linux sends)
TCP_MSS = 1448  # 1500-byte MTU less IPv4, TCP and its timestamp option
TCP_WIRE = (ETH_IP_TCP + TCP_MSS) / TCP_MSS  # wire bytes per payload byte of a bulk TCP transfer

Direction = tuple[int, int]  # (index in topology.links, 0 for a -> b, 1 for b -> a)


def layouts(topology: Topology, members: list[str]) -> list[Layout]:
    """Every layout worth having for these members (rank order): flat always, hierarchical where the
    topology groups them in more than one level, halving-doubling where their number is a power of two."""
    n = len(members)
    found = [Layout.flat(n)]
    if n < 3:
        return found  # two ranks: every layout is the same exchange
    order, levels = hierarchy(topology, members)
    if len(levels) > 1:
        found.append(Layout("hierarchical", levels, order))
    if n & (n - 1) == 0:
        found.append(Layout("halving_doubling", (2,) * (n.bit_length() - 1), order))
    return found


def hierarchy(topology: Topology, members: list[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The members in locality order (pod, leaf, port) and the even group sizes: members per leaf, leaves
    per pod, pods (sizes of 1 dropped; an uneven level merged into the next)."""
    rank = {m: r for r, m in enumerate(members)}
    by_leaf: dict[str, list[str]] = defaultdict(list)
    for m in members:
        by_leaf[topology.attachment[m][0]].append(m)
    pods: dict[frozenset[str], list[str]] = defaultdict(list)
    for leaf in by_leaf:
        pods[frozenset(n.node for n in topology.switch_neighbours(leaf))].append(leaf)
    first = {leaf: min(rank[m] for m in hosts) for leaf, hosts in by_leaf.items()}
    pod_list = sorted(pods.values(), key=lambda leaves: min(first[leaf] for leaf in leaves))
    order = []
    for leaves in pod_list:
        for leaf in sorted(leaves, key=first.__getitem__):
            order += [rank[m] for m in sorted(by_leaf[leaf], key=lambda m: topology.attachment[m][1])]
    groups = [[len(by_leaf[leaf]) for leaf in leaves] for leaves in pod_list]  # members per leaf, by pod
    levels: list[int] = []
    per_leaf = {g for pod in groups for g in pod}
    per_pod = {len(pod) for pod in groups}
    if len(per_leaf) == 1:
        levels.append(per_leaf.pop())
        if len(per_pod) == 1:
            levels.append(per_pod.pop())
    elif len({sum(pod) for pod in groups}) == 1:
        levels.append(sum(groups[0]))  # uneven leaves inside even pods: one ring per pod
    levels.append(len(members) // math.prod(levels))
    return tuple(order), tuple(g for g in levels if g > 1) or (1,)


def level_flows(topology: Topology, members: list[str], layout: Layout, level: int) -> list[list[Direction]]:
    """The paths of one level's flows: every rank to its successor in its ring of that level."""
    return [topology.route(members[r], members[layout.peers(r, level)[0]]) for r in range(len(members))]


def wire_bits(payload_bytes: float) -> float:
    """A bulk TCP transfer's bits on the wire for ``payload_bytes`` of payload (``TCP_WIRE``)."""
    return payload_bytes * TCP_WIRE * 8


def level_shares(layout: Layout) -> list[float]:
    """Of the array, what each rank sends at each level of the layout's reduce-scatter (and again in its
    allgather): (g - 1)/g of what the level's rings work on, the 1/(g_1 ... g_(l-1)) each rank owns after the
    levels before; (N - 1)/N in all."""
    shares, span = [], 1.0
    for g in layout.levels:
        shares.append((g - 1) * span / g)
        span /= g
    return shares


def ring_cost(topology: Topology, members: list[str], layout: Layout, host_latency: float,
              reserved: Mapping[Direction, float] | None = None,
              efficiency: float = 1.0) -> tuple[RingCost, dict[Direction, float]]:
    """What a call costs on this layout, and the most its flows put on each link direction at once
    (bits/s), which packets beside the ring do not get.  ``reserved``: bits/s of each link direction the
    ring leaves to others (a hybrid's trees): its flows share the rest, and each level's are paced at the
    slowest one's rate, so none takes more where several cross one link (the paces, per level, go into
    the call).  ``efficiency``: of its rate, what TCP gets on these hosts (``ina-ctl calibrate`` measures
    it per layout; 1 until then)."""
    capacity = {(i, d): link.capacity * 1e6 for i, link in enumerate(topology.links) for d in (0, 1)}
    if reserved is not None:
        capacity = {d: max(c - reserved.get(d, 0.0), FLOOR * c) for d, c in capacity.items()}
    paces: list[float] = []
    latency = seconds_per_byte = 0.0
    load: dict[Direction, float] = {}
    for level, (g, share) in enumerate(zip(layout.levels, level_shares(layout))):
        if g == 1:
            paces.append(0.0)  # no steps at this level
            continue
        paths = level_flows(topology, members, layout, level)
        rates = max_min_rates(paths, [None] * len(paths), capacity)
        if reserved is not None:
            paces.append(min(rates) / 1e6)
            rates = [min(rates)] * len(rates)
        rates = [r * efficiency for r in rates]
        rate = min(rates)
        rings: dict[int, list[float]] = defaultdict(list)  # a ring's flows' propagation, by its first position
        stride = math.prod(layout.levels[:level])
        for position, rank in enumerate(layout.order):
            first = position - position // stride % g * stride
            rings[first].append(sum(topology.links[i].delay for i, _ in paths[rank]))
        step = max(sum(d) / len(d) for d in rings.values()) + host_latency
        latency += 2 * (g - 1) * (step + wire_bits(HEADER.size) / rate)
        seconds_per_byte += wire_bits(share) / rate
        here: dict[Direction, float] = defaultdict(float)
        for path, r in zip(paths, rates):
            for link in path:
                here[link] += r
        for link, bits in here.items():
            load[link] = max(load.get(link, 0.0), bits)
    return RingCost(layout.name, layout.steps, latency, seconds_per_byte, seconds_per_byte,
                    tuple(paces) if reserved is not None else None), load


def ring_wire_mbps(layout: Layout, elements: int, wide: int, narrow: int, seconds: float) -> float:
    """The wire Mb/s each rank put on its link in a ring call of ``elements`` (summed in ``wide``-byte values,
    gathered in ``narrow``-byte ones) that took ``seconds``: what it sent (``level_shares``) in TCP segments."""
    return wire_bits(elements * (wide + narrow) * sum(level_shares(layout))) / seconds / 1e6


def ring_efficiency(cost: RingCost, elements: int, wide: int, narrow: int, seconds: float) -> float:
    """What TCP got of the rate ``cost`` gives a ring (its ``ring_cost`` at efficiency 1), from a call of
    ``elements`` that took ``seconds``: the model's time for the call's bytes over the measured, the steps'
    latency off both; at most 1.  ``ring_cost(efficiency=)`` takes it."""
    modelled = cost.seconds(elements, wide, narrow) - cost.latency
    return min(1.0, modelled / max(seconds - cost.latency, modelled))
