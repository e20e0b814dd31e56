"""P4Info generation: p4c's names, ids and fields for v1model programs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2

from p4target.frontend import P4Error, load_program
from p4target.p4info import (
    ACTION,
    COUNTER,
    DIRECT_COUNTER,
    REGISTER,
    TABLE,
    IdAllocator,
    aliases,
    build_p4info,
    jenkins_hash,
    qualified_objects,
)

BASIC = Path(__file__).parent / "p4" / "basic.p4"

# A v1model skeleton: {top} goes before the ingress control, {ingress} into its locals and
# {apply} into its apply block.
SKELETON = """\
#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> f; bit<16> g; bit<32> addr; }}
struct headers {{ h_t h; h_t[2] stack; }}
struct metadata {{ bit<8> m; bool flag; }}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control VC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
{top}
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
{ingress}
    apply {{
{apply}
    }}
}}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control Dep(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), Ing(), Eg(), CC(), Dep()) main;
"""


def p4info_of(tmp_path: Path, ingress: str, apply: str = "", top: str = "") -> p4info_pb2.P4Info:
    path = tmp_path / "prog.p4"
    path.write_text(SKELETON.format(top=top, ingress=ingress, apply=apply))
    return build_p4info(load_program(path))


def by_name(items, name: str):
    found = [x for x in items if x.preamble.name == name]
    assert len(found) == 1, f"{name} not found once in {[x.preamble.name for x in items]}"
    return found[0]


def hashed(prefix: int, name: str) -> int:
    return (prefix << 24) | (jenkins_hash(name) & 0xFFFFFF)


# ---------------------------------------------------------------- basic.p4 (the p4lang tutorial's ids)
@pytest.fixture(scope="module")
def basic() -> p4info_pb2.P4Info:
    return build_p4info(load_program(BASIC))


def test_basic_action_ids(basic: p4info_pb2.P4Info) -> None:
    assert by_name(basic.actions, "NoAction").preamble.id == 21257015
    assert by_name(basic.actions, "MyIngress.ipv4_forward").preamble.id == 28792405
    drop = by_name(basic.actions, "MyIngress.drop")
    assert drop.preamble.id >> 24 == 0x01
    assert drop.preamble.id == 25652968
    assert drop.preamble.alias == "drop"
    assert [a.preamble.name for a in basic.actions] == ["NoAction", "MyIngress.drop", "MyIngress.ipv4_forward"]
    assert list(by_name(basic.actions, "NoAction").preamble.annotations) == ['@noWarn("unused")']


def test_basic_action_params(basic: p4info_pb2.P4Info) -> None:
    params = by_name(basic.actions, "MyIngress.ipv4_forward").params
    assert [(p.id, p.name, p.bitwidth) for p in params] == [(1, "dstAddr", 48), (2, "port", 9)]


def test_basic_table(basic: p4info_pb2.P4Info) -> None:
    assert len(basic.tables) == 1
    t = basic.tables[0]
    assert (t.preamble.id, t.preamble.name, t.preamble.alias) == (37375156, "MyIngress.ipv4_lpm", "ipv4_lpm")
    assert len(t.match_fields) == 1
    mf = t.match_fields[0]
    assert (mf.id, mf.name, mf.bitwidth, mf.match_type) == (1, "hdr.ipv4.dstAddr", 32, p4info_pb2.MatchField.LPM)
    assert [r.id for r in t.action_refs] == [28792405, 25652968, 21257015]
    assert all(r.scope == p4info_pb2.ActionRef.TABLE_AND_DEFAULT for r in t.action_refs)
    assert t.size == 1024
    assert t.const_default_action_id == 0  # default_action = drop() is not const
    assert not t.is_const_table


def test_basic_pkg_info(basic: p4info_pb2.P4Info) -> None:
    assert basic.pkg_info.arch == "v1model"
    assert len(basic.counters) == len(basic.registers) == len(basic.direct_counters) == 0


def test_basic_qualified_objects() -> None:
    objs = qualified_objects(load_program(BASIC))
    assert [(o.name, o.kind, o.scope) for o in objs] == [
        ("NoAction", "action", ""),
        ("MyIngress.drop", "action", "MyIngress"),
        ("MyIngress.ipv4_forward", "action", "MyIngress"),
        ("MyIngress.ipv4_lpm", "table", "MyIngress"),
    ]


# ---------------------------------------------------------------- the hash and the id allocator
def test_jenkins_hash_known_values() -> None:
    assert jenkins_hash("") == 0
    assert jenkins_hash("NoAction") & 0xFFFFFF == 21257015 & 0xFFFFFF
    assert jenkins_hash("a") == 0xCA2E9442  # one-at-a-time("a"), the textbook value
    assert hashed(ACTION, ".NoAction") == 19113654  # a leading dot is not part of the name


def test_collision_probes_in_sorted_name_order() -> None:
    alloc = IdAllocator(hash_fn=lambda name: 0xAB345678)
    ids = alloc.assign(ACTION, ["zeta", "alpha", "mid"])
    assert ids == {"alpha": 0x01345678, "mid": 0x01345679, "zeta": 0x0134567A}


def test_collision_probe_wraps_low_24_bits_and_skips_reserved() -> None:
    alloc = IdAllocator(hash_fn=lambda name: 0x00FFFFFF)
    node = load_program(BASIC).pipeline.main
    assert alloc.reserve(TABLE, 0xFFFFFF, node) == 0x02FFFFFF
    assert alloc.assign(TABLE, ["t1", "t2"]) == {"t1": 0x02000000, "t2": 0x02000001}
    # other prefixes do not collide with the same low bits
    assert alloc.assign(ACTION, ["a"]) == {"a": 0x01FFFFFF}


def test_reserve_rejects_wrong_prefix_and_duplicates() -> None:
    alloc = IdAllocator()
    node = load_program(BASIC).pipeline.main
    assert alloc.reserve(COUNTER, 0x12000009, node) == 0x12000009
    with pytest.raises(P4Error, match="wrong 8-bit prefix"):
        alloc.reserve(COUNTER, 0x13000001, node)
    with pytest.raises(P4Error, match="multiple declarations"):
        alloc.reserve(COUNTER, 9, node)


def test_aliases_shortest_unique_suffix() -> None:
    got = aliases(["MyIngress.t", "MyIngress.s.t", "MyEgress.u", "NoAction"])
    assert got == {"MyIngress.t": "MyIngress.t", "MyIngress.s.t": "s.t", "MyEgress.u": "u", "NoAction": "NoAction"}


# ---------------------------------------------------------------- annotations
def test_id_annotation_is_honoured(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    @id(5) action a() { }
    @id(0x02000077) table t { key = { hdr.h.f: exact; } actions = { a; } }
    action b() { }
    """, "t.apply(); b();")
    assert by_name(info.actions, "Ing.a").preamble.id == 0x01000005
    assert by_name(info.tables, "Ing.t").preamble.id == 0x02000077
    assert by_name(info.actions, "Ing.b").preamble.id == hashed(ACTION, "Ing.b")


def test_id_with_wrong_prefix_is_rejected_with_location(tmp_path: Path) -> None:
    with pytest.raises(P4Error) as exc:
        p4info_of(tmp_path, "\n    @id(0x02000001) action a() { }\n", "a();")
    msg = str(exc.value)
    assert re.match(r".*prog\.p4:13:5: ", msg), msg  # file:line:col of the action declaration
    assert "wrong 8-bit prefix" in msg


def test_name_annotation_relative_and_absolute(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    @name("fwd") action forward(bit<9> port) { sm.egress_spec = port; }
    @name(".global_drop") action drop() { mark_to_drop(sm); }
    @name("lookup") table t { key = { hdr.h.f: exact @name("the_f"); } actions = { forward; drop; } }
    @name(".top_t") table t2 { key = { meta.m: ternary; } actions = { drop; } }
    """, "t.apply(); t2.apply();")
    names = sorted(a.preamble.name for a in info.actions)
    assert names == ["Ing.fwd", "NoAction", "global_drop"]
    t = by_name(info.tables, "Ing.lookup")
    assert t.preamble.id == hashed(TABLE, "Ing.lookup")
    assert t.match_fields[0].name == "the_f"
    assert by_name(info.tables, "top_t").preamble.id == hashed(TABLE, "top_t")
    assert by_name(info.actions, "global_drop").preamble.id == hashed(ACTION, "global_drop")


def test_hidden_table_and_action_are_left_out(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    @hidden action h() { }
    action v() { }
    @hidden table ht { actions = { h; } default_action = h(); }
    table vt { key = { hdr.h.f: exact; } actions = { v; h; } }
    """, "ht.apply(); vt.apply();")
    assert [t.preamble.name for t in info.tables] == ["Ing.vt"]
    assert sorted(a.preamble.name for a in info.actions) == ["Ing.v", "NoAction"]
    # the reference to the hidden action is dropped; the implicit default NoAction is @defaultonly
    refs = by_name(info.tables, "Ing.vt").action_refs
    assert [r.id for r in refs] == [hashed(ACTION, "Ing.v"), 21257015]
    assert refs[1].scope == p4info_pb2.ActionRef.DEFAULT_ONLY
    assert list(refs[1].annotations) == ["@defaultonly"]


def test_counters_direct_counters_registers(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    counter(64, CounterType.packets_and_bytes) c;
    counter(8, CounterType.bytes) cb;
    direct_counter(CounterType.packets) dc;
    register<bit<16>>(32) r;
    register<int<8>>(4) sr;
    action a() { c.count(1); }
    table t { key = { hdr.h.g: range; } actions = { a; } counters = dc; size = 512; }
    """, "t.apply(); cb.count(0);")
    c = by_name(info.counters, "Ing.c")
    assert (c.preamble.id, c.spec.unit, c.size) == (hashed(COUNTER, "Ing.c"), p4info_pb2.CounterSpec.BOTH, 64)
    assert by_name(info.counters, "Ing.cb").spec.unit == p4info_pb2.CounterSpec.BYTES
    t = by_name(info.tables, "Ing.t")
    dc = by_name(info.direct_counters, "Ing.dc")
    assert dc.preamble.id == hashed(DIRECT_COUNTER, "Ing.dc")
    assert dc.spec.unit == p4info_pb2.CounterSpec.PACKETS
    assert dc.direct_table_id == t.preamble.id
    assert list(t.direct_resource_ids) == [dc.preamble.id]
    assert t.size == 512
    assert t.match_fields[0].match_type == p4info_pb2.MatchField.RANGE
    r = by_name(info.registers, "Ing.r")
    assert r.preamble.id == hashed(REGISTER, "Ing.r")
    assert (r.type_spec.bitstring.bit.bitwidth, r.size) == (16, 32)
    assert by_name(info.registers, "Ing.sr").type_spec.bitstring.int.bitwidth == 8


def test_const_default_action_and_const_entries(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    action drop() { mark_to_drop(sm); }
    action set(bit<8> v, bool b) { meta.m = v; meta.flag = b; }
    table t {
        key = { hdr.h.f: exact; }
        actions = { set; @tableonly drop; }
        const default_action = set(3, false);  // not drop: p4c refuses a @tableonly default action
        const entries = { 1: set(2, true); }
    }
    """, "t.apply();")
    t = by_name(info.tables, "Ing.t")
    assert t.const_default_action_id == hashed(ACTION, "Ing.set")
    assert t.is_const_table and t.has_initial_entries
    assert [r.scope for r in t.action_refs] == [p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
                                                p4info_pb2.ActionRef.TABLE_ONLY]
    params = by_name(info.actions, "Ing.set").params
    assert [(p.id, p.name, p.bitwidth) for p in params] == [(1, "v", 8), (2, "b", 1)]


def test_match_field_names_and_types(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, """
    table t {
        key = {
            hdr.h.isValid(): exact;
            hdr.h.addr[31:24]: lpm;
            hdr.stack[1].f: ternary;
            sm.ingress_port: optional;
            meta.flag: exact;
            hdr.h.g & 0x0ff0: ternary;
        }
        actions = { NoAction; }
    }
    """, "t.apply();")
    fields = [(m.id, m.name, m.bitwidth, m.match_type) for m in by_name(info.tables, "Ing.t").match_fields]
    mt = p4info_pb2.MatchField
    assert fields == [
        (1, "hdr.h.$valid$", 1, mt.EXACT),
        (2, "hdr.h.addr[31:24]", 8, mt.LPM),
        (3, "hdr.stack[1].f", 8, mt.TERNARY),
        (4, "sm.ingress_port", 9, mt.OPTIONAL),
        (5, "meta.flag", 1, mt.EXACT),
        (6, "hdr.h.g & 0x0ff0", 16, mt.TERNARY),
    ]


def test_complex_key_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(P4Error, match="Complex key expression requires a @name annotation"):
        p4info_of(tmp_path, "    table t { key = { hdr.h.f + 1: exact; } actions = { NoAction; } }", "t.apply();")


def test_sub_control_instance_names(tmp_path: Path) -> None:
    top = """
control Sub(inout headers hdr, inout standard_metadata_t sm) {
    action a() { }
    action b() { }
    table t { key = { hdr.h.f: exact; } actions = { a; NoAction; } }
    register<bit<8>>(2) r;
    apply { t.apply(); }
}
"""
    info = p4info_of(tmp_path, """
    Sub() s;
    @name("other") Sub() s2;
    table t { key = { hdr.h.f: exact; } actions = { NoAction; } }
    """, "s.apply(hdr, sm); s2.apply(hdr, sm); t.apply();", top=top)
    assert sorted(t.preamble.name for t in info.tables) == ["Ing.other.t", "Ing.s.t", "Ing.t"]
    assert by_name(info.tables, "Ing.s.t").preamble.id == hashed(TABLE, "Ing.s.t")
    assert by_name(info.tables, "Ing.s.t").preamble.alias == "s.t"
    assert by_name(info.tables, "Ing.t").preamble.alias == "Ing.t"
    assert sorted(a.preamble.name for a in info.actions) == [
        "Ing.other.a", "Ing.other.b", "Ing.s.a", "Ing.s.b", "NoAction"]
    # each instance's table refers to its own copy of the action
    assert by_name(info.tables, "Ing.other.t").action_refs[0].id == hashed(ACTION, "Ing.other.a")
    assert sorted(r.preamble.name for r in info.registers) == ["Ing.other.r", "Ing.s.r"]


def test_top_level_action_called_directly_is_listed(tmp_path: Path) -> None:
    info = p4info_of(tmp_path, "", "set_m();", top="action set_m() { }\naction unused_top() { }")
    assert sorted(a.preamble.name for a in info.actions) == ["set_m"]


def test_executor_names_objects_as_p4info_does_under_a_renamed_control(tmp_path: Path) -> None:
    """P4Runtime finds tables by their P4Info name: a control's @name must rename them in both."""
    from p4target.executor.switch import Switch

    source = BASIC.read_text().replace("control MyIngress(", '@name("Ing") control MyIngress(')
    path = tmp_path / "renamed.p4"
    path.write_text(source)
    info = build_p4info(load_program(path))
    assert {t.preamble.name for t in info.tables} == set(Switch.from_file(path).tables) == {"Ing.ipv4_lpm"}


def test_initial_default_action_with_its_arguments(tmp_path: Path, basic: p4info_pb2.P4Info) -> None:
    """p4c (P4Runtime 1.4) writes every table's default, const or not, implicit NoAction too."""
    assert basic.tables[0].initial_default_action.action_id == 25652968  # drop()
    assert not basic.tables[0].initial_default_action.arguments
    info = p4info_of(tmp_path, """
    action set(bit<8> v, bool b) { meta.m = v; meta.flag = b; }
    action neg(int<8> s) { }
    table t1 { key = { hdr.h.f: exact; } actions = { set; } default_action = set(0x2A, true); }
    table t2 { key = { hdr.h.f: exact; } actions = { neg; } const default_action = neg(-2); }
    table t3 { key = { hdr.h.f: exact; } actions = { set; } }
    """, "t1.apply(); t2.apply(); t3.apply();")
    d1 = by_name(info.tables, "Ing.t1").initial_default_action
    assert d1.action_id == hashed(ACTION, "Ing.set")
    assert [(a.param_id, a.value) for a in d1.arguments] == [(1, b"\x2a"), (2, b"\x01")]
    t2 = by_name(info.tables, "Ing.t2")
    assert t2.const_default_action_id == t2.initial_default_action.action_id == hashed(ACTION, "Ing.neg")
    assert [(a.param_id, a.value) for a in t2.initial_default_action.arguments] == [(1, b"\xfe")]
    assert by_name(info.tables, "Ing.t3").initial_default_action.action_id == 21257015  # NoAction


STF = Path(__file__).parent / "p4" / "stf"


def test_table_without_actions_has_only_default_only_noaction() -> None:
    """`actions = {}` and no default: p4c adds `@defaultonly NoAction()` and makes it the
    (non-const) default, so the table lists NoAction alone, scoped DEFAULT_ONLY."""
    info = build_p4info(load_program(STF / "table_no_actions.p4"))
    assert sorted(t.preamble.name for t in info.tables) == ["MyIngress.empty", "MyIngress.lone", "MyIngress.sized"]
    for t in info.tables:
        assert [(r.id, r.scope, list(r.annotations)) for r in t.action_refs] == [
            (21257015, p4info_pb2.ActionRef.DEFAULT_ONLY, ["@defaultonly"])]
        assert t.initial_default_action.action_id == 21257015 and not t.const_default_action_id
    assert [a.preamble.name for a in info.actions] == ["NoAction"]
    sized = by_name(info.tables, "MyIngress.sized")
    assert sized.size == 16 and not sized.match_fields


def test_type_and_typedef_fields_in_p4info() -> None:
    """A `type` key or action parameter gets its type_name (p4c's getTypeName) with the underlying
    width, and the type a new_types entry; a typedef is its underlying type, with no name."""
    info = build_p4info(load_program(STF / "typedef_fields.p4"))
    by_p = by_name(info.tables, "MyIngress.by_p").match_fields[0]
    assert (by_p.name, by_p.bitwidth, by_p.type_name.name) == ("hdr.h.p", 16, "Port_t")
    by_b = by_name(info.tables, "MyIngress.by_b").match_fields[0]
    assert (by_b.name, by_b.bitwidth, by_b.HasField("type_name")) == ("hdr.h.b", 8, False)
    set_p = by_name(info.actions, "MyIngress.set_p").params[0]
    assert (set_p.bitwidth, set_p.type_name.name) == (16, "Port_t")
    assert not by_name(info.actions, "MyIngress.set_b").params[0].HasField("type_name")
    assert list(info.type_info.new_types) == ["Port_t"]
    assert info.type_info.new_types["Port_t"].original_type.bitstring.bit.bitwidth == 16


def test_type_in_digest_struct_and_controller_header(tmp_path: Path) -> None:
    """In a digested struct a `type` member is a new_type by name; packet metadata carry type_name."""
    top = """
type bit<16> Id_t;
struct dg_t { Id_t id; bit<8> f; }
@controller_header("packet_in") header pin_t { Id_t id; bit<8> pad; }
"""
    path = tmp_path / "prog.p4"
    path.write_text(SKELETON.replace("struct headers {{ h_t h;", "struct headers {{ pin_t pin; h_t h;")
                    .format(top="", ingress="", apply="digest<dg_t>(1, {(Id_t)hdr.h.g, hdr.h.f});")
                    .replace("header h_t {", top + "header h_t {", 1))
    info = build_p4info(load_program(path))
    members = info.type_info.structs["dg_t"].members
    assert [(m.name, m.type_spec.WhichOneof("type_spec")) for m in members] == [("id", "new_type"), ("f", "bitstring")]
    assert members[0].type_spec.new_type.name == "Id_t"
    md = info.controller_packet_metadata[0].metadata[0]
    assert (md.name, md.bitwidth, md.type_name.name) == ("id", 16, "Id_t")


def test_forms_p4info_names(tmp_path: Path) -> None:
    """Top-level externs keep their bare names; a directly invoked control is named by its type
    (p4c's @name("Sub") on the instance it makes); a nested slice key keeps its nesting."""
    top = """
counter(4, CounterType.packets) hits;
control Sub(inout headers hdr) {
    table t { key = { hdr.h.g[15:8][3:0]: exact; } actions = { NoAction; } }
    apply { t.apply(); }
}
"""
    info = p4info_of(tmp_path, "", "Sub.apply(hdr); hits.count(0);", top=top)
    assert [c.preamble.name for c in info.counters] == ["hits"]
    assert [t.preamble.name for t in info.tables] == ["Ing.Sub.t"]
    assert info.tables[0].match_fields[0].name == "hdr.h.g[15:8][3:0]"
    assert info.tables[0].match_fields[0].bitwidth == 4
