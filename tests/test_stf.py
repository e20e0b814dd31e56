"""Every tests/p4/**/X.p4 with an X.stf beside it runs on the built-in target, and on
real BMv2 too when p4c and simple_switch are installed."""

from __future__ import annotations

import importlib.util
import struct
import sys

import pytest

from p4target.executor.switch import Switch
from p4target.ports import pcap_file_header, pcap_record, read_pcap
from p4target.stf import BuiltinTarget, run_stf, run_stf_file, stf_ports
from p4target.stf_bmv2 import bmv2_available, cli_table_add
from p4target.stf_entries import StfError, resolve_entry

from .conftest import P4_DIR

STF_FILES = sorted(P4_DIR.rglob("*.stf"))


@pytest.mark.parametrize("target", ["builtin", "bmv2"])
@pytest.mark.parametrize("stf", STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in STF_FILES])
def test_stf(stf, target):
    if target == "bmv2" and not bmv2_available():
        pytest.skip("real BMv2 (p4c, simple_switch, simple_switch_CLI) is not installed")
    if target == "bmv2" and "tna" in stf.relative_to(P4_DIR).parts:
        pytest.skip("TNA programs run on the built-in target only (BMv2 has no TNA)")
    if target == "bmv2" and "builtin_only" in stf.relative_to(P4_DIR).parts:
        pytest.skip("BMv2 cannot load what p4c writes for this program's construct (its header says why)")
    result = run_stf_file(stf.with_suffix(".p4"), stf, target=target)
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


def test_runner_skips_commands_bmv2s_runner_skips():
    """p4c's bmv2stf.py ignores what it does not know (check_counter, remove, ...); so do we."""
    result = _run(f"packet 1 {PACKET}\ncheck_counter c(1) packets == 2\nexpect 1 {PACKET}")
    assert result.passed and result.ignored == ["line 2: check_counter c(1) packets == 2"]


def test_stf_commands_translate_to_simple_switch_cli():
    """What the BMv2 runner feeds simple_switch_CLI (checked here even without BMv2)."""
    tables = Switch.from_file(P4_DIR / "stf" / "tables.p4").tables

    def add(table, keys, action, args, priority=None):
        return cli_table_add(*resolve_entry(tables, table, keys, action, args), priority)

    assert add("t_exact", [("op", "0x01")], "set_r1", [("v", "0xA1")]) == \
        "table_add MyIngress.t_exact MyIngress.set_r1 1 => 161"
    assert add("t_lpm", [("hdr.d.addr", "0x0A010000/16")], "set_port", [("port", "2")]) == \
        "table_add MyIngress.t_lpm MyIngress.set_port 167837696/16 => 2"
    assert add("t_tern", [("tkey", "0x*1")], "set_r2", [("v", "3")], priority=7) == \
        "table_add MyIngress.t_tern MyIngress.set_r2 1&&&15 => 3 9993"
    with pytest.raises(StfError, match="missing arguments"):
        add("t_exact", [("op", "1")], "set_r1", [])


def test_pcap_records_round_trip(tmp_path):
    frames = [b"\x01\x02", bytes(range(60))]
    path = tmp_path / "p.pcap"
    path.write_bytes(pcap_file_header() + b"".join(pcap_record(f) for f in frames))
    assert read_pcap(path) == frames
    assert read_pcap(tmp_path / "missing.pcap") == []
    for order in "<>":  # nanosecond-stamped files, from either kind of host
        other = tmp_path / f"ns{order == '<'}.pcap"
        other.write_bytes(struct.pack(order + "IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
                          + b"".join(struct.pack(order + "IIII", 0, 0, len(f), len(f)) + f for f in frames))
        assert read_pcap(other) == frames


def test_stf_ports_lists_every_port_used():
    assert stf_ports("packet 3 00\nexpect 1 00\nexpect 3\nadd t k:1 a()") == [1, 3]


def test_stf_command_line_exit_status(tmp_path, capsys):
    from p4target.cli import stf_main

    good = tmp_path / "good.stf"
    good.write_text(f"packet 1 {PACKET}\nexpect 1 {PACKET}$\n")
    bad = tmp_path / "bad.stf"
    bad.write_text(f"packet 1 {PACKET}\nexpect 2 {PACKET}$\n")
    assert stf_main([str(P4_DIR / "register64.p4"), str(good)]) == 0
    assert stf_main([str(P4_DIR / "register64.p4"), str(bad)]) == 1
    assert "never came" in capsys.readouterr().out


def test_ina_vectors_match_their_generator(tmp_path):
    """The committed ina_*.stf files are what tests/p4/gen_ina_stf.py writes today."""
    spec = importlib.util.spec_from_file_location("gen_ina_stf", P4_DIR / "gen_ina_stf.py")
    gen = sys.modules["gen_ina_stf"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(gen)
    for make in gen.VECTORS:
        vec = make()
        vec.write(tmp_path)
        for suffix in (".stf", ".p4"):
            name = vec.name + suffix
            assert (tmp_path / name).read_text() == (P4_DIR / name).read_text(), f"{name}: run gen_ina_stf.py"
