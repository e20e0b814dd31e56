"""Expressions (a pass of the checker, env.py): each expression class has a rule ``_e_<Class>``
that types it and folds its constant value; a call's rule picks the kind of callee.
"""

from __future__ import annotations

from . import ast, initializers, limits, newtypes, stages
from .ast import text
from .divisions import ARITH_OPS
from .env import Pass
from .errors import P4Error
from .scope import CallTarget, Scope
from .types import (
    BOOL,
    DONTCARE,
    ERROR,
    INFINT,
    STRING,
    VOID,
    ActionRunT,
    ApplyResultT,
    BitsT,
    BlockT,
    EnumT,
    ExternT,
    HeaderT,
    ListT,
    StackT,
    TableT,
    TupleT,
    Type,
    TypeVar,
    fold_arith,
    is_header_stack,
    is_numeric,
    wrap,
)

# Methods of a header instance (P4-16 v1.2.5 section 8.17); the size methods are constants.
HEADER_METHODS = ("isValid", "setValid", "setInvalid", "minSizeInBits", "minSizeInBytes", "maxSizeInBits",
                  "maxSizeInBytes")


def _flatten_slice(e: ast.Slice, hi: int, lo: int) -> None:
    """``x[7:4][3:0][1:0]`` selects ``x[5:4]``: rewrite a checked slice of a slice as one slice
    of the innermost value, so the executor reads and writes it (also as an ``out``
    argument) like any slice.  ``written`` keeps the nesting for P4Runtime key names."""
    inner = e.base
    assert isinstance(inner, ast.Slice)
    offset = inner.lo.value
    e.written = ast.Slice(e.loc, inner, e.hi, e.lo)
    e.written.type = BitsT(hi - lo + 1)
    bounds = []
    for at, bit in ((e.hi.loc, hi + offset), (e.lo.loc, lo + offset)):
        lit = ast.IntLit(at, bit, None, False)
        lit.value, lit.type = bit, INFINT
        bounds.append(lit)
    e.base, (e.hi, e.lo) = inner.base, bounds


def _contextual(e: ast.Expr) -> bool:
    """An initializer whose type its context gives (initializers.py)."""
    return isinstance(e, (ast.StructExpr, ast.Dots, ast.InvalidHeader)) or _ends_in_dots(e)


def _ends_in_dots(e: ast.Expr) -> bool:
    """``{a, ...}`` as written (a default value put in its place is typed already)."""
    return isinstance(e, ast.ListExpr) and bool(e.items) and isinstance(e.items[-1], ast.Dots) \
        and e.items[-1].type in (None, DONTCARE)


def _with_dontcare(have: Type, want: Type) -> bool:
    """An extern value of ``E<bit<8>>`` where ``E<_>`` is expected: '_' takes any type (p4c)."""
    return isinstance(have, ExternT) and isinstance(want, ExternT) and have.decl is want.decl \
        and len(have.args) == len(want.args) \
        and all(w is DONTCARE or h == w or _with_dontcare(h, w) for h, w in zip(have.args, want.args))


class Exprs(Pass):
    """Expressions: types, constant values, the callee of a call."""

    switch_subject: ast.Expr | None = None  # the subject of the switch being checked (stmts.py sets it)

    def const_int(self, e: ast.Expr) -> int:
        if not isinstance(e.value, int) or isinstance(e.value, bool):
            raise P4Error(e.loc, "expected a compile-time integer constant")
        return e.value

    def coerce(self, e: ast.Expr, t: Type, what: str) -> None:
        """Check that ``e`` may be used where ``t`` is expected; unsized ints take ``t``."""
        if e.type == t or t is DONTCARE or _with_dontcare(e.type, t):
            newtypes.implicit(e, t, what)  # p4c: a `type` is not its underlying type
            return
        if _contextual(e):
            self._contextual(e, t, what)
            return
        if e.type is INFINT and isinstance(t, BitsT):
            e.type = t
            if e.value is not None:
                e.value = wrap(e.value, t)
            return
        if isinstance(t, TypeVar):  # a generic body's type variable: only its own values (p4c's unification)
            if e.type is INFINT:
                raise P4Error(e.loc, f"'int' type can only be unified with 'int', 'bit<>', or 'signed<>' types, "
                                     f"not with '{t}'")
            raise P4Error(e.loc, f"{what}: expected {t}, got {e.type}")
        if isinstance(e, ast.ListExpr) and isinstance(t, ListT):  # each item an element (p4c's unification)
            for item in e.items:
                self.coerce(item, t.elem, what)
            e.type = t
            return
        if self.env.frontend and isinstance(e.type, EnumT) and e.type.underlying == t and isinstance(t, BitsT):
            return  # p4c: a serializable enum casts implicitly to its underlying type (the target: see casts)
        if isinstance(e, ast.ListExpr) and isinstance(t, HeaderT):
            # A struct/header initialiser `{a, b}`: one item per field, in order.
            if len(e.items) != len(t.fields):
                raise P4Error(e.loc, f"{what}: {t} has {len(t.fields)} fields, the list has {len(e.items)}")
            for item, field_type in zip(e.items, t.fields.values()):
                self.coerce(item, field_type, what)
            e.type = t
            return
        raise P4Error(e.loc, f"{what}: expected {t}, got {e.type}")

    def _contextual(self, e: ast.Expr, t: Type, what: str) -> None:
        """An initializer typed by where it is used (initializers.py)."""
        if isinstance(e, ast.StructExpr):
            initializers.struct_fields(self.env, e, t, what)
        elif isinstance(e, ast.ListExpr):  # {a, ...}
            if not isinstance(t, HeaderT):
                raise P4Error(e.loc, f"{what}: expected {t}, got {e.type}")
            initializers.list_with_dots(self.env, e, t, what)
            self.coerce(e, t, what)
        elif isinstance(e, ast.Dots):
            e.type, e.value = t, initializers.default_value(self.env, e.loc, t).value
        else:  # {#}
            if not (isinstance(t, HeaderT) and (t.is_header or t.is_union)):
                raise P4Error(e.loc, f"{what}: expected {t}, got the invalid header {{#}}")
            e.type = t
            initializers.target_refuses(self.env, e, "the invalid header expression {#}")

    def _e_StructExpr(self, e: ast.StructExpr, scope: Scope) -> Type:
        initializers.check_names(e)
        return initializers.unknown_struct(e.names, [self.expr(i, scope) for i in e.items])

    def _e_Dots(self, e: ast.Dots, scope: Scope) -> Type:
        return DONTCARE  # its context gives the type (coerce)

    def _e_InvalidHeader(self, e: ast.InvalidHeader, scope: Scope) -> Type:
        return DONTCARE

    def expr(self, e: ast.Expr, scope: Scope) -> Type:
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            raise P4Error(e.loc, f"{type(e).__name__} expressions are not supported here")
        e.type = method(e, scope)
        return e.type

    def _e_IntLit(self, e: ast.IntLit, scope: Scope) -> Type:
        if e.width is None:
            e.value = e.number
            return INFINT
        limits.literal_width(e)
        t = BitsT(e.width, e.signed)
        e.value = wrap(e.number, t)
        return t

    def _e_BoolLit(self, e: ast.BoolLit, scope: Scope) -> Type:
        e.value = e.truth
        return BOOL

    def _e_StringLit(self, e: ast.StringLit, scope: Scope) -> Type:
        e.value = e.text
        return STRING

    def _e_Default(self, e: ast.Default, scope: Scope) -> Type:
        return DONTCARE

    def _e_PathExpr(self, e: ast.PathExpr, scope: Scope) -> Type:
        d = (scope.root() if e.top_level else scope).lookup(e.name)
        if d is None:
            if e.name in self.env.types:
                raise P4Error(e.loc, f"{e.name}: Type cannot be used here, expecting an expression.")
            raise P4Error(e.loc, f"'{e.name}' is not declared")
        e.decl = d
        if isinstance(d, ast.ConstDecl):
            e.value = d.init.value
            return d.type
        if isinstance(d, (ast.Param, ast.VarDecl, ast.Instantiation)):
            return d.type
        if isinstance(d, ast.TableDecl):
            if d is self.env.key_table or d is self.env.owner:  # p4c's TypeInference on a PathExpression
                raise P4Error(e.loc, f"{e.name}: Cannot refer to the containing table {d.name}")
            return TableT(d)
        if isinstance(d, (ast.ActionDecl, ast.ExternFunction, ast.FunctionDecl)):
            return VOID  # only meaningful as a call target; _e_Call checks
        raise P4Error(e.loc, f"'{e.name}' cannot be used as a value")

    def _e_TypeMember(self, e: ast.TypeMember, scope: Scope) -> Type:
        if e.type_name == "error":
            if e.member not in self.env.errors:
                raise P4Error(e.loc, f"error.{e.member} is not declared")
            e.value = self.env.errors.index(e.member)
            return ERROR
        t = self.env.types.get(e.type_name)
        if isinstance(t, EnumT):
            if e.member not in t.members:
                raise P4Error(e.loc, f"enum {t.name} has no member '{e.member}'")
            e.value = t.code(e.member)
            return t
        raise P4Error(e.loc, f"'{e.type_name}.{e.member}': {e.type_name} is not an enum")

    def _e_Member(self, e: ast.Member, scope: Scope) -> Type:
        bt = self.expr(e.base, scope)
        if isinstance(bt, TupleT):
            raise P4Error(e.loc, f"a tuple has no field '{e.member}': use a constant index, t[0]")
        if isinstance(bt, HeaderT):
            if e.member in bt.fields:
                if isinstance(e.base.value, tuple):  # a field of a constant struct (frontend mode)
                    e.value = e.base.value[list(bt.fields).index(e.member)]
                return bt.fields[e.member]
            if bt.is_header and e.member in HEADER_METHODS:
                return VOID
            if bt.is_union and e.member == "isValid":
                return VOID
            raise P4Error(e.loc, f"{bt.kind} {bt.name} has no field '{e.member}'")
        if isinstance(bt, StackT):
            if e.member != "size" and not is_header_stack(bt.elem):
                raise P4Error(e.loc, f"{text(e)}: '{e.member}' can only be used on header stacks")
            if e.member in ("push_front", "pop_front"):
                return VOID  # a method; _e_Call resolves it
            if e.member in ("next", "last", "lastIndex"):
                if not isinstance(scope.owner, ast.ParserDecl):
                    raise P4Error(e.loc, f"header stack '.{e.member}' can only be used in a parser")
                return BitsT(32) if e.member == "lastIndex" else bt.elem
            if e.member == "size":
                e.value = bt.size
                return BitsT(32)
            raise P4Error(e.loc, f"header stack has no member '{e.member}'")
        if isinstance(bt, ApplyResultT):
            if e.member in ("hit", "miss"):
                return BOOL
            if e.member == "action_run":
                if e is not self.switch_subject:  # p4c's TypeInference
                    raise P4Error(e.loc, f"{text(e)}: only allowed in switch statements")
                return ActionRunT(bt.table)
            raise P4Error(e.loc, f"table apply result has no member '{e.member}'")
        if isinstance(bt, (TableT, BlockT, ExternT)):
            return VOID  # a method; _e_Call resolves it
        raise P4Error(e.loc, f"a value of type {bt} has no member '{e.member}'")

    def _e_Index(self, e: ast.Index, scope: Scope) -> Type:
        bt = self.expr(e.base, scope)
        if isinstance(bt, TupleT):  # p4c: "Tuple index ... must be constant", "larger than tuple size"
            self.expr(e.index, scope)
            if e.index.value is None:
                raise P4Error(e.index.loc, f"Tuple index {text(e.index)} must be constant")
            i = self.const_int(e.index)
            if not 0 <= i < len(bt.elems):
                raise P4Error(e.index.loc, f"Tuple index {i} larger than tuple size {len(bt.elems)}")
            if isinstance(e.base.value, tuple):  # an element of a constant tuple (frontend mode)
                e.value = e.base.value[i]
            return bt.elems[i]
        if not isinstance(bt, StackT):
            raise P4Error(e.loc, f"Indexing {text(e)} applied to non-array and non-tuple type {bt}")
        it = self.expr(e.index, scope)
        if e.index.value is None:
            if not isinstance(it, BitsT):  # int<W> too: a negative index is out of range
                raise P4Error(e.index.loc, f"a header stack index must be bit<W> or int<W>, not {it}")
            if self.env.frontend and isinstance(scope.owner, ast.ParserDecl) and getattr(bt.elem, "is_union", False) \
                    and stages.blocks_kept(self.env):
                stages.defer(self.env, stages.FLATTEN_HEADER_UNION, P4Error(  # p4test's midend, in parsers
                    e.index.loc, "Target expects constant array indices for accessing header union stack elements, "
                    f"{text(e.index)} is not a constant"))
            return bt.elem  # a run-time index: the executor checks its bounds
        i = limits.c_int(e.index, self.const_int(e.index))
        if not 0 <= i < bt.size:
            raise P4Error(e.index.loc, f"index {i} is out of bounds for {bt}")
        return bt.elem

    def _e_Slice(self, e: ast.Slice, scope: Scope) -> Type:
        if e.width is not None:
            return self._plus_slice(e, scope)
        bt = self.expr(e.base, scope)
        self.expr(e.hi, scope)
        self.expr(e.lo, scope)
        hi, lo = limits.c_int(e.hi, self.const_int(e.hi)), limits.c_int(e.lo, self.const_int(e.lo))
        if not isinstance(bt, BitsT):
            raise P4Error(e.loc, f"cannot slice a value of type {bt}")
        if not (0 <= lo <= hi < bt.width):
            raise P4Error(e.loc, f"slice [{hi}:{lo}] is out of range for {bt}")
        return self._bits_of(e, hi, lo)

    def _bits_of(self, e: ast.Slice, hi: int, lo: int) -> Type:
        """A checked slice ``[hi:lo]`` of a bit<> value: its constant value, a nested slice flattened."""
        if e.base.value is not None:
            limits.folded_width(e, hi)
            e.value = (e.base.value >> lo) & ((1 << (hi - lo + 1)) - 1)
        elif isinstance(e.base, ast.Slice):
            _flatten_slice(e, hi, lo)
        return BitsT(hi - lo + 1)

    def _plus_slice(self, e: ast.Slice, scope: Scope) -> Type:
        """``base[lo +: w]`` with p4c's rules (TypeInference's PlusSlice): a bit<> base, a constant
        width, a constant ``lo`` within the base; ``lo`` may be a run-time value, which the target
        does not run (refused after the check)."""
        bt, what = self.expr(e.base, scope), text(e)
        self.expr(e.lo, scope)
        self.expr(e.width, scope)
        if not isinstance(bt, BitsT):
            raise P4Error(e.loc, f"{what}: bit extraction only defined for bit<> types")
        lo = e.lo.value
        if isinstance(lo, int) and lo >= bt.width:
            raise P4Error(e.lo.loc, f"Bit index {lo} greater than width {bt.width}")
        if isinstance(lo, int) and lo < 0:
            raise P4Error(e.loc, f"{what}: negative bit index {lo}")
        if not isinstance(e.width.value, int) or isinstance(e.width.value, bool):
            raise P4Error(e.width.loc, f"{text(e.width)}: slice bit index values must be constants")
        w = e.width.value
        if w < 0:
            raise P4Error(e.loc, f"{what}: negative width {w}")
        e.hi = ast.IntLit(e.width.loc, lo + w - 1, None, False) if isinstance(lo, int) else e.width
        if isinstance(lo, int):
            e.hi.value, e.hi.type = lo + w - 1, INFINT
        if not isinstance(lo, int) or w == 0 or lo + w > bt.width:
            if not self.env.frontend:
                stages.defer(self.env, stages.TARGET, P4Error(
                    e.loc, f"{what}: this indexed slice is not supported by the built-in target"))
            return BitsT(w) if w > 0 else bt
        # now a slice [hi:lo] too, which the executor runs (``width`` keeps it as written)
        return self._bits_of(e, lo + w - 1, lo)

    def _e_ListExpr(self, e: ast.ListExpr, scope: Scope) -> Type:
        """A list expression is a tuple of its items' types until ``coerce`` gives it the struct,
        header or tuple type it initialises."""
        return TupleT.of([self.expr(i, scope) for i in e.items])

    def _e_Cast(self, e: ast.Cast, scope: Scope) -> Type:
        t = self.env.decls.resolve_type(e.type_ref)
        src = self.expr(e.operand, scope)
        if isinstance(t, ListT) and isinstance(e.operand, ast.ListExpr):
            self.coerce(e.operand, t, f"({t})")
            return t
        if not (isinstance(t, (BitsT, HeaderT, ListT)) or t in (BOOL, INFINT)
                or isinstance(t, EnumT) and t.underlying is not None):
            raise P4Error(e.type_ref.loc, f"{t}: cast not supported")  # p4c's TypeInference (Cast)
        if _contextual(e.operand) or isinstance(t, HeaderT) and isinstance(e.operand, ast.ListExpr):
            written = text(e)
            self.coerce(e.operand, t, f"({t})")
            initializers.target_refuses(self.env, e, f"the cast {written}")
            return t
        if isinstance(src, TypeVar):  # a generic body checked with its type variables (calls.generic_body)
            raise P4Error(e.loc, f"Cannot cast from '{src}' to '{t}'")
        ok = (
            src == t
            or (src is INFINT and (isinstance(t, BitsT) or t is BOOL))
            or (isinstance(src, BitsT) and isinstance(t, BitsT))
            or (src is BOOL and t == BitsT(1))
            or (src == BitsT(1) and t is BOOL)
            or (isinstance(t, EnumT) and t.underlying is not None and (src == t.underlying or src is INFINT))
            or (isinstance(src, EnumT) and src.underlying is not None and isinstance(t, BitsT))
        )
        if isinstance(src, BitsT) and isinstance(t, BitsT) and src.signed != t.signed and src.width != t.width:
            ok = False  # p4c: change width and signedness in two casts
        if newtypes.castable(src, t, self.env.decls.resolve_type) is False:
            raise P4Error(e.loc, f"'{ast.text(e)}': Cannot cast from '{newtypes.type_name(src)}' to "
                          f"'{newtypes.type_name(t)}'")
        if not ok:
            raise P4Error(e.loc, f"cannot cast {src} to {t}")
        v = e.operand.value
        if v is not None:
            if t is BOOL:
                if src is INFINT and v not in (0, 1):  # p4c's ConstantFolding
                    raise P4Error(e.loc, f"(bool){v}: Only 0 and 1 can be cast to booleans")
                e.value = bool(v)
            elif isinstance(t, (BitsT, EnumT)):
                target = t if isinstance(t, BitsT) else t.underlying
                e.value = wrap(int(v), target)
        return t

    def _e_Unary(self, e: ast.Unary, scope: Scope) -> Type:
        t = self.expr(e.operand, scope)
        v = e.operand.value
        if e.op == "!":
            self.coerce(e.operand, BOOL, "operand of '!'")
            e.value = None if v is None else not v
            return BOOL
        if not is_numeric(t):
            raise P4Error(e.loc, f"operator '{e.op}' needs an integer, got {t}")
        if e.op == "~" and t is INFINT:
            raise P4Error(e.loc, "'~' needs a fixed-width operand")
        if v is not None:
            e.value = wrap({"~": lambda x: ~x, "-": lambda x: -x, "+": lambda x: x}[e.op](v), t)
        return t

    def _e_Cond(self, e: ast.Cond, scope: Scope) -> Type:
        self.expr(e.cond, scope)
        self.coerce(e.cond, BOOL, "condition")
        a, b = self.expr(e.then, scope), self.expr(e.other, scope)
        if a is INFINT and b is not INFINT:
            self.coerce(e.then, b, "'?:' branch")
        elif b is INFINT and a is not INFINT:
            self.coerce(e.other, a, "'?:' branch")
        elif a != b:
            raise P4Error(e.loc, f"'?:' branches have different types {a} and {b}")
        if a is INFINT and b is INFINT and e.cond.value is None:
            raise P4Error(e.loc, "'?:' with unsized integer branches needs a constant condition")
        if e.cond.value is not None:
            e.value = e.then.value if e.cond.value else e.other.value
        return e.then.type

    def _shift(self, e: ast.Binary, lt: Type, rt: Type) -> Type:
        op, lv, rv = e.op, e.left.value, e.right.value
        if not is_numeric(lt) or not is_numeric(rt):
            raise P4Error(e.loc, f"'{op}' needs integer operands, got {lt} and {rt}")
        if isinstance(rt, BitsT) and rt.newtype is not None:  # p4c's TypeInference: a `type` is not bit<S>
            raise P4Error(e.right.loc, f"{ast.text(e.right)}: The right operand of shift must be either an "
                          "expression of type bit<S> or a compile-time known value that is a non-negative "
                          f"integer, but is {rt.newtype.name}")
        if isinstance(rt, BitsT) and rt.signed:
            raise P4Error(e.right.loc, "a shift amount must be unsigned")
        if rv is not None and rv < 0:
            raise P4Error(e.right.loc, "a shift amount must not be negative")
        if lt is INFINT and rv is None:
            raise P4Error(e.loc, "shifting an unsized integer needs a constant shift amount")
        if lv is not None and rv is not None:
            e.value = limits.fold_shift(e, lv, rv, lt)
        return lt

    def _e_Binary(self, e: ast.Binary, scope: Scope) -> Type:
        op = e.op
        lt, rt = self.expr(e.left, scope), self.expr(e.right, scope)
        _apply_results_compared(e, lt, rt)
        initializers.operands(e)
        lv, rv = e.left.value, e.right.value
        if op in ("&&", "||"):
            self.coerce(e.left, BOOL, f"operand of '{op}'")
            self.coerce(e.right, BOOL, f"operand of '{op}'")
            if lv is not None and rv is not None:
                e.value = (lv and rv) if op == "&&" else (lv or rv)
            return BOOL
        if op in ("<<", ">>"):
            return self._shift(e, lt, rt)
        if op == "++":
            if not (isinstance(lt, BitsT) and isinstance(rt, BitsT)):
                raise P4Error(e.loc, f"'++' needs bit<W>/int<W> operands, got {lt} and {rt}")
            t = BitsT(lt.width + rt.width, lt.signed)
            limits.concat_width(e, t.width, lv is not None and rv is not None)
            if lv is not None and rv is not None:
                e.value = wrap(((lv & lt.mask) << rt.width) | (rv & rt.mask), t)
            return t
        # p4c's first ConstantFolding and its unsBinaryArith judge / and % before binaryArith
        folded = op in ("/", "%") and self.env.divisions.division_before_types(e)
        if op in ARITH_OPS:
            self.env.divisions.ser_enum_operands(e)  # p4c's binaryArith: a serializable enum is its underlying type
            lt, rt = e.left.type, e.right.type
        newtypes.arith_operands(e)
        # both operands of one type
        t = self._unify(e, lt, rt)
        lv, rv = e.left.value, e.right.value  # an unsized operand now holds its wrapped value
        if op in ("==", "!="):
            if isinstance(lt, TypeVar) or isinstance(rt, TypeVar):  # p4c's TypeInference::compare
                raise P4Error(e.loc, f"{text(e.left)} and {text(e.right)}: values of a type variable cannot be "
                              "compared")
            if isinstance(t, (ExternT, BlockT, TableT)) or t in (VOID, STRING):
                raise P4Error(e.loc, f"cannot compare values of type {t}")
            if isinstance(t, TupleT):  # p4c compares tuples (list expressions); the target does not
                initializers.target_refuses(self.env, e, f"the comparison {text(e)}")
            if lv is not None and rv is not None:
                e.value = (lv == rv) if op == "==" else (lv != rv)
            return BOOL
        if not is_numeric(t):
            raise P4Error(e.loc, f"operator '{op}' needs integers, got {t}")
        if op in ("<", ">", "<=", ">="):
            if lv is not None and rv is not None:
                e.value = {"<": lv < rv, ">": lv > rv, "<=": lv <= rv, ">=": lv >= rv}[op]
            return BOOL
        if op in ("|+|", "|-|") and t is INFINT:
            raise P4Error(e.loc, f"'{op}' needs fixed-width operands")
        if op in ("/", "%") and not folded and self.env.divisions.division(e, t, lv, rv):
            return t
        if lv is not None and rv is not None:
            limits.fold_product(e, lv, rv)
            e.value = fold_arith(op, lv, rv, t)
        return t

    def _unify(self, e: ast.Binary, lt: Type, rt: Type) -> Type:
        if lt == rt:
            return lt
        if lt is INFINT and isinstance(rt, BitsT):
            self.coerce(e.left, rt, f"operand of '{e.op}'")
            return rt
        if rt is INFINT and isinstance(lt, BitsT):
            self.coerce(e.right, lt, f"operand of '{e.op}'")
            return lt
        for typed, other in ((e.left, e.right), (e.right, e.left)):  # `h == {#}`, `s == { f = 1 }`, `s == {1, 2}`
            if (_contextual(other) or isinstance(other, ast.ListExpr) and isinstance(typed.type, HeaderT)) \
                    and not _contextual(typed) and not isinstance(typed, ast.ListExpr):
                self.coerce(other, typed.type, f"operand of '{e.op}'")
                initializers.target_refuses(self.env, e, f"the comparison {text(e)}")
                return typed.type
        raise P4Error(e.loc, f"operator '{e.op}' cannot combine {lt} and {rt}")

    def _e_CtorCall(self, e: ast.CtorCall, scope: Scope) -> Type:
        raise P4Error(e.loc, "constructor calls are only allowed in instantiations")

    def _e_NamedArg(self, e: ast.NamedArg, scope: Scope) -> Type:
        return self.expr(e.arg, scope)  # put in parameter order by _check_args

    def _e_Mask(self, e: ast.Mask, scope: Scope) -> Type:
        raise P4Error(e.loc, "'&&&' is only allowed in keysets")

    def _e_Range(self, e: ast.Range, scope: Scope) -> Type:
        raise P4Error(e.loc, "'..' is only allowed in keysets")

    # ---------------------------------------------------------------- calls
    def _e_Call(self, e: ast.Call, scope: Scope) -> Type:
        f = e.func
        for a in e.args:
            if not isinstance(a, ast.Default):
                self.expr(a, scope)
        explicit = [self.env.decls.resolve_type(t) for t in e.type_args]
        self.env.pending_type_args, self.env.call_loc = explicit or None, e.loc
        try:
            t = self._e_call_target(e, f, scope)
        finally:
            pending, self.env.pending_type_args = self.env.pending_type_args, None
        if pending:
            raise P4Error(e.loc, "explicit type arguments are not supported for this call by the built-in target")
        self.env.divisions.forget_after_call(e)
        return t

    def _control_apply(self, e: ast.Call, f: ast.Member, bt: BlockT, scope: Scope) -> Type:
        """``instance.apply(...)`` of a control instance."""
        if not isinstance(f.base, ast.PathExpr) or not isinstance(f.base.decl, ast.Instantiation):
            raise P4Error(e.loc, "apply a control through its instance")
        self.env.calls.apply_args(e.loc, f.base.decl, bt.decl, e.args)
        if isinstance(scope.owner, ast.ActionDecl):  # p4c's TypeInference, once the arguments fit
            raise P4Error(e.loc, f"{text(e)}: apply cannot be called from actions")
        e.target = CallTarget("block_apply", "apply", f.base.decl)
        return VOID

    def _e_call_target(self, e: ast.Call, f: ast.Expr, scope: Scope) -> Type:
        if isinstance(f, ast.TypeMember) and isinstance(scope.lookup(f.type_name), _VALUE_DECLS):
            # `p.extract(...)` with a parameter p named as a type (the lexer took it for the type)
            f = e.func = ast.Member(f.loc, ast.PathExpr(f.loc, f.type_name), f.member)
        if isinstance(f, ast.PathExpr):
            self.expr(f, scope)
            d = f.decl
            if isinstance(d, ast.ActionDecl):
                return self.env.calls.call_action(e, d, scope)
            if isinstance(d, ast.ExternFunction):
                return self.env.externs.call_function(e, d)
            if isinstance(d, ast.FunctionDecl):
                return self.env.calls.call_user_function(e, d, scope)
            raise P4Error(f.loc, f"'{f.name}' is not callable")
        if isinstance(f, ast.Member):
            bt = self.expr(f.base, scope)
            m = f.member
            if isinstance(bt, HeaderT) and (bt.is_header and m in HEADER_METHODS or bt.is_union and m == "isValid"):
                self.env.externs.arity(e, 0)
                if m in ("setValid", "setInvalid"):
                    self.env.stmts.lvalue(f.base)
                e.target = CallTarget("header_method", m, instance=f.base)
                if m.startswith(("min", "max")):  # sizes are constants; a varbit counts 0 / its maximum
                    bits = bt.width + (bt.fields[bt.varbit_field].max_width if "max" in m and bt.varbit_field else 0)
                    e.value = bits if m.endswith("Bits") else (bits + 7) // 8
                    return INFINT
                return BOOL if m == "isValid" else VOID
            if isinstance(bt, StackT) and m in ("push_front", "pop_front"):
                if not is_header_stack(bt.elem):
                    raise P4Error(f.loc, f"{text(f)}: '{m}' can only be used on header stacks")
                self.env.externs.arity(e, 1)
                count = self.const_int(e.args[0])
                if count < 0:
                    raise P4Error(e.args[0].loc, f"{m} needs a non-negative count")
                self.env.stmts.lvalue(f.base)
                if bt.elem.is_union:
                    raise P4Error(e.loc, f"{m} on a stack of header unions is not supported by the built-in target")
                e.target = CallTarget("stack_method", m, instance=f.base)
                return VOID
            if isinstance(bt, TableT) and m == "apply":
                self.env.externs.arity(e, 0)
                if isinstance(scope.owner, (ast.ActionDecl, ast.FunctionDecl)):
                    raise P4Error(e.loc, "tables cannot be applied inside actions or functions")
                e.target = CallTarget("table_apply", "apply", bt.decl)
                self.env.used.add(bt.decl)
                self.env.divisions.apply_key_divisions(bt.decl)
                return ApplyResultT(bt.decl)
            if isinstance(bt, BlockT) and m == "apply" and isinstance(bt.decl, ast.ControlDecl):
                return self._control_apply(e, f, bt, scope)
            if isinstance(bt, BlockT) and m == "apply" and isinstance(bt.decl, ast.ParserDecl):
                return self.env.instances.parser_apply(e, f, bt, scope)
            if isinstance(bt, ExternT):
                return self.env.externs.call_method(e, bt, m, f.base)
            raise P4Error(f.loc, f"{bt} has no method '{m}'")
        if isinstance(f, ast.TypeMember) and isinstance(self.env.types.get(f.type_name),
                                                        (ast.ControlDecl, ast.ParserDecl)):
            return self.env.instances.direct_apply(e, f, scope)  # `MyControl.apply(...)` (instances.py)
        raise P4Error(e.loc, "this expression is not callable")


_VALUE_DECLS = (ast.Param, ast.VarDecl, ast.Instantiation, ast.ConstDecl)


def _apply_results_compared(e: ast.Binary, lt: Type, rt: Type) -> None:
    """p4c's TypeInference: `t.apply() == ...` has no meaning (an apply result is no value), nor
    has comparing extern instances."""
    if e.op in ("==", "!=") and (isinstance(lt, ExternT) or isinstance(rt, ExternT)):
        raise P4Error(e.left.loc, f"{text(e.left)} and {text(e.right)}: externs cannot be compared")
    if e.op in ("==", "!=") and (isinstance(lt, ApplyResultT) or isinstance(rt, ApplyResultT)):
        raise P4Error(e.left.loc, f"{text(e.left)} and {text(e.right)}: table application results cannot be compared")
