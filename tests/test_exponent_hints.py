"""Hinted exponents (docs/protocol.md, "Exponents: a window ahead, or hinted"): a float call of a size seen
before sends its first window's data at the exponents the last call of that size agreed, from the first packet
on, every later chunk at the exponent agreed a window ahead (carried in the packets before it), and redoes the
first-window chunks whose hint the result shows wrong.  Several workers' trees, of both cores, against a switch that
sums as ina.p4 does (the max exponent, OVERFLOW when a lane leaves int32, repeats answered or absorbed), with
loss."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from worker import calls, engine, native, protocol, quantize
from worker.jobspec import JobSpec, Member, TreeSpec

VALUES, RTT = 64, 10e-6
CORES = [engine] + ([native] if native.available() else [])


class Switch:
    """One switch summing the DATA of ``workers`` children per seq; each result goes back to every child a
    round trip after the round completes, a repeat of a complete round to its sender.  ``loss``: the share of
    contributions and of results to each child lost (seeded)."""

    def __init__(self, P: protocol.Protocol, workers: int, loss: float = 0.0, seed: int = 0) -> None:
        self.P, self.workers, self.loss = P, workers, loss
        self.rng = np.random.default_rng(seed)
        self.rounds: dict[int, dict] = {}
        self.arrivals: list[tuple[float, int, int, bytes]] = []  # (time, order, child, result)
        self.order = 0
        self.seq_at, self.exp_at, self.flags_at = (P.field_at(f)[0] for f in ("seq", "exponent", "flags"))
        self.flip = P.pack_headers(1, msg_type=P.MSG_DATA ^ P.MSG_RESULT)[0]

    def _answer(self, now: float, child: int, result: bytes) -> None:
        if self.rng.random() >= self.loss:
            heapq.heappush(self.arrivals, (now + RTT, self.order, child, result))
            self.order += 1

    def send(self, now: float, child: int, row: np.ndarray) -> None:
        if self.rng.random() < self.loss:
            return
        H = self.P.header_bytes
        seq = int.from_bytes(row[self.seq_at:self.seq_at + 4].tobytes(), "big")
        cell = self.rounds.setdefault(seq, {"from": set(), "sum": np.zeros(self.P.values, np.int64),
                                            "exponent": quantize.EXPONENT_NONE, "result": None})
        if cell["result"] is not None:
            self._answer(now, child, cell["result"])
            return
        if child in cell["from"]:
            return  # absorbed: the round is not complete
        cell["from"].add(child)
        cell["sum"] += row[H:].view(">i4")
        cell["exponent"] = max(cell["exponent"], int(np.int8(row[self.exp_at])))
        if len(cell["from"]) < self.workers:
            return
        result = row.copy()
        result[:H] ^= self.flip
        result[self.flags_at] &= ~(self.P.FLAG_RETRANSMIT | self.P.FLAG_RECOVER) & 0xFF
        wide = cell["sum"]
        if (wide < np.iinfo(np.int32).min).any() or (wide > np.iinfo(np.int32).max).any():
            result[self.flags_at] |= self.P.FLAG_OVERFLOW
        result[H:].view(">i4")[:] = wide.astype(np.int32)  # wraps, as the lanes do
        result[self.exp_at] = np.uint8(np.int8(cell["exponent"]))
        cell["result"] = result.tobytes()
        for c in range(self.workers):
            self._answer(now, c, cell["result"])


def _spec(window: int) -> JobSpec:
    member = Member(0, "h1", "10.0.0.1", "s1", "10.0.0.254", "02:00:00:00:fe:01")
    return JobSpec("j", VALUES, protocol.load(VALUES).INA_UDP_PORT, window, (member,),
                   (TreeSpec(1, "s1", 1.0, 100.0, 16385, (0,)),))


def _trees(core, workers: int, window: int) -> list:
    P = protocol.load(VALUES)
    return [core.Tree(engine.TreeConfig("s1", 1, i, workers, window, P, 1.0), f"tree {i}") for i in range(workers)]


def _allreduce(trees: list, arrays: list[np.ndarray], window: int, loss: float = 0.0, seed: int = 0,
               at: float = 1.0) -> tuple[list[np.ndarray], list, int, float]:
    """One call on every worker's tree: (each worker's sums, each worker's TreeCall, steps with results, the
    time taken), the datagrams each worker sent checked to be the same packets (headers but the child)."""
    P = trees[0].config.protocol
    core = engine if isinstance(trees[0], engine.Tree) else native
    switch = Switch(P, len(trees), loss, seed)
    outs, parts = [], []
    for tree, a in zip(trees, arrays):
        padded, exponents = calls.prepare(a, VALUES)
        out = np.full_like(padded, np.nan)
        _, got = calls.tree_parts(_spec(window), [tree], padded, exponents, False, out, 1.0)
        outs.append(out)
        parts.append(got[0][1])
    now, rounds = at, 0
    while not all(c.complete for c in parts):
        wake = np.inf
        for i, call in enumerate(parts):
            if call.complete:
                continue
            out = core.step([call], (), now)
            wake = min(wake, out.wake)
            for _, rows in out.datagrams:
                for row in rows:
                    switch.send(now, i, row)
        nxt = min(wake, switch.arrivals[0][0] if switch.arrivals else np.inf)
        assert nxt < np.inf, "nothing left to happen"
        now = max(now, nxt)
        batch: dict[int, list[bytes]] = {}
        while switch.arrivals and switch.arrivals[0][0] <= now:
            _, _, child, result = heapq.heappop(switch.arrivals)
            batch.setdefault(child, []).append(result)
        for child, results in batch.items():
            rows = np.frombuffer(b"".join(results), np.uint8).reshape(len(results), -1).copy()
            parts[child].receive(rows, np.full(len(rows), P.packet_bytes), now)
        rounds += bool(batch)
        assert rounds < 10_000
    return [o[:a.size] for o, a in zip(outs, arrays)], parts, rounds, now - at


def _data(workers: int, size: int, seed: int) -> list[np.ndarray]:
    """Values in (-1, 1): every chunk's max exponent is 0 (a magnitude in [0.5, 1) is all but certain)."""
    return [np.random.default_rng(seed + i).uniform(-1, 1, size).astype(np.float32) for i in range(workers)]


def _within_bound(sums: list[np.ndarray], arrays: list[np.ndarray]) -> None:
    exact = np.sum([a.astype(np.float64) for a in arrays], axis=0)
    bound = quantize.elementwise_bound(arrays, VALUES)
    for s in sums:
        assert np.array_equal(s, sums[0])  # every worker the same bits
        assert (np.abs(s - exact) <= bound + np.abs(exact) * 2.0 ** -23).all()


@pytest.mark.parametrize("core", CORES)
def test_a_repeated_size_sends_its_data_at_once_one_round_trip_per_chunk(core) -> None:
    workers, window, size = 4, 16, VALUES * 8  # 8 chunks, within the window
    trees = _trees(core, workers, window)
    first = _data(workers, size, 1)
    sums, parts, rounds, took = _allreduce(trees, first, window)
    assert parts[0].total == 16 and rounds == 2  # the exponent window, then the data: two round trips
    _within_bound(sums, first)
    second = _data(workers, size, 100)  # new values, the same exponents (normal values of 4 workers)
    sums, parts, rounds, took = _allreduce(trees, second, window, at=2.0)
    assert parts[0].total == 8 and parts[0].redos == 0 and rounds == 1 and took == pytest.approx(RTT)
    assert all(t.stats.packets_sent == 16 + 8 for t in trees)
    _within_bound(sums, second)
    fresh, _, _, _ = _allreduce(_trees(core, workers, window), second, window)  # no hint: the exponent window
    assert np.array_equal(sums[0], fresh[0])  # a hint that holds gives today's bits
    assert trees[0].hints.hits == trees[0].hints.chunks == 0  # learnt once the next call looks
    _allreduce(trees, second, window, at=3.0)
    assert trees[0].hints.hits == trees[0].hints.chunks == 8


@pytest.mark.parametrize("core", CORES)
def test_a_wrong_hint_is_redone_at_the_agreed_exponent_and_the_sum_keeps_the_bound(core) -> None:
    """10 chunks on a window of 4: only the first window goes at its hints, the rest at exponents agreed a
    window ahead.  In the first window a chunk that grew (by 2**3), one that shrank (a hint too large: redone,
    so the bound stays today's), one that shrank below float32's scales (2**-110: quantized through float64) go
    again; a later chunk that grew, and one that grew on one worker alone, are not (their exponents came a
    window ahead); one that turned to zeros is taken (any scale sums zeros exactly)."""
    workers, window, size = 3, 4, VALUES * 10
    trees = _trees(core, workers, window)
    first = _data(workers, size, 7)
    _, parts, _, _ = _allreduce(trees, first, window)
    assert parts[0].total == 14  # the first call of a size: 10 chunks, 4 exponent packets
    scale = np.ones(10, np.float32)
    scale[[1, 6]], scale[2], scale[8], scale[3] = 2.0 ** 3, 2.0 ** -2, 0.0, 2.0 ** -110
    second = [a * np.repeat(scale, VALUES) for a in _data(workers, size, 70)]
    second[0][9 * VALUES] = 3.0  # one worker's value alone: chunk 9's max exponent grows by two
    sums, parts, _, _ = _allreduce(trees, second, window, at=2.0)
    assert parts[0].redo[:parts[0].redos].tolist() == [1, 2, 3] and parts[0].total == 13
    _within_bound(sums, second)
    assert (sums[0][8 * VALUES:9 * VALUES] == 0).all()
    fresh, _, _, _ = _allreduce(_trees(core, workers, window), second, window)
    assert np.array_equal(sums[0], fresh[0])  # accepted or redone, the bits of the exponent window's call
    assert _allreduce(trees, second, window, at=3.0)[1][0].total == 10  # hints that hold: no redo


@pytest.mark.parametrize("core", CORES)
def test_a_large_repeated_call_sends_no_exponent_only_packet_and_misses_only_in_its_first_window(core) -> None:
    """Gradients whose chunks' exponents move at random from call to call (a hint right for few of them): 40
    chunks on a window of 4, the size's second call sends its 40 chunks and a redo for each first-window miss,
    no more, exact within the bound and the same bits as a call by the exponent window."""
    workers, window, size = 3, 4, VALUES * 40
    trees = _trees(core, workers, window)
    rng = np.random.default_rng(5)
    for k in range(3):
        moved = np.repeat(2.0 ** rng.integers(-6, 7, 40), VALUES).astype(np.float32)
        arrays = [a * moved for a in _data(workers, size, 10 * k)]
        before = trees[0].stats.packets_sent
        sums, parts, _, _ = _allreduce(trees, arrays, window, at=1.0 + k)
        call = parts[0]
        if k == 0:
            assert call.total == 44 and call.hint is None
            continue
        redone = call.redo[:call.redos].tolist()
        assert redone and all(c < window for c in redone) and call.total == 40 + len(redone)
        assert trees[0].stats.packets_sent - before == call.total  # no exponent-only packet, no retransmission
        _within_bound(sums, arrays)
        fresh, _, _, _ = _allreduce(_trees(core, workers, window), arrays, window)
        assert np.array_equal(sums[0], fresh[0])


@pytest.mark.parametrize("core", CORES)
def test_hinted_packets_lost_and_sent_again_carry_the_same_scale(core) -> None:
    workers, window, size = 4, 8, VALUES * 20
    trees = _trees(core, workers, window)
    _allreduce(trees, _data(workers, size, 3), window, loss=0.05, seed=1)  # the window: 20 chunks, more than W
    second = _data(workers, size, 30)
    second = [a * np.where(np.arange(size) // VALUES % 5 == 2, 16, 1).astype(np.float32) for a in second]
    sums, parts, _, _ = _allreduce(trees, second, window, loss=0.1, seed=2, at=3.0)
    assert parts[0].redo[:parts[0].redos].tolist() == [2, 7] and sum(t.stats.retransmissions for t in trees) > 0
    clean, _, _, _ = _allreduce(_trees(core, workers, window), second, window)
    assert all(np.array_equal(s, clean[0]) for s in sums)


def test_a_hint_table_holds_its_sizes_least_recently_used_first() -> None:
    hints = engine.Hints(sizes=2)
    for n in (1, 2, 3):
        hints.table[(n, "<f4")] = np.zeros(n, np.int8)
        while len(hints.table) > hints.sizes:
            hints.table.popitem(last=False)
    assert list(hints.table) == [(2, "<f4"), (3, "<f4")]
    assert hints.lookup(2, np.float32) is not None and hints.lookup(1, np.float32) is None
    assert hints.lookup(2, np.float64) is None  # another dtype is another size
    assert list(hints.table) == [(3, "<f4"), (2, "<f4")]  # the size looked up is the last to go


@pytest.mark.skipif(len(CORES) < 2, reason="no C compiler: the native core cannot be built")
def test_both_cores_send_and_sum_hinted_calls_alike() -> None:
    workers, window, size = 3, 4, VALUES * 9 + 5
    runs = {}
    for core in CORES:
        trees = _trees(core, workers, window)
        got = []
        for k, scale in enumerate((1.0, 1.0, 8.0, 1.0, 1.0, 1.0)):
            sums, parts, rounds, took = _allreduce(trees, [a * scale for a in _data(workers, size, k)], window,
                                                   loss=0.05, seed=k, at=1.0 + k)
            got.append((sums[0].tobytes(), parts[0].total, rounds, took))
        runs[core.__name__] = (got, [vars(t.stats) for t in trees])
    assert runs["worker.engine"] == runs["worker.native"]
