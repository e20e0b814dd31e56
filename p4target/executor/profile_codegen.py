"""Code generation for tables with an action profile or selector (see profiles.py for the model).

Kept apart from codegen.py so the direct-table path stays as it was: an indirect table's
apply function looks its matched keys up as any table, packs its ``selector`` keys as BMv2
packs a field list, and asks the table which action and data the entry (or the control
plane's default member/group) resolves to for this packet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.profiles import implementation_of, is_constructed_in_place, selector_algorithm
from ..p4info import qualify
from . import ir
from .profiles import ActionProfile

if TYPE_CHECKING:
    from .env import GenEnv


def profile_instance(decl: ast.Instantiation, name: str) -> ActionProfile:
    """The runtime object of ``action_profile(size)`` / ``action_selector(algo, size, width)``;
    BMv2 ignores the selector's output width (it keeps the algorithm's whole hash)."""
    algo = selector_algorithm(decl)
    size = decl.args[1 if algo is not None else 0].value
    return ActionProfile(name, int(size), algo)


def table_profile(env: GenEnv, t: ast.TableDecl, scope: Any, table_name: str) -> ActionProfile | None:
    """The profile a table uses: its control's instance, or one of its own when constructed in place
    (named as P4Info names it: the property's @name, else after the table)."""
    inst = implementation_of(t)
    if inst is None:
        return None
    bound = scope.get(inst)
    if bound is None:  # constructed in place, or declared at top level
        named = ast.find_annotation(inst.annotations, "name") or not is_constructed_in_place(t)
        name = qualify("", inst) if named else f"{table_name}$implementation"
        profile = env.out.profiles.get(name) if not is_constructed_in_place(t) else None
        if profile is None:
            profile = profile_instance(inst, name)
            env.out.profiles[name] = profile
        scope[inst] = bound = env.gen.const(profile, "X")
    return env.ns[bound]


def emit_indirect_apply(env: GenEnv, t: ast.TableDecl, scope: Any, table: ir.Obj, keys: Sequence[ir.Expr]) -> None:
    """The body of an indirect table's apply function after its matched keys (``keys``), written
    in that function's body: returns (hit, action name) as every apply function does.  The
    profile's resolution (``choose``) and its members are Python only."""
    selectors = [k.expr for k in t.keys if k.match_kind == "selector"]
    default_name = ir.Const(scope[t.default_action.decl])
    e, sel, r = ir.Var("e", ir.VarKind.ENTRY), ir.Var("sel", ir.VarKind.ANY), ir.Var("r", ir.VarKind.ANY)
    env.build.emit(ir.Assign(e, ir.TableLookup(table, tuple(keys))))
    data = ir.lift(env.gen.hash_input(ast.ListExpr(t.loc, selectors), scope)) if selectors else ir.Const(b"")
    env.build.emit(ir.Assign(sel, data))
    action = ir.Item(r, ir.Const(0))  # the member's action, then its action data
    run = ir.Do(ir.MethodCall(ir.Attr(action, "fn"), (ir.Name("S"), ir.Item(r, ir.Const(1))), star=True))

    def choose(ref: ir.Expr, hit: bool) -> None:
        env.build.emit(ir.Assign(r, ir.MethodCall(ir.Attr(table, "choose"), (ref, sel))))
        with env.build.if_(ir.IsNone(r)):  # no member (no default member, an empty group: BMv2 logs it): nothing runs,
            # and action_run names the P4 default
            env.build.emit(ir.Return(ir.Tuple((ir.Const(hit), default_name))))
        env.build.emit(run)
        env.build.emit(ir.Return(ir.Tuple((ir.Const(hit), ir.Attr(action, "name")))))

    with env.build.if_(ir.IsNone(e)):
        choose(ir.Attr(table, "default_ref"), False)
    choose(ir.Attr(e, "ref"), True)
