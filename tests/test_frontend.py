"""The frontend accepts the subset, and rejects everything else with file:line:col."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program
from p4target.frontend.syntax import parse_int_literal
from p4target.frontend.types import BitsT

from .conftest import P4_DIR, SKELETON


@pytest.mark.parametrize("text, expected", [
    ("8w0xFF", (255, 8, False)), ("32s-1", (-1, 32, True)), ("0b1010", (10, None, False)),
    ("1_000", (1000, None, False)), ("16w0x_ff_ff", (0xFFFF, 16, False)), ("0o17", (15, None, False)),
    ("4s0b11", (3, 4, True)), ("0d99", (99, None, False)),
])
def test_integer_literal_forms(text, expected):
    assert parse_int_literal(text) == expected


def test_basic_program_checks():
    prog = load_program(P4_DIR / "basic.p4")
    assert [d.name for d in prog.pipeline.blocks.values()] == [
        "MyParser", "MyVerifyChecksum", "MyIngress", "MyEgress", "MyComputeChecksum", "MyDeparser"]
    assert prog.pipeline.headers.fields["ipv4"].width == 160
    assert prog.errors[:2] == ["NoError", "PacketTooShort"]


def test_constants_fold_with_width(write_p4):
    prog = load_program(write_p4(decls="const bit<8> K = 8w250 + 10; const int N = (1 << 4) * 3;"))
    consts = {d.name: d for d in prog.top_level if d.__class__.__name__ == "ConstDecl"}
    assert consts["K"].init.value == 4 and consts["K"].type == BitsT(8)
    assert consts["N"].init.value == 48


def _error(write_p4, **kw) -> P4Error:
    path = write_p4(**kw)
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert info.value.loc.file == str(path), "errors point into the user's file, not the preprocessed text"
    return info.value


@pytest.mark.parametrize("kw, line, message", [
    ({"body": "hdr.h.a = hdr.h.c;"}, 14, "expected bit<8>, got bit<16>"),
    ({"body": "hdr.h.a = hdr.h.a + hdr.h.c;"}, 14, "cannot combine bit<8> and bit<16>"),
    ({"body": "undeclared = 1;"}, 14, "'undeclared' is not declared"),
    ({"body": "hdr.h.zz = 1;"}, 14, "has no field 'zz'"),
    ({"body": "hdr.h.a = hdr.h.a[8:2];"}, 14, "slice [8:2] is out of range"),
    ({"locals": "bit<8> x; action a(in bit<8> v) { v = 1; }"}, 13, "cannot assign to 'v'"),
    ({"decls": "header_union u_t { bit<8> x; }"}, 7, "Field 'x' of 'header_union u_t' cannot have type 'bit<8>'"),
    ({"locals": "Checksum16() ck;"}, 13, "extern 'Checksum16' is not supported"),
    ({"body": "resubmit(hdr.h.a);"}, 14, "resubmit: unknown extern function"),
    ({"body": "if (hdr.h.a) { }"}, 14, "expected bool, got bit<8>"),
    ({"body": "hdr.h.a = (bit<8>)((int<8>)hdr.h.a / (int<8>)hdr.h.b);"}, 14,
     "(int<8>)hdr.h.a / (int<8>)hdr.h.b: Cannot operate on signed values"),
    ({"decls": "header v_t { varbit<8> a; varbit<8> b; }"}, 7, "a and b: multiple varbit fields in a header"),
    ({"body": "hdr.h.a = 8w1 ++ 8w2;"}, 14, "expected bit<8>, got bit<16>"),
])
def test_errors_name_the_problem_and_its_place(write_p4, kw, line, message):
    err = _error(write_p4, **kw)
    assert err.loc.line == line
    assert err.loc.col > 0
    assert message in err.message


def test_syntax_error_location(write_p4):
    err = _error(write_p4, body="hdr.h.a = ;")
    assert (err.loc.line, err.loc.col) == (14, 23)
    assert "syntax error" in err.message


def test_error_inside_an_included_file_points_there(tmp_path, write_p4):
    (tmp_path / "inc.p4").write_text("\n\nconst bit<8> BAD = true;\n")
    with pytest.raises(P4Error) as info:
        load_program(write_p4(decls='#include "inc.p4"'))
    assert info.value.loc.file.endswith("inc.p4") and info.value.loc.line == 3


def test_table_errors(write_p4):
    err = _error(write_p4, locals="action a() {} table t { key = { hdr.h.a: fuzzy; } actions = { a; } }")
    assert "unknown match kind 'fuzzy'" in err.message
    err = _error(write_p4, locals="action a() {} action b() {} table t { key = { hdr.h.a: exact; } "
                                  "actions = { a; } default_action = b(); }")
    assert "must be in the table's actions list" in err.message


def test_cli_reports_errors_without_traceback(write_p4):
    path = write_p4(body="hdr.h.a = hdr.h.c;")
    done = subprocess.run([sys.executable, "-m", "p4target.cli", str(path)], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith(f"{path}:14:")
    assert "Traceback" not in done.stderr
    assert "^" in done.stderr  # the caret line under the column


def test_cli_writes_p4info(tmp_path):
    out = tmp_path / "basic.p4info.txt"
    done = subprocess.run([sys.executable, "-m", "p4target.cli", str(P4_DIR / "basic.p4"),
                           "--p4runtime-files", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert 'name: "MyIngress.ipv4_lpm"' in out.read_text()


def test_static_assert_is_decided_when_the_program_loads(write_p4):
    ok = write_p4(decls='const bool v = static_assert(__v1model_version >= 20180101, "needs v1model");',
                  body="static_assert(true);")
    assert load_program(ok)
    bad = write_p4(decls='const bool v = static_assert(__v1model_version > 20990000, "needs a newer v1model");',
                   name="bad.p4")
    with pytest.raises(P4Error, match="static assertion failed: needs a newer v1model"):
        load_program(bad)


def test_keywords_p4c_allows_as_names_name_values(write_p4):
    """p4c's nonTypeName: `key`, `state`, `priority`... may name variables and parameters."""
    prog = load_program(write_p4(
        decls="control Add(inout bit<8> x)(bit<8> key) { apply { x = x + key; } }",
        locals="Add(8w3) add3;",
        body="bit<8> priority = hdr.h.a; bit<8> state = 2; priority = priority + state; "
             "add3.apply(priority); hdr.h.b = priority; sm.egress_spec = 1;"))
    from p4target.executor.switch import Switch

    out = Switch(prog).process(0, bytes([1, 0, 0, 0]))
    assert out[0].data[:2] == bytes([1, 6])


def test_a_field_named_type_does_not_declare_a_type(write_p4):
    """`s.type = K;` (as in ICMP headers) once made the lexer take K for a type name."""
    prog = load_program(write_p4(
        decls="struct s_t { bit<8> type; } const bit<8> K = 7; typedef bit<8> T8; type bit<8> N8;",
        body="s_t s; s.type = K; T8 t = s.type; hdr.h.a = t; sm.egress_spec = 1;"))
    from p4target.executor.switch import Switch

    assert Switch(prog).process(0, bytes([1, 0, 0, 0]))[0].data[0] == 7


# What p4c 1.2.5 refuses, the built-in target refuses with p4c's reason (tests/p4/stf programs
# were reshaped around each of these).
@pytest.mark.parametrize("body, locals, decls, message", [
    ("hdr.h.a = twice(hdr.h.b);", "", "bit<8> twice<T>(in T v) { return (bit<8>)v + (bit<8>)v; }",
     "Cannot cast from 'T' to 'bit<8>'"),
    ("for (bit<8> i = 0; i < 2; i = i + 1) { hdr.h.a = i; } for (bit<8> i in 1 .. 2) { hdr.h.b = i; }", "", "",
     "Duplicate declaration of i"),
    ("bit<8> i = 0; for (bit<8> i = 0; i < 2; i = i + 1) { hdr.h.a = i; }", "", "", "Duplicate declaration of i"),
    ("for (bit<8> i = 0; i < 2; i = i + 1) { hdr.h.a = i; } bit<8> i = 1;", "", "", "Duplicate declaration of i"),
    ("switch (sm.parser_error) { error.NoError: { hdr.h.a = 1; } default: { hdr.h.a = 2; } }", "", "",
     "'switch' type can't be error"),
    # p4c's frontend (ValidateParsedProgram): `actions = { }` is a table with no actions, no
    # `actions` at all is an error, for every architecture
    ("t.apply();", "table t { key = { hdr.h.a: exact; } }", "", "t: expected 'actions' property"),
    # p4c's frontend type checker: for-in runs over ranges, header stacks and list<T> only
    ("for (bit<8> v in {8w3, 8w5, 8w7}) { hdr.h.a = hdr.h.a + v; }", "", "",
     "Typechecking does not support iteration over this collection of type tuple<bit<8>, bit<8>, bit<8>>"),
    # p4c-bm2-ss's CheckUnsupported: every for-in (classic for loops compile, in action bodies)
    ("for (bit<8> v in 1 .. 3) { hdr.h.a = hdr.h.a + v; }", "", "", "BMV2 does not support for-in loops"),
    ("for (e_t e in x.s) { }", "x_t x;", "header e_t { bit<8> v; } struct x_t { e_t[2] s; }",
     "BMV2 does not support for-in loops"),
    # p4c's StrengthReduction on / and % (its messages print a constant without its width)
    ("hdr.h.a = hdr.h.a % 8w0;", "", "", "hdr.h.a % 0: Modulo by zero"),
    ("hdr.h.a = hdr.h.a / 0;", "", "", "hdr.h.a / 0: Division by zero"),
    # p4c's midend: a division StrengthReduction cannot turn into >> or & (CompileTimeOperations)
    ("hdr.h.a = hdr.h.a / hdr.h.b;", "", "", "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
    ("hdr.h.a = hdr.h.a % 8w3;", "", "", "hdr.h.a % 3: could not evaluate expression at compilation time"),
    # LocalCopyPropagation has put hdr.h.a in place of x by then
    ("bit<8> x = hdr.h.a; x /= hdr.h.b;", "", "",
     "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
])
def test_what_p4c_refuses_is_refused_with_its_reason(write_p4, body, locals, decls, message):
    with pytest.raises(P4Error, match=re.escape(message)):
        Switch.from_file(write_p4(body=body, locals=locals, decls=decls))


def test_p4cs_refusals_point_where_p4c_points(write_p4):
    """A table's missing `actions` at its name; a division at the expression."""
    path = write_p4(locals="@name(\"tt\") table bare { key = { hdr.h.a: exact; } }", body="bare.apply();")
    err = _error(write_p4, text=path.read_text())
    assert (err.loc.line, err.loc.col, err.message) == (13, 23, "bare: expected 'actions' property")
    err = _error(write_p4, body="hdr.h.a = 8w1 + hdr.h.a % hdr.h.b;")
    assert (err.loc.line, err.loc.col) == (14, 29)  # the `%` expression, not the `+`


def test_midend_refusals_wait_for_the_frontends(write_p4):
    """p4c reports a for-in or a run-time division (midend passes) only when its frontend found
    nothing, and BMv2's CheckUnsupported runs before CompileTimeOperations."""
    err = _error(write_p4, body="hdr.h.a = hdr.h.a / hdr.h.b; for (bit<8> v in 1 .. 2) { } hdr.h.a = hdr.h.c;")
    assert "expected bit<8>, got bit<16>" in err.message
    err = _error(write_p4, body="hdr.h.a = hdr.h.a / hdr.h.b; for (bit<8> v in 1 .. 2) { }")
    assert err.message == "BMV2 does not support for-in loops"


@pytest.mark.parametrize("body, decls, packet, expected", [
    ("hdr.h.a = hdr.h.a / 4; hdr.h.b = hdr.h.b % 8w8; hdr.h.c = hdr.h.c / 1;", "", "c9 0f 1234", "32 07 1234"),
    ("hdr.h.a = 8w0 % hdr.h.b; hdr.h.b = 16w0 / 16w7 == 0 ? 8w9 : 8w1;", "", "c9 0f 1234", "00 09 1234"),
    # corpus issue2287-bmv2.p4: p4c hoists the call, then folds 0 / tmp; the call runs once, a zero divisor too
    ("hdr.h.a = 8w0 / f(hdr.h.b);", "bit<8> f(inout bit<8> y) { y = y + 1; return y; }", "c9 0f 1234", "00 10 1234"),
    ("hdr.h.a = 8w0 % f(hdr.h.b);", "bit<8> f(inout bit<8> y) { y = y + 1; return 0; }", "c9 0f 1234", "00 10 1234"),
    # a shift by a call (its code names the amount twice) runs the call once too
    ("hdr.h.a = hdr.h.a << f(hdr.h.b);", "bit<8> f(inout bit<8> y) { y = y + 1; return 2; }", "c9 0f 1234",
     "24 10 1234"),
])
def test_divisions_p4c_keeps_run(write_p4, body, decls, packet, expected):
    """A power-of-two divisor (p4c: >> and &), a constant 0 dividend (over a call, too), constants folded;
    a call in the divisor or a shift's amount runs once."""
    sw = Switch.from_file(write_p4(body=body + " sm.egress_spec = 1;", decls=decls))
    assert sw.process(0, bytes.fromhex(packet)) == [(1, bytes.fromhex(expected))]


DIV_FN = "bit<8> dv(in bit<8> x, in bit<8> k) { return x / k; }"
DIV_TABLE = "table t { actions = { a; } default_action = a(); }"


# Each refusal where p4c makes it (paths and lines of p4c v1.2.5.16), with its words and place.
@pytest.mark.parametrize("body, locals, decls, line, col, message", [
    # frontends/p4/typeChecking/typeCheckExpr.cpp unsBinaryArith: a negative unsized constant
    # operand (p4c's testdata/p4_16_errors/div1.p4)
    ("hdr.h.a = hdr.h.a / -1;", "", "", 14, 23, "hdr.h.a / -1: not defined on negative numbers"),
    ("hdr.h.a = -5 % hdr.h.a;", "", "", 14, 23, "-5 % hdr.h.a: not defined on negative numbers"),
    # frontends/common/constantFolding.cpp DoConstantFolding::postorder(Div/Mod), run before the
    # type checker: two constants, one negative (testdata/p4_16_errors/div.p4), or a zero divisor
    ("hdr.h.a = (bit<8>)(-8 / -2);", "", "", 14, 32, "-8 / -2: Division is not defined for negative numbers"),
    ("hdr.h.a = (bit<8>)(10 % -2);", "", "", 14, 32, "10 % -2: Modulo is not defined for negative numbers"),
    ("hdr.h.a = (bit<8>)(-8s6 / 8s3);", "", "", 14, 32, "-6 / 3: Division is not defined for negative numbers"),
    ("hdr.h.a = 8w6 % 0;", "", "", 14, 23, "6 % 0: Modulo by zero"),
    # strengthReduction.cpp postorder(Div): 256 is 0 once the type checker casts it to bit<8>
    ("hdr.h.a = hdr.h.a / 256;", "", "", 14, 23, "hdr.h.a / 0: Division by zero"),
    # unsBinaryArith: signed operands that are not both constants before types are known (a
    # serializable enum member, a constructor parameter: constants only later)
    ("hdr.h.a = (bit<8>)((int<8>)hdr.h.a / 8s3);", "", "", 14, 32,
     "(int<8>)hdr.h.a / 3: Cannot operate on signed values"),
    ("hdr.h.a = (bit<8>)(Sn.A / 8s3);", "", "enum int<8> Sn { A = 6 }", 14, 32,
     "Sn.A / 3: Cannot operate on signed values"),
    ("dv.apply(hdr.h.a);", "Dv(8s3) dv;", "control Dv(inout bit<8> x)(int<8> k) { apply { x = (bit<8>)(8s6 / k); } }",
     7, 61, "6 / k: Cannot operate on signed values"),
    # the midend: LocalCopyPropagation puts in what it knows (a control local's initializer:
    # testdata/p4_16_errors/div3.p4), StrengthReduction, then CompileTimeOperations
    ("hdr.h.a = hdr.h.a / b;", "bit<8> b = 3;", "", 14, 23,
     "hdr.h.a / 3: could not evaluate expression at compilation time"),
    ("bit<8> d = 0; hdr.h.a = hdr.h.a % d;", "", "", 14, 37, "hdr.h.a % 0: Modulo by zero"),
    ("bit<8> x = hdr.h.a; x = x + 1; hdr.h.b = x / hdr.h.b;", "", "", 14, 54,
     "(hdr.h.a + 1) / hdr.h.b: could not evaluate expression at compilation time"),
    # a value assigned in one branch is gone after the if (local_copyprop.cpp flow_merge)
    ("bit<8> d = 4; if (hdr.h.c == 0) { d = 2; } hdr.h.a = hdr.h.a / d;", "", "", 14, 66,
     "hdr.h.a / d: could not evaluate expression at compilation time"),
    # an extern writes its out argument; setInvalid writes the header
    ("bit<8> d = 4; random(d, 8w1, 8w4); hdr.h.a = hdr.h.a / d;", "", "", 14, 58,
     "hdr.h.a / d: could not evaluate expression at compilation time"),
    ("hdr.h.b = 4; hdr.h.setInvalid(); hdr.h.a = hdr.h.a / hdr.h.b;", "", "", 14, 56,
     "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
    # a table key (named: else p4c's TableKeyNames refuses it first): SimplifyKey computes it in
    # the apply block before each apply, where the values known then decide it
    ("t.apply();", "action a() {} table t { key = { hdr.h.a / hdr.h.b : exact @name(\"k\"); } actions = { a; } }",
     "", 13, 37,
     "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
    ("d = 3; t.apply();",
     "bit<8> d = 4; action a() {} table t { key = { hdr.h.a / d : exact @name(\"k\"); } actions = { a; } }",
     "", 13, 51, "hdr.h.a / 3: could not evaluate expression at compilation time"),
    # an action is a block of its own: the control's values are not known in it
    ("t.apply();", "bit<8> d = 4; action a() { hdr.h.a = hdr.h.a / d; } " + DIV_TABLE, "", 13, 42,
     "hdr.h.a / d: could not evaluate expression at compilation time"),
    # p4c would follow d across the table apply (its action writes nothing): refused, with a note
    ("bit<8> d = 4; t.apply(); hdr.h.a = hdr.h.a / d;", "action a() { } " + DIV_TABLE, "", 14, 48,
     "hdr.h.a / d: could not evaluate expression at compilation time (p4c-bm2-ss accepts it if d still holds "
     "a constant power of two assigned before a call or a loop that does not write it: its LocalCopyPropagation "
     "follows values through those, the built-in target does not)"),
    # p4c would inline the function and propagate its return value: refused, with a note
    ("hdr.h.a = hdr.h.a / four();", "", "bit<8> four() { return 4; }", 14, 23,
     "hdr.h.a / four(): could not evaluate expression at compilation time (p4c-bm2-ss inlines four and accepts it "
     "if the call returns a constant power of two: the built-in target does not look into the function)"),
    # notes where p4c would see more: a control's in parameter (Inline), a loop
    ("dv.apply(hdr.h.a, 4);", "Dv() dv;", "control Dv(inout bit<8> x, in bit<8> k) { apply { x = x / k; } }",
     7, 55, "x / k: could not evaluate expression at compilation time (p4c-bm2-ss inlines the control where an "
     "instance of it is applied and accepts it if every apply passes a constant power of two as k: the built-in "
     "target checks the control once)"),
    ("bit<8> d = 4; for (bit<8> i = 0; i < 1; i = i + 1) { hdr.h.a = hdr.h.a / d; }", "", "", 14, 76,
     "hdr.h.a / d: could not evaluate expression at compilation time (p4c-bm2-ss accepts it if d still holds a "
     "constant power of two assigned before a call or a loop that does not write it: its LocalCopyPropagation "
     "follows values through those, the built-in target does not)"),
    # a function's parameter: decided at each call (p4c inlines it), at the division in the function
    ("hdr.h.a = dv(hdr.h.a, 3);", "", DIV_FN, 7, 46, "x / 3: could not evaluate expression at compilation time"),
    ("hdr.h.a = dv(hdr.h.a, hdr.h.b);", "", DIV_FN, 7, 46,
     "x / hdr.h.b: could not evaluate expression at compilation time"),
    ("hdr.h.a = dv(hdr.h.a, 0);", "", DIV_FN, 7, 46, "x / 0: Division by zero"),
    # an action's directionless parameter in a table is action data; an `in` one takes the action
    # list's argument (RemoveActionParameters)
    ("t.apply();", "action a(bit<8> k) { hdr.h.a = hdr.h.a / k; } table t { actions = { a; } default_action = a(4); }",
     "", 13, 36, "hdr.h.a / k: could not evaluate expression at compilation time"),
    ("t.apply();", "action a(in bit<8> k) { hdr.h.a = hdr.h.a / k; } "
     "table t { actions = { a(hdr.h.b); } default_action = a(hdr.h.b); }", "", 13, 39,
     "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
])
def test_divisions_are_refused_where_p4c_refuses_them(write_p4, body, locals, decls, line, col, message):
    err = _error(write_p4, body=body + " sm.egress_spec = 1;", locals=locals, decls=decls)
    assert (err.loc.line, err.loc.col, err.message) == (line, col, message)


@pytest.mark.parametrize("body, locals, decls, expected", [
    # constantFolding.cpp: two constants fold before types are known, signed ones too; an unsized
    # operand takes the other's type first (-1 is 8w255: 4 / 255 is 0)
    ("hdr.h.a = (bit<8>)(8s6 / 8s3); hdr.h.b = (bit<8>)(8s7 % 8s4);", "", "", "02 03 1234"),
    ("hdr.h.a = 8w4 / -1;", "", "", "00 0f 1234"),
    # typeCheckExpr.cpp binaryArith: a serializable enum is its underlying type
    ("hdr.h.a = hdr.h.a / En.A; hdr.h.b = hdr.h.b % En.A;", "", "enum bit<8> En { A = 4 }", "32 03 1234"),
    # ... a variable holding a member too, once EliminateSerEnums and LocalCopyPropagation ran
    ("En e = En.A; hdr.h.a = hdr.h.a / e;", "", "enum bit<8> En { A = 4 }", "32 0f 1234"),
    # a const, a cast, x % 1 and x / 1 (strengthReduction.cpp: >> 0, & 0)
    ("hdr.h.a = hdr.h.a / K; hdr.h.b = hdr.h.b / (bit<8>)16w4;", "const bit<8> K = 8;", "", "19 03 1234"),
    ("hdr.h.a = hdr.h.a % 1; hdr.h.b = hdr.h.b / 1;", "", "", "00 0f 1234"),
    # LocalCopyPropagation: a local, a control local's initializer, a header field, arithmetic
    # on known values, both operands known (folded), a known 0 dividend
    ("bit<8> d = 4; hdr.h.a = hdr.h.a / d;", "", "", "32 0f 1234"),
    ("hdr.h.a = hdr.h.a % b;", "bit<8> b = 4;", "", "01 0f 1234"),
    ("hdr.h.b = 4; hdr.h.a = hdr.h.a / hdr.h.b;", "", "", "32 04 1234"),
    ("bit<8> d = 2; d = d * 4; hdr.h.a = hdr.h.a / d;", "", "", "19 0f 1234"),
    ("bit<8> x = 7; bit<8> y = 3; hdr.h.a = x / y; hdr.h.b = x % y;", "", "", "02 01 1234"),
    ("bit<8> z = 0; hdr.h.a = z / hdr.h.b;", "", "", "00 0f 1234"),
    # into a branch, past a branch that does not write it, past an extern writing something else
    ("bit<8> d = 2; if (hdr.h.c == 0x1234) { hdr.h.a = hdr.h.a / d; }", "", "", "64 0f 1234"),
    ("bit<8> d = 2; if (hdr.h.c == 0) { hdr.h.b = 1; } hdr.h.a = hdr.h.a / d;", "", "", "64 0f 1234"),
    ("bit<8> d = 2; bit<8> r; random(r, 8w0, 8w0); hdr.h.a = hdr.h.a / d;", "", "", "64 0f 1234"),
    # a constructor parameter (SpecializeAll), a function's parameter bound to constants at its
    # calls (InlineFunctions), an action's parameter bound by a direct call or an action list
    ("dv.apply(hdr.h.a);", "Dv(4) dv;", "control Dv(inout bit<8> x)(bit<8> k) { apply { x = x / k; } }",
     "32 0f 1234"),
    ("hdr.h.a = dv(hdr.h.a, 4); hdr.h.b = dv(hdr.h.b, 8w1);", "", DIV_FN, "32 0f 1234"),
    ("bit<8> k = 2; hdr.h.a = dv(hdr.h.a, k);", "", DIV_FN, "64 0f 1234"),
    ("a(4);", "action a(bit<8> k) { hdr.h.a = hdr.h.a / k; }", "", "32 0f 1234"),
    ("t.apply();", "action a(in bit<8> k) { hdr.h.a = hdr.h.a % k; } "
     "table t { actions = { a(8); } default_action = a(8); }", "", "01 0f 1234"),
    # a key whose divisor the apply block set before the apply (SimplifyKey, then LocalCopyPropagation)
    ("hdr.h.b = 2; t.apply();", "action a() { hdr.h.c = 7; } "
     "table t { key = { hdr.h.a % hdr.h.b : exact @name(\"k\"); } actions = { a; } const entries = { 1 : a(); } }",
     "", "c9 02 0007"),
    # unused: a function no one calls, an action of a table no one applies (RemoveAllUnusedDeclarations)
    ("", "", DIV_FN, "c9 0f 1234"),
    ("", "action a() { hdr.h.a = hdr.h.a / hdr.h.b; } table t { actions = { a; } }", "", "c9 0f 1234"),
])
def test_divisions_p4c_accepts_run(write_p4, body, locals, decls, expected):
    """What p4c turns into constants, shifts and masks: the built-in target computes the same."""
    sw = Switch.from_file(write_p4(body=body + " sm.egress_spec = 1;", locals=locals, decls=decls))
    assert sw.process(0, bytes.fromhex("c9 0f 1234")) == [(1, bytes.fromhex(expected))]


@pytest.mark.parametrize("states, expected", [
    ("state start { pkt.extract(hdr.h); bit<8> d = 4; hdr.h.a = hdr.h.a / d; transition accept; }", "32 0f 1234"),
    ("state start { bit<8> d = 4; pkt.extract(hdr.h); transition select(hdr.h.b % d) { 3: next; default: accept; } }"
     " state next { hdr.h.a = 1; transition accept; }", "01 0f 1234"),
    ("state start { pkt.extract(hdr.h); hdr.h.b = 4; transition next; }"
     " state next { hdr.h.a = hdr.h.a / hdr.h.b; transition accept; }",
     "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time"),
])
def test_a_parser_state_is_a_block_of_its_own_for_divisions(write_p4, states, expected):
    """p4c's LocalCopyPropagation follows values within one parser state (a select too), not across states."""
    text = write_p4().read_text().replace("state start { pkt.extract(hdr.h); transition accept; }", states)
    path = write_p4(text=text.replace("apply {  }", "apply { sm.egress_spec = 1; }"), name="states.p4")
    if "could not" in expected:
        with pytest.raises(P4Error, match=re.escape(expected)):
            Switch.from_file(path)
    else:
        assert Switch.from_file(path).process(0, bytes.fromhex("c9 0f 1234")) == [(1, bytes.fromhex(expected))]


def test_loop_variables_of_different_blocks_may_share_a_name(write_p4):
    body = ("for (bit<8> i = 0; i <= 1; i = i + 1) { "
            "for (bit<8> j = 0; j <= 1; j = j + 1) { hdr.h.a = hdr.h.a + 1; } } "
            "if (hdr.h.b == 0) { for (bit<8> j = 0; j < 2; j = j + 1) { hdr.h.a = hdr.h.a + 1; } } sm.egress_spec = 1;")
    out = Switch.from_file(write_p4(body=body)).process(0, bytes(4))
    assert out[0].data == bytes([6, 0, 0, 0])


def test_a_generic_function_that_does_not_cast_its_type_variable_runs(write_p4):
    decls = "T same<T>(in T v) { return v; }"
    body = "hdr.h.a = same(hdr.h.b) + same<bit<8>>(hdr.h.b); sm.egress_spec = 1;"
    out = Switch.from_file(write_p4(body=body, decls=decls)).process(0, bytes([0, 3, 0, 0]))
    assert out[0].data == bytes([6, 3, 0, 0])


def test_generic_headers_and_structs_run_as_their_specializations(write_p4):
    """``G<bit<8>>`` and ``G<bit<16>>`` are two header types, ``M<bit<8>>`` a struct, and a
    ``typedef header`` both a header and its alias: each runs as the concrete type it is."""
    text = SKELETON.replace("struct headers {{ h_t h; }}", "header G<T> {{ bit<8> a; T b; }}\n"
                            "struct M<T> {{ T x; }}\ntypedef header k_t {{ bit<8> k; }} K;\n"
                            "struct headers {{ h_t h; G<bit<8>> g; G<bit<16>> w; K k; }}")
    text = text.replace("struct metadata {{ }}", "struct metadata {{ M<bit<8>> m; }}")
    text = text.replace("pkt.extract(hdr.h);", "pkt.extract(hdr.h); pkt.extract(hdr.g); pkt.extract(hdr.w); "
                        "pkt.extract(hdr.k);").replace("pkt.emit(hdr.h);", "pkt.emit(hdr);")
    body = ("meta.m.x = hdr.g.b + 1; G<bit<8>> t = hdr.g; t.a = meta.m.x; hdr.g = t; hdr.w.b = hdr.w.b + 1; "
            "hdr.k.k = 9; sm.egress_spec = 1;")
    path = write_p4(text=text.format(body=body, locals="", decls=""))
    out = Switch.from_file(path).process(0, bytes([0, 0, 0, 0, 1, 2, 0, 5, 7, 0xaa]))
    assert out[0].data == bytes([0, 0, 0, 0, 3, 2, 0, 5, 8, 9])


SUB = ("control Sub(inout bit<8> x) { apply { x = x + 1; } }\n"
       "control SubK(inout bit<8> x)(bit<8> k) { apply { x = x + k; } }")


@pytest.mark.parametrize("body, locals, message", [
    ("", "action a() { Sub.apply(hdr.h.a); }", "Sub.apply can only be called in an apply block or a parser state"),
    ("Sub.run(hdr.h.a);", "", "Sub has no method 'run'"),
    ("SubK.apply(hdr.h.a);", "", "missing an argument for parameter 'k'"),
    ("Sub.apply(hdr.h.a, hdr.h.b);", "", "expected 1 arguments, got 2"),
])
def test_direct_type_invocation_errors(write_p4, body, locals, message):
    with pytest.raises(P4Error, match=re.escape(message)):
        load_program(write_p4(body=body, locals=locals, decls=SUB))


def test_direct_type_invocation_makes_one_instance_per_call(write_p4):
    """Each `Sub.apply` is its own instance, named apart from the block's own names."""
    body = "bit<8> Sub_inst = 1; Sub.apply(hdr.h.a); Sub.apply(hdr.h.a); hdr.h.b = Sub_inst; sm.egress_spec = 1;"
    prog = load_program(write_p4(body=body, decls=SUB))
    ingress = prog.pipeline.blocks["ingress"]
    assert [d.name for d in ingress.locals[:2]] == ["Sub_inst_0", "Sub_inst_1"]
    out = Switch.from_file(write_p4(body=body, decls=SUB)).process(0, bytes([5, 0, 0, 0]))
    assert out[0].data == bytes([7, 1, 0, 0])


def test_extract_into_dont_care_needs_the_type(write_p4):
    text = write_p4().read_text().replace("pkt.extract(hdr.h);", "pkt.extract(_); pkt.extract(hdr.h);")
    with pytest.raises(P4Error, match=re.escape("extract into '_' needs the header type")):
        load_program(write_p4(text=text))


def test_nested_slices_fold_and_read(write_p4):
    """A constant nested slice folds; a nested slice of a field reads the bits it names."""
    body = "hdr.h.a = (bit<8>)(8w0xB4[7:2][4:1]); hdr.h.b = (bit<8>)hdr.h.c[11:4][5:2][2:0]; sm.egress_spec = 1;"
    out = Switch.from_file(write_p4(body=body)).process(0, bytes([0, 0, 0x0A, 0xBC]))
    # B4 = 1011 0100: [7:2] = 101101, [4:1] = 0110 = 6.  c = 0ABC: bits 11:4 = AB = 1010 1011,
    # [5:2] = 1010, [2:0] = 010 = 2 (bits 8:6 of c).
    assert out[0].data == bytes([6, 2, 0x0A, 0xBC])


@pytest.mark.parametrize("program", ["p4src/ina.p4", "p4src/tofino/ina_tna.p4"])
def test_checker_state_lives_on_its_env(program):
    """The checker's passes share one CheckEnv whose fields are all set up when it is made:
    after a whole program (v1model, TNA), no pass holds state of its own and the env has no
    attribute that its definition does not declare (nothing set up lazily)."""
    from dataclasses import fields

    from p4target.frontend.checker import Checker
    from p4target.frontend.preprocess import preprocess
    from p4target.frontend.syntax import parse

    checker = Checker(parse(preprocess(P4_DIR.parent.parent / program)))
    checker.check()
    env = checker.env
    declared = {f.name for f in fields(env)}
    assert set(vars(env)) == declared
    passes = [getattr(env, f.name) for f in fields(env) if not f.init]
    assert len(passes) == 11
    for p in passes:
        assert vars(p) == {"env": env}, type(p).__name__
