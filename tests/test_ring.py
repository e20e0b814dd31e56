"""worker/ring.py: the TCP ring allreduce baseline, on 127.0.0.1 with one thread (or process) per rank."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from worker.ring import RingError, RingWorker, parse_peer
from worker.ring_layout import Layout, reduce_sum, segments

ROOT = Path(__file__).resolve().parents[1]


def free_peers(n: int) -> list[str]:
    """Ports the kernel hands out, held together so they are distinct."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return [f"127.0.0.1:{p}" for p in ports]


def run_ring(n: int, body: Callable[[RingWorker], object], timeout: float = 5.0, delays: list[float] | None = None,
             peers: list[str] | None = None, ranks: list[int] | None = None, layouts: tuple = ()) -> list[object]:
    """Run body(worker) at each rank in its own thread; a rank's result is its return value or its exception."""
    peers = peers or free_peers(n)
    ranks = list(range(n)) if ranks is None else ranks
    results: list[object] = [None] * len(ranks)

    def run(i: int) -> None:
        try:
            time.sleep(delays[i] if delays else 0)
            with RingWorker(ranks[i], peers, timeout, layouts=layouts) as w:
                results[i] = body(w)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(ranks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=3 * timeout + 5)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return results


def inputs(n: int, count: int, dtype: str, shape: tuple[int, ...] | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng([n, count, len(dtype)])
    if dtype == "int32":  # the whole range, so sums wrap
        xs = [rng.integers(-2**31, 2**31, count, dtype=np.int32) for _ in range(n)]
    else:
        xs = [rng.uniform(-1, 1, count).astype(dtype) for _ in range(n)]
    return [x.reshape(shape) for x in xs] if shape else xs


CASES = [(c, dt) for dt in ("float16", "float32", "float64", "int32") for c in (0, 1, 4, 1000)] + \
    [(1_000_003, "float32"), (1_000_003, "int32"), (24, "float32", (4, 6))]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_allreduce_matches_numpy(n: int) -> None:
    cases = [(c if c != 4 else n - 1, *rest) for c, *rest in CASES]  # N-1 elements: some segments empty
    data = {case: inputs(n, *case) for case in cases}

    def body(w: RingWorker) -> list[tuple[np.ndarray, int]]:
        out = []
        for case in cases:  # repeated calls on one worker
            before = w.bytes_sent
            x = data[case][w.rank]
            y = w.allreduce(x)
            assert y is not x and np.array_equal(x, data[case][w.rank])  # input untouched
            out.append((y, w.bytes_sent - before))
        return out

    results = run_ring(n, body)
    for r in results:
        assert not isinstance(r, BaseException), r
    for i, case in enumerate(cases):
        xs, dt = data[case], case[1]
        ys = [res[i][0] for res in results]
        assert all(y.dtype == xs[0].dtype and y.shape == xs[0].shape for y in ys)
        assert all(np.array_equal(y, ys[0]) for y in ys)  # every rank has the same bits
        if dt == "int32":
            assert np.array_equal(ys[0], np.sum(xs, axis=0, dtype=np.int32))  # wraps like numpy int32
        else:
            tol = 1e-2 if dt == "float16" else 1e-5
            assert np.allclose(ys[0], np.sum(xs, axis=0, dtype=np.float64), rtol=tol, atol=tol)
        k = xs[0].nbytes
        sent = [res[i][1] for res in results]
        assert sum(sent) == 2 * (n - 1) * k  # each segment crosses N-1 links in each phase
        for s in sent:
            assert abs(s - 2 * (n - 1) / n * k) <= 2 * xs[0].itemsize  # up to segment rounding


@pytest.mark.parametrize("n", [1, 2, 4])
def test_wide_partial_sums_cast_once(n: int) -> None:
    """allreduce_cast: float64 partial sums, float32 gather: the float64 sum rounded once, the same bits
    everywhere, and 3(N-1)/N of the float32 tensor sent (two wide bytes per narrow one, then one)."""
    xs = [x.astype(np.float64) for x in inputs(n, 1001, "float32")]

    def body(w: RingWorker) -> tuple[np.ndarray, int]:
        y = w.allreduce_cast(xs[w.rank].copy(), np.dtype(np.float32))
        return y, w.bytes_sent

    results = run_ring(n, body)
    ys = [r[0] for r in results]
    assert all(y.dtype == np.float32 and np.array_equal(y, ys[0]) for y in ys)
    exact = np.sum(xs, axis=0)
    assert (np.abs(ys[0] - exact) <= np.abs(exact) * 2.0**-24 + n * 2.0**-53 * np.sum(np.abs(xs), axis=0)).all()
    assert sum(sent for _, sent in results) == (n - 1) * 1001 * (8 + 4)


def test_a_paced_ring_asks_the_kernel_for_that_rate() -> None:
    """The worker's rate on every connection it sends on, and a call's own rate for that call (a hybrid's
    ring part leaves the switches their share; a ring alone takes the link)."""
    def body(w: RingWorker) -> list[list[int]]:
        def rates() -> list[int]:
            return [s.getsockopt(socket.SOL_SOCKET, 47) for s in w.connections()]  # SO_MAX_PACING_RATE

        seen = [rates()]
        w.allreduce_(np.ones(10, np.float32), pacing_mbps=24.0)
        seen.append(rates())
        w.allreduce_(np.ones(10, np.float32))
        seen.append(rates())
        return seen

    peers = free_peers(2)
    results: list[object] = [None, None]

    def run(rank: int) -> None:
        with RingWorker(rank, peers, 5.0, pacing_mbps=12.0) as w:
            results[rank] = body(w)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    # 12 Mb/s in bytes per second, then 24 for one call, then 12 again
    assert results == [[[1_500_000], [3_000_000], [1_500_000]]] * 2


def test_a_ring_paced_per_level_sends_each_levels_steps_at_that_levels_rate() -> None:
    """A hybrid's ring leaves the trees their share on every link: the model gives each level of the layout
    its own rate, and each rank paces the connection of that level's peer at it."""
    n = 4
    layout = Layout("halving_doubling", (2, 2), tuple(range(n)))
    peers = free_peers(n)
    results: list[object] = [None] * n

    def run(rank: int) -> None:
        with RingWorker(rank, peers, 5.0, layouts=[layout]) as w:
            w.allreduce_(np.ones(100, np.float32), layout, pacing_mbps=(8.0, 16.0))
            results[rank] = {peer: s.getsockopt(socket.SOL_SOCKET, 47) for (_, peer), s in w._to.items()}

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for rank in range(n):  # 8 Mb/s to the level-0 peer, 16 to the level-1 peer, in bytes per second
        assert results[rank] == {layout.peers(rank, 0)[0]: 1_000_000, layout.peers(rank, 1)[0]: 2_000_000}



def test_a_ring_of_rings_on_an_address_list_per_level() -> None:
    """A torus's levels on interfaces of their own: each rank listens on one address per level (127.0.6.x,
    127.0.7.x) and reaches a level's neighbours there; the sums are ``reduce_sum``'s in that layout, a level of
    2 included (its pair sends each other on two connections)."""
    n = 6
    layout = Layout("hierarchical", (3, 2), (4, 0, 2, 5, 1, 3))
    port = int(free_peers(1)[0].rpartition(":")[2])
    peers = [[f"127.0.{6 + level}.{r + 1}:{port}" for r in range(n)] for level in range(2)]
    xs = inputs(n, 1001, "float32")

    def body(w: RingWorker) -> tuple[np.ndarray, set]:
        y = w.allreduce(xs[w.rank], layout)
        return y, {s.getpeername() for s in w.connections()}

    results = run_ring(n, body, peers=peers, layouts=(layout,))
    expected = reduce_sum([x.copy() for x in xs], layout, np.float32)
    for rank, r in enumerate(results):
        assert not isinstance(r, BaseException), r
        y, to = r
        assert y.tobytes() == expected.tobytes()
        assert to == {("127.0.6." + str(layout.peers(rank, 0)[0] + 1), port),
                      ("127.0.7." + str(layout.peers(rank, 1)[0] + 1), port)}
    with pytest.raises(ValueError, match="rank 0 listens on .* one address per level"):
        RingWorker(0, [peers[0], [peers[0][0], *peers[1][1:]]], layouts=(layout,))
    with pytest.raises(ValueError, match="every level lists every rank"):
        RingWorker(0, [peers[0], peers[1][:5]], layouts=(layout,))
    with pytest.raises(ValueError, match="has 2 levels, peers give 1"):
        RingWorker(0, peers[:1], layouts=(layout,))

def test_segments_and_peers() -> None:
    assert segments(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert segments(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert segments(0, 2) == [(0, 0), (0, 0)]
    assert parse_peer("10.0.0.1:7000") == ("10.0.0.1", 7000)
    with pytest.raises(ValueError):
        parse_peer("10.0.0.1")


def test_single_rank_and_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RING_RANK", "0")
    monkeypatch.setenv("RING_PEERS", "127.0.0.1:1")  # N=1 never touches the network
    with RingWorker.from_env() as w:
        x = np.arange(5, dtype=np.float32)
        assert np.array_equal(w.allreduce(x), x) and w.bytes_sent == 0
        with pytest.raises(TypeError):
            w.allreduce(np.arange(3, dtype=np.uint8))
        with pytest.raises(ValueError):
            w.allreduce_(np.arange(6, dtype=np.int32)[::2])
    with pytest.raises(RingError, match="closed"):
        w.allreduce(x)
    with pytest.raises(ValueError):
        RingWorker(2, ["127.0.0.1:1", "127.0.0.1:2"])


def test_peers_start_in_any_order() -> None:
    res = run_ring(4, lambda w: w.allreduce(np.full(7, w.rank + 1, np.int32)), delays=[0.4, 0.2, 0.0, 0.3])
    assert all(np.array_equal(r, np.full(7, 10)) for r in res), res


def test_setup_deadline_names_missing_peer() -> None:
    peers = free_peers(3)
    t0 = time.monotonic()
    res = run_ring(3, lambda w: None, timeout=0.5, peers=peers, ranks=[0, 1])  # rank 2 never starts
    assert time.monotonic() - t0 < 2
    assert all(isinstance(r, RingError) and "setup" in str(r) and "rank 2" in str(r) for r in res), res


def test_peer_dies_mid_allreduce() -> None:
    """Rank 1 drops its connections after its first step: the others fail fast, naming step and peer."""

    def body(w: RingWorker) -> object:
        if w.rank == 1:
            exchange = w._exchange

            def dying(*args: object, **kw: object) -> None:
                exchange(*args, **kw)
                w.close()
                raise SystemExit("rank 1 dies")

            w._exchange = dying  # type: ignore[method-assign]
        with pytest.raises(RingError) as e:
            w.allreduce(np.ones(100_000, np.float32))
        with pytest.raises(RingError, match="closed"):  # the worker stays closed afterwards
            w.allreduce(np.ones(3, np.float32))
        return e.value

    t0 = time.monotonic()
    res = run_ring(4, body, timeout=2.0)
    assert time.monotonic() - t0 < 1.5  # EOF travels round the ring; nobody waits for the deadline
    assert isinstance(res[1], SystemExit)
    for r in (res[0], res[2], res[3]):
        assert isinstance(r, RingError) and "step" in str(r) and "rank" in str(r), r
    assert "rank 1 (127.0.0.1:" in str(res[2])  # its right neighbour blames it


def test_stuck_peer_hits_deadline() -> None:
    """A peer that stays connected but never calls allreduce: the others raise once the timeout expires."""
    stuck = threading.Event()

    def body(w: RingWorker) -> object:
        if w.rank == 2:
            stuck.wait(3)
            return None
        t0 = time.monotonic()
        try:
            w.allreduce(np.ones(10, np.float64))
        except RingError as e:
            return e, time.monotonic() - t0
        finally:
            if w.rank == 0:
                stuck.set()
        return None

    res = run_ring(3, body, timeout=0.5)
    for e, elapsed in res[:2]:
        assert isinstance(e, RingError) and elapsed < 1.5, (e, elapsed)
    assert any("timed out after 0.5s" in str(e) and "rank 2" in str(e) for e, _ in res[:2]), res


def test_mismatched_calls_are_detected() -> None:
    res = run_ring(3, lambda w: pytest.raises(RingError, w.allreduce, np.ones(10 if w.rank else 12, np.float32)),
                   timeout=2.0)
    assert any("call 1 with 12 x <f4" in str(r.value) for r in res), [str(r.value) for r in res]


def test_killed_process_makes_others_raise() -> None:
    """A real crash: rank 0 is a separate process, killed with SIGKILL while the ring loops over allreduce."""
    peers = free_peers(3)
    child = subprocess.Popen([sys.executable, "-c", (
        "import numpy as np, sys; from worker.ring import RingWorker\n"
        f"w = RingWorker(0, {peers!r}, 5.0)\nprint('up', flush=True)\n"
        "while True: w.allreduce(np.ones(300_000, np.float32))")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        def body(w: RingWorker) -> object:
            t0 = time.monotonic()
            with pytest.raises(RingError) as e:
                while True:
                    w.allreduce(np.ones(300_000, np.float32))
            return e.value, time.monotonic() - t0

        killer = threading.Thread(target=lambda: (child.stdout.readline(), time.sleep(0.2), child.kill()))
        killer.start()
        res = run_ring(2, body, timeout=5.0, peers=peers, ranks=[1, 2])
        killer.join()
    finally:
        child.kill()
        child.wait()
    for e, elapsed in res:
        assert isinstance(e, RingError) and elapsed < 3, (e, elapsed)
