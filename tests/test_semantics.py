"""Semantic corners found by adversarial programs (see also tests/p4/stf/sem_*.p4)."""

from __future__ import annotations

import pytest

from p4target.executor.switch import Switch

STACK = """
header e_t { bit<8> v; }
bit<8> bump(inout bit<8> z) { z = z + 1; return z; }
"""


def _ingress_source(write_p4, body: str, locals: str = "", decls: str = "") -> str:
    src = Switch.from_file(write_p4(body=body, locals=locals, decls=decls)).source
    start = src.index("def ingress")
    return src[start:src.index("def egress")]


def test_a_stack_element_assigned_from_a_call_that_changes_its_index_is_the_new_index(write_p4):
    # p4c inlines the call before the assignment, so the l-value's index is read after it (new i);
    # an index that itself calls is evaluated first (tests/test_corpus_forms.py, frontend/ordering.py).
    locals = "e_t[4] s; bit<8> i = 0;"
    body = "s[i].v = bump(i); hdr.h.a = s[0].v; hdr.h.b = s[1].v; sm.egress_spec = 1;"
    out = Switch.from_file(write_p4(body=body, locals=locals, decls=STACK)).process(0, bytes(4))
    assert out[0].data == bytes([0, 1, 0, 0])


def test_a_stack_element_assigned_from_a_call_that_leaves_its_index_alone_runs(write_p4):
    locals = "e_t[4] s; bit<8> i = 1; bit<8> j = 7;"
    body = "s[i].setValid(); s[i].v = bump(j); hdr.h.a = s[1].v; hdr.h.b = j; sm.egress_spec = 1;"
    out = Switch.from_file(write_p4(body=body, locals=locals, decls=STACK)).process(0, bytes(4))
    assert out[0].data == bytes([8, 8, 0, 0])


def test_an_inout_argument_read_by_the_callee_through_a_global_is_copied(write_p4):
    locals = "bit<8> g; action inc(inout bit<8> x) { x = x + 1; hdr.h.b = g; }"
    body = "g = hdr.h.a; inc(g); hdr.h.a = g; sm.egress_spec = 1;"
    out = Switch.from_file(write_p4(body=body, locals=locals)).process(0, bytes([5, 0, 0, 0]))
    assert out[0].data == bytes([6, 5, 0, 0])


def test_an_argument_only_read_elsewhere_through_other_fields_keeps_the_fast_path(write_p4):
    # reading hdr.h.b does not touch hdr.h.a: a is still bound without a copy
    locals = "action inc(inout bit<8> x) { x = x + hdr.h.b; }"
    src = _ingress_source(write_p4, "inc(hdr.h.a);", locals)
    assert src.count("S[") == 3, src


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_runtime_stack_index_out_of_range_inside_an_action_drops_the_packet(write_p4, monkeypatch, native):
    """Out of range, BMv2 aborts (tests/p4/builtin_only/stack_index_range.p4); in an apply block the
    built-in target skips the statement, in an action it drops the packet."""
    monkeypatch.setenv("P4TARGET_NATIVE", native)
    locals = "e_t[2] s; action put(bit<8> i) { s[i].setValid(); s[i].v = 1; }"
    body = "put(hdr.h.a); hdr.h.b = s[1].v; sm.egress_spec = 1;"
    switch = Switch.from_file(write_p4(body=body, locals=locals, decls=STACK))
    assert switch.process(0, bytes([1, 0, 0, 0]))[0].data == bytes([1, 1, 0, 0])
    assert switch.process(0, bytes([2, 0, 0, 0])) == []
    assert switch.stats["dropped"] == 1
