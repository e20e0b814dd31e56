"""What differs between the two aggregation programs, as the controller sees them over P4Runtime.

``p4src/ina.p4`` (v1model) and ``p4src/tofino/ina_tna.p4`` (TNA) have the same tables, keys,
actions, parameters and counter cells (the same job/tree model and wire protocol); only the
P4Runtime names differ (TNA's carry the control instance path, and the ingress
port is TNA's intrinsic metadata), and the pool size is read from a different register
(ina.p4 keeps one bitmap per set, the TNA program one pair of sets per slot).  One
``Program`` per architecture holds those differences, so ``entries.py`` and ``controller.py``
write the same jobs, routes and receivers on either program.  The program is chosen by the
P4Info's ``pkg_info.arch`` ("v1model" or "tna"), by name, or by the program's path.

``p4src/nic.p4``, the streaming NIC's program, is ina.p4 and one table more (``meetings``: the meeting roots
of NTT's optimised topologies, p4src/v1model/meeting.p4): a v1model program the controller writes as
ina.p4, plus that table where a tree meets (``Program.meetings``).  Its P4Info says v1model; the table
tells it apart.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from p4.config.v1 import p4info_pb2

import p4src
from p4target.frontend import load_declarations
from worker import protocol

P4SRC = p4src.ROOT  # the installed package's p4src/ (the checkout's, in an editable install)


class ProgramError(ValueError):
    """An architecture or program this controller does not provision."""


@dataclass(frozen=True)
class Program:
    """One aggregation program's P4Runtime names and how its sizes are read from its P4Info."""

    name: str  # how a network file or a site file asks for it (SwitchAccess.arch): v1model, tna, nic
    arch: str  # the P4Info's pkg_info.arch
    source: Path
    jobs: str  # table: (ingress port, job id, child) -> member | result_from_parent
    member: str
    result_from_parent: str
    ingress_port: str  # the jobs table's ingress-port key
    routes: str  # table: IPv4 /32 -> forward
    forward: str
    receivers: str  # egress table: (job id, receiver) -> address
    address: str
    job_stats: str  # counters
    drops: str
    pool_register: str  # a register with pool_cells_per_slot cells per pool slot
    pool_cells_per_slot: int
    values_source: Path  # the file whose INA_VALUE_COUNT is the program's default INA_VALUES
    program_tables: tuple[str, ...] = ()  # tables the program fills itself (const entries): never written
    recirculation_constant: str | None = None  # the program's constant naming its recirculation port
    keeps_results: bool = False  # result_from_parent names the cell a result is kept in (pool, children, epoch)
    meetings: str | None = None  # table: job id -> meet(peer, group_with_peer), where the program has meeting roots
    meet: str | None = None

    @property
    def max_values(self) -> int:
        """INA_VALUES when none is given: the most a packet of this program carries, so the fast path."""
        return protocol.default_values(self.values_source)

    @property
    def recirculation_port(self) -> int | None:
        """The port the program sends a packet to for another pass: internal to the switch (no link, no route,
        no multicast replica); read from the program's declarations, where -DINA_RECIRC_PORT may change it."""
        return None if self.recirculation_constant is None else _constant(self.source, self.recirculation_constant)

    @property
    def managed_tables(self) -> tuple[str, ...]:
        """The tables the controller fills, and reads back to converge."""
        return (self.routes, self.jobs, self.receivers) + ((self.meetings,) if self.meetings else ())

    def pool_slots(self, p4info: p4info_pb2.P4Info) -> int:
        return _size(p4info.registers, self.pool_register) // self.pool_cells_per_slot

    def job_stat_cells(self, p4info: p4info_pb2.P4Info) -> int:
        return _size(p4info.counters, self.job_stats)


@functools.cache
def _constant(source: Path, name: str) -> int:
    """A top-level constant of a program, read once (a parse and check of the whole program: ~0.2 s)."""
    return load_declarations(source).constants[name]


def _ingress(name: str) -> str:
    return f"TnaIngress.{name}"


V1MODEL = Program(
    name="v1model", arch="v1model", source=p4src.path("ina.p4"),
    jobs="InaIngress.jobs", member="InaIngress.member", result_from_parent="InaIngress.result_from_parent",
    ingress_port="sm.ingress_port",
    routes="InaIngress.ipv4_routes", forward="InaIngress.forward",
    receivers="InaEgress.receivers", address="InaEgress.address",
    job_stats="InaIngress.job_stats", drops="InaIngress.drops",
    pool_register="InaIngress.bitmap", pool_cells_per_slot=2,  # one bitmap per set
    values_source=protocol.PROTOCOL_P4,
    keeps_results=True,
)

TNA = Program(
    name="tna", arch="tna", source=p4src.path("tofino", "ina_tna.p4"),
    jobs=_ingress("job_lookup.jobs"), member=_ingress("job_lookup.member"),
    result_from_parent=_ingress("job_lookup.result_from_parent"),
    ingress_port="ig_intr_md.ingress_port",
    routes=_ingress("forwarding.ipv4_routes"), forward=_ingress("forwarding.forward"),
    receivers="TnaEgress.egress_addressing.receivers", address="TnaEgress.egress_addressing.address",
    job_stats=_ingress("telemetry.job_stats"), drops=_ingress("telemetry.drops"),
    pool_register=_ingress("bitmap.bitmap"), pool_cells_per_slot=1,  # a pair of sets per slot
    values_source=p4src.path("tofino", "values.p4"),
    program_tables=(_ingress("job_lookup.child_bit"),),
    recirculation_constant="RECIRC_PORT",  # p4src/tofino/types.p4: INA_RECIRC_PORT, Tofino 1 pipe 0's
)

NIC = dataclasses.replace(V1MODEL, name="nic", source=p4src.path("nic.p4"), meetings="InaIngress.meetings",
                          meet="InaIngress.meet")

PROGRAMS = {p.name: p for p in (V1MODEL, TNA, NIC)}
ALIASES = {"ina": "v1model", "bmv2": "v1model", "tofino": "tna"}  # what a person may type


def by_arch(arch: str) -> Program:
    """The program a switch runs, by name ("v1model": ina.p4, "tna", "nic"; "ina", "tofino" also accepted)."""
    try:
        return PROGRAMS[ALIASES.get(arch, arch)]
    except KeyError:
        raise ProgramError(f"architecture {arch!r}: the controller provisions {sorted(PROGRAMS)}") from None


def for_p4info(p4info: p4info_pb2.P4Info) -> Program:
    """The program a P4Info describes, by its pkg_info.arch (an empty one is v1model: older P4Infos), and for
    v1model whether it has the NIC's meetings table."""
    program = by_arch(p4info.pkg_info.arch or "v1model")
    if program is V1MODEL and any(t.preamble.name == NIC.meetings for t in p4info.tables):
        return NIC
    return program


def for_path(path: str | Path) -> Program:
    """The program of one of our source files (p4src/ina.p4, p4src/tofino/ina_tna.p4)."""
    resolved = Path(path).resolve()
    for p in PROGRAMS.values():
        if resolved == p.source:
            return p
    known = ", ".join(str(p.source) for p in PROGRAMS.values())
    raise ProgramError(f"{path}: not one of the aggregation programs ({known})")


def _size(objects, name: str) -> int:
    for o in objects:
        if o.preamble.name == name:
            return o.size
    raise ProgramError(f"P4Info has no {name}: not the aggregation program?")
