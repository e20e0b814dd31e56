"""p4test's CheckTableEntries (early in its midend): a table entry whose keys match exactly the
keys of an earlier entry can never be hit, and p4test refuses it ("Duplicate entry keys").  An
entry that an earlier ternary or optional entry covers is only a warning there, so it passes."""

from __future__ import annotations

from typing import Any

from . import ast, stages
from .env import CheckEnv
from .errors import P4Error
from .types import BOOL, BitsT


def check_entry_keys(env: CheckEnv, t: ast.TableDecl) -> None:
    """Defers the refusal of the first entry that repeats an earlier one's keys (p4c: at its keys)."""
    if not stages.blocks_kept(env):
        return
    ternary = [k.match_kind in ("ternary", "optional") for k in t.keys]
    widths = [k.expr.type.width if isinstance(k.expr.type, BitsT) else 1 if k.expr.type is BOOL else None
              for k in t.keys]
    earlier: list[ast.Entry] = []
    for entry in t.entries or []:
        for prev in earlier:
            verdict = _compare(entry.keyset, prev.keyset, ternary, widths)
            if verdict == "covered":
                break  # p4c only warns, once per entry
            if verdict == "duplicate":
                stages.defer(env, stages.CHECK_TABLE_ENTRIES, P4Error(entry.loc, "Duplicate entry keys"), owner=t)
                return
        earlier.append(entry)


def _compare(keys: list[ast.Expr], prev: list[ast.Expr], ternary: list[bool], widths: list[Any]) -> str | None:
    """"duplicate" when each key is the earlier one's, "covered" when an earlier ternary key covers
    one, else None (they differ, or a key is not known here)."""
    covered = False
    for i, (k, p) in enumerate(zip(keys, prev)):
        shape = _shape(k)
        if shape is None:
            return None
        if shape == _shape(p):
            continue
        if not (i < len(ternary) and ternary[i]):
            return None
        mine, theirs = _mask_value(k, widths[i]), _mask_value(p, widths[i])
        if mine is None or theirs is None or (theirs[0] & mine[0]) != theirs[0] \
                or (theirs[1] & theirs[0]) != (mine[1] & theirs[0]):
            return None
        covered = True
    return "covered" if covered else "duplicate"


def _shape(e: ast.Expr) -> tuple | None:
    """What p4c's equiv compares, for the keys it can compare here."""
    if isinstance(e, ast.Default):
        return ("_",)
    if isinstance(e, ast.Mask):
        return ("&&&", e.base.value, e.mask.value) if None not in (e.base.value, e.mask.value) else None
    if isinstance(e, ast.Range):
        return ("..", e.lo.value, e.hi.value) if None not in (e.lo.value, e.hi.value) else None
    return ("=", e.value) if e.value is not None else None


def _mask_value(e: ast.Expr, width: int | None) -> tuple[int, int] | None:
    """p4c's get_mask_val: the key matches v when v & mask == value."""
    if isinstance(e, ast.Default):
        return 0, 0
    if isinstance(e, ast.Mask) and all(isinstance(x.value, (int, bool)) for x in (e.base, e.mask)):
        return int(e.mask.value), int(e.base.value)
    if isinstance(e.value, (int, bool)) and not isinstance(e, ast.Range):
        return ((1 << width) - 1 if width else -1), int(e.value)
    return None
