"""The Tofino program against the real compiler's front and middle ends, where they are installed.

p4c's ``p4test`` with Intel's ``tna.p4`` (from p4c's Tofino backend, ``p4include/``) must accept
``p4src/tofino/ina_tna.p4`` without a warning: the two it gave once (a RegisterAction reading a
control local, the parsers' metadata left unset) are gone, and a new one fails here; so do the
functions whose inlined temporaries p4test thought uninitialized, and the protocol facts this
program has no use for carry `@noWarn("unused")`.  The program takes only INA_VALUES = 64 (its
`#error` says so), so that is the one variant asked for.  Set
INA_TNA_P4INCLUDE to the folder that holds that ``tna.p4``; without it, or without ``p4test`` on
PATH, the test skips (the built-in target's own ``tna.p4`` is tested everywhere else).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .ina_programs import PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
P4TEST = shutil.which("p4test")
INCLUDE = os.environ.get("INA_TNA_P4INCLUDE")


@pytest.mark.skipif(P4TEST is None or not INCLUDE, reason="needs p4test on PATH and INA_TNA_P4INCLUDE (Intel's "
                                                          "tna.p4)")
@pytest.mark.parametrize("values", PROGRAMS["tna"].values)
def test_p4test_accepts_the_tna_program_without_a_warning(tmp_path, values):
    assert (Path(INCLUDE) / "tna.p4").is_file(), f"INA_TNA_P4INCLUDE={INCLUDE} holds no tna.p4"
    done = subprocess.run([P4TEST, "-I", INCLUDE, "-D__TARGET_TOFINO__=1", f"-DINA_VALUES={values}",
                           str(ROOT / "p4src" / "tofino" / "ina_tna.p4")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning" not in done.stderr.lower(), done.stderr[-3000:]
