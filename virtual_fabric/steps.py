"""NTT's "transfer steps", counted from a run: the chain of transfers a result comes by, each of which waited
for the one before it.

Every frame of an aggregation packet carries (beside it, not in it) how many circuit transfers led to it.  A
node's output for a round (job id and chunk seq) is one more than the frame it acted on brought: the frame that
completed the sum it sends, so the one it waited for (a switch acts on a frame as it arrives; a host's relay
when it takes the frame into its loop, ``processing``); a host's own contribution starts at 0.  A frame sent on
a link that is not a circuit (a host's bus to its own NIC) adds nothing.  So a result's count is the critical
path in transfers: the steps one after another that its time is made of.  (Inputs that were in before the last
one did not make anyone wait: a meeting end whose peer's half came before its own sends the total on with its
own half's chain, not the peer's round trip.)  Frames are told apart by the object the link carries (``id``), so
a trace needs no change to what the switches and workers see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from virtual_fabric.links import Channel
from worker.protocol import ETH_IP_UDP, Protocol


class StepTrace:
    """Counts on the given channels: ``circuit(channel)`` says whether a transfer on it is a step; each
    channel's sender and receiver are the nodes named in its name ("a -> b", a switch's ports "s-p3")."""

    def __init__(self, channels: Iterable[Channel], circuit: Callable[[Channel], bool], P: Protocol) -> None:
        self.seen: dict[tuple[str, int, int], int] = defaultdict(int)  # (node, job id, seq): the last input's steps
        self.results: dict[tuple[int, int], int] = {}  # (job id, seq): most steps of a result to a host
        self._job = P.field_bytes("job_id")
        self._seq = P.field_bytes("seq")
        self._type = P.field_bytes("msg_type")
        self._result = P.MSG_RESULT
        self.relays: set[str] = set()  # hosts whose frames go to a relay, not a worker: no result counted there
        self._pending: dict[int, int] = {}  # frames delivered to a relay, not yet in its loop: their steps
        for channel in channels:
            self._wrap(channel, circuit(channel))

    def watch(self, circuits: Iterable[Channel]) -> None:
        """More links, every one a circuit (a relay's, built after the fabric)."""
        for channel in circuits:
            self._wrap(channel, True)

    def processing(self, node: str, frame: bytes) -> None:
        """A relay takes a frame into its loop (one a link delivered, or its own worker's: 0 steps): what it sends
        for that round now comes after this frame."""
        key = self._key(frame)
        if key is not None:
            self.seen[(node, *key)] = self._pending.pop(id(frame), 0)

    def result_at(self, node: str, payload: bytes) -> None:
        """A relay hands a result to its own worker (in its loop, no link): the steps that led to ``node``."""
        key = self._key(payload, 0)
        if key is not None:
            self.results[key] = max(self.results.get(key, 0), self.seen.get((node, *key), 0))

    def _key(self, frame: bytes, at: int = ETH_IP_UDP) -> tuple[int, int] | None:
        if len(frame) < at + 12:
            return None
        return (_read(frame, self._job, at), _read(frame, self._seq, at))

    def _wrap(self, channel: Channel, counts: bool) -> None:
        sender, receiver = (node_of(end) for end in channel.name.split(" -> "))
        to_host = "-p" not in channel.name.split(" -> ")[1]
        in_flight: dict[int, int] = {}
        send, deliver = channel.send, channel.deliver

        def traced_send(frame: bytes) -> bool:
            key = self._key(frame)
            if key is not None:
                in_flight[id(frame)] = self.seen.get((sender, *key), 0) + counts
            return send(frame)

        def traced_deliver(frame: bytes) -> None:
            key = self._key(frame)
            steps = in_flight.pop(id(frame), None)
            if key is not None and steps is not None:
                if receiver in self.relays:
                    self._pending[id(frame)] = steps  # the relay acts on it later, in its loop
                else:
                    self.seen[(receiver, *key)] = steps  # a switch acts on it now
                if to_host and receiver not in self.relays and _read(frame, self._type) == self._result:
                    self.results[key] = max(self.results.get(key, 0), steps)
            deliver(frame)

        channel.send, channel.deliver = traced_send, traced_deliver

    def longest(self, job_ids: Iterable[int] | None = None) -> int:
        """The most steps any result (of these job ids) came by."""
        return max(self.counts(job_ids), default=0)

    def counts(self, job_ids: Iterable[int] | None = None) -> dict[int, int]:
        """How many rounds (of these job ids) had their results come by each number of steps (the most a host got)."""
        wanted = None if job_ids is None else set(job_ids)
        out: dict[int, int] = {}
        for (job, _), s in self.results.items():
            if wanted is None or job in wanted:
                out[s] = out.get(s, 0) + 1
        return dict(sorted(out.items()))


def node_of(end: str) -> str:
    """"s3-p2" -> "s3"; a host's name is itself."""
    name, sep, port = end.rpartition("-p")
    return name if sep and port.isdigit() else end


def _read(frame: bytes, field: tuple[int, int], at: int = ETH_IP_UDP) -> int:
    """A whole-byte header field (``Protocol.field_bytes``: offset, size) of the ina header at ``at``."""
    offset, size = field
    return int.from_bytes(frame[at + offset:at + offset + size], "big")
