"""Code generation for tables with an action profile or selector (see profiles.py for the model).

Kept apart from codegen.py so the direct-table path stays as it was: an indirect table's
apply function looks its matched keys up as any table, packs its ``selector`` keys as BMv2
packs a field list, and asks the table which action and data the entry (or the control
plane's default member/group) resolves to for this packet.
"""

from __future__ import annotations

from typing import Any

from ..frontend import ast
from ..frontend.profiles import implementation_of, is_constructed_in_place, selector_algorithm
from ..p4info import qualify
from .emitter import Emitter
from .profiles import ActionProfile


def profile_instance(decl: ast.Instantiation, name: str) -> ActionProfile:
    """The runtime object of ``action_profile(size)`` / ``action_selector(algo, size, width)``;
    BMv2 ignores the selector's output width (it keeps the algorithm's whole hash)."""
    algo = selector_algorithm(decl)
    size = decl.args[1 if algo is not None else 0].value
    return ActionProfile(name, int(size), algo)


def table_profile(cg: Emitter, t: ast.TableDecl, scope: Any, table_name: str) -> ActionProfile | None:
    """The profile a table uses: its control's instance, or one of its own when constructed in place
    (named as P4Info names it: the property's @name, else after the table)."""
    inst = implementation_of(t)
    if inst is None:
        return None
    bound = scope.get(inst)
    if bound is None:  # constructed in place, or declared at top level
        named = ast.find_annotation(inst.annotations, "name") or not is_constructed_in_place(t)
        name = qualify("", inst) if named else f"{table_name}$implementation"
        profile = cg.out.profiles.get(name) if not is_constructed_in_place(t) else None
        if profile is None:
            profile = profile_instance(inst, name)
            cg.out.profiles[name] = profile
        scope[inst] = bound = cg.const(profile, "X")
    return cg.ns[bound]


def emit_indirect_apply(cg: Emitter, t: ast.TableDecl, scope: Any, tname: str, key: str) -> None:
    """The body of an indirect table's apply function after its matched keys (``key``):
    returns (hit, action name) as every apply function does."""
    selectors = [k.expr for k in t.keys if k.match_kind == "selector"]
    default_name = repr(scope[t.default_action.decl])
    cg.emit(f"    e = {tname}.lookup(({key}{',' if key else ''}))")
    if selectors:
        cg.indent = 1
        data = cg.hash_input(ast.ListExpr(t.loc, selectors), scope)
        cg.indent = 0
        cg.emit(f"    sel = {data}")
    else:
        cg.emit("    sel = b''")
    cg.emit("    if e is None:")
    cg.emit(f"        r = {tname}.choose({tname}.default_ref, sel)")
    cg.emit("        if r is None:")
    cg.emit(f"            return False, {default_name}")  # BMv2 runs nothing; action_run names the P4 default
    cg.emit("        r[0].fn(S, *r[1])")
    cg.emit("        return False, r[0].name")
    cg.emit(f"    r = {tname}.choose(e.ref, sel)")
    cg.emit("    if r is None:")
    cg.emit(f"        return True, {default_name}")  # an empty group: BMv2 logs it and runs nothing
    cg.emit("    r[0].fn(S, *r[1])")
    cg.emit("    return True, r[0].name")
