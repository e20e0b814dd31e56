"""What the controller knows of its aggregation servers (issue 62) beyond the topology file: the per-core rate
a calibration measured, and the share of each server running jobs take.  Pure functions of a topology.

- **Measured rates.**  A topology's ``agg_pps_per_core`` is a guess (``topology.SERVER_AGG_PPS_PER_CORE``);
  ``ina-ctl calibrate --server`` measures it, and ``with_rates`` gives the topology the controller plans, models,
  admits and moves trees on, so one place feeds them all.
- **Sharing.**  A server's cores sum every job's contributions (a lane's tree waits for its core's turn among
  all trees there), so a job planned beside running ones must see what they leave: ``server_loads`` counts the
  contributions per second their trees send each server, and ``with_server_loads`` scales its per-core rate to
  what is left, at least a fair share beside their jobs (``fair``) or ``shared_fabric.BUSY_FLOOR`` of it (the
  free view, whose trees avoid busy servers where idle ones carry as much), as ``shared_fabric`` does for links.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.topology import Topology

# a running server tree: (its job's name, the server, the contributions per second its members send it)
RunningServerTree = tuple[str, str, float]


def contributions_pps(rate_mbps: float, members: int, frame_bytes: int) -> float:
    """The contributions per second a server tree of ``members`` at ``rate_mbps`` each (wire) sends its root."""
    return rate_mbps * 1e6 / (frame_bytes * 8) * members


def with_rates(topology: Topology, per_core: Mapping[str, float]) -> Topology:
    """``topology`` with these servers' per-core rates (contributions per second); others, and names that are not
    servers of it (a server since removed from the file), as they are."""
    known = {s: r for s, r in per_core.items() if s in topology.servers}
    if not known:
        return topology
    return _per_core(topology, known, "the topology with its servers' measured rates")


def server_loads(running: Iterable[RunningServerTree]) -> dict[str, tuple[float, int]]:
    """Per server: the contributions per second running trees send it, and how many jobs they belong to."""
    sent: dict[str, float] = {}
    jobs: dict[str, set[str]] = {}
    for job, server, pps in running:
        sent[server] = sent.get(server, 0.0) + pps
        jobs.setdefault(server, set()).add(job)
    return {server: (sent[server], len(jobs[server])) for server in sent}


def free_shares(topology: Topology, loads: Mapping[str, tuple[float, int]], fair: bool,
                floor: float) -> dict[str, float]:
    """Per loaded server, the share of its cores a new job finds: what the loads leave, at least a fair share
    beside their jobs (``fair``) or ``floor``."""
    shares = {}
    for server, (pps, jobs) in loads.items():
        s = topology.hosts[server].server
        left = max(0.0, 1.0 - pps / (s.agg_pps_per_core * s.cores))
        shares[server] = max(left, 1.0 / (jobs + 1) if fair else floor)
    return shares


def with_shares(topology: Topology, shares: Mapping[str, float]) -> Topology:
    """``topology`` with these servers' per-core rates at these shares of what it says (a job's part of them)."""
    rates = {s: topology.hosts[s].server.agg_pps_per_core * share for s, share in shares.items()
             if s in topology.servers and share != 1.0}
    return _per_core(topology, rates, "the servers as a job found them") if rates else topology


def with_server_loads(topology: Topology, loads: Mapping[str, tuple[float, int]], fair: bool,
                      floor: float) -> Topology:
    """``topology`` with each loaded server's per-core rate what a new job finds (``free_shares``)."""
    return with_shares(topology, free_shares(topology, loads, fair, floor))


def _per_core(topology: Topology, rates: Mapping[str, float], where: str) -> Topology:
    data = topology.to_dict()
    for server, rate in rates.items():
        data["hosts"][server]["server"]["agg_pps_per_core"] = rate
    return Topology.from_dict(data, where)
