"""Calls: copy-in/copy-out corners, functions, named and default arguments, refusals."""

from __future__ import annotations

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program


def _run(write_p4, body: str, data: bytes, locals: str = "", decls: str = "") -> bytes:
    """Run ingress ``body`` (SKELETON: h_t {a: bit<8>, b: bit<8>, c: bit<16>}) on one packet."""
    sw = Switch.from_file(write_p4(body=body + " sm.egress_spec = 1;", locals=locals, decls=decls))
    out = sw.process(0, data)
    assert len(out) == 1
    return out[0].data


def _ingress_source(write_p4, body: str, locals: str = "", decls: str = "") -> str:
    src = Switch.from_file(write_p4(body=body, locals=locals, decls=decls)).source
    start = src.index("def ingress")
    return src[start:src.index("def egress")]


def test_an_inout_argument_that_nothing_else_touches_is_bound_without_a_copy(write_p4):
    locals = "action inc(inout bit<8> x) { x = x + 1; }"
    src = _ingress_source(write_p4, "inc(hdr.h.a);", locals)
    assert src.count("S[") == 2, src  # one read, one write of hdr.h.a itself: no temporary


def test_an_in_argument_written_by_the_callee_through_another_name_is_copied(write_p4):
    locals = "action g(in bit<8> v) { hdr.h.a = 9; hdr.h.b = v; }"
    assert _run(write_p4, "g(hdr.h.a);", bytes([5, 0, 0, 0]), locals) == bytes([9, 5, 0, 0])


def test_an_argument_with_a_call_in_it_is_evaluated_before_later_arguments(write_p4):
    decls = "bit<8> bump(inout bit<8> x) { x = x + 1; return x; }"
    locals = "action put(in bit<8> first, in bit<8> second) { hdr.h.a = first; hdr.h.b = second; }"
    # first = old a (5); bump makes a 6 and returns 6
    assert _run(write_p4, "put(hdr.h.a, bump(hdr.h.a));", bytes([5, 0, 0, 0]), locals, decls) == bytes([5, 6, 0, 0])


def test_a_table_action_out_parameter_is_copied_back_after_exit(write_p4):
    locals = """action set_exit(out bit<8> x) { x = 0x44; exit; }
        table t { key = { } actions = { set_exit(hdr.h.b); } default_action = set_exit(hdr.h.b); }"""
    assert _run(write_p4, "sm.egress_spec = 1; t.apply(); hdr.h.b = 0x99;", bytes([1, 2, 0, 0]), locals) \
        == bytes([1, 0x44, 0, 0])


def test_a_function_returning_a_struct_and_a_generic_function_with_explicit_type_arguments(write_p4):
    decls = """struct pair_t { bit<8> x; bit<8> y; }
        pair_t mk(in bit<8> a, in bit<8> b) { pair_t p = { b, a }; return p; }
        void put<T>(in T v, out T r) { r = v; }"""
    body = "pair_t p = mk(hdr.h.a, hdr.h.b); hdr.h.a = p.x; put<bit<8>>(7, hdr.h.b);"
    assert _run(write_p4, body, bytes([1, 2, 0, 0]), decls=decls) == bytes([2, 7, 0, 0])


def test_named_arguments_and_defaults_for_actions(write_p4):
    locals = "action set(bit<8> v, bit<8> w = 8w3) { hdr.h.a = v; hdr.h.b = w; }"
    assert _run(write_p4, "set(w = 8w9, v = 8w4);", bytes(4), locals) == bytes([4, 9, 0, 0])
    assert _run(write_p4, "set(8w4);", bytes(4), locals) == bytes([4, 3, 0, 0])


@pytest.mark.parametrize(("decls", "body", "message"), [
    ("bit<8> f(in bit<8> x) { exit; return x; }", "", "exit is not allowed in a function"),
    ("bit<8> f(in bit<8> x) { return; }", "", "must return a value"),
    ("void f(in bit<8> x) { return x; }", "", "'return' cannot have a value"),
    ("T f<T>(in T x) { return x; }", "hdr.h.a = f(1);", "cannot infer a width"),
    ("bit<8> f(in bit<8> x, in bit<8> y) { return x; }", "hdr.h.a = f(x = 1, 2);", "cannot mix named"),
    ("bit<8> f(in bit<8> x) { return x; }", "hdr.h.a = f(z = 1);", "no parameter named 'z'"),
    ("bit<8> f(in bit<8> x, in bit<8> y) { return x; }", "hdr.h.a = f(1);", "missing an argument"),
    ("void f(in bit<8> x) { }", "f<bit<8>>(1);", "expected 0 type arguments"),
])
def test_refused_calls(write_p4, decls, body, message):
    with pytest.raises(P4Error, match=message):
        load_program(write_p4(body=body, decls=decls))

