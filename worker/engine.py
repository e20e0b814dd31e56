"""The reliable slot protocol of one allreduce: a sliding window of packets over the job's slots.

Packet g (counted over the worker's life, so consecutive allreduces continue the sequence)
uses slot ``g mod W`` in set ``(g div W) mod 2`` and names its round ``seq = g + 1``. It may
go out once the result of packet g - W is in (its {slot, set} is free again on every worker:
docs/protocol.md). A float allreduce of n chunks sends n + D packets, D = min(W, n): packet
q carries the exponent of chunk q (q < n) and the values of chunk q - D (q >= D), quantized
with the exponent the switch agreed in the result of packet q - D; so exponents travel one
window ahead, as in SwitchML. int32 arrays need no exponents: packet q carries chunk q.

Lost packets are sent again after a retransmission timeout (RTT-estimated, doubled on each
retry); results are matched by slot, set and seq, and anything else is counted and dropped.
No progress for ``timeout`` seconds raises AllreduceTimeout naming what is missing.

A job over several aggregation trees has one Link per tree (its own socket, job id and
sequence); ``run_together`` drives one Allreduce per tree in a single loop, so the trees'
packets go out side by side and a failure of any tree stops them all.
"""

from __future__ import annotations

import errno
import heapq
import select
import socket
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from worker import quantize
from worker.errors import AllreduceError, AllreduceTimeout, SwitchOverflowError
from worker.protocol import ETH_IP_UDP, Protocol

RTO_MIN, RTO_MAX = 0.05, 1.0  # seconds
INITIAL_IN_FLIGHT = 8  # packets in flight at first; grows by one per round trip up to the window
OVERDUE_AFTER = 3  # a packet whose result is missing while this many later ones are in goes again at once
QUEUEING = 1.5  # a timeout cuts the window only if the smoothed RTT is this many times the least seen


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


class Pacer:
    """A token bucket over the wire bytes a worker sends to the switches (a hybrid job keeps the trees
    within their capacity and leaves the rest of the link to the ring).  Retransmissions spend too."""

    def __init__(self, mbps: float, frame_bytes: int, burst_packets: int = 4) -> None:
        self.rate = mbps * 1e6 / 8  # bytes per second
        self.burst = burst_packets * frame_bytes  # wire bytes, as spend() counts them
        self.tokens, self.updated = float(self.burst), time.monotonic()

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def ready_at(self, now: float) -> float:
        """When the next datagram may go (now, or when the bucket is no longer in debt)."""
        self._refill(now)
        return now if self.tokens >= 0 else now - self.tokens / self.rate

    def spend(self, payload: int, now: float) -> None:
        self._refill(now)
        self.tokens -= payload + ETH_IP_UDP


@dataclass
class Link:
    """Where this worker's packets go and what identifies it."""

    sock: socket.socket
    switch: tuple[str, int]
    job_id: int
    child: int
    workers: int
    window: int
    protocol: Protocol
    timeout: float
    name: str = "the job's tree"  # how errors name this tree
    pacer: Pacer | None = None  # shared by the worker's trees: the most they offer the switches together
    stats: Stats = field(default_factory=Stats)
    next_packet: int = 0  # g of the next allreduce's first packet
    broken: bool = False  # after a timeout: later calls would not line up with the other workers
    srtt: float | None = None
    rttvar: float = 0.0
    rtt_min: float = float("inf")  # the round trip with empty queues, as near as seen
    cwnd: float = field(init=False)  # packets in flight allowed, up to the window (AIMD)
    last_cut: float = 0.0  # when cwnd was last halved

    def __post_init__(self) -> None:
        self.cwnd = float(min(self.window, INITIAL_IN_FLIGHT))

    def rto(self) -> float:
        if self.srtt is None:
            return 0.1
        return min(RTO_MAX, max(RTO_MIN, self.srtt + max(4 * self.rttvar, self.srtt)))  # queues grow: >= 2 RTT

    def sample_rtt(self, rtt: float) -> None:
        self.rtt_min = min(self.rtt_min, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt


class Allreduce:
    """One allreduce over one Link (tree): once ``run_together`` completes it, ``sums`` holds the (chunks, V)
    int32 sums, ``agreed`` the exponents and ``overflowed`` the chunks whose sum wrapped."""

    def __init__(self, link: Link, chunks: np.ndarray, exact: bool) -> None:
        P = self.P = link.protocol
        self.link, self.chunks, self.exact = link, chunks, exact
        self.n = len(chunks)
        self.lead = 0 if exact else min(link.window, self.n)  # D: packets carrying only exponents
        self.total = self.n + self.lead
        self.base = link.next_packet
        self.local_exp = np.full(self.n, quantize.EXPONENT_NONE, np.int8) if exact else quantize.chunk_exponents(chunks)
        self.agreed = np.full(self.n, quantize.EXPONENT_NONE, np.int8)
        self.sums = np.zeros((self.n, P.values), np.int32)
        self.done = np.zeros(self.total, bool)
        self.sent_at: dict[int, float] = {}
        self.retries: dict[int, int] = {}
        self.expiry: dict[int, float] = {}  # the live timer of each packet; older heap items are stale
        self.timers: list[tuple[float, int]] = []
        self.next_q = 0
        self.overflowed: list[int] = []  # chunks whose sum wrapped: raised once every packet is done
        self.finished = 0
        self.oldest = 0  # every packet before this one has its result
        self.newest = -1  # the latest packet (in sending order) whose result is in
        self.last_progress = time.monotonic()
        lay = P.layout
        self._static = (P.MSG_DATA << lay["msg_type"][0]) | (link.job_id << lay["job_id"][0]) | \
            (link.child << lay["child"][0])
        self._lay = lay

    # --- packets -----------------------------------------------------------------------------

    def _payload(self, q: int, retransmit: bool) -> bytes:
        P, lay, g = self.P, self._lay, self.base + q
        c = q - self.lead  # the chunk whose values ride in this packet
        if c < 0:
            values = np.zeros(P.values, np.int32)
        elif self.exact:
            values = self.chunks[c]
        else:
            values = quantize.quantize(self.chunks[c], int(quantize.shifts(self.agreed[c], self.link.workers)))
        exponent = int(self.local_exp[q]) if q < self.n and not self.exact else quantize.EXPONENT_NONE
        word = self._static | ((g % self.link.window) << lay["slot"][0]) | \
            (((g // self.link.window) % 2) << lay["set"][0]) | (((g + 1) & 0xFFFFFFFF) << lay["seq"][0]) | \
            ((exponent & 0xFF) << lay["exponent"][0]) | ((P.FLAG_RETRANSMIT if retransmit else 0) << lay["flags"][0])
        return word.to_bytes(P.header_bytes, "big") + values.astype(">i4").tobytes()

    def _send(self, q: int, retransmit: bool = False) -> None:
        data = self._payload(q, retransmit)
        try:
            self.link.sock.sendto(data, self.link.switch)
        except OSError as e:
            if not isinstance(e, BlockingIOError) and e.errno != errno.ENOBUFS:
                raise AllreduceError(f"{self.link.name}: cannot send to switch {self.link.switch[0]}:"
                                     f"{self.link.switch[1]}: {e}") from e
            # the send buffer is full: this is a loss, the timer will resend it
        now = time.monotonic()
        if self.link.pacer is not None:
            self.link.pacer.spend(len(data), now)
        stats = self.link.stats
        stats.packets_sent += 1
        stats.bytes_sent += len(data)
        if retransmit:
            stats.retransmissions += 1
            self.retries[q] = self.retries.get(q, 0) + 1
        self.sent_at[q] = now
        self.expiry[q] = now + min(RTO_MAX, self.link.rto() * 2 ** self.retries.get(q, 0))
        heapq.heappush(self.timers, (self.expiry[q], q))

    def _sendable(self, q: int) -> bool:
        W = self.link.window
        return q < self.total and q - self.finished < self.link.cwnd and (q < W or self.done[q - W]) and \
            (self.exact or q < self.lead or self.done[q - self.lead])

    # --- results -----------------------------------------------------------------------------

    def _accept(self, data: bytes) -> None:
        P = self.P
        if len(data) < P.packet_bytes:
            self.link.stats.ignored += 1
            return
        word = int.from_bytes(data[:P.header_bytes], "big")

        def get(name: str) -> int:
            return P.field(word, name)

        q = (get("seq") - 1 - self.base) & 0xFFFFFFFF
        W = self.link.window
        g = self.base + q
        if get("msg_type") != P.MSG_RESULT or get("job_id") != self.link.job_id or q >= self.total \
                or self.done[q] or q not in self.sent_at or get("slot") != g % W or get("set") != (g // W) % 2:
            self.link.stats.ignored += 1
            return
        self.done[q] = True
        self.finished += 1
        self.newest = max(self.newest, q)
        self.link.cwnd = min(float(W), self.link.cwnd + 1 / self.link.cwnd)  # additive increase
        self.link.stats.results += 1
        if not self.retries.get(q):  # Karn: only unambiguous samples
            self.link.sample_rtt(time.monotonic() - self.sent_at[q])
        flags = get("flags")
        c = q - self.lead
        if flags & P.FLAG_OVERFLOW and c >= 0:
            self.overflowed.append(c)
        if q < self.n and not self.exact:
            self.agreed[q] = get("exponent")
        if c >= 0:
            self.sums[c] = np.frombuffer(data, ">i4", P.values, P.header_bytes)

    # --- the loop ----------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.finished >= self.total

    def pump(self, now: float) -> float:
        """Send what the window (and the pacer) allows and what timed out; returns when this stream next
        needs a look."""
        pacer, wake = self.link.pacer, now + 0.05
        while self._sendable(self.next_q):
            if pacer is not None and (ready := pacer.ready_at(now)) > now:
                wake = ready
                break
            self._send(self.next_q)
            self.next_q += 1
        while self.timers and self.timers[0][0] <= now:
            expiry, q = heapq.heappop(self.timers)
            if not self.done[q] and expiry == self.expiry[q]:
                self._back_off(now)
                self._send(q, retransmit=True)
        self._resend_overdue(now)
        next_timer = self.timers[0][0] if self.timers else wake
        return min(next_timer, wake, self.last_progress + self.link.timeout)

    def drain(self, buf: bytearray) -> None:
        """Take every datagram waiting on the socket; raise AllreduceTimeout after ``timeout`` without progress."""
        before, view = self.finished, memoryview(buf)
        while True:
            try:
                size = self.link.sock.recv_into(buf)
            except BlockingIOError:
                break
            self._accept(bytes(view[:size]))
        now = time.monotonic()
        if self.finished > before:
            self.last_progress = now
        elif now - self.last_progress >= self.link.timeout:
            raise self._timeout_error()
        if self.complete:
            self.link.next_packet = self.base + self.total

    def _resend_overdue(self, now: float) -> None:
        """Fast retransmit: a packet still without a result while OVERDUE_AFTER later packets have
        theirs was lost, or its slot is waiting for another worker's lost packet, or the result to
        us was lost; sending it again costs one packet and recovers the first and the last case at
        once (a repeat for a complete slot is answered by unicast), the other worker the second.
        At most once per round trip per packet, and without cutting the window: it is not congestion."""
        while self.oldest < self.total and self.done[self.oldest]:
            self.oldest += 1
        if self.newest - self.oldest < OVERDUE_AFTER:
            return  # results come back in order: the common case costs this one comparison
        wait = max(self.link.srtt or 0.0, 0.001)
        for q in range(self.oldest, self.newest - OVERDUE_AFTER + 1):
            if not self.done[q] and q in self.sent_at and now - self.sent_at[q] >= wait:
                self.link.stats.early_retransmissions += 1
                self._send(q, retransmit=True)

    def _back_off(self, now: float) -> None:
        """A timeout halves the packets in flight, once per RTT, but only when the round trip has
        grown (the smoothed RTT at QUEUEING times the least seen): then the window queues in front
        of a slow link, and the waiting looks like loss (AIMD, as TCP).  A loss with short queues is
        random loss: cutting would only slow the call down (TCP Vegas and BBR read delay the same way)."""
        link = self.link
        congested = link.srtt is not None and link.srtt > QUEUEING * link.rtt_min
        if congested and now - link.last_cut > link.srtt:
            link.cwnd, link.last_cut = max(2.0, link.cwnd / 2), now
            link.stats.window_cuts += 1

    def _timeout_error(self) -> AllreduceTimeout:
        missing = [q for q in range(self.total) if not self.done[q]]
        W = self.link.window
        sent = [q for q in missing if q in self.sent_at]
        shown = ", ".join(f"slot {(self.base + q) % W} set {((self.base + q) // W) % 2} seq {self.base + q + 1}"
                          f" ({self.retries.get(q, 0)} retransmissions)" for q in sent[:5])
        return AllreduceTimeout(
            f"{self.link.name}: no result for {self.link.timeout:.1f} s: {self.finished}/{self.total} packets done, "
            f"{len(sent)} sent without a result ({shown}{', ...' if len(sent) > 5 else ''}), "
            f"{len(missing) - len(sent)} not sent yet (window full). Some worker of job id {self.link.job_id} "
            f"stopped contributing, or the path to switch {self.link.switch[0]} is down."
            + (" Or this job's workers ran before: the switches are past these rounds, and a job is one session "
               "of its workers (create a new job for new workers)." if self.base == 0 and not self.finished else ""),
            missing=[self.base + q + 1 for q in sent], retransmissions=sum(self.retries.values()))


def run_together(streams: list[Allreduce], stop: threading.Event | None = None) -> None:
    """Drive several allreduces (one per tree) to completion in one loop.

    Any failure marks every link broken (the workers' packet sequences no longer agree) and is
    raised at once; the other streams are abandoned, so no partial result is ever returned.
    ``stop`` set from elsewhere (the ring part of a hybrid call failed) ends the loop the same way.
    """
    buf = bytearray(65536)
    try:
        for s in streams:
            s.last_progress = time.monotonic()
        while active := [s for s in streams if not s.complete]:
            if stop is not None and stop.is_set():
                raise AllreduceError("stopped: another part of this allreduce failed")
            now = time.monotonic()
            wake = min(s.pump(now) for s in active)
            wait = wake - time.monotonic()
            readable = select.select([s.link.sock for s in active], [], [], min(max(0.0, wait), 0.1))[0]
            for s in active:
                if s.link.sock in readable or time.monotonic() >= s.last_progress + s.link.timeout:
                    s.drain(buf)
    except BaseException:
        for s in streams:
            s.link.broken = True
        raise


def overflow_error(chunks: list[int], values: int) -> SwitchOverflowError:
    c = min(chunks)
    return SwitchOverflowError(f"the switch flagged an int32 overflow in {len(chunks)} chunk(s), first chunk {c} "
                               f"(elements {c * values}..{(c + 1) * values - 1}); those sums wrapped")
