"""The reliable slot protocol of one allreduce on one aggregation tree, a window at a time.

Packet g (counted over the worker's life, so consecutive allreduces continue the sequence)
uses slot ``g mod W`` in set ``(g div W) mod 2`` and names its round ``seq = g + 1``. It may
go out once the result of packet g - W is in (its {slot, set} is free again on every worker:
docs/protocol.md). A float allreduce of n chunks sends n + D packets, D = min(W, n): packet
q carries the exponent of chunk q (q < n) and the values of chunk q - D (q >= D), quantized
with the exponent the switch agreed in the result of packet q - D; so exponents travel one
window ahead, as in SwitchML. A float call of a size the tree has seen (``Hints``) sends no
exponent-only packets: packet q carries chunk q, and chunk (q + D) mod n's exponent; the first D
chunks go at the exponents the last call of that size agreed, the others at the exponent agreed a
window ahead, and packets n + j redo, at the agreed exponent, the first-window chunks whose hint the
last D packets' results show wrong (docs/protocol.md, "Exponents: a window ahead, or hinted"). int32 arrays need no
exponents: packet q carries chunk q.

Lost packets are sent again about a round trip after a packet sent after them has its result
(RACK), or on a retransmission timer that follows the round trip (doubled per timeout in a row
without a result) when nothing sent later reveals them; results are matched by slot, set and seq, and
anything else is counted and dropped. No progress for ``timeout`` seconds raises
AllreduceTimeout naming what is missing.

The names: a worker holds one ``Tree`` per aggregation tree of its job (where its packets go,
the packet sequence, and in ``Congestion`` the round-trip estimate and the window in flight);
an allreduce call gives each tree a ``TreeCall``, its share of the call's chunks.

This module is the protocol without I/O (as h11 and aioquic are): it opens no socket, starts no
thread and reads no clock.  The caller passes ``now`` into every step, hands received datagrams
to ``TreeCall.receive``, and takes from each ``step`` its ``Outbox``: the datagrams to put on the
wire now, in order, and the next deadline (aioquic's ``datagrams_to_send`` and ``get_timer``).  The
caller says how many datagrams it can take (a shaped link's queue in the virtual fabric); the socket
driver takes them all.  ``step`` is one turn of a call's loop, so the socket driver, the fabric and
the native core's differential test run the same code.  A configuration (``TreeConfig``) is fixed
for the job; the congestion, RACK and timer state and the per-packet arrays are the call's.

The datapath works on windows, not packets.  A TreeCall lays out all its packets at once (one
(packets, header + 4V) array: headers from ``Protocol.pack_headers``, int32 values byte-swapped
in one operation, float chunks quantized a run at a time as their exponents come back); the
packets that may go out leave in one syscall (``batch_io``); results come in by the dozen and
are parsed as columns straight into the sums.  Per-packet state (sent, done, retries, timers)
is numpy arrays over the call's packets.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from worker import quantize
from worker.errors import AllreduceTimeout, SwitchOverflowError
from worker.protocol import ETH_IP_UDP, Protocol

RTO_MIN, RTO_MAX = 20e-6, 1.0  # seconds: the timer's bounds whatever the round trip (a timer's grain, a dead path)
RTO_FLOOR_RTTS = 2  # the timer is at least this many least round trips (a datacenter's 50 us, Mininet's ms)
INITIAL_IN_FLIGHT = 8  # packets in flight at first; doubles per round trip (slow start) up to the window
DUP_THRESH = 3  # a packet sent once whose three later packets have their results is lost (TCP's DupThresh)
TURN = 8  # new packets a tree sends before the next tree of the call takes its turn (``step``)
QUEUEING = 1.5  # a timeout cuts the window only if the smoothed RTT is this many times the least seen
AMBIGUOUS = 0.75  # a copy's result sooner than this share of srtt after it went may be an earlier copy's: no RACK
#                   (while new packets go; in a call's tail, the least round trip, RFC 8985's rule)
INITIAL_RTO = 0.1  # seconds: the timer before any round trip is measured
LOOK_AGAIN = 0.05  # seconds: a running call looks again at least this often, whatever its timers
HINT_SIZES = 256  # call sizes (chunks, dtype) whose agreed exponents a tree remembers (``Hints``: an LRU)


@dataclass
class Stats:
    """Counts over the worker's life; ``bytes_sent`` is UDP payload put on the wire."""

    packets_sent: int = 0
    retransmissions: int = 0
    early_retransmissions: int = 0  # of those, sent before their timeout: later results were in
    window_cuts: int = 0  # timeouts taken as congestion (the round trip had grown)
    results: int = 0
    ignored: int = 0  # duplicate, stale or foreign datagrams
    bytes_sent: int = 0
    syscalls: int = 0  # sends and receives (select excluded): the socket driver's count
    polls: int = 0  # waits of the driver's loop: about one per window of results; many per packet is a spin
    recoveries: int = 0  # last windows sent again because a switch of the tree lost its registers

    @classmethod
    def total(cls, parts: list[Stats]) -> Stats:
        """The counts of several trees (a worker's) together."""
        out = cls()
        for part in parts:
            for name, value in vars(part).items():
                setattr(out, name, getattr(out, name) + value)
        return out


class Pacer:
    """A token bucket over the wire bytes a worker sends to the switches (a hybrid job keeps the trees
    within their capacity and leaves the rest of the link to the ring).  Retransmissions spend too."""

    def __init__(self, mbps: float, frame_bytes: int, burst_packets: int = 4, late: float = 0.0) -> None:
        self.mbps = mbps
        self.rate = mbps * 1e6 / 8  # bytes per second
        self.burst = burst_packets * frame_bytes  # wire bytes, as spend() counts them
        # full at the first look; ``late`` > 0: in debt by that share of a burst, so the first datagram waits (a
        # phase, for pacers of one rate that would otherwise send together)
        self.tokens, self.updated = float(self.burst) if late <= 0 else -late * self.burst, None

    def _refill(self, now: float) -> None:
        if self.updated is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def ready_at(self, now: float) -> float:
        """When the next datagrams may go: now, or once the bucket holds half a burst again, so a wake
        sends a few (one per wake would cost a turn of the loop per packet: at 100 Gbit/s one every 0.1 us)."""
        self._refill(now)
        if self.tokens >= 0:
            return now
        # strictly later: a debt too small to move ``now`` (rounding) would wake the caller at now forever
        return max(now + (self.burst / 2 - self.tokens) / self.rate, math.nextafter(now, math.inf))

    def allowed(self, now: float, payload: int) -> int:
        """How many datagrams of ``payload`` bytes may go now: each may go while the bucket is not in debt."""
        self._refill(now)
        return 0 if self.tokens < 0 else int(self.tokens // (payload + ETH_IP_UDP)) + 1

    def spend(self, payload: int, now: float, count: int = 1) -> None:
        self._refill(now)
        self.tokens -= count * (payload + ETH_IP_UDP)


@dataclass
class Congestion:
    """One tree's round-trip estimate and the packets it lets be in flight (AIMD, capped by the window)."""

    window: int
    srtt: float | None = None
    rttvar: float = 0.0
    rtt_min: float = float("inf")  # the round trip with empty queues, as near as seen
    cwnd: float = field(init=False)
    ssthresh: float = field(init=False)  # below it cwnd doubles per round trip, above it grows by one
    last_cut: float = 0.0  # when cwnd was last halved
    borrowed: bool = False  # srtt, rttvar and rtt_min are a sibling tree's (``adopt``): no round trip of our own yet
    unsampled: int = 0  # results since the last round trip of a packet sent once (``copies_answered``)

    def __post_init__(self) -> None:
        self.cwnd = float(min(self.window, INITIAL_IN_FLIGHT))
        self.ssthresh = float(self.window)

    def rto(self) -> float:
        """The retransmission timer: the smoothed round trip plus four deviations (TCP's) or, if more, plus
        itself (queues grow as a window opens), and at least two of the least round trips seen.  It follows
        the path, from 27 us at 100 Gbit/s to Mininet's milliseconds (a fixed 50 ms floor cost 1,850 round
        trips per tail loss in a datacenter)."""
        if self.srtt is None:
            return INITIAL_RTO
        return min(RTO_MAX, max(RTO_MIN, RTO_FLOOR_RTTS * self.rtt_min, self.srtt + max(4 * self.rttvar, self.srtt)))

    def adopt(self, other: Congestion) -> None:
        """Take another tree's round trip (the same host, the same kind of path) while we have none of our own
        (``_share_round_trip``: again at every step, so it follows the sibling's as its queues grow)."""
        self.srtt, self.rttvar, self.rtt_min = other.srtt, other.rttvar, other.rtt_min
        self.borrowed = True

    def sample(self, rtts: np.ndarray) -> None:
        """Round trips measured for a batch of results, in order: TCP's per-ACK update, one sample at a
        time (srtt by 1/8, rttvar by 1/4 of the deviation from srtt as it was then).  Sequential, in
        plain doubles, so the native core computes the same bits.  Our first round trip replaces a borrowed
        estimate (``adopt``) as a first one does none: srtt is our own from then on (the least stays the least)."""
        if len(rtts):
            self.unsampled = 0
        self._take(rtts)

    def copies_answered(self, waits: np.ndarray) -> None:
        """Results of packets that all went more than once, ``waits`` the time since each one's last copy went.
        Karn's rule takes no round trip from them, so an estimate below the path's round trip would stay for
        ever: the timer then sends every packet again before its result, and no packet sent once is left to
        correct it (Mininet, 8 workers at 25 Mbit/s: one worker's first round trip, 0.49 ms, came before the
        queues grew; it sent each packet again every 1.5 ms, 59,000 copies a call, its link's queue made
        everyone's round trip 200 ms, and every call of the job took 9x as long).  TCP keeps the timer backed
        off until a fresh sample (RFC 6298, 5.7); here, after a window of results without a sample, a result
        that came longer than srtt after the packet's last copy went is a round trip at least that long
        (whichever copy it answers went no later), and it is taken: the estimate only grows, towards the
        truth, and the first packet sent once and answered brings a real sample."""
        self.unsampled += len(waits)
        if self.srtt is not None and self.unsampled >= self.window:
            self._take(waits[waits > self.srtt])

    def _take(self, rtts: np.ndarray) -> None:
        srtt, rttvar, rtt_min = self.srtt, self.rttvar, self.rtt_min
        if self.borrowed and len(rtts):
            srtt, self.borrowed = None, False
        for x in rtts.tolist():
            if x < rtt_min:
                rtt_min = x
            if srtt is None:
                srtt, rttvar = x, x / 2
            else:
                rttvar = 0.75 * rttvar + 0.25 * abs(srtt - x)
                srtt = 0.875 * srtt + 0.125 * x
        self.srtt, self.rttvar, self.rtt_min = srtt, rttvar, rtt_min

    def grow(self, results: int) -> None:
        """Slow start, as TCP's: one more packet in flight per result (doubling per round trip) until
        the first cut, then additive increase, one per window's worth of results.  Additive increase
        alone from 8 packets takes hundreds of round trips to fill a 100 Gbit/s link's window, longer
        than a whole call of a megabyte (docs/scale.md measured it)."""
        cwnd, window = self.cwnd, float(self.window)
        if cwnd >= window:
            return
        if cwnd < self.ssthresh:
            slow = min(results, math.ceil(self.ssthresh - cwnd))
            cwnd, results = min(cwnd + slow, self.ssthresh, window), results - slow
        for _ in range(results):
            cwnd = min(window, cwnd + 1 / cwnd)
        self.cwnd = cwnd

    def back_off(self, now: float, stats: Stats) -> None:
        """A timeout halves the packets in flight, once per RTT, but only when the round trip has
        grown (the smoothed RTT at QUEUEING times the least seen): then the window queues in front
        of a slow link, and the waiting looks like loss (AIMD, as TCP).  A loss with short queues is
        random loss: cutting would only slow the call down (TCP Vegas and BBR read delay the same way)."""
        congested = self.srtt is not None and self.srtt > QUEUEING * self.rtt_min
        if congested and now - self.last_cut > self.srtt:
            self.cwnd, self.last_cut = max(2.0, self.cwnd / 2), now
            self.ssthresh = self.cwnd
            stats.window_cuts += 1


@dataclass(frozen=True)
class TreeConfig:
    """What a tree is for this worker while the job lasts: where its packets go and how they are numbered."""

    switch: str  # the first switch, as errors name it
    job_id: int
    child: int
    workers: int
    window: int
    protocol: Protocol
    timeout: float


@dataclass(frozen=True, eq=False)
class HeaderBits:
    """Header bits and field positions the core sets or compares, from the protocol (``header_bits``)."""

    retransmit: np.ndarray  # OR-ed into a copy's header
    recover: np.ndarray  # a recovery's copies: a switch that kept the round's result passes it up
    word: np.dtype  # headers are compared in words of this type
    result_mask: np.ndarray  # a result of packet q has these header bits of q, its type turned into RESULT
    match_mask: np.ndarray  # result_mask without OVERFLOW: the general way takes OVERFLOW, and notes it
    data_to_result: np.ndarray  # XOR turns a DATA header into its RESULT's
    seq_at: tuple[int, str]
    flags_at: tuple[int, str]
    exponent_at: tuple[int, str]


def header_bits(P: Protocol) -> HeaderBits:
    H = P.header_bytes
    word = np.dtype(f"u{next(b for b in (8, 4, 2, 1) if H % b == 0)}")
    # OVERFLOW is in the result mask, so a flagged result fails the quick check and takes _accept's general
    # way, which records it
    mask = P.pack_headers(1, msg_type=-1, job_id=-1, slot=-1, set=-1, seq=-1, flags=P.FLAG_OVERFLOW)[0]
    overflow = P.pack_headers(1, flags=P.FLAG_OVERFLOW)[0]
    return HeaderBits(P.pack_headers(1, flags=P.FLAG_RETRANSMIT)[0],
                      P.pack_headers(1, flags=P.FLAG_RETRANSMIT | P.FLAG_RECOVER)[0], word, mask.view(word),
                      (mask & ~overflow).view(word), P.pack_headers(1, msg_type=P.MSG_DATA ^ P.MSG_RESULT)[0],
                      *(P.field_at(f) for f in ("seq", "flags", "exponent")))


class Outbox:
    """The datagrams one ``step`` lets go, in the order they go, each with its tree: the caller puts
    every one of them on the wire (as aioquic's ``datagrams_to_send``).  ``room``: how many the caller
    can take now (a shaped link's queue); what the core would send beyond it waits for a later step."""

    def __init__(self, room: float = math.inf) -> None:
        self.room = room
        self.datagrams: list[tuple[Tree, np.ndarray]] = []
        self.wake = math.inf  # when the calls next need a step (results wake the caller by themselves)
        self.full = False  # the core had more to send than the room: step again once the caller can take more

    def offer(self, tree: Tree, rows: np.ndarray) -> int:
        """Take what room allows of these (k, packet bytes) rows; returns how many."""
        k = int(min(len(rows), self.room))
        if k:
            self.datagrams.append((tree, rows[:k]))
            self.room -= k
        self.full |= k < len(rows)
        return k

    def rows(self, tree: Tree) -> np.ndarray:
        """This tree's datagrams as one (k, packet bytes) array, in order."""
        mine = [r for t, r in self.datagrams if t is tree]
        if len(mine) == 1:
            return mine[0]
        return np.concatenate(mine) if mine else np.empty((0, tree.config.protocol.packet_bytes), np.uint8)


@dataclass
class Echo:
    """After a recovery: packets below ``end`` with results here go again at ``at``, then every ``gap``
    (doubling), until ``stop`` or until every worker is known to have their results (``Tree.echo``)."""

    end: int
    at: float
    gap: float
    stop: float


@dataclass(eq=False)  # a tree is itself: workers hold them in sets
class Tree:
    """One aggregation tree as this worker sees it: its configuration, its packet sequence over the
    worker's life, its congestion state and what it owes the other workers after a switch lost its
    registers.  Its datagrams leave through the ``Outbox`` of each ``step``."""

    config: TreeConfig
    name: str = "the job's tree"  # how errors name this tree (a moved tree is renamed: ``spec_changed``)
    incarnation: int = 0  # the job spec's: how often the tree's switches lost their registers
    pacer: Pacer | None = None  # shared by the worker's trees: the most they offer the switches together
    stats: Stats = field(default_factory=Stats)
    next_packet: int = 0  # g of the next allreduce's first packet
    broken: bool = False  # after a failure: later calls would not line up with the other workers
    recovered: int = 0  # the incarnation whose loss this worker has answered (``recover``)
    echo: Echo | None = None
    congestion: Congestion = field(init=False)

    def __post_init__(self) -> None:
        self.congestion = Congestion(self.config.window)
        self.bits = header_bits(self.config.protocol)
        self.buffers = Buffers(self.config.protocol)
        self.recovered = self.incarnation
        # the last W packets of the calls before the current one, packet g in row g mod W: a switch that
        # loses its registers may have given their results to some workers and not to others
        self.kept = np.zeros((self.config.window, self.config.protocol.packet_bytes), np.uint8)
        self.hints = Hints()

    @property
    def lost_registers(self) -> bool:
        return self.incarnation != self.recovered

    def spec_changed(self, incarnation: int, name: str) -> None:
        """The job's spec moved on: a higher incarnation (its switches lost their registers: ``tend``
        recovers) and the tree's name (a tree moved off a dead switch has a new root).  An older one is
        ignored."""
        if incarnation >= self.incarnation:
            self.incarnation, self.name = incarnation, name

    def tend(self, call: TreeCall | None, now: float, out: Outbox) -> None:
        """What the tree owes the other workers, whatever the call: a recovery after its switches lost
        their registers, and its echoes.  ``call`` is the tree's part of the running call, if any."""
        if self.lost_registers:
            self.recover(call, now, out)
        self.send_echo(call, now, out)

    def keep(self, call: TreeCall) -> None:
        """A call is complete: its last W packets are kept for ``recover`` (the call's buffer is reused)."""
        W = self.config.window
        first = max(0, call.total - W)
        g = call.base + np.arange(first, call.total)
        self.kept[g % W] = call.packets[first:call.total]

    def recover(self, call: TreeCall | None, now: float, out: Outbox) -> None:
        """A switch of the tree lost its registers: every packet from W before the oldest without a result
        on goes again, kept or in the call, with or without its result here (docs/protocol.md, "A switch
        restart").  Another worker may lack the result of any of them, but of none older.  Those with a
        result here go again from time to time (``send_echo``) until that is known to be past."""
        oldest, _ = self._oldest(call)
        end = call.base + call.next_q if call is not None and not call.complete else self.next_packet
        if call is not None:
            call.excuse(now)  # the time the switch was away is not the workers' fault
        if not self._send_again(call, max(0, oldest - self.config.window), end, now, out, with_results_only=False):
            return  # no room: all of it goes again at a later step (lost_registers still holds)
        gap = self.congestion.rto()
        self.echo = Echo(end, now + gap, gap, now + self.config.timeout)
        self.stats.recoveries += 1
        self.recovered = self.incarnation

    def send_echo(self, call: TreeCall | None, now: float, out: Outbox) -> None:
        """After ``recover``: the packets sent again that have their result here go again, each RTO and
        then less often, while another worker may still lack the result (a copy sent again may be lost
        too).  Once the result of a packet W later is here, every worker has the earlier one: the
        echo ends when the oldest packet without a result is W past the recovered ones (or after
        ``timeout``, for a worker with no call to learn that from)."""
        echo = self.echo
        if echo is None or now < echo.at:
            return
        oldest, _ = self._oldest(call)
        if oldest - self.config.window >= echo.end or now >= echo.stop:
            self.echo = None
            return
        self._send_again(call, max(0, oldest - self.config.window), echo.end, now, out, with_results_only=True)
        echo.gap = min(RTO_MAX, 2 * echo.gap)
        echo.at = now + echo.gap

    def _oldest(self, call: TreeCall | None) -> tuple[int, int]:
        """The oldest packet without a result here (g), and the first packet of the call (of the next one)."""
        if call is None or call.complete:
            return self.next_packet, self.next_packet
        return call.base + call.oldest, call.base

    def _send_again(self, call: TreeCall | None, lo: int, hi: int, now: float, out: Outbox,
                    with_results_only: bool) -> bool:
        """Packets g in [lo, hi), marked as a recovery's: kept ones (before the call), then the call's.
        False when the outbox took only some: only those are counted and timed."""
        _, base = self._oldest(call)
        W, rows = self.config.window, []
        kept = np.arange(max(lo, base - W), min(hi, base))
        if len(kept):
            rows.append(self.kept[kept % W])
        if call is not None and not call.complete and hi > base:
            qs = np.arange(max(0, lo - base), min(hi - base, call.next_q))
            if with_results_only:
                qs = qs[call.done[qs]]
            rows.append(call.packets[qs])
        else:
            qs = np.arange(0)
        if not rows:
            return True
        batch = np.concatenate(rows)
        batch[:, :len(self.bits.recover)] |= self.bits.recover
        sent = out.offer(self, batch)
        kept_sent = min(sent, len(batch) - len(qs))
        if sent > kept_sent:
            call.note_sent(qs[:sent - kept_sent], sent - kept_sent, now, True)  # timed as retransmissions
        self.stats.retransmissions += kept_sent
        self.stats.packets_sent += kept_sent
        self.stats.bytes_sent += kept_sent * self.config.protocol.packet_bytes
        return sent == len(batch)

    def new_call(self, chunks: np.ndarray, exact: bool, out: np.ndarray,
                 exponents: np.ndarray | None = None, last: np.ndarray | None = None) -> TreeCall:
        """This tree's share of a call (the native core's trees make theirs)."""
        return TreeCall(self, chunks, exact, out, exponents, last)


class Hints:
    """A tree's exponent hints: per call size (chunks, dtype), the exponents the switches agreed in the last
    complete call of that size.  The next call of that size sends its first window's data at them at once
    instead of a window of exponent-only packets first; every later chunk's exponent comes a window ahead,
    in the packets before it (docs/protocol.md, "Exponents: a window ahead, or hinted").  Learnt only from
    complete calls, whose results every member received, and every member makes the same calls in the same
    order, so the table is the same on every member.  An LRU of ``sizes`` entries: a byte per chunk of each
    size held.  A hinted call sends at most the packets the window would: its wrong hints are in the first
    window only, each one packet more; in time, a wrong hint costs up to a round trip at the call's end, as
    the first window's hints are checked by its last packets (docs/protocol.md)."""

    def __init__(self, sizes: int = HINT_SIZES) -> None:
        self.sizes = sizes
        self.table: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()  # per size: the agreed exponents
        self.pending: tuple[tuple[int, str], TreeCall] | None = None  # the last call, learnt from once complete
        self.hits = self.chunks = 0  # first-window chunks sent at a hint, and of those, not redone (tree's life)

    def lookup(self, n: int, dtype: np.dtype) -> np.ndarray | None:
        """The hinted exponents for a float call of n chunks of ``dtype``, or None (a size not seen yet)."""
        self._settle()
        key = (n, np.dtype(dtype).str)
        hint = self.table.get(key)
        if hint is not None:
            self.table.move_to_end(key)
        return hint

    def watch(self, call: TreeCall) -> None:
        """Learn from this call once it is complete (at the next lookup: the native core completes in C)."""
        self.pending = ((call.n, np.dtype(call.out.dtype).str), call)

    def _settle(self) -> None:
        if self.pending is None:
            return
        key, call = self.pending
        self.pending = None
        if not call.complete:  # failed or abandoned: its tree is broken
            return
        if call.hint is not None:
            self.chunks += call.span
            self.hits += call.span - call.redos
        self.table[key] = np.array(call.agreed[:call.n], np.int8)
        self.table.move_to_end(key)
        while len(self.table) > self.sizes:
            self.table.popitem(last=False)


class Buffers:
    """Memory a tree reuses from call to call (fresh memory costs a page fault per 4 KB, and numpy's
    allocator time)."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self._arrays: dict[str, np.ndarray] = {}

    def _buffer(self, name: str, rows: int, columns: int, dtype: np.dtype | type) -> np.ndarray:
        """A (rows, columns) array of this dtype."""
        have = self._arrays.get(name)
        if have is None or len(have) < rows or have.dtype != dtype:
            have = self._arrays[name] = np.empty((max(rows, 1), columns), dtype)
        return have[:rows]

    def array(self, name: str, count: int, dtype: np.dtype | type) -> np.ndarray:
        """A one-dimensional array of ``count`` (its contents what the last user left)."""
        return self._buffer(name, count, 1, dtype)[:, 0]

    def packets(self, count: int) -> np.ndarray:
        """Room for a call's packets."""
        return self._buffer("packets", count, self.protocol.packet_bytes, np.uint8)

    def scratch(self, rows: int, dtype: np.dtype) -> np.ndarray:
        """Room for ``rows`` scaled chunks on their way into packets."""
        return self._buffer("scratch", rows, self.protocol.values, dtype)

    def words(self, rows: int, dtype: np.dtype) -> np.ndarray:
        """Room for ``rows`` headers as words, to be compared with what is expected."""
        return self._buffer("words", rows, self.protocol.header_bytes // dtype.itemsize, dtype)


@dataclass
class Layout:
    """A call's packets laid out before anything is sent (``lay_out``): headers complete, int32 values in
    place, float values written as their exponents come back; each packet's result header, masked."""

    n: int  # chunks
    lead: int  # D: packets carrying only exponents (0 with a hint)
    span: int  # with a hint, D: the first window, whose chunks go at their hints (else 0)
    total: int  # packets, as far as known (with a hint: n, and one more per chunk found to need a redo)
    capacity: int  # packets laid out: total, or 2n with a hint (every chunk redone)
    base: int  # g of the first packet
    own: np.ndarray  # int8 per chunk: its own exponent (the packets' exponent field)
    packets: np.ndarray  # (capacity, packet bytes)
    expected: np.ndarray  # (capacity, header words): each packet's result header, masked (HeaderBits.result_mask)
    agreed: np.ndarray  # int8 per chunk: the switch's exponents as they come back
    qscale: np.ndarray  # per chunk, in the output's dtype: 2**s to quantize
    dscale: np.ndarray  # and 2**-s to dequantize


def lay_out(tree: Tree, chunks: np.ndarray, exact: bool, out: np.ndarray, exponents: np.ndarray | None,
            hinted: bool = False) -> Layout:
    """Every packet of a call, at once: headers from ``Protocol.pack_headers``, int32 values byte-swapped in
    one operation (``exponents``: the chunks' own, if the caller has them).  ``hinted``: no exponent-only
    packets, packet q < n carries chunk (q + D) mod n's exponent (the chunk its slot carries next, or for the last
    D packets a chunk of the first window, whose hint its result checks), and room for a redo of every chunk
    after the n packets."""
    P, config = tree.config.protocol, tree.config
    n = len(chunks)
    lead = 0 if exact or hinted else min(config.window, n)
    span = min(config.window, n) if hinted else 0
    T, base = 2 * n if hinted else n + lead, tree.next_packet
    W, H = config.window, P.header_bytes
    if exact:
        local_exp = np.full(n, quantize.EXPONENT_NONE, np.int8)
    else:
        local_exp = quantize.chunk_exponents(chunks) if exponents is None else exponents
    g = base + np.arange(T, dtype=np.int64)
    exps = np.full(T, quantize.EXPONENT_NONE, np.int64)
    exps[:n] = np.roll(local_exp, -span)  # packet q: chunk (q + span) mod n's
    packets = tree.buffers.packets(T)
    packets[:lead, H:] = 0  # exponent-only packets carry zeros
    packets[:, :H] = P.pack_headers(T, msg_type=P.MSG_DATA, job_id=config.job_id, child=config.child, slot=g % W,
                                    set=(g // W) % 2, seq=(g + 1) & 0xFFFFFFFF, exponent=exps)
    if exact:
        packets[:, H:].view(">i4")[:] = chunks
    bits = tree.bits
    expected = (packets[:, :H] ^ bits.data_to_result).view(bits.word) & bits.result_mask
    return Layout(n, lead, span, n + lead, T, base, local_exp, packets, expected,
                  np.full(n, quantize.EXPONENT_NONE, np.int8), np.ones(n, out.dtype), np.ones(n, out.dtype))


@dataclass
class Rack:
    """RACK's state (RFC 8985) in one call: when the latest copy whose result is in went, its packet and its
    round trip; when the next packet sent before it counts as lost; whether results came since the last look."""

    sent: float = -math.inf
    q: int = -1
    rtt: float = 0.0
    timer: float = math.inf
    stale: bool = False


@dataclass
class Timeouts:
    """The retransmission timer's state in one call."""

    finished_at: int = -1  # ``finished`` at the last timeout: none since, and the next one probes
    silent: int = 0  # timeouts in a row with no result between them: the timer doubles per one
    probe_until: float = -math.inf  # while probing, no timer before the probe's own


class TreeCall:
    """One tree's share of one allreduce: as results come in, ``out`` (chunks, V) receives the sums,
    dequantized into its dtype (int32 as they are); ``agreed`` holds the exponents and
    ``overflowed`` the chunks whose sum wrapped (whose ``out`` rows mean nothing)."""

    def __init__(self, tree: Tree, chunks: np.ndarray, exact: bool, out: np.ndarray,
                 exponents: np.ndarray | None = None, last: np.ndarray | None = None) -> None:
        """``exponents``: the chunks' own (``quantize.chunk_exponents``), if the caller has them.  ``last``:
        the final chunk, padded with zeros, where ``chunks`` and ``out`` are one row short (a call summed
        into the caller's array, which ends mid-chunk): its input, and its sum once the call completes
        (here the rows are joined in a private copy; the native core reads and writes each in place)."""
        P = self.P = tree.config.protocol
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        if last is not None:
            self._last = (out, last)
            chunks = np.concatenate([chunks, last.reshape(1, -1)])
            out = np.empty_like(chunks)
        self.tree, self.chunks, self.exact, self.out = tree, chunks, exact, out
        # the exponents the last call of this size agreed: data at them from the first packet on
        self.hint = None if exact else tree.hints.lookup(len(chunks), out.dtype)
        layout = lay_out(tree, chunks, exact, out, exponents, self.hint is not None)
        self.n, self.lead, self.total, self.base = layout.n, layout.lead, layout.total, layout.base
        self.span = layout.span  # with a hint, D: the first window's chunks go at their hints
        T, self.own = layout.capacity, layout.own
        self.packets, self.expected, self.agreed = layout.packets, layout.expected, layout.agreed
        # scales by chunk, set as the exponents are agreed: 2**s to quantize, 2**-s to dequantize
        self.qscale, self.dscale = layout.qscale, layout.dscale
        self.wide = False  # some scale is not a normal float32: float32 calls take quantize's float64 way
        self.values = self.packets[:, P.header_bytes:].view(">i4")  # (T, V)
        # with a hint: the first window's chunks whose hint was wrong (known from packets n - D ..), those whose
        # hinted sum wrapped, and the redos, in chunk order (packet n + j redoes redo[j]) as far as found: in
        # the chunks below ``scanned``, all of whose packets have their results
        self.wrong = np.zeros(self.n, bool)
        self.wrapped = np.zeros(self.n, bool)
        # the first window's sums as they come, dequantized once their hints are known right (``out`` may be
        # the input: a redo needs it)
        self.hinted_sums = np.zeros((self.span, P.values), ">i4")
        self.redo = np.zeros(self.n, np.int64)
        self.redos = self.scanned = 0
        if self.hint is not None:
            self._agree(slice(None), self.hint)
        if not exact:
            tree.hints.watch(self)
        self.filled = T if exact else self.lead  # packets below this have their values in place
        self.latest = np.zeros(T, np.int64)  # scratch: which row of a batch carried packet q
        self.done = np.zeros(T, bool)
        self.sent_at = np.full(T, np.nan)
        self.retries = np.zeros(T, np.int64)
        self.retried = False  # any packet of the call sent twice (then RTT samples check retries: Karn)
        self.paced = False  # the pacer held back a packet the window let go: nothing goes before it is ready
        self.held = False  # ``pump``'s budget held back packets the window let go: the call wants another turn
        self.next_q = 0
        self.overflowed: list[int] = []  # chunks whose sum wrapped: raised once every packet is done
        self.finished = 0
        self.oldest = 0  # every packet before this one has its result; this one has not (or is not sent)
        self.rack = Rack()  # the latest packet with its result, copies too: judges copies
        self.rack_once = Rack()  # the latest packet sent once with its result: judges packets sent once
        self.timeouts = Timeouts()
        self.last_progress: float | None = None  # when a result last came (the first ``pump`` starts it)
        self.closed = False  # complete, and its last window kept by the tree

    # --- sending -----------------------------------------------------------------------------

    def _fill(self, end: int) -> None:
        """Quantize the values of packets filled .. end-1: their chunks' exponents are agreed (or hinted)."""
        start = self.filled
        if end <= start:
            return
        if self.hint is None:
            self._quantize(start, end, slice(start - self.lead, end - self.lead))
        else:
            mid = max(start, min(end, self.n))
            if start < mid:  # chunks at their hints (the first window) or agreed exponents
                with np.errstate(invalid="ignore", over="ignore"):
                    self._quantize(start, mid, slice(start, mid))
                first = min(mid, self.span)  # a chunk above its hint is sure to be redone: zeros
                if start < first:
                    self.values[start:first][self.own[start:first] > self.hint[start:first]] = 0
            if mid < end:  # redos, at the agreed exponents
                self._quantize(mid, end, self.redo[mid - self.n:end - self.n])
        self.filled = end

    def _quantize(self, start: int, end: int, chunks: slice | np.ndarray) -> None:
        """Packets start .. end-1's values: these chunks at their scales."""
        if self.wide:
            shift = quantize.shifts(self.agreed[chunks], self.tree.config.workers)
            self.values[start:end] = quantize.quantize_rows(self.chunks[chunks], shift)
        else:  # scale, then round straight into the packets (cast and byte-swapped on the way)
            scaled = self.tree.buffers.scratch(end - start, self.out.dtype)
            np.multiply(self.chunks[chunks], self.qscale[chunks, None], out=scaled)
            np.rint(scaled, out=self.values[start:end], casting="unsafe")

    def _agree(self, chunks: slice | np.ndarray, exponents: np.ndarray) -> None:
        """The switch's exponents for these chunks: their scales follow."""
        self.agreed[chunks] = exponents
        shift = quantize.shifts(exponents, self.tree.config.workers)
        shift[exponents == quantize.EXPONENT_NONE] = 0  # every worker's chunk is zeros: any scale will do
        if self.out.dtype == np.float32 and (shift.max() > 126 or shift.min() < -126):
            self.wide = True
        with np.errstate(over="ignore"):  # a float32 scale out of range: ``wide`` takes the float64 way instead
            self.qscale[chunks] = np.ldexp(1.0, shift)
            self.dscale[chunks] = np.ldexp(1.0, -shift)

    def _sendable(self, now: float) -> int:
        """How many packets from next_q on may go now: within the window in flight, after their
        slot's previous round and (float) their exponent's result, and as the pacer allows.  Every
        packet before ``oldest`` has its result and ``oldest`` has not, so the first packet whose
        slot (or exponent) is still busy is ``oldest + W`` (``oldest + D``)."""
        tree = self.tree
        hi = min(self.total, self.finished + math.ceil(tree.congestion.cwnd),
                 self.oldest + (self.lead or tree.config.window))
        k = hi - self.next_q
        if k > 0 and tree.pacer is not None:
            k = min(k, tree.pacer.allowed(now, self.P.packet_bytes))
            self.paced |= k == 0
        return k

    def note_sent(self, qs: np.ndarray | slice, count: int, now: float, retransmit: bool) -> None:
        """Packets ``qs`` (``count`` of them) went at ``now``: counts, the pacer, their timers."""
        tree, stats = self.tree, self.tree.stats
        if tree.pacer is not None:
            tree.pacer.spend(self.P.packet_bytes, now, count)
        stats.packets_sent += count
        stats.bytes_sent += count * self.P.packet_bytes
        self.sent_at[qs] = now
        if retransmit:
            stats.retransmissions += count
            self.retried = True
            self.retries[qs] += 1

    def _send_new(self, now: float, out: Outbox, budget: float = math.inf) -> None:
        sent_here = 0
        while (k := self._sendable(now)) > 0:
            if sent_here >= budget:
                self.held = True
                return
            k = int(min(k, budget - sent_here))
            q0 = self.next_q
            self._fill(q0 + k)
            sent = out.offer(self.tree, self.packets[q0:q0 + k])
            sent_here += sent
            if sent:
                self.note_sent(slice(q0, q0 + sent), sent, now, False)
                self.next_q += sent
            if sent < k:  # no room (a shaped link's queue): the rest go at a later step
                break

    def _resend(self, qs: np.ndarray, now: float, out: Outbox) -> int:
        """Send these packets again, marked as retransmissions (as many as the pacer lets go now:
        the others stay due); returns how many went."""
        if self.tree.pacer is not None:
            allowed = self.tree.pacer.allowed(now, self.P.packet_bytes)
            self.paced |= allowed < len(qs)
            qs = qs[:allowed]
        if len(qs) == 0:
            return 0
        batch = self.packets[qs]  # a copy: the outbox keeps it until the caller sends it
        batch[:, :len(self.tree.bits.retransmit)] |= self.tree.bits.retransmit
        sent = out.offer(self.tree, batch)  # the rest stay due, and go at a later step
        self.note_sent(qs[:sent], sent, now, True)
        return sent

    # --- results -----------------------------------------------------------------------------

    def _accept(self, rows: np.ndarray, lengths: np.ndarray, now: float) -> None:
        """A batch of datagrams: the results of packets in flight are taken, anything else counted."""
        if self._accept_run(rows, lengths, now):
            return
        P, tree, H = self.P, self.tree, self.P.header_bytes
        q = P.column(rows, tree.bits.seq_at).astype(np.int64)
        q -= self.base + 1
        q &= 0xFFFFFFFF
        ok = (lengths >= P.packet_bytes) & (q < self.next_q)  # packets sent (in order), so in flight or done
        q[~ok] = 0
        flags = P.column(rows, tree.bits.flags_at)
        mismatch = (rows[:, :H].view(tree.bits.word) ^ self.expected[q]) & tree.bits.match_mask  # OVERFLOW: below
        ok &= ~mismatch.any(axis=1) & ~self.done[q]
        idx = np.flatnonzero(ok)
        qi = q[idx]
        self.latest[qi] = idx  # a duplicate within the batch counts once: its last copy
        keep = self.latest[qi] == idx
        idx, qi = idx[keep], qi[keep]
        tree.stats.ignored += len(rows) - len(qi)
        if not len(qi):
            return
        wrapped = (flags[idx] & P.FLAG_OVERFLOW) != 0
        if wrapped.any() and self.hint is None:
            c = qi[wrapped] - self.lead
            self.overflowed += c[c >= 0].tolist()
        rows = rows[idx]
        self._taken(qi, len(qi), int(qi.max()), now)
        if self.hint is not None:
            self._hinted_results(qi, rows, wrapped)
            return
        if not self.exact:
            head = qi < self.n
            if head.any():
                self._agree(qi[head], P.column(rows[head], tree.bits.exponent_at))
        c = qi - self.lead
        mine = c >= 0
        if mine.any():
            sums = np.empty((int(mine.sum()), P.values), self.out.dtype)
            self._dequantize(sums, rows[mine, H:P.packet_bytes].view(">i4"), c[mine])
            self.out[c[mine]] = sums

    def _accept_run(self, rows: np.ndarray, lengths: np.ndarray, now: float) -> bool:
        """The common case, checked with slices: the batch is the results of a run of packets in
        flight, in sending order.  False if it is anything else (``_accept`` sorts it out)."""
        tree = self.tree
        k, (offset, dtype) = len(rows), tree.bits.seq_at
        width = np.dtype(dtype).itemsize
        first = (int.from_bytes(rows[0, offset:offset + width].tobytes(), "big") - 1 - self.base) & 0xFFFFFFFF
        end = first + k
        if end > self.next_q or int(lengths.min()) < self.P.packet_bytes:
            return False
        H = self.P.header_bytes
        bits = tree.bits
        heads = np.bitwise_and(rows[:, :H].view(bits.word), bits.result_mask, out=tree.buffers.words(k, bits.word))
        if heads.tobytes() != self.expected[first:end].tobytes() or self.done[first:end].any():
            return False
        self._taken(slice(first, end), k, end - 1, now)
        if self.hint is not None:
            self._hinted_results(np.arange(first, end), rows, None)
            return True
        if first < self.n and not self.exact:  # packets below n carry exponents
            self._agree(slice(first, min(end, self.n)), self.P.column(rows[:self.n - first], tree.bits.exponent_at))
        skip = min(k, max(0, self.lead - first))  # packets below D carry no values
        if skip < k:
            c0, c1 = first + skip - self.lead, end - self.lead
            self._dequantize(self.out[c0:c1], rows[skip:, H:self.P.packet_bytes].view(">i4"), slice(c0, c1))
        return True

    @staticmethod
    def _rack_advance(rack: Rack, sent: float, q: int, now: float) -> None:
        """``rack`` moves to packet ``q`` (sent at ``sent``, its result in at ``now``) if it went later, or at
        once and later in the call."""
        if (sent, q) > (rack.sent, rack.q):
            rack.sent, rack.q, rack.rtt = sent, q, now - sent

    def _hinted_results(self, qs: np.ndarray, rows: np.ndarray, wrapped: np.ndarray | None) -> None:
        """Results of a hinted call's packets.  Packet q < n is chunk q (at its hint in the first window, else
        at its agreed exponent) and brings the agreed exponent of chunk (q + D) mod n: the chunk its slot
        carries next, or for the last D packets a first-window chunk, whose hint is then known right (or the
        exponent none: every worker's chunk is zeros) or wrong (the chunk is redone, ``_scan``).  Packet n + j
        is redo[j], at its agreed exponent.  A first-window chunk's sum and OVERFLOW are held until its hint
        is known (``_scan``)."""
        P, n, D = self.P, self.n, self.span
        head = qs < n
        chunks = np.where(head, qs, self.redo[np.maximum(qs - n, 0)])
        if head.any():
            carried = (qs[head] + D) % n
            e = P.column(rows[head], self.tree.bits.exponent_at)
            self._agree(carried, e)
            first = carried < D
            ok = (e[first] == self.hint[carried[first]]) | (e[first] == quantize.EXPONENT_NONE)
            self.wrong[carried[first][~ok]] = True
        early = head & (qs < D)  # first-window sums: held until their hints are known right
        good = ~early
        if early.any():
            self.hinted_sums[qs[early]] = rows[early, P.header_bytes:P.packet_bytes].view(">i4")
        if wrapped is not None and wrapped.any():
            self.wrapped[qs[wrapped & early]] = True
            self.overflowed += chunks[wrapped & good].tolist()
        if good.any():
            sums = np.empty((int(good.sum()), P.values), self.out.dtype)
            self._dequantize(sums, rows[good, P.header_bytes:P.packet_bytes].view(">i4"), chunks[good])
            self.out[chunks[good]] = sums
        self._scan()

    def _scan(self) -> None:
        """The redos found: first-window chunks whose hint was wrong, in chunk order, as far as every packet
        carrying them (chunk j, and packet n - D + j with its agreed exponent) has its result: the same on
        every worker (each has every result below the oldest); each adds a packet to the call.  The others'
        held sums are taken (an OVERFLOW among them is an error)."""
        D = self.span
        upto = min(max(self.oldest - (self.n - D), 0), D)
        if upto > self.scanned:
            found = np.flatnonzero(self.wrong[self.scanned:upto]) + self.scanned
            self.redo[self.redos:self.redos + len(found)] = found
            self.redos += len(found)
            taken = np.flatnonzero(~self.wrong[self.scanned:upto]) + self.scanned
            self.overflowed += taken[self.wrapped[taken]].tolist()
            if len(taken):
                sums = np.empty((len(taken), self.P.values), self.out.dtype)
                self._dequantize(sums, self.hinted_sums[taken], taken)
                self.out[taken] = sums
            self.scanned = upto
            self.total = self.n + self.redos

    def _taken(self, qs: slice | np.ndarray, count: int, last: int, now: float) -> None:
        """Packets ``qs`` have their results (``last`` the latest of them): timers, window, RTT, ``oldest``."""
        tree = self.tree
        self.done[qs] = True
        self.finished += count
        tree.stats.results += count
        tree.congestion.grow(count)
        sent = self.sent_at[qs]  # when each packet's last copy went
        if self.retried:
            first = self.retries[qs] == 0
            numbers = np.arange(qs.start, qs.stop) if isinstance(qs, slice) else qs
            if first.any():
                once = float(sent[first].max())
                self._rack_advance(self.rack_once, once, int(numbers[first & (sent == once)].max()), now)
            if tree.congestion.srtt is None and not first.any():
                # no round trip yet and every packet went twice (at 1,024 workers and 1% loss on every link every
                # slot loses something): the last copies' give a first estimate, short if anything, rather than
                # the initial timer for ever
                first = np.ones(len(sent), bool)
            if first.any():
                tree.congestion.sample(now - sent[first])  # round trips of the packets sent once (Karn)
            else:
                tree.congestion.copies_answered(now - sent)
            # RACK takes a copy sent again too, once its result is unlikely to be an earlier copy's: in a call's
            # tail every packet left may have gone twice, and only RACK finds losses a round trip on.  RFC 8985
            # (6.2) takes a result sooner than the least round trip for an earlier copy's.  While new packets
            # still go, a queued path makes a copy wait far longer than that (Mininet's 25 Mbit/s links: that
            # rule resent ten times what a call needs), so there it takes AMBIGUOUS srtt; in the tail the queues
            # have drained, the few packets left cost little to send again, and waiting for the timer instead
            # cost 64 workers at 0.1% loss a fifth of the call (docs/scale.md)
            queued = AMBIGUOUS * (tree.congestion.srtt or 0.0) if self.next_q < self.total else 0.0
            ambiguous = max(tree.congestion.rtt_min, queued)
            plain = first | (now - sent >= ambiguous)
            sent, numbers = sent[plain], numbers[plain]
            latest = float(sent.max(initial=-math.inf))
            q = int(numbers[sent == latest].max(initial=-1))
            if self.next_q >= self.total:  # the tail: every first send has gone and the queues drained, so a
                # copy's result judges first sends too (RACK's one reference), as only it finds a late loss
                self._rack_advance(self.rack_once, latest, q, now)
        else:
            tree.congestion.sample(now - sent)
            latest, q = float(self.sent_at[last]), last  # packets first go in order: the latest sent is the highest
            self._rack_advance(self.rack_once, latest, q, now)
        self._rack_advance(self.rack, latest, q, now)
        self.rack.stale = True
        self.timeouts.silent = 0
        o = self.oldest
        if isinstance(qs, slice) and qs.start <= o < qs.stop:
            o = qs.stop
        if o < self.next_q and self.done[o]:
            rest = self.done[o:self.next_q]
            i = int(rest.argmin())
            o += i if not rest[i] else len(rest)
        self.oldest = o

    def _dequantize(self, out: np.ndarray, sums: np.ndarray, chunks: slice | np.ndarray) -> None:
        """Results' values (big-endian int32 rows) of these chunks into ``out``."""
        if self.exact:
            out[...] = sums
        elif self.wide:
            quantize.dequantize_into(out, sums, quantize.shifts(self.agreed[chunks], self.tree.config.workers))
        else:  # cast and scale in one pass: 2**-s is exact and the int -> float cast the only rounding
            np.multiply(sums, self.dscale[chunks, None], out=out, dtype=out.dtype)

    # --- the loop ----------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.finished >= self.total and self.scanned >= self.span

    def pump(self, now: float, out: Outbox, budget: float = math.inf) -> float:
        """Send what the window (and the pacer) allows and what timed out; returns when this call next
        needs a look (results wake the loop by themselves).

        The pacer sets the wake-up only when it held a packet back: nothing can go before it is ready
        then, a due timer included.  Waking for it whenever packets were left to send (issue 32) made a
        window-bound call spin: with one slot the window holds the next packet, the bucket is not in
        debt, so the loop polled with a zero timeout until the result came (dozens of polls a packet),
        and four such workers on two cores took the CPU the switch needed (10x slower calls).

        ``budget``: the most new packets to send now (``held`` then says whether more were due); calling
        ``pump`` again at the same time sends on, and sends nothing twice.  Raises AllreduceTimeout once
        ``timeout`` has gone by without a result (the caller hands in what has arrived before each pump)."""
        tree = self.tree
        if self.last_progress is None:
            self.last_progress = now
        elif now - self.last_progress >= tree.config.timeout:
            raise timeout_error(self)
        self.paced = self.held = False
        self._send_new(now, out, budget)
        timer = self._timer()
        if now >= timer:
            self._resend_expired(now, out)
            timer = self._timer()
        self._resend_lost(now, out)
        wake = min(now + LOOK_AGAIN, self.last_progress + tree.config.timeout, self.rack.timer)
        if self.paced and tree.pacer is not None:
            return min(wake, tree.pacer.ready_at(now))
        return min(wake, timer)

    def _expiries(self, live: slice) -> np.ndarray:
        """When each packet in ``live`` times out, as the round trip stands now (done ones: never).  A
        timer set when a packet went would be stale: the round trip grows several-fold as a call's window
        opens and shrinks as its queues drain, so each look takes the RTO of the moment (as TCP restarts
        its timer on every acknowledgement).  Backoff only while nothing answers (``_rto``)."""
        wait = self._rto()
        return np.where(self.done[live], np.inf, np.maximum(self.sent_at[live], self._restarted()) + wait)

    def _rto(self) -> float:
        """The timer, doubled per timeout in a row without a result between them (a path that answers
        nothing: a dead switch before its trees move).  A packet sent again while results flow waits one
        plain RTO: at 1% loss on each link most slots of a 1,024-worker tree lose something, and a backoff
        per packet's copies cost a tail of doubling timers."""
        return min(RTO_MAX, self.tree.congestion.rto() * 2.0 ** min(self.timeouts.silent, 20))

    def _restarted(self) -> float:
        """When the timers last started again: every result restarts them (RFC 6298, 5.3), so a window
        queued behind a slow link, whose last packet waits the whole window's time, does not time out
        while its results flow (on Mininet's loaded box a timer from each packet's send fired in a
        clean run: 36,342 spurious copies).  RACK finds the losses while results flow."""
        return -math.inf if self.last_progress is None else self.last_progress

    def _timer(self) -> float:
        """When the next packet in flight times out: the oldest's time, unless some packet went twice;
        while a probe is out, not before the probe's own time."""
        if self.oldest >= self.next_q:
            return math.inf
        if not self.retried:  # packets first go in order: the oldest without a result went first
            return max(float(self.sent_at[self.oldest]), self._restarted()) + self._rto()
        first = float(self._expiries(slice(self.oldest, self.next_q)).min())
        return max(first, self.timeouts.probe_until) if self.finished == self.timeouts.finished_at else first

    def _resend_expired(self, now: float, out: Outbox) -> None:
        """Timeouts: the packets in flight whose timers expired go again, and the window shrinks
        (``Congestion.back_off``).  A timeout with no result since the last one sends the oldest alone,
        as a probe (TCP sends one segment after an RTO): the path may be gone (a dead switch before the
        controller moves its trees), and a whole window per backoff from every worker is a storm in
        front of it.  The rest go once results flow again."""
        due = np.flatnonzero(self._expiries(slice(self.oldest, self.next_q)) <= now)
        if len(due):
            self.tree.congestion.back_off(now, self.tree.stats)
            probing = self.finished == self.timeouts.finished_at
            self.timeouts.finished_at = self.finished
            self.timeouts.silent += 1
            q = due[:1] + self.oldest if probing else due + self.oldest
            self._resend(q, now, out)
            if probing:
                self.timeouts.probe_until = float(self._expiries(slice(q[0], q[0] + 1))[0])

    def receive(self, rows: np.ndarray, lengths: np.ndarray, now: float) -> None:
        """Datagrams that came for this tree: (k, slot) uint8 rows and their lengths (longer than a
        packet means cut short).  Results of packets in flight are taken, anything else counted."""
        before = self.finished
        if len(rows):
            self._accept(rows, lengths, now)
        if self.finished > before:
            self.last_progress = now
        if self.complete and not self.closed:
            self.closed = True
            self.tree.next_packet = self.base + self.total
            self.tree.keep(self)
            if self._last is not None:  # the sums back where the caller reads them
                head, last = self._last
                head[:] = self.out[:-1]
                last[:] = self.out[-1]

    def stalled(self, now: float, after: float) -> bool:
        """No result for ``after`` seconds while packets are in flight (``now``: the caller's clock)."""
        return (self.oldest < self.next_q and not self.complete and self.last_progress is not None
                and now - self.last_progress >= after)

    def excuse(self, now: float) -> None:
        """Time without results that is nobody's fault (the switches were away): the timeout starts again."""
        self.last_progress = now

    def _resend_lost(self, now: float, out: Outbox) -> None:
        """Resend on a gap, without waiting for the timer (RACK, RFC 8985): a packet without a result
        counts as lost once a copy sent after it has its result and a round trip (that copy's, plus a
        quarter of the least as leeway for reordering) has passed since it went.  It was lost, or its
        slot waits for another worker's lost packet, or the result to us was lost; sending it again
        costs one packet and recovers the first and the last case at once (a repeat for a complete slot
        is answered by unicast), the other worker the second.  A copy sent again is judged the same way
        by copies sent after it, so nothing goes twice per round trip, and the window is not cut: a gap
        is not congestion.  A packet sent once goes sooner, a least round trip after it went, once
        DUP_THRESH packets after it have their results (as TCP before RACK).  The timer stays for a loss
        with nothing sent after it (the tail); ATP resends on a gap the same way."""
        if not self.rack.stale and now < self.rack.timer:
            return  # no result since the last look, and nothing due yet: the common case costs this
        self.rack.stale, self.rack.timer = False, math.inf
        span = slice(self.oldest, self.next_q)
        sent_at = self.sent_at[span]
        once = self.retries[span] == 0
        behind, wait, flowing = self._behind(span, sent_at, once)
        if not behind.any():
            return
        rtt_min = self.tree.congestion.rtt_min
        due = sent_at + wait
        # a packet sent once, with DUP_THRESH later packets answered, goes a least round trip after it went:
        # a slot completes only after every worker's packets before it, so results come in send order but
        # for losses, and RACK's wait (the later packet's round trip, which a full window's queues stretch to
        # twice the least) is what a lost result to one worker holds every worker's window for
        done = self.done[span]
        later = np.cumsum(done[::-1])[::-1] - done
        dup = behind & (later >= DUP_THRESH) & once
        due[dup] = np.minimum(due[dup], sent_at[dup] + rtt_min)
        lost = behind & (due <= now)
        went = 0
        if lost.any():
            qs = np.flatnonzero(lost) + self.oldest
            went = self._resend(qs, now, out)
            self.tree.stats.early_retransmissions += went
            self.rack.stale = went < len(qs)  # the pacer or the sink held some: look again at the next turn
        waiting = behind & ~lost
        if waiting.any():
            self.rack.timer = float(due[waiting].min())
        if flowing and went:  # the copies just sent are probed in their turn
            copies = int(self.retries[qs[:went]].min())
            self.rack.timer = min(self.rack.timer, now + math.ldexp(self.rack.rtt + rtt_min / 4, copies - 1))

    def _behind(self, span: slice, sent_at: np.ndarray, once: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Which packets of ``span`` a later result (or their own clock) judges, how long each may wait after it
        went, and whether results flow (``_resend_lost``)."""
        numbers = np.arange(span.start, span.stop)
        # Each packet is judged by a reference sent as it was.  A copy's result must not judge packets sent
        # once: a round's result comes when its last worker's packet arrives, and a copy (which every worker
        # makes at once, of a round held by one loss) waited for one laggard only, so it comes back a least
        # round trip on while first sends before it, waiting for the slowest of N workers, take longer:
        # taken for lost, 70-76% of all copies at 64-128 workers and 0.01-0.1% loss were such.
        ref_sent = np.where(once, self.rack_once.sent, self.rack.sent)
        ref_q = np.where(once, self.rack_once.q, self.rack.q)
        waiting_result = ~self.done[span]
        behind = waiting_result & ((sent_at < ref_sent) | ((sent_at == ref_sent) & (numbers < ref_q)))
        rtt_min = self.tree.congestion.rtt_min
        wait = np.where(once, self.rack_once.rtt, self.rack.rtt) + rtt_min / 4
        flowing = not self.timeouts.silent  # results flow (else the path may be dead: the timer's probes rule)
        if flowing:
            # A packet with nothing sent after it to reveal its loss is judged by its own clock too (a probe, as
            # RACK-TLP's; issue 61).  A copy: as if a copy sent just after it had come back (the reference's
            # round trip and a quarter of the least), each later copy of it after twice the wait.  A copy's
            # result no longer judges first sends, so a worker whose copy was lost (or the result its copy
            # asked for) has no later copies to reveal it: its window stalls every worker's, and the timer,
            # restarted by every result, waited 130-160 us, or longer once it backed off (64 workers at 0.1%
            # loss: one such copy, 4,006 timer copies and 1,316 against 1,130 us).  A probe of a round still
            # held by another's loss is absorbed at the first switch.
            probe = waiting_result & ~once & ~behind
            wait[probe] = np.ldexp(wait[probe], self.retries[span][probe] - 1)
            behind |= probe
            srtt = self.tree.congestion.srtt
            if srtt is not None and self.next_q >= self.total:
                # in the tail, a packet sent once: RACK-TLP's probe timeout (RFC 8985), twice the smoothed round
                # trip after it went, capped by the timer.  The call's last packets have none sent after them,
                # and a lost one, or a partial or result lost above the first switch, held every worker for the
                # timer.  Not srtt and a quarter of the least: trees packed on a host's link queue behind each
                # other, and the second's tail waits far longer than srtt (test_lanes: 124 copies, 68.9 ms
                # against 64.7); twice srtt leaves a queue as long as the round trip itself
                first = waiting_result & once & ~behind
                wait[first] = min(2 * srtt, self.tree.congestion.rto())
                behind |= first
        return behind, wait, flowing


def timeout_error(call: TreeCall) -> AllreduceTimeout:
    """What a call whose timeout ran out tells: what is missing, and the likely causes (the native core's
    calls have the same fields)."""
    tree = call.tree
    missing = np.flatnonzero(~call.done[:call.total]).tolist()
    W, timeout = tree.config.window, tree.config.timeout
    sent = [q for q in missing if q < call.next_q]
    shown = ", ".join(f"slot {(call.base + q) % W} set {((call.base + q) // W) % 2} seq {call.base + q + 1}"
                      f" ({int(call.retries[q])} retransmissions)" for q in sent[:5])
    return AllreduceTimeout(
        f"{tree.name}: no result for {timeout:.1f} s: {call.finished}/{call.total} packets done, "
        f"{len(sent)} sent without a result ({shown}{', ...' if len(sent) > 5 else ''}), "
        f"{len(missing) - len(sent)} not sent yet (window full). Some worker of job id {tree.config.job_id} "
        f"stopped contributing, or the path to switch {tree.config.switch} is down."
        + (" Or this job's workers ran before: the switches are past these rounds, and a job is one session "
           "of its workers (create a new job for new workers)." if call.base == 0 and not call.finished else ""),
        missing=[call.base + q + 1 for q in sent], retransmissions=int(call.retries.sum()))


def step(calls: list[TreeCall], idle: tuple[Tree, ...], now: float, room: float = math.inf) -> Outbox:
    """One turn of an allreduce's loop, after handing in what arrived: every tree tends what it owes
    (``Tree.tend``: the call's trees and the ``idle`` ones, which another worker may still wait on),
    then each call still running sends what it may, within ``room`` datagrams.  Returns the outbox: the
    datagrams to put on the wire now and the next deadline.  A failure (a timeout) marks the calls'
    trees broken (their packet sequences no longer agree with the other workers') and is raised."""
    out = Outbox(room)
    try:
        for c in calls:
            c.tree.tend(c, now, out)
        for t in idle:
            t.tend(None, now, out)
        # the trees take turns, TURN new packets at a time: one tree's whole window sent before the next tree's
        # would start the others late on the host's link, and packed trees each held to their own rate never
        # catch up (4 trees of 128 slots: the last 33 us late on a 100 Gb/s link, 20% of a 1 MB call)
        running = [c for c in calls if not c.complete]
        _share_round_trip(running)
        budget = TURN if len(running) > 1 else math.inf
        wakes = [c.pump(now, out, budget) for c in running]
        while any(c.held for c in running):
            wakes = [c.pump(now, out, budget) if c.held else w for c, w in zip(running, wakes)]
    except BaseException:
        fail(calls)
        raise
    out.wake = min(wakes, default=math.inf)
    for t in idle:
        if t.echo is not None:
            out.wake = min(out.wake, t.echo.at)
    return out


def _share_round_trip(calls: list[TreeCall]) -> None:
    """A tree with no round trip of its own yet takes a sibling's (the same host, the same kind of path): its
    initial timer is 0.1 s, and at 1% loss on every link all of a tree's first packets often wait on a loss
    (64 workers: 0.83 ** 8 of the time), which cost a 64-worker call 100 ms.  It takes it again at every step
    until its own first round trip (``Congestion.sample``): a sibling's first, taken with empty queues, is short
    for trees whose packets queue behind the sibling's on the host's link, and once a too short timer has sent a
    tree's packets twice, Karn's rule leaves it no round trip of its own to correct it (2 lanes at 50 Mbit/s: every
    packet of the second lane went twice, 3,768 copies, and the call took 3.7 times as long)."""
    known = next((c.tree.congestion for c in calls
                  if c.tree.congestion.srtt is not None and not c.tree.congestion.borrowed), None)
    if known is None:
        return
    for c in calls:
        if c.tree.congestion.srtt is None or c.tree.congestion.borrowed:
            c.tree.congestion.adopt(known)


def fail(calls: list[TreeCall]) -> None:
    """A call failed or was stopped from outside (its ring part failed): its trees' packet sequences no
    longer agree with the other workers'.  ``step`` marks its own failures so."""
    for c in calls:
        c.tree.broken = True


def overflow_error(chunks: list[int], values: int) -> SwitchOverflowError:
    c = min(chunks)
    return SwitchOverflowError(f"the switch flagged an int32 overflow in {len(chunks)} chunk(s), first chunk {c} "
                               f"(elements {c * values}..{(c + 1) * values - 1}); those sums wrapped")
