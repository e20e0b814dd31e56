"""The fabric as a new job finds it: each link between switches less what running jobs' trees carry over it.

The planner packs a job's trees by the links' capacities.  Planned on the whole fabric, two jobs whose hosts
interleave (odd and even hosts of one fat tree) get the same best trees and share every uplink, each at half
its rate (1.45x the time alone on fat_tree(4), 1.79x on fat_tree(8), measured in the fabric).  So a new job is
planned on two views of what the running jobs leave:
- the *fair* view: a busy link offers what they leave, at least its fair share beside their jobs (capacity /
  (jobs on it + 1)): what the newcomer would really get, so its model is planned there and a job on a full
  fabric is planned, never refused;
- the *free* view: a busy link offers what they leave, at least ``BUSY_FLOOR`` of it: trees packed here avoid
  the busy links wherever free ones carry as much.
The newcomer takes the free view's trees when they reach the fair view's rate (the LP has many optimal packings,
and this one leaves the others alone), else the fair view's.  Host links are each host's own and stay as they
are.  A server's cores are shared the same way (``controller.servers``: its per-core rate in each view is what
running jobs leave of it, at least a fair share or ``BUSY_FLOOR``).  Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.plan import Plan, PlanError, Tree, fabric_links, pack_trees
from controller.servers import with_server_loads
from controller.topology import Topology

# a running tree: (its job's name, the tree, its planned wire Mb/s)
RunningTree = tuple[str, Tree, float]
# of a busy link's capacity, what the free view offers on it: a little, so that the LP still finds a tree where
# nothing else joins the members, and packs the free links first
BUSY_FLOOR = 0.01
_SAME_RATE = 1e-6  # relative: the free view's trees are as good as the fair view's


def fabric_loads(topology: Topology, running: Iterable[RunningTree]) -> dict[int, tuple[float, int]]:
    """Per fabric link (index in ``topology.links``): the Mb/s running trees carry over it, and how many
    jobs they belong to."""
    carried: dict[int, float] = {}
    jobs: dict[int, set[str]] = {}
    for job, tree, rate in running:
        for link in fabric_links(topology, tree):
            carried[link] = carried.get(link, 0.0) + rate
            jobs.setdefault(link, set()).add(job)
    return {link: (carried[link], len(jobs[link])) for link in carried}


def with_loads(topology: Topology, loads: dict[int, tuple[float, int]], fair: bool) -> Topology:
    """``topology`` with each loaded link's capacity what a new job finds on it: what the load leaves, at least
    its fair share (``fair``) or ``BUSY_FLOOR`` of it."""
    data = topology.to_dict()
    for link, (carried, jobs) in loads.items():
        capacity = topology.links[link].capacity
        a, b, *rest = data["links"][link]
        options = dict(rest[0]) if rest else {}
        options["bw"] = max(capacity - carried, capacity / (jobs + 1) if fair else capacity * BUSY_FLOOR)
        data["links"][link] = [a, b, options]
    return Topology.from_dict(data, "the fabric a new job finds")


def view(topology: Topology, loads: dict[int, tuple[float, int]], servers: Mapping[str, tuple[float, int]],
         fair: bool) -> Topology:
    """The fair (``fair``) or free view of the links and servers running jobs load (``servers``:
    ``servers.server_loads``)."""
    topology = with_loads(topology, loads, fair) if loads else topology
    return with_server_loads(topology, servers, fair, BUSY_FLOOR) if servers else topology


def new_job_trees(topology: Topology, running: Iterable[RunningTree], members: list[str], max_children: int,
                  max_trees: int | None, wire_factor: float, servers: Mapping[str, tuple[float, int]] | None = None
                  ) -> tuple[Topology, Plan | None]:
    """The fair view (to plan the job's model on) and the trees the new job takes; ``topology`` and None when
    nothing runs over its fabric or servers (the planner packs the whole fabric).  PlanError as ``pack_trees``."""
    loads, servers = fabric_loads(topology, running), servers or {}
    if not loads and not servers:
        return topology, None
    fair_view = view(topology, loads, servers, fair=True)
    fair = pack_trees(fair_view, members, max_children, max_trees, wire_factor)
    try:
        free = pack_trees(view(topology, loads, servers, fair=False), members, max_children, max_trees, wire_factor)
    except PlanError:
        return fair_view, fair
    return fair_view, free if free.rate >= fair.rate * (1 - _SAME_RATE) else fair
