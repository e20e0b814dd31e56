"""A switch that loses its registers mid-call (restart): every call completes with the exact sum.

On the loopback wire (tests/loopback_net.py) the switch is restarted at the worst moments: when
the result of one packet has reached some workers and not another, in the first window (which
carries exponents only), at the end of a call (the others have moved on to the next), and in a
hybrid call.  The controller provisions the switch again and writes the job spec again with
the tree's incarnation grown; the workers watch the spec and send their last window again
(docs/protocol.md, "A switch restart").
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.loopback_net import Faults, LoopbackNet
from tests.test_worker import check_sum, hybrid_job
from worker import AllreduceTimeout, Worker, protocol

pytestmark = pytest.mark.usefixtures("worker_core")  # every test on both cores

POOL = 8
SIZE = 3000  # float32: 47 chunks of 64, so a call is 47 + 8 packets per worker


class LoseResult(Faults):
    """Every copy of the result of packet ``seq`` to the worker at ``ip`` is lost while ``on``."""

    def __init__(self, ip: str, seq: int, loss: float = 0.0) -> None:
        super().__init__(loss=loss, seed=seq)
        self.ip, self.seq, self.on, self.lost = ip, seq, True, 0
        self.offset, self.size = protocol.load().field_bytes("seq")

    def apply(self, direction: str, data: bytes, where: object) -> list[tuple[bytes, object]]:
        if self.on and direction == "down" and where[0] == self.ip and \
                int.from_bytes(data[self.offset:self.offset + self.size], "big") == self.seq:
            self.lost += 1
            return []
        return super().apply(direction, data, where)


def restart_once_stuck(net: LoopbackNet, fault: LoseResult, done: threading.Event) -> None:
    """Once the result was lost twice (the original and a repeat answered by unicast), the switch
    restarts, the loss ends, and the controller provisions the switch again."""
    deadline = time.monotonic() + 20
    while fault.lost < 2 and time.monotonic() < deadline and not done.is_set():
        time.sleep(0.01)
    assert fault.lost >= 2, "the workers never got to the packet whose result is lost"
    net.restart_switch()
    fault.on = False
    while not net.controller.check_switches():
        time.sleep(0.05)


def run(net: LoopbackNet, spec, arrays: list[np.ndarray], calls: int, spec_file: Path | None,
        timeout: float = 10.0) -> tuple[list[list[np.ndarray]], list[Worker], list[BaseException]]:
    workers = [Worker(spec, r, timeout=timeout, spec_file=spec_file) for r in range(len(arrays))]
    results: list[list[np.ndarray]] = [[] for _ in arrays]
    errors: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            for _ in range(calls):
                results[r].append(workers[r].allreduce(arrays[r]))
        except BaseException as e:  # noqa: BLE001 - the test looks at them
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(arrays))]
    done = threading.Event()
    restarter = threading.Thread(target=lambda: restart_once_stuck(net, net.faults, done))
    for t in [restarter, *threads]:
        t.start()
    for t in threads:
        t.join()
    done.set()
    restarter.join()
    for w in workers:
        w.close()
    return results, workers, errors


@pytest.fixture
def net3(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as net:
        yield net


def arrays3(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(SIZE) * 10.0 ** rng.uniform(-2, 2)).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("seq, where", [(3, "the first window (exponents only)"),
                                        (POOL + 20, "a packet of values"),
                                        (47 + POOL, "the last packet of the first call")])
def test_a_result_seen_by_some_workers_only_then_a_restart(net3, seq, where):
    """The result of packet ``seq`` reaches h1 and h2, not h3; then the switch restarts.  h1 and h2
    have moved on and will never send that packet again by themselves, yet h3 needs it."""
    spec = net3.job(pool_size=POOL)
    net3.faults = LoseResult("127.0.1.3", seq)
    arrays = arrays3(seq)
    results, workers, errors = run(net3, spec, arrays, calls=2, spec_file=net3.spec_file())
    assert not errors, errors
    for call in range(2):
        check_sum([r[call] for r in results], arrays)
    # h1 and h2 had the result and must send it again; h3 may have finished before it looked
    assert [w.stats.recoveries for w in workers[:2]] == [1, 1] and workers[2].stats.recoveries <= 1
    assert net3.controller.job_spec("job").trees[0].incarnation == 1


def test_a_restart_on_a_lossy_wire(net3):
    """5% of the frames lost each way, the packets sent again after the restart too: the workers
    that have a result send it again until they know every worker has it."""
    spec = net3.job(pool_size=POOL)
    net3.faults = LoseResult("127.0.1.3", POOL + 20, loss=0.05)
    arrays = arrays3(5)
    results, workers, errors = run(net3, spec, arrays, calls=2, spec_file=net3.spec_file())
    assert not errors, errors
    for call in range(2):
        check_sum([r[call] for r in results], arrays)
    assert net3.faults.counts["lost"] > 0


def test_without_watching_the_spec_the_worker_left_behind_times_out(net3):
    """The same restart, but the workers do not know of it: the one without the result waits in vain
    (this is what the recovery is for), and says so within its timeout."""
    spec = net3.job(pool_size=POOL)
    net3.faults = LoseResult("127.0.1.3", POOL + 20)
    results, workers, errors = run(net3, spec, arrays3(1), calls=1, spec_file=None, timeout=3.0)
    assert errors and all(isinstance(e, AllreduceTimeout) for e in errors)
    assert any("no result for 3.0 s" in str(e) for e in errors)
    assert sum(w.stats.recoveries for w in workers) == 0


def test_a_restart_during_a_hybrid_call(net3):
    spec = hybrid_job(net3, "job", 0.5, pool_size=POOL)
    net3.faults = LoseResult("127.0.1.3", POOL + 5)
    arrays = arrays3(7)
    results, workers, errors = run(net3, spec, arrays, calls=2, spec_file=net3.spec_file())
    assert not errors, errors
    for call in range(2):
        check_sum([r[call] for r in results], arrays)
    assert [w.stats.recoveries for w in workers[:2]] == [1, 1]


def test_restarts_between_calls_are_answered_by_idle_workers(net3):
    """A restart while every worker is between calls: they resend their last window at once, the
    switch aggregates rounds nobody waits for, and the next calls go on exactly."""
    spec = net3.job(pool_size=POOL)
    arrays = arrays3(3)
    workers = [Worker(spec, r, spec_file=net3.spec_file()) for r in range(3)]
    try:
        for restarts in range(1, 4):
            futures = [w.allreduce_async(a) for w, a in zip(workers, arrays, strict=True)]
            check_sum([f.result(timeout=30) for f in futures], arrays)
            net3.restart_switch()
            while not net3.controller.check_switches():
                time.sleep(0.05)
            deadline = time.monotonic() + 5
            while any(w.stats.recoveries < restarts for w in workers) and time.monotonic() < deadline:
                time.sleep(0.02)
        assert [w.stats.recoveries for w in workers] == [3, 3, 3]
    finally:
        for w in workers:
            w.close()
