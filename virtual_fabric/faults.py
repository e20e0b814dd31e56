"""Fault kinds a campaign draws and injects, in one registry: adding a kind is adding an entry.

A kind draws its parameters from the scenario's stream (plain values, printed with the
scenario, so a seed's faults are read off its line) and injects them into a fabric with a job:
at an instant (a switch killed, a link down), for a while (a switch restarted), or from a
generator that runs as a process of the loop (``EventLoop.spawn``), as TigerBeetle's packet
simulator makes its faults: loss that comes in bursts (Gilbert-Elliott: a link moves between
a good and a bad state frame by frame), partitions that cut the network in two and heal, links
that flap.  Randomness at run time (when the next partition comes, which side a switch is on)
comes from the kind's own stream of the seed (``virtual_fabric.seeds``).

Moments are shares of the job's predicted length (``span``), so a fault lands before, during or
after the job whatever the network's rate; victims are drawn as shares too (``pick``) and
resolved against the job's switches and the topology's links when it is injected.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from virtual_fabric import seeds
from virtual_fabric.fabric import Fabric, Job

Params = dict[str, Any]


@dataclass
class Target:
    """What a fault is injected into: the fabric, the job, the job's switches, its predicted length."""

    fabric: Fabric
    job: Job
    switches: list[str]
    span: float

    def stream(self, kind: str) -> random.Random:
        return seeds.stream(self.fabric.seed, f"fault {kind}")


@dataclass(frozen=True)
class Kind:
    draw: Callable[[random.Random], Params]
    inject: Callable[[Target, Params], list[str]]  # schedules the fault; what and when, one line per injection


def pick(items: Sequence, share: float) -> Any:
    """The item at ``share`` (0 <= share < 1) of ``items``."""
    return items[min(int(share * len(items)), len(items) - 1)]


def _link_name(fabric: Fabric, index: int) -> str:
    link = fabric.topology.links[index]
    return f"link {link.a} -- {link.b}"


# --- per-frame faults on every link, from the start ---------------------------------------------

def _draw_late(rng: random.Random) -> float:
    return round(rng.uniform(0.0002, 0.03), 4)  # seconds: past the RTO, past a slot's reuse


def _inject_rates(field: str) -> Callable[[Target, Params], list[str]]:
    def inject(t: Target, p: Params) -> list[str]:
        for c in t.fabric.all_channels():
            setattr(c.faults, field, p["p"])
            if "late_by" in p:
                c.faults.reorder_delay = max(c.faults.reorder_delay, p["late_by"])
        return []
    return inject


# --- loss in bursts (Gilbert-Elliott) ------------------------------------------------------------

@dataclass
class GilbertElliott:
    """Two states per link direction, moved between frame by frame: good (no loss) and bad (``loss``
    of the frames lost); ``enter`` and ``leave`` are the chances per frame of going bad and good, so a
    burst lasts 1/``leave`` frames on average."""

    enter: float
    leave: float
    loss: float
    bad: bool = False

    def lost(self, rng: random.Random) -> bool:
        self.bad = rng.random() >= self.leave if self.bad else rng.random() < self.enter
        return self.bad and rng.random() < self.loss


def _draw_bursts(rng: random.Random) -> Params:
    return {"enter": round(rng.uniform(0.001, 0.02), 4), "leave": round(rng.uniform(0.05, 0.5), 3),
            "loss": round(rng.uniform(0.3, 1.0), 2), "link": round(rng.random(), 3)}


def _inject_bursts(t: Target, p: Params) -> list[str]:
    index = pick(range(len(t.fabric.channels)), p["link"])
    for c in t.fabric.channels[index]:
        c.faults.burst = GilbertElliott(p["enter"], p["leave"], p["loss"])
    return [f"loss bursts on {_link_name(t.fabric, index)}"]


# --- switches and workers at an instant ---------------------------------------------------------

def _draw_restarts(rng: random.Random) -> Params:
    """One or two, each down for a while (the controller looks every 0.5 s)."""
    return {"restarts": [(round(rng.uniform(0.0, 1.5), 3), round(rng.uniform(0.01, 1.0), 2), round(rng.random(), 3))
                         for _ in range(rng.randint(1, 2))]}


def _inject_restarts(t: Target, p: Params) -> list[str]:
    out = []
    for moment, down, victim in p["restarts"]:
        switch, at = pick(t.switches, victim), moment * t.span
        t.fabric.loop.at(at, t.fabric.kill_switch, switch)
        t.fabric.loop.at(at + down, t.fabric.restart_switch, switch)
        out.append(f"restart {switch} at {at:.6f} s for {down} s")
    return out


def _draw_moment(rng: random.Random) -> Params:
    return {"at": round(rng.uniform(0.0, 1.5), 3), "victim": round(rng.random(), 3)}


def _inject_switch_down(t: Target, p: Params) -> list[str]:
    switch, at = pick(t.switches, p["victim"]), p["at"] * t.span
    t.fabric.loop.at(at, t.fabric.kill_switch, switch)
    return [f"{switch} down at {at:.6f} s"]


def _inject_link_down(t: Target, p: Params) -> list[str]:
    index, at = pick(range(len(t.fabric.channels)), p["victim"]), p["at"] * t.span
    t.fabric.loop.at(at, t.fabric.set_link, index, False)
    return [f"{_link_name(t.fabric, index)} down at {at:.6f} s"]


def _inject_worker_dies(t: Target, p: Params) -> list[str]:
    worker, at = pick(t.job.workers, p["victim"]), p["at"] * t.span
    t.fabric.loop.at(at, worker.kill)
    return [f"rank {worker.rank} dies at {at:.6f} s"]


# --- generators: partitions that heal, flapping links -------------------------------------------

def _draw_partitions(rng: random.Random) -> Params:
    """Partitions come after ``stable`` of the span on average and last ``heal`` seconds on average."""
    return {"count": rng.randint(1, 3), "stable": round(rng.uniform(0.1, 1.0), 3),
            "heal": round(rng.uniform(0.005, 1.5), 3)}


def _partitions(t: Target, p: Params, log: list[str]) -> Generator[float, None, None]:
    rng, fabric = t.stream("partition"), t.fabric
    switches = sorted(fabric.switches)
    for _ in range(p["count"]):
        yield rng.expovariate(1 / (p["stable"] * t.span))
        side = {s for s in switches if rng.random() < 0.5} or {rng.choice(switches)}
        ends = [(_switch_of(fabric, link.a), _switch_of(fabric, link.b)) for link in fabric.topology.links]
        cut = [i for i, (a, b) in enumerate(ends) if a and b and (a in side) != (b in side)]
        for i in cut:
            fabric.set_link(i, False)
        log.append(f"partition {','.join(sorted(side))} | rest ({len(cut)} links) at {fabric.loop.now:.6f} s")
        yield rng.expovariate(1 / p["heal"])
        for i in cut:
            fabric.set_link(i, True)
        log.append(f"healed at {fabric.loop.now:.6f} s")


def _switch_of(fabric: Fabric, end: str) -> str | None:
    name = end.rsplit("-p", 1)[0]
    return name if name in fabric.switches else None


def _draw_flapping(rng: random.Random) -> Params:
    return {"link": round(rng.random(), 3), "at": round(rng.uniform(0.0, 1.0), 3), "flaps": rng.randint(1, 6),
            "down": round(rng.uniform(0.001, 0.3), 3), "up": round(rng.uniform(0.001, 0.6), 3)}


def _flapping(t: Target, p: Params, log: list[str]) -> Generator[float, None, None]:
    rng, fabric = t.stream("flapping"), t.fabric
    index = pick(range(len(fabric.channels)), p["link"])
    yield p["at"] * t.span
    log.append(f"{_link_name(fabric, index)} flaps {p['flaps']} time(s) from {fabric.loop.now:.6f} s")
    for _ in range(p["flaps"]):
        fabric.set_link(index, False)
        yield rng.uniform(0.5, 1.5) * p["down"]
        fabric.set_link(index, True)
        yield rng.uniform(0.5, 1.5) * p["up"]


def _spawned(steps: Callable[[Target, Params, list[str]], Generator[float, None, None]]):
    """A generator's kind: its lines are what it did, as it did it (the list fills as the run goes)."""
    def inject(t: Target, p: Params) -> list[str]:
        log: list[str] = []
        t.fabric.loop.spawn(steps(t, p, log))
        return log
    return inject


KINDS: dict[str, Kind] = {
    "loss": Kind(lambda rng: {"p": round(rng.uniform(0.005, 0.08), 4)}, _inject_rates("loss")),
    "duplication": Kind(lambda rng: {"p": round(rng.uniform(0.005, 0.05), 4), "late_by": _draw_late(rng)},
                        _inject_rates("duplication")),
    "reordering": Kind(lambda rng: {"p": round(rng.uniform(0.01, 0.2), 3), "late_by": _draw_late(rng)},
                       _inject_rates("reorder")),
    "loss_bursts": Kind(_draw_bursts, _inject_bursts),
    "restart": Kind(_draw_restarts, _inject_restarts),
    "switch_down": Kind(_draw_moment, _inject_switch_down),
    "link_down": Kind(_draw_moment, _inject_link_down),
    "worker_dies": Kind(_draw_moment, _inject_worker_dies),
    "partition": Kind(_draw_partitions, _spawned(_partitions)),
    "flapping": Kind(_draw_flapping, _spawned(_flapping)),
}
