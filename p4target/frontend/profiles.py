"""Checker rules for v1model's action profiles and action selectors (a pass of the checker, env.py).

A table names its implementation in the ``implementation`` property, either an instance
declared in the control (``action_selector(HashAlgorithm.crc16, 32w128, 32w14) as;`` then
``implementation = as;``, which several tables may share) or one constructed in place
(``@name("ap") implementation = action_profile(32w128);``, one per table).  An in-place
constructor is checked here as an anonymous instantiation and the property is rewritten to a
path naming it, so the code generator and P4Info see one shape.  ``selector`` keys are not
matched: BMv2 hashes them to pick a member of a group, so they need an action selector.
"""

from __future__ import annotations

from typing import Any

from . import ast
from .env import Pass
from .errors import P4Error
from .types import BOOL, BitsT, EnumT, ExternT

PROFILE_EXTERNS = ("action_profile", "action_selector")
SELECTOR_HASHES = ("crc16", "crc32", "csum16", "identity")  # what executor/algorithms.py computes


def implementation_of(t: ast.TableDecl) -> ast.Instantiation | None:
    """The action profile or selector instance a checked table names, if any."""
    impl = t.properties.get("implementation")
    decl = getattr(impl, "decl", None)
    return decl if isinstance(decl, ast.Instantiation) else None


def is_constructed_in_place(t: ast.TableDecl) -> bool:
    """``implementation = action_profile(...)``: the instance belongs to this table alone."""
    impl = t.properties.get("implementation")
    return isinstance(impl, ast.PathExpr) and impl.name == ""


def selector_algorithm(inst: ast.Instantiation) -> str | None:
    """The hash algorithm of an action selector (None for a plain action profile)."""
    if inst.type.decl.name != "action_selector":
        return None
    algo = inst.args[0]
    return algo.type.members[algo.value]


class Profiles(Pass):
    """Tables with an ``implementation``."""

    def table_implementation(self, t: ast.TableDecl, value: ast.Expr, scope: Any) -> None:
        """Check the property's value; a constructor call becomes an anonymous instance."""
        if isinstance(value, ast.CtorCall):
            inst = ast.Instantiation(value.loc, list(t.property_annotations.get("implementation", [])),
                                     "", value.type_ref, value.args)
            self.env.decls.instantiation(inst, scope)
            path = ast.PathExpr(value.loc, "")  # an empty name: constructed in place (no one can write it)
            path.decl, path.type = inst, inst.type
            t.properties["implementation"] = path
        else:
            self.env.exprs.expr(value, scope)
            if not (isinstance(value, ast.PathExpr) and isinstance(value.decl, ast.Instantiation)):
                raise P4Error(value.loc, "'implementation' must name an action_profile or action_selector instance")
        inst = implementation_of(t)
        if not (isinstance(inst.type, ExternT) and inst.type.decl.name in PROFILE_EXTERNS):
            raise P4Error(value.loc, "'implementation' must name an action_profile or action_selector instance")
        algo = selector_algorithm(inst)
        if algo is not None and algo not in SELECTOR_HASHES:
            raise P4Error(inst.args[0].loc, f"hash algorithm {algo} is not supported by the built-in target")

    def check_profile_table(self, t: ast.TableDecl) -> None:
        """What a table with selector keys or an implementation may contain, as BMv2 runs it."""
        inst = implementation_of(t)
        selectors = [k for k in t.keys if k.match_kind == "selector"]
        for key in selectors:
            kt = key.expr.type
            if not (isinstance(kt, BitsT) or kt is BOOL or (isinstance(kt, EnumT) and kt.underlying is not None)):
                raise P4Error(key.expr.loc, f"a selector key must be bit<W>, int<W> or bool, not {kt}")
        if selectors and (inst is None or selector_algorithm(inst) is None):
            raise P4Error(selectors[0].loc, f"table {t.name}: a selector key needs 'implementation' to be an "
                          "action_selector")
        if inst is None:
            return
        for prop in ("counters", "meters"):
            if prop in t.properties:
                raise P4Error(t.properties[prop].loc, f"'{prop}' on a table with an action profile or selector is "
                              "not supported by the built-in target")
        if t.entries is not None:
            where = t.entries[0].loc if t.entries else t.loc
            raise P4Error(where, "'entries' in a table with an action profile or selector are not supported by the "
                          "built-in target (BMv2 takes none)")
        if selector_algorithm(inst) is not None and not is_constructed_in_place(t):
            shared = self.env.selector_keys
            keys = [_written(k.expr) for k in selectors]
            first = shared.setdefault(id(inst), (t.name, keys))
            if first[1] != keys:
                raise P4Error(t.loc, f"tables {first[0]} and {t.name} share action selector {inst.name} but hash "
                              "different selector keys (BMv2 keeps one selector input per action selector)")


def _written(e: ast.Expr) -> str:
    """A selector key, to compare between tables: its source text position is not enough
    (two tables write it twice), so its shape."""
    if isinstance(e, ast.PathExpr):
        return e.name
    if isinstance(e, ast.Member):
        return f"{_written(e.base)}.{e.member}"
    if isinstance(e, ast.Slice):
        return f"{_written(e.base)}[{e.hi.value}:{e.lo.value}]"
    if isinstance(e, ast.Index):
        return f"{_written(e.base)}[{e.index.value}]"
    return f"{type(e).__name__}@{e.loc.line}:{e.loc.col}"
