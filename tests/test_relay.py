"""The host relay (worker/relay.py) against the P4 it mirrors, and hosts summing through chains of relays.

1. Differential: p4src/ina.p4 on the built-in target and a Relay, configured alike (the RelayTree's numbers
   written as ina.p4 entries), take the same seeded random packets (contributions, repeats, duplicates, stale
   rounds, the parent's RESULTs, foreign and truncated packets, overflowing values); every output (port,
   receiver, ina header and values) and every counter must agree, packet by packet.
   The same against p4src/nic.p4 with meeting trees (its ``meetings`` table and second multicast group).
2. The meeting rules, at two relays and at two nic.p4 switches joined as meeting ends (the same datagrams
   and counters at both): both orders of the halves' completion, crossing halves, a lost half recovered by a
   child's repeat, a lost total recovered through the peer's RESULT path.
3. End to end, in pure Python: hosts whose contributions are real ``worker.engine.TreeCall``s sum through
   relays wired as ring_tree's half chain and as two meeting halves, with packets lost between relays.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from tests.ina_programs import NIC, V1MODEL, InaProgram
from worker import protocol, quantize
from worker.engine import Tree, TreeCall, TreeConfig, step
from worker.relay import Output, Relay, RelayTree

V = 64
P = protocol.load(V)
ADDRESS_PORT = 40000  # the P4 switch's receivers table writes udp dst = ADDRESS_PORT + receiver: who it was for


# ---------------------------------------------------------------------------- the P4 twin of a relay
def p4_twin(program: InaProgram, trees: list[RelayTree], instance: int = 0):
    """A switch of ``program`` with the entries that say what ``trees`` say: pool and stats bases one tree after
    the other, group 2k + 1 the children without a peer (all of them, without one), 2k + 2 with it."""
    sw = program.switch(V, instance)
    pool_base = 0
    for k, t in enumerate(trees):
        group, group_with_peer, stats_base = 2 * k + 1, 2 * k + 2, k * P.JOB_STAT_COUNT
        params = [pool_base, t.pool_size, len(t.children), int(t.is_root), group, t.parent_port or 0,
                  t.index_at_parent or 0, t.epoch, stats_base]
        for receiver in [index for index, _ in t.children] + [P.RECEIVER_PARENT]:
            program.add_receiver(sw, t.job_id, receiver, [0x02, 0x01, 0x0A000001, 0x0A000002, ADDRESS_PORT + receiver])
        for index, port in t.children:
            program.add_member(sw, port, t.job_id, index, params)
        if t.parent_port is not None:
            program.add_result_from_parent(sw, t.parent_port, t.job_id, t.index_at_parent, group, stats_base,
                                           cell=(pool_base, t.pool_size, len(t.children), t.epoch))
        sw.set_multicast_group(group, [(port, index) for index, port in t.children if index != t.peer])
        if t.peer is not None:
            program.add_meeting(sw, t.job_id, t.peer, group_with_peer)
            sw.set_multicast_group(group_with_peer, [(port, index) for index, port in t.children])
        pool_base += t.pool_size
    return sw


def frame(payload: bytes) -> bytes:
    """Ethernet / IPv4 / UDP to the aggregation port around a payload (any length: truncated ones too)."""
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0, 0x0A000009, 0x0A0000FE)
    udp = struct.pack("!HHHH", P.INA_UDP_PORT, P.INA_UDP_PORT, 8 + len(payload), 0)
    return b"\x02\x00\x00\x00\x00\xfe" + b"\x02\x00\x00\x00\x00\x09" + b"\x08\x00" + ip + udp + payload


def p4_outputs(sw, port: int, payload: bytes) -> list[Output]:
    """What the switch sends, as a relay's outputs: the receiver read back from the address it was given."""
    outs = []
    for out in sw.process(port, frame(payload)):
        (dport,) = struct.unpack_from("!H", out.data, 36)
        outs.append(Output(out.port, dport - ADDRESS_PORT, out.data[42:]))
    return outs


# ---------------------------------------------------------------------------- seeded traffic
@dataclass
class Traffic:
    """Random packets for a relay's trees: mostly contributions to a few live rounds per tree (so rounds
    complete), with repeats of earlier packets, stale rounds, the parent's results, overflowing values,
    reserved bits set, and packets a switch must refuse."""

    rng: np.random.Generator
    trees: list[RelayTree]
    first_seq: dict[int, int] = field(default_factory=dict)  # job -> seq of its first rounds (near 2**32: wraps)
    sent: list[tuple[int, bytes]] = field(default_factory=list)
    seqs: dict[tuple[int, int], int] = field(default_factory=dict)  # (job, cell) -> the live round's seq

    def values(self) -> np.ndarray:
        bound = 1 << 31 if self.rng.random() < 0.15 else 1 << 20
        return self.rng.integers(-bound, bound, V, dtype=np.int64).astype(np.int32)

    def header(self, tree: RelayTree, msg_type: int, child: int, cell: int | None = None, **fields) -> dict:
        slots = min(tree.pool_size, 2)
        cell = int(self.rng.integers(0, 2 * slots)) if cell is None else cell
        live = self.seqs.setdefault((tree.job_id, cell), self.first_seq.get(tree.job_id, 1) + cell)
        roll = self.rng.random()
        if roll < 0.08:
            live = self.seqs[(tree.job_id, cell)] = (live + 4) & 0xFFFFFFFF  # the cell's next round
        seq = (live - 4) & 0xFFFFFFFF if roll > 0.93 else live  # an earlier round's: stale
        reserved = [int(self.rng.integers(0, 1 << w)) if self.rng.random() < 0.1 else 0 for w in (7, 8, 16)]
        out = dict(msg_type=msg_type, flags=int(self.rng.choice(FLAGS)), job_id=tree.job_id, child=child,
                   slot=cell >> 1, set=cell & 1, seq=seq, exponent=int(self.rng.integers(-128, 128)),
                   reserved=reserved[0], reserved2=reserved[1], reserved3=reserved[2])
        return {**out, **fields}

    def packet(self) -> tuple[int, bytes]:
        rng, roll = self.rng, self.rng.random()
        tree = self.trees[int(rng.integers(len(self.trees)))]
        index, port = tree.children[int(rng.integers(len(tree.children)))]
        if roll < 0.2 and self.sent:  # a duplicate, or a retransmission, of a recent packet
            port, payload = self.sent[-int(rng.integers(1, min(len(self.sent), 12) + 1))]
            if rng.random() < 0.5 and len(payload) == P.packet_bytes:
                head = bytearray(payload)
                head[P.field_at("flags")[0]] |= P.FLAG_RETRANSMIT
                payload = bytes(head)
        elif roll < 0.27 and tree.parent_port is not None:  # the parent's (or the peer's) result
            port, payload = tree.parent_port, P.pack(self.values(), **self.header(tree, P.MSG_RESULT,
                                                                                   tree.index_at_parent))
        elif roll < 0.37:
            port, payload = self.refused(tree, index, port)
        else:
            payload = P.pack(self.values(), **self.header(tree, P.MSG_DATA, index))
        self.sent.append((port, payload))
        return port, payload

    def refused(self, tree: RelayTree, index: int, port: int) -> tuple[int, bytes]:
        """A packet ina.p4's ingress refuses (truncated, unknown member, bad type, bad slot)."""
        kind = int(self.rng.integers(7))
        data = self.header(tree, P.MSG_DATA, index)
        if kind == 0:
            return port, P.pack(self.values(), **data)[:int(self.rng.integers(0, P.packet_bytes))]
        if kind == 1:
            data["job_id"] = 999  # no such job
        elif kind == 2:
            data["child"] = int(self.rng.choice([index + 32, 255]))  # beyond the bitmap
        elif kind == 3:
            port += 1000  # the right child on a port it is not on
        elif kind == 4:  # a child's RESULT without FLAG_RECOVER, or a type nobody sends
            data["msg_type"] = int(self.rng.choice([0, P.MSG_RESULT, 3, 255]))
            data["flags"] &= ~P.FLAG_RECOVER
        elif kind == 5:
            data["slot"] = tree.pool_size + int(self.rng.integers(0, 3))
        elif tree.parent_port is not None:  # DATA from the parent
            port, data["child"] = tree.parent_port, tree.index_at_parent
        return port, P.pack(self.values(), **data)


FLAGS = [0, 0, 0, P.FLAG_RETRANSMIT, P.FLAG_OVERFLOW, P.FLAG_RECOVER, P.FLAG_RETRANSMIT | P.FLAG_RECOVER]

ROOT = RelayTree(7, 4, ((0, 0), (1, 3), (2, 5)), is_root=True, epoch=3)
BELOW = RelayTree(8, 3, ((0, 0), (1, 4)), is_root=False, parent_port=9, index_at_parent=2, epoch=2)


def run_twins(program: InaProgram, trees: list[RelayTree], seed: int, packets: int,
              first_seq: dict[int, int] | None = None) -> tuple[Relay, list[Output]]:
    """Both take the same packets; they must agree after every one.  Returns the relay and what it sent."""
    sw, relay = p4_twin(program, trees), Relay(trees, P)
    traffic = Traffic(np.random.default_rng(seed), trees, first_seq or {})
    everything = []
    for n in range(packets):
        port, payload = traffic.packet()
        want, got = p4_outputs(sw, port, payload), relay.receive(port, payload)
        assert got == want, (n, port, P.unpack(payload)[0] if len(payload) >= P.packet_bytes else len(payload))
        for k, t in enumerate(trees):
            assert list(relay.stats.jobs[t.job_id]) == program.stats(sw, k * P.JOB_STAT_COUNT), (n, t.job_id)
        assert list(relay.stats.drops) == program.drop_counts(sw), n
        everything += got
    return relay, everything


@pytest.mark.parametrize("seed", [1, 2])
def test_a_relay_is_ina_p4_packet_by_packet(seed: int) -> None:
    relay, outs = run_twins(V1MODEL, [ROOT, BELOW], seed, 3000, first_seq={BELOW.job_id: (1 << 32) - 5})
    # the sequence went where it should: every path of the state machine taken, and seen to agree
    for job in (ROOT.job_id, BELOW.job_id):
        stats = relay.stats.named(job)
        assert stats["JOB_STAT_RESULTS"] > 20 and stats["JOB_STAT_STALE"] > 5, stats
        assert min(stats[k] for k in ("JOB_STAT_RETRANSMITS", "JOB_STAT_BAD_SLOT", "JOB_STAT_BAD_TYPE")) > 5, stats
    assert relay.stats.named(BELOW.job_id)["JOB_STAT_FROM_PARENT"] > 50
    assert relay.stats.named()["DROP_UNKNOWN_MEMBER"] > 20 and relay.stats.named()["DROP_TRUNCATED"] > 5
    heads = [P.unpack(o.payload)[0] for o in outs]
    kinds = {(h["job_id"], h["msg_type"], o.receiver == P.RECEIVER_PARENT, o.port == 0) for h, o in zip(heads, outs)}
    assert {(7, P.MSG_RESULT, False, True), (8, P.MSG_DATA, True, False), (8, P.MSG_RESULT, True, False),
            (8, P.MSG_RESULT, False, True)} <= kinds, kinds
    assert any(h["flags"] & P.FLAG_OVERFLOW for h in heads) and any(h["flags"] & P.FLAG_RETRANSMIT for h in heads)
    assert any(h["seq"] < 5 for h in heads if h["job_id"] == 8)  # BELOW's rounds wrapped past 2**32


def test_a_relay_refuses_a_childs_result_even_a_recovery() -> None:
    """ina.p4 takes a child's RESULT with FLAG_RECOVER (this switch lost the round); a relay never loses its cells."""
    relay = Relay([ROOT], P)
    for flags in (0, P.FLAG_RECOVER, P.FLAG_RECOVER | P.FLAG_RETRANSMIT):
        assert relay.receive(3, P.pack(msg_type=P.MSG_RESULT, flags=flags, job_id=7, child=1, seq=1)) == []
    assert relay.stats.named(7)["JOB_STAT_BAD_TYPE"] == 3 and not relay.cells[7].bitmap.any()


@pytest.mark.parametrize("fields, match", [
    (dict(children=((0, 0), (0, 1))), "children: indexes"),
    (dict(children=((32, 0),)), "children: index 32"),
    (dict(children=()), "children: a tree has"),
    (dict(children=((0, -1),)), "children: port -1"),
    (dict(pool_size=0), "pool_size"),
    (dict(epoch=0), "epoch"),
    (dict(job_id=1 << 16), "job_id"),
    (dict(is_root=False), "parent_port"),
    (dict(is_root=False, parent_port=3, index_at_parent=40), "index_at_parent: 40"),
    (dict(is_root=False, parent_port=1, index_at_parent=1), "index_at_parent: results from the parent"),
    (dict(parent_port=4, index_at_parent=0), "parent_port: a root without a peer"),
    (dict(is_root=False, parent_port=1, index_at_parent=3, peer=1), "peer: only a root"),
    (dict(parent_port=1, index_at_parent=3, peer=5), "peer: 5 is not one of the children"),
    (dict(parent_port=2, index_at_parent=3, peer=1), "peer: child 1 is on port 1, not parent_port 2"),
    (dict(children=((0, 1),), parent_port=1, index_at_parent=3, peer=0), "a meeting end has the peer and"),
])
def test_a_bad_tree_is_refused_naming_its_field(fields: dict, match: str) -> None:
    base = dict(job_id=1, pool_size=4, children=((0, 0), (1, 1)), is_root=True)
    with pytest.raises(ValueError, match=match):
        RelayTree(**{**base, **fields})


def test_two_trees_of_one_job_are_refused() -> None:
    with pytest.raises(ValueError, match="job 7 has two trees"):
        Relay([ROOT, ROOT], P)


# ---------------------------------------------------------------------------- meeting ends
# Two meeting ends: A's peer B is its last child (port 2), B's peer A is its child 0 (port 2); each has its
# host (port 0) and an upstream neighbour (port 1).
MEET_A = RelayTree(5, 2, ((0, 0), (1, 1), (2, 2)), is_root=True, parent_port=2, index_at_parent=0, peer=2)
MEET_B = RelayTree(5, 2, ((0, 2), (1, 0), (2, 1)), is_root=True, parent_port=2, index_at_parent=2, peer=0)


class P4Node:
    """A switch of ``program`` with one RelayTree's entries, spoken to as a relay is (``receive`` -> Outputs)."""

    def __init__(self, program: InaProgram, tree: RelayTree, instance: int) -> None:
        self.program, self.sw = program, p4_twin(program, [tree], instance)

    def receive(self, port: int, payload: bytes) -> list[Output]:
        return p4_outputs(self.sw, port, payload)

    def job_stats(self) -> list[int]:
        return self.program.stats(self.sw, 0)


class Meeting:
    """Two nodes joined as meeting ends (relays, or ``nic``: nic.p4 switches), their circuit between them
    (port 2 to port 2), a queue on it; ``trace`` is everything they sent, in order."""

    def __init__(self, nic: bool = False) -> None:
        self.ends = {end: P4Node(NIC, tree, k) if nic else Relay([tree], P)
                     for k, (end, tree) in enumerate((("A", MEET_A), ("B", MEET_B)))}
        self.got: dict[tuple[str, int], list[tuple[int, np.ndarray]]] = {}  # (end, child) -> [(type, values)]
        self.trace: list[tuple[str, Output]] = []

    def send(self, end: str, port: int, child: int, values: np.ndarray, seq: int = 1, flags: int = 0,
             lose: int = 0) -> None:
        """A child's DATA in, and everything it causes delivered (the first ``lose`` datagrams on the circuit
        lost)."""
        queue = deque([(end, port, P.pack(values, msg_type=P.MSG_DATA, job_id=5, child=child, seq=seq, flags=flags))])
        for _ in range(100):  # a few datagrams each way: more is a loop between the ends
            if not queue:
                break
            at, port, payload = queue.popleft()
            for out in self.ends[at].receive(port, payload):
                self.trace.append((at, out))
                if out.port == 2:
                    if lose:
                        lose -= 1
                    else:
                        queue.append(("B" if at == "A" else "A", 2, out.payload))
                    continue
                head, vals = P.unpack(out.payload)
                assert head["child"] == out.receiver
                self.got.setdefault((at, out.receiver), []).append((head["msg_type"], vals))
        assert not queue, "the meeting ends send each other datagrams for ever"

    def job_stats(self) -> dict[str, list[int]]:
        return {end: node.job_stats() if isinstance(node, P4Node) else list(node.stats.jobs[5])
                for end, node in self.ends.items()}


def meet(scenario: Callable[[Meeting], None]) -> Meeting:
    """The scenario at two relays and at two nic.p4 switches: the same datagrams, in the same order, and the same
    counters.  Returns the relays' meeting."""
    relays, nics = Meeting(), Meeting(nic=True)
    scenario(relays)
    scenario(nics)
    assert [(at, o.port, o.receiver, P.unpack(o.payload)[0]) for at, o in relays.trace] == \
        [(at, o.port, o.receiver, P.unpack(o.payload)[0]) for at, o in nics.trace]
    assert relays.trace == nics.trace
    assert relays.job_stats() == nics.job_stats()
    return relays


def _half_values(rng: np.random.Generator) -> dict[tuple[str, int], np.ndarray]:
    return {k: rng.integers(-1 << 20, 1 << 20, V, dtype=np.int32) for k in (("A", 0), ("A", 1), ("B", 1), ("B", 2))}


SOURCES = {("A", 0): 0, ("A", 1): 1, ("B", 1): 0, ("B", 2): 1}  # (end, child) -> its port there


@pytest.mark.parametrize("order", [
    [("A", 0), ("A", 1), ("B", 1), ("B", 2)],  # A's half first: B completes with its own child, A gets a RESULT
    [("B", 2), ("B", 1), ("A", 1), ("A", 0)],  # B's half first
    [("A", 0), ("B", 1), ("A", 1), ("B", 2)],  # both halves cross on the circuit: each end completes with the other's
    [("B", 1), ("A", 1), ("B", 2), ("A", 0)],
])
def test_meeting_ends_give_every_child_the_total_once(order: list) -> None:
    vals = _half_values(np.random.default_rng(5))
    total = np.sum(list(vals.values()), axis=0, dtype=np.int32)

    def scenario(m: Meeting) -> None:
        for end, child in order:
            m.send(end, SOURCES[(end, child)], child, vals[(end, child)])

    meeting = meet(scenario)
    assert sorted(meeting.got) == sorted(SOURCES)
    for got in meeting.got.values():
        assert len(got) == 1 and got[0][0] == P.MSG_RESULT
        np.testing.assert_array_equal(got[0][1], total)
    for relay in meeting.ends.values():  # its half's two children, and the peer's half at most once
        assert relay.stats.named(5)["JOB_STAT_AGGREGATED"] in (2, 3)
        assert relay.stats.named(5)["JOB_STAT_RETRANSMITS"] == 0


def test_a_half_lost_on_the_circuit_goes_again_on_a_childs_repeat() -> None:
    vals = _half_values(np.random.default_rng(3))
    total = np.sum(list(vals.values()), axis=0, dtype=np.int32)

    def scenario(m: Meeting) -> None:
        m.send("A", 0, 0, vals[("A", 0)])
        m.send("A", 1, 1, vals[("A", 1)], lose=1)  # A's half (rule 1), lost
        m.send("B", 0, 1, vals[("B", 1)])
        m.send("B", 1, 2, vals[("B", 2)])  # B's half to A (rule 1): A completes with it, no copy back to B
        assert sorted(m.got) == [("A", 0), ("A", 1)]
        # B's child repeats: B's half again (rule 3); A has it, so A answers its sender, B, with the total, which
        # B keeps and passes to its children (rule 4)
        m.send("B", 1, 2, vals[("B", 2)], flags=P.FLAG_RETRANSMIT)
        assert sorted(m.got) == sorted(SOURCES) and all(len(g) == 1 for g in m.got.values())
        m.send("B", 0, 1, vals[("B", 1)], flags=P.FLAG_RETRANSMIT)  # answered from B's kept result

    meeting = meet(scenario)
    for got in meeting.got.values():
        np.testing.assert_array_equal(got[0][1], total)
    assert len(meeting.got[("B", 1)]) == 2 and len(meeting.got[("B", 2)]) == 1
    np.testing.assert_array_equal(meeting.got[("B", 1)][1][1], total)


def test_a_total_lost_on_its_way_to_the_peer_comes_on_a_childs_repeat() -> None:
    vals = _half_values(np.random.default_rng(4))
    total = np.sum(list(vals.values()), axis=0, dtype=np.int32)

    def scenario(m: Meeting) -> None:
        m.send("A", 0, 0, vals[("A", 0)])
        m.send("A", 1, 1, vals[("A", 1)])  # A's half reaches B first
        m.send("B", 0, 1, vals[("B", 1)])
        m.send("B", 1, 2, vals[("B", 2)], lose=1)  # B completes with its own: the total to A (rule 2), lost
        assert sorted(m.got) == [("B", 1), ("B", 2)]
        m.send("A", 0, 0, vals[("A", 0)], flags=P.FLAG_RETRANSMIT)  # A's half again (rule 3): B answers it

    meeting = meet(scenario)
    assert sorted(meeting.got) == sorted(SOURCES) and all(len(g) == 1 for g in meeting.got.values())
    for got in meeting.got.values():
        np.testing.assert_array_equal(got[0][1], total)
    stats = {end: relay.stats.named(5) for end, relay in meeting.ends.items()}
    assert stats["A"]["JOB_STAT_FROM_PARENT"] == 1 and stats["B"]["JOB_STAT_RETRANSMITS"] == 1


@pytest.mark.parametrize("seed", [3, 4])
def test_a_relay_is_nic_p4_packet_by_packet(seed: int) -> None:
    """Meeting ends (the peer last, and first), a root and a non-root on one NIC, random traffic as above."""
    ends = [dataclasses.replace(MEET_A, job_id=21), dataclasses.replace(MEET_B, job_id=22, pool_size=3)]
    relay, outs = run_twins(NIC, ends + [ROOT, BELOW], seed, 3000)
    heads = [(P.unpack(o.payload)[0], o) for o in outs]
    for tree in ends:  # halves went to the peer, totals to the peer, results from the peer passed down
        mine = [(h, o) for h, o in heads if h["job_id"] == tree.job_id]
        assert sum(h["msg_type"] == P.MSG_DATA and o.receiver == P.RECEIVER_PARENT for h, o in mine) > 20
        assert sum(h["msg_type"] == P.MSG_RESULT and o.receiver == tree.peer for h, o in mine) > 20
        assert relay.stats.named(tree.job_id)["JOB_STAT_FROM_PARENT"] > 20


# ---------------------------------------------------------------------------- hosts through relays, end to end
LINK_LOSS = 0.05


@dataclass
class Host:
    """A host: its relay and its own contribution, a TreeCall handing its datagrams to the relay on port 0."""

    relay: Relay
    child: int  # its call's child index at its relay
    call: TreeCall | None = None


def chain(names: list[str], job: int, W: int, peer: int | None = None, index_at_peer: int = 0
          ) -> dict[str, RelayTree]:
    """ring_tree's half chain: names[0] is the root (a meeting end, with ``peer``: the other end's index there,
    0 or last), each next host's relay a child of the one before.  Ports: 0 the host, 1 the next relay up the
    chain, 2 the one before (the parent, or the peer)."""
    trees = {}
    for k, name in enumerate(names):
        first = 1 if k == 0 and peer == 0 else 0  # the peer takes index 0: the host and the chain come after it
        children = ((first, 0),) + (((first + 1, 1),) if k + 1 < len(names) else ())
        if k == 0 and peer is None:
            trees[name] = RelayTree(job, W, children, is_root=True)
        elif k == 0:
            trees[name] = RelayTree(job, W, tuple(sorted(children + ((peer, 2),))), is_root=True, parent_port=2,
                                    index_at_parent=index_at_peer, peer=peer)
        else:
            up = next(i for i, port in trees[names[k - 1]].children if port == 1)  # our index at the one before
            trees[name] = RelayTree(job, W, children, is_root=False, parent_port=2, index_at_parent=up)
    return trees


def run_hosts(trees: dict[str, RelayTree], links: dict[tuple[str, int], tuple[str, int]], data: dict[str, np.ndarray],
              exact_ints: bool, seed: int) -> dict[str, np.ndarray]:
    """Every host's call, stepped with a hand-advanced ``now``; datagrams between relays are lost at LINK_LOSS.
    Returns each host's sums once every call completed."""
    rng = np.random.default_rng(seed)
    hosts, outs = {}, {}
    for name, tree in trees.items():
        host = hosts[name] = Host(Relay([tree], P), child=dict((p, i) for i, p in tree.children)[0])
        config = TreeConfig(f"relay of {name}", tree.job_id, host.child, len(trees), tree.pool_size, P, timeout=10.0)
        chunks = data[name].reshape(-1, V)
        outs[name] = np.empty_like(chunks)
        host.call = Tree(config).new_call(chunks, exact_ints, outs[name])
    now, tick = 0.0, 1e-4
    for _ in range(20000):
        if all(h.call.complete for h in hosts.values()):
            break
        wire: deque[tuple[str, int, bytes]] = deque()
        for name, host in hosts.items():
            for _, rows in step([host.call], (), now).datagrams:
                wire.extend((name, 0, bytes(r)) for r in rows)
        results: dict[str, list[bytes]] = {name: [] for name in hosts}
        for _ in range(100 * len(hosts) * (1 + len(wire))):  # a datagram crosses each relay a few times at most
            if not wire:
                break
            name, port, payload = wire.popleft()
            for out in hosts[name].relay.receive(port, payload):
                if out.port == 0:
                    assert out.receiver == hosts[name].child
                    results[name].append(out.payload)
                elif rng.random() >= LINK_LOSS:
                    wire.append((*links[(name, out.port)], out.payload))
        assert not wire, "relays send each other datagrams for ever"
        now += tick
        for name, got in results.items():
            if got:
                rows = np.frombuffer(b"".join(got), np.uint8).reshape(len(got), -1)
                hosts[name].call.receive(rows, np.full(len(got), P.packet_bytes), now)
    assert all(h.call.complete for h in hosts.values()), {n: h.call.finished for n, h in hosts.items()}
    lost = sum(h.relay.stats.named(trees[n].job_id)["JOB_STAT_RETRANSMITS"] for n, h in hosts.items())
    assert lost > 0, "nothing was lost: the test did not test recovery"
    return {name: out.reshape(-1) for name, out in outs.items()}


def linked(pairs: list[tuple[str, str]], meeting: tuple[str, str] | None = None) -> dict:
    """Circuits, both ways: each (child, parent)'s port 2 to the parent's port 1, and the meeting ends' ports 2."""
    ends = [((child, 2), (parent, 1)) for child, parent in pairs] + ([((meeting[0], 2), (meeting[1], 2))]
                                                                      if meeting else [])
    return {**dict(ends), **{b: a for a, b in ends}}


HALF_CHAIN = (chain([f"h{k}" for k in range(5)], 11, 4), linked([(f"h{k}", f"h{k - 1}") for k in range(1, 5)]))
MEETING = ({**chain(["a0", "a1", "a2"], 12, 4, peer=2, index_at_peer=0),
            **chain(["b0", "b1", "b2"], 12, 4, peer=0, index_at_peer=2)},
           linked([("a1", "a0"), ("a2", "a1"), ("b1", "b0"), ("b2", "b1")], meeting=("a0", "b0")))


@pytest.mark.parametrize("wiring", [HALF_CHAIN, MEETING], ids=["half_chain", "meeting"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_hosts_sum_through_relays_with_losses(wiring, dtype) -> None:
    trees, links = wiring
    rng = np.random.default_rng(len(trees))
    size = 96 * V
    if dtype == np.int32:
        data = {n: rng.integers(-(1 << 26), 1 << 26, size, dtype=np.int32) for n in trees}
    else:
        data = {n: (rng.standard_normal(size) * 10.0 ** rng.integers(-3, 3)).astype(np.float32) for n in trees}
    sums = run_hosts(trees, links, data, dtype == np.int32, seed=len(links))
    if dtype == np.int32:
        expect = np.sum(list(data.values()), axis=0, dtype=np.int32)
        for got in sums.values():
            np.testing.assert_array_equal(got, expect)
    else:
        expect = np.sum([d.astype(np.float64) for d in data.values()], axis=0)
        rounding = np.abs(expect) * np.finfo(np.float32).eps  # the final cast to float32
        bound = quantize.elementwise_bound(list(data.values()), V) + rounding
        for got in sums.values():
            assert (np.abs(got.astype(np.float64) - expect) <= bound).all()
            np.testing.assert_array_equal(got, next(iter(sums.values())))  # every host the same sums
