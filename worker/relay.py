"""A host's relay: an aggregation switch of ina.p4's semantics in the worker's protocol core (issue 58).

Where no switch or SmartNIC sums (docs/direct.md: ``ring_tree``, NIC meshes without SmartNICs) a host
adds its own part to the partial sums passing through it.  ``Relay`` is that node, and exactly ina.p4:
the same per-cell state (docs/protocol.md, "Slot state"), the same verdicts (p4src/v1model/round_check.p4),
the same sums and flags (value_lanes.p4, exponent_overflow.p4), the same destinations (send_result.p4),
the same counters (telemetry.p4), plus the meeting rules of docs/protocol.md ("Streaming relays and meeting
roots") that p4src/nic.p4 runs too.  The host's own contribution is an ordinary ``worker.engine.TreeCall``
whose datagrams the caller hands in on port 0; its results are the outputs to port 0.  So the relay never
quantizes or times anything: it sums int32 lanes and keeps an exponent, per cell.

Sans-I/O, as worker/engine.py: no clock, no socket, no thread.  ``Relay.receive(port, payload)`` takes one
UDP payload (ina header + INA_VALUES big-endian int32) and returns the ``Output``s it causes; the caller
addresses each (a neighbour's circuit, or port 0: its own TreeCall), as ina.p4's egress ``receivers`` table
does.  Bytes after the values are ignored (ina.p4 passes them through; no sender adds any).

Differences from ina.p4, on purpose: a relay never restarts, so FLAG_RECOVER's other half (a child's RESULT,
sent to a switch that lost its registers) never applies: a child's RESULT is refused as JOB_STAT_BAD_TYPE
whatever its flags.  A repeat with FLAG_RECOVER still sends a kept result up (the parent may be a device that
restarted).  There are no pool bases or stats bases (each tree has its own arrays), so DROP_BAD_ENTRY never
happens.  This is the reference the native C mirror is tested against: each step names the P4 it follows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from worker.protocol import Protocol

MAX_PORT = (1 << 16) - 1  # a relay's ports are the caller's numbers for its circuits (0: its own host)


class Output(NamedTuple):
    """One datagram a relay sends: out of ``port``, to ``receiver`` (a child index, or the protocol's
    RECEIVER_PARENT), the UDP payload ``payload`` (ina header + values)."""

    port: int
    receiver: int
    payload: bytes


class Outputs(NamedTuple):
    """A batch's outputs in order, as arrays (``Relay.receive_batch``): output j goes out of ``ports[j]`` to
    ``receivers[j]``, the UDP payload ``payloads[j]`` (one packet_bytes row)."""

    ports: np.ndarray  # (n,) int32
    receivers: np.ndarray  # (n,) int32
    payloads: np.ndarray  # (n, packet_bytes) uint8

    @classmethod
    def of(cls, outputs: list[Output], packet_bytes: int) -> Outputs:
        payloads = np.frombuffer(b"".join(o.payload for o in outputs), np.uint8).reshape(-1, packet_bytes)
        return cls(np.array([o.port for o in outputs], np.int32), np.array([o.receiver for o in outputs], np.int32),
                   payloads.copy())

    def outputs(self) -> list[Output]:
        return [Output(int(p), int(r), row.tobytes()) for p, r, row in zip(self.ports, self.receivers, self.payloads)]


def batch(rows: np.ndarray, lengths: np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray]:
    """k datagrams as ``TreeCall.receive`` takes them: a (k, stride) uint8 array, datagram i the first
    ``lengths[i]`` bytes of row i (at most the stride).  Checked, so a bad batch is refused by name."""
    rows, lengths = np.asarray(rows), np.asarray(lengths)
    if rows.dtype != np.uint8 or rows.ndim != 2:
        raise ValueError(f"Relay.receive_batch: rows are {rows.dtype} of shape {rows.shape}, not (k, stride) uint8")
    if lengths.shape != (len(rows),) or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"Relay.receive_batch: lengths are {lengths.dtype} of shape {lengths.shape}, not "
                         f"({len(rows)},) integers")
    return np.ascontiguousarray(rows), np.ascontiguousarray(lengths, np.int64)


@dataclass(frozen=True)
class RelayTree:
    """One job's tree at this relay: the numbers the controller writes as ina.p4 entries (member and
    result_from_parent in ``jobs``, the multicast group), without pool or stats bases.

    ``children``: (child index, port) pairs, in multicast order.  A non-root has a parent (``parent_port``,
    where its partial sums go, and ``index_at_parent``, its child index there).  A meeting end (``peer``, the
    child index of the other end) is a root whose parent is the peer: ``parent_port`` is the peer's port and
    ``index_at_parent`` its own child index at the peer (docs/protocol.md, "Streaming relays and meeting roots").
    """

    job_id: int
    pool_size: int
    children: tuple[tuple[int, int], ...]
    is_root: bool
    parent_port: int | None = None
    index_at_parent: int | None = None
    peer: int | None = None
    epoch: int = 1

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"RelayTree (job {self.job_id}).{name}: {why}")

        if not isinstance(self.job_id, int) or not 0 <= self.job_id < 1 << 16:
            raise ValueError(f"RelayTree.job_id: {self.job_id!r} is not a bit<16> job id")
        if not isinstance(self.pool_size, int) or not 0 < self.pool_size < 1 << 16:
            raise bad("pool_size", f"{self.pool_size!r} is not 1..65535 slots")
        if not isinstance(self.epoch, int) or not 0 < self.epoch < 1 << 16:
            raise bad("epoch", f"{self.epoch!r} is not 1..65535 (0 is the cells' empty state)")
        if not self.children:
            raise bad("children", "a tree has at least one child")
        indexes = [c[0] if isinstance(c, tuple) and len(c) == 2 else None for c in self.children]
        for child in self.children:
            if not (isinstance(child, tuple) and len(child) == 2 and all(isinstance(x, int) for x in child)):
                raise bad("children", f"{child!r} is not an (index, port) pair of ints")
            index, port = child
            if not 0 <= index < 32:
                raise bad("children", f"index {index} is not 0..31 (the slot bitmap is 32 bits)")
            if not 0 <= port <= MAX_PORT:
                raise bad("children", f"port {port} of child {index} is not 0..{MAX_PORT}")
        if len(set(indexes)) != len(indexes):
            raise bad("children", f"indexes {indexes} repeat one")
        has_parent = not self.is_root or self.peer is not None
        if has_parent:
            if not isinstance(self.parent_port, int) or not 0 <= self.parent_port <= MAX_PORT:
                raise bad("parent_port", f"{self.parent_port!r}: a non-root or meeting end needs its parent's port")
            if not isinstance(self.index_at_parent, int) or not 0 <= self.index_at_parent < 32:
                raise bad("index_at_parent", f"{self.index_at_parent!r} is not a child index 0..31")
            if (self.parent_port, self.index_at_parent) in self.children:
                raise bad("index_at_parent", f"results from the parent (port {self.parent_port}, child "
                          f"{self.index_at_parent}) would look like child {self.index_at_parent}'s DATA")
        elif self.parent_port is not None or self.index_at_parent is not None:
            raise bad("parent_port", "a root without a peer has no parent")
        if self.peer is not None:
            if not self.is_root:
                raise bad("peer", "only a root meets a peer (a meeting end is the root of its half)")
            ports = dict(self.children)
            if self.peer not in ports:
                raise bad("peer", f"{self.peer} is not one of the children {sorted(ports)}")
            if ports[self.peer] != self.parent_port:
                raise bad("peer", f"child {self.peer} is on port {ports[self.peer]}, not parent_port "
                          f"{self.parent_port}")
            if len(self.children) < 2:
                raise bad("children", "a meeting end has the peer and at least one child of its own half")

    @property
    def cells(self) -> int:
        return 2 * self.pool_size


class Cells:
    """A tree's registers, one entry per cell (slot * 2 + set): round_check.p4's, value_lanes.p4's and
    exponent_overflow.p4's, with their P4 names and widths."""

    def __init__(self, cells: int, values: int) -> None:
        self.bitmap = np.zeros(cells, np.uint32)  # children counted in this round
        self.arrivals = np.zeros(cells, np.uint8)  # how many of them
        self.round_seq = np.zeros(cells, np.uint32)
        self.round_epoch = np.zeros(cells, np.uint16)
        self.answered = np.zeros(cells, bool)  # below the root: the lanes hold the round's result
        self.asked = np.zeros(cells, np.uint32)  # below the root, complete, no result yet: who repeated
        self.flags = np.zeros(cells, np.uint8)  # round_flags: FLAG_OVERFLOW
        self.exponent = np.zeros(cells, np.int8)  # round_exponent: the max
        self.lanes = np.zeros((cells, values), np.int32)


class RelayStats:
    """Counters as telemetry.p4 keeps them (packets only): ``jobs[job_id][JOB_STAT_*]`` and
    ``drops[DROP_*]``, indexed by the protocol's constants; ``named`` spells them out."""

    def __init__(self, protocol: Protocol, job_ids: list[int]) -> None:
        self.protocol = protocol
        self.jobs = {job: np.zeros(protocol.JOB_STAT_COUNT, np.int64) for job in job_ids}
        self.drops = np.zeros(protocol.DROP_REASON_COUNT, np.int64)

    def named(self, job_id: int | None = None) -> dict[str, int]:
        """{"JOB_STAT_STALE": n, ...} for a job, or {"DROP_TRUNCATED": n, ...} without one."""
        prefix, counts = ("DROP_", self.drops) if job_id is None else ("JOB_STAT_", self.jobs[job_id])
        return {name: int(counts[v]) for name, v in self.protocol.constants.items()
                if name.startswith(prefix) and not name.endswith(("_COUNT", "_CELLS")) and v < len(counts)}


class Verdict(enum.Enum):
    """common/vocabulary.p4's verdicts that a relay reaches."""

    CHECKED = enum.auto()  # a known member's DATA packet: the round check decides
    DROP = enum.auto()
    PASS_DOWN = enum.auto()
    ANSWER = enum.auto()
    FIRST = enum.auto()
    ADD = enum.auto()
    KEEP = enum.auto()


@dataclass
class Packet:
    """One aggregation packet while a relay decides on it (ina.p4's hdr.ina, hdr.values and meta)."""

    word: int  # the header as one big-endian integer: fields not written pass through, as in ina.p4
    fields: dict[str, int]
    values: np.ndarray  # (V,) int32
    port: int
    tree: RelayTree | None = None
    cells: Cells | None = None
    from_parent: bool = False
    cell: int = 0
    verdict: Verdict = Verdict.CHECKED
    job_stat: int | None = None  # the JOB_STAT_* telemetry counts at the end (meta.count_job, meta.job_stat)
    completed: bool = False
    answered: bool = False
    raise_up: bool = False  # meta.raise: a kept result goes up (a repeat with FLAG_RECOVER)
    lane_overflow: bool = False
    to_peer: bool = False  # meeting rule 1: a contribution's sum, our half, goes to the peer as DATA


class Relay:
    """The streaming node of one host: its trees (by job id) and their cells.  ``receive`` is the one entry."""

    def __init__(self, trees: list[RelayTree] | tuple[RelayTree, ...], protocol: Protocol) -> None:
        self.P = protocol
        self.trees: dict[int, RelayTree] = {}
        for tree in trees:
            if not isinstance(tree, RelayTree):
                raise ValueError(f"Relay.trees: {tree!r} is not a RelayTree")
            if tree.job_id in self.trees:
                raise ValueError(f"Relay.trees: job {tree.job_id} has two trees (its receivers would collide)")
            self.trees[tree.job_id] = tree
        self.cells = {job: Cells(t.cells, protocol.values) for job, t in self.trees.items()}
        self.stats = RelayStats(protocol, list(self.trees))
        # ina.p4's jobs table: (port, job, child) -> (tree, from_parent)
        self.jobs: dict[tuple[int, int, int], tuple[RelayTree, bool]] = {}
        for tree in self.trees.values():
            for index, port in tree.children:
                self.jobs[(port, tree.job_id, index)] = (tree, False)
            if tree.parent_port is not None:
                self.jobs[(tree.parent_port, tree.job_id, tree.index_at_parent)] = (tree, True)

    # --- the pipeline (ina.p4's InaIngress, then its egress) ---------------------------------------

    def receive(self, port: int, payload: bytes | bytearray | memoryview) -> list[Output]:
        """One datagram that came in on ``port`` (0: this host's own TreeCall): the datagrams it causes."""
        P = self.P
        if len(payload) < P.packet_bytes:
            self.stats.drops[P.DROP_TRUNCATED] += 1  # parse_wire.p4's error, counted by job_lookup.p4
            return []
        word = int.from_bytes(bytes(payload[:P.header_bytes]), "big")
        fields = {name: P.field(word, name) for name, _, _ in P.fields}
        values = np.frombuffer(bytes(payload), ">i4", P.values, P.header_bytes).astype(np.int32)
        pkt = Packet(word, fields, values, port)
        self._look_up(pkt)
        if pkt.verdict in (Verdict.CHECKED, Verdict.PASS_DOWN):
            self._check_round(pkt)
        if pkt.verdict in (Verdict.ANSWER, Verdict.FIRST, Verdict.ADD, Verdict.KEEP):
            self._value_lanes(pkt)
            self._exponent_and_overflow(pkt)
        outputs = self._send(pkt)
        self._count(pkt)
        return outputs

    def receive_batch(self, port: int, rows: np.ndarray, lengths: np.ndarray | list[int]) -> Outputs:
        """k datagrams that came in on ``port`` (``batch``'s rows and lengths), one after the other: the
        outputs of all, in order (the native relay's one call per batch; here a loop over ``receive``)."""
        rows, lengths = batch(rows, lengths)
        outputs = [out for row, length in zip(rows, lengths) for out in self.receive(port, row[:max(0, length)])]
        return Outputs.of(outputs, self.P.packet_bytes)

    def _count(self, pkt: Packet) -> None:
        """telemetry.p4: the one JOB_STAT_* the controls chose (the last one set), and a completion."""
        if pkt.job_stat is not None:
            self.stats.jobs[pkt.tree.job_id][pkt.job_stat] += 1
        if pkt.completed:
            self.stats.jobs[pkt.tree.job_id][self.P.JOB_STAT_RESULTS] += 1

    def _look_up(self, pkt: Packet) -> None:
        """job_lookup.p4: which tree and cell; everything that cannot be aggregated is refused here."""
        P, f = self.P, pkt.fields
        entry = self.jobs.get((pkt.port, f["job_id"], f["child"])) if f["child"] < 32 else None
        if entry is None:
            self.stats.drops[P.DROP_UNKNOWN_MEMBER] += 1
            pkt.verdict = Verdict.DROP
            return
        pkt.tree, pkt.from_parent = entry
        pkt.cells = self.cells[pkt.tree.job_id]
        pkt.cell = f["slot"] << 1 | f["set"]
        # the parent sends RESULTs; a child DATA only (its RESULT is a recovery's: a relay never loses its cells)
        if f["msg_type"] != (P.MSG_RESULT if pkt.from_parent else P.MSG_DATA):
            pkt.job_stat = P.JOB_STAT_BAD_TYPE
            pkt.verdict = Verdict.DROP
        elif f["slot"] >= pkt.tree.pool_size:
            pkt.job_stat = P.JOB_STAT_BAD_SLOT
            pkt.verdict = Verdict.DROP
        elif pkt.from_parent:
            pkt.job_stat = P.JOB_STAT_FROM_PARENT  # the round check may keep it (KEEP)
            pkt.verdict = Verdict.PASS_DOWN

    def _check_round(self, pkt: Packet) -> None:
        """round_check.p4: which round the cell holds, then a parent's result (``_keep``), a repeat
        (``_repeat``) or a contribution (``_contribute``)."""
        tree, c, i = pkt.tree, pkt.cells, pkt.cell
        seq = pkt.fields["seq"]
        stored_seq, stored_epoch = int(c.round_seq[i]), int(c.round_epoch[i])
        same_round = stored_epoch == tree.epoch and stored_seq == seq
        if not same_round and stored_epoch == tree.epoch and (seq - stored_seq) & (1 << 31):
            pkt.job_stat = self.P.JOB_STAT_STALE  # a late duplicate of a finished round (a parent's too)
            pkt.verdict = Verdict.DROP
            return
        old, count, kept = (int(c.bitmap[i]), int(c.arrivals[i]), bool(c.answered[i])) if same_round else (0, 0, False)
        complete = count == len(tree.children)
        # a result from the parent sees is_root = 0 (result_from_parent does not set it), even at a meeting end
        pkt.answered = complete and ((tree.is_root and not pkt.from_parent) or kept)
        if pkt.from_parent:  # (a child's RESULT was refused in _look_up)
            self._keep(pkt)
        elif old & 1 << pkt.fields["child"] or complete:
            self._repeat(pkt, old, count, complete)
        else:
            self._contribute(pkt, old, count, same_round)

    def _keep(self, pkt: Packet) -> None:
        """The parent's (or the peer's) result: a cell that lacks it keeps it, complete (Verdict.KEEP); one that
        has it leaves it (someone below asked again): either way it goes down to the children."""
        if pkt.answered:
            return  # PASS_DOWN
        c, i, children = pkt.cells, pkt.cell, len(pkt.tree.children)
        pkt.verdict = Verdict.KEEP
        c.round_seq[i], c.round_epoch[i] = pkt.fields["seq"], pkt.tree.epoch
        c.arrivals[i] = children
        c.bitmap[i] = (1 << children) - 1  # every child counted, as arrivals says
        c.answered[i] = True

    def _repeat(self, pkt: Packet, old: int, count: int, complete: bool) -> None:
        """A child already counted in this round, or any packet to a complete round: it changes no state
        but ``asked``, and is answered only once the round is complete (or, meeting rule 3, to the peer)."""
        P, tree, me = self.P, pkt.tree, 1 << pkt.fields["child"]
        pkt.job_stat = P.JOB_STAT_RETRANSMITS
        pkt.verdict = Verdict.ANSWER
        if not complete:
            if not self._peer_lacks_our_half(tree, old, count):
                pkt.verdict = Verdict.DROP  # absorbed: the result comes when the others arrive
            # else meeting rule 3: our half again, to the peer, answered as a partial sum up is (ANSWER)
        elif pkt.answered:  # answered from the cell
            if not tree.is_root and pkt.fields["flags"] & P.FLAG_RECOVER:
                pkt.raise_up = True  # the parent may have lost the round: the kept result goes up
        else:
            # the partial goes up again for the first child to repeat and any child repeating twice
            who = int(pkt.cells.asked[pkt.cell])
            pkt.cells.asked[pkt.cell] = who | me
            if who != 0 and not who & me:
                pkt.verdict = Verdict.DROP

    def _contribute(self, pkt: Packet, old: int, count: int, same_round: bool) -> None:
        """Mark the child in the cell (a new round starts from old = 0; the other set's cell is left alone);
        the last completes the round, and meeting rule 1 sends a finished half to the peer."""
        c, i, tree = pkt.cells, pkt.cell, pkt.tree
        pkt.job_stat = self.P.JOB_STAT_AGGREGATED
        counted = old | 1 << pkt.fields["child"]
        c.bitmap[i] = counted
        if not same_round:  # the first of a round overwrites whatever the cell held
            count = 1
            c.round_seq[i], c.round_epoch[i] = pkt.fields["seq"], tree.epoch
            c.answered[i] = False
            c.asked[i] = 0
            pkt.verdict = Verdict.FIRST
        else:
            count += 1
            pkt.verdict = Verdict.ADD
        c.arrivals[i] = count
        if count == len(tree.children):
            pkt.completed = True
        elif self._peer_lacks_our_half(tree, counted, count):
            pkt.to_peer = True  # meeting rule 1: our half is complete, the peer's is not here

    @staticmethod
    def _peer_lacks_our_half(tree: RelayTree, bitmap: int, count: int) -> bool:
        """Meeting rules 1 and 3: all but the peer are counted, so the cell holds our half, and the peer's
        bit is unset, so the sum does not hold the peer's half (the peer must get ours)."""
        return tree.peer is not None and count == len(tree.children) - 1 and not bitmap & 1 << tree.peer

    def _value_lanes(self, pkt: Packet) -> None:
        """value_lanes.p4: FIRST and KEEP overwrite the cell, ADD adds (wrapping; overflow when the true sum
        leaves int32), ANSWER reads the cell into the packet."""
        lanes = pkt.cells.lanes[pkt.cell]
        if pkt.verdict == Verdict.ANSWER:
            pkt.values = lanes.copy()
        elif pkt.verdict in (Verdict.FIRST, Verdict.KEEP):
            lanes[:] = pkt.values
        else:
            wide = lanes.astype(np.int64) + pkt.values
            pkt.lane_overflow = bool(((wide < -(1 << 31)) | (wide >= 1 << 31)).any())
            lanes[:] = wide.astype(np.int32)  # the wrapping sum, as bit<32> + bit<32>
            pkt.values = lanes.copy()

    def _exponent_and_overflow(self, pkt: Packet) -> None:
        """exponent_overflow.p4: the cell's flags (FLAG_OVERFLOW) and exponent (the max)."""
        P, c, i, f = self.P, pkt.cells, pkt.cell, pkt.fields
        if pkt.verdict == Verdict.ANSWER:
            f["flags"] = int(c.flags[i]) | P.FLAG_RETRANSMIT | (f["flags"] & P.FLAG_RECOVER)
            f["exponent"] = int(c.exponent[i])
            return
        merged_flags, merged_exponent = f["flags"] & P.FLAG_OVERFLOW, f["exponent"]
        if pkt.verdict == Verdict.ADD:
            merged_flags |= int(c.flags[i])
            merged_exponent = max(merged_exponent, int(c.exponent[i]))
        if pkt.lane_overflow:
            merged_flags |= P.FLAG_OVERFLOW
        c.flags[i], c.exponent[i] = merged_flags, merged_exponent
        if pkt.completed or pkt.to_peer:  # meeting rule 1 sends the half as a completion would
            f["flags"], f["exponent"] = merged_flags, merged_exponent

    def _send(self, pkt: Packet) -> list[Output]:
        """send_result.p4 and egress: where the packet goes once ingress decided, with each copy's child."""
        P, tree, f = self.P, pkt.tree, pkt.fields
        sends = (pkt.completed or pkt.to_peer
                 or pkt.verdict in (Verdict.ANSWER, Verdict.PASS_DOWN, Verdict.KEEP))
        if not sends:
            return []  # refused, stale, or absorbed until the last child arrives
        if pkt.verdict in (Verdict.PASS_DOWN, Verdict.KEEP):
            return self._to_children(pkt, with_peer=False)  # meeting rule 4: the peer has it
        if pkt.to_peer or (pkt.verdict == Verdict.ANSWER and not pkt.answered):  # partial sums, a half to the peer
            return [self._emit(pkt, tree.parent_port, P.RECEIVER_PARENT, P.MSG_DATA, tree.index_at_parent)]
        if pkt.verdict == Verdict.ANSWER:
            if pkt.raise_up:
                return [self._emit(pkt, tree.parent_port, P.RECEIVER_PARENT, P.MSG_RESULT, tree.index_at_parent)]
            return [self._emit(pkt, pkt.port, f["child"], P.MSG_RESULT, f["child"])]  # back to the sender
        if tree.is_root:  # meeting rule 2: the peer gets the total unless it completed the round (it has ours)
            return self._to_children(pkt, with_peer=f["child"] != tree.peer)
        return [self._emit(pkt, tree.parent_port, P.RECEIVER_PARENT, P.MSG_DATA, tree.index_at_parent)]

    def _to_children(self, pkt: Packet, with_peer: bool) -> list[Output]:
        """A multicast RESULT: one copy per child (the group's order), its header's child the receiver's."""
        return [self._emit(pkt, port, index, self.P.MSG_RESULT, index) for index, port in pkt.tree.children
                if with_peer or index != pkt.tree.peer]

    def _emit(self, pkt: Packet, port: int, receiver: int, msg_type: int, child: int) -> Output:
        word = pkt.word
        for name, value in (("msg_type", msg_type), ("child", child), ("flags", pkt.fields["flags"]),
                            ("exponent", pkt.fields["exponent"])):
            shift, width, _ = self.P.layout[name]
            mask = (1 << width) - 1
            word = word & ~(mask << shift) | (value & mask) << shift
        head = word.to_bytes(self.P.header_bytes, "big")
        return Output(port, receiver, head + pkt.values.astype(">i4").tobytes())
