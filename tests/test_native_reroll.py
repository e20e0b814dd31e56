"""Which unrolled statements native/reroll.py turns into one loop, on small trees: each group's own
temporaries and evenly stepping slots make a run; anything that differs otherwise (an action's
parameters, a slot the caller keeps fixed), a break, or too few groups does not.  The C of the loops
is checked against the Python executor in test_native.py (ina.p4's lanes at V = 64 and 256)."""

from __future__ import annotations

from collections import Counter

from p4target.executor import ir
from p4target.executor.native import reroll


def no_banks(_register: object) -> None:
    return None


def slot(k: int) -> ir.Slot:
    return ir.Slot(ir.Const(k))


def lanes(count: int, step: int = 2) -> list[ir.Stmt]:
    """count groups: ``_t<i> = S[5]; S[20 + step*i] = _t<i> + S[100]``."""
    out: list[ir.Stmt] = []
    for i in range(count):
        t = ir.Var(f"_t{i}")
        out += [ir.Assign(t, slot(5)), ir.Assign(slot(20 + step * i), ir.Bin("+", t, slot(100)))]
    return out


def uses(stmts: list[ir.Stmt]) -> Counter[str]:
    return reroll.var_uses(stmts, {f"_t{i}" for i in range(64)})


def test_groups_with_their_own_temporaries_and_stepping_slots_are_one_run() -> None:
    stmts = [ir.Assign(slot(1), ir.Const(0)), *lanes(8)]
    [run] = reroll.find_runs(stmts, no_banks, frozenset(), uses(stmts))
    assert (run.start, run.size, run.count) == (1, 2, 8)
    body = reroll.rolled(stmts, run, "_l", no_banks)
    assert body[0] == ir.Assign(ir.Var("_t0"), slot(5))  # the same slot in every group stays as it is
    assert body[1].target == reroll.LoopSlot(20, 2, "_l")
    assert reroll.fixed_slots(body, run.count) == ([5, 100], set())


def test_what_differs_otherwise_is_no_run() -> None:
    params = [ir.Assign(slot(10 + i), ir.Var(f"a{i}")) for i in range(8)]  # an action's data, a0 .. a7
    assert reroll.find_runs(params, no_banks, frozenset(), Counter()) == []
    stmts = lanes(8)
    assert reroll.find_runs(stmts, no_banks, frozenset(range(20, 40)), uses(stmts)) == []  # fixed slots that step
    assert reroll.find_runs(lanes(3), no_banks, frozenset(), uses(lanes(3))) == []  # too few groups
    uneven = lanes(8)
    uneven[-1] = ir.Assign(slot(99), ir.Bin("+", ir.Var("_t7"), slot(100)))
    [run] = reroll.find_runs(uneven, no_banks, frozenset(), uses(uneven))
    assert run.count == 7, "the run stops where the progression does"


def test_a_group_that_breaks_or_shares_a_temporary_is_no_run() -> None:
    breaking = [s for i in range(8) for s in (ir.Assign(slot(20 + i), ir.Const(0)),
                                              ir.If(ir.Cmp("==", slot(3), ir.Const(i)), [ir.Break()]))]
    assert reroll.find_runs(breaking, no_banks, frozenset(), Counter()) == []
    stmts = lanes(8)
    shared = uses(stmts) + Counter({"_t0": 1})  # _t0 also named after the run: its last value matters
    assert all(r.start > 0 for r in reroll.find_runs(stmts, no_banks, frozenset(), shared))


def test_a_slot_the_loop_also_reaches_by_its_counter_stays_in_s() -> None:
    stmts = [ir.Assign(slot(40 + i), ir.Bin("+", slot(20 + i), slot(23))) for i in range(8)]
    [run] = reroll.find_runs(stmts, no_banks, frozenset(), Counter())
    body = reroll.rolled(stmts, run, "_l", no_banks)
    assert reroll.fixed_slots(body, run.count) == ([], set()), "S[23] is also S[20 + _l] at _l = 3"
