"""The v1model switch: runs the compiled stages in simple_switch's order.

parse -> verify_checksum -> ingress -> (drop | unicast | multicast replication) ->
egress -> compute_checksum -> deparse, with the standard_metadata rules BMv2 applies
between stages.  Tables, registers, counters and multicast groups are reachable here for
the control plane (a Python API now; P4Runtime on top of it).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import NamedTuple

from ..frontend import CheckedProgram, load_program
from .codegen import CodeGen
from .externs import Counter, Register
from .tables import Table

log = logging.getLogger(__name__)

DROP_PORT = 511  # v1model with bit<9> ports: egress_spec 511 means drop
INSTANCE_NORMAL = 0
INSTANCE_REPLICATION = 5


class Output(NamedTuple):
    port: int
    data: bytes


class Switch:
    """One v1model switch running one compiled P4 program."""

    def __init__(self, prog: CheckedProgram) -> None:
        gen = CodeGen(prog).generate()
        self.source = gen.source
        self.tables: dict[str, Table] = gen.tables
        self.registers: dict[str, Register] = gen.registers
        self.counters: dict[str, Counter] = gen.counters
        self.multicast_groups: dict[int, list[tuple[int, int]]] = {}  # group -> [(port, rid)]
        self.stats = {"received": 0, "sent": 0, "dropped": 0, "internal_errors": 0}
        self.lock = threading.RLock()  # control-plane writes vs packets
        self._template = gen.template
        ns = gen.namespace
        self._parse, self._verify, self._ingress = ns["parse"], ns["verify_checksum"], ns["ingress"]
        self._egress, self._compute, self._deparse = ns["egress"], ns["compute_checksum"], ns["deparser"]
        std = gen.std
        self._in_port, self._length, self._instance = std["ingress_port"], std["packet_length"], std["instance_type"]
        self._spec, self._eport, self._mcast = std["egress_spec"], std["egress_port"], std["mcast_grp"]
        self._rid, self._perr = std["egress_rid"], std["parser_error"]

    @classmethod
    def from_file(cls, path: str | Path, defines: dict[str, str] | None = None) -> Switch:
        return cls(load_program(path, defines))

    # ------------------------------------------------------------------ control plane
    def set_multicast_group(self, group: int, replicas: list[tuple[int, int]]) -> None:
        """Replicas are (egress port, replication id), sent in this order."""
        with self.lock:
            self.multicast_groups[group] = list(replicas)

    def delete_multicast_group(self, group: int) -> None:
        with self.lock:
            self.multicast_groups.pop(group, None)

    # ------------------------------------------------------------------ data plane
    def process(self, port: int, data: bytes) -> list[Output]:
        """Run one packet received on ``port``; return the packets it sends."""
        with self.lock:
            self.stats["received"] += 1
            try:
                out = self._run(port, data)
            except Exception:  # a bug in the target must not take the switch down
                log.exception("internal error while processing a packet on port %d", port)
                self.stats["internal_errors"] += 1
                return []
            self.stats["sent"] += len(out)
            return out

    def _run(self, port: int, data: bytes) -> list[Output]:
        S = self._template.copy()
        S[self._in_port] = port
        S[self._length] = len(data)
        pos, err = self._parse(S, data)
        S[self._perr] = err
        payload = data[pos:]
        self._verify(S)
        self._ingress(S)
        group = S[self._mcast]
        if group:
            outs = []
            for eport, rid in self.multicast_groups.get(group, ()):
                copy = S.copy()
                copy[self._instance] = INSTANCE_REPLICATION
                copy[self._rid] = rid
                sent = self._egress_path(copy, eport, payload)
                if sent is not None:
                    outs.append(sent)
            if not outs:
                self.stats["dropped"] += 1
            return outs
        if S[self._spec] == DROP_PORT:
            self.stats["dropped"] += 1
            return []
        sent = self._egress_path(S, S[self._spec], payload)
        if sent is None:
            self.stats["dropped"] += 1
            return []
        return [sent]

    def _egress_path(self, S: list, port: int, payload: bytes) -> Output | None:
        S[self._eport] = port
        S[self._spec] = 0
        self._egress(S)
        if S[self._spec] == DROP_PORT:
            return None
        self._compute(S)
        chunks: list[bytes] = []
        self._deparse(S, chunks)
        chunks.append(payload)
        return Output(port, b"".join(chunks))
