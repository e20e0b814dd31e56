"""Forms that real-world P4 programs use (issue 32), each run as p4c + BMv2 run it or refused
with a message that names it: typedefs of bit vectors in headers, struct-typed header fields, list
expressions as tuples,
hash inputs and digest data, tables keyed on an error, for-in loops (BMv2's refusal, Tofino's
range loops), loops that never end, an assignment whose parts have side effects (in p4c's order),
controls passed as constructor arguments, and refusals of what the built-in target does not run
(a parser passed as a constructor argument)."""

from __future__ import annotations

import re

import pytest
from p4.config.v1 import p4info_pb2

from p4target.executor.switch import Switch
from p4target.executor.tna_switch import TnaSwitch
from p4target.frontend import P4Error, load_program
from p4target.p4info import build_p4info

from .conftest import PRELUDE, SKELETON

TYPEDEFS = PRELUDE + """
typedef bit<48> mac_t;
typedef mac_t   mac_alias_t;        // a typedef of a typedef
type    bit<9>  port_t;             // a new type
typedef port_t  port_alias_t;       // a typedef of a new type
typedef bit<16> ether_t;
enum ether_t kind_t { IPV4 = 0x0800, ARP = 0x0806 }  // a serializable enum over a typedef
header eth_t { mac_t dst; mac_alias_t src; kind_t type; }
header port_h { port_alias_t p; bit<7> pad; }
struct headers { eth_t eth; port_h port; }
struct metadata { mac_alias_t seen; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        meta.seen = pkt.lookahead<mac_t>();
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { kind_t.IPV4: port; default: accept; }
    }
    state port { pkt.extract(hdr.port); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action fwd(mac_t to, port_t p) { hdr.eth.dst = to; sm.egress_spec = (bit<9>)p; }
    table by_mac {
        key = { hdr.eth.src: exact; hdr.port.p: exact; }
        actions = { fwd; NoAction; }
        default_action = NoAction();
        const entries = { (48w0x0A0B0C0D0E0F, (port_t)3) : fwd(48w0x112233445566, (port_t)2); }
    }
    apply {
        sm.egress_spec = 1;
        hdr.eth.src = hdr.eth.src + (mac_alias_t)1;
        by_mac.apply();
        hdr.port.p = (port_alias_t)((bit<9>)hdr.port.p + 9w1);
        if (meta.seen != hdr.eth.dst) { hdr.port.pad = 1; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _both(path):
    """The Python executor and the native path, which must agree on every packet."""
    prog = load_program(path)
    return Switch(prog, use_native=False), Switch(prog)


def test_header_fields_of_typedefs_of_bit_vectors(write_p4):
    path = write_p4(text=TYPEDEFS)
    python, native = _both(path)
    assert native.native is not None, native.native_status
    eth = bytes.fromhex("a1a2a3a4a5a6" "0a0b0c0d0e0e" "0800")
    port = bytes.fromhex("0180")  # p = 3, pad = 0
    for sw in (python, native):
        out = sw.process(0, eth + port + b"\x99")
        # src + 1 hits the const entry (src 0A0B0C0D0E0F, p 3): dst rewritten, out on port 2;
        # then p = 4 and pad = 1 (dst changed after the lookahead read it)
        assert out == [(2, bytes.fromhex("112233445566" "0a0b0c0d0e0f" "0800" "0201") + b"\x99")]
        arp = bytes.fromhex("a1a2a3a4a5a6" "000000000001" "0806")
        assert sw.process(0, arp) == [(1, bytes.fromhex("a1a2a3a4a5a6" "000000000002" "0806"))]
    info = build_p4info(load_program(path))
    fields = info.tables[0].match_fields
    assert [(f.name, f.bitwidth, f.type_name.name) for f in fields] == [("hdr.eth.src", 48, ""),
                                                                      ("hdr.port.p", 9, "port_t")]
    params = next(a for a in info.actions if a.preamble.name == "I.fwd").params
    assert [(p.name, p.bitwidth, p.type_name.name) for p in params] == [("to", 48, ""), ("p", 9, "port_t")]


NESTED = PRELUDE + """
struct inner_t { bit<4> x; bool y; bit<3> z; }
struct outer_t { bit<8> a; inner_t i; }
header n_t { bit<8> k; outer_t o; bit<8> m; }   // on the wire: k a x y z m
struct headers { n_t n; n_t p; }
struct metadata { bit<16> h; bit<32> w; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.n); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.p = hdr.n;
        hdr.p.o.i.x = hdr.n.o.i.x + 1;
        hdr.n.setInvalid();
        hdr.n.setValid();                                  // BMv2: every field 0, nested ones too
        hdr.n.o = hdr.p.o;
        hdr.n.k = (bit<8>)hdr.n.minSizeInBits();
        hash(meta.h, HashAlgorithm.identity, 16w0, { hdr.p.o }, 32w65536);
        hdr.n.m = meta.h[7:0];
        hash(meta.w, HashAlgorithm.identity, 32w0, hdr.p, 64w0x100000000);
        if (meta.w == 0x11224D44) { hdr.p.m = 0xAA; }
        if (hdr.p.o == hdr.n.o) { hdr.p.k = 0xEE; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_header_fields_of_struct_type_sit_side_by_side(write_p4):
    """corpus bvec-hdr-bmv2.p4: a struct of bit fields as a header field (p4c's FlattenHeaders puts
    its fields in the header, in order, nested structs too): extract, emit, copies, setValid's zeroes,
    the header's size, hashes of the struct and of the header, struct equality."""
    for sw in _both(write_p4(text=NESTED)):
        # k 11, a 22, x 3 y 1 z 5 (0011 1 101 = 3D), m 44; p = n with x 4 (4D)
        out = sw.process(0, bytes.fromhex("11223D44 99"))
        # n zeroed, o copied back, k 32 bits, m the low byte of identity(o); p's hash and equality hold
        assert out == [(1, bytes.fromhex("20224D4D" "EE224DAA" "99"))]


@pytest.mark.parametrize("decls, message", [
    ("header x_t { bit<8> v; } struct s_t { x_t x; } header n_t { s_t s; }",
     "Field 's' of 'header n_t' cannot have type 'struct s_t'"),
    ("enum color_t { RED } struct s_t { color_t c; } header n_t { s_t s; }",
     "Field 's' of 'header n_t' cannot have type 'struct s_t'"),
    ("header n_t { tuple<bit<8>> t; }", "Field 't' of 'header n_t' cannot have type 'tuple<bit<8>>'"),
    ("struct s_t { bit<8> v; } header n_t { s_t s; varbit<16> o; }",
     "a struct field ('s') in a header with a varbit field is not supported by the built-in target"),
])
def test_struct_fields_p4c_refuses_in_a_header(write_p4, decls, message):
    """p4c's type checker: a header's struct field holds bit<W>, int<W>, bool, serializable enums or
    such structs only."""
    with pytest.raises(P4Error, match=re.escape(message)):
        load_program(write_p4(decls=decls))


TUPLE_CASES = [
    # body, input bytes (a b c), output bytes
    ("tuple<bit<8>, bit<16>> t = {8w1, 16w2}; hdr.h.a = t[0]; hdr.h.c = t[1];", "010203 04", "010200 02"),
    ("tuple<bit<8>, bit<16>> t = {3, 4}; t[0] = t[0] + hdr.h.a; hdr.h.a = t[0]; hdr.h.c = t[1];",
     "010203 04", "040200 04"),
    ("tuple<bit<8>, tuple<bit<8>, bit<16>>> t = {1, {hdr.h.b, 3}}; tuple<bit<8>, bit<16>> u = t[1]; "
     "hdr.h.a = t[0] + u[0]; hdr.h.c = u[1];", "010203 04", "030200 03"),
    ("tuple<bit<8>, bit<16>> t = {hdr.h.a, hdr.h.c}; tuple<bit<8>, bit<16>> u; u = t; hdr.h.b = u[0]; "
     "hdr.h.c = u[1] + 1;", "010203 04", "010103 05"),
    ("hdr.h.b = first({hdr.h.a, 8w9}) + first({8w4, hdr.h.b});", "010203 04", "010503 04"),
    ("bit<16> x; hash(x, HashAlgorithm.identity, 16w0, { hdr.h.a, { hdr.h.b } }, 32w65536); hdr.h.c = x;",
     "010203 04", "010201 02"),
    ("tuple<bit<8>, bit<8>> t = {hdr.h.b, hdr.h.a}; bit<16> x; "
     "hash(x, HashAlgorithm.identity, 16w0, t, 32w65536); hdr.h.c = x;", "010203 04", "010202 01"),
    ("pair_t k = {hdr.h.a, hdr.h.a}; bit<16> x; hash(x, HashAlgorithm.identity, 16w0, k, 32w65536); "
     "hdr.h.c = x;", "070203 04", "070207 07"),
]


@pytest.mark.parametrize("body, packet, expected", TUPLE_CASES)
def test_list_expressions_initialise_tuples_and_feed_hashes(write_p4, body, packet, expected):
    decls = "struct pair_t { bit<8> x; bit<8> y; } bit<8> first(in tuple<bit<8>, bit<8>> t) { return t[0]; }"
    for sw in _both(write_p4(body=body + " sm.egress_spec = 1;", decls=decls)):
        assert sw.process(0, bytes.fromhex(packet)) == [(1, bytes.fromhex(expected))]


def test_a_digest_of_a_list_expression_fills_the_named_struct(write_p4):
    decls = "struct learn_t { bit<8> a; bit<16> c; }"
    body = "digest<learn_t>(1, { hdr.h.a, hdr.h.c }); sm.egress_spec = 1;"
    path = write_p4(body=body, decls=decls)
    for sw in _both(path):
        sw.process(0, bytes.fromhex("07 00 0102"))
        assert sw.hooks.digests == [("learn_t", 1, (7, 0x0102))]
    assert [d.preamble.name for d in build_p4info(load_program(path)).digests] == ["learn_t"]


@pytest.mark.parametrize("body, message", [
    ("tuple<bit<8>, bit<16>> t = {8w1, 16w2}; hdr.h.a = t[2];", "Tuple index 2 larger than tuple size 2"),
    ("tuple<bit<8>, bit<8>> t = {8w1, 8w2}; hdr.h.a = t[hdr.h.b];", "Tuple index hdr.h.b must be constant"),
    ("tuple<bit<8>, bit<8>> t = {8w1, 8w2}; hdr.h.a = t.f0;", "a tuple has no field 'f0'"),
    ("tuple<bit<8>, bit<8>> t = {8w1, 8w2, 8w3};", "tuple<bit<8>, bit<8>> has 2 fields, the list has 3"),
    ("digest(1, { hdr.h.a, hdr.h.b });", "digest of a tuple<bit<8>, bit<8>> is not supported by the built-in "
                                          "target: name a struct type"),
])
def test_tuple_forms_outside_p4c_or_the_subset_are_refused_by_name(write_p4, body, message):
    path = write_p4(body=body)
    with pytest.raises(P4Error, match=re.escape(message)) as info:
        Switch.from_file(path)
    assert str(info.value).startswith(f"{path}:14:")


ERROR_KEY = ("action s(bit<8> v) { hdr.h.b = v; } "
             "table t { key = { sm.parser_error: exact; } actions = { s; NoAction; } default_action = s(9); "
             "const entries = { error.NoError: s(1); error.PacketTooShort: s(2); } }")


def test_a_table_keyed_on_an_error_matches_bmv2s_error_codes(write_p4):
    """p4c-bm2-ss keys it on BMv2's 32-bit error code; P4Info gives it bitwidth 0 (p4c: "treat
    error type as string")."""
    path = write_p4(locals=ERROR_KEY, body="t.apply(); sm.egress_spec = 1;")
    for sw in _both(path):
        assert sw.process(0, bytes.fromhex("05 00 0000")) == [(1, bytes.fromhex("05 01 0000"))]
        assert sw.process(0, bytes.fromhex("05 00")) == [(1, bytes.fromhex("05 00"))]  # too short: not emitted
        assert sw.tables["I.t"].keys[0].width == 32
    field = build_p4info(load_program(path)).tables[0].match_fields[0]
    assert (field.name, field.bitwidth, field.match_type) == ("sm.parser_error", 0, p4info_pb2.MatchField.EXACT)


def test_a_ternary_key_of_type_error_is_refused(write_p4):
    locals = "table t { key = { sm.parser_error: ternary; } actions = { NoAction; } }"
    with pytest.raises(P4Error, match="ternary keys must be bit<W>, not error"):
        load_program(write_p4(locals=locals, body="t.apply();"))


INNER = ("control Inner(inout bit<8> x) { apply { x = x + 1; } } "
         "control Outer(inout bit<8> x)(Inner c) { apply { c.apply(x); } } ")


def test_a_control_passed_as_a_constructor_argument_is_that_instance(write_p4):
    """corpus issue1566-bmv2.p4 (and tests/p4/stf/ctor_controls.p4): p4c's SpecializeAll binds the
    parameter to the instance passed, whose objects keep their names; a constructor call makes an
    instance of the copy's own, named after the parameter."""
    decls = ("control Count(inout bit<8> v) { counter(4, CounterType.packets) c; apply { c.count(0); v = v + 1; } } "
             "control Twice(inout bit<8> v)(Count k) { apply { k.apply(v); k.apply(v); } }")
    locals = "Count() one; Twice(one) a; Twice(one) b; Twice(Count()) own;"
    path = write_p4(decls=decls, locals=locals, body="a.apply(hdr.h.a); b.apply(hdr.h.a); own.apply(hdr.h.b); "
                                                    "sm.egress_spec = 1;")
    for sw in _both(path):
        assert sw.process(0, bytes.fromhex("01 01 0000")) == [(1, bytes.fromhex("05 03 0000"))]
        assert (sw.counters["I.one.c"].packets[0], sw.counters["I.own.k.c"].packets[0]) == (4, 2)
    assert [c.preamble.name for c in build_p4info(load_program(path)).counters] == ["I.one.c", "I.own.k.c"]


def test_a_parser_passed_as_a_constructor_argument_is_refused(write_p4):
    """Sub-parsers are inlined per apply site (executor/subparsers.py), not shared with a caller."""
    text = SKELETON.format(decls="parser Sub(packet_in p) { state start { transition accept; } } "
                                 "parser Top(packet_in p)(Sub s) { Sub() t; state start { transition accept; } }",
                           locals="", body="").replace("state start { pkt.extract(hdr.h); transition accept; }",
                                                       "Sub() sub; Top(sub) top; state start { transition accept; }")
    with pytest.raises(P4Error, match=re.escape("Top's constructor parameter 's' of type Sub, a parser passed as a "
                                                "constructor argument, is not supported by the built-in target")):
        load_program(write_p4(text=text))


@pytest.mark.parametrize("decls, locals, body, line, message", [
    (INNER + "control Two(inout bit<8> x, in bit<8> y) { apply { } }", "Two() two; Outer(two) o;", "o.apply(hdr.h.a);",
     13, "Outer's constructor parameter 'c' of type Inner: Two does not have its apply parameters"),
    (INNER, "bit<8> v; Outer(v) o;", "o.apply(hdr.h.a);", 13,
     "Outer's constructor parameter 'c' of type Inner: 'v' is not a control instance"),
])
def test_refusals_name_the_construct(write_p4, decls, locals, body, line, message):
    path = write_p4(decls=decls, locals=locals, body=body)
    with pytest.raises(P4Error) as info:
        Switch.from_file(path)
    assert info.value.message == message
    assert "(internal:" not in str(info.value)
    assert str(info.value).startswith(f"{path}:{line}:")


ORDER_LOCALS = ("s_t x; bit<8> bump(inout bit<8> i) { i = i + 1; return i; } bit<8> same(in bit<8> i) { return i; } "
                "action in_action() { x.s[hdr.h.b].v = bump(hdr.h.b); }")


@pytest.mark.parametrize("body, packet, expected", [
    # an index without a call is read after the right-hand side's call (p4c inlines bump before the
    # assignment): element 1 gets 1
    ("bit<8> i = 0; x.s[i].v = bump(i); hdr.h.a = x.s[0].v; hdr.h.b = x.s[1].v;", "03 03 0000", "00 01 0000"),
    ("in_action(); hdr.h.a = x.s[0].v; hdr.h.c = (bit<16>)x.s[1].v;", "03 00 0000", "00 01 0001"),
    # an index with a call is evaluated first, into a temporary (SideEffectOrdering; corpus
    # gauntlet_index_7-bmv2.p4): element 0 gets 1
    ("bit<8> i = 0; x.s[same(i)].v = bump(i); hdr.h.a = x.s[0].v; hdr.h.b = x.s[1].v;", "03 03 0000", "01 00 0000"),
    # `op=`: the index's call runs once per statement (corpus opassign2-bmv2.p4)
    ("bit<8> i = 0; x.s[bump(i)].v |= 4; x.s[bump(i)].v |= 8; hdr.h.a = x.s[1].v; hdr.h.b = i; "
     "hdr.h.c = (bit<16>)x.s[2].v;", "03 03 0000", "04 02 0008"),
    # `a op= f(a)` reads a after the call (p4c 1.2.5.5 on: RemoveOpAssign runs after
    # SideEffectOrdering); `b = b + f(b)` reads b before it: 3 -> 4 + 4, 3 + 4
    ("hdr.h.a += bump(hdr.h.a); hdr.h.b = hdr.h.b + bump(hdr.h.b);", "03 03 0000", "08 07 0000"),
])
def test_an_assignment_runs_its_parts_in_p4cs_order(write_p4, body, packet, expected):
    path = write_p4(decls="header e_t { bit<8> v; } struct s_t { e_t[3] s; }", locals=ORDER_LOCALS,
                    body=body + " sm.egress_spec = 1;")
    for sw in _both(path):
        assert sw.process(0, bytes.fromhex(packet)) == [(1, bytes.fromhex(expected))]

def test_for_in_loops_are_bmv2s_refusal_not_tofinos(tmp_path, write_p4):
    """p4c-bm2-ss refuses every for-in ("BMV2 does not support for-in loops"); a TNA program keeps
    its range loops.  A list is refused on both by p4c's frontend."""
    from .test_tna import program

    tna = TnaSwitch.from_file(program(tmp_path, body="for (bit<16> i in 1 .. 3) { hdr.h.a = hdr.h.a + i; }"))
    assert tna.process(7, bytes.fromhex("0001 0002")) == [(7, bytes.fromhex("0007 0002"))]
    with pytest.raises(P4Error, match=re.escape("BMV2 does not support for-in loops")):
        load_program(write_p4(body="for (bit<8> i in 1 .. 3) { hdr.h.a = hdr.h.a + i; }"))
    listed = "for (bit<16> i in {16w1, 16w2}) { hdr.h.a = hdr.h.a + i; }"
    with pytest.raises(P4Error, match=re.escape("iteration over this collection of type tuple<bit<16>, bit<16>>")):
        load_program(program(tmp_path, body=listed))
    with pytest.raises(P4Error, match="Division|could not evaluate expression at compilation time"):
        load_program(program(tmp_path, body="hdr.h.a = hdr.h.a / hdr.h.b;"))


@pytest.mark.parametrize("native", [False, True])
def test_a_loop_that_never_ends_drops_its_packet(write_p4, native):
    """P4 does not require loops to end (BMv2 would hang): after LOOP_LIMIT turns of one loop the
    packet is dropped and counted in loop_drops; the next packet runs."""
    locals = "action spin() { for (bit<8> i = 0; i < 2; i = 1) { hdr.h.a = hdr.h.a + 1; } }"
    body = "if (hdr.h.b == 1) { spin(); } for (bit<8> j = 0; j < 3; j += 1) { hdr.h.c = hdr.h.c + 1; } " \
           "sm.egress_spec = 1;"
    sw = Switch(load_program(write_p4(locals=locals, body=body)), use_native=native)
    assert (sw.native is not None) == native
    assert sw.process(0, bytes.fromhex("00 01 0000")) == []
    assert sw.process(0, bytes.fromhex("00 00 0000")) == [(1, bytes.fromhex("00 00 0003"))]
    assert sw.stats["loop_drops"] == 1 and sw.stats["internal_errors"] == 0
