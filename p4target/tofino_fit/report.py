"""What the fit check found: stages per gress, each stage's tables and stateful ALUs, PHV bits."""

from __future__ import annotations

from dataclasses import dataclass, field

from .limits import (
    PHV_NORMAL_BITS,
    PHV_TAGALONG_BITS,
    PIPE_SALUS,
    PIPE_TABLES,
    SALUS_PER_STAGE,
    STAGES,
    TABLES_PER_STAGE,
)
from .passes import PassUse
from .phv import PhvUse


@dataclass
class StageUse:
    """One gress's part of one stage (the budgets are shared with the other gress)."""

    stage: int
    tables: list[str] = field(default_factory=list)  # unit names
    salus: list[str] = field(default_factory=list)  # register names


@dataclass
class FitReport:
    stages: dict[str, int]  # gress -> stages used
    per_stage: dict[str, list[StageUse]]  # gress -> its stages, in order
    phv: dict[str, PhvUse]  # gress -> bits
    tables: int
    salus: int
    passes: dict[str, list[PassUse]] = field(default_factory=dict)  # gress -> its paths (passes.py)

    @property
    def phv_normal(self) -> int:
        return sum(p.normal for p in self.phv.values())

    @property
    def phv_tagalong(self) -> int:
        return sum(p.tagalong for p in self.phv.values())


def render(report: FitReport) -> str:
    """A table per gress (stage | units | SALUs), then the pipe's totals against Tofino 1's."""
    lines: list[str] = []
    for gress, rows in report.per_stage.items():
        lines.append(f"{gress}: {report.stages[gress]} of {STAGES} stages")
        lines.append("  stage | units | SALUs")
        for row in rows:
            salus = ", ".join(_short(r) for r in row.salus) or "-"
            lines.append(f"  {row.stage:>5} | {len(row.tables):>5} | {len(row.salus)}: {salus}")
        paths = report.passes.get(gress, [])
        if len(paths) > 1:
            lines.append(f"  {len(paths)} paths (passes) through {gress}:")
            lines.append("  chain | last stage | SALUs a stage           | units | taken when")
            for p in paths:
                lines.append(f"  {p.chain:>5} | {p.stages - 1:>10} | {' '.join(map(str, p.salus)) or '-':<23} | "
                             f"{p.tables:>5} | " + " && ".join(p.conditions))
    lines.append(f"logical tables: {report.tables} of {PIPE_TABLES} ({TABLES_PER_STAGE} per stage)")
    lines.append(f"stateful ALUs: {report.salus} of {PIPE_SALUS} ({SALUS_PER_STAGE} per stage)")
    lines.append(f"PHV: {report.phv_normal} of {PHV_NORMAL_BITS} normal bits, {report.phv_tagalong} of "
                 f"{PHV_TAGALONG_BITS} tag-along bits ("
                 + ", ".join(f"{g} {p.normal} + {p.tagalong}" for g, p in report.phv.items()) + ")")
    return "\n".join(lines)


def _short(register: str) -> str:
    """A register's path without its gress control's name."""
    return register.partition(".")[2] or register
