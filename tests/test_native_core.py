"""The native core (worker/native) against the reference (worker/engine.py): both are handed the same
datagrams at the same times, over seeded loss, duplication, reordering, foreign and cut-short datagrams,
switch restarts, a pacer and a shaped link's room, and must send the same datagrams in the same order,
name the same deadlines, write the same sums and count the same things; a seed's second call is summed
in place (into its input, a last chunk cut short apart) where its type allows."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from worker import calls, engine, native, protocol, quantize
from worker.errors import AllreduceTimeout
from worker.jobspec import JobSpec, Member, TreeSpec

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native core cannot be built")

SEEDS = 240


def _spec(values: int, window: int, trees: int) -> JobSpec:
    member = Member(0, "h1", "10.0.0.1", "s1", "10.0.0.254", "02:00:00:00:fe:01")
    return JobSpec("j", values, protocol.load(values).INA_UDP_PORT, window, (member,),
                   tuple(TreeSpec(1 + i, "s1", 1.0 / trees, 100.0, 16385 + i, (0,)) for i in range(trees)))


class Switch:
    """Answers each contribution as a job of ``workers`` would: its type turned into RESULT, the exponent the
    max of its own and another worker's (seeded: sometimes far out of float32's range), the values a
    seeded multiple, now and then flagged OVERFLOW; and the network between: loss, copies, delays."""

    def __init__(self, P: protocol.Protocol, rng: np.random.Generator, loss: float, dup: float,
                 queue_after: int | None = None) -> None:
        self.P, self.rng, self.loss, self.dup = P, rng, loss, dup
        self.queue_after, self.sent = queue_after, 0  # from then on a queue: answers take 40x as long
        self.flip = P.pack_headers(1, msg_type=P.MSG_DATA ^ P.MSG_RESULT)[0]
        self.exp_at = P.field_at("exponent")[0]
        self.flags_at = P.field_at("flags")[0]
        self.arrivals: list[tuple[float, int, int, bytes]] = []  # (time, order, tree, datagram)
        self.order = 0

    def _at(self, when: float, tree: int, datagram: bytes) -> None:
        heapq.heappush(self.arrivals, (when, self.order, tree, datagram))
        self.order += 1

    def send(self, now: float, tree: int, row: np.ndarray) -> None:
        rng, H = self.rng, self.P.header_bytes
        if rng.random() < self.loss:
            return
        result = row.copy()
        result[:H] ^= self.flip
        own = int(np.int8(result[self.exp_at]))
        other = int(rng.choice([own, own, own + 1, quantize.EXPONENT_NONE, 110, -120, own + 3]))
        result[self.exp_at] = np.uint8(np.int8(max(-128, min(127, max(own, other)))))
        if rng.random() < 0.02:
            result[self.flags_at] |= self.P.FLAG_OVERFLOW
        values = result[H:].view(">i4")
        values[:] = values * int(rng.integers(1, 3))
        self.sent += 1
        queued = 40.0 if self.queue_after is not None and self.sent > self.queue_after else 1.0
        for _ in range(2 if rng.random() < self.dup else 1):
            self._at(now + queued * float(rng.uniform(5e-6, 60e-6)), tree, result.tobytes())
        if rng.random() < 0.03:  # a foreign datagram, or one cut short
            junk = rng.integers(0, 256, int(rng.integers(1, self.P.packet_bytes + 40)), np.uint8).tobytes()
            self._at(now + float(rng.uniform(1e-6, 80e-6)), tree, junk if rng.random() < 0.5 else result.tobytes()[:H])


def _rows(datagrams: list[bytes], packet_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    slot = packet_bytes + 64
    rows = np.zeros((len(datagrams), slot), np.uint8)
    lengths = np.empty(len(datagrams), np.int64)
    for i, d in enumerate(datagrams):
        rows[i, :min(len(d), slot)] = np.frombuffer(d, np.uint8)[:slot]
        lengths[i] = len(d)
    return rows, lengths


def _scenario(seed: int) -> dict:
    """A seed's calls; in two seeds of three, three of one size: each tree's part after the first is hinted (its
    first window at the exponents the last call agreed, the rest at exponents carried a window ahead), the
    switch's random exponents making some hints wrong (redone)."""
    rng = np.random.default_rng(seed)
    dtype = [np.float32, np.float64, np.int32, np.float16][seed % 4]
    scenario = dict(values=int(rng.choice([16, 64])), window=int(rng.choice([2, 4, 8, 16])),
                    trees=int(rng.choice([1, 1, 2, 3])), dtype=dtype,
                    sizes=[int(rng.integers(1, 900)) for _ in range(2)],
                    loss=float(rng.choice([0.0, 0.01, 0.05, 0.2])), dup=float(rng.choice([0.0, 0.05])),
                    pace=rng.random() < 0.25, room=rng.random() < 0.3, restart=rng.random() < 0.3,
                    scale=float(rng.choice([1.0, 1e-30, 1e30])) if dtype in (np.float32, np.float64) else 1.0,
                    timeout=float(rng.choice([0.05, 1.0])))
    if seed % 3:
        scenario["sizes"] = [scenario["sizes"][0]] * 3
    # in one seed of four the answers slow down 40x after the first few (a queue grows behind a first round
    # trip): every packet may then go again before its result, and only copies answer (copies_answered)
    scenario["queue_after"] = int(rng.integers(1, 20)) if rng.random() < 0.25 else None
    return scenario


def _run(seed: int) -> None:
    s = _scenario(seed)
    rng = np.random.default_rng(seed + 10_000)
    P = protocol.load(s["values"])
    spec = _spec(s["values"], s["window"], s["trees"])
    sides = _sides(s, spec, P)
    switch = Switch(P, rng, s["loss"], s["dup"], s["queue_after"])
    now = 1.0
    for index, size in enumerate(s["sizes"]):
        data = (np.random.default_rng(seed * 7 + index).standard_normal(size) * s["scale"]).astype(s["dtype"]) \
            if s["dtype"] != np.int32 else np.random.default_rng(seed).integers(-1000, 1000, size).astype(np.int32)
        parts, outs, lasts = _start_call(sides, spec, data, in_place=index == 1, values=s["values"])  # 2nd: in place
        restart_at = now + float(rng.uniform(0, 300e-6)) if s["restart"] else None
        turns = 0
        while True:
            running = {k: [c for c in v if not c.complete] for k, v in parts.items()}
            idle = {k: tuple(t for t in sides[k][1] if t not in {c.tree for c in running[k]} and not t.broken)
                    for k in sides}
            if restart_at is not None and now >= restart_at:
                for _, trees in sides.values():
                    trees[0].spec_changed(1 + index, "moved")
                restart_at = None
            room = int(rng.integers(0, 12)) if s["room"] and rng.random() < 0.5 else float("inf")
            outs_step, errors = {}, {}
            for name, (core, _) in sides.items():
                try:
                    outs_step[name] = core.step(running[name], idle[name], now, room)
                except AllreduceTimeout as e:
                    errors[name] = str(e)
            assert set(errors) in (set(), set(sides)), (seed, errors)
            if errors:
                assert errors["ref"] == errors["nat"], seed
                assert all(t.broken for t in sides["nat"][1] if any(c.tree is t for c in running["nat"]))
                return
            ref, nat = outs_step["ref"], outs_step["nat"]
            assert ref.wake == nat.wake, (seed, turns, now, ref.wake, nat.wake)
            assert ref.full == nat.full, (seed, turns)
            sent_ref = [(sides["ref"][1].index(t), bytes(r)) for t, rows in ref.datagrams for r in rows]
            sent_nat = [(sides["nat"][1].index(t), bytes(r)) for t, rows in nat.datagrams for r in rows]
            assert sent_ref == sent_nat, (seed, turns, now, len(sent_ref), len(sent_nat))
            for tree, datagram in sent_ref:
                switch.send(now, tree, np.frombuffer(datagram, np.uint8))
            if not running["ref"] and (restart_at is None) and all(t.echo is None for t in sides["ref"][1]):
                break
            nxt = min(ref.wake, switch.arrivals[0][0] if switch.arrivals else float("inf"),
                      restart_at if restart_at is not None else float("inf"))
            assert nxt < float("inf"), (seed, "nothing left to happen")
            now = max(now, nxt)
            _deliver(switch, now, sides, parts, P.packet_bytes)
            turns += 1
            assert turns < 200_000, seed
        _assert_same_end(seed, sides, parts, outs, lasts)
        now += 1e-3


def _sides(s: dict, spec: JobSpec, P: protocol.Protocol) -> dict:
    """The reference core's trees and the native core's, configured alike: name -> (core, trees)."""
    sides = {}
    for name, core in (("ref", engine), ("nat", native)):
        trees = [core.Tree(engine.TreeConfig("s1", t.job_id, 0, 4, s["window"], P, s["timeout"]), f"tree {i}")
                 for i, t in enumerate(spec.trees)]
        if s["pace"]:
            calls.pace(trees, 300.0, P.frame_bytes)
        sides[name] = (core, trees)
    return sides


def _start_call(sides: dict, spec: JobSpec, data: np.ndarray, in_place: bool, values: int) -> tuple[dict, dict, dict]:
    """The call's tree parts on each side (``in_place``: summed into each side's own copy of ``data``, where it
    may be); each side's parts, output array and short last chunk (or None)."""
    exact = data.dtype == np.int32
    parts, outs, lasts = {}, {}, {}
    for name, (_, trees) in sides.items():
        if in_place and calls.summed_in_place(data):  # read and summed into each side's own copy
            outs[name], exponents = calls.prepare(data.copy(), values, in_place=True)
            padded = outs[name]
            lasts[name] = calls.last_chunk(padded, values)  # a chunk cut short goes apart
        else:
            padded, exponents = calls.prepare(data, values)
            outs[name], lasts[name] = np.full_like(padded, 7), None
        _, got = calls.tree_parts(spec, trees, padded, exponents, exact, outs[name], 1.0, lasts[name])
        parts[name] = [c for _, c in got]
    return parts, outs, lasts


def _deliver(switch: Switch, now: float, sides: dict, parts: dict, packet_bytes: int) -> None:
    """Every datagram the switch has sent back by ``now``, per tree in one batch, to both sides' calls."""
    batch: dict[int, list[bytes]] = {}
    while switch.arrivals and switch.arrivals[0][0] <= now:
        _, _, tree, datagram = heapq.heappop(switch.arrivals)
        batch.setdefault(tree, []).append(datagram)
    for tree, datagrams in batch.items():
        rows, lengths = _rows(datagrams, packet_bytes)
        for name in sides:
            call = next((c for c in parts[name] if c.tree is sides[name][1][tree]), None)
            if call is not None and not call.complete:
                call.receive(rows, lengths, now)


def _assert_same_end(seed: int, sides: dict, parts: dict, outs: dict, lasts: dict) -> None:
    """Both cores ended the call alike: the same sums, overflow flags, statistics, congestion state and kept
    results."""
    assert np.array_equal(outs["ref"], outs["nat"], equal_nan=True), seed
    assert (lasts["ref"] is None) == (lasts["nat"] is None), seed
    assert lasts["ref"] is None or np.array_equal(lasts["ref"], lasts["nat"], equal_nan=True), seed
    assert [c.overflowed for c in parts["ref"]] == [c.overflowed for c in parts["nat"]], seed
    for a, b in zip(sides["ref"][1], sides["nat"][1]):
        assert vars(a.stats) == vars(b.stats), (seed, vars(a.stats), vars(b.stats))
        fields = ("srtt", "rttvar", "cwnd", "unsampled")
        assert a.next_packet == b.next_packet, seed
        assert [getattr(a.congestion, f) for f in fields] == [getattr(b.congestion, f) for f in fields], seed
        assert np.array_equal(a.kept, b.kept), seed


@pytest.mark.parametrize("chunk", range(8))
def test_the_native_core_sends_and_sums_as_the_reference_does(chunk: int) -> None:
    for seed in range(chunk, SEEDS, 8):
        _run(seed)
