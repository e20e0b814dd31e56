"""tests/ina_programs.py itself: a program that does not load fails its tests, never skips them.

The TNA program is broken on purpose in a copy of p4src/ (the real one is not touched), and
the loader is pointed at the copy: directly (``InaProgram.at``) and, for the whole aggregation
suite, through ``INA_TNA_P4`` in a child pytest.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller import programs
from tests.ina_programs import P4SRC, PROGRAMS, TNA, V1MODEL, ProgramLoadError

ROOT = P4SRC.parent

# Ways to break ina_tna.p4, whatever it holds: (text before it, text after it).
BREAKS = {
    "syntax": ("", "\ncontrol Broken((( {\n"),
    "undeclared": ("", "\nconst bit<8> BROKEN = no_such_constant;\n"),
    "include": ('#include "no_such_file.p4"\n', ""),
}


def broken_copy(tmp_path: Path, how: str) -> Path:
    """A copy of p4src/ whose TNA program has one fault; the path of its ina_tna.p4."""
    src = shutil.copytree(P4SRC, tmp_path / "p4src")
    before, after = BREAKS[how]
    target = src / "tofino" / "ina_tna.p4"
    target.write_text(before + target.read_text() + after)
    return target


def test_names_are_the_controllers():
    """The tests write entries under the controller's P4Runtime names (controller/programs.py)."""
    assert PROGRAMS == {"v1model": V1MODEL, "tna": TNA}
    for prog, control in ((V1MODEL, programs.V1MODEL), (TNA, programs.TNA)):
        assert prog.control is control
        for attr in ("jobs", "member", "result_from_parent", "receivers", "address", "routes", "forward",
                     "job_stats", "drops"):
            assert getattr(prog, attr) == getattr(control, attr)


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_broken_program_fails(tmp_path, how):
    prog = TNA.at(broken_copy(tmp_path, how))
    try:
        prog.switch(64)
    except BaseException as err:  # noqa: B036 - pytest's Skipped is a BaseException: it must not be that
        assert isinstance(err, ProgramLoadError), f"{type(err).__name__}: {err}"
        assert str(prog.path) in str(err) and err.__cause__ is not None
    else:
        pytest.fail(f"{how}: a broken ina_tna.p4 loaded")


def test_variant_a_program_does_not_take_is_the_only_skip():
    with pytest.raises(pytest.skip.Exception, match="INA_VALUES"):
        TNA.switch(256)


def test_suite_fails_on_a_broken_program(tmp_path):
    """tests/test_ina.py's TNA tests on a broken copy: every one fails or errors, none is skipped or passes."""
    env = dict(os.environ, INA_TNA_P4=str(broken_copy(tmp_path, "syntax")))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                          "tests/test_ina.py", "-k", "tna and V64"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = run.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    # a test whose ``sw`` fixture raises is an error, one that builds switches itself a failure
    assert set(counts) <= {"failed", "error", "errors", "deselected"}, summary
    assert counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0) > 0, summary
    assert "ProgramLoadError" in run.stdout
    failed = set(re.findall(r"^(?:FAILED|ERROR) (\S+)", run.stdout, re.M))
    assert failed and all("tna-V64" in t for t in failed), failed
