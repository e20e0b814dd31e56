"""The exceptions generated code raises, one class per ``ir.Exc`` kind, in one place.

The IR names an exception by its kind (``ir.Raise(ir.Exc.LOOP_LIMIT)``); ``python.py`` prints the
class's name, the generated module's namespace binds the class by that name, and the switches
catch it.  ``native/lower.py`` maps each kind to a jump (``EXIT``) or a drop reason instead.
``stack_index`` is the bounds check generated code calls, raising ``StackIndexError``.
"""

from __future__ import annotations

from .ir import Exc


class ExitBlock(Exception):
    """Raised by P4 ``exit``: ends the current control (ingress/egress) at once."""


class LoopLimit(Exception):
    """A ``for`` loop ran ``loops.LOOP_LIMIT`` iterations: the packet is dropped."""


class AssertionFailed(Exception):
    """A v1model assert/assume failed: the switch logs it and drops the packet (BMv2 aborts)."""


class RegisterConflict(Exception):
    """A packet reached one Register through a second RegisterAction execution: Tofino's
    stateful ALU touches a register once per packet, so such a program cannot be mapped."""


class StackIndexError(Exception):
    """A run-time header stack index outside the stack: the packet is dropped (raised by
    ``stack_index``, which generated code calls, not by an ``ir.Raise``)."""


def stack_index(i: int, size: int) -> int:
    """Bounds check for a run-time stack index (generated code calls it)."""
    if 0 <= i < size:
        return i
    raise StackIndexError(i)


CLASS: dict[Exc, type[Exception]] = {
    Exc.EXIT: ExitBlock, Exc.LOOP_LIMIT: LoopLimit, Exc.ASSERTION: AssertionFailed,
    Exc.REGISTER_CONFLICT: RegisterConflict,
}
