"""Switches built from caches are new switches: a simulated fabric starts hundreds of one program,
so the parsed program (DeviceConfigCache), its code generation and native image (Blueprint) and the
lowered C (native.lower) are kept, while every switch gets its own tables, registers, counters and
native state.

Checked here: the cached program is never changed by building switches from it; two switches of
one cached image share nothing that changes, in Python or in C, for v1model and TNA; the Nth
switch is built without generating code or the native image again, and runs as a new switch even
after others ran traffic; a cached lowering is the lowering itself, bound to the new switch's
objects; registers are adopted by the native path value for value.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import pickle
import struct
import types

import numpy as np
import pytest

from controller import programs
from p4target.executor import ir, native
from p4target.executor.codegen import CodeGen
from p4target.executor.native.engine import NativeCells
from p4target.executor.native.lower import Lowering, lower
from p4target.executor.tna_codegen import TnaCodeGen
from p4target.executor.tna_switch import blueprint_for, switch_for
from p4target.frontend import load_program
from p4target.frontend.types import BOOL, BitsT, HeaderT
from p4target.runtime.device_config import (
    DeviceConfigCache,
    DeviceConfigError,
    build_device_config,
    compile_device_config,
    load_device_config,
)

from . import ina_programs
from .test_native import configure, random_frames, state

V1MODEL = programs.V1MODEL
native_lower = importlib.import_module("p4target.executor.native.lower")  # the package exports the function


INA = {"v1model": ina_programs.V1MODEL, "tna": ina_programs.TNA}


@pytest.fixture(scope="module")
def blobs() -> dict[str, bytes]:
    return {arch: build_device_config(program.path, {"INA_VALUES": "64"}) for arch, program in INA.items()}


@pytest.fixture(scope="module")
def blob(blobs) -> bytes:
    return blobs["v1model"]


def namespace(switch) -> dict:
    """The namespace a switch's generated code runs in."""
    return switch._ingress.__globals__


def test_building_switches_never_changes_the_parsed_program(blob):
    """The cache shares one CheckedProgram between switches: every object reachable from it pickles
    to the same bytes before and after two switches are built from it."""
    prog, _ = load_device_config(blob)
    before = pickle.dumps(prog)
    from p4target.executor.tna_switch import switch_for

    switch_for(prog)
    switch_for(prog)
    assert pickle.dumps(prog) == before


@pytest.mark.parametrize("arch", INA)
def test_two_switches_of_one_cached_program_share_no_state(blobs, arch):
    """Parsed once; then a table entry, register cells, counters, multicast groups and the native
    packet counters written on one switch are not seen on the other."""
    program, cache = INA[arch], DeviceConfigCache()
    (a, info_a), (b, info_b) = cache(blobs[arch]), cache(blobs[arch])
    assert cache.parsed == 1
    assert a is not b and info_a is info_b  # read-only, shared
    assert a.native_status == b.native_status == "native"
    assert a.tables.keys() == b.tables.keys() and a.registers.keys() == b.registers.keys()
    for name in a.registers:
        assert not np.shares_memory(a.registers[name].cells.array, b.registers[name].cells.array), name
    register = next(n for n, r in a.registers.items() if not isinstance(r.elem, HeaderT))
    a.registers[register].cells[1] = 7
    assert a.registers[register].cells[1] == 7 and b.registers[register].cells[1] == 0
    counter = next(iter(a.counters))
    a.counters[counter].packets[0] = 5
    assert b.counters[counter].packets[0] == 0
    program.add_route(a, 0x0A000000, 8, 9, 0x020000000999, 0x02AA00000001)
    assert len(a.tables[program.routes].entries()) == 1 and b.tables[program.routes].entries() == []
    a.set_multicast_group(1, [(1, 0)])
    assert b.multicast_groups == {}
    a.process(1, b"\x00" * 64)  # the C's per-switch context counts it
    assert a.stats["received"] == 1 and b.stats["received"] == 0


SHARED = (type, str, int, bytes, struct.Struct)  # what no switch changes, in a generated namespace


@pytest.mark.parametrize("arch", INA)
def test_switches_of_one_blueprint_share_nothing_that_changes(blobs, arch):
    """Every object of one switch's namespace that can change is not the other's: the namespace,
    the generated functions (and the actions its tables and const entries run), tables, registers,
    counters, hooks and scratch lists; only helpers, struct formats and the native library are
    shared, and each switch has its own C context."""
    cache = DeviceConfigCache()
    a, b = cache(blobs[arch])[0], cache(blobs[arch])[0]
    ns_a, ns_b = namespace(a), namespace(b)
    assert ns_a is not ns_b and ns_a.keys() == ns_b.keys()
    for name in ns_a.keys() - {"__builtins__"}:
        mine, theirs = ns_a[name], ns_b[name]
        if isinstance(mine, types.FunctionType) and mine.__globals__ is not ns_a:
            assert theirs is mine, name  # a helper: pack_bits, csum16, ...
        elif isinstance(mine, types.FunctionType):
            assert theirs is not mine and theirs.__globals__ is ns_b and theirs.__code__ is mine.__code__, name
        elif not isinstance(mine, SHARED):
            assert theirs is not mine, name
    for sw, ns in ((a, ns_a), (b, ns_b)):
        objects = {id(v) for v in ns.values()}
        for kind in ("tables", "registers", "counters"):
            assert {id(o) for o in getattr(sw, kind).values()} <= objects, kind
        assert sw.hooks is ns["RT"]
        for table in sw.tables.values():
            specs = [*table.actions.values(), *(e.action for e in table.entries()), table.default_entry.action]
            assert all(spec.fn.__globals__ is ns for spec in specs), table.name
    assert a.native.ctx != b.native.ctx and a.native.lib is b.native.lib
    assert a.hooks is not b.hooks and a.hooks.rng is not b.hooks.rng


@pytest.mark.parametrize("arch", INA)
def test_the_nth_switch_is_built_without_generating_code_again(blobs, arch, monkeypatch):
    """Code generation and the native image run once per program, not once per switch."""
    calls: collections.Counter[str] = collections.Counter()

    def counting(what, fn):
        def counted(*args, **kwargs):
            calls[what] += 1
            return fn(*args, **kwargs)
        return counted

    for cls in (CodeGen, TnaCodeGen):
        monkeypatch.setattr(cls, "generate", counting("generate", cls.generate))
    monkeypatch.setattr(native, "image", counting("native image", native.image))
    cache = DeviceConfigCache()
    switches = [cache(blobs[arch])[0] for _ in range(4)]
    assert calls == {"generate": 1, "native image": 1}
    assert all(s.native_status == "native" for s in switches)


@pytest.mark.parametrize("arch", INA)
def test_a_switch_built_after_others_ran_traffic_runs_as_a_new_one(arch):
    """The blueprint is not changed by its switches: one built after another ran traffic starts
    empty, and gives the packets and state a switch of a blueprint of its own gives."""
    program = INA[arch]
    prog = load_program(program.path, {"INA_VALUES": "64"})
    blueprint = blueprint_for(prog)
    frames = list(random_frames(64, 400, seed=3))
    first = configure(program, blueprint.switch())
    sent = sum(len(first.process(port, frame)) for port, frame in frames)
    assert sent > 20
    nth, reference = configure(program, blueprint.switch()), configure(program, switch_for(prog, use_native=False))
    assert nth.native is not None
    for port, frame in frames:
        assert nth.process(port, frame) == reference.process(port, frame), frame.hex()
    assert state(nth) == state(reference) == state(first)


LOWERED = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<16>>(8) r;
    counter(4, CounterType.packets) n;
    action set(bit<9> port) { sm.egress_spec = port; r.write((bit<32>)hdr.h.a, hdr.h.c); n.count(0); }
    table t { key = { hdr.h.a: exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { t.apply(); }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_a_blob_that_does_not_compile_is_not_kept(tmp_path):
    """It fails again with the same error; a good blob then compiles as compile_device_config does."""
    path = tmp_path / "prog.p4"
    path.write_text(LOWERED.replace("t.apply();", "t.apply()"))
    broken = build_device_config(path)
    cache = DeviceConfigCache()
    errors = []
    for _ in range(2):
        with pytest.raises(DeviceConfigError, match="does not compile") as caught:
            cache(broken)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and cache.parsed == 0
    path.write_text(LOWERED)
    good = build_device_config(path)
    switch, info = cache(good)
    reference, reference_info = compile_device_config(good)
    assert cache.parsed == 1 and info == reference_info and switch.tables.keys() == reference.tables.keys()


def test_a_cached_lowering_is_the_lowering_bound_to_the_new_switch(tmp_path):
    """The second switch's lowering comes from the cache (the very C string), equals what lowering its
    own module gives, and names its own objects, in the same order; the same code naming other objects misses."""
    path = tmp_path / "prog.p4"
    path.write_text(LOWERED)
    prog = load_program(path)
    first, second = CodeGen(prog).generate(), CodeGen(prog).generate()
    native_lower._CACHE.clear()
    one = lower(first.module)
    two = lower(second.module)
    assert two.source is one.source  # a hit
    fresh = Lowering(second.module).lower()
    assert fresh.source == two.source
    assert (fresh.unset_slots, fresh.max_header_bytes) == (two.unset_slots, two.max_header_bytes)
    for kind in ("tables", "registers", "counters", "value_sets"):
        mine, theirs = getattr(two.objects, kind), getattr(fresh.objects, kind)
        assert [id(o) for o in mine] == [id(o) for o in theirs], kind
    assert two.objects.actions == fresh.objects.actions and two.objects.actions is not one.objects.actions
    assert {id(o) for o in two.objects.tables} == {id(t) for t in second.tables.values()}
    assert not {id(o) for o in two.objects.registers} & {id(r) for r in first.registers.values()}
    ns = second.namespace
    (reg_name,) = [n for n, o in ns.items() if o is next(iter(second.registers.values()))]
    (table_name,) = [n for n, o in ns.items() if o is next(iter(second.tables.values()))]
    swapped = _with_objects(second.module, {reg_name: ns[table_name], table_name: ns[reg_name]})
    assert native_lower._key(swapped) != native_lower._key(second.module)


def _with_objects(module: ir.Module, objects: dict) -> ir.Module:
    """``module`` with the objects of ``objects``' names replaced (the same code naming other objects)."""
    def rebuilt(node):
        if isinstance(node, ir.Obj) and node.name in objects:
            return ir.Obj(node.name, objects[node.name])
        if isinstance(node, (list, tuple)):
            return type(node)(rebuilt(x) for x in node)
        if isinstance(node, (ir.Expr, ir.Stmt, ir.Function)):
            fields = {f.name: rebuilt(getattr(node, f.name)) for f in dataclasses.fields(node)}
            return dataclasses.replace(node, **fields)
        return node
    return ir.Module([rebuilt(f) for f in module.functions], module.template)


def test_registers_are_adopted_value_for_value():
    """The vectorized slice write stores what the per-cell write stores: bit<64> values from 2**63 as
    negative int64, bools as 0/1, struct cells field by field; reads give the values back."""
    wide = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 12345678901234567890]
    flags = [True, False, True]
    struct = HeaderT("pair", "struct", {"a": BitsT(64, False), "b": BitsT(8, True)})
    pairs = [(1 << 63, -3), (5, 7)]
    for elem, values in ((BitsT(64, False), wide), (BOOL, flags), (BitsT(32, True), [-5, 5]), (struct, pairs)):
        width = len(struct.fields) if elem is struct else 1
        cells = NativeCells(np.zeros((len(values), width), dtype=np.int64), elem)
        one_by_one = NativeCells(np.zeros((len(values), width), dtype=np.int64), elem)
        cells[:] = values
        for i, v in enumerate(values):
            one_by_one[i] = v
        assert cells.array.tolist() == one_by_one.array.tolist(), elem
        assert list(cells) == values, elem
