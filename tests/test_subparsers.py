"""Sub-parsers and constructor parameters: refusals and corners the STF pairs
(stf/subparser, stf/ctor_args) do not reach."""

from __future__ import annotations

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program
from p4target.p4info import build_p4info

from .conftest import PRELUDE

# h.d reports the parser error: 0 none, 1 error.Bad, 2 any other.
TEMPLATE = PRELUDE + """
error {{ Bad }}
header h_t {{ bit<8> a; bit<8> b; bit<8> c; bit<8> d; }}
struct headers {{ h_t h; h_t h2; }}
struct metadata {{ bit<8> m; }}
{decls}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    {locals}
    state start {{ {start} }}
    {states}
}}
control V(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    {ilocals}
    apply {{
        sm.egress_spec = 1;
        {body}
        hdr.h.d = sm.parser_error == error.NoError ? 8w0 : (sm.parser_error == error.Bad ? 8w1 : 8w2);
    }}
}}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); pkt.emit(hdr.h2); }} }}
V1Switch(P(), V(), {ingress}, E(), C(), D()) main;
"""


def _program(write_p4, decls: str = "", locals: str = "", start: str = "", states: str = "", ilocals: str = "",
             body: str = "", ingress: str = "I()"):
    return write_p4(text=TEMPLATE.format(decls=decls, locals=locals, start=start, states=states,
                                         ilocals=ilocals, body=body, ingress=ingress))


def _run(path, data: bytes) -> bytes:
    out = Switch.from_file(path).process(0, data)
    assert len(out) == 1
    return out[0].data


SUB_H = "parser S(packet_in p, out h_t x) { state start { p.extract(x); verify(x.a != 0xEE, error.Bad); " \
        "transition accept; } }"


@pytest.mark.parametrize(("kw", "message"), [
    (dict(decls=SUB_H, locals="S() s;", start="pkt.extract(hdr.h); if (hdr.h.a == 1) { s.apply(pkt, hdr.h2); } "
          "transition accept;"), "sub-parser apply inside a block or an 'if'"),
    (dict(decls=SUB_H, ilocals="S() s;", start="transition accept;"), "only be instantiated inside a parser"),
    (dict(decls="parser R(packet_in p) { R() r; state start { transition accept; } }", start="transition accept;"),
     "Self-referencing types not supported: 'R' within 'parser R'"),  # p4c's ResolveReferences
    (dict(decls="control K(inout bit<8> v)(bit<8> k) { apply { v = v + k; } }", ilocals="K(meta.m) k1;",
          start="transition accept;"), "compile-time constants"),
    (dict(decls="control K(inout bit<8> v)(bit<8> k) { apply { v = v + k; } }", ilocals="K() k1;",
          start="transition accept;"), "missing an argument for parameter 'k'"),
    (dict(decls="control K(inout bit<8> v) { apply { } }", ilocals="K(8w1) k1;", start="transition accept;"),
     "K takes no constructor arguments"),
    (dict(decls="control K(inout bit<8> v)(h_t k) { apply { } }", ilocals="K({1, 2, 3, 4}) k1;",
          start="transition accept;"), "constructor parameter 'k' of type h_t is not supported"),
    (dict(start="transition accept;", ingress="I(8w1)"), "I takes no constructor arguments"),
])
def test_refusals(write_p4, kw, message):
    with pytest.raises(P4Error, match=message):
        load_program(_program(write_p4, **kw))


def test_constructor_parameters_size_an_extern_take_defaults_and_names(write_p4):
    """A parameter is a constant like any other: it sizes a register, is cast, and has
    a default; named arguments work; the pipeline's ingress takes one from V1Switch."""
    decls = """control K(inout bit<8> v)(bit<32> n, bit<8> add = 8w2) {
        register<bit<8>>(n) r;
        apply { r.write(n - 1, v); r.read(v, n - 1); v = v + (bit<8>) n + add; }
    }"""
    ctl = TEMPLATE.replace("control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm)",
                           "control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm)"
                           "(bit<8> base)")
    path = write_p4(text=ctl.format(decls=decls, locals="", start="pkt.extract(hdr.h); transition accept;",
                                    states="", ilocals="K(32w4) k1; K(add = 8w9, n = 32w1) k2;",
                                    body="k1.apply(hdr.h.a); k2.apply(hdr.h.b); hdr.h.c = base;",
                                    ingress="I(8w0x33)"))
    assert _run(path, bytes([1, 1, 0, 0])) == bytes([1 + 4 + 2, 1 + 1 + 9, 0x33, 0])
    sw = Switch.from_file(path)
    assert sorted(sw.registers) == ["I.k1.r", "I.k2.r"]
    assert [sw.registers[n].size for n in sorted(sw.registers)] == [4, 1]


def test_instances_with_the_same_arguments_keep_their_own_tables(write_p4):
    decls = """control K(inout bit<8> v)(bit<8> k) {
        action add() { v = v + k; }
        table t { actions = { add; } default_action = add(); }
        apply { t.apply(); }
    }"""
    path = _program(write_p4, decls=decls, start="pkt.extract(hdr.h); transition accept;",
                    ilocals="K(8w1) k1; K(8w1) k2;", body="k1.apply(hdr.h.a); k2.apply(hdr.h.a);")
    assert _run(path, bytes(4)) == bytes([2, 0, 0, 0])
    info = build_p4info(load_program(path))
    assert [t.preamble.name for t in info.tables] == ["I.k1.t", "I.k2.t"]


def test_a_sub_parser_value_set_is_named_under_its_instance(write_p4):
    decls = """parser S(packet_in p, out h_t x) {
        value_set<bit<8>>(4) vs;
        state start { p.extract(x); transition select(x.a) { vs: accept; default: accept; } }
    }"""
    path = _program(write_p4, decls=decls, locals="S() s;", start="s.apply(pkt, hdr.h); transition accept;")
    info = build_p4info(load_program(path))
    assert [v.preamble.name for v in info.value_sets] == ["P.s.vs"]
    assert _run(path, bytes([5, 6, 7, 8])) == bytes([5, 6, 7, 0])


def test_after_an_error_writes_show_only_for_arguments_bound_without_a_copy(write_p4):
    """p4c's Inline binds a parameter to its argument when every apply of the instance
    passes the same arguments; else it copies, and an error skips the copy-out."""
    same = _program(write_p4, decls=SUB_H, locals="S() s;", start="s.apply(pkt, hdr.h2); transition accept;")
    # h2 = EE.. fails verify: h2 was extracted into hdr.h2 itself, so it is emitted
    assert _run(same, bytes([0xEE, 1, 2, 3])) == bytes([0xEE, 1, 2, 3])
    twice = _program(write_p4, decls=SUB_H, locals="S() s;", start="s.apply(pkt, hdr.h); transition next;",
                     states="state next { s.apply(pkt, hdr.h2); transition accept; }")
    # h is copied out (no error); h2's copy never is: it stays invalid (its bytes were consumed)
    assert _run(twice, bytes([1, 2, 3, 4, 0xEE, 5, 6, 7])) == bytes([1, 2, 3, 1])
    assert _run(twice, bytes([1, 2, 3, 4, 8, 5, 6, 7])) == bytes([1, 2, 3, 0, 8, 5, 6, 7])


def test_overlapping_arguments_are_copied_and_copied_back_in_order(write_p4):
    decls = """parser S(packet_in p, inout h_t h, inout bit<8> x) {
        state start { x = 7; h.b = h.a; transition accept; }
    }"""
    path = _program(write_p4, decls=decls, locals="S() s;",
                    start="pkt.extract(hdr.h); s.apply(pkt, hdr.h, hdr.h.a); transition accept;")
    # h.b = the copy of a (5), not the 7 written through x; then h, then x (a = 7) copied back
    assert _run(path, bytes([5, 0, 0, 0])) == bytes([7, 5, 0, 0])


def test_reject_in_a_sub_parser_ends_the_parse_without_an_error(write_p4):
    decls = "parser S(packet_in p, out h_t x) { state start { p.extract(x); transition reject; } }"
    path = _program(write_p4, decls=decls, locals="S() s;",
                    start="pkt.extract(hdr.h); s.apply(pkt, hdr.h2); hdr.h.c = 9; transition accept;")
    # BMv2 treats an explicit reject as the end of parsing (see stf/README.md): c stays 3
    assert _run(path, bytes([1, 2, 3, 4, 5, 6, 7, 8])) == bytes([1, 2, 3, 0, 5, 6, 7, 8])


def test_dont_care_out_argument_and_statements_around_the_apply(write_p4):
    decls = "parser S(packet_in p, out h_t x) { state start { p.extract(x); transition accept; } }"
    path = _program(write_p4, decls=decls, locals="S() s; bit<8> n = 1;",
                    start="pkt.extract(hdr.h); n = n + hdr.h.a; s.apply(pkt, _); s.apply(pkt, _); "
                          "hdr.h.c = n; transition accept;")
    # two headers skipped into scratch variables; the state's statements before and after run
    assert _run(path, bytes([4, 0, 0, 0, 9, 9, 9, 9, 8, 8, 8, 8, 7])) == bytes([4, 0, 5, 0, 7])


def test_programs_without_sub_parsers_keep_their_parser_code(write_p4):
    path = _program(write_p4, start="pkt.extract(hdr.h); transition accept;")
    src = Switch.from_file(path).source
    parse = src[src.index("def parse"):src.index("def verify_checksum")]
    assert "# state start" in parse and "after" not in parse and parse.count("st ==") == 1
