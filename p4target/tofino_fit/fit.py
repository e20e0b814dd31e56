"""The fit check's order: units, pipe-wide counts, each register's shape, stages, PHV."""

from __future__ import annotations

from ..frontend.errors import as_p4_errors
from ..frontend.program import CheckedProgram
from .limits import ACTIONS_PER_REGISTER, PHV_NORMAL_BITS, PHV_TAGALONG_BITS, PIPE_SALUS, PIPE_TABLES
from .passes import pass_use
from .phv import gress_phv
from .placement import place
from .refusal import over
from .report import FitReport, StageUse
from .salu import check_cell, check_register_action
from .units import RegisterUse, Unit, UnitWalker

GRESSES = ("ingress", "egress")


@as_p4_errors()
def check(prog: CheckedProgram) -> FitReport:
    """The program's use of one Tofino 1 pipe; a P4Error naming the first resource it exceeds."""
    blocks = prog.pipeline.blocks
    walkers = {g: UnitWalker(g) for g in GRESSES}
    units: list[Unit] = []
    for g in GRESSES:
        units += walkers[g].control(blocks[g])
    registers = _registers(units)
    if len(registers) > PIPE_SALUS:
        name, uses = list(registers.items())[PIPE_SALUS]
        raise over(uses[0].register.loc, "stateful ALUs", len(registers), PIPE_SALUS,
                   f"one per register with RegisterActions; {name} is number {PIPE_SALUS + 1}")
    if len(units) > PIPE_TABLES:
        u = units[PIPE_TABLES]
        raise over(u.loc, "logical tables", len(units), PIPE_TABLES, f"{u.name} is number {PIPE_TABLES + 1}")
    _check_registers(registers)
    placement = place(units)
    phv = {g: gress_phv(blocks[f"{g}_parser"], blocks[g], blocks[f"{g}_deparser"], walkers[g]) for g in GRESSES}
    normal = sum(p.normal for p in phv.values())
    total = normal + sum(p.tagalong for p in phv.values())
    where = blocks["ingress"].loc
    if normal > PHV_NORMAL_BITS:
        raise over(where, "PHV normal bits", normal, PHV_NORMAL_BITS, _phv_detail(phv))
    if total > PHV_NORMAL_BITS + PHV_TAGALONG_BITS:
        raise over(where, "PHV bits", total, PHV_NORMAL_BITS + PHV_TAGALONG_BITS, _phv_detail(phv))
    per_stage: dict[str, list[StageUse]] = {}
    for g in GRESSES:
        rows = per_stage[g] = []
        for node in placement.nodes:
            if node.gress != g:
                continue
            while len(rows) <= node.stage:
                rows.append(StageUse(len(rows)))
            rows[node.stage].tables += [u.name for u in node.units]
            rows[node.stage].salus += sorted(node.registers)
    passes = {g: pass_use(walkers[g].forks, [u for u in units if u.gress == g], placement.nodes) for g in GRESSES}
    return FitReport({g: len(per_stage[g]) for g in GRESSES}, per_stage, phv, len(units), len(registers), passes)


def _registers(units: list[Unit]) -> dict[str, list[RegisterUse]]:
    """Each register executed, in the order the pipe first reaches it, with its uses."""
    found: dict[str, list[RegisterUse]] = {}
    for u in units:
        for name, use in u.registers.items():
            found.setdefault(name, []).append(use)
    return found


def _check_registers(registers: dict[str, list[RegisterUse]]) -> None:
    checked: set[int] = set()
    for name, uses in registers.items():
        check_cell(name, uses[0].register)
        actions = sorted({id(u.action): u.action for u in uses}.values(), key=lambda a: (a.loc.line, a.loc.col))
        if len(actions) > ACTIONS_PER_REGISTER:
            raise over(actions[ACTIONS_PER_REGISTER].loc, f"RegisterActions on register {name}", len(actions),
                       ACTIONS_PER_REGISTER)
        for ra in actions:
            if id(ra) not in checked:
                checked.add(id(ra))
                check_register_action(ra)


def _phv_detail(phv: dict) -> str:
    return ", ".join(f"{g}: {p.normal} normal + {p.tagalong} tag-along" for g, p in phv.items())
