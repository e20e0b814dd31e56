"""Which slots a block may write (native/lower.py slot_writes): the packet paths restore only these for each
further multicast replica (v1model.h) and reset only these for each TNA egress copy (tna.h), so a write the
analysis misses would leak one replica's or copy's slots into the next.  Whole programs with replicas and
egress copies are checked against the Python executor in test_native.py (multicast.stf, ina_tna.p4)."""

from __future__ import annotations

from p4target.executor import ir
from p4target.executor.native.lower import slot_writes


def slot(k: ir.Expr | int) -> ir.Slot:
    return ir.Slot(ir.Const(k) if isinstance(k, int) else k)


def fn(name: str, kind: ir.Kind, *body: ir.Stmt) -> ir.Function:
    return ir.Function(name, kind, list(body))


def test_a_block_writes_its_slots_and_those_of_the_applies_it_calls() -> None:
    functions = {f.name: f for f in (
        fn("egress", ir.Kind.CONTROL, ir.Assign(slot(3), ir.Const(1)), ir.Do(ir.Apply("apply_t")),
           ir.If(ir.Cmp("==", slot(4), ir.Const(0)), [ir.AugAssign(slot(9), "+", ir.Const(1))])),
        fn("apply_t", ir.Kind.APPLY, ir.Assign(ir.Slots(ir.Const(10), 3), ir.Tuple((slot(4), slot(5), slot(6)))),
           ir.Do(ir.Apply("apply_u"))),
        fn("apply_u", ir.Kind.APPLY, ir.Assign(ir.Var("_x"), slot(7)), ir.Do(ir.Apply("apply_t"))),
        fn("deparser", ir.Kind.DEPARSER, ir.Emit(ir.Const(0))),
    )}
    writes = slot_writes(functions)
    assert writes["egress"] == {3, 9, 10, 11, 12}, "reads (4..7) and locals are no writes; calls loop safely"
    assert writes["apply_u"] == {10, 11, 12}
    assert writes["deparser"] == frozenset()


def test_a_write_at_a_run_time_index_makes_the_write_set_unknown() -> None:
    functions = {f.name: f for f in (
        fn("ingress", ir.Kind.CONTROL, ir.Assign(slot(1), ir.Const(0)), ir.Do(ir.Apply("apply_push"))),
        fn("apply_push", ir.Kind.APPLY, ir.Assign(slot(ir.Bin("+", ir.Const(20), ir.Var("_i"))), ir.Const(1))),
        fn("egress", ir.Kind.CONTROL, ir.Assign(ir.Slots(ir.Var("_at"), 2), ir.Tuple((ir.Const(0), ir.Const(1))))),
        fn("verify", ir.Kind.CONTROL, ir.Assign(slot(2), ir.Const(0))),
    )}
    writes = slot_writes(functions)
    assert writes["ingress"] is None and writes["apply_push"] is None and writes["egress"] is None
    assert writes["verify"] == {2}
