"""Would a TNA program fit one Tofino 1 pipe?  A conservative guard, not bf-p4c.

``check(prog)`` returns a ``FitReport`` or raises a ``P4Error``
(``file:line:col: tofino: <resource>: <count> > <limit>``) at the construct that goes over.
It counts logical tables, stateful ALUs and stages as units.py / placement.py model them,
PHV bits as phv.py does, and each register and RegisterAction against one stateful ALU
(salu.py).  It does not model what bf-p4c may do to make a program fit or not fit: table
merging and splitting, PHV container packing and liveness overlap, action data, SRAM/TCAM,
hash units, crossbars, parser limits (docs/tofino-fit.md).  ``P4TARGET_TOFINO_FIT=0`` turns
the check off where a switch is loaded (``enabled``).
"""

from __future__ import annotations

import os

from ..frontend.program import CheckedProgram
from .fit import check
from .report import FitReport, render

__all__ = ["FitReport", "check", "enabled", "render"]


def enabled() -> bool:
    """Whether loading a TNA switch runs the check (``P4TARGET_TOFINO_FIT=0``: it does not)."""
    return os.environ.get("P4TARGET_TOFINO_FIT", "1") != "0"


def check_if_enabled(prog: CheckedProgram, wanted: bool = True) -> None:
    if wanted and enabled() and prog.arch == "tna":
        check(prog)
