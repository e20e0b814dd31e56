"""Whatever program text arrives, loading it ends in a working switch or a P4Error with a
location, never a Python traceback; and a loaded program never fails on a packet.

The programs are our own STF programs with one random edit each (a token deleted,
repeated, swapped with its neighbour or replaced by another token of the same file), so
they are mostly almost-valid P4: the inputs that reach the deepest code.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program
from p4target.p4info import build_p4info

from .conftest import P4_DIR

PROGRAMS = sorted((P4_DIR / "stf").glob("*.p4")) + [P4_DIR / "basic.p4"]
EVERY_PROGRAM = sorted({*PROGRAMS, *P4_DIR.glob("*.p4")})
MUTANTS_PER_PROGRAM = 40
_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|#[^\n]*|\"[^\"]*\"|\w+|&&&|\|\+\||\|-\||[<>=!]=|&&|\|\||\+\+|<<|\S",
                    re.S)


def _mutate(text: str, rng: random.Random) -> str:
    spans = [m.span() for m in _TOKEN.finditer(text)
             if not m.group().startswith(("//", "/*", "#"))]
    i = rng.randrange(len(spans))
    lo, hi = spans[i]
    tok = text[lo:hi]
    other_lo, other_hi = spans[rng.randrange(len(spans))]
    other = text[other_lo:other_hi]
    kind = rng.randrange(4)
    if kind == 0:
        new = ""
    elif kind == 1:
        new = f"{tok} {tok}"
    elif kind == 2 and i + 1 < len(spans):
        nlo, nhi = spans[i + 1]
        return text[:lo] + text[nlo:nhi] + text[hi:nlo] + tok + text[nhi:]
    else:
        new = other
    return text[:lo] + new + text[hi:]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_edited_programs_load_or_fail_with_a_location(program: Path, tmp_path: Path) -> None:
    rng = random.Random(program.stem)
    text = program.read_text()
    packet = bytes(rng.randrange(256) for _ in range(96))
    loaded = 0
    for n in range(MUTANTS_PER_PROGRAM):
        path = tmp_path / f"m{n}.p4"
        path.write_text(_mutate(text, rng))
        try:
            prog = load_program(path)
            switch = Switch(prog)
            build_p4info(prog)
        except P4Error as err:
            assert err.loc.line > 0, f"mutant {n}: {err} has no location"
            assert "(internal:" not in str(err), f"mutant {n} of {program.name} met a bug: {err}"
            continue
        loaded += 1
        for port in (0, 1, 2):
            switch.process(port, packet)
        assert switch.stats["internal_errors"] == 0, f"mutant {n} of {program.name} failed on a packet"
    assert loaded < MUTANTS_PER_PROGRAM, "every mutant loaded: the edits did not reach the frontend"


@pytest.mark.parametrize("program", EVERY_PROGRAM, ids=lambda p: p.stem)
def test_random_packets_never_meet_a_bug(program: Path) -> None:
    """Short, long and random packets on any port: dropped or forwarded, never an exception
    inside the generated code (which the switch would count as an internal error)."""
    switch = Switch(load_program(program))
    rng = random.Random(program.name)
    for _ in range(300):
        length = rng.choice([0, 1, 2, 3, 5, 8, 14, 20, 34, 60, rng.randrange(200)])
        switch.process(rng.randrange(4), bytes(rng.randrange(256) for _ in range(length)))
    assert switch.stats["internal_errors"] == 0
