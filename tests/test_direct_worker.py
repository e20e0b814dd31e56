"""worker/direct.py: a direct-connect plan's worker on real sockets, on loopback.

Four ranks (threads) run a plan of three parts at once: a ring part over two "interfaces" per worker
(127.0.4.x and 127.0.5.x, one directed ring listening on each), and two one-device tree parts, each its own
built-in-target switch set up by the real controller (tests/loopback_net.py, the hosts on 127.0.2.x and
127.0.3.x: each worker's address on that part's interface).  Eight or nine ranks run a torus part (four
interfaces, 127.0.20.x to 127.0.23.x) beside a ring part (127.0.24.x, 127.0.25.x).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.direct import DirectCluster, plan
from tests.conftest import free_port
from tests.loopback_net import LoopbackNet
from worker import AllreduceError, DirectWorker, quantize
from worker.chain import ChainPart
from worker.direct import (
    DirectAllreduceError,
    RingPart,
    TorusPart,
    TreePart,
    check_parts,
    parts_from_json,
    parts_to_json,
    split,
)
from worker.ring import summation_bound
from worker.ring_layout import reduce_sum

N = 4
SIZE = 20_011  # not a multiple of V = 64
ORDER = (0, 2, 1, 3)  # not rank order: the ring's positions are not the ranks


class Cluster:
    """The two switches (tree parts) and the ring part's addresses; ``parts`` is what every rank gets."""

    def __init__(self, tmp_path: Path) -> None:
        self.nets = []
        for subnet, name in (("127.0.2", "a"), ("127.0.3", "b")):
            (tmp_path / name).mkdir()
            self.nets.append(LoopbackNet(N, tmp_path / name, host_ips=[f"{subnet}.{w + 1}" for w in range(N)],
                                         switch_ip=f"{subnet}.254"))
        port = free_port()
        ring = RingPart(0.4, ORDER, tuple(f"127.0.5.{w + 1}:{port}" for w in range(N)),
                        tuple(f"127.0.4.{w + 1}:{port}" for w in range(N)))
        self.parts = [ring, TreePart(self.nets[0].job("direct-a", pool_size=16, mode="ina"), 0.35),
                      TreePart(self.nets[1].job("direct-b", pool_size=16, mode="ina"), 0.25)]

    def close(self) -> None:
        for net in self.nets:
            net.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


@contextlib.contextmanager
def ranks(parts: list, timeout: float, n: int = N) -> Iterator[list[DirectWorker]]:
    """A DirectWorker per rank, closed after."""
    workers = [DirectWorker(parts, r, timeout=timeout) for r in range(n)]
    try:
        yield workers
    finally:
        for w in workers:
            w.close()


def on_ranks(workers: list[DirectWorker], body: Callable[[DirectWorker], object], limit: float = 20.0) -> list:
    """body(worker) on every rank at once; each rank's return value or exception (never a hang)."""
    out: list = [None] * len(workers)

    def run(r: int) -> None:
        try:
            out[r] = body(workers[r])
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out[r] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(limit)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return out


def check(results: list[np.ndarray], arrays: list[np.ndarray], ranges: list[tuple[int, int]],
          parts: list) -> None:
    """Every rank's bits equal; each tree (or ring_tree: devices and relays sum as ina.p4) part's range within the
    switches' bound, each ring (or torus) half within a ring's (int32: exact everywhere)."""
    for r in results:
        assert not isinstance(r, BaseException), r
        assert r.dtype == arrays[0].dtype and r.shape == arrays[0].shape
        assert r.tobytes() == results[0].tobytes(), "ranks disagree"
    exact = sum(a.astype(np.float64) for a in arrays)
    if arrays[0].dtype == np.int32:
        assert (results[0] == sum(a.astype(np.int64) for a in arrays).astype(np.int32)).all()
        return
    pieces = []
    for (lo, hi), p in zip(ranges, parts):
        if isinstance(p, TreePart | ChainPart):
            pieces.append((lo, hi, quantize.elementwise_bound([a[lo:hi] for a in arrays], p.spec.values)))
        else:
            mid = lo + (hi - lo + 1) // 2
            pieces += [(a, b, summation_bound([x[a:b] for x in arrays])) for a, b in ((lo, mid), (mid, hi))]
    for lo, hi, bound in pieces:
        rounding = np.abs(exact[lo:hi]) * np.finfo(arrays[0].dtype).eps  # the final cast to float32
        assert (np.abs(results[0][lo:hi] - exact[lo:hi]) <= bound + rounding).all(), (lo, hi)
    assert pieces[-1][2].max() > 0  # the bounds are not vacuous


def test_three_parts_sum_on_every_rank(cluster: Cluster) -> None:
    """float32 then int32, twice each, through two switches and a ring both ways at once."""
    parts = parts_from_json(parts_to_json(cluster.parts))  # as the controller would hand them over
    assert parts == cluster.parts
    with ranks(parts, 5.0) as workers:
        rng = np.random.default_rng(7)
        ranges = workers[0].split(SIZE)
        assert [b - a for a, b in ranges] == [8004, 7004, 5003]
        for dtype in (np.float32, np.int32):
            for _ in range(2):
                if dtype == np.float32:
                    arrays = [(rng.standard_normal(SIZE) * 10 ** rng.uniform(-3, 3, SIZE)).astype(dtype)
                              for _ in range(N)]
                else:
                    arrays = [rng.integers(-2**20, 2**20, SIZE, dtype=np.int32) for _ in range(N)]
                kept = [a.copy() for a in arrays]
                results = on_ranks(workers, lambda w, xs=arrays: w.allreduce(xs[w.rank]))
                check(results, arrays, ranges, parts)
                assert all((a == k).all() for a, k in zip(arrays, kept)), "allreduce changed its input"
        for w in workers:  # each directed ring goes round ORDER (reversed) to the next worker's listening address
            nxt, prev = ORDER[(ORDER.index(w.rank) + 1) % N], ORDER[ORDER.index(w.rank) - 1]
            (forward,), (backward,) = w._rings[(0, 0)].connections(), w._rings[(0, 1)].connections()
            assert forward.getpeername()[0] == f"127.0.5.{nxt + 1}"
            assert backward.getpeername()[0] == f"127.0.4.{prev + 1}"
        assert set(workers[0].last_parts) == {"part 1/3 (ring, forward)", "part 1/3 (ring, backward)",
                                              "part 2/3 (tree, job direct-a)", "part 3/3 (tree, job direct-b)"}
        buf = np.ones((3, 5), np.float32)  # in place, another shape
        copies = [buf.copy() for _ in range(N)]  # made before rank 0 sums into buf (a copy made after reads sums)
        out = on_ranks(workers, lambda w: w.allreduce_(copies[w.rank]) if w.rank else w.allreduce_(buf))
        assert out[0] is buf and (buf == N).all() and all((o == N).all() for o in out)


def test_a_closed_ring_fails_every_rank_naming_the_part(cluster: Cluster) -> None:
    timeout = 5.0
    with ranks(cluster.parts, timeout) as workers:
        x = np.arange(1000, dtype=np.int32)
        assert all((r == N * x).all() for r in on_ranks(workers, lambda w: w.allreduce(x)))  # rings connected
        workers[2]._rings[(0, 0)].close()  # rank 2's forward ring dies
        began = time.monotonic()
        errors = on_ranks(workers, lambda w: w.allreduce(x))
        took = time.monotonic() - began
        for r, e in enumerate(errors):
            assert isinstance(e, DirectAllreduceError), (r, e)
            assert "part 1/3 (ring, forward)" in str(e) and set(e.failures) == {"part 1/3 (ring, forward)"}, e
        assert took < timeout, f"the failure took {took:.1f} s to reach every rank"
        with pytest.raises(AllreduceError, match="an earlier allreduce of this DirectWorker failed"):
            workers[0].allreduce(x)


def test_a_switch_gone_fails_every_rank_within_the_timeout(cluster: Cluster) -> None:
    timeout = 2.0
    with ranks(cluster.parts, timeout) as workers:
        x = np.linspace(-1, 1, 5000, dtype=np.float32)
        on_ranks(workers, lambda w: w.allreduce(x))
        cluster.nets[1].restart_switch()  # device b comes back empty, and nobody provisions it again
        began = time.monotonic()
        errors = on_ranks(workers, lambda w: w.allreduce(x))
        took = time.monotonic() - began
        for r, e in enumerate(errors):
            assert isinstance(e, DirectAllreduceError), (r, e)
            assert set(e.failures) == {"part 3/3 (tree, job direct-b)"} and "direct-b" in str(e), e
            assert "no result for" in str(e)  # the Worker's own timeout, named
        assert timeout <= took < timeout + 3, took


def test_bad_input_and_parts_are_refused_before_anything_is_sent(cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="shares"):
        DirectWorker([*cluster.parts[:2], TreePart(cluster.parts[2].spec, 0.5)], 0)
    bad_ring = RingPart(0.4, (0, 1, 2), ("a:1",) * 3, ("b:1",) * 3)
    with pytest.raises(ValueError, match="part 2/3 has 4 workers, part 1 has 3"):
        DirectWorker([bad_ring, *cluster.parts[1:]], 0)
    with pytest.raises(ValueError, match="rank 4"):
        DirectWorker(cluster.parts, 4)
    with DirectWorker(cluster.parts, 0, timeout=1.0) as w:
        with pytest.raises(TypeError, match="int64"):
            w.allreduce(np.zeros(10, np.int64))
        with pytest.raises(ValueError, match="non-finite value at flat index 3"):
            w.allreduce(np.array([0, 1, 2, np.nan], np.float32))
        assert w.allreduce(np.zeros(0, np.float32)).size == 0  # nothing to send: no part runs


def test_split_covers_the_call_by_share() -> None:
    """The worker's split (which DirectPlan.slices is): consecutive ranges covering the call, each within one
    element of its share, for a real plan's shares."""
    p = plan(DirectCluster(8, 4, 100.0, devices=4, device_ports=10), 64 << 20)
    assert len(p.parts) > 1
    for elements in (0, 1, 7, 1000, 20_011, 16 << 20):
        ranges = split(p.parts, elements)
        assert ranges[0][0] == 0 and ranges[-1][1] == elements
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(abs((hi - lo) - part.share * elements) < 1 for (lo, hi), part in zip(ranges, p.parts))
        assert p.slices(elements) == ranges


def interface(w: int, i: int, port: int) -> str:
    """Worker w's address on its "interface" i (127.0.20+i.w+1)."""
    return f"127.0.{20 + i}.{w + 1}:{port}"


def torus_and_ring(levels: tuple[int, int], port: int) -> list:
    """A torus part on interfaces 0-3 (rings of levels[0] on 0 and 1, of levels[1] on 2 and 3: forward, a worker
    hears its predecessor on the level's second interface, backward on its first) in an order that is not rank
    order, and a ring part on interfaces 4 and 5."""
    n = levels[0] * levels[1]
    order = tuple(np.random.default_rng(n).permutation(n).tolist())
    workers = range(n)
    torus = TorusPart(0.7, order, levels,
                      tuple(tuple(interface(w, i, port) for w in workers) for i in (1, 3)),
                      tuple(tuple(interface(w, i, port) for w in workers) for i in (0, 2)))
    ring = RingPart(0.3, tuple(workers), tuple(interface(w, 5, port) for w in workers),
                    tuple(interface(w, 4, port) for w in workers))
    return [torus, ring]


@pytest.mark.parametrize("levels", [(4, 2), (3, 3)])
def test_a_torus_part_sums_as_its_layouts_do_on_every_rank(levels: tuple[int, int]) -> None:
    """Both directed rings of rings at once, beside a ring part: every rank the same bits, each half of the
    torus's slice exactly ``reduce_sum`` in its layout (as the virtual fabric sums it), within a ring's bound;
    each level's connections on that level's interface."""
    n = levels[0] * levels[1]
    parts = parts_from_json(parts_to_json(torus_and_ring(levels, free_port())))
    assert parts == torus_and_ring(levels, int(parts[0].forward[0][0].rpartition(":")[2]))
    torus = parts[0]
    rng = np.random.default_rng(n)
    with ranks(parts, 5.0, n) as workers:
        ranges = workers[0].split(SIZE)
        for _ in range(2):
            arrays = [(rng.standard_normal(SIZE) * 10 ** rng.uniform(-3, 3, SIZE)).astype(np.float32)
                      for _ in range(n)]
            results = on_ranks(workers, lambda w, xs=arrays: w.allreduce(xs[w.rank]))
            check(results, arrays, ranges, parts)
            lo, hi = ranges[0]
            mid = lo + (hi - lo + 1) // 2
            for direction, (a, b) in enumerate(((lo, mid), (mid, hi))):
                expected = reduce_sum([x[a:b].copy() for x in arrays], torus.layout(direction), np.float32)
                assert results[0][a:b].tobytes() == expected.tobytes(), direction
        ints = [rng.integers(-2**20, 2**20, SIZE, dtype=np.int32) for _ in range(n)]
        check(on_ranks(workers, lambda w: w.allreduce(ints[w.rank])), ints, ranges, parts)
        for w in workers:  # forward: the successor at each level on its interface 1 / 3; backward: 0 / 2
            for direction, firsts in enumerate(((1, 3), (0, 2))):
                layout = torus.layout(direction)
                to = {s.getpeername()[0] for s in w._rings[(0, direction)].connections()}
                assert to == {interface(layout.peers(w.rank, level)[0], firsts[level], 0).rpartition(":")[0]
                              for level in range(2)}
        assert set(workers[0].last_parts) == {"part 1/2 (torus, forward)", "part 1/2 (torus, backward)",
                                              "part 2/2 (ring, forward)", "part 2/2 (ring, backward)"}


def test_a_closed_torus_fails_every_rank_naming_the_part() -> None:
    timeout = 3.0
    parts = torus_and_ring((4, 2), free_port())
    with ranks(parts, timeout, 8) as workers:
        x = np.arange(1000, dtype=np.int32)
        assert all((r == 8 * x).all() for r in on_ranks(workers, lambda w: w.allreduce(x)))  # connected
        workers[5]._rings[(0, 1)].close()  # rank 5's backward ring of rings dies
        began = time.monotonic()
        errors = on_ranks(workers, lambda w: w.allreduce(x))
        took = time.monotonic() - began
        for r, e in enumerate(errors):
            assert isinstance(e, DirectAllreduceError), (r, e)
            assert set(e.failures) == {"part 1/2 (torus, backward)"} and "part 1/2 (torus, backward)" in str(e), e
        assert took < timeout, f"the failure took {took:.1f} s to reach every rank"


def test_a_torus_part_that_is_not_well_formed_is_refused_naming_it() -> None:
    torus, ring = torus_and_ring((4, 2), 5000)
    cases = [
        (dataclasses.replace(torus, levels=(3, 2)), r"part 1/2: a torus's levels .* product is 8, not \[3, 2\]"),
        (dataclasses.replace(torus, levels=(8, 1)), r"not \[8, 1\]"),
        (dataclasses.replace(torus, order=(0,) * 8), "order must hold the workers 0..7 once each"),
        (dataclasses.replace(torus, forward=torus.forward[:1]), "forward and backward give each level's 8"),
        (dataclasses.replace(torus, backward=(torus.backward[0], torus.forward[0])),
         r"worker 0 listens on .* not one twice"),
        (dataclasses.replace(torus, forward=(("nowhere",) * 8, torus.forward[1])),
         r"forward\[0\]\[0\] = 'nowhere' is not ip:port"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            check_parts([bad, ring])
    text = parts_to_json([torus, ring]).replace('"levels": [\n        4,', '"levels": [\n        5,')
    with pytest.raises(ValueError, match=r"plan.json: part 1/2: a torus's levels"):
        parts_from_json(text, "plan.json")
