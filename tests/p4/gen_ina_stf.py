"""Write the STF vectors for p4src/ina.p4 (tests/p4/ina_*.stf and their .p4 wrappers).

Why this script exists: the vectors must be checkable on real BMv2 as well as on our
built-in target, so their expected bytes must not come from our executor.  Here every
packet is built with scapy (Ether/IPv4/UDP and the INA layer of worker/scapy_ina.py, whose
fields are read from p4src/protocol.p4), and every expected sum comes from a small reference
model written from docs/protocol.md: int64 prefix sums wrapped to int32, OVERFLOW when a
prefix leaves the int32 range, the max of the int8 exponents.  What the switch does to the
outer headers is mirrored from p4src/ina.p4: egress rewrites MACs, IPs and the UDP
destination port from InaEgress.receivers, the IPv4 checksum is recomputed, the UDP
checksum is set to 0, and the source port, IP id and TTL are those of the packet that
triggered the output.  Plain IPv4 forwarding rewrites the MACs and decrements the TTL.

Run ``python tests/p4/gen_ina_stf.py`` to rewrite the files; tests/test_stf.py runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw, raw

from worker import protocol
from worker.scapy_ina import INA

HERE = Path(__file__).resolve().parent
P = protocol.load()  # wire constants (message types, flags, UDP port) from p4src/protocol.p4
I32 = np.iinfo(np.int32)
WORKER_SPORT = 40000  # every worker sends from this UDP port; results keep it as their source port


# ---------------------------------------------------------------------------- addresses
@dataclass(frozen=True)
class Node:
    mac: int
    ip: str


SWITCH = Node(0x0200000000FE, "10.0.0.254")  # the switch under test
PARENT = Node(0x0200000000FD, "10.0.1.254")  # its parent switch, in the leaf vector


def host(port: int) -> Node:
    """The host on switch port ``port``."""
    return Node(0x020000000010 + port - 1, f"10.0.0.{port}")


def mac_str(mac: int) -> str:
    return ":".join(f"{(mac >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def ip_hex(ip: str) -> str:
    return "0x" + "".join(f"{int(b):02x}" for b in ip.split("."))


# ---------------------------------------------------------------------------- jobs and chunks
@dataclass(frozen=True)
class Job:
    """One job's table entries at the switch: child c sits on ``ports[c]``."""

    id: int
    ports: tuple[int, ...]
    pool_base: int = 0
    pool_size: int = 8
    group: int = 5
    is_root: int = 1
    parent_port: int = 0
    index_at_parent: int = 0
    epoch: int = 1
    stats_base: int = 0
    udp_base: int = 40000  # child c receives results on udp_base + c

    def worker(self, child: int) -> Node:
        return host(self.ports[child])

    @property
    def children(self) -> range:
        return range(len(self.ports))


@dataclass(frozen=True)
class Chunk:
    """Which cell a round uses and which round it is."""

    slot: int
    set: int
    seq: int


@dataclass(frozen=True)
class Part:
    """One contribution: a child's values and header extras."""

    child: int
    values: np.ndarray
    exponent: int = 0
    flags: int = 0


@dataclass(frozen=True)
class Total:
    """What a complete cell holds: the reference model's answer."""

    values: np.ndarray
    flags: int
    exponent: int


def aggregate(parts: Sequence[Part]) -> Total:
    """Sum the parts in arrival order as docs/protocol.md specifies.

    The lanes wrap modulo 2**32; OVERFLOW is set when a running sum leaves the int32 range
    or a part (a child switch's partial) already carries it; the exponent is the max."""
    prefix = np.cumsum(np.stack([p.values for p in parts]).astype(np.int64), axis=0)
    overflow = bool(((prefix < I32.min) | (prefix > I32.max)).any())
    carried = any(p.flags & P.FLAG_OVERFLOW for p in parts)
    wrapped = ((prefix[-1] - I32.min) % (1 << 32) + I32.min).astype(np.int32)
    return Total(wrapped, P.FLAG_OVERFLOW if overflow or carried else 0, max(p.exponent for p in parts))


def lanes(v: int) -> np.ndarray:
    """0, 1, ..., v-1 as int32."""
    return np.arange(v, dtype=np.int32)


def full(v: int, x: int) -> np.ndarray:
    return np.full(v, x, dtype=np.int32)


# ---------------------------------------------------------------------------- frames
def frame(src: Node, dst: Node, sport: int, dport: int, payload: Packet | bytes, udp_checksum: bool = True) -> bytes:
    """Ether/IPv4/UDP around ``payload``; the UDP checksum is scapy's, or 0 when not wanted."""
    udp = UDP(sport=sport, dport=dport) if udp_checksum else UDP(sport=sport, dport=dport, chksum=0)
    return raw(Ether(dst=mac_str(dst.mac), src=mac_str(src.mac)) / IP(src=src.ip, dst=dst.ip, id=1, ttl=64)
               / udp / payload)


def ina(job: int, child: int, chunk: Chunk, values: np.ndarray, msg_type: int, flags: int = 0,
        exponent: int = 0) -> Packet:
    """The INA header and its int32 lanes, big-endian."""
    return (INA(msg_type=msg_type, flags=flags, job_id=job, child=child, set=chunk.set, slot=chunk.slot,
                seq=chunk.seq, exponent=exponent)
            / Raw(np.asarray(values, dtype=">i4").tobytes()))


# ---------------------------------------------------------------------------- STF text
class Vector:
    """One .stf file (and its .p4 wrapper), built line by line."""

    def __init__(self, name: str, about: str, values: int = 64, udp_checksum_in: bool = True,
                 program: str = "ina.p4") -> None:
        self.name = name
        self.program = program  # the p4src/ program the wrapper includes
        self.v = values
        self.udp_checksum_in = udp_checksum_in  # do the packets we send carry a real UDP checksum?
        self.lines = [f"# {line}".rstrip() for line in about.strip().splitlines()]
        self.lines.append("# Generated by tests/p4/gen_ina_stf.py (scapy + a numpy reference model, not our"
                          " executor): do not edit.")
        self.nodes = 0  # BMv2 numbers multicast nodes globally, in creation order

    # -- raw STF commands
    def note(self, text: str) -> None:
        self.lines += ["", *(f"# {line}" for line in text.strip().splitlines())]

    def add(self, table: str, keys: dict[str, int | str], action: str, args: dict[str, int | str]) -> None:
        k = " ".join(f"{name}:{value}" for name, value in keys.items())
        a = ", ".join(f"{name}:{value}" for name, value in args.items())
        self.lines.append(f"add {table} {k} {action}({a})")

    def multicast_group(self, group: int, replicas: Sequence[tuple[int, int]]) -> None:
        """``replicas``: (port, rid) pairs."""
        self.lines.append(f"mc_mgrp_create {group}")
        handles = range(self.nodes, self.nodes + len(replicas))
        self.nodes += len(replicas)
        self.lines += [f"mc_node_create {rid} {port}" for port, rid in replicas]
        self.lines += [f"mc_node_associate {group} {h}" for h in handles]

    def send(self, port: int, data: bytes) -> None:
        self.lines.append(f"packet {port} {data.hex()}")

    def expect(self, port: int, data: bytes) -> None:
        self.lines.append(f"expect {port} {data.hex()}$")

    # -- tables
    def member(self, job: Job, port: int, child: int) -> None:
        self.add("InaIngress.jobs", {"sm.ingress_port": port, "hdr.ina.job_id": job.id, "hdr.ina.child": child},
                 "InaIngress.member",
                 {"pool_base": job.pool_base, "pool_size": job.pool_size, "children": len(job.ports),
                  "is_root": job.is_root, "group": job.group, "parent_port": job.parent_port,
                  "index_at_parent": job.index_at_parent, "epoch": job.epoch, "stats_base": job.stats_base})

    def receiver(self, job: Job, receiver: int, dst: Node, dst_port: int) -> None:
        self.add("InaEgress.receivers", {"hdr.ina.job_id": job.id, "meta.receiver": receiver}, "InaEgress.address",
                 {"dst_mac": f"0x{dst.mac:012x}", "src_mac": f"0x{SWITCH.mac:012x}", "dst_ip": ip_hex(dst.ip),
                  "src_ip": ip_hex(SWITCH.ip), "dst_port": dst_port})

    def install(self, job: Job) -> None:
        """A job's children: jobs entries, their addresses, and the multicast group (rid = child)."""
        for c in job.children:
            self.member(job, job.ports[c], c)
        for c in job.children:
            self.receiver(job, c, job.worker(c), job.udp_base + c)
        self.multicast_group(job.group, [(job.ports[c], c) for c in job.children])

    def route(self, prefix: str, length: int, port: int, dst_mac: int, src_mac: int) -> None:
        self.add("InaIngress.ipv4_routes", {"hdr.ipv4.dst": f"{ip_hex(prefix)}/{length}"}, "InaIngress.forward",
                 {"port": port, "dst_mac": f"0x{dst_mac:012x}", "src_mac": f"0x{src_mac:012x}"})

    # -- aggregation packets
    def contribute(self, job: Job, chunk: Chunk, part: Part, msg_type: int = P.MSG_DATA,
                   port: int | None = None, job_id: int | None = None, values: np.ndarray | None = None) -> None:
        """A worker's DATA packet (the keyword arguments make bad ones)."""
        body = ina(job.id if job_id is None else job_id, part.child, chunk,
                   part.values if values is None else values, msg_type, part.flags, part.exponent)
        sender = job.ports[part.child] if port is None else port
        self.send(sender, frame(host(sender), SWITCH, WORKER_SPORT, P.INA_UDP_PORT, body, self.udp_checksum_in))

    def expect_result(self, job: Job, chunk: Chunk, total: Total, to: Sequence[int] | None = None,
                      retransmit: bool = False, sport: int = WORKER_SPORT) -> None:
        """RESULT copies, each addressed to its child (all children unless ``to``)."""
        flags = total.flags | (P.FLAG_RETRANSMIT if retransmit else 0)
        for c in job.children if to is None else to:
            body = ina(job.id, c, chunk, total.values, P.MSG_RESULT, flags, total.exponent)
            self.expect(job.ports[c], frame(SWITCH, job.worker(c), sport, job.udp_base + c, body, False))

    def expect_partial(self, job: Job, chunk: Chunk, total: Total, retransmit: bool = False) -> None:
        """The partial sum going up: DATA, child = the switch's index at its parent."""
        flags = total.flags | (P.FLAG_RETRANSMIT if retransmit else 0)
        body = ina(job.id, job.index_at_parent, chunk, total.values, P.MSG_DATA, flags, total.exponent)
        self.expect(job.parent_port, frame(SWITCH, PARENT, WORKER_SPORT, P.INA_UDP_PORT, body, False))

    def round(self, job: Job, chunk: Chunk, parts: Sequence[Part], notes: Sequence[str] = ()) -> Total:
        """Every part in order; the last completes the cell and the result goes to every child."""
        notes = list(notes) or ["absorbed until the last child arrives"] * (len(parts) - 1) + ["completes the slot"]
        for part, text in zip(parts, notes):
            self.note(f"child {part.child} (port {job.ports[part.child]}), seq {chunk.seq}: {text}")
            self.contribute(job, chunk, part)
        total = aggregate(parts)
        self.expect_result(job, chunk, total)
        return total

    # -- files
    def wrapper(self) -> str:
        return (f"/* {self.program} with INA_VALUES = {self.v}, for the STF vectors beside it"
                f" (generated by gen_ina_stf.py). */\n#define INA_VALUES {self.v}\n"
                f"#include \"../../p4src/{self.program}\"\n")

    def write(self, directory: Path) -> None:
        (directory / f"{self.name}.stf").write_text("\n".join(self.lines) + "\n")
        (directory / f"{self.name}.p4").write_text(self.wrapper())


# ---------------------------------------------------------------------------- the vectors
def two_workers(v: int) -> Vector:
    name = "ina_two_workers" if v == 64 else f"ina_two_workers_v{v}"
    # The V = 64 file predates this script: its packets carry a zero UDP checksum, kept byte for byte.
    vec = Vector(name, f"""
Two workers of job 7 on a root switch, V = {v}: contributions to slot 3, set 1, seq 5;
a duplicate is absorbed, completion multicasts the sum addressed to each worker, and a
repeat after completion is answered to its sender only, with RETRANSMIT.""", v, udp_checksum_in=v != 64)
    job = Job(7, (1, 2))
    chunk = Chunk(slot=3, set=1, seq=5)
    parts = [Part(0, lanes(v) - 20), Part(1, full(v, 1000), exponent=-1)]
    vec.install(job)
    vec.note("first contribution: absorbed")
    vec.contribute(job, chunk, parts[0])
    vec.note("the same again: a duplicate, absorbed and not counted twice")
    vec.contribute(job, chunk, parts[0])
    vec.note("the second child completes the slot: the sum goes to both, addressed to each")
    vec.contribute(job, chunk, parts[1])
    total = aggregate(parts)
    vec.expect_result(job, chunk, total)
    vec.note("a retransmission after completion: the result back to the sender only, RETRANSMIT set")
    vec.contribute(job, chunk, parts[1])
    vec.expect_result(job, chunk, total, to=[1], retransmit=True)
    return vec


def three_children() -> Vector:
    vec = Vector("ina_three_children", """
Three children of job 7 on a root switch, on ports 3, 1, 2 (child 0 on port 3), arriving
in the order 1, 2, 0.  Child c sends lane i = i << 8*(2-c), so every lane of the sum reads
0x00iiiiii.  Completion multicasts RESULT to the three ports, each copy with its own
child index, MACs, IPs and UDP port (receivers table), UDP checksum 0.""")
    job = Job(7, (3, 1, 2))
    vec.install(job)
    parts = [Part(c, lanes(64) << 8 * (2 - c)) for c in (1, 2, 0)]
    vec.round(job, Chunk(slot=2, set=0, seq=3), parts)
    return vec


def two_jobs() -> Vector:
    vec = Vector("ina_two_jobs", """
Two jobs interleaved on one switch, with the same slot, set, seq and epoch but disjoint
pools: job 7 owns slots [0, 4) on ports 1, 2 (group 5); job 9 owns [4, 8) with three
children on ports 3, 2, 1 (group 6), results to UDP 41000 + child.  Both use slot 1,
set 0, seq 5; if pool_base were ignored they would share a cell and mix their sums.
Job 7's lanes sum to 0x000700ii, job 9's to 0x000901ii.""")
    a = Job(7, (1, 2), pool_base=0, pool_size=4, group=5)
    b = Job(9, (3, 2, 1), pool_base=4, pool_size=4, group=6, stats_base=P.JOB_STAT_COUNT, udp_base=41000)
    vec.install(a)
    vec.install(b)
    chunk = Chunk(slot=1, set=0, seq=5)
    pa = [Part(0, lanes(64)), Part(1, full(64, 0x70000))]
    pb = [Part(0, lanes(64)), Part(1, full(64, 0x90000)), Part(2, full(64, 0x100))]
    for job, part, text in [(a, pa[0], "absorbed"), (b, pb[0], "absorbed"), (b, pb[1], "absorbed"),
                            (a, pa[1], "completes job 7's slot: job 7's sum to its two children")]:
        vec.note(f"job {job.id}, child {part.child} (port {job.ports[part.child]}): {text}")
        vec.contribute(job, chunk, part)
    vec.expect_result(a, chunk, aggregate(pa))
    vec.note("job 9, child 2 (port 1): completes job 9's slot: its own sum to its three children")
    vec.contribute(b, chunk, pb[2])
    vec.expect_result(b, chunk, aggregate(pb))
    return vec


def bad_packets() -> Vector:
    vec = Vector("ina_bad_packets", """
Bad aggregation packets are dropped without touching slot state.  Job 7 (ports 1, 2) owns
slots [0, 4); job 9 (ports 3, 4) owns [4, 8), with the same epoch.  Every bad packet aims
at job 7's round slot 0, set 1, seq 4 (or, for the bad slot, at slot 4, which would be job
9's slot 0) and carries lanes 0x0BAD0000.  Had any of them been counted, a child's bit
would be set or a lane changed, and the valid rounds at the end would come out early,
late, or with 0x0BAD in their sums.""")
    a = Job(7, (1, 2), pool_size=4)
    b = Job(9, (3, 4), pool_base=4, pool_size=4, group=6, stats_base=P.JOB_STAT_COUNT)
    vec.install(a)
    vec.install(b)
    chunk = Chunk(slot=0, set=1, seq=4)
    bad = Part(0, full(64, 0x0BAD0000))
    wrong_child = replace(bad, child=1)
    cases: list[tuple[str, Chunk, Part, dict]] = [  # (what, chunk, part, how contribute() spoils it)
        ("slot 4 >= pool_size 4: dropped (else it would land in job 9's slot 0, set 1)",
         replace(chunk, slot=4), bad, {}),
        ("unknown job 8: dropped", chunk, bad, {"job_id": 8}),
        ("job 7 but child 1 from port 1 (child 0's port): dropped", chunk, wrong_child, {"port": 1}),
        ("truncated: 63 values instead of 64 (IP and UDP lengths match): dropped", chunk, bad,
         {"values": bad.values[:-1]}),
        ("msg_type RESULT from a child: dropped", chunk, bad, {"msg_type": P.MSG_RESULT}),
    ]
    for text, where, part, spoil in cases:
        vec.note(text)
        vec.contribute(a, where, part, **spoil)
    vec.round(a, chunk, [Part(0, lanes(64)), Part(1, full(64, 0x1000))],
              ["a valid round on the same cell: absorbed",
               "completes with the sum of the valid contributions only (0x000010ii)"])
    vec.round(b, Chunk(slot=0, set=1, seq=4), [Part(0, full(64, 0x9000)), Part(1, lanes(64))],
              ["job 9's slot 0, set 1, seq 4: absorbed (nothing was written here by the bad slot)",
               "completes with 0x000090ii"])
    return vec


def overflow() -> Vector:
    vec = Vector("ina_overflow", """
Overflow.  Job 7, two children on ports 1, 2, pool of 4 slots; chunk p uses slot p mod 4,
set (p div 4) mod 2, seq p.  ina.p4 stores and sends the WRAPPING sum and sets
FLAG_OVERFLOW (0x01) when the wrapping and the saturating sums differ; so do the
expected packets (lanes: MAX+1 -> MIN, MIN-1 -> MAX, MAX+MAX -> -2, and the in-range
MAX+MIN = -1, MAX-1+1 = MAX, MIN+1-1 = MIN; the rest 3+4 = 7).  A retransmission gets the
flag with RETRANSMIT (0x03); the cell's next round starts clean.  An OVERFLOW flag that a
child switch's partial carries reaches the result, whether it comes first or last.""")
    job = Job(7, (1, 2), pool_size=4)
    vec.install(job)
    first, second = full(64, 3), full(64, 4)
    first[:6] = [I32.max, I32.min, I32.max, I32.max, I32.max - 1, I32.min + 1]
    second[:6] = [1, -1, I32.max, I32.min, 1, -1]
    chunk = Chunk(slot=1, set=0, seq=1)
    parts = [Part(0, first), Part(1, second)]
    total = vec.round(job, chunk, parts, ["lanes 0..5 at the int32 limits: absorbed",
                                          "completes: three lanes overflow, the result has OVERFLOW"])
    vec.note("child 1 retransmits: the stored (wrapped) sum back to it, flags OVERFLOW | RETRANSMIT")
    vec.contribute(job, chunk, replace(parts[1], flags=P.FLAG_RETRANSMIT))
    vec.expect_result(job, chunk, total, to=[1], retransmit=True)
    small = [Part(0, lanes(64)), Part(1, full(64, 100))]
    vec.round(job, Chunk(slot=2, set=0, seq=2), [replace(small[0], flags=P.FLAG_OVERFLOW), small[1]],
              ["(a child switch's partial that overflowed) carries OVERFLOW and opens the round",
               "completes: the lanes are in range, the result still carries OVERFLOW"])
    vec.round(job, Chunk(slot=3, set=0, seq=3), [small[0], replace(small[1], flags=P.FLAG_OVERFLOW)],
              ["in range, no flag: absorbed", "carries OVERFLOW and completes: the result carries it"])
    vec.round(job, Chunk(slot=1, set=0, seq=9), small,
              ["chunk 9 reuses chunk 1's cell (slot 1, set 0): absorbed",
               "completes with flags 0: the cell's OVERFLOW did not outlive its round"])
    return vec


def exponent() -> Vector:
    vec = Vector("ina_exponent", """
Exponents.  Job 7, three children on ports 1, 2, 3 (lanes c + 1, sum 6).  The result
carries the max of the contributions' int8 exponents, compared as signed numbers:
-5, 3, -1 gives 3 (an unsigned max would give 0xff = -1), and -7, -2, -9 gives -2
(a max that started from 0 would give 0).""")
    job = Job(7, (1, 2, 3))
    vec.install(job)
    for chunk, exps in [(Chunk(slot=0, set=0, seq=1), (-5, 3, -1)), (Chunk(slot=1, set=0, seq=2), (-7, -2, -9))]:
        parts = [Part(c, full(64, c + 1), exponent=e) for c, e in enumerate(exps)]
        vec.round(job, chunk, parts, [f"exponent {e}" for e in exps[:-1]]
                  + [f"exponent {exps[-1]}, completes: the result has exponent {max(exps)}"])
    return vec


def slot_reuse() -> Vector:
    vec = Vector("ina_slot_reuse", """
Slot reuse.  Job 7, two children on ports 1, 2, a window of 8 slots: chunk p uses slot
p mod 8, set (p div 8) mod 2, seq p.  Slot 5 serves chunks 5, 13, 21, 29 on sets 0, 1, 0, 1;
each round's lanes sum to seq << 16 | lane.  A child's first copy may carry RETRANSMIT
(its earlier copy was lost): it counts like any other.  While chunk 29 is open, late
duplicates of chunk 13 (in chunk 29's cell) and of chunk 5 (in chunk 21's) are stale and
dropped: had they opened a round, chunk 29 would never complete, and child 1, whose
result of chunk 21 was lost, would get no answer to its retransmission.""")
    job = Job(7, (1, 2))
    vec.install(job)

    def parts(seq: int) -> list[Part]:
        return [Part(0, full(64, seq << 16)), Part(1, lanes(64))]

    def chunk(seq: int) -> Chunk:
        return Chunk(slot=seq % 8, set=(seq // 8) % 2, seq=seq)

    vec.round(job, chunk(5), parts(5))
    p13 = parts(13)
    vec.round(job, chunk(13), [replace(p13[1], flags=P.FLAG_RETRANSMIT), p13[0]],
              ["RETRANSMIT set (its first copy was lost): counted, absorbed", "completes, flags 0"])
    total21 = vec.round(job, chunk(21), parts(21))
    p29 = parts(29)
    vec.note("child 0 (port 1), seq 29 on slot 5, set 1: absorbed")
    vec.contribute(job, chunk(29), p29[0])
    vec.note("a late copy of chunk 13 from child 1 (same cell, older seq): stale, dropped")
    vec.contribute(job, chunk(13), p13[1])
    vec.note("a late retransmission of chunk 5 from child 0 (set 0 now holds chunk 21): stale, dropped")
    vec.contribute(job, chunk(5), replace(parts(5)[0], flags=P.FLAG_RETRANSMIT))
    vec.note("child 1 lost the result of chunk 21 and retransmits: the stored result, to it only")
    vec.contribute(job, chunk(21), replace(parts(21)[1], flags=P.FLAG_RETRANSMIT))
    vec.expect_result(job, chunk(21), total21, to=[1], retransmit=True)
    vec.note("child 1 (port 2), seq 29: completes with chunk 29's sum")
    vec.contribute(job, chunk(29), p29[1])
    vec.expect_result(job, chunk(29), aggregate(p29))
    return vec


def leaf() -> Vector:
    vec = Vector("ina_leaf", f"""
A leaf (non-root) switch.  Job 7 has two children on ports 1, 2 here, is_root = 0, its
parent on port 9 where this switch is child 3.  The partial goes up as DATA with child 3,
addressed by the receivers entry for RECEIVER_PARENT (0xff) to the parent's MAC, IP and
UDP port {P.INA_UDP_PORT}; a worker's retransmission to the complete slot re-sends it
with RETRANSMIT, for the first child to repeat (and a child repeating a second time): the
others' first repeats are absorbed.  The parent's RESULT, admitted on port 9 by a
result_from_parent entry (which names the cell), is kept in the cell and multicast to the
children unchanged but for each copy's addresses and child; from then on a repeat is answered
here, and a recovery's repeat (FLAG_RECOVER) sends the result up to the parent as RESULT.""")
    job = Job(7, (1, 2), pool_size=4, is_root=0, parent_port=9, index_at_parent=3)
    vec.install(job)
    _result_from_parent(vec, job)
    vec.receiver(job, P.RECEIVER_PARENT, PARENT, P.INA_UDP_PORT)
    chunk = Chunk(slot=3, set=1, seq=7)
    parts = [Part(0, lanes(64) - 32, exponent=-2), Part(1, full(64, 0x5000), exponent=-4)]
    vec.note("child 0 (port 1): absorbed")
    vec.contribute(job, chunk, parts[0])
    vec.note("child 1 (port 2) completes the slot: one DATA packet up, child 3, the partial sum 0x5000 + i - 32")
    vec.contribute(job, chunk, parts[1])
    partial = aggregate(parts)
    vec.expect_partial(job, chunk, partial)
    vec.note("child 0 retransmits: the stored partial goes up again, RETRANSMIT set")
    vec.contribute(job, chunk, replace(parts[0], flags=P.FLAG_RETRANSMIT))
    vec.expect_partial(job, chunk, partial, retransmit=True)
    vec.note("child 1 retransmits: absorbed (child 0 asked first; its answer comes down to both)")
    vec.contribute(job, chunk, replace(parts[1], flags=P.FLAG_RETRANSMIT))
    vec.note("child 1 retransmits again: its second repeat goes up")
    vec.contribute(job, chunk, replace(parts[1], flags=P.FLAG_RETRANSMIT))
    vec.expect_partial(job, chunk, partial, retransmit=True)
    other = Part(3, full(64, 0x30000), exponent=1)  # the other leaf's partial, summed at the parent
    result = aggregate([Part(3, partial.values, exponent=partial.exponent), other])

    def from_parent(msg_type: int) -> bytes:
        body = ina(job.id, job.index_at_parent, chunk, result.values, msg_type, result.flags, result.exponent)
        return frame(PARENT, SWITCH, P.INA_UDP_PORT, P.INA_UDP_PORT, body)

    vec.note("a DATA packet on the parent's port (not a result): dropped")
    vec.send(job.parent_port, from_parent(P.MSG_DATA))
    vec.note("the parent's RESULT (child 3, lanes 0x35000 + i - 32, exponent 1): multicast to both children")
    vec.send(job.parent_port, from_parent(P.MSG_RESULT))
    vec.expect_result(job, chunk, result, sport=P.INA_UDP_PORT)
    vec.note("child 1 retransmits: the kept result, to it only, RETRANSMIT set")
    vec.contribute(job, chunk, replace(parts[1], flags=P.FLAG_RETRANSMIT))
    vec.expect_result(job, chunk, result, to=[1], retransmit=True)
    vec.note("the parent's RESULT again (another child of the parent asked): down to both children again")
    vec.send(job.parent_port, from_parent(P.MSG_RESULT))
    vec.expect_result(job, chunk, result, sport=P.INA_UDP_PORT)
    vec.note("child 0's recovery copy (RETRANSMIT | RECOVER): the kept result goes up as RESULT, child 3")
    recover = P.FLAG_RETRANSMIT | P.FLAG_RECOVER
    vec.contribute(job, chunk, replace(parts[0], flags=recover))
    body = ina(job.id, job.index_at_parent, chunk, result.values, P.MSG_RESULT, result.flags | recover,
               result.exponent)
    vec.expect(job.parent_port, frame(SWITCH, PARENT, WORKER_SPORT, P.INA_UDP_PORT, body, False))
    vec.note("a child's RESULT without RECOVER: refused (bad type)")
    vec.contribute(job, chunk, replace(parts[0], flags=P.FLAG_RETRANSMIT), msg_type=P.MSG_RESULT)
    return vec


def ipv4() -> Vector:
    vec = Vector("ina_ipv4", """
Plain IPv4 forwarding through InaIngress.ipv4_routes (LPM): 10.1.0.0/16 -> port 5 and
10.1.2.0/24 -> port 6, no default route.  A forwarded packet gets the route's MACs, TTL - 1
and a recomputed IPv4 checksum; the rest (transport checksums included) is unchanged.
No route, TTL <= 1, IPv4 options, non-IPv4, and an aggregation packet for no job are dropped.""")
    routes = {5: (0x0A0B0C0D0E0F, 0x020000000099), 6: (0x0A0B0C0D0E10, 0x02000000009A)}
    vec.route("10.1.0.0", 16, 5, *routes[5])
    vec.route("10.1.2.0", 24, 6, *routes[6])
    src = host(3)
    eth = Ether(dst=mac_str(SWITCH.mac), src=mac_str(src.mac))

    def forwarded(data: bytes, port: int) -> bytes:
        pkt = Ether(data)
        pkt[Ether].dst, pkt[Ether].src = (mac_str(m) for m in routes[port])
        pkt[IP].ttl -= 1
        del pkt[IP].chksum
        return raw(pkt)

    cases: list[tuple[str, Packet, int | None]] = [
        ("TCP to 10.1.9.9, TTL 17: the /16, port 5, TTL 16",
         IP(src=src.ip, dst="10.1.9.9", ttl=17) / TCP(sport=1234, dport=80) / Raw(b"hello, world" * 3), 5),
        ("UDP to 10.1.2.3, TTL 64: the longer /24 wins, port 6, TTL 63",
         IP(src=src.ip, dst="10.1.2.3") / UDP(sport=5353, dport=53) / Raw(b"q" * 30), 6),
        ("UDP to 10.1.2.200, TTL 2: forwarded with TTL 1",
         IP(src=src.ip, dst="10.1.2.200", ttl=2) / UDP(sport=7, dport=7) / Raw(b"e" * 30), 6),
        ("TTL 1: dropped", IP(src=src.ip, dst="10.1.9.9", ttl=1) / UDP(sport=7, dport=7) / Raw(b"e" * 30), None),
        ("TTL 0: dropped", IP(src=src.ip, dst="10.1.9.9", ttl=0) / UDP(sport=7, dport=7) / Raw(b"e" * 30), None),
        ("10.2.0.1: no route, dropped", IP(src=src.ip, dst="10.2.0.1") / TCP() / Raw(b"x" * 30), None),
        ("IPv4 options (ihl 6): dropped, the checksum update covers 20 bytes only",
         IP(src=src.ip, dst="10.1.9.9", options=[IPOption_NOP()] * 4) / UDP(sport=7, dport=7) / Raw(b"o" * 30), None),
        ("an aggregation packet (UDP to the INA port) for no job, to a routed address: dropped, not routed",
         IP(src=src.ip, dst="10.1.9.9") / UDP(sport=WORKER_SPORT, dport=P.INA_UDP_PORT)
         / ina(7, 0, Chunk(0, 0, 1), lanes(64), P.MSG_DATA), None),
    ]
    for text, pkt, port in cases:
        vec.note(text)
        data = raw(eth / pkt)
        vec.send(3, data)
        if port is not None:
            vec.expect(port, forwarded(data, port))
    vec.note("ARP (not IPv4): dropped")
    vec.send(3, raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=mac_str(src.mac))
                    / ARP(hwsrc=mac_str(src.mac), psrc=src.ip, hwdst="00:00:00:00:00:00", pdst=SWITCH.ip)))
    return vec


def meeting() -> Vector:
    vec = Vector("nic_meeting", """
p4src/nic.p4: a meeting root.  Job 9 has three children here: the other end of its meeting circuit
(child 0, port 9, whose own index for us is 3: our parent port and index_at_parent) and two hosts
(children 1 and 2, ports 1 and 2).  The meetings entry names the peer (0) and a second multicast group
(5 | 0x8000) that holds it too.  Our half (every child but the peer in) goes to the peer as DATA, child 3;
a completion by the peer's half multicasts to the hosts only; a completion by a host after the peer's half
came first sends the total to the peer too, as a RESULT; a repeat while our half waits goes to the peer
again, RETRANSMIT set; the peer's RESULT is kept and multicast to the hosts.""", program="nic.p4")
    job = Job(9, (9, 1, 2), pool_size=4, is_root=1, parent_port=9, index_at_parent=3)
    _meeting_entries(vec, job)

    def from_peer(chunk: Chunk, child: int, values: np.ndarray, msg_type: int, flags: int = 0,
                  exponent: int = 0) -> None:
        vec.send(9, frame(PARENT, SWITCH, P.INA_UDP_PORT, P.INA_UDP_PORT,
                          ina(job.id, child, chunk, values, msg_type, flags, exponent)))

    hosts = [Part(1, lanes(64) * 3, exponent=-1), Part(2, full(64, -7), exponent=2)]
    peer_half = Part(0, full(64, 0x100), exponent=1)
    for chunk, text in ((Chunk(0, 0, 1), "ours first"), (Chunk(1, 0, 2), "the peer's first")):
        half, total = aggregate(hosts), aggregate([*hosts, peer_half] if text == "ours first" else [peer_half, *hosts])
        vec.note(f"seq {chunk.seq}, {text}")
        if text == "ours first":
            vec.contribute(job, chunk, hosts[0])
            vec.note("the last host: our half to the peer (DATA, child 3)")
            vec.contribute(job, chunk, hosts[1])
            vec.expect_partial(job, chunk, half)
            vec.note("the peer's half completes the slot: the total to the hosts only")
            from_peer(chunk, 0, peer_half.values, P.MSG_DATA, exponent=peer_half.exponent)
            vec.expect_result(job, chunk, total, to=[1, 2], sport=P.INA_UDP_PORT)
            vec.note("a host repeats: the total back to it, RETRANSMIT set")
            vec.contribute(job, chunk, replace(hosts[0], flags=P.FLAG_RETRANSMIT))
            vec.expect_result(job, chunk, total, to=[1], retransmit=True)
        else:
            from_peer(chunk, 0, peer_half.values, P.MSG_DATA, exponent=peer_half.exponent)
            vec.note("every child but one in, the peer among them: absorbed, no half sent")
            vec.contribute(job, chunk, hosts[0])
            vec.note("the last host completes the slot: the total to the hosts and, as a RESULT, to the peer")
            vec.contribute(job, chunk, hosts[1])
            vec.expect_result(job, chunk, total, to=[1, 2])
            vec.expect(9, frame(SWITCH, PARENT, WORKER_SPORT, P.INA_UDP_PORT,
                                ina(job.id, 0, chunk, total.values, P.MSG_RESULT, total.flags, total.exponent),
                                False))
    chunk = Chunk(2, 1, 3)
    vec.note("seq 3: our half to the peer, lost on the way")
    vec.contribute(job, chunk, hosts[0])
    vec.contribute(job, chunk, hosts[1])
    half = aggregate(hosts)
    vec.expect_partial(job, chunk, half)
    vec.note("a host repeats while our half waits: the half to the peer again, RETRANSMIT set")
    vec.contribute(job, chunk, replace(hosts[1], flags=P.FLAG_RETRANSMIT))
    vec.expect_partial(job, chunk, half, retransmit=True)
    vec.note("the peer's RESULT (child 3: our index there): kept, and multicast to the hosts")
    total = aggregate([*hosts, peer_half])
    from_peer(chunk, 3, total.values, P.MSG_RESULT, total.flags, total.exponent)
    vec.expect_result(job, chunk, total, to=[1, 2], sport=P.INA_UDP_PORT)
    return vec


def _result_from_parent(vec: Vector, job: Job) -> None:
    """The jobs entry that admits the parent's RESULT on ``job.parent_port`` (as our index there) into the cell."""
    vec.add("InaIngress.jobs", {"sm.ingress_port": job.parent_port, "hdr.ina.job_id": job.id,
                                "hdr.ina.child": job.index_at_parent},
            "InaIngress.result_from_parent",
            {"pool_base": job.pool_base, "pool_size": job.pool_size, "children": len(job.ports), "epoch": job.epoch,
             "group": job.group, "stats_base": job.stats_base})


def _meeting_entries(vec: Vector, job: Job) -> None:
    """A meeting root's entries: its children (the peer, child 0, among them), their receivers and the parent's,
    the hosts' multicast group and the one with the peer, the meetings entry, and the peer's RESULT admitted."""
    for c in job.children:
        vec.member(job, job.ports[c], c)
    vec.receiver(job, 0, PARENT, P.INA_UDP_PORT)
    for c in (1, 2):
        vec.receiver(job, c, job.worker(c), job.udp_base + c)
    vec.receiver(job, P.RECEIVER_PARENT, PARENT, P.INA_UDP_PORT)
    vec.multicast_group(job.group, [(1, 1), (2, 2)])
    vec.multicast_group(job.group | 0x8000, [(9, 0), (1, 1), (2, 2)])
    vec.add("InaIngress.meetings", {"hdr.ina.job_id": job.id}, "InaIngress.meet",
            {"peer": 0, "group_with_peer": job.group | 0x8000})
    _result_from_parent(vec, job)


VECTORS: list[Callable[[], Vector]] = [
    lambda: two_workers(64), three_children, two_jobs, bad_packets, overflow, exponent, slot_reuse, leaf,
    ipv4, lambda: two_workers(256), meeting,
]


def main() -> None:
    for make in VECTORS:
        vec = make()
        vec.write(HERE)
        print(f"wrote {vec.name}.stf and {vec.name}.p4")


if __name__ == "__main__":
    main()
