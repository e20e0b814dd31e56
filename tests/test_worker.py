"""The worker library against the real ina.p4, set up by the real controller (tests/loopback_net.py).

Workers run in threads, each with its own UDP socket on 127.0.1.x; the wire can lose,
duplicate and reorder frames.  Results are checked against numpy's float64 sum within the
bound stated in worker/quantize.py, and every worker must get the very same bits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from controller.topology import Topology, single
from tests.loopback_net import Faults, LoopbackNet, LoopbackSwitch, topology
from virtual_fabric.fabric import Fabric
from worker import AllreduceError, AllreduceTimeout, SwitchOverflowError, Worker, calls, quantize
from worker.buffers import BufferPool
from worker.engine import Congestion
from worker.jobspec import JobSpec, JobSpecError
from worker.ring import summation_bound

pytestmark = pytest.mark.usefixtures("worker_core")  # every test on both cores


def run_workers(spec, arrays: list[np.ndarray], calls: int = 1,
                times: list[list[float]] | None = None) -> tuple[list[list[np.ndarray]], list[Worker]]:
    """Every rank calls allreduce `calls` times on its array; the results per rank, and the workers.
    With ``times``, the ranks start each call together and each rank's call times are appended there."""
    results: list[list[np.ndarray]] = [[] for _ in arrays]
    errors: list[BaseException] = []
    workers = [Worker(spec, r) for r in range(len(arrays))]
    start = threading.Barrier(len(arrays))
    if times is not None:
        times[:] = [[] for _ in arrays]

    def rank(r: int) -> None:
        try:
            for _ in range(calls):
                if times is not None:
                    start.wait()
                began = time.perf_counter()
                results[r].append(workers[r].allreduce(arrays[r]))
                if times is not None:
                    times[r].append(time.perf_counter() - began)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            start.abort()
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in workers:
        w.close()
    if errors:
        raise errors[0]
    return results, workers


def check_sum(results: list[np.ndarray], arrays: list[np.ndarray], values: int = 64, ring: bool = False) -> None:
    """Every rank's bits equal, within the switches' bound (``ring``: a ring's float sum's, worker.ring)."""
    exact = sum(a.astype(np.float64) for a in arrays)
    for r in results:
        assert r.dtype == arrays[0].dtype and r.shape == arrays[0].shape
        assert r.tobytes() == results[0].tobytes(), "workers disagree"
    bound = summation_bound(arrays).reshape(-1) if ring else quantize.elementwise_bound(arrays, values)
    out = results[0].astype(np.float64).reshape(-1)
    rounding = np.abs(exact.reshape(-1)) * np.finfo(arrays[0].dtype).eps  # the final cast to the input dtype
    assert (np.abs(out - exact.reshape(-1)) <= bound + rounding).all()


@pytest.fixture
def net3(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as net:
        yield net


# --- quantization ----------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2, 3, 8, 32])
def test_quantization_error_within_the_stated_bound(workers):
    rng = np.random.default_rng(workers)
    scales = np.logspace(-30, 30, 40)[:, None]
    chunks = [rng.standard_normal((40, 64)) * scales for _ in range(workers)]
    agreed = np.max([quantize.chunk_exponents(c) for c in chunks], axis=0)
    s = quantize.shifts(agreed, workers)
    q = [np.stack([quantize.quantize(c[i], int(s[i])) for i in range(40)]) for c in chunks]
    total = np.sum([x.astype(np.int64) for x in q], axis=0)
    assert np.abs(total).max() <= 2**30  # never near int32 overflow
    err = np.abs(quantize.dequantize(total.astype(np.int32), s) - np.sum(chunks, axis=0))
    bound = quantize.error_bound(agreed, workers)[:, None]
    assert (err <= bound).all()
    assert (err.max(axis=1) > bound[:, 0] / 1e4).any()  # the bound is not absurdly loose
    flat = [c.reshape(-1) for c in chunks]  # the element-wise form the allreduce tests check against
    assert (quantize.elementwise_bound(flat, 64) == np.repeat(bound[:, 0], 64)).all()


def test_exponents_of_zero_and_huge_chunks():
    e = quantize.chunk_exponents(np.array([[0.0, 0.0], [0.75, -0.5], [1e-300, 0.0]]))
    assert list(e) == [quantize.EXPONENT_NONE, 0, quantize.EXPONENT_MIN]
    with pytest.raises(ValueError, match="int8 exponent"):
        quantize.chunk_exponents(np.array([[2.0**127]]))


# --- allreduce -------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 1000, 20_011])
def test_float32_sizes(net3, size):
    spec = net3.job(pool_size=16)
    rng = np.random.default_rng(size)
    arrays = [rng.standard_normal(size).astype(np.float32) * 10 for _ in range(3)]
    results, _ = run_workers(spec, arrays)
    check_sum([r[0] for r in results], arrays)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_float_dtypes_and_shapes(net3, dtype):
    spec = net3.job(pool_size=8)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((7, 11, 3)).astype(dtype) for _ in range(3)]
    results, _ = run_workers(spec, arrays)
    check_sum([r[0] for r in results], arrays)


def test_results_behind_a_queue_are_taken_a_few_per_wake(tmp_path):
    """The loopback wire is one thread through the P4 program: a window of 64 queues there, results
    trickle out one at a time, and the loop naps while a few gather (driver.gather_time) instead of
    waking for each (the native loop woke 0.82-0.86 times per result before); the sum stays exact."""
    with LoopbackNet(2, tmp_path) as net:
        spec = net.job(pool_size=64)
        arrays = [np.arange(64 * 600, dtype=np.int32) * (r + 1) for r in range(2)]
        results, workers = run_workers(spec, arrays)
    assert all((r[0] == sum(arrays)).all() for r in results)
    stats = workers[0].stats
    assert stats.results == 600
    assert stats.polls < 0.4 * stats.results, f"{stats.polls} waits for {stats.results} results"


def test_int32_is_exact_and_overflow_is_refused(net3):
    spec = net3.job(pool_size=8)
    rng = np.random.default_rng(2)
    arrays = [rng.integers(-2**28, 2**28, 1000, dtype=np.int32) for _ in range(3)]
    results, _ = run_workers(spec, arrays)
    assert all((r[0] == np.sum(arrays, axis=0, dtype=np.int32)).all() for r in results)
    big = [np.full(100, 2**30, np.int32) for _ in range(3)]  # a job is one session: new Workers, new job
    with pytest.raises(SwitchOverflowError, match="overflow in 2 chunk.*first chunk 0 "):
        run_workers(net3.job("again", pool_size=8), big)


def test_consecutive_and_async_calls_continue_the_sequence(net3):
    spec = net3.job(pool_size=4)  # 4 slots: calls wrap around the pool many times
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(1000).astype(np.float32) for _ in range(3)]
    results, workers = run_workers(spec, arrays, calls=5)
    for call in range(5):
        check_sum([r[call] for r in results], arrays)
    # 16 chunks and 4 exponent packets in the first call, then 16: the same size again is hinted (its first window
    # at the exponents the last call agreed, the rest a window ahead) and the same values miss no hint
    assert workers[0].stats.results == (16 + 4) + 4 * 16

    again = net3.job("again", pool_size=4)  # a job is one session: new Workers, new job
    second = [Worker(again, r) for r in range(3)]
    futures = [[w.allreduce_async(a * k) for k in (1, 2)] for w, a in zip(second, arrays)]
    one, two = ([f[k].result(timeout=20) for f in futures] for k in (0, 1))
    check_sum(one, arrays)
    check_sum(two, [a * 2 for a in arrays])
    in_place = [a.copy() for a in arrays]
    threads = [threading.Thread(target=w.allreduce_, args=(x,)) for w, x in zip(second, in_place)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check_sum(in_place, arrays)
    halves = [a[::2].astype(np.float16) for a in arrays]  # float16, summed as float32
    targets = [np.repeat(h, 2)[::2] for h in halves]  # non-contiguous views of each
    assert all(not t.flags.c_contiguous and np.array_equal(t, h) for t, h in zip(targets, halves))
    handles = [w.allreduce_async_(t) for w, t in zip(second, targets)]  # started together, in place
    assert all(h.result(timeout=20) is t for h, t in zip(handles, targets))
    exact = np.sum([h.astype(np.float64) for h in halves], axis=0)
    assert all(np.allclose(t, exact, rtol=2e-3, atol=1e-3) for t in targets)
    for w in second:
        w.close()


def test_in_place_calls_sum_into_the_array_itself(tmp_path):
    """A contiguous array is read and summed into as the call runs (no private copy; a last chunk cut short
    apart, padded): under loss, duplication and reordering (copies go again from the packets, never from
    the array the sums overwrite), its sums are those of a call that copies, to the bit; float32, float64
    and int32."""
    rng = np.random.default_rng(12)
    with LoopbackNet(3, tmp_path, Faults(loss=0.05, duplicate=0.05, reorder=0.05, seed=13)) as net:
        spec = net.job(pool_size=8)
        workers = [Worker(spec, r) for r in range(3)]
        for dtype, shape in ((np.float32, (20, 64)), (np.float64, (7, 101)), (np.int32, (20, 64)), (np.int32, 33)):
            arrays = [(rng.standard_normal(shape) * 1e3).astype(dtype) for _ in range(3)]
            assert all(calls.summed_in_place(a) for a in arrays)
            copied = [f.result(timeout=30) for f in [w.allreduce_async(a) for w, a in zip(workers, arrays)]]
            targets = [a.copy() for a in arrays]
            handles = [w.allreduce_async_(t) for w, t in zip(workers, targets)]
            assert all(h.result(timeout=30) is t for h, t in zip(handles, targets))
            assert all(t.tobytes() == c.tobytes() for t, c in zip(targets, copied))
            if dtype != np.int32:
                check_sum(targets, arrays)
        assert sum(w.stats.retransmissions for w in workers) > 0
        for w in workers:
            w.close()
    assert not calls.summed_in_place(np.ones(128, np.float16))  # summed as float32
    assert not calls.summed_in_place(np.ones(256, np.float32)[::2])


# the faults' arguments, not Faults objects: a Faults is one wire's state (its seeded draws, the frames it holds),
# and one shared by the native and the reference case let the first's last held frame (seq 485, the cell of seq 5)
# into the second's switch, which then dropped seq 5 as stale for good
@pytest.mark.parametrize("fault_args", [dict(loss=0.05, seed=4), dict(loss=0.01, seed=5),
                                        dict(duplicate=0.2, reorder=0.2, seed=6),
                                        dict(loss=0.05, duplicate=0.05, reorder=0.05, seed=7)],
                         ids=["loss5", "loss1", "dup-reorder", "all"])
def test_exact_under_loss_duplication_and_reordering(tmp_path, fault_args):
    faults = Faults(**fault_args)
    with LoopbackNet(3, tmp_path, faults) as net:
        spec = net.job(pool_size=16)
        rng = np.random.default_rng(8)
        arrays = [rng.standard_normal(30_000).astype(np.float32) for _ in range(3)]
        results, workers = run_workers(spec, arrays)
        check_sum([r[0] for r in results], arrays)
        if faults.loss:
            assert sum(w.stats.retransmissions for w in workers) > 0
            # most losses are found by later results, not by a timeout
            assert sum(w.stats.early_retransmissions for w in workers) > 0
        if faults.duplicate:
            assert sum(w.stats.ignored for w in workers) > 0  # duplicate results dropped


def test_a_wire_refuses_faults_holding_another_wires_frames():
    """A frame held by one wire would enter the next switch: a late copy of the last packet there made a whole
    slot's packets stale for good (test_exact_under_loss_duplication_and_reordering, reference after native)."""
    faults = Faults(reorder=1.0)
    assert faults.apply("up", b"frame", 1) == []
    with pytest.raises(ValueError, match="another wire"):
        LoopbackSwitch(topology(1), "s1", faults)


@pytest.mark.parametrize("srtt, cut", [(0.010, False), (0.014, False), (0.016, True), (0.200, True)])
def test_a_timeout_halves_the_window_only_when_the_round_trip_has_grown(srtt, cut):
    """Delay tells congestion from random loss: with the least round trip 10 ms, a timeout at a
    smoothed 10-14 ms is a random loss (the window stays), at 16 ms and more the window queues."""
    from worker.engine import Stats

    congestion, stats = Congestion(window=64, srtt=srtt, rtt_min=0.010), Stats()
    congestion.cwnd = 32.0
    congestion.back_off(100.0, stats)
    assert (congestion.cwnd, stats.window_cuts) == ((16.0, 1) if cut else (32.0, 0))
    congestion.back_off(100.0 + srtt / 2, stats)  # once per round trip at most
    assert stats.window_cuts == int(cut)


def test_a_dead_worker_makes_the_others_fail_clearly(net3):
    spec = net3.job(pool_size=16)
    arrays = [np.ones(10_000, np.float32) for _ in range(2)]
    workers = [Worker(spec, r, timeout=1.0) for r in range(2)]  # rank 2 never shows up
    start = time.monotonic()
    futures = [w.allreduce_async(a) for w, a in zip(workers, arrays)]
    for f in futures:
        with pytest.raises(AllreduceTimeout, match=r"no result for 1.0 s: 0/\d+ packets done.*slot 0 set 0 seq 1") \
                as err:
            f.result(timeout=10)
        assert err.value.missing[0] == 1 and err.value.retransmissions > 0
    assert time.monotonic() - start < 5
    for w in workers:
        w.close()
    # the job's switch state is not poisoned: a fresh job on the same switch works
    fresh = net3.job("fresh", pool_size=16)
    results, _ = run_workers(fresh, [np.ones(500, np.float32)] * 3)
    assert (results[0][0] == 3).all()


def test_a_recovery_that_fails_between_calls_fails_the_next_call(net3):
    """The spec watch's recovery between calls runs as a task nobody waits for: its failure must
    still reach the caller, at the next call (and the watch thread only posts the change)."""
    spec = net3.job("idle", pool_size=16)
    workers = [Worker(spec, r, timeout=1.0) for r in range(3)]
    w = workers[0]
    try:
        for f in [x.allreduce_async(np.ones(1_000, np.float32)) for x in workers]:
            f.result(timeout=10)  # a call done: its last window is kept, and goes again after a loss
        tree = w._trees[0]

        def broken(rows: np.ndarray) -> int:
            raise OSError(101, "Network is unreachable")

        w._sockets[tree].send = broken
        w._spec_changes[tree.config.job_id] = (1, "tree 1 of job idle", None)  # as the watch thread posts it
        w._io.submit(w._recover_idle).result(timeout=5)
        assert tree.incarnation == 1  # applied on the I/O thread
        with pytest.raises(AllreduceError, match="failed between calls .*OSError.*unreachable"):
            w.allreduce(np.ones(100, np.float32))
    finally:
        for x in workers:
            x.close()


def test_workers_started_again_on_a_used_job_are_told_why_they_wait(net3):
    """A job is one session: new workers on a job that has run find its slots at later rounds."""
    spec = net3.job("used", pool_size=16)
    run_workers(spec, [np.ones(2_000, np.float32)] * 3)
    again = [Worker(spec, r, timeout=1.0) for r in range(3)]
    futures = [w.allreduce_async(np.ones(2_000, np.float32)) for w in again]
    for f in futures:
        with pytest.raises(AllreduceTimeout, match="this job's workers ran before.*create a new job"):
            f.result(timeout=10)
    for w in again:
        w.close()


# --- jobs over several trees ------------------------------------------------------------------

def over_trees(name: str, specs: list[JobSpec], shares: list[float]) -> JobSpec:
    """One job whose trees are those of single-tree jobs of the same members (the loopback net has
    one switch, so its planner finds one tree; several jobs there are the same thing to a worker)."""
    return replace(specs[0], name=name, trees=tuple(replace(s.trees[0], share=x) for s, x in zip(specs, shares)))


def refuse_after_a_failure(workers: list[Worker]) -> None:
    """A failed call leaves the worker's sequence out of step with the others: later calls are refused."""
    with pytest.raises(AllreduceError, match="earlier allreduce of this Worker failed"):
        workers[0].allreduce(np.ones(10, np.float32))
    for w in workers:
        w.close()


def test_a_job_over_two_trees_splits_every_call_by_the_shares(net3):
    spec = over_trees("both", [net3.job("t1", pool_size=16), net3.job("t2", pool_size=16)], [0.3, 0.7])
    assert spec.split(157) == [(0, 47), (47, 157)]
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(10_000).astype(np.float32) * 100 for _ in range(3)]  # 157 chunks of 64
    results, workers = run_workers(spec, arrays, calls=2)
    for call in range(2):
        check_sum([r[call] for r in results], arrays)
    stats = net3.controller.status()["jobs"]
    for job, chunks in (("t1", 47), ("t2", 110)):  # chunks + one window of exponent packets, then hinted: chunks
        assert stats[job]["s1"]["aggregated"] == 3 * (2 * chunks + 16), job
    assert workers[0].stats.results == 2 * (47 + 110) + 2 * 16


@pytest.mark.parametrize("size", [0, 1, 64, 65, 129])
def test_small_calls_over_two_trees_leave_a_tree_idle(net3, size):
    """One chunk over two trees: one tree gets nothing to do, and the call still returns the sum."""
    spec = over_trees("small", [net3.job("s1", pool_size=4), net3.job("s2", pool_size=4)], [0.5, 0.5])
    arrays = [np.arange(size, dtype=np.float32) * (r + 1) for r in range(3)]
    results, _ = run_workers(spec, arrays, calls=2)
    for call in range(2):
        check_sum([r[call] for r in results], arrays)


def test_a_dead_tree_fails_the_call_naming_it_and_returns_nothing(net3):
    spec = over_trees("half-dead", [net3.job("alive", pool_size=16), net3.job("dead", pool_size=16)], [0.5, 0.5])
    net3.controller.delete_job("dead")  # the switch drops that tree's packets from now on
    workers = [Worker(spec, r, timeout=1.0) for r in range(3)]
    start = time.monotonic()
    futures = [w.allreduce_async(np.ones(5_000, np.float32)) for w in workers]
    for f in futures:
        with pytest.raises(AllreduceTimeout, match=rf"tree 2/2 of job half-dead \(root s1, job id "
                                                   rf"{spec.trees[1].job_id}\): no result for 1.0 s"):
            f.result(timeout=10)
    assert time.monotonic() - start < 5
    refuse_after_a_failure(workers)


# --- hybrid: the trees and a host ring at once ---------------------------------------------------

def hybrid_job(net: LoopbackNet, name: str, alpha: float, pool_size: int = 16) -> JobSpec:
    hosts = sorted(net.topology.hosts)
    if alpha == 0:
        return net.controller.create_job(name, hosts, pool_size, mode="ring")
    return net.controller.create_job(name, hosts, pool_size, mode="hybrid", alpha=alpha)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 1.0])
def test_hybrid_calls_split_between_the_trees_and_the_ring(net3, alpha):
    spec = hybrid_job(net3, f"h{int(alpha * 10)}", alpha) if alpha < 1 else net3.job("pure", pool_size=16)
    assert spec.choose(10_000, np.float32).ina_share == alpha and bool(spec.trees) == (alpha > 0)
    assert spec.ring_port is not None
    rng = np.random.default_rng(12)
    arrays = [rng.standard_normal(10_000).astype(np.float32) * 100 for _ in range(3)]  # 157 chunks of 64
    results, workers = run_workers(spec, arrays, calls=2)
    for call in range(2):
        check_sum([r[call] for r in results], arrays, ring=alpha == 0)  # a ring alone sums in float32
    k = calls.ina_chunks(alpha, 157)
    assert k == round(alpha * 157) and all(w.last_choice.ina_share == alpha for w in workers)
    ina = 2 * k + min(16, k)  # per worker: the trees' chunks per call, one window of exponents in the first
    assert workers[0].stats.results == ina
    parts = workers[0].last_parts  # what calibration and benchmarks time each part by
    assert set(parts) == {"trees", "ring"} - ({"trees"} if alpha == 0 else {"ring"} if alpha == 1 else set())
    assert min(parts.values()) > 0
    if 0 < alpha < 1:  # a hybrid's ring part is float64 then cast: within half an ulp of the float32 result
        exact = sum(a.astype(np.float64) for a in arrays)[k * 64:]
        tail = results[0][0][k * 64:].astype(np.float64)
        assert (np.abs(tail - exact) <= np.abs(exact) * np.finfo(np.float32).eps / 2 + 1e-30).all()
    if alpha == 0:  # a ring alone sums in float32, as gloo: 2(N-1)/N of the tensor per call
        assert all(abs(w.ring_bytes_sent - 2 * 2 * (3 - 1) / 3 * 40_000) <= 2 * 4 * 4 for w in workers)


@pytest.mark.parametrize("ring_sum, tensors_per_step", [("native", 2), ("float64", 3)])
def test_a_ring_job_sums_in_the_tensors_type_or_in_float64(net3, ring_sum, tensors_per_step):
    """native: float32 summation's error, 2(N-1)/N of the tensor; float64: one rounding, 3(N-1)/N."""
    hosts = sorted(net3.topology.hosts)
    spec = net3.controller.create_job(f"ring-{ring_sum}", hosts, 16, mode="ring", ring_sum=ring_sum)
    assert spec.ring_sum == ring_sum and not spec.trees
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(30_000).astype(np.float32) * 100 for _ in range(3)]
    results, workers = run_workers(spec, arrays)
    check_sum([r[0] for r in results], arrays, ring=True)  # the same bits on every rank, within the bound
    if ring_sum == "float64":  # one rounding: within half an ulp of the float32 result
        exact = sum(a.astype(np.float64) for a in arrays)
        eps = np.finfo(np.float32).eps
        assert (np.abs(results[0][0].astype(np.float64) - exact) <= np.abs(exact) * eps / 2 + 1e-30).all()
    sent = [w.ring_bytes_sent for w in workers]
    assert all(abs(s - tensors_per_step * (3 - 1) / 3 * 120_000) <= 64 for s in sent), sent


def test_hybrid_int32_is_exact(net3):
    spec = hybrid_job(net3, "ints", 0.5)
    arrays = [np.arange(1000, dtype=np.int32) * (r + 1) for r in range(3)]
    results, _ = run_workers(spec, arrays)
    assert all((r[0] == np.arange(1000, dtype=np.int32) * 6).all() for r in results)


@pytest.mark.parametrize("alpha, message", [
    (None, r"the switch flagged an int32 overflow in 2 chunk\(s\), first chunk 0 \(elements 0\.\.63\); those sums "
           r"wrapped"),
    (0.5, r"the int32 sum of the ring part \(elements 128\.\.199\) leaves int32 in 72 element\(s\), first element "
          r"128"),
])
def test_an_overflow_fails_a_worker_and_a_simulated_one_with_the_same_message(net3, alpha, message):
    """The same calls overflow the same chunks (the trees' part) or elements (a hybrid's ring part, its
    first two chunks through the trees) in a ``Worker`` and in the virtual fabric's workers, and both
    name them alike: each composes its calls with ``calls.ComposedCall``."""
    mode = "ina" if alpha is None else "hybrid"
    size = 100 if alpha is None else 200
    big = [np.full(size, 2**30, np.int32) for _ in range(3)]
    if alpha is not None:
        for a in big:
            a[:128] = 1  # the trees' part sums well
    hosts = sorted(net3.topology.hosts)
    with pytest.raises(SwitchOverflowError, match=f"^{message}$") as raised:
        run_workers(net3.controller.create_job("big", hosts, 8, mode=mode, alpha=alpha), big)
    fabric = Fabric(Topology.from_dict(single(3)), seed=1, values=64)
    job = fabric.create_job("big", ["h1", "h2", "h3"], [[a] for a in big], mode=mode, alpha=alpha, pool_size=8)
    fabric.run(60.0)
    assert [w.records[0].error for w in job.workers] == [f"SwitchOverflowError: {raised.value}"] * 3


@pytest.mark.parametrize("alpha, part", [(0.0, r"ring part of job dead-0 \(rank \d\): setup: "),
                                         (0.5, r"ring part of job dead-5 \(rank \d\)|tree 1/1 of job dead-5")])
def test_a_dead_peer_fails_the_call_naming_the_part(net3, alpha, part):
    """Rank 2 never shows up: the ring (and the trees, which miss its contributions) fail within the timeout."""
    spec = hybrid_job(net3, f"dead-{int(alpha * 10)}", alpha)
    workers = [Worker(spec, r, timeout=1.0) for r in range(2)]
    start = time.monotonic()
    futures = [w.allreduce_async(np.ones(5_000, np.float32)) for w in workers]
    for f in futures:
        with pytest.raises(AllreduceError, match=part):
            f.result(timeout=15)
    assert time.monotonic() - start < 8
    refuse_after_a_failure(workers)


def test_a_dead_switch_path_fails_a_hybrid_call_naming_the_tree(net3):
    spec = hybrid_job(net3, "no-switch", 0.5)
    (tree,) = spec.trees
    net3.controller.io.remove("s1", *net3.controller.reconciler.job_entries(net3.controller.state.jobs["no-switch"],
                                                                            "s1"))
    workers = [Worker(spec, r, timeout=1.0) for r in range(3)]
    futures = [w.allreduce_async(np.ones(5_000, np.float32)) for w in workers]
    for f in futures:
        with pytest.raises(AllreduceTimeout, match=rf"tree 1/1 of job no-switch \(root s1, job id {tree.job_id}\)"):
            f.result(timeout=15)
    for w in workers:
        w.close()


def test_job_spec_round_trip_and_bad_specs(net3, tmp_path):
    spec = over_trees("two", [net3.job("x", pool_size=8), net3.job("y", pool_size=8)], [0.25, 0.75])
    spec.save(tmp_path / "two.json")
    assert JobSpec.load(tmp_path / "two.json") == spec
    assert [end - first for first, end in spec.split(12)] == [3, 9] and spec.split(0) == [(0, 0), (0, 0)]
    assert spec.split(10) == [(0, 3), (3, 10)]  # 2.5 and 7.5: a tie goes to the first tree
    assert spec.split(3) == [(0, 1), (1, 3)]  # 0.75 and 2.25: the larger remainder gets the odd chunk
    with pytest.raises(JobSpecError, match="shares .* sum to 1"):
        replace(spec, trees=(replace(spec.trees[0], share=0.5), spec.trees[1]))
    with pytest.raises(JobSpecError, match="names 2 children for 3 members"):
        replace(spec, trees=(replace(spec.trees[0], children=(0, 1)), spec.trees[1]))
    with pytest.raises(JobSpecError, match="share a worker port"):
        replace(spec, trees=(spec.trees[0], replace(spec.trees[1], port=spec.trees[0].port)))
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"name": "old", "job_id": 1, "members": []}))
    with pytest.raises(JobSpecError, match="not a job spec of format ina-job/3"):
        JobSpec.load(old)
    with pytest.raises(JobSpecError, match="cannot read"):
        JobSpec.load(tmp_path / "missing.json")


def test_misuse_gets_clear_exceptions(net3):
    spec = net3.job(pool_size=8)
    with pytest.raises(ValueError, match="rank 3 is not in job"):
        Worker(spec, 3)
    with pytest.raises(ValueError, match="window 9 must be within 1..8"):
        Worker(spec, 0, window=9)
    w = Worker(spec, 0)
    with pytest.raises(TypeError, match="numpy array"):
        w.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="not int64"):
        w.allreduce(np.arange(4))
    with pytest.raises(ValueError, match="1 non-finite value.*index 2: nan"):
        w.allreduce(np.array([1, 2, np.nan], np.float32))
    with pytest.raises(OSError, match="cannot listen on 127.0.1.1"):
        Worker(spec, 0)  # the port is taken by w
    assert w.stats.packets_sent == 0  # nothing went out for any of this
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.allreduce(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="INA_JOB_SPEC"):
        Worker.from_env()


def test_the_worker_needs_no_controller():
    """Layering: training hosts load the job spec and run allreduces with the worker package alone."""
    code = ("import sys, worker, worker.cli, worker.jobspec, worker.engine, worker.ring; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('controller', 'bmv2env', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr or out.stdout


def test_the_buffer_pool_lends_the_smallest_free_buffer_that_fits():
    pool = BufferPool(keep=2)
    big, small = pool.take(1000, np.float32), pool.take(100, np.float64)
    assert big.shape == (1000,) and big.dtype == np.float32 and small.dtype == np.float64
    pool.give(big)
    pool.give(small)
    again = pool.take(90, np.float64)  # 720 bytes: the 800-byte buffer, not the 4,000-byte one
    assert np.shares_memory(again, small) and again.shape == (90,)
    bigger = pool.take(2000, np.float32)  # nothing fits: fresh memory
    assert not np.shares_memory(bigger, big)
    pool.give(again)
    pool.give(bigger)
    assert sorted(b.nbytes for b in pool._free) == [4000, 8000]  # at most keep=2, the largest
    with pytest.raises(KeyError):
        pool.give(np.zeros(3))  # not lent by this pool


def test_a_batch_of_round_trips_moves_the_estimate_as_one_sample_at_a_time_would():
    """The worker takes results by the batch; its RTT estimate must still be TCP's per-ACK one
    (a coarser one cut the window 4-7x as often under loss: bench_loss)."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        rtts = rng.uniform(0.001, 0.05, rng.integers(1, 700))
        split = int(rng.integers(0, len(rtts) + 1))
        batched = Congestion(8)
        batched.sample(rtts[:split])
        batched.sample(rtts[split:])
        srtt = rttvar = None
        for r in rtts:
            if srtt is None:
                srtt, rttvar = r, r / 2
            else:
                rttvar, srtt = 0.75 * rttvar + 0.25 * abs(srtt - r), 0.875 * srtt + 0.125 * r
        assert batched.srtt == pytest.approx(srtt, rel=1e-9) and batched.rttvar == pytest.approx(rttvar, rel=1e-9)
        assert batched.rtt_min == rtts.min()
