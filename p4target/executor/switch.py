"""The v1model switch: runs the compiled stages in simple_switch's order.

parse -> verify_checksum -> ingress -> (drop | unicast | multicast replication) ->
egress -> compute_checksum -> deparse, with the standard_metadata rules BMv2 applies
between stages.  Tables, registers, counters and multicast groups are reachable here for
the control plane (a Python API now; P4Runtime on top of it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Self

from ..frontend import CheckedProgram, load_program
from . import native
from .codegen import CodeGen
from .exceptions import AssertionFailed, LoopLimit, StackIndexError
from .externs import CloneSession, Counter, Meter, Register, ValueSet
from .loops import LOOP_LIMIT
from .profiles import ActionProfile
from .tables import Table

log = logging.getLogger(__name__)

DROP_PORT = 511  # v1model with bit<9> ports: egress_spec 511 means drop
INSTANCE_NORMAL = 0
INSTANCE_INGRESS_CLONE = 1
INSTANCE_EGRESS_CLONE = 2
INSTANCE_RECIRC = 4
INSTANCE_REPLICATION = 5
INSTANCE_RESUBMIT = 6
# BMv2 has no bound: a program that always recirculates loops forever.  We stop after this
# many pipeline passes (ingress or egress runs) per received packet and count a drop.
MAX_PASSES = 64


class Output(NamedTuple):
    port: int
    data: bytes


class MulticastGroups(dict):
    """The PRE's groups, group -> [(egress port, replication id)]: a dict that calls
    ``on_change`` (the native path rebuilds its image) whenever it changes."""

    on_change: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def __setitem__(self, group: int, replicas: list[tuple[int, int]]) -> None:
        super().__setitem__(group, replicas)
        self._changed()

    def __delitem__(self, group: int) -> None:
        super().__delitem__(group)
        self._changed()

    def pop(self, *args: Any) -> Any:
        out = super().pop(*args)
        self._changed()
        return out

    def clear(self) -> None:
        super().clear()
        self._changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()


class ControlPlane:
    """What the control plane reaches on any switch of this target (v1model or TNA): the PRE's
    multicast groups and clone sessions, and the meters' clock.  Subclasses set
    ``lock``, ``multicast_groups``, ``clone_sessions`` and ``hooks``."""

    lock: threading.RLock
    multicast_groups: MulticastGroups
    clone_sessions: dict[int, CloneSession]
    native: native.NativePipeline | None = None
    native_status = "not tried"  # "native", or why the program runs in Python

    @classmethod
    def from_file(cls, path: str | Path, defines: dict[str, str] | None = None) -> Self:
        return cls(load_program(path, defines))  # type: ignore[call-arg]

    def set_multicast_group(self, group: int, replicas: list[tuple[int, int]]) -> None:
        """Replicas are (egress port, replication id), sent in this order."""
        with self.lock:
            self.multicast_groups[group] = list(replicas)

    def delete_multicast_group(self, group: int) -> None:
        with self.lock:
            self.multicast_groups.pop(group, None)

    def set_clone_session(self, session: int, replicas: list[tuple[int, int]], class_of_service: int = 0,
                          packet_length_bytes: int = 0) -> None:
        """Replicas are (egress port, instance); a clone to this session goes to each."""
        with self.lock:
            self.clone_sessions[session] = CloneSession(list(replicas), class_of_service, packet_length_bytes)

    def delete_clone_session(self, session: int) -> None:
        with self.lock:
            self.clone_sessions.pop(session, None)

    def set_clock(self, clock: Callable[[], float]) -> None:
        """The meters' time source, in seconds; microseconds count from this call, like
        BMv2's from its start."""
        start = clock()
        self.hooks.micros = lambda: int((clock() - start) * 1_000_000)


class Blueprint:
    """What every switch of one program is built from, made once: the program's code generation
    (the generated code compiled, the state list's layout, pristine runtime objects) and, when
    the first switch asks, its native image (the C and its library).

    A simulated fabric starts hundreds of switches of one program, and generating the code and
    the C again was most of each start; ``DeviceConfigCache`` keeps one blueprint per program.
    No switch runs the pristine objects: each gets a copy (``Generated.copy``) and its own native
    context, so every switch's state is its own.  TNA's is ``tna_switch.TnaBlueprint``."""

    codegen: type[CodeGen] = CodeGen
    arch = "v1model"

    def __init__(self, prog: CheckedProgram) -> None:
        self.prog = prog
        self.cg = self.codegen(prog)
        self.generated = self.cg.generate()
        self._native: dict[str, tuple[native.NativeImage | None, str]] = {}
        self._lock = threading.Lock()  # the servers of one process may build switches in several threads

    def switch(self, use_native: bool = True) -> ControlPlane:
        return Switch(self.prog, use_native, self)

    def native_image(self, defines: dict[str, Any]) -> tuple[native.NativeImage | None, str]:
        """The program's native image with the packet path ``defines`` configures (slots: the same
        for every switch of the program), or None and why the program runs in Python."""
        if not native.enabled():
            return None, "P4TARGET_NATIVE=0"
        key = repr(defines)
        with self._lock:
            if key not in self._native:
                self._native[key] = native.image(self.generated, self.arch, defines)
            return self._native[key]


class Switch(ControlPlane):
    """One v1model switch running one compiled P4 program."""

    def __init__(self, prog: CheckedProgram, use_native: bool = True, blueprint: Blueprint | None = None) -> None:
        """``use_native=False`` runs the Python executor (the reference) even where the
        native path covers the program; ``blueprint``: ``prog``'s, when other switches run it too."""
        blueprint = blueprint or Blueprint(prog)
        gen = blueprint.generated.copy()
        self.source = gen.source
        self.tables: dict[str, Table] = gen.tables
        self.registers: dict[str, Register] = gen.registers
        self.counters: dict[str, Counter] = gen.counters
        self.meters: dict[str, Meter] = gen.meters
        self.value_sets: dict[str, ValueSet] = gen.value_sets
        self.profiles: dict[str, ActionProfile] = gen.profiles  # action profiles and selectors
        self.clone_sessions: dict[int, CloneSession] = {}
        self.multicast_groups = MulticastGroups()
        self.stats = {"received": 0, "sent": 0, "dropped": 0, "internal_errors": 0, "assert_failures": 0,
                      "loop_drops": 0}
        self.lock = threading.RLock()  # control-plane writes vs packets
        self._template = gen.template
        ns = gen.namespace
        self._parse, self._verify, self._ingress = ns["parse"], ns["verify_checksum"], ns["ingress"]
        self._egress, self._compute, self._deparse = ns["egress"], ns["compute_checksum"], ns["deparser"]
        std = gen.std
        self._in_port, self._length, self._instance = std["ingress_port"], std["packet_length"], std["instance_type"]
        self._spec, self._eport, self._mcast = std["egress_spec"], std["egress_port"], std["mcast_grp"]
        self._rid, self._perr = std["egress_rid"], std["parser_error"]
        self.hooks = ns["RT"]  # digests, log_msg, random, the meters' clock
        self.set_clock(time.monotonic)
        self._payload, self._ingress_length = ns["PAYLOAD"], ns["INGRESS_LENGTH"]
        self._slots = gen.intrinsic
        self._field_lists = gen.field_lists
        meta = gen.meta_storage
        self._meta_range = (meta.base, meta.base + meta.size)
        std_base = min(std.values())
        self._std_range = (std_base, max(std.values()) + 1)
        self._len_slot = gen.length_slot  # setValid/setInvalid's packet-length delta
        if gen.intrinsic or gen.uses_payload or gen.length_slot is not None:
            self._run = self._run_v1model  # type: ignore[method-assign]
        if gen.intrinsic or gen.length_slot is not None:
            self.native_status = ("not covered by the native path: clone, resubmit, recirculate, truncate "
                                  "or the packet-length register")
        elif use_native:
            slots = {"SLOT_INGRESS_PORT": self._in_port, "SLOT_LENGTH": self._length,
                     "SLOT_PARSER_ERROR": self._perr, "SLOT_MCAST_GRP": self._mcast, "SLOT_EGRESS_SPEC": self._spec,
                     "SLOT_INSTANCE_TYPE": self._instance, "SLOT_EGRESS_PORT": self._eport,
                     "SLOT_EGRESS_RID": self._rid}
            image, self.native_status = blueprint.native_image(slots)
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
            except AssertionFailed as exc:  # BMv2 aborts the switch process; we drop the packet
                log.error("packet on port %d dropped: %s", port, exc)
                self.stats["assert_failures"] += 1
                return []
            except StackIndexError as exc:  # BMv2 aborts on a run-time index outside the stack
                log.error("packet on port %d dropped: header stack index %s out of bounds", port, exc)
                self.stats["dropped"] += 1
                return []
            except LoopLimit:  # BMv2 would never finish the packet
                log.error("packet on port %d dropped: a for loop ran %d times", port, LOOP_LIMIT)
                self.stats["loop_drops"] += 1
                return []
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
                sent = self._egress_path(copy, eport, payload, len(data))
                if sent is not None:
                    outs.append(sent)
            if not outs:
                self.stats["dropped"] += 1
            return outs
        if S[self._spec] == DROP_PORT:
            self.stats["dropped"] += 1
            return []
        S[self._instance] = INSTANCE_NORMAL  # BMv2 sets it, whatever ingress wrote
        sent = self._egress_path(S, S[self._spec], payload, len(data))
        if sent is None:
            self.stats["dropped"] += 1
            return []
        return [sent]

    def _egress_path(self, S: list, port: int, payload: bytes, length: int) -> Output | None:
        S[self._eport] = port
        S[self._spec] = 0
        S[self._length] = length  # BMv2: the packet-length register, not what ingress wrote
        self._egress(S)
        if S[self._spec] == DROP_PORT:
            return None
        self._compute(S)
        chunks: list[bytes] = []
        self._deparse(S, chunks)
        chunks.append(payload)
        return Output(port, b"".join(chunks))

    # ------------------------------------------------------------------ v1model packet paths
    def _fresh(self, S: list, index: int | None, instance: int) -> list:
        """BMv2's reset_metadata + field-list copy: a new instance keeps only the user
        metadata fields of ``@field_list(index)``; all other metadata reads 0."""
        N = self._template.copy()
        for slot in self._field_lists.get(index, ()) if index is not None else ():
            N[slot] = S[slot]
        N[self._instance] = instance
        return N

    def _reset_metadata(self, C: list) -> None:
        for lo, hi in (self._meta_range, self._std_range):
            C[lo:hi] = self._template[lo:hi]

    def _run_v1model(self, port: int, data: bytes) -> list[Output]:
        """simple_switch's ingress_thread/egress_thread for one received packet and all
        the clones, resubmissions and recirculations it leads to, in BMv2's order."""
        S = self._template.copy()
        S[self._in_port] = port
        work: deque = deque([("in", S, data)])
        outs: list[Output] = []
        passes = 0
        while work:
            passes += 1
            if passes > MAX_PASSES:
                log.warning("packet from port %d: more than %d passes (recirculate/resubmit/clone loop), "
                            "dropped", port, MAX_PASSES)
                self.stats["loop_drops"] += 1
                break
            item = work.popleft()
            if item[0] == "in":
                self._ingress_pass(item[1], item[2], work)
            else:
                sent = self._egress_pass(*item[1:], work)
                if sent is not None:
                    outs.append(sent)
        if not outs:
            self.stats["dropped"] += 1
        return outs

    def _ingress_pass(self, S: list, data: bytes, work: deque) -> None:
        slots = self._slots
        S[self._length] = len(data)
        self._ingress_length[0] = len(data)
        pos, err = self._parse(S, data)
        S[self._perr] = err
        payload = data[pos:]
        self._payload[0] = payload
        self._verify(S)
        self._ingress(S)
        clone = S[slots["clone"]] if "clone" in slots else None
        if clone is not None:
            S[slots["clone"]] = None
            session = self.clone_sessions.get(clone[0])
            if session is not None:  # BMv2 re-parses the packet as it entered this ingress pass
                C = self._template.copy()
                C[self._in_port] = S[self._in_port]
                cpos, _ = self._parse(C, data)
                self._reset_metadata(C)
                for slot in self._field_lists.get(clone[1], ()) if clone[1] is not None else ():
                    C[slot] = S[slot]
                C[self._instance] = INSTANCE_INGRESS_CLONE
                self._clone_replicas(C, session, data[cpos:], len(data), work)
        if "resubmit" in slots and S[slots["resubmit"]] is not None:
            N = self._fresh(S, S[slots["resubmit"]], INSTANCE_RESUBMIT)
            work.append(("in", N, data))
            return
        group = S[self._mcast]
        if group:
            for eport, rid in self.multicast_groups.get(group, ()):
                copy = S.copy()
                for slot in slots.values():  # BMv2 clears a replica's packet registers
                    copy[slot] = None
                copy[self._instance] = INSTANCE_REPLICATION
                copy[self._rid] = rid
                work.append(("eg", copy, eport, payload, len(data), 0))
            return
        if S[self._spec] == DROP_PORT:
            return
        S[self._instance] = INSTANCE_NORMAL
        work.append(("eg", S, S[self._spec], payload, len(data), 0))

    def _clone_replicas(self, C: list, session: CloneSession, payload: bytes, length: int, work: deque) -> None:
        for eport, instance in session.replicas:
            copy = C.copy()
            copy[self._rid] = instance
            work.append(("eg", copy, eport, payload, length, session.packet_length_bytes))

    def _egress_pass(self, S: list, port: int, payload: bytes, length: int, truncate: int,
                     work: deque) -> Output | None:
        slots = self._slots
        S[self._eport] = port
        S[self._spec] = 0
        S[self._length] = length if self._len_slot is None else length + S[self._len_slot]
        self._payload[0] = payload
        self._egress(S)
        clone = S[slots["clone"]] if "clone" in slots else None
        if clone is not None:
            S[slots["clone"]] = None
            session = self.clone_sessions.get(clone[0])
            if session is not None:  # the headers as egress left them, metadata reset
                C = S.copy()
                self._reset_metadata(C)
                for slot in slots.values():
                    C[slot] = None
                for slot in self._field_lists.get(clone[1], ()) if clone[1] is not None else ():
                    C[slot] = S[slot]
                C[self._instance] = INSTANCE_EGRESS_CLONE
                self._clone_replicas(C, session, payload, length, work)
        if S[self._spec] == DROP_PORT:
            return None
        self._payload[0] = payload
        self._compute(S)
        chunks: list[bytes] = []
        self._deparse(S, chunks)
        chunks.append(payload)
        packet = b"".join(chunks)
        if "recirculate" in slots and S[slots["recirculate"]] is not None:
            N = self._fresh(S, S[slots["recirculate"]], INSTANCE_RECIRC)
            work.append(("in", N, packet))
            return None
        if "truncate" in slots and S[slots["truncate"]] is not None:  # truncate(): copies start without it
            packet = packet[:S[slots["truncate"]]]
        if truncate:
            packet = packet[:truncate]
        return Output(port, packet)
