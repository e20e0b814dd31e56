"""A ring_tree part of a direct-connect plan (``controller.direct``) as what runs it: groups of g workers, each
a ring of circuits through its group's device, the ring's two halves chains of host relays
(``worker.relay``) that stream partial sums towards the device, and the devices (ina.p4) joined by a tree.

The devices' side is an ordinary INA job: its members are the workers next to a device (each group's chain
ends), ``device_topology`` its network, so the controller plans and installs it like any tree.  The chains are
the hosts' own: every worker's relay is configured here (``relay_roles``) from the plan and that job's numbers
(job id, pool, each chain end's child index at its device), a relay port per interface (1 + interface; port
0 is the host's own contribution).  A worker's relay has its host as child 0 and its outward neighbour (if
any) as child 1; its parent is its inward neighbour, or, at a chain end, the device.  Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.circuits import end_of, ring_tree_chains
from controller.direct import DirectCluster, DirectError, Part, tree_topology
from worker import protocol
from worker.jobspec import JobSpec, Member, TreeSpec
from worker.relay import RelayTree

OWN = 0  # a relay's port (and child index) for its own host's contribution


def relay_port(interface: int) -> int:
    return 1 + interface


@dataclass(frozen=True)
class RelayRole:
    """A worker's relay in a ring_tree part: its tree, and what is at the other end of each port's circuit
    ("w5.0": worker 5's interface 0; "d3.1": device 3's port 1)."""

    worker: int
    tree: RelayTree
    far: Mapping[int, str]

    @property
    def chain_end(self) -> bool:
        """Next to its group's device: a member of the devices' job."""
        return self.far[self.tree.parent_port].startswith("d")


def _check(part: Part) -> None:
    if part.shape.kind != "ring_tree":
        raise DirectError(f"a {part.shape.name} part is not a ring_tree")


def _groups(cluster: DirectCluster, part: Part) -> list[list[int]]:
    g = part.shape.group
    return [list(range(k * g, min(cluster.workers, (k + 1) * g))) for k in range(math.ceil(cluster.workers / g))]


def _far_ends(part: Part) -> dict[tuple[int, int], str]:
    """(worker, interface): the far end of its circuit."""
    far = {}
    for a, b in part.circuits:
        for here, there in ((a, b), (b, a)):
            kind, node, port = end_of(here)
            if kind == "w":
                far[node, port] = there
    return far


def _chains(cluster: DirectCluster, part: Part) -> list[tuple[list[int], int, int]]:
    """Every chain of the part: its workers from the device outwards, the interface each sends inwards by,
    and the one it takes its outward neighbour's partial sums on."""
    a, b = part.interfaces
    return [([group[p] for p in chain], inward, outward) for group in _groups(cluster, part)
            for chain, (inward, outward) in zip(ring_tree_chains(len(group)), ((b, a), (a, b))) if chain]


def chain_ends(cluster: DirectCluster, part: Part) -> list[int]:
    """The workers next to a device, chain by chain (a group's port 1 side first): the devices' job's
    members, in its rank order."""
    _check(part)
    return [workers[0] for workers, _, _ in _chains(cluster, part)]


def device_interfaces(cluster: DirectCluster, part: Part) -> dict[int, int]:
    """Each chain end's interface whose circuit goes to its device (its address in the devices' job)."""
    _check(part)
    return {workers[0]: inward for workers, inward, _ in _chains(cluster, part)}


def device_topology(cluster: DirectCluster, part: Part, P: protocol.Protocol | None = None) -> dict:
    """The devices' job's network: the part's devices and the chain ends (``h<w+1>``, as ``tree_topology``
    names workers) on the circuits they send inwards by; the circuits between workers are the relays'."""
    _check(part)
    data = tree_topology(cluster, part, P)
    far = _far_ends(part)
    used = {(f"h{ws[0] + 1}", far[ws[0], inward]) for ws, inward, _ in _chains(cluster, part)}
    data["hosts"] = {f"h{w + 1}": data["hosts"][f"h{w + 1}"] for w in chain_ends(cluster, part)}

    def kept(link: list) -> bool:
        ends = [x for x in link[:2] if x.startswith("h")]
        device = next((x for x in link[:2] if x.startswith("d")), None)
        return not ends or (len(ends) == 1 and device is not None and
                            (ends[0], "d{}.{}".format(*device[1:].split("-p"))) in used)

    data["links"] = [link for link in data["links"] if kept(link)]
    return data


def relay_roles(cluster: DirectCluster, part: Part, job_id: int, pool_size: int,
                child_at_device: Mapping[int, int]) -> list[RelayRole]:
    """Every worker's relay, in worker order.  ``child_at_device``: each chain end's child index at its device
    (the devices' job's spec: ``children[rank]`` of the rank that worker is in ``chain_ends``)."""
    _check(part)
    far = _far_ends(part)
    roles: dict[int, RelayRole] = {}
    for workers, inward, outward in _chains(cluster, part):
        for i, w in enumerate(workers):
            children = ((OWN, OWN),) + (((1, relay_port(outward)),) if i + 1 < len(workers) else ())
            if i == 0:
                if w not in child_at_device:
                    raise DirectError(f"worker {w} is next to {far[w, inward]} but not a member of the devices' job")
                index = child_at_device[w]
            else:
                index = 1  # the outward neighbour is child 1 of the relay inwards
            tree = RelayTree(job_id, pool_size, children, False, relay_port(inward), index)
            roles[w] = RelayRole(w, tree, {relay_port(i): far[w, i] for i in part.interfaces if (w, i) in far})
    return [roles[w] for w in range(cluster.workers)]


def chain_spec(devices: JobSpec, addresses: list[str], relay: tuple[str, str]) -> JobSpec:
    """What every worker's own contribution runs as: the devices' job seen from behind its own relay, the
    worker child 0 of a relay at ``relay`` (ip, mac: a host-local address), rank r at ``addresses[r]``; one
    tree: the devices' job id, pool and port."""
    (tree,) = devices.trees
    workers = len(addresses)
    members = tuple(Member(w, f"w{w}", ip, "relay", relay[0], relay[1]) for w, ip in enumerate(addresses))
    return JobSpec(f"{devices.name}-chains", devices.values, devices.udp_port, devices.pool_size, members,
                   (TreeSpec(tree.job_id, tree.root, 1.0, tree.rate_mbps, tree.port, (OWN,) * workers),), mode="ina")
