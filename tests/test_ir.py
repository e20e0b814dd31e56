"""The executor's representation: the builder's block structure and the Python printer's meaning."""

from __future__ import annotations

import pytest

from p4target.executor import exceptions, ir, python
from p4target.executor.builder import Builder


def _run(fn: ir.Function, *args: object) -> object:
    ns: dict[str, object] = {}
    exec(python.function(fn), ns)  # noqa: S102 - the printer's output is what is under test
    return ns[fn.name](*args)


def test_else_and_elif_continue_the_chain_of_the_if_just_emitted():
    b = Builder()
    x = ir.Var("x")
    with b.define("classify", ir.Kind.CONTROL) as fn:
        b.emit(ir.Assign(x, ir.slot(0)))
        for k in (1, 2):
            with (b.if_ if k == 1 else b.elif_)(ir.cmp("==", x, k)):
                b.emit(ir.Assign(ir.slot(1), ir.Const(10 * k)))
        with b.else_():
            b.emit(ir.Assign(ir.slot(1), ir.Const(99)))
    assert [type(s).__name__ for s in fn.body] == ["Assign", "If"]  # one chain, not three ifs
    for value, expected in ((1, 10), (2, 20), (7, 99)):
        state = [value, 0]
        _run(fn, state)
        assert state == [value, expected]


def test_an_else_needs_an_if_without_one():
    b = Builder()
    with b.define("f", ir.Kind.CONTROL):
        with pytest.raises(AssertionError, match="else without an if"):
            b.else_()
        with b.if_(ir.Const(True)):
            pass
        with b.else_():
            b.emit(ir.Pass())
        with pytest.raises(AssertionError, match="already has an else"):
            b.else_()


def test_only_statements_are_emitted():
    b = Builder()
    with b.define("f", ir.Kind.CONTROL):
        with pytest.raises(TypeError, match="not a statement"):
            b.emit("S[0] = 1")  # type: ignore[arg-type]


def test_exit_runs_the_handler_and_leaves_the_rest():
    b = Builder()
    with b.define("ingress", ir.Kind.CONTROL) as fn:
        with b.try_exit():
            b.emit(ir.Assign(ir.slot(0), ir.Const(1)))
            with b.if_(ir.slot(1)):
                b.emit(ir.Raise(ir.Exc.EXIT))
            b.emit(ir.Assign(ir.slot(0), ir.Const(2)))
        with b.on_exit():
            b.emit(ir.AugAssign(ir.slot(2), "+", ir.Const(1)))
    ns: dict[str, object] = {"ExitBlock": exceptions.ExitBlock}
    exec(python.function(fn), ns)  # noqa: S102
    for flag, expected in ((0, [2, 0, 0]), (1, [1, 1, 1])):
        state = [0, flag, 0]
        ns["ingress"](state)
        assert state == expected


@pytest.mark.parametrize("kind", [k for k in ir.Exc if k is not ir.Exc.EXIT])
def test_a_drop_kind_raises_its_class_with_the_message(kind: ir.Exc):
    b = Builder()
    with b.define("ingress", ir.Kind.CONTROL) as fn:
        b.emit(ir.Raise(kind, "why"))
    cls = exceptions.CLASS[kind]
    ns: dict[str, object] = {cls.__name__: cls}
    exec(python.function(fn), ns)  # noqa: S102
    with pytest.raises(cls, match="why"):
        ns["ingress"]([])


def test_a_parser_reads_the_packet_and_returns_its_position_and_error():
    b = Builder()
    pos = ir.Var("pos")
    with b.define("parse", ir.Kind.PARSER) as fn:
        b.emit(ir.Assign(pos, ir.Const(0)))
        with b.if_(ir.cmp("<", ir.bin_("-", ir.PacketLength(), pos), 2)):
            b.emit(ir.Return(ir.Tuple((pos, ir.Const(7)))))
        b.emit(ir.Assign(ir.slot(0), ir.PacketInt(pos, ir.Const(2))))
        b.emit(ir.AugAssign(pos, "+", ir.Const(2)))
        b.emit(ir.Return(ir.Tuple((pos, ir.Const(0)))))
    assert fn.params == ("S", "data")
    state = [0]
    assert _run(fn, state, b"\x12\x34\x56") == (2, 0) and state == [0x1234]
    assert _run(fn, [0], b"\x12") == (0, 7)


def test_an_action_takes_its_data_after_the_state():
    b = Builder()
    data = (ir.Var("a0"), ir.Var("a1"))
    with b.define("_act1", ir.Kind.ACTION, data) as fn:
        b.emit(ir.Assign(ir.slots(0, 2), ir.Tuple(data)))
    assert fn.params == ("S", "a0", "a1")
    state = [0, 0, 5]
    _run(fn, state, 3, 4)
    assert state == [3, 4, 5]
    assert b.module.functions == [fn]


def test_the_printer_keeps_the_structure_parentheses_would_lose():
    # (a - b) - c and a - (b - c) differ; so do -(x) << 1 and -(x << 1)
    a, b_, c = ir.Const(10), ir.Const(4), ir.Const(3)
    assert eval(python.expr(ir.Bin("-", ir.Bin("-", a, b_), c))) == 3  # noqa: S307
    assert eval(python.expr(ir.Bin("-", a, ir.Bin("-", b_, c)))) == 9  # noqa: S307
    assert eval(python.expr(ir.Bin("<<", ir.Neg(ir.Const(2)), ir.Const(1)))) == -4  # noqa: S307
    assert eval(python.expr(ir.Select(ir.Const(0), ir.Const(1), ir.Bin("+", ir.Const(2), ir.Const(3))))) == 5  # noqa: S307
