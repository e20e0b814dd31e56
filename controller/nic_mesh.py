"""A NIC mesh part of a direct-connect plan (``controller.direct``, kind ``nic_mesh``) as what runs it: every
worker's streaming NIC a switch running p4src/nic.p4 as a bump in the wire of its host's D interfaces (the layout
``ina-net direct`` builds): the NIC's port i + 1 faces the host's interface i and its port D + 1 + i that
interface's circuit.  The host reaches its NIC through the part's first interface (``host_port``), and the part's
routes (``controller.circuits.mesh_routes``) are the NICs' meeting trees.

Each route is a tree of the part's job: its root is the NIC of one end of its meeting circuit and its
``meeting`` the other end's (``controller.plan.Tree``), every other NIC's uplink the port towards its route
parent.  The controller installs them like any tree (``controller.entries``: the meeting roots' ``meetings``
entry and second multicast group), and each worker runs the job as an ordinary INA job through its own NIC.
Pure functions: no switch, no socket.
"""

from __future__ import annotations

from controller import plan
from controller.circuits import end_of, mesh_routes
from controller.direct import DirectCluster, DirectError, Part


def host_port(part: Part) -> int:
    """The NIC's port its host uses for the part: the one facing the part's first interface."""
    return 1 + part.interfaces[0]


def circuit_port(cluster: DirectCluster, interface: int) -> int:
    """The NIC's port to the circuit of its host's ``interface``."""
    return cluster.interfaces + 1 + interface


def nic(w: int, prefix: str = "") -> str:
    return f"{prefix}n{w}"


def host(w: int, prefix: str = "") -> str:
    return f"{prefix}h{w + 1}"


def mesh_topology(cluster: DirectCluster, part: Part, prefix: str = "", host_gbps: float | None = None,
                  host_prefix: str | None = None) -> dict:
    """The part as a topology file: host ``h<w+1>`` on NIC ``n<w>``'s ``host_port`` by a bus of ``host_gbps`` (the
    cluster's interfaces at L each, by default: a NIC takes what its host sends on all of them) with no delay,
    the circuits between NIC ports at L with the hop's delay.  Names take ``prefix`` (several parts in one
    network), the hosts' ``host_prefix`` (default: ``prefix``; several meshes through the same NICs give each
    mesh's hosts their own); addresses are left to the caller (``addresses``)."""
    hosts = prefix if host_prefix is None else host_prefix
    if part.shape.kind != "nic_mesh":
        raise DirectError(f"a {part.shape.name} part is not a NIC mesh")
    bus = {"bw": (host_gbps or cluster.link_gbps * cluster.interfaces) * 1e3, "delay": "0us"}
    circuit = {"bw": cluster.link_gbps * 1e3, "delay": f"{cluster.hop_latency * 1e6:g}us"}
    links = [[host(w, hosts), f"{nic(w, prefix)}-p{host_port(part)}", dict(bus)] for w in range(cluster.workers)]
    for a, b in part.circuits:
        links.append([_nic_port(cluster, a, prefix), _nic_port(cluster, b, prefix), dict(circuit)])
    return {"hosts": {host(w, hosts): {} for w in range(cluster.workers)},
            "switches": {nic(w, prefix): {} for w in range(cluster.workers)}, "links": links}


def _nic_port(cluster: DirectCluster, end: str, prefix: str) -> str:
    kind, w, interface = end_of(end)
    if kind != "w":
        raise DirectError(f"NIC mesh circuit end {end!r}: a mesh joins workers' interfaces (w<worker>.<interface>)")
    return f"{nic(w, prefix)}-p{circuit_port(cluster, interface)}"


def mesh_trees(cluster: DirectCluster, part: Part, rate_mbps: float, prefix: str = "",
               host_prefix: str | None = None) -> plan.Plan:
    """The part's routes as meeting trees on ``mesh_topology``'s names, each an equal share of the part at
    ``rate_mbps`` over all (wire Mb/s per worker)."""
    port: dict[tuple[int, int], int] = {}  # (worker, neighbour): the worker's NIC port on their circuit
    for a, b in part.circuits:
        (_, u, i), (_, v, j) = end_of(a), end_of(b)
        port[u, v], port[v, u] = circuit_port(cluster, i), circuit_port(cluster, j)
    routes = mesh_routes(cluster.workers, part.shape.group)
    trees = []
    for r in routes:
        u, v = r.ends
        up = [(nic(w, prefix), port[w, p]) for w, p in enumerate(r.parent) if p >= 0]
        up.append((nic(v, prefix), port[v, u]))
        tree = plan.Tree(nic(u, prefix), tuple(sorted(up)), nic(v, prefix))
        trees.append(plan.PlannedTree(tree, rate_mbps / len(routes), 1 / len(routes)))
    members = tuple(host(w, prefix if host_prefix is None else host_prefix) for w in range(cluster.workers))
    return plan.Plan(members, tuple(trees), rate_mbps, rate_mbps, (), len(trees), 0.0,
                     notes=(f"{len(trees)} meeting trees of a NIC mesh",))


def mesh_job(cluster: DirectCluster, part: Part, prefix: str = "", free_slots: int | None = None,
             host_prefix: str | None = None) -> tuple[plan.Plan, int]:
    """What the part's job is created with: its meeting trees (``mesh_trees``, together at the circuits' rate
    over the busiest circuit's load) and each route's pool, the planned window shared by the routes (at most
    ``free_slots`` over them: every route's tree crosses every NIC, so each NIC holds every route's pool)."""
    trees = mesh_trees(cluster, part, cluster.link_gbps * 1e3 / part.shape.volume, prefix, host_prefix)
    pool = part.shape.window // len(trees.trees)
    if free_slots is not None:
        pool = min(pool, free_slots // len(trees.trees))
    return trees, max(1, pool)
