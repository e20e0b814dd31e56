"""`ina-ctl calibrate JOB`: measure a job's aggregation capacity C, its ring's rate and its hosts' latency
on its own hosts, and make the job's model again from them.

Declared rates and the default host latency are guesses; this runs the real thing: short bursts of
allreduces by ``ina-allreduce`` on every member host (through the network file's ``host_exec``, which
bmv2-env writes for Mininet hosts), each under a temporary job of the same members, trees count and
pool (a job is one session: its own trees must see their workers' packets from the first), deleted
afterwards:

- through the switches alone, ``values`` float32 per call: C, the wire rate each worker got (every packet
  it sent in the timed calls, which follow a warm-up of their size and so send no exponent-only packets:
  ``model.sent_mbps``);
- round the ring alone, once per layout the job may use: the rate each gets of a link, and its
  efficiency, the model's time for the bytes over the measured (``rings.ring_wire_mbps``,
  ``rings.ring_efficiency``; TCP does not fill a link, and not equally in every layout: two-way
  exchanges of halving-doubling lose more on Mininet's links than a flat ring's one-way flows), so the
  model compares layouts as the hosts run them;
- one value per call through the switches: the workers' shortest round trip (send to result, in
  their loops) less the network's round trip the model knows is the hosts' latency.  (Not half the
  call: a call's setup, milliseconds in Python, is paid once per call, not per round trip.)

``ina-ctl calibrate --server SRV`` measures an aggregation server's rate (issue 62): a temporary job of the given
members whose only tree is the server's, in a lane per core, unpaced (each lane's window alone holds it back, so
the server's real rate sets the pace, faster or slower than the topology says), a burst of float calls; the
wire rate each worker got is turned back into the contributions per second the server summed (``model.
switch_loads``: members per slot), over the cores its lanes used.  The controller records it
(``Controller.server_calibrated``): its topology, which plans, models, admits and moves trees, says so from then on.
Where the bursts run is a ``Burst``: the hosts' own processes by default (``host_exec``, as above), or a simulated
fabric's workers (``virtual_fabric.calibrate``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from controller import plan
from controller.controller import Controller, JobError
from controller.job_plan import MIN_LANE_POOL
from controller.model import JobTree, sent_mbps, switch_loads, tree_pipe
from controller.rings import ring_efficiency, ring_wire_mbps
from worker import protocol
from worker.jobspec import JobSpec
from worker.ring_layout import ring_types

# runs a job spec's calls on its members: (controller, spec, values per call, timeout) -> (the median over its timed
# calls of the slowest rank's seconds, each rank's shortest round trip through the trees)
Burst = Callable[[Controller, JobSpec, int, float], tuple[float, list[float]]]


@dataclass(frozen=True)
class ServerCalibration:
    server: str
    per_core_pps: float  # contributions one core summed per second, measured
    assumed_pps: float  # what the topology (or the last calibration) said before
    cores: int  # the cores the burst's lanes used
    seconds: float  # the burst's median time per call
    jobs: list[str]  # live jobs whose model was made again

    def line(self) -> str:
        return (f"{self.server}: {self.per_core_pps:,.0f} contributions/s per core measured on {self.cores} core(s) "
                f"({self.per_core_pps / self.assumed_pps:.2f}x the {self.assumed_pps:,.0f} assumed; "
                f"{self.seconds * 1e3:.2f} ms a call); models made again: {', '.join(self.jobs) or 'none'}")


@dataclass(frozen=True)
class Calibration:
    ina_mbps: float | None  # wire Mb/s each worker sent to the switches, INA alone (None: the job has no trees)
    ring_mbps: dict[str, float]  # by layout: wire Mb/s a ring put on each link, alone
    ring_efficiency: dict[str, float]  # by layout: the model's time for a ring's bytes over the measured, <= 1
    host_latency: float | None  # seconds, wire to a worker's loop (None: the job has no trees)
    seconds: dict[str, float]  # each burst's median time per call, by what it measured
    spec: JobSpec  # the job's spec after its model was made again

    def rings(self) -> str:
        """Each layout's rate and efficiency, as a line says them."""
        return ", ".join(f"{layout} {mbps:.3g} Mb/s ({self.ring_efficiency[layout]:.0%} of its share)"
                         for layout, mbps in self.ring_mbps.items())


def calibrate(ctl: Controller, name: str, values: int = 1 << 18, timeout: float = 20.0) -> Calibration:
    """Run the bursts (one warm-up and two timed calls each) and make the job's model again."""
    job = ctl.state.jobs.get(name)
    if job is None:
        raise JobError(f"no job named {name!r} (jobs: {sorted(ctl.state.jobs)})")
    _check_runnable(ctl, job.members, f"calibration of job {name}")
    P = protocol.load(ctl.state.options.values, ctl.state.options.udp_port)
    planned = ctl.job_plan(name)
    wide, narrow = (d.itemsize for d in ring_types("float32", job.ring_sum == "native"))
    seconds: dict[str, float] = {}
    ring: dict[str, float] = {}
    efficiency: dict[str, float] = {}
    by_name = {layout.name: layout for layout in planned.layouts}
    for cost in planned.model.rings:
        if job.ring_layout not in (None, cost.layout):
            continue
        took = seconds[f"ring ({cost.layout})"] = _trial(ctl, name, "ring", values, timeout, cost.layout)[0]
        ring[cost.layout] = ring_wire_mbps(by_name[cost.layout], values, wide, narrow, took)
        efficiency[cost.layout] = ring_efficiency(cost, values, wide, narrow, took)
    ina = latency = None
    if job.trees and planned.model.ina is not None:
        seconds["ina"] = _trial(ctl, name, "ina", values, timeout)[0]
        # every packet of the float call a frame: the timed calls follow a warm-up of their size, so they send no
        # exponent-only packets (their first window at the warm-up's exponents, the rest a window ahead)
        ina = sent_mbps(planned.model.ina, -(-values // P.values), seconds["ina"], P.frame_bytes)
        seconds["one value"], round_trips = _trial(ctl, name, "ina", 1, timeout)
        network = min(tree_pipe(ctl.topology, job.members, JobTree(t.tree, t.rate, t.share), t.rate, P.frame_bytes,
                                0.0).round_trip for t in job.trees)
        latency = max(0.0, statistics.median(round_trips) - network) if round_trips else None
    spec = ctl.calibrated(name, ina, ring, latency, efficiency)
    return Calibration(ina, ring, efficiency, latency, seconds, spec)


def calibrate_server(ctl: Controller, server: str, members: list[str], values: int = 1 << 18,
                     timeout: float = 20.0, burst: Burst | None = None) -> ServerCalibration:
    """Measure ``server``'s per-core rate with a burst of ``members`` through it alone and record it (see the
    module's docstring); ``burst`` default: on the hosts (``host_exec``)."""
    topology, P = ctl.topology, protocol.load(ctl.state.options.values, ctl.state.options.udp_port)
    if server not in topology.servers:
        raise JobError(f"{server} is not an aggregation server of the topology (servers: "
                       f"{', '.join(topology.servers) or 'none'})")
    if burst is None:
        _check_runnable(ctl, members, f"calibration of server {server}")
        burst = _burst
    cores = topology.hosts[server].server.cores
    tree = plan.Tree(server, ())
    try:
        plan.check_members(topology, members)
        plan.check_tree(topology, members, tree, P.MAX_CHILDREN)
    except plan.PlanError as e:
        raise JobError(f"calibration of server {server}: {e}") from None
    found = plan.Plan(tuple(members), (plan.PlannedTree(tree, topology.slowest_link_mbps(members), 1.0),),
                      topology.slowest_link_mbps(members), 0.0, (), 1, 0.0, P.wire_factor)
    trial = f"calibrate-{server}"
    spec = ctl.create_job(trial, members, cores * 2 * MIN_LANE_POOL, trees=found, mode="ina", lanes=cores)
    try:
        ina = ctl.job_plan(trial).model.ina
        trees = [JobTree(t.tree, t.rate, t.share) for t in ctl.state.jobs[trial].trees]
        unpaced = replace(spec, model=replace(spec.model, ina=replace(ina, pace_mbps=None)))
        seconds = burst(ctl, unpaced, values, timeout)[0]
    finally:
        ctl.delete_job(trial)
    per_child = sent_mbps(ina, -(-values // P.values), seconds, P.frame_bytes) * 1e6 / (P.frame_bytes * 8)
    used = min(cores, len(trees))
    per_core = per_child * switch_loads(topology, members, trees)[server] / used
    assumed = topology.hosts[server].server.agg_pps_per_core
    return ServerCalibration(server, per_core, assumed, used, seconds, ctl.server_calibrated(server, per_core))


def _check_runnable(ctl: Controller, hosts: list[str], what: str) -> None:
    """A clear error before anything is created when the network file gives no way to run on a host."""
    for host in hosts:
        try:
            ctl.network.run_on(host, [])
        except ValueError as e:
            raise JobError(f"{what}: {e}") from None


def _trial(ctl: Controller, name: str, mode: str, values: int, timeout: float,
           ring_layout: str | None = None) -> tuple[float, list[float]]:
    """A burst under a temporary job of ``name``'s members, trees count and pool, in ``mode`` (and the
    ring's ``ring_layout``, default the job's)."""
    job = ctl.state.jobs[name]
    trial = f"{name}-calibrate-{mode}"
    spec = ctl.create_job(trial, job.members, job.pool_size, trees=len(job.trees) or 1, mode=mode,
                          ring_sum=job.ring_sum, ring_layout=ring_layout or job.ring_layout)
    try:
        return _burst(ctl, spec, values, timeout)
    finally:
        ctl.delete_job(trial)


def _burst(ctl: Controller, spec: JobSpec, values: int, timeout: float) -> tuple[float, list[float]]:
    """Median over the timed calls of the slowest rank's time, and each rank's shortest round trip through
    the trees (none in a ring); JobError naming the host that failed."""
    with tempfile.TemporaryDirectory(prefix="ina-calibrate-") as tmp:
        path = Path(tmp) / f"{spec.name}.json"
        spec.save(path)  # paced only by a rate the topology declares: a limit the job must keep
        command = [sys.executable, "-m", "worker.cli", "--spec", str(path), "--size", str(values), "--repeat", "3",
                   "--timeout", str(timeout)]
        procs = {m.host: subprocess.Popen(ctl.network.run_on(m.host, [*command, "--rank", str(m.rank)]),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for m in spec.members}
        runs: dict[str, list[float]] = {}
        round_trips: list[float] = []
        try:
            for host, p in procs.items():
                try:
                    out, err = p.communicate(timeout=4 * timeout + 60)
                except subprocess.TimeoutExpired:
                    raise JobError(f"calibration: {host} gave no answer within {4 * timeout + 60:.0f} s") from None
                lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
                failed = next((r["error"] for r in lines if "error" in r), None)
                if p.returncode != 0 or failed or len(lines) < 3:
                    why = failed or err.strip()[-300:] or f"exit status {p.returncode}"
                    raise JobError(f"calibration: {host} (is it running?): {why}")
                runs[host] = [r["seconds"] for r in lines[1:3]]
                if lines[-1].get("round_trip_min") is not None:
                    round_trips.append(lines[-1]["round_trip_min"])
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                p.wait()
    return statistics.median(max(times[i] for times in runs.values()) for i in range(2)), round_trips
