"""Window-bound calls (one or two slots) through the real switch over loopback run at their round trip.

Why (issue 32): with W slots a worker has W packets in flight, so a call advances W packets per
round trip, and a pacer set at that very rate (what calibration gives a small pool's INA or
hybrid job) must not slow it down.  The worker's loop used to wake for the pacer whenever
packets were left to send, even when the window, not the pacer, held them: it polled with a
zero timeout until the result came, dozens of times a packet, and in Mininet four such workers
on two cores starved the switch (37 s for 8 MB against 3.9 s predicted).

How: the loop's polls per packet are counted (``Stats.polls``), which does not depend on the
machine's load: about one per result when the loop sleeps until something is due (the spinning
loop made 49-80 here).  Time is only compared with a generous factor, paced against unpaced on
the same network and call size (the spin cost 1.7-3.7x here, in Mininet 10x).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.loopback_net import LoopbackNet
from tests.test_worker import run_workers
from worker import Worker, protocol
from worker.jobspec import JobSpec

CHUNKS = 150  # per call, of V = 64 values: 150 + W packets per call and worker
POLLS_PER_PACKET = 3.0  # a loop that sleeps until a result or a timer: 0.5-1.1 measured (the spin: 49-80)
SLOWER = 3.0  # paced at its own rate, a call may take this many times the unpaced one: 1.0-1.2 measured


def timed_calls(spec: JobSpec, calls: int) -> tuple[list[float], list[Worker]]:
    """Every rank makes ``calls`` allreduces at once; each call's time (the slowest rank's) and the workers."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(CHUNKS * spec.values).astype(np.float32) for _ in spec.members]
    times: list[list[float]] = []
    _, workers = run_workers(spec, arrays, calls, times)
    return [max(per[i] for per in times) for i in range(calls)], workers


def polls_per_packet(workers: list[Worker]) -> float:
    return max(w.stats.polls / w.stats.packets_sent for w in workers)


@pytest.mark.parametrize("window", [1, 2])
def test_a_window_bound_call_paced_at_its_own_rate_neither_spins_nor_slows(tmp_path, window):
    with LoopbackNet(2, tmp_path) as net:
        hosts = sorted(net.topology.hosts)
        spec = net.controller.create_job("free", hosts, pool_size=window, mode="ina")
        free, workers = timed_calls(spec, calls=3)  # the first call warms up
        assert polls_per_packet(workers) <= POLLS_PER_PACKET
        unpaced = min(free[1:])
        packets = workers[0].stats.packets_sent / 3
        frame = protocol.load(spec.values, spec.udp_port).frame_bytes
        rate = packets * frame * 8 / unpaced / 1e6  # its measured C, wire Mb/s
        paced_spec = net.controller.create_job("paced", hosts, pool_size=window, mode="ina")
        model = paced_spec.model  # paced at its own rate, as a calibration that measured it would pace it
        paced_spec = replace(paced_spec, model=replace(model, ina=replace(model.ina, pace_mbps=rate)))
        paced, workers = timed_calls(paced_spec, calls=3)
        assert polls_per_packet(workers) <= POLLS_PER_PACKET, "the loop spins while the window is full"
        assert min(paced[1:]) <= SLOWER * unpaced, (
            f"W = {window}: paced at its own rate ({rate:.3g} Mb/s) a call took {min(paced[1:]):.3f} s, "
            f"unpaced {unpaced:.3f} s")
