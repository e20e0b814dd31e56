"""Whether a register and its RegisterActions fit one Tofino 1 stateful ALU.

A register's cell is one value of at most 32 bits or a pair of two equal halves (at most 64
bits).  A RegisterAction's body becomes one SALU instruction: at most 2 comparisons in all,
each ``±register ± PHV operand + constant`` (operands at most 32 bits) against a constant or
the other operand; per register field at most 2 update expressions, each one operation of at
most two operands among a register field, a PHV operand and a constant; and one output word,
a single source (0 in the other branches), or two computed in the high ALU pair of a one-value
register.  Sources: limits.py.  Refusals name the
RegisterAction (or register) where it is declared.
"""

from __future__ import annotations

from typing import Any

from ..frontend import ast
from ..frontend.types import BOOL, BitsT, EnumT, HeaderT, bit_width
from .limits import (
    CELL_BITS,
    CELL_FIELDS,
    CELL_HALF_BITS,
    SALU_CONDITIONS,
    SALU_OPERAND_BITS,
    SALU_OPERANDS,
    SALU_OUTPUTS,
    SALU_OUTPUTS_VIA_ALU_HI,
    SALU_UPDATE_OPS,
    SALU_UPDATES_PER_FIELD,
)
from .refusal import over, refuse

_COMPARE = frozenset({"==", "!=", "<", ">", "<=", ">="})


def check_cell(name: str, reg: ast.Instantiation) -> None:
    """A register's cell: one value <= 32 bits, or a pair of equal halves <= 32 bits each."""
    elem = reg.type.args[0]
    if not (isinstance(elem, HeaderT) and elem.kind == "struct"):
        bits = 1 if elem is BOOL else bit_width(elem)
        if bits > CELL_HALF_BITS:
            raise over(reg.loc, f"register {name} cell bits (one value)", bits, CELL_HALF_BITS)
        return
    widths = {f: bit_width(t) for f, t in elem.fields.items()}
    total = sum(widths.values())
    if total > CELL_BITS:
        raise over(reg.loc, f"register {name} cell bits", total, CELL_BITS)
    if len(widths) > CELL_FIELDS:
        raise over(reg.loc, f"register {name} cell fields", len(widths), CELL_FIELDS)
    for f, bits in widths.items():
        if bits > CELL_HALF_BITS:
            raise over(reg.loc, f"register {name} cell field {f} bits", bits, CELL_HALF_BITS)
    if len(set(widths.values())) > 1:
        raise refuse(reg.loc, f"register {name}: a pair's two fields must have the same width "
                     f"({', '.join(f'{f}: {b} bits' for f, b in widths.items())})")


class SaluShape:
    """One RegisterAction's body checked against one SALU instruction."""

    def __init__(self, ra: ast.Instantiation) -> None:
        self.ra = ra
        self.apply: ast.FunctionDecl = ra.initializer[0]
        params = self.apply.proto.params
        self.cell = params[0]
        self.rv = params[1] if len(params) > 1 else None
        self.conditions: dict[str, ast.Expr] = {}
        self.updates: dict[str, dict[str, ast.Expr]] = {}
        self.outputs: dict[str, str] = {}  # source -> as written
        self.locals: dict[int, ast.Expr] = {}

    def check(self) -> None:
        for node in _nodes(self.apply.body):
            if isinstance(node, ast.Cast) and isinstance(node.type, BitsT) and node.type.width > SALU_OPERAND_BITS:
                raise over(self.ra.loc, f"cast width in RegisterAction {self.ra.name}", node.type.width,
                           SALU_OPERAND_BITS, ast.text(node))
        self.block(self.apply.body.stmts, set())
        if len(self.conditions) > SALU_CONDITIONS:
            raise over(self.ra.loc, f"comparisons in RegisterAction {self.ra.name}", len(self.conditions),
                       SALU_CONDITIONS, "; ".join(self.conditions))
        for f, exprs in self.updates.items():
            if len(exprs) > SALU_UPDATES_PER_FIELD:
                raise over(self.ra.loc, f"update expressions of register field {f} in RegisterAction {self.ra.name}",
                           len(exprs), SALU_UPDATES_PER_FIELD, "; ".join(exprs))
        if len(self.outputs) > SALU_OUTPUTS and not self._outputs_via_alu_hi():
            raise over(self.ra.loc, f"output word sources of RegisterAction {self.ra.name}", len(self.outputs),
                       SALU_OUTPUTS, ", ".join(self.outputs.values()))

    # ------------------------------------------------------------ statements
    def block(self, stmts: list[ast.Stmt], updated: set[str]) -> set[str]:
        for s in stmts:
            if isinstance(s, ast.Block):
                updated = self.block(s.stmts, updated)
            elif isinstance(s, ast.VarDecl) and s.init is not None:
                self.locals[id(s)] = s.init
            elif isinstance(s, ast.Assign):
                updated = self.assign(s, updated)
            elif isinstance(s, ast.If):
                self.condition(s.cond)
                then = self.block([s.then], set(updated))
                other = self.block([s.other], set(updated)) if s.other is not None else updated
                updated = then | other
        return updated

    def assign(self, s: ast.Assign, updated: set[str]) -> set[str]:
        if isinstance(s.lhs, ast.PathExpr) and id(s.lhs.decl) in {id(d) for d in self._local_decls()}:
            self.locals[id(s.lhs.decl)] = s.rhs
            return updated
        field = self.cell_field(s.lhs)
        for alt in self.alternatives(s.rhs):
            if field is None and self._is_rv(s.lhs) and self._is_test(alt):
                # `rv = (a == b)`: bf-p4c makes it `if (a == b) rv = 1`
                self.condition(alt)
                self.outputs.setdefault("constant 1", ast.text(alt))
                continue
            if field is not None and self.cell_field(alt) == field:
                continue  # `value.f = value.f`: the field left as it is, no ALU
            self.operation(alt)
            if field is not None:
                self.updates.setdefault(field, {})[ast.text(alt)] = alt
            elif self._is_rv(s.lhs):
                source = self.source(alt, updated)
                if source is not None:
                    self.outputs.setdefault(source, ast.text(alt))
        return updated | ({field} if field is not None else set())

    def _is_rv(self, e: ast.Expr) -> bool:
        return self.rv is not None and isinstance(e, ast.PathExpr) and e.decl is self.rv

    def _is_test(self, e: ast.Expr) -> bool:
        """A comparison or a logical operation on them, not a value."""
        e = self.strip(e)
        return e.value is None and ((isinstance(e, ast.Binary) and e.op in (*_COMPARE, "&&", "||"))
                                    or (isinstance(e, ast.Unary) and e.op == "!"))

    def _local_decls(self) -> list[Any]:
        return [n for n in _nodes(self.apply.body) if isinstance(n, ast.VarDecl)]

    def alternatives(self, e: ast.Expr) -> list[ast.Expr]:
        """``c ? a : b`` is a condition and two values; anything else, one value."""
        if isinstance(e, ast.Cond):
            self.condition(e.cond)
            return [*self.alternatives(e.then), *self.alternatives(e.other)]
        return [e]

    def source(self, e: ast.Expr, updated: set[str]) -> str | None:
        """What the output word carries: None for 0 (the other branches' default)."""
        e = self.strip(e)
        if e.value is not None and self._plain_enum_output():
            return None  # bf-p4c encodes a plain enum's members in the predicate output (outputEnumAsPredicate)
        if e.value is not None:
            return None if e.value == 0 or e.value is False else f"constant {e.value}"
        field = self.cell_field(e)
        if field is not None:
            return f"{field} ({'new' if field in updated else 'old'})"
        if self.is_phv(e):
            return f"phv {ast.text(e)}"
        return f"alu {ast.text(e)}"

    def _outputs_via_alu_hi(self) -> bool:
        """Whether the high ALU pair can compute each output source under its own predicate: the
        cell one value, no locals, at most 2 sources, at most one of them a register field or PHV
        operand output directly, and not the register's new value (the low ALUs' result)."""
        if isinstance(self.cell.type, HeaderT) or self._local_decls() or len(self.outputs) > SALU_OUTPUTS_VIA_ALU_HI:
            return False
        direct = [s for s in self.outputs if not s.startswith(("constant ", "alu "))]
        return len(direct) <= 1 and not any(s.endswith("(new)") for s in direct)

    def _plain_enum_output(self) -> bool:
        return self.rv is not None and isinstance(self.rv.type, EnumT) and self.rv.type.underlying is None

    # ------------------------------------------------------------ operands
    def strip(self, e: ast.Expr) -> ast.Expr:
        """Without casts (at most 32 bits: checked) and with locals replaced by their values."""
        while True:
            if isinstance(e, ast.Cast):
                e = e.operand
            elif isinstance(e, ast.PathExpr) and id(e.decl) in self.locals:
                e = self.locals[id(e.decl)]
            else:
                return e

    def cell_field(self, e: ast.Expr) -> str | None:
        e = self.strip(e)
        if isinstance(e, ast.PathExpr) and e.decl is self.cell:
            return e.name
        base = self.strip(e.base) if isinstance(e, ast.Member) else None  # also through a local copy
        if isinstance(base, ast.PathExpr) and base.decl is self.cell:
            return f"{base.name}.{e.member}"
        return None

    def is_phv(self, e: ast.Expr) -> bool:
        return isinstance(e, (ast.PathExpr, ast.Member, ast.Index, ast.Slice)) and e.value is None and \
            self.cell_field(e) is None

    def atoms(self, e: ast.Expr) -> list[ast.Expr] | None:
        """The operands of one SALU operation, or None when ``e`` is not one."""
        e = self.strip(e)
        if e.value is not None or self.cell_field(e) is not None or self.is_phv(e):
            return [e]
        if isinstance(e, ast.Unary) and e.op in ("~", "-", "+"):
            return self.atoms(e.operand)
        if isinstance(e, ast.Binary) and e.op in SALU_UPDATE_OPS:
            left, right = self.atoms(e.left), self.atoms(e.right)
            return None if left is None or right is None else left + right
        return None

    def operation(self, e: ast.Expr) -> None:
        atoms = self.atoms(e)
        if atoms is None:
            raise refuse(self.ra.loc, f"RegisterAction {self.ra.name}: '{ast.text(e)}' is not one stateful ALU "
                         f"operation ({', '.join(sorted(SALU_UPDATE_OPS))}, ~ or a copy of a register field, "
                         "a PHV operand and a constant)")
        if len(atoms) > SALU_OPERANDS:
            raise over(self.ra.loc, f"operands of one operation in RegisterAction {self.ra.name}", len(atoms),
                       SALU_OPERANDS, ast.text(e))

    # ------------------------------------------------------------ conditions
    def condition(self, e: ast.Expr) -> None:
        e = self.strip(e)
        if e.value is not None:
            return
        if isinstance(e, ast.Binary) and e.op in ("&&", "||"):
            self.condition(e.left)
            self.condition(e.right)
        elif isinstance(e, ast.Unary) and e.op == "!":
            self.condition(e.operand)
        elif isinstance(e, ast.Binary) and e.op in _COMPARE:
            self.comparison(e, [e.left, e.right])
        else:
            self.comparison(e, [e])  # a bool operand: compared with 0

    def comparison(self, e: ast.Expr, sides: list[ast.Expr]) -> None:
        for side in sides:
            t = side.type
            if isinstance(t, BitsT) and t.width > SALU_OPERAND_BITS:
                raise over(self.ra.loc, f"comparison operand bits in RegisterAction {self.ra.name}", t.width,
                           SALU_OPERAND_BITS, ast.text(e))
        regs: set[str] = set()
        phvs: set[str] = set()
        for side in sides:
            if not self.linear(side, regs, phvs):
                raise refuse(self.ra.loc, f"RegisterAction {self.ra.name}: comparison '{ast.text(e)}' is not "
                             "(±register field ± PHV operand + constant) against a constant or the other operand")
        for what, found in (("register fields", regs), ("PHV operands", phvs)):
            if len(found) > 1:
                raise over(self.ra.loc, f"{what} in one comparison of RegisterAction {self.ra.name}", len(found), 1,
                           ast.text(e))
        self.conditions.setdefault(ast.text(e), e)

    def linear(self, e: ast.Expr, regs: set[str], phvs: set[str]) -> bool:
        e = self.strip(e)
        if e.value is not None:
            return True
        field = self.cell_field(e)
        if field is not None:
            regs.add(field)
            return True
        if self.is_phv(e):
            phvs.add(ast.text(e))
            return True
        if isinstance(e, ast.Unary) and e.op in ("-", "+"):
            return self.linear(e.operand, regs, phvs)
        if isinstance(e, ast.Binary) and e.op in ("+", "-"):
            return self.linear(e.left, regs, phvs) and self.linear(e.right, regs, phvs)
        return False


def check_register_action(ra: ast.Instantiation) -> None:
    if ra.initializer:
        SaluShape(ra).check()


def _nodes(node: Any):
    yield node
    for c in ast.children(node):
        yield from _nodes(c)
