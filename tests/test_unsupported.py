"""Valid P4-16 that the built-in target does not run is refused when the program loads,
with ``file:line:col: <construct> is not supported by the built-in target``: never a
traceback, never a switch that would run it wrongly.  Each case is a construct p4c
accepts; README's "Not supported" line lists the same."""

from __future__ import annotations

import re

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program

from .conftest import PRELUDE

TABLE = "action a() {{ }} table t {{ key = {{ hdr.h.a : {kind}; }} actions = {{ a; }} {prop} }}"

CASES = {
    "action profile": dict(locals=TABLE.format(kind="exact", prop="implementation = action_profile(32w128);"),
                           body="t.apply();", line=13),
    "action selector": dict(
        locals=TABLE.format(kind="selector", prop="implementation = action_selector(HashAlgorithm.crc16, "
                                                  "32w64, 32w16);"),
        body="t.apply();", line=13),
    "an extern object the program declares": dict(decls="extern Widget { Widget(); void poke(); }",
                                                  locals="Widget() w;", body="w.poke();", line=13),
    "an extern function the program declares": dict(decls="extern void poke(in bit<8> x);",
                                                    body="poke(hdr.h.a);", line=14),
    "Checksum16 (deprecated in v1model)": dict(locals="Checksum16() ck;", body="", line=13),
    "a register of headers": dict(locals="register<h_t>(4) r;", body="r.write(0, hdr.h);", line=14),
    "a custom CRC": dict(locals="bit<16> x;", body="hash(x, HashAlgorithm.crc16_custom, 16w0, { hdr.h.a }, 16w8);",
                         line=14),
    "old resubmit with a field list": dict(body="resubmit(meta);", line=14),
    "a table keyed on an error": dict(locals=TABLE.format(kind="exact", prop="").replace(
        "hdr.h.a", "sm.parser_error"), body="t.apply();", line=13),
    "largest_priority_wins = false": dict(
        locals="action a() { } table t { key = { hdr.h.a : ternary; } actions = { a; } "
               "largest_priority_wins = false; entries = { priority = 1 : 8w1 &&& 8w1 : a(); } }",
        body="t.apply();", line=13),
    "varbit in a hash input": dict(decls="header v_t { varbit<32> opts; }", locals="v_t v; bit<16> x;",
                                   body="hash(x, HashAlgorithm.crc16, 16w0, { v.opts }, 16w8);", line=14),
}

SKELETON_WITH_PACKAGE = PRELUDE + """
header h_t { bit<8> a; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr);
package Other(P p);
parser MyP(packet_in pkt, out headers hdr) { state start { pkt.extract(hdr.h); transition accept; } }
Other(MyP()) main;
"""


def _refusal(path) -> P4Error:
    with pytest.raises(P4Error) as info:
        Switch(load_program(path))
    return info.value


@pytest.mark.parametrize("what", list(CASES))
def test_constructs_outside_the_subset_are_refused_by_name(what, write_p4):
    case = dict(CASES[what])
    line = case.pop("line")
    path = write_p4(**case)
    err = _refusal(path)
    assert re.search(r"(is|are) not supported by the built-in target", err.message), f"{what}: {err}"
    assert "(internal:" not in err.message, f"{what} reached a bug, not a refusal: {err}"
    assert err.loc.file == str(path) and err.loc.line == line, f"{what}: refused at {err.loc}, not line {line}"
    assert str(err).startswith(f"{path}:{line}:")


def test_another_architecture_is_refused_by_name(write_p4):
    path = write_p4(text=SKELETON_WITH_PACKAGE)
    err = _refusal(path)
    assert "package Other is not supported by the built-in target" in err.message
    assert err.loc.file == str(path) and err.loc.line == 9
