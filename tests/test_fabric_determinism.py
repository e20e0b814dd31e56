"""The fabric deterministic to the last bit (issue 41): cancellable events and processes, one
random stream per purpose, switches that read virtual time and a seeded generator, fault
generators, and invariants checked as the run goes."""

from __future__ import annotations

import random
import threading

import pytest
from p4.v1 import p4runtime_pb2

from controller.topology import Topology, leaf_spine
from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.runtime.digests import DigestManager
from p4target.runtime.environment import Environment
from p4target.runtime.requests import INSERT
from virtual_fabric import campaign, faults, invariants, seeds
from virtual_fabric.events import EventLoop
from virtual_fabric.fabric import Fabric

from .conftest import P4_DIR


def test_a_cancelled_event_does_not_run_and_cancelling_a_run_one_does_nothing() -> None:
    loop, ran = EventLoop(), []
    first = loop.at(1.0, ran.append, "a")
    second = loop.at(2.0, ran.append, "b")
    second.cancel()
    loop.run(1.5)
    first.cancel()  # it ran already
    loop.run(10.0)
    assert ran == ["a"] and loop.events == 1 and not second.pending


def test_a_process_sleeps_between_its_steps_and_stops_when_cancelled() -> None:
    loop, seen = EventLoop(), []

    def steps():
        while True:
            seen.append(loop.now)
            yield 0.5

    process = loop.spawn(steps())
    loop.run(1.2)
    process.cancel()
    loop.run(5.0)
    assert seen == [0.0, 0.5, 1.0]


def test_a_failed_check_stops_the_run_at_its_time() -> None:
    loop, ran = EventLoop(), []
    for t in range(1, 100):
        loop.at(t / 10, ran.append, t)
    loop.check_every(0.25, lambda: "broken" if len(ran) >= 4 else None)
    loop.run(100.0)
    assert loop.violation == (0.5, "broken") and ran == [1, 2, 3, 4, 5]


def test_streams_are_independent_per_purpose_and_replay_per_seed() -> None:
    a, b = seeds.stream(7, "draw"), seeds.stream(7, "link s1-p1 -> h1")
    assert a.random() != b.random()
    assert seeds.stream(7, "draw").random() == seeds.stream(7, "draw").random() != seeds.stream(8, "draw").random()
    c = random.Random()
    seeds.reseed(c, 7, "draw")
    assert c.random() == seeds.stream(7, "draw").random()


@pytest.fixture(scope="module")
def two_switches() -> Topology:
    return Topology.from_dict(leaf_spine(1, 2, 1))


def test_a_simulated_switch_reads_the_loops_clock_and_its_own_stream(two_switches) -> None:
    fabric = Fabric(two_switches, seed=5, values=64)
    seen = {}

    def look() -> None:
        for name, s in fabric.switches.items():
            hooks = s.server.pipeline.switch.hooks
            seen[name] = (hooks.micros(), [hooks.random(0, 1 << 30) for _ in range(3)])

    fabric.loop.at(0.25, look)
    fabric.loop.run(0.3)
    assert {m for m, _ in seen.values()} == {250_000}  # committed at virtual 0, looked at 0.25 s
    draws = [d for _, d in seen.values()]
    assert draws[0] != draws[1]  # one stream per switch
    again = Fabric(two_switches, seed=0, values=64)
    again.reseed(5)  # as a campaign's forked child does
    assert [[s.rng.randint(0, 1 << 30) for _ in range(3)] for s in again.switches.values()] == draws


def test_digest_timers_are_the_loops_events_not_threads() -> None:
    p4info = build_p4info(load_program(P4_DIR / "runtime_externs.p4"))
    loop, sent = EventLoop(), []
    digests = DigestManager(p4info, lambda msg: sent.append((loop.now, msg)) or True,
                            Environment(clock=loop.clock, timer=loop.timer))
    info = p4info.digests[0]
    digests.write(INSERT, p4runtime_pb2.DigestEntry(digest_id=info.preamble.id, config={
        "max_timeout_ns": 50_000_000, "max_list_size": 100, "ack_timeout_ns": 100_000_000}))
    threads = threading.active_count()
    loop.at(0.01, digests.learn, info.preamble.name, 1, (7, 0x800))
    loop.run(0.059)
    assert sent == [] and threading.active_count() == threads
    loop.run(1.0)
    (when, msg), = sent
    assert when == pytest.approx(0.06) and msg.timestamp == pytest.approx(60_000_000, abs=1)
    loop.at(1.0, digests.learn, info.preamble.name, 1, (7, 0x800))  # the list was never acknowledged: forgotten
    loop.run(2.0)
    assert [m.list_id for _, m in sent] == [1, 2]


def test_gilbert_elliott_loses_frames_in_bursts() -> None:
    model, rng = faults.GilbertElliott(enter=0.01, leave=0.2, loss=1.0), random.Random(3)
    lost = [model.lost(rng) for _ in range(20_000)]
    runs, n = [], 0
    for x in lost:
        if x:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    assert 0.02 < sum(lost) / len(lost) < 0.08  # enter / (enter + leave): about 5% of frames
    assert sum(runs) / len(runs) > 3  # bursts of 1 / leave = 5 frames on average, not single losses


def test_a_partition_cuts_the_links_between_its_sides_and_heals() -> None:
    fabric = Fabric(Topology.from_dict(leaf_spine(2, 2, 1)), seed=1, values=64)
    target = faults.Target(fabric, None, sorted(fabric.switches), span=1.0)
    lines = faults.KINDS["partition"].inject(target, {"count": 2, "stable": 0.2, "heal": 0.3})
    down_at = []

    def look() -> None:
        down_at.append(sum(not pair[0].faults.up for pair in fabric.channels))

    for t in range(1, 400):
        fabric.loop.at(t / 100, look)
    fabric.loop.run(4.0)
    assert max(down_at) > 0 and down_at[-1] == 0  # cut, then healed
    assert [line.split()[0] for line in lines] == ["partition", "healed", "partition", "healed"]


def test_every_fault_kind_draws_and_injects_from_the_registry() -> None:
    """Adding a kind is one entry: the campaign draws and injects through KINDS alone."""
    assert campaign.FAULTS == tuple(faults.KINDS)
    for kind, k in faults.KINDS.items():
        params = k.draw(random.Random(kind))
        s = campaign.draw(0)
        s.topology, s.workers, s.mode, s.agg_rate, s.faults = "leaf_spine", 4, "ina", None, {kind: params}
        topology, _ = campaign.topology_of(s)
        outcome = campaign.play(s, Fabric(topology, 0, values=s.values))
        assert outcome.violations == [], (kind, params)


def test_a_broken_invariant_stops_the_run_when_it_breaks(monkeypatch) -> None:
    """A corrupted sum is caught as the worker completes the call, not after the run."""
    seed = next(s for s in range(100) if not campaign.draw(s).faults and campaign.draw(s).calls >= 3)
    whole = campaign.run_seed(seed)
    real = campaign.Monitor.result

    def spoiled(self, rank: int, call: int, sums):
        real(self, rank, call, sums + 1 if (rank, call) == (1, 1) else sums)

    monkeypatch.setattr(campaign.Monitor, "result", spoiled)
    broken = campaign.run_seed(seed)
    (violation,) = broken.violations
    assert "call 1: rank 1's sum" in violation and violation.startswith(f"at {broken.virtual:.6f} s")
    assert broken.virtual < whole.virtual and broken.events < whole.events


def test_a_liveness_check_with_a_wrong_predicate_is_caught_during_the_run(monkeypatch) -> None:
    """A worker 'waiting past its timeout' (here: a timeout of 0 s) is reported at the first check."""
    seed = next(s for s in range(100) if not campaign.draw(s).faults)
    monkeypatch.setattr(campaign, "Monitor", lambda *a: invariants.Monitor(*a[:3], -1.0, every=1e-5))
    outcome = campaign.run_seed(seed)
    (violation,) = outcome.violations
    assert violation.startswith("at 0.000010 s: rank 0 has waited in call 0")



def test_a_failure_is_judged_as_the_worker_raises_it(monkeypatch) -> None:
    """With no error counted as clear, the first failed call stops the run at its moment, before the
    other workers fail."""
    whole = campaign.run_seed(3)  # a switch of the job's one tree dies for good: the workers time out
    assert whole.failed > 1 and whole.violations == []
    monkeypatch.setattr(invariants, "CLEAR", ("NothingIsClear",))
    broken = campaign.run_seed(3)
    (violation,) = broken.violations
    assert violation.startswith(f"at {broken.virtual:.6f} s: call ") and "failed unclearly: Allreduce" in violation
    assert broken.failed == 1 and broken.virtual <= whole.virtual
