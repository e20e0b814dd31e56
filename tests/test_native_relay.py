"""The native relay (worker/native/relay.c) against the reference (worker/relay.py), which tests/test_relay.py
checks against ina.p4: both take the same seeded traffic (that test's generator: contributions, repeats,
duplicates, stale rounds, the parent's results, overflowing values, refused and cut-short packets), one by one
and in batches, for plain trees and meeting ends, and must send the same bytes to the same places and keep the
same cells and counters; hosts' TreeCalls through chains of relays with loss, both relays side by side; and
where the C cannot be built (INA_NATIVE=0, no compiler), callers get the reference."""

from __future__ import annotations

import numpy as np
import pytest

from tests import test_relay
from tests.test_relay import BELOW, HALF_CHAIN, MEET_A, MEET_B, MEETING, ROOT, P, Traffic, run_hosts
from worker import native
from worker.native.relay import relay_class
from worker.relay import Output, Relay, RelayTree

needs_native = pytest.mark.skipif(not native.available(), reason="no C compiler: the native relay cannot be built")

# every index of the 32-bit bitmap, a kept result's all-ones bitmap, the last epoch
WIDE = RelayTree(9, 2, tuple((i, 10 + i) for i in range(32)), is_root=False, parent_port=99, index_at_parent=31,
                 epoch=(1 << 16) - 1)
TREES = {"plain": [ROOT, BELOW], "wide": [WIDE], "meeting_a": [MEET_A, ROOT], "meeting_b": [MEET_B]}


def native_relay(trees: list[RelayTree]) -> Relay:
    from worker.native.relay import NativeRelay

    return NativeRelay(trees, P)


def assert_same_state(ref: Relay, nat: Relay, where: object) -> None:
    for job in ref.trees:
        for name, array in vars(ref.cells[job]).items():
            assert np.array_equal(array, getattr(nat.cells[job], name)), (where, job, name)
        assert list(ref.stats.jobs[job]) == list(nat.stats.jobs[job]), (where, job)
    assert list(ref.stats.drops) == list(nat.stats.drops), where


def batches(packets: list[tuple[int, bytes]], rng: np.random.Generator):
    """The packets in windows of 1 to 40, each window's grouped by port (in order within a port), as rows a
    few bytes wider than a packet; some lengths beyond the row (read as the row) or below zero (cut short)."""
    stride = P.packet_bytes + 8
    start = 0
    while start < len(packets):
        window = packets[start:start + int(rng.integers(1, 41))]
        start += len(window)
        for port in dict.fromkeys(p for p, _ in window):
            payloads = [d for p, d in window if p == port]
            rows = np.zeros((len(payloads), stride), np.uint8)
            lengths = np.array([len(d) for d in payloads], np.int64)
            for i, d in enumerate(payloads):
                rows[i, :len(d)] = np.frombuffer(d, np.uint8)
                if len(d) == P.packet_bytes and rng.random() < 0.05:
                    lengths[i] = stride + int(rng.integers(1, 100))
                elif len(d) < P.packet_bytes and rng.random() < 0.3:
                    lengths[i] = -int(rng.integers(1, 5))
            yield port, rows, lengths


@needs_native
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("trees", list(TREES), ids=list(TREES))
def test_the_native_relay_sends_and_counts_as_the_reference(trees: str, seed: int) -> None:
    ref, nat = Relay(TREES[trees], P), native_relay(TREES[trees])
    traffic = Traffic(np.random.default_rng(seed), TREES[trees], first_seq={BELOW.job_id: (1 << 32) - 5})
    packets = [traffic.packet() for _ in range(3000)]
    outputs = 0
    for n, (port, payload) in enumerate(packets[:1000]):  # one by one
        want = ref.receive(port, payload)
        assert nat.receive(port, payload) == want, (n, port)
        assert_same_state(ref, nat, n)
        outputs += len(want)
    for n, (port, rows, lengths) in enumerate(batches(packets[1000:], np.random.default_rng(seed))):
        want, got = ref.receive_batch(port, rows, lengths), nat.receive_batch(port, rows, lengths)
        for a, b in zip(want, got):
            assert a.dtype == b.dtype and np.array_equal(a, b), (n, port)
        assert_same_state(ref, nat, ("batch", n))
        outputs += len(want.ports)
    # the traffic went where it should: results, stale rounds, refusals, overflow (see test_relay.py)
    for job in ref.trees:
        stats = ref.stats.named(job)
        assert min(stats[k] for k in ("JOB_STAT_AGGREGATED", "JOB_STAT_RETRANSMITS", "JOB_STAT_STALE",
                                      "JOB_STAT_BAD_SLOT", "JOB_STAT_BAD_TYPE")) > 5, (job, stats)
        assert trees == "wide" or stats["JOB_STAT_RESULTS"] > 10, (job, stats)
    assert ref.stats.named()["DROP_TRUNCATED"] > 5 and outputs > 500


@needs_native
def test_a_batch_bigger_than_one_calls_room_comes_out_whole() -> None:
    """More outputs than one C call has room for (ROOM): the batch takes several calls, its outputs in order."""
    from worker.native import relay as native_relay_module

    ref, nat = Relay([WIDE], P), native_relay([WIDE])
    results = [P.pack(np.full(P.values, k, np.int32), msg_type=P.MSG_RESULT, job_id=WIDE.job_id, child=31,
                      slot=k % 2, set=k // 2 % 2, seq=1 + k) for k in range(200)]  # each kept and multicast to 32
    rows = np.frombuffer(b"".join(results), np.uint8).reshape(len(results), -1)
    lengths = np.full(len(results), P.packet_bytes)
    want, got = ref.receive_batch(99, rows, lengths), nat.receive_batch(99, rows, lengths)
    assert len(got.ports) == 200 * 32 > native_relay_module.ROOM
    for a, b in zip(want, got):
        assert np.array_equal(a, b)
    assert_same_state(ref, nat, "room")


class Twin(Relay):
    """The reference relay with a native one beside it, which takes every datagram too and must agree."""

    def __init__(self, trees: list[RelayTree], protocol) -> None:
        super().__init__(trees, protocol)
        self.native = native_relay(trees)

    def receive(self, port: int, payload: bytes) -> list[Output]:
        want = super().receive(port, payload)
        assert self.native.receive(port, payload) == want
        assert_same_state(self, self.native, P.unpack(payload)[0] if len(payload) >= P.packet_bytes else payload)
        return want


@needs_native
@pytest.mark.parametrize("wiring", [HALF_CHAIN, MEETING], ids=["half_chain", "meeting"])
def test_hosts_sum_through_native_relays_as_through_the_reference(wiring, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_relay.py's hosts, each relay a Twin: TreeCalls, chains and meeting halves, losses between relays."""
    monkeypatch.setattr(test_relay, "Relay", Twin)
    trees, links = wiring
    rng = np.random.default_rng(7)
    data = {n: rng.integers(-(1 << 26), 1 << 26, 32 * P.values, dtype=np.int32) for n in trees}
    sums = run_hosts(trees, links, data, True, seed=len(links))
    expect = np.sum(list(data.values()), axis=0, dtype=np.int32)
    for got in sums.values():
        np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("side", ["reference", "native"])
def test_bad_input_is_refused_by_name_or_counted(side: str) -> None:
    if side == "native" and not native.available():
        pytest.skip(f"the native relay cannot be built here: {native.why_not()}")
    relay = Relay([ROOT], P) if side == "reference" else native_relay([ROOT])
    good = P.pack(msg_type=P.MSG_DATA, job_id=ROOT.job_id, child=1, seq=1)
    with pytest.raises(ValueError, match="rows are float32"):
        relay.receive_batch(3, np.zeros((1, P.packet_bytes), np.float32), [P.packet_bytes])
    with pytest.raises(ValueError, match="lengths are int64 of shape \\(2,\\)"):
        relay.receive_batch(3, np.zeros((1, P.packet_bytes), np.uint8), [1, 2])
    for port in (-1, 1 << 70, "3", None):  # no child's port: an unknown member, as ina.p4 counts it
        assert relay.receive(port, good) == []
    assert relay.stats.named()["DROP_UNKNOWN_MEMBER"] == 4 and not relay.cells[ROOT.job_id].bitmap.any()
    assert relay.receive(np.int64(3), good) == [] and relay.stats.named(ROOT.job_id)["JOB_STAT_AGGREGATED"] == 1
    assert relay.receive(3, b"") == [] and relay.stats.named()["DROP_TRUNCATED"] == 1
    empty = relay.receive_batch(3, np.zeros((0, 4), np.uint8), np.zeros(0, np.int64))
    assert empty.payloads.shape == (0, P.packet_bytes) and empty.outputs() == []


def test_without_the_native_core_callers_get_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INA_NATIVE", "0")
    assert relay_class() is Relay
    monkeypatch.delenv("INA_NATIVE")
    monkeypatch.setenv("CC", "/nonexistent/cc")  # no compiler: the library is built anew, and cannot be
    monkeypatch.setattr(native, "_loaded", [])
    assert relay_class() is Relay and "does not run" in native.why_not()
    with pytest.raises(RuntimeError, match="native core is not available"):
        native_relay([ROOT])


@needs_native
def test_where_the_c_builds_callers_get_the_native_relay(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.native.relay import NativeRelay

    monkeypatch.delenv("INA_NATIVE", raising=False)
    assert relay_class() is NativeRelay
