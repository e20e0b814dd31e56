"""Write worker/wire_facts.py: protocol.p4's facts as a Python module, so a worker needs no P4 frontend.

The frontend (lark, and cpp for the ``#define``s) reads p4src/protocol.p4 here, at generation
time; a training node then imports plain Python.  Two facts depend on ``-D``: the generator finds
the knobs (``#ifndef X`` / ``#define X default``), which constant each one sets (by loading the
file with another value and seeing what moves), and the values each knob takes (an ``#if`` range
guard, else the constant's bit width), and checks every one of these against the frontend.
Run ``python -m worker.gen_wire`` (``make wire``) after changing protocol.p4; a test checks the
module is current (``render()`` is its text).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import p4src
from p4target.frontend import P4Error, load_declarations
from p4target.frontend.checker import check_declarations
from p4target.frontend.preprocess import preprocess
from p4target.frontend.syntax import parse
from p4target.frontend.types import BitsT

PROTOCOL_P4 = p4src.path("protocol.p4")  # not worker.protocol's: that module imports the one written here
PATH = Path(__file__).with_name("wire_facts.py")
HEADER = "ina_t"


def header_fields(types: dict[str, Any]) -> tuple[tuple[str, int, bool], ...]:
    """ina_t as (name, width in bits, signed) in wire order."""
    fields = []
    for name, t in types[HEADER].fields.items():
        if not isinstance(t, BitsT):
            raise TypeError(f"{HEADER}.{name} is {t}: the protocol uses bit<W>/int<W> fields only")
        fields.append((name, t.width, t.signed))
    return tuple(fields)


def constant_widths(source: Path) -> dict[str, int]:
    """Each top-level constant's width in bits, from its declared type."""
    program = parse(preprocess(source))
    check_declarations(program)  # gives each const its type
    return {d.name: d.type.width for d in program.decls if isinstance(getattr(d, "type", None), BitsT)}


def knobs(text: str) -> dict[str, int]:
    """The ``-D`` names with a default (``#ifndef X`` then ``#define X N``) and that default."""
    return {m[1]: int(m[2], 0) for m in re.finditer(r"#ifndef (\w+)\s*\n\s*#define \1[ \t]+(\w+)", text)}


def knob_range(text: str, knob: str, width: int) -> tuple[tuple[int, int], bool]:
    """The values ``knob`` takes: its ``#if X < lo || X > hi`` guard, else what its constant's width
    holds; and whether the guard is there (the frontend then refuses the values outside)."""
    guard = re.search(rf"#if {knob} < (\w+) \|\| {knob} > (\w+)", text)
    return ((int(guard[1], 0), int(guard[2], 0)) if guard else (0, (1 << width) - 1)), guard is not None


def _takes(source: Path, knob: str, value: int) -> bool:
    """Whether the frontend reads ``source`` with ``-Dknob=value``."""
    try:
        load_declarations(source, {knob: str(value)})
    except P4Error:
        return False
    return True


def _constant_of(source: Path, knob: str, default: int) -> str:
    """The one constant ``-Dknob`` sets: the file read with another value moves it, and nothing else."""
    base = load_declarations(source)
    probe = default + 1 if default < 2 else default - 1
    moved = load_declarations(source, {knob: str(probe)})
    changed = [k for k, v in moved.constants.items() if v != base.constants[k]]
    same_header = header_fields(moved.types) == header_fields(base.types)
    if len(changed) != 1 or moved.constants[changed[0]] != probe or not same_header:
        raise ValueError(f"-D{knob}={probe} moves {changed or 'no constant'} (or {HEADER}): expected exactly one")
    return changed[0]


def defines(source: Path = PROTOCOL_P4) -> dict[str, tuple[str, int, int]]:
    """-D knob -> (the constant it sets, lowest, highest), each checked against the frontend."""
    text, widths, out = source.read_text(), constant_widths(source), {}
    for knob, default in knobs(text).items():
        constant = _constant_of(source, knob, default)
        (lowest, highest), guarded = knob_range(text, knob, widths[constant])
        inside = _takes(source, knob, lowest) and _takes(source, knob, highest)
        outside = not guarded or not (_takes(source, knob, lowest - 1) or _takes(source, knob, highest + 1))
        if not (0 <= lowest <= default <= highest < 1 << widths[constant] and inside and outside):
            raise ValueError(f"the frontend does not take {knob} as {lowest}..{highest} (default {default})")
        out[knob] = (constant, lowest, highest)
    return out


def _lines(rows: list[str]) -> str:
    return "\n".join(f"    {row}," for row in rows)


def render() -> str:
    decls = load_declarations(PROTOCOL_P4)
    fields = [f'("{name}", {width}, {signed})' for name, width, signed in header_fields(decls.types)]
    constants = [f'"{name}": {int(value)}' for name, value in decls.constants.items()]
    knobs_ = [f'"{knob}": ("{constant}", {lo}, {hi})' for knob, (constant, lo, hi) in defines().items()]
    return f'''"""Generated by worker/gen_wire.py from p4src/protocol.p4: do not edit (``make wire`` writes it again).

The wire format's facts, so a worker reads them with no P4 frontend (no lark, no cpp): worker/protocol.py
builds its ``Protocol`` from them.  A test checks that this file is current and agrees with the frontend.
"""

# {HEADER} in wire order: (name, width in bits, signed)
FIELDS = (
{_lines(fields)}
)

# The constants, at the -D knobs' defaults
CONSTANTS = {{
{_lines(constants)}
}}

# -D knob -> (the constant it sets, the lowest and highest value it takes)
DEFINES = {{
{_lines(knobs_)}
}}
'''


if __name__ == "__main__":
    PATH.write_text(render())
