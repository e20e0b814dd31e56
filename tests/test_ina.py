"""The aggregation suite, for both programs: p4src/ina.p4 (v1model) and p4src/tofino/ina_tna.p4
(TNA) on the built-in target, with packets crafted and dissected by scapy.

Every test takes the ``program`` fixture (tests/ina_programs.py hides how each program's
switch is built and what its tables and counters are called), so each body states the
behaviour both programs must have.  Each INA_VALUES variant is compiled a few times per
module (a tree needs three switches); every test gets switches whose registers, counters,
tables and multicast groups are reset.  A program that does not load fails with its error.
"""

from __future__ import annotations

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw, raw
from scapy.utils import checksum

from p4target.executor.switch import Output
from tests.ina_programs import PROGRAMS, InaProgram
from worker import protocol
from worker.scapy_ina import INA, InaValues, ina_values

P = protocol.load()
SW_MAC = 0x02AA00000001
SW_IP = 0x0A0000FE
JOB = 7
I32 = np.iinfo(np.int32)


@pytest.fixture(scope="module", params=list(PROGRAMS))
def program(request) -> InaProgram:
    return PROGRAMS[request.param]


@pytest.fixture(scope="module", params=[64, 256], ids=["V64", "V256"])
def V(request) -> int:
    return request.param


@pytest.fixture
def sw(program, V):
    return program.switch(V)


# ---------------------------------------------------------------------------- helpers
def worker_mac(job: int, child: int) -> int:
    return 0x020000000000 | job << 8 | child


def worker_ip(job: int, child: int) -> str:
    return f"10.{job}.0.{child + 1}"


def worker_port(child: int) -> int:
    return 40000 + child


def ip_int(s: str) -> int:
    a, b, c, d = map(int, s.split("."))
    return a << 24 | b << 16 | c << 8 | d


def mac_str(m: int) -> str:
    return ":".join(f"{(m >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def add_job(program: InaProgram, sw, job: int = JOB, ports: list[int] | None = None, n: int = 2, pool_base: int = 0,
            pool_size: int = 8, group: int = 5, is_root: int = 1, parent_port: int = 0, index_at_parent: int = 0,
            epoch: int = 1, stats_base: int = 0) -> list[int]:
    """Children 0..n-1 on ``ports`` (default 1..n): job entries, receiver addresses, multicast group."""
    ports = ports or list(range(1, n + 1))
    for child, port in enumerate(ports):
        program.add_member(sw, port, job, child, [pool_base, pool_size, len(ports), is_root, group, parent_port,
                                                  index_at_parent, epoch, stats_base])
        program.add_receiver(sw, job, child, [worker_mac(job, child), SW_MAC, ip_int(worker_ip(job, child)), SW_IP,
                                              worker_port(child)])
    sw.set_multicast_group(group, [(port, child) for child, port in enumerate(ports)])
    return ports


def frame(values, job: int = JOB, child: int = 0, seq: int = 1, slot: int = 0, set: int = 0, flags: int = 0,
          exponent: int = 0, msg_type: int | None = None) -> bytes:
    msg_type = P.MSG_DATA if msg_type is None else msg_type
    vals = np.asarray(values, dtype=np.int32).astype(">i4").tobytes()
    return raw(Ether(src=mac_str(worker_mac(job, child)), dst=mac_str(SW_MAC))
               / IP(src=worker_ip(job, child), dst="10.0.0.254")
               / UDP(sport=P.INA_UDP_PORT, dport=P.INA_UDP_PORT)
               / INA(msg_type=msg_type, flags=flags, job_id=job, child=child, set=set, slot=slot, seq=seq,
                     exponent=exponent)
               / Raw(vals))


def dissect(out: Output):
    pkt = Ether(out.data)
    assert INA in pkt, pkt.summary()
    return pkt, pkt[INA], ina_values(pkt)


def ip_ok(pkt) -> bool:
    return checksum(raw(pkt[IP])[:pkt[IP].ihl * 4]) == 0


def rand_values(rng: np.random.Generator, V: int, n: int, bound: int = 1 << 24) -> np.ndarray:
    return rng.integers(-bound, bound, size=(n, V), dtype=np.int32)


def run_round(sw, ports: list[int], vals: np.ndarray, rng=None, job: int = JOB, **kw) -> list[Output]:
    """Every child sends once (in random order if rng); returns what the last packet produced."""
    order = list(range(len(ports)))
    if rng is not None:
        rng.shuffle(order)
    outs: list[Output] = []
    for i, child in enumerate(order):
        outs = sw.process(ports[child], frame(vals[child], job=job, child=child, **kw))
        if i < len(order) - 1:
            assert outs == [], f"child {child} of {order} completed early"
    return outs


def check_multicast(outs: list[Output], ports: list[int], expect: np.ndarray, job: int = JOB, flags: int = 0,
                    **fields) -> None:
    assert sorted(o.port for o in outs) == sorted(ports)
    for out in outs:
        pkt, h, v = dissect(out)
        child = ports.index(out.port)
        assert h.msg_type == P.MSG_RESULT and h.child == child and h.job_id == job and h.flags == flags
        for k, want in fields.items():
            assert getattr(h, k) == want, k
        assert pkt[Ether].dst == mac_str(worker_mac(job, child)) and pkt[Ether].src == mac_str(SW_MAC)
        assert pkt[IP].dst == worker_ip(job, child) and pkt[IP].src == "10.0.0.254"
        assert pkt[UDP].dport == worker_port(child)
        assert ip_ok(pkt)
        np.testing.assert_array_equal(v, expect)


# ---------------------------------------------------------------------------- aggregation
@pytest.mark.parametrize("n", [2, 3, 32])
def test_aggregate_n_children(program, sw, V, n):
    rng = np.random.default_rng(n)
    ports = add_job(program, sw, n=n, ports=[100 + 3 * c for c in range(n)])  # clear of Tofino's 64-71
    vals = rand_values(rng, V, n)
    outs = run_round(sw, ports, vals, rng, seq=42, slot=3, set=1)
    check_multicast(outs, ports, vals.sum(axis=0, dtype=np.int64).astype(np.int32), seq=42, slot=3, set=1)
    assert program.stats(sw)[:4] == [n, 1, 0, 0]


def test_values_layer_builds_and_dissects(program, sw, V):
    ports = add_job(program, sw)
    pkts = [Ether() / IP(src=worker_ip(JOB, c)) / UDP(sport=P.INA_UDP_PORT, dport=P.INA_UDP_PORT)
            / INA(msg_type=P.MSG_DATA, job_id=JOB, child=c, seq=1) / InaValues(values=[c - 5] * V) for c in (0, 1)]
    assert sw.process(ports[0], raw(pkts[0])) == []
    outs = sw.process(ports[1], raw(pkts[1]))
    assert len(outs) == 2
    assert Ether(outs[0].data)[InaValues].values == [-9] * V


def test_duplicates_are_not_double_counted(program, sw, V):
    rng = np.random.default_rng(1)
    ports = add_job(program, sw, n=3)
    vals = rand_values(rng, V, 3)
    assert sw.process(ports[0], frame(vals[0], child=0)) == []
    assert sw.process(ports[0], frame(vals[0], child=0)) == []  # plain duplicate
    assert sw.process(ports[0], frame(vals[0], child=0, flags=P.FLAG_RETRANSMIT)) == []  # retransmission
    assert sw.process(ports[1], frame(vals[1], child=1)) == []
    assert sw.process(ports[1], frame(vals[1], child=1)) == []
    outs = sw.process(ports[2], frame(vals[2], child=2))
    check_multicast(outs, ports, vals.sum(axis=0))
    assert program.stats(sw)[:4] == [3, 1, 3, 0]


def test_retransmission_after_completion_unicasts_to_sender(program, sw, V):
    rng = np.random.default_rng(2)
    ports = add_job(program, sw, n=3)
    vals = rand_values(rng, V, 3)
    exps = [-3, 4, 1]
    for c in range(3):
        outs = sw.process(ports[c], frame(vals[c], child=c, seq=9, slot=2, set=1, exponent=exps[c]))
    assert len(outs) == 3
    for c in (1, 0, 2, 1):
        outs = sw.process(ports[c], frame(vals[c], child=c, seq=9, slot=2, set=1, flags=P.FLAG_RETRANSMIT))
        assert [o.port for o in outs] == [ports[c]]
        pkt, h, v = dissect(outs[0])
        assert h.msg_type == P.MSG_RESULT and h.flags == P.FLAG_RETRANSMIT and h.child == c
        assert (h.seq, h.slot, h.set, h.exponent) == (9, 2, 1, 4)
        assert pkt[Ether].dst == mac_str(worker_mac(JOB, c)) and pkt[IP].dst == worker_ip(JOB, c)
        assert pkt[UDP].dport == worker_port(c) and ip_ok(pkt)
        np.testing.assert_array_equal(v, vals.sum(axis=0))
    assert program.stats(sw)[:4] == [3, 1, 4, 0]


def test_slot_reuse_many_rounds(program, sw, V):
    """50 rounds over a window of 4 slots; workers progress independently (SwitchML pacing)."""
    rng = np.random.default_rng(3)
    n, window, rounds = 3, 4, 50
    ports = add_job(program, sw, n=n, pool_size=window)
    vals = rng.integers(-(1 << 28), 1 << 28, size=(rounds, n, V), dtype=np.int32)
    expect = vals.astype(np.int64).sum(axis=1).astype(np.int32)
    nxt = [0] * n                 # next round each worker sends
    got: list[dict[int, np.ndarray]] = [{} for _ in range(n)]
    while min(nxt) < rounds:
        ready = [c for c in range(n) if nxt[c] < rounds and (nxt[c] < window or nxt[c] - window in got[c])]
        assert ready, "deadlock"
        c = int(rng.choice(ready))
        r = nxt[c]
        nxt[c] += 1
        for out in sw.process(ports[c], frame(vals[r, c], child=c, seq=r, slot=r % window, set=(r // window) % 2)):
            _, h, v = dissect(out)
            assert h.flags == 0 and h.seq not in got[h.child]
            got[h.child][h.seq] = v
    for c in range(n):
        assert sorted(got[c]) == list(range(rounds))
        for r in range(rounds):
            np.testing.assert_array_equal(got[c][r], expect[r])
    assert program.stats(sw)[:4] == [n * rounds, rounds, 0, 0]


def test_late_duplicate_after_reuse_is_stale(program, sw, V):
    rng = np.random.default_rng(4)
    ports = add_job(program, sw, n=2)
    old, mid, new = (rand_values(rng, V, 2) for _ in range(3))
    assert len(run_round(sw, ports, old, seq=1, slot=0, set=0)) == 2
    assert len(run_round(sw, ports, mid, seq=2, slot=0, set=1)) == 2
    assert sw.process(ports[0], frame(new[0], child=0, seq=3, slot=0, set=0)) == []
    # late copies of round 1 (same slot and set, older seq): from the child that has not sent round 3 yet
    # and from the one that has.
    assert sw.process(ports[1], frame(old[1], child=1, seq=1, slot=0, set=0)) == []
    assert sw.process(ports[0], frame(old[0], child=0, seq=1, slot=0, set=0, flags=P.FLAG_RETRANSMIT)) == []
    assert program.stats(sw)[P.JOB_STAT_STALE] == 2
    outs = sw.process(ports[1], frame(new[1], child=1, seq=3, slot=0, set=0))
    check_multicast(outs, ports, new.sum(axis=0), seq=3)
    assert program.stats(sw)[:4] == [6, 3, 0, 2]


def test_two_jobs_interleaved(program, V):
    sw = program.switch(V)
    rng = np.random.default_rng(5)
    pa = add_job(program, sw, job=7, ports=[1, 2], pool_base=0, pool_size=4, group=5, stats_base=0)
    pb = add_job(program, sw, job=9, ports=[3, 2, 1], pool_base=4, pool_size=4, group=6, stats_base=P.JOB_STAT_COUNT)
    for rnd in range(6):
        va, vb = rand_values(rng, V, 2), rand_values(rng, V, 3)
        slot, st = rnd % 4, (rnd // 4) % 2
        seq_a, seq_b = rnd, 1000 + rnd  # job b's seq numbers differ too
        assert sw.process(pa[0], frame(va[0], job=7, child=0, seq=seq_a, slot=slot, set=st)) == []
        assert sw.process(pb[0], frame(vb[0], job=9, child=0, seq=seq_b, slot=slot, set=st)) == []
        assert sw.process(pb[1], frame(vb[1], job=9, child=1, seq=seq_b, slot=slot, set=st)) == []
        outs_a = sw.process(pa[1], frame(va[1], job=7, child=1, seq=seq_a, slot=slot, set=st))
        outs_b = sw.process(pb[2], frame(vb[2], job=9, child=2, seq=seq_b, slot=slot, set=st))
        check_multicast(outs_a, pa, va.sum(axis=0), job=7, seq=seq_a)
        check_multicast(outs_b, pb, vb.sum(axis=0), job=9, seq=seq_b)
    assert program.stats(sw, 0)[:4] == [12, 6, 0, 0]
    assert program.stats(sw, P.JOB_STAT_COUNT)[:4] == [18, 6, 0, 0]


# ---------------------------------------------------------------------------- drops
def _bad_frames(V):
    vals = np.ones(V, dtype=np.int32)
    good = frame(vals, child=0)
    short_values = good[:-4]
    header_only = good[:len(good) - 4 * V]
    half_header = good[:len(good) - 4 * V - 8]
    return {
        # name: (port, frame, ("stat"|"drop", index))
        "bad_slot": (1, frame(vals, child=0, slot=4), ("stat", P.JOB_STAT_BAD_SLOT)),
        "huge_slot": (1, frame(vals, child=0, slot=0xFFFF), ("stat", P.JOB_STAT_BAD_SLOT)),
        "unknown_job": (1, frame(vals, job=8, child=0), ("drop", P.DROP_UNKNOWN_MEMBER)),
        "wrong_port": (2, frame(vals, child=0), ("drop", P.DROP_UNKNOWN_MEMBER)),
        "unknown_child": (1, frame(vals, child=2), ("drop", P.DROP_UNKNOWN_MEMBER)),
        "child_over_31": (1, frame(vals, child=0xC0), ("drop", P.DROP_UNKNOWN_MEMBER)),
        "msg_type_0": (1, frame(vals, child=0, msg_type=0), ("stat", P.JOB_STAT_BAD_TYPE)),
        "msg_type_garbage": (1, frame(vals, child=0, msg_type=0xA7), ("stat", P.JOB_STAT_BAD_TYPE)),
        "result_from_child": (1, frame(vals, child=0, msg_type=P.MSG_RESULT), ("stat", P.JOB_STAT_BAD_TYPE)),
        "truncated_values": (1, short_values, ("drop", P.DROP_TRUNCATED)),
        "no_values": (1, header_only, ("drop", P.DROP_TRUNCATED)),
        "truncated_header": (1, half_header, ("drop", P.DROP_TRUNCATED)),
        "empty_payload": (1, raw(Ether() / IP() / UDP(sport=1, dport=P.INA_UDP_PORT)), ("drop", P.DROP_TRUNCATED)),
    }


@pytest.mark.parametrize("case", list(_bad_frames(64)))
def test_bad_packets_dropped_and_counted(program, sw, V, case):
    ports = add_job(program, sw, n=2, pool_size=4)
    # a default route: a dropped aggregation packet must not be forwarded as plain IPv4 either
    program.add_route(sw, 0, 0, 9, 1, 2)
    rng = np.random.default_rng(6)
    first = rand_values(rng, V, 2)
    assert sw.process(ports[0], frame(first[0], child=0, seq=5)) == []  # a round in progress
    before = program.snapshot(sw)
    port, bad, (kind, index) = _bad_frames(V)[case]
    assert sw.process(port, bad) == []
    assert program.snapshot(sw) == before
    want_stats, want_drops = [0] * P.JOB_STAT_COUNT, [0] * P.DROP_REASON_COUNT
    want_stats[P.JOB_STAT_AGGREGATED] = 1
    (want_stats if kind == "stat" else want_drops)[index] += 1
    assert (program.stats(sw), program.drop_counts(sw)) == (want_stats, want_drops)
    outs = sw.process(ports[1], frame(first[1], child=1, seq=5))
    check_multicast(outs, ports, first.sum(axis=0), seq=5)
    second = rand_values(rng, V, 2)
    check_multicast(run_round(sw, ports, second, seq=6, slot=1), ports, second.sum(axis=0), seq=6)


# ---------------------------------------------------------------------------- overflow, exponent
@pytest.mark.parametrize("a,b,overflow", [
    (I32.max, 1, True),
    (I32.min, -1, True),
    (I32.max, I32.max, True),
    (I32.max - 1, 1, False),
    (I32.min + 1, -1, False),
    (I32.max, I32.min, False),
])
@pytest.mark.parametrize("where", ["first", "last"])
def test_overflow_flag(program, sw, V, a, b, overflow, where):
    """An add that leaves int32 in any lane flags the round (the TNA program adds lanes 0..31 and
    32..63 in different passes, at different indexes of its lane registers: the first and the
    last lane take different paths)."""
    ports = add_job(program, sw, n=2)
    lane = 0 if where == "first" else V - 1
    vals = np.zeros((2, V), dtype=np.int32)
    vals[:, :] = 3
    vals[0, lane], vals[1, lane] = a, b
    outs = run_round(sw, ports, vals, seq=1)
    flags = P.FLAG_OVERFLOW if overflow else 0
    expect = vals.astype(np.int64).sum(axis=0)
    if not overflow:
        check_multicast(outs, ports, expect.astype(np.int32), flags=flags)
    else:
        assert {dissect(o)[1].flags for o in outs} == {flags}
        others = np.arange(V) != lane
        np.testing.assert_array_equal(dissect(outs[0])[2][others], expect[others])
        # a retransmission answers with the flag too; the next use of the cell starts clean
        out = sw.process(ports[0], frame(vals[0], child=0, seq=1, flags=P.FLAG_RETRANSMIT))
        assert dissect(out[0])[1].flags == P.FLAG_OVERFLOW | P.FLAG_RETRANSMIT
        assert len(run_round(sw, ports, vals, seq=2, set=1)) == 2
        clean = np.ones((2, V), dtype=np.int32)
        check_multicast(run_round(sw, ports, clean, seq=3, set=0), ports, clean.sum(axis=0), seq=3)


@pytest.mark.parametrize("lane", [0, 31, 32, -1])
def test_an_absorbed_wrap_flags_the_round(program, sw, V, lane):
    """The flag is the round's, not the last packet's: the second of three contributions wraps the
    lane, the third adds cleanly, and the result still carries the flag (with the wrapped sum)."""
    ports = add_job(program, sw, n=3)
    vals = np.ones((3, V), dtype=np.int32)
    vals[:, lane] = [I32.max, 1, 0]
    outs = run_round(sw, ports, vals, seq=1)
    expect = vals.astype(np.int64).sum(axis=0)
    expect[lane] = I32.min
    check_multicast(outs, ports, expect.astype(np.int32), flags=P.FLAG_OVERFLOW)


@pytest.mark.parametrize("exps,want", [([-5, 3, -1], 3), ([-7, -2, -9], -2), ([127, -128, 0], 127), ([0, 0, 0], 0)])
def test_exponent_max(program, sw, V, exps, want):
    ports = add_job(program, sw, n=3)
    vals = np.ones((3, V), dtype=np.int32)
    for c in (2, 0, 1):
        outs = sw.process(ports[c], frame(vals[c], child=c, exponent=exps[c]))
    check_multicast(outs, ports, vals.sum(axis=0), exponent=want)


# ---------------------------------------------------------------------------- two-level tree
UP = 20  # each leaf's port towards the root; leaf i hangs off root port 1 + i
TREE = {  # leaf -> workers' ports at that leaf
    "leaf0": [1, 2, 3],
    "leaf1": [1, 2],
}


def build_tree(program: InaProgram, V: int) -> dict:
    sws = {"leaf0": program.switch(V, 0), "leaf1": program.switch(V, 1), "root": program.switch(V, 2)}
    root = sws["root"]
    for i, leaf in enumerate(TREE):
        program.add_member(root, 1 + i, JOB, i, [0, 4, len(TREE), 1, 5, 0, 0, 1, 0])
        program.add_receiver(root, JOB, i, [0x02BB00000000 + i, SW_MAC, 0x0A0100FE + i, SW_IP, P.INA_UDP_PORT])
        sw = sws[leaf]
        add_job(program, sw, ports=TREE[leaf], pool_size=4, group=5, is_root=0, parent_port=UP, index_at_parent=i)
        program.add_result_from_parent(sw, UP, JOB, i, group=5, stats_base=0, cell=(0, 4, len(TREE[leaf]), 1))
        program.add_receiver(sw, JOB, P.RECEIVER_PARENT, [0x02CC00000000, 0x02BB00000000 + i, SW_IP, 0x0A0100FE + i,
                                                          P.INA_UDP_PORT])
    root.set_multicast_group(5, [(1 + i, i) for i in range(len(TREE))])
    return sws


def wire(sws, link_drop, src: str, port: int, data: bytes, inbox: dict) -> None:
    """Deliver ``data`` into switch ``src`` and everything it causes; worker-bound frames land in inbox.

    ``link_drop(link, data)`` says whether to lose a frame on link (from, to)."""
    queue = [(src, port, data)]
    while queue:
        name, port, data = queue.pop(0)
        for out in sws[name].process(port, data):
            if name == "root":
                nxt = (f"leaf{out.port - 1}", UP)
            elif out.port == UP:
                nxt = ("root", 1 + int(name[-1]))
            else:
                nxt = (f"{name}/w{TREE[name].index(out.port)}", None)
            if link_drop((name, nxt[0]), out.data):
                continue
            if nxt[1] is None:
                inbox.setdefault(nxt[0], []).append(out.data)
            else:
                queue.append((nxt[0], nxt[1], out.data))


LOSSES = {
    "none": None,
    "worker_to_leaf": ("leaf0/w1", "leaf0"),
    "leaf_to_root": ("leaf1", "root"),
    "root_to_leaf": ("root", "leaf0"),
    "leaf_to_worker": ("leaf1", "leaf1/w0"),
}


@pytest.mark.parametrize("loss", list(LOSSES))
def test_two_level_tree_with_loss(program, V, loss):
    sws = build_tree(program, V)
    rng = np.random.default_rng(7)
    workers = [(leaf, c) for leaf in TREE for c in range(len(TREE[leaf]))]
    rounds, lost = 4, []

    def link_drop(link, data):
        if LOSSES[loss] is None or lost or link != LOSSES[loss]:
            return False
        if Ether(data)[INA].seq != 1:  # lose the first frame on that link in round 1
            return False
        lost.append(link)
        return True

    for r in range(rounds):
        vals = {w: rng.integers(-(1 << 26), 1 << 26, size=V, dtype=np.int32) for w in workers}
        expect = np.sum(list(vals.values()), axis=0)
        results: dict[str, np.ndarray] = {}
        flags = 0
        for _attempt in range(4):
            pending = [w for w in workers if f"{w[0]}/w{w[1]}" not in results]
            if not pending:
                break
            rng.shuffle(pending)
            inbox: dict[str, list[bytes]] = {}
            for leaf, c in pending:
                f = frame(vals[(leaf, c)], child=c, seq=r, slot=r % 2, set=(r // 2) % 2, flags=flags)
                if link_drop((f"{leaf}/w{c}", leaf), f):
                    continue
                wire(sws, link_drop, leaf, TREE[leaf][c], f, inbox)
            for name, frames in inbox.items():
                for data in frames:
                    pkt, h, v = dissect(Output(0, data))
                    leaf, c = name.split("/w")
                    assert h.msg_type == P.MSG_RESULT and h.seq == r and h.child == int(c)
                    assert pkt[IP].dst == worker_ip(JOB, int(c)) and ip_ok(pkt)
                    assert h.flags & P.FLAG_OVERFLOW == 0
                    results[name] = v
            flags = P.FLAG_RETRANSMIT  # a timeout: whoever has no result sends again
        assert len(results) == len(workers), (r, sorted(results))
        for v in results.values():
            np.testing.assert_array_equal(v, expect)
    assert lost == ([] if LOSSES[loss] is None else [LOSSES[loss]])
    assert program.stats(sws["root"])[P.JOB_STAT_RESULTS] == rounds


def test_a_restarted_root_gets_the_result_a_leaf_kept_from_a_recovery(V):
    """The root's result reached leaf0 (which kept it) but not leaf1; then the root restarts, empty.  The
    workers' recovery copies (RETRANSMIT | RECOVER) make leaf0 send its kept result up, the root keeps it
    and multicasts it, and leaf1's workers get the exact sum (leaf0's partial sum is gone from its lanes)."""
    program = PROGRAMS["v1model"]  # the TNA program keeps no results (p4src/tofino/README.md)
    sws = build_tree(program, V)
    rng = np.random.default_rng(11)
    workers = [(leaf, c) for leaf in TREE for c in range(len(TREE[leaf]))]
    vals = {w: rng.integers(-(1 << 26), 1 << 26, size=V, dtype=np.int32) for w in workers}
    expect = np.sum(list(vals.values()), axis=0)
    inbox: dict[str, list[bytes]] = {}

    def send_all(flags: int, drop) -> None:
        for leaf, c in workers:
            f = frame(vals[(leaf, c)], child=c, seq=1, slot=1, set=0, flags=flags)
            wire(sws, drop, leaf, TREE[leaf][c], f, inbox)

    send_all(0, lambda link, data: link == ("root", "leaf1"))  # the result to leaf1 is lost
    assert sorted(inbox) == ["leaf0/w0", "leaf0/w1", "leaf0/w2"]
    root = sws["root"]
    for r in root.registers.values():
        r.reset()  # the root restarts with every register at zero
    inbox.clear()
    repeats = program.stats(root)[P.JOB_STAT_RETRANSMITS]
    send_all(P.FLAG_RETRANSMIT | P.FLAG_RECOVER, lambda link, data: False)
    got = {name: dissect(Output(0, data)) for name, frames in inbox.items() for data in frames}
    assert {"leaf1/w0", "leaf1/w1"} <= set(got)
    for name, (_pkt, h, v) in got.items():
        assert h.msg_type == P.MSG_RESULT and h.seq == 1, name
        np.testing.assert_array_equal(v, expect)
    # every worker's copy raised its leaf's result to the root: the first was kept, the other four answered,
    # and all five count as repeats there
    assert program.stats(root)[P.JOB_STAT_RETRANSMITS] - repeats == len(workers)


# ---------------------------------------------------------------------------- plain IPv4
def test_ipv4_forwarding(program, sw):
    program.add_route(sw, ip_int("10.1.0.0"), 16, 5, 0x0A0B0C0D0E0F, 0x020000000099)
    program.add_route(sw, ip_int("10.1.2.0"), 24, 6, 0x0A0B0C0D0E10, 0x02000000009A)
    eth = Ether(src="02:00:00:00:00:01", dst="02:aa:00:00:00:01")
    cases = [
        (IP(src="10.9.0.1", dst="10.1.9.9", ttl=17) / TCP(dport=80) / Raw(b"hello"), 5, "0a:0b:0c:0d:0e:0f",
         "02:00:00:00:00:99"),
        (IP(src="10.9.0.1", dst="10.1.2.3", ttl=17) / UDP(sport=1, dport=53) / Raw(b"q" * 30), 6,
         "0a:0b:0c:0d:0e:10", "02:00:00:00:00:9a"),
    ]
    for ip, port, dst, src in cases:
        pkt = Ether(raw(eth / ip))
        outs = sw.process(3, raw(pkt))
        assert [o.port for o in outs] == [port]
        got = Ether(outs[0].data)
        assert got[Ether].dst == dst and got[Ether].src == src
        assert got[IP].ttl == 16 and ip_ok(got)
        assert raw(got[IP].payload) == raw(pkt[IP].payload)
        assert raw(got[IP])[:8] == raw(pkt[IP])[:8] and raw(got[IP])[12:20] == raw(pkt[IP])[12:20]
    assert sw.process(3, raw(Ether() / IP(dst="10.2.0.1") / TCP())) == []  # no route
    assert sw.process(3, raw(Ether() / ARP())) == []  # not IPv4
    assert program.drop_counts(sw) == [0] * P.DROP_REASON_COUNT


def test_new_epoch_starts_slots_afresh(program, sw, V):
    """A job restarted with a new epoch may reuse low seq numbers on cells that hold higher ones."""
    ports = add_job(program, sw, n=2, epoch=1)
    ones = np.ones((2, V), dtype=np.int32)
    assert len(run_round(sw, ports, ones * 3, seq=100)) == 2
    assert sw.process(ports[0], frame(ones[0], child=0, seq=1)) == []  # same epoch: stale
    assert program.stats(sw)[P.JOB_STAT_STALE] == 1
    program.clear_jobs(sw)
    add_job(program, sw, n=2, epoch=2)
    check_multicast(run_round(sw, ports, ones * 5, seq=1), ports, np.full(V, 10), seq=1)


def test_tree_propagates_leaf_overflow(program, V):
    """A leaf whose partial sum overflowed must make the final result carry FLAG_OVERFLOW (the root ORs
    in the flag of every partial it receives, the first one included)."""
    sws = build_tree(program, V)
    vals = {("leaf0", 0): I32.max, ("leaf0", 1): 1, ("leaf0", 2): 0, ("leaf1", 0): 0, ("leaf1", 1): 0}
    inbox: dict[str, list[bytes]] = {}
    for (leaf, c), x in vals.items():
        wire(sws, lambda link, data: False, leaf, TREE[leaf][c], frame(np.full(V, x), child=c, seq=1), inbox)
    assert len(inbox) == 5
    for frames in inbox.values():
        assert dissect(Output(0, frames[0]))[1].flags & P.FLAG_OVERFLOW
