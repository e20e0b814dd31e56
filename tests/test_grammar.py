"""The grammar is as wide as p4c's (issue 64): each construct p4c 1.2.5's parser accepts parses
here too, and is then either checked with p4c's rule or refused at its own location as not
supported by the built-in target; never a "syntax error", never accepted where p4c refuses."""

from __future__ import annotations

import pytest

from p4target.frontend import P4Error, load_program

from .conftest import SKELETON

START = "state start { pkt.extract(hdr.h); transition accept; }"

# name -> (program pieces, expected "line:col", expected message); line 7 = decls, 13 = locals, 14 = body
REFUSED = {
    "the invalid header {#}": (dict(body="hdr.h = {#};"), "14:21",
                               "the invalid header expression {#} is not supported"),
    "list<T>": (dict(locals="list<bit<8>> l;"), "13:5", "the type list<T> is not supported"),
    "don't-care type argument": (dict(decls="typedef tuple<_> t_t;"), "7:15",
                                 "the don't-care type '_' as a type argument is not supported"),
    "indexed slice +: with a run-time lo": (dict(body="hdr.h.a = hdr.h.c[hdr.h.b +: 8];"), "14:23",
                                            "hdr.h.c[hdr.h.b +: 8]: this indexed slice is not supported"),
    "const on one entry": (dict(locals="action a() { } table t { key = { hdr.h.a : exact; } actions = { a; } "
                                       "entries = { const 8w1 : a(); } }"), "13:86",
                           "a 'const' on one table entry is not supported"),
    # p4c's own rules (its ValidateParsedProgram and type checker), at p4c's line
    "instantiation in an apply block": (
        dict(body="Checksum16() ck;"), "14:13",
        "ck: invalid declaration. Instantiations cannot be in a control 'apply' block."),
    "instantiation in an action": (dict(locals="action a() { Checksum16() ck; }"), "13:18",
                                   "ck: invalid declaration. Instantiations cannot be in a function or method."),
    "method named as its extern": (dict(decls="extern W { abstract t W(in bit<1> a); }"), "7:21",
                                   "W: invalid constructor; cannot have a return type"),
    "string literal as an operand": (dict(body='bool b = !"lazy";'), "14:23",
                                     "operand of '!': expected bool, got string"),
    "string literal shifted by": (dict(body='hdr.h.a = hdr.h.a >> "two";'), "14:23", "'>>' needs integer operands"),
    "structured annotation mixing": (dict(locals="@my[k = 1, 2] bit<8> x;"), "13:16",
                                     "syntax error: unexpected '2'"),
    "structured annotation named twice": (dict(locals="@n(1) @n[2] bit<8> x;"), "13:11",
                                          "@n: duplicate name for structured annotation"),
    "structured annotation with a list": (dict(locals="@n[k = {1, 2}] bit<8> x;"), "13:5",
                                          "{ 1, 2 }: illegal type for structured annotation"),
    "dot-prefixed local is not top-level": (dict(locals="bit<8> tmp;", body=".tmp = 1;"), "14:13",
                                            "'tmp' is not declared"),
    "call of an action call as the default action": (
        dict(locals="action a() { } table t { actions = { a; } default_action = a()(); }"), "13:64",
        "a(): Cannot invoke result of an action call"),
    "type parameter as a value in the declaration's annotation": (
        dict(decls="@n[x = 4 < T]\ncontrol G<T>(in T v) { apply { } }"), "7:12",
        "T: Type cannot be used here, expecting an expression."),
    "type name as an index": (dict(locals="h_t[2] gs;", body="gs[h_t].a = 1;"), "14:16",
                              "h_t: Type cannot be used here, expecting an expression."),
    "instantiation in a parser state": (dict(start="state start { Checksum16() ck; transition accept; }"), "9:19",
                                        "ck: syntax error: an instantiation is not a parser statement"),
}

ACCEPTED = {
    "generic struct": dict(decls="struct S<T> { T f; }", locals="S<bit<8>> s;"),
    "generic header": dict(decls="header G<T> { T f; }", locals="G<bit<8>>[2] g;"),
    "generic header_union": dict(decls="header G<T> { T f; } header_union U<T> { G<T> a; }", locals="U<bit<4>> u;"),
    "empty tuple type": dict(decls="typedef tuple<> empty_t;", locals="empty_t e;"),
    "dot-prefixed names": dict(decls="const bit<8> K = 1; action ga() { }",
                               locals=".h_t tmp; table t { key = { hdr.h.a : exact; } actions = { ga; } "
                                      "default_action = .ga(); }",
                               body="hdr.h.a = .K; t.apply();"),
    "structured annotations": dict(locals='@my[k = 1, j = "s"] bit<8> x; @e[1, 2,] bit<8> y;'),
    "list as a plain name": dict(body="bit<8> list = 1; hdr.h.a = list;"),
    "typedef of a declaration": dict(decls="typedef header g_t { bit<8> f; } G;", locals="G g; g_t g2;",
                                     body="g.f = 1; g2 = g;"),
    "struct expression with names": dict(body="hdr.h = { c = 3, a = 1, b = 2 };"),
    "struct expression with ...": dict(body="hdr.h = { a = 1, ... };"),
    "the ... expression": dict(body="hdr.h.a = ...;"),
    "indexed slice +: with a constant lo": dict(body="hdr.h.a = hdr.h.c[4 +: 8]; hdr.h.c[0 +: 4] = 4w3;"),
    "parenthesised one-element keysets": dict(
        start="state start { pkt.extract(hdr.h); transition select(hdr.h.a) { (8w1 &&& 8w3): accept; "
              "(8w4 .. 8w9): s2; (_): reject; } } state s2 { transition accept; }"),
}


def _program(write_p4, start: str = START, **pieces: str):
    text = SKELETON.format(**{"body": "", "locals": "", "decls": "", **pieces})
    return write_p4(text=text.replace(START, start))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_construct_parses_then_is_refused_where_it_is(write_p4, name):
    pieces, where, message = REFUSED[name]
    with pytest.raises(P4Error) as err:
        load_program(_program(write_p4, **pieces))
    assert f"{err.value.loc.line}:{err.value.loc.col}" == where
    assert message in err.value.message
    assert "syntax error" not in err.value.message or "syntax error" in message


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_construct_parses_and_loads(write_p4, name):
    assert load_program(_program(write_p4, **ACCEPTED[name]))


def test_state_without_transition_goes_to_reject(write_p4):
    """p4c: a state with no transition statement transitions to reject."""
    prog = load_program(_program(write_p4, start="state start { pkt.extract(hdr.h); }"))
    parser = next(d for d in prog.program.decls if getattr(d, "name", "") == "P")
    assert parser.states[0].transition.state == "reject"
