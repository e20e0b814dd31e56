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
    "a direct counter on a table with an action profile": dict(
        locals="direct_counter(CounterType.packets) dc; " + TABLE.format(
            kind="exact", prop="counters = dc; @name(\"ap\") implementation = action_profile(32w128);"),
        body="t.apply();", line=13),
    "an action selector hash it cannot compute": dict(
        locals=TABLE.format(kind="selector", prop="implementation = action_selector(HashAlgorithm.crc32_custom, "
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


@pytest.mark.parametrize("body, replacement", [
    ("resubmit(meta);", "resubmit_preserving_field_list"),
    ("recirculate({ hdr.h.a });", "recirculate_preserving_field_list"),
    ("clone3(CloneType.I2E, 32w5, { sm.ingress_port });", "clone_preserving_field_list"),
])
def test_field_list_forms_are_refused_as_p4c_refuses_them(write_p4, body, replacement):
    """clone3/resubmit/recirculate with data: p4c-bm2-ss 1.2.5 refuses them ("unknown extern
    function"), so there is no BMv2 behaviour to follow; the refusal names the form p4c accepts."""
    path = write_p4(body=body)
    err = _refusal(path)
    assert f"{body.split('(')[0]}: unknown extern function" in err.message
    assert f"use {replacement} with @field_list" in err.message
    assert str(err).startswith(f"{path}:14:")
