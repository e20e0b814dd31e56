"""The TNA switch (Tofino 1, one pipeline): the six compiled blocks and the traffic manager.

Per packet, as Intel's tna.p4 documents Tofino:
- the ingress parser sees ``ingress_intrinsic_metadata_t`` (8 bytes: ingress_port) and the
  port metadata (``PORT_METADATA_SIZE``, 8 zero bytes) before the frame; it must extract
  the first and skip (advance) the second;
- a parser error sets ``parser_err`` (NO_MATCH, PARTIAL_HDR flags).  As on Tofino, the
  ingress parser drops an erroneous packet unless the program reads ``parser_err``;
- ingress, then the ingress deparser (checksums are computed there) build the packet the
  traffic manager gets;
- the TM: ``ig_dprsr_md.drop_ctl`` bit 0 drops; a written ``ucast_egress_port`` sends one
  copy there (an unwritten one sends none); ``mcast_grp_a`` and ``mcast_grp_b`` (non-zero)
  send one copy per node (port, rid) of the group, egress seeing ``egress_rid`` and
  ``egress_rid_first`` (1 on the group's first copy); ``bypass_egress`` sends the copies
  out as the ingress deparser left them;
- per copy, the egress parser sees ``egress_intrinsic_metadata_t`` (27 bytes: egress_port,
  egress_rid, egress_rid_first, pkt_length) before the packet; egress; ``eg_dprsr_md.drop_ctl``
  bit 0 drops; the egress deparser's headers then the unparsed payload leave on egress_port;
- a copy leaving on a recirculation port (68-71) enters ingress again on that port, at most
  ``MAX_PASSES`` times per received packet.
A RegisterAction executed on a register the packet has already reached (in the same
gress) raises at run time: the packet is dropped and counted in ``stats["register_conflicts"]``
(the load-time fit check, p4target/tofino_fit, refuses the two dependent accesses it can see, as
Tofino's compiler would; with ``check_fit=False`` this is what is left).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from ..frontend import CheckedProgram, ast, load_program
from ..tofino_fit import check_if_enabled
from .algorithms import pack_bits
from .exceptions import LoopLimit, RegisterConflict, StackIndexError
from .externs import CloneSession
from .generated import Generated
from .loops import LOOP_LIMIT
from .switch import MAX_PASSES, Blueprint, ControlPlane, MulticastGroups, Output, Switch
from .tna_codegen import UNSET, TnaCodeGen

log = logging.getLogger(__name__)

PORT_METADATA_BYTES = 8
# Tofino 1, pipe 0: ports 68-71 loop back into ingress (the recirculation ports); tna.h gets the range
# as RECIRC_PORT_FIRST/LAST (_attach_native).
RECIRCULATION_PORTS = range(68, 72)
# egress_intrinsic_metadata_t's field widths (tofino.p4), and where the TM's values go.
_EG_WIDTHS = (7, 9, 5, 19, 6, 2, 14, 18, 5, 19, 6, 2, 8, 14, 18, 16, 7, 1, 3, 5, 5, 3, 7, 1, 16)
_EG_PORT, _EG_RID, _EG_RID_FIRST, _EG_LENGTH = 1, 15, 17, 24
# Parser errors as Tofino's parser_err flags (PARSER_ERROR_*).
_PARSER_FLAGS = {"NoMatch": 0x1, "PacketTooShort": 0x2, "HeaderTooShort": 0x2, "StackOutOfBounds": 0x40,
                 "ParserTimeout": 0x8, "CounterRange": 0x4, "Timeout": 0x10, "PhvOwner": 0x80,
                 "MultiWrite": 0x100}


def ingress_metadata_bytes(port: int) -> bytes:
    """ingress_intrinsic_metadata_t (resubmit_flag 0, packet_version 0, port, tstamp 0)
    followed by the port metadata the parser skips."""
    return ((port & 0x1FF) << 48).to_bytes(8, "big") + bytes(PORT_METADATA_BYTES)


def egress_metadata_bytes(port: int, rid: int, rid_first: int, length: int) -> bytes:
    values = [0] * len(_EG_WIDTHS)
    values[_EG_PORT], values[_EG_RID], values[_EG_RID_FIRST], values[_EG_LENGTH] = port, rid, rid_first, length
    return pack_bits(values, _EG_WIDTHS)


def _reads_parser_err(prog: CheckedProgram) -> bool:
    """Whether any block mentions ``.parser_err`` (bf-p4c then keeps erroneous packets)."""
    from ..p4info import _nodes  # noqa: PLC0415 - a small shared tree walk

    return any(isinstance(n, ast.Member) and n.member == "parser_err" for n in _nodes(prog.program.decls))


class TnaBlueprint(Blueprint):
    """``Blueprint`` for TNA programs: also the intrinsic metadata's slots and whether the program
    reads ``parser_err``, which every switch of the program needs."""

    codegen = TnaCodeGen
    arch = "tna"
    cg: TnaCodeGen

    def __init__(self, prog: CheckedProgram, check_fit: bool = True) -> None:
        check_if_enabled(prog, check_fit)  # refuse a program Tofino 1 cannot hold (tofino_fit)
        super().__init__(prog)
        self.keep_errors = _reads_parser_err(prog)

    def slot(self, which: str, name: str) -> int | None:
        return self.cg.slot(which, name)

    def switch(self, use_native: bool = True) -> TnaSwitch:
        return TnaSwitch(self.prog, use_native, self)


class TnaSwitch(ControlPlane):
    """One Tofino pipeline running one compiled TNA program; the same interface as ``Switch``."""

    arch = "tna"

    def __init__(self, prog: CheckedProgram, use_native: bool = True, blueprint: TnaBlueprint | None = None,
                 check_fit: bool = True) -> None:
        blueprint = blueprint or TnaBlueprint(prog, check_fit)
        gen = blueprint.generated.copy()
        self.source = gen.source
        self.tables = gen.tables
        self.registers = gen.registers
        self.counters = gen.counters
        self.meters = gen.meters
        self.value_sets = gen.value_sets
        self.clone_sessions: dict[int, CloneSession] = {}  # accepted from P4Runtime; Mirror is refused
        self.multicast_groups = MulticastGroups()
        self.stats = {"received": 0, "sent": 0, "dropped": 0, "internal_errors": 0, "register_conflicts": 0,
                      "parser_drops": 0, "loop_drops": 0}
        self.lock = threading.RLock()
        self._template = gen.template
        ns = gen.namespace
        self._ig_parse, self._ingress, self._ig_deparse = ns["ig_parse"], ns["ingress"], ns["ig_deparser"]
        self._eg_parse, self._egress, self._eg_deparse = ns["eg_parse"], ns["egress"], ns["eg_deparser"]
        self.hooks = ns["RT"]
        self.set_clock(time.monotonic)
        self._length = gen.std["packet_length"]
        self._errors = list(prog.errors)
        self._keep_errors = blueprint.keep_errors
        self._ig_perr = blueprint.slot("ig_prsr_md", "parser_err")
        self._eg_perr = blueprint.slot("eg_prsr_md", "parser_err")
        self._ig_drop = blueprint.slot("ig_dprsr_md", "drop_ctl")
        self._eg_drop = blueprint.slot("eg_dprsr_md", "drop_ctl")
        self._ucast = blueprint.slot("ig_tm_md", "ucast_egress_port")
        self._bypass = blueprint.slot("ig_tm_md", "bypass_egress")
        groups = (blueprint.slot("ig_tm_md", "mcast_grp_a"), blueprint.slot("ig_tm_md", "mcast_grp_b"))
        self._groups = [s for s in groups if s is not None]
        if use_native:
            self._attach_native(blueprint, gen)

    def _attach_native(self, blueprint: TnaBlueprint, gen: Generated) -> None:
        def slot(which: str, name: str) -> int:
            found = blueprint.slot(which, name)
            return -1 if found is None else found

        defines = {
            "SLOT_LENGTH": self._length, "SLOT_IG_PARSER_ERR": slot("ig_prsr_md", "parser_err"),
            "SLOT_EG_PARSER_ERR": slot("eg_prsr_md", "parser_err"), "SLOT_IG_DROP_CTL": slot("ig_dprsr_md", "drop_ctl"),
            "SLOT_EG_DROP_CTL": slot("eg_dprsr_md", "drop_ctl"),
            "SLOT_UCAST_EGRESS_PORT": slot("ig_tm_md", "ucast_egress_port"),
            "SLOT_BYPASS_EGRESS": slot("ig_tm_md", "bypass_egress"),
            "SLOT_MCAST_GRP_A": slot("ig_tm_md", "mcast_grp_a"), "SLOT_MCAST_GRP_B": slot("ig_tm_md", "mcast_grp_b"),
            "KEEP_PARSER_ERRORS": int(self._keep_errors),
            "PARSER_FLAGS": [self._flags(i) for i in range(len(self._errors))],
            "EG_WIDTHS": _EG_WIDTHS, "EG_PORT_FIELD": _EG_PORT, "EG_RID_FIELD": _EG_RID,
            "EG_RID_FIRST_FIELD": _EG_RID_FIRST, "EG_LENGTH_FIELD": _EG_LENGTH,
            "RECIRC_PORT_FIRST": RECIRCULATION_PORTS[0], "RECIRC_PORT_LAST": RECIRCULATION_PORTS[-1],
            "MAX_PASSES": MAX_PASSES,
        }
        image, self.native_status = blueprint.native_image(defines)
        if image is not None:
            self.native = image.pipeline(gen, self.multicast_groups, Output, tuple(self.stats))
            self.stats = self.native.stats  # type: ignore[assignment]

    # ------------------------------------------------------------------ data plane
    def process(self, port: int, data: bytes) -> list[Output]:
        """Run one packet received on ``port``; return the packets it sends."""
        with self.lock:
            if self.native is not None:
                return self.native.process(port, data)
            self.stats["received"] += 1
            try:
                out = self._run(port, data)
            except RegisterConflict as exc:
                log.error("packet on port %d dropped: register %s reached by a second RegisterAction "
                          "execution (Tofino allows one per packet)", port, exc)
                self.stats["register_conflicts"] += 1
                self.stats["dropped"] += 1
                return []
            except StackIndexError as exc:
                log.error("packet on port %d dropped: header stack index %s out of bounds", port, exc)
                self.stats["dropped"] += 1
                return []
            except LoopLimit:
                log.error("packet on port %d dropped: a for loop ran %d times", port, LOOP_LIMIT)
                self.stats["loop_drops"] += 1
                return []
            except Exception:  # a bug in the target must not take the switch down
                log.exception("internal error while processing a packet on port %d", port)
                self.stats["internal_errors"] += 1
                return []
            if not out:
                self.stats["dropped"] += 1
            self.stats["sent"] += len(out)
            return out

    def _flags(self, err: int) -> int:
        return _PARSER_FLAGS.get(self._errors[err], 0x1) if err else 0

    def _run(self, port: int, data: bytes) -> list[Output]:
        """One received packet and its recirculations: a copy that leaves on a recirculation
        port enters ingress again on that port, as Tofino's loopback does."""
        outs: list[Output] = []
        work = [(port, data)]
        for _ in range(MAX_PASSES):
            for out in self._pass(*work.pop(0)):
                (work if out.port in RECIRCULATION_PORTS else outs).append(out)
            if not work:
                return outs
        log.warning("packet from port %d: more than %d recirculations, dropped", port, MAX_PASSES)
        self.stats["loop_drops"] += 1
        return outs

    def _pass(self, port: int, data: bytes) -> list[Output]:
        S = self._template.copy()
        S[self._length] = len(data)
        buf = ingress_metadata_bytes(port) + data
        pos, err = self._ig_parse(S, buf)
        if err:
            if not self._keep_errors:
                self.stats["parser_drops"] += 1
                return []
            if self._ig_perr is not None:
                S[self._ig_perr] = self._flags(err)
        payload = buf[pos:]
        self._ingress(S)
        chunks: list[bytes] = []
        self._ig_deparse(S, chunks)
        if self._ig_drop is not None and S[self._ig_drop] & 1:
            return []
        packet = b"".join(chunks) + payload
        copies: list[tuple[int, int, int]] = []  # (port, rid, rid_first)
        if self._ucast is not None and S[self._ucast] is not UNSET:
            copies.append((S[self._ucast], 0, 0))
        for slot in self._groups:
            group = S[slot]
            if group:
                nodes = self.multicast_groups.get(group, ())
                copies += [(p, rid, int(k == 0)) for k, (p, rid) in enumerate(nodes)]
        if self._bypass is not None and S[self._bypass]:
            return [Output(p, packet) for p, _, _ in copies]
        outs = []
        for eport, rid, first in copies:
            sent = self._egress_path(eport, rid, first, packet)
            if sent is not None:
                outs.append(sent)
        return outs

    def _egress_path(self, port: int, rid: int, first: int, packet: bytes) -> Output | None:
        E = self._template.copy()
        E[self._length] = len(packet)
        buf = egress_metadata_bytes(port, rid, first, len(packet)) + packet
        pos, err = self._eg_parse(E, buf)
        if err and self._eg_perr is not None:
            E[self._eg_perr] = self._flags(err)
        payload = buf[pos:]
        self._egress(E)
        chunks: list[bytes] = []
        self._eg_deparse(E, chunks)
        if self._eg_drop is not None and E[self._eg_drop] & 1:
            return None
        return Output(port, b"".join(chunks) + payload)


def blueprint_for(prog: CheckedProgram, check_fit: bool = True) -> Blueprint:
    """What every switch of ``prog``'s architecture (v1model or TNA) is built from: ``.switch()``.
    A TNA program must fit Tofino 1 (``tofino_fit``) unless ``check_fit`` is False or
    ``P4TARGET_TOFINO_FIT=0``."""
    return TnaBlueprint(prog, check_fit) if prog.arch == "tna" else Blueprint(prog)


def switch_for(prog: CheckedProgram, use_native: bool = True, check_fit: bool = True) -> Switch | TnaSwitch:
    """The switch that runs ``prog``'s architecture (v1model or TNA); ``use_native=False`` runs
    the Python executor even where the native path covers the program."""
    return blueprint_for(prog, check_fit).switch(use_native)  # type: ignore[return-value]


def load_switch(path: str | Path, defines: dict[str, str] | None = None, use_native: bool = True,
                check_fit: bool = True) -> Switch | TnaSwitch:
    return switch_for(load_program(path, defines), use_native, check_fit)
