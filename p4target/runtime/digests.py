"""Digests from the data plane to the primary client, the way PI's DigestMgr does it on BMv2.

A digest is ignored until the controller configures it (DigestEntry INSERT).  Samples are
batched into a DigestList that is sent when it holds ``max_list_size`` samples, when the
first sample has waited ``max_timeout_ns`` (0: at once), and numbered from 1.  A sample
already waiting, or in a sent list not yet acknowledged, is not learned again (BMv2's
learn filter); with ``ack_timeout_ns`` > 0 a list unacknowledged for that long is
forgotten, so its samples can be learned again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2, p4types_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from .environment import MACHINE, Cancellable, Environment
from .requests import DELETE, INSERT, MODIFY, encode_int, rpc_error

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Digest:
    info: p4info_pb2.Digest
    config: p4runtime_pb2.DigestEntry | None = None
    data: list[p4data_pb2.P4Data] = field(default_factory=list)
    waiting: set[tuple] = field(default_factory=set)  # samples in the list being built
    unacked: dict[int, set[tuple]] = field(default_factory=dict)  # list id -> its samples
    next_list: int = 1
    timer: Cancellable | None = None


class DigestManager:
    """Digest configuration, batching and acknowledgements for one committed pipeline."""

    def __init__(self, p4info: p4info_pb2.P4Info, send: Callable[[p4runtime_pb2.DigestList], bool],
                 environment: Environment = MACHINE) -> None:
        """``environment``: the clock of the lists' timestamps and the timers (threads on the real target)."""
        self.environment = environment
        self.type_info = p4info.type_info
        self.send = send  # False when no primary client took the list
        self.digests = {d.preamble.id: _Digest(d) for d in p4info.digests}
        self.by_name = {d.info.preamble.name: d for d in self.digests.values()}
        self.lock = threading.RLock()
        self.stats = {"learned": 0, "filtered": 0, "unconfigured": 0, "lists_sent": 0, "lists_dropped": 0}
        self.closed = False

    def close(self) -> None:
        """The pipeline is gone: stop the timers, drop what is waiting."""
        with self.lock:
            self.closed = True
            for d in self.digests.values():
                self._reset(d)

    # ------------------------------------------------------------------ control plane
    def write(self, kind: int, entry: p4runtime_pb2.DigestEntry) -> None:
        with self.lock:
            d = self.digests.get(entry.digest_id)
            if d is None:
                raise rpc_error("NOT_FOUND", f"{entry.digest_id} is not a valid digest id")
            if kind == INSERT and d.config is not None:
                raise rpc_error("ALREADY_EXISTS", f"digest {entry.digest_id} is already configured")
            if kind in (MODIFY, DELETE) and d.config is None:
                raise rpc_error("NOT_FOUND", f"digest {entry.digest_id} is not configured")
            if kind == DELETE:
                self._reset(d)
                return
            c = entry.config
            if min(c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns) < 0:
                raise rpc_error("INVALID_ARGUMENT", f"digest {entry.digest_id}: negative config values")
            d.config = p4runtime_pb2.DigestEntry()
            d.config.CopyFrom(entry)
            if d.data and (c.max_timeout_ns == 0 or c.max_list_size and len(d.data) >= c.max_list_size):
                self._flush(d)

    def read(self, entry: p4runtime_pb2.DigestEntry) -> Iterator[p4runtime_pb2.DigestEntry]:
        with self.lock:
            if entry.digest_id == 0:  # every configured digest
                found = [d.config for d in self.digests.values() if d.config is not None]
            else:
                d = self.digests.get(entry.digest_id)
                if d is None:
                    raise rpc_error("NOT_FOUND", f"{entry.digest_id} is not a valid digest id")
                if d.config is None:
                    raise rpc_error("NOT_FOUND", f"digest {entry.digest_id} is not configured")
                found = [d.config]
            yield from (p4runtime_pb2.DigestEntry(digest_id=c.digest_id, config=c.config) for c in found)

    def ack(self, ack: p4runtime_pb2.DigestListAck) -> None:
        """An acknowledged list's samples may be learned again; unknown lists are ignored (PI)."""
        with self.lock:
            d = self.digests.get(ack.digest_id)
            if d is not None:
                d.unacked.pop(ack.list_id, None)

    # ------------------------------------------------------------------ data plane
    def learn(self, name: str, receiver: int, values: tuple) -> None:
        """Called by the switch for every digest() a packet makes."""
        with self.lock:
            d = self.by_name.get(name)
            if d is None or d.config is None or self.closed:
                self.stats["unconfigured"] += 1
                return
            if values in d.waiting or any(values in s for s in d.unacked.values()):
                self.stats["filtered"] += 1
                return
            self.stats["learned"] += 1
            d.waiting.add(values)
            d.data.append(self._encode(d.info.type_spec, iter(values)))
            c = d.config.config
            if c.max_timeout_ns == 0 or (c.max_list_size and len(d.data) >= c.max_list_size):
                self._flush(d)
            elif d.timer is None:
                d.timer = self.environment.timer(c.max_timeout_ns / 1e9, lambda: self._timeout(d))

    def _timeout(self, d: _Digest) -> None:
        with self.lock:
            d.timer = None
            if d.data and not self.closed:
                self._flush(d)

    def _flush(self, d: _Digest) -> None:
        if d.timer is not None:
            d.timer.cancel()
            d.timer = None
        list_id = d.next_list
        d.next_list += 1
        msg = p4runtime_pb2.DigestList(digest_id=d.info.preamble.id, list_id=list_id, data=d.data,
                                       timestamp=int(self.environment.clock() * 1e9))
        samples, d.data, d.waiting = d.waiting, [], set()
        ack_timeout = d.config.config.ack_timeout_ns if d.config is not None else 0
        if ack_timeout > 0:
            d.unacked[list_id] = samples
            self.environment.timer(ack_timeout / 1e9, lambda: self._ack_timeout(d, list_id))
        if self.send(msg):
            self.stats["lists_sent"] += 1
        else:
            self.stats["lists_dropped"] += 1
            log.debug("digest list %d of %s dropped: no primary client", list_id, d.info.preamble.name)

    def _ack_timeout(self, d: _Digest, list_id: int) -> None:
        with self.lock:
            d.unacked.pop(list_id, None)

    @staticmethod
    def _reset(d: _Digest) -> None:
        if d.timer is not None:
            d.timer.cancel()
        d.config, d.timer, d.data, d.waiting = None, None, [], set()
        d.unacked.clear()

    # ------------------------------------------------------------------ P4Data
    def _encode(self, spec: p4types_pb2.P4DataTypeSpec, values: Iterator) -> p4data_pb2.P4Data:
        """The digested struct's fields, flattened in declaration order, as P4Data."""
        kind = spec.WhichOneof("type_spec")
        out = p4data_pb2.P4Data()
        if kind == "struct":
            members = out.struct.members
            for m in self.type_info.structs[spec.struct.name].members:
                members.append(self._encode(m.type_spec, values))
        elif kind == "tuple":  # a struct member of a tuple type
            for elem in spec.tuple.members:
                out.tuple.members.append(self._encode(elem, values))
        elif kind == "bool":
            out.bool = bool(next(values))
        elif kind == "bitstring":
            bs = spec.bitstring
            width = bs.int.bitwidth if bs.WhichOneof("type_spec") == "int" else bs.bit.bitwidth
            out.bitstring = encode_int(int(next(values)) % (1 << width))
        elif kind == "serializable_enum":
            width = self.type_info.serializable_enums[spec.serializable_enum.name].underlying_type.bitwidth
            out.enum_value = encode_int(int(next(values)) % (1 << width))
        elif kind == "enum":
            out.enum = self.type_info.enums[spec.enum.name].members[int(next(values))].name
        elif kind == "error":
            out.error = self.type_info.error.members[int(next(values))]
        else:
            raise ValueError(f"digest data of type {kind} cannot be encoded")
        return out
