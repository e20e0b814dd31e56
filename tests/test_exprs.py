"""Expressions and statements: p4c's grammar precedences, integer corners, loops, switch."""

from __future__ import annotations

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program


def _consts(path) -> dict:
    prog = load_program(path)
    return {d.name: d.init.value for d in prog.top_level if d.__class__.__name__ == "ConstDecl"}


def _run(write_p4, body: str, data: bytes, locals: str = "", decls: str = "") -> bytes:
    """Run ingress ``body`` (SKELETON: h_t {a: bit<8>, b: bit<8>, c: bit<16>}) on one packet."""
    sw = Switch.from_file(write_p4(body=body + " sm.egress_spec = 1;", locals=locals, decls=decls))
    out = sw.process(0, data)
    assert len(out) == 1
    return out[0].data


def test_else_branch_extends_over_binary_operators_but_not_over_a_question_mark(write_p4):
    consts = _consts(write_p4(decls="""
        const bit<8> K1 = true ? 8w1 : 8w2 + 8w3;      // 1, not (true ? 1 : 2) + 3 = 4
        const bit<8> K2 = false ? 8w1 : 8w2 | 8w4;     // 6
        const bool B1 = false ? true : false ? false : true;  // (false ? true : false) ? false : true
        const bit<8> K3 = true ? 8w1 ? 8w0 : 8w0 : 8w0;""".replace("8w1 ? 8w0 : 8w0", "(true ? 8w7 : 8w0)")))
    assert consts["K1"] == 1 and consts["K2"] == 6 and consts["B1"] is True and consts["K3"] == 7


def test_an_unparenthesised_conditional_chain_is_a_type_error_as_in_p4c(write_p4):
    path = write_p4(body="hdr.h.a = hdr.h.a == 1 ? 8w1 : hdr.h.b == 2 ? 8w2 : 8w3;")
    with pytest.raises(P4Error, match=r"'\?:' branches have different types"):
        load_program(path)


def test_unsized_literals_take_the_other_operands_type(write_p4):
    consts = _consts(write_p4(decls="""
        const bool B = 8w255 == -1;
        const bit<8> W = 8w3 + (-4);
        const int<8> S = -8s128 - 1;
        const int BIG = (1 << 100) - (1 << 100) + 7;"""))
    assert {k: v for k, v in consts.items() if not k.startswith("__")} == {"B": True, "W": 255, "S": 127, "BIG": 7}


def test_signed_arithmetic_on_compound_operands(write_p4):
    """(a + b) * b on int<8>: the wrapped sum must be one operand of the product."""
    body = "int<8> s = ((int<8>)hdr.h.a + (int<8>)hdr.h.b) * (int<8>)hdr.h.b; hdr.h.a = (bit<8>)s;"
    out = _run(write_p4, body, bytes([0xF0, 0x03, 0, 0]))
    assert out[0] == 0xD9  # (-16 + 3) * 3 = -39


def test_run_time_division_and_modulo_by_powers_of_two(write_p4):
    """What p4c's StrengthReduction keeps: a run-time dividend over a constant power of two
    (p4c: ``>>`` and ``&``), and a constant 0 dividend over a run-time divisor (0)."""
    body = ("hdr.h.a = hdr.h.a / 8; hdr.h.c = hdr.h.c % 16w256; hdr.h.b = hdr.h.b % 1 + 8w0 / hdr.h.b "
            "+ (hdr.h.b / 1);")
    assert _run(write_p4, body, bytes([200, 7, 0x01, 0x23])) == bytes([25, 7, 0x00, 0x23])


def test_signed_shift_right_is_arithmetic_and_saturates_at_the_width(write_p4):
    body = "int<8> s = (int<8>)hdr.h.a; hdr.h.a = (bit<8>)(s >> hdr.h.b); hdr.h.b = (bit<8>)(s >> 2);"
    assert _run(write_p4, body, bytes([0x90, 9, 0, 0]))[:2] == bytes([0xFF, 0xE4])


def test_switch_on_values_and_compound_assignment(write_p4):
    body = """
        switch (hdr.h.a) {
            0: { hdr.h.b = 1; }
            8w5:
            7: { hdr.h.b = 2; hdr.h.b <<= 2; }
            default: { hdr.h.b = 3; }
        }
        hdr.h.c |-|= 16w1;"""
    assert _run(write_p4, body, bytes([7, 0, 0, 0])) == bytes([7, 8, 0, 0])
    assert _run(write_p4, body, bytes([5, 0, 0, 9])) == bytes([5, 8, 0, 8])
    assert _run(write_p4, body, bytes([6, 0, 0, 9])) == bytes([6, 3, 0, 8])


def test_for_loops_with_break_and_continue(write_p4):
    body = """
        bit<8> n = 0;
        for (bit<8> i = 0; i < 10; i = i + 1) {
            if (i == hdr.h.a) { continue; }
            if (i == hdr.h.b) { break; }
            n = n + 1;
        }
        hdr.h.c = (bit<16>)n;"""
    assert _run(write_p4, body, bytes([2, 6, 0, 0]))[2:] == bytes([0, 5])  # 0 1 3 4 5
    assert _run(write_p4, body, bytes([20, 30, 0, 0]))[2:] == bytes([0, 10])


@pytest.mark.parametrize("kw, message", [
    ({"body": "break;"}, "'break' is only allowed inside a for loop"),
    ({"body": "if (true) { continue; }"}, "'continue' is only allowed inside a for loop"),
    ({"body": "for (bit<8> i in hdr.h.a) { }"},
     "Typechecking does not support iteration over this collection of type bit<8>"),
    ({"body": "switch (hdr.h.a == 1) { default: { } }"}, "cannot switch on a value of type bool"),
    ({"body": "switch (hdr.h.a) { 1: { } 8w1: { } }"}, "a switch label appears twice"),
    ({"body": "switch (hdr.h.a) { hdr.h.b: { } }"}, "switch labels must be compile-time constants"),
    ({"body": "hdr.h.a = 1 << hdr.h.b;"}, "shifting an unsized integer needs a constant shift amount"),
    ({"body": "hdr.h.a = (bit<8>)((int<8>)hdr.h.a % 8s3);"}, "(int<8>)hdr.h.a % 3: Cannot operate on signed values"),
])
def test_refusals(write_p4, kw, message):
    with pytest.raises(P4Error) as info:
        load_program(write_p4(**kw))
    assert message in info.value.message


def test_a_return_inside_a_loop_of_an_inlined_action_is_refused(write_p4):
    path = write_p4(locals="action a() { for (bit<8> i = 0; i <= 3; i = i + 1) { if (i == hdr.h.a) { return; } } }",
                    body="a();")
    with pytest.raises(P4Error, match="'return' inside a for loop is not supported by the built-in target"):
        Switch.from_file(path)


def test_a_for_loop_in_a_parser_is_refused(tmp_path, write_p4):
    text = write_p4().read_text().replace(
        "state start { pkt.extract(hdr.h);",
        "state start { pkt.extract(hdr.h); for (bit<8> i in 0 .. 1) { }")
    with pytest.raises(P4Error, match="a for loop in a parser is not supported by the built-in target"):
        load_program(write_p4(text=text, name="p2.p4"))


_TERNARY = "action s(bit<8> v) {{ hdr.h.b = v; }} table t {{ key = {{ hdr.h.a: {kind}; }} actions = {{ s; }} {props} }}"


@pytest.mark.parametrize("kind, props, message", [
    ("ternary", "const entries = { priority = 3: 1 &&& 0xFF : s(1); }",
     "a table with 'const' entries cannot have priorities"),
    ("ternary", "entries = { 1 &&& 0xFF : s(1); priority = 3: 2 &&& 0xFF : s(2); }",
     "the first entry must have a priority"),
    ("exact", "entries = { priority = 3: 1 : s(1); }", "Key key match type does not require priorities"),
    ("ternary", "largest_priority_wins = false; entries = { priority = 3: 1 &&& 0xFF : s(1); }",
     "largest_priority_wins = false is not supported by the built-in target"),
    ("ternary", "entries = { priority = 1: 1 &&& 0xFF : s(1); 2 &&& 0xFF : s(2); }",
     "t Overflow in priority computation"),  # p4c: priority 0 leaves no room below
    ("ternary", "bogus_property = 3;", "table property 'bogus_property' is not supported by the built-in target"),
])
def test_entry_priority_rules(write_p4, kind, props, message):
    with pytest.raises(P4Error) as info:
        load_program(write_p4(locals=_TERNARY.format(kind=kind, props=props), body="t.apply();"))
    assert message in info.value.message


def test_initial_entries_can_be_changed_by_the_control_plane(write_p4):
    props = "entries = { priority = 9: 1 &&& 0xFF : s(1); 2 &&& 0xFF : s(2); }"
    sw = Switch.from_file(write_p4(locals=_TERNARY.format(kind="ternary", props=props),
                                   body="t.apply(); sm.egress_spec = 1;"))
    table = sw.tables["I.t"]
    assert not table.is_const
    assert sorted(e.priority for e in table.entries()) == [8, 9]
    assert sw.process(0, bytes([2, 0, 0, 0]))[0].data[1] == 2
    table.clear()
    assert sw.process(0, bytes([2, 0, 0, 0]))[0].data[1] == 0


def test_v1switch_with_type_arguments(write_p4):
    text = write_p4().read_text()
    assert load_program(write_p4(text=text.replace("V1Switch(", "V1Switch<headers, metadata>("), name="ok.p4"))
    with pytest.raises(P4Error, match="V1Switch type argument metadata does not match"):
        load_program(write_p4(text=text.replace("V1Switch(", "V1Switch<metadata, headers>("), name="bad.p4"))
