"""Every tests/p4/**/X.p4 with an X.stf beside it runs on the built-in target."""

from __future__ import annotations

import pytest

from p4target.executor.switch import Switch
from p4target.stf import BuiltinTarget, StfError, run_stf, run_stf_file

from .conftest import P4_DIR

STF_FILES = sorted(P4_DIR.rglob("*.stf"))


@pytest.mark.parametrize("stf", STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in STF_FILES])
def test_stf(stf):
    result = run_stf_file(stf.with_suffix(".p4"), stf)
    assert result.passed, "\n".join(result.failures)
    assert result.packets_sent > 0


def _run(text: str):
    return run_stf(text, BuiltinTarget(Switch.from_file(P4_DIR / "register64.p4")))


PACKET = "00000001" + "00000002" * 64


def test_runner_detects_wrong_and_missing_packets():
    assert _run(f"packet 1 {PACKET}\nexpect 1 {PACKET}$").passed
    assert _run(f"packet 1 {PACKET}\nexpect 1 0000000*$").failures, "'$' demands the exact length"
    assert _run(f"packet 1 {PACKET}\nexpect 1 0000000*").passed, "without '$' a prefix matches"
    wrong = _run(f"packet 1 {PACKET}\nexpect 1 00000002")
    assert "mismatch" in wrong.failures[0]
    assert "never came" in _run(f"packet 1 {PACKET}\nexpect 2 {PACKET}").failures[-1]
    assert "unexpected packet" in _run(f"packet 1 {PACKET}").failures[0]


def test_runner_rejects_unknown_commands():
    with pytest.raises(StfError, match="line 2"):
        _run(f"packet 1 {PACKET}\nfrobnicate 3")
