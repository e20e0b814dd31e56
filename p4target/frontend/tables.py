"""Tables (a pass of the checker, env.py): keys, action lists, properties, and entries with
their priorities as p4c gives them.
"""

from __future__ import annotations

import re

from . import ast, limits, stages
from .entry_keys import check_entry_keys
from .env import Pass
from .errors import P4Error
from .keynames import key_name
from .scope import Scope
from .source_text import find_after
from .types import (
    BOOL,
    ERROR,
    INFINT,
    BitsT,
    EnumT,
    ExternT,
)

TABLE_PROPERTIES = {"size", "counters", "meters", "support_timeout", "largest_priority_wins", "priority_delta",
                    "implementation"}
_BMV2_PRIORITY_SPAN = 1 << 24  # larger than any @priority a program gives a const entry


class Tables(Pass):
    """Tables and their entries."""

    def _action_ref(self, ref: ast.ActionRef, scope: Scope, all_args: bool) -> None:
        decl = (scope.root() if ref.top_level else scope).lookup(ref.name)
        if not isinstance(decl, ast.ActionDecl):
            raise P4Error(ref.loc, f"'{ref.name}' is not an action")
        if ref.invoked:  # p4c's TypeInference, at the inner call
            shown = ", ".join(ast.text(a) for a in ref.args or [])
            raise P4Error(ref.loc, f"{ref.name}({shown}): Cannot invoke result of an action call")
        ref.decl = decl
        args = ref.args or []
        wanted = decl.params if all_args else [p for p in decl.params if p.direction]
        if ref.args is None and not all_args and wanted:
            raise P4Error(ref.loc, f"action {decl.name} needs arguments for its directional parameters")
        if ref.args is not None or all_args:
            if len(args) != len(wanted):
                raise P4Error(ref.loc, f"action {decl.name} expects {len(wanted)} arguments here, got {len(args)}")
            for a in args:
                self.env.exprs.expr(a, scope)
            self.env.calls.check_args(ref.loc, wanted, args, {}, anchored=False)
        if not all_args:  # the action list: its arguments bind the directional parameters
            self.env.divisions.bind_params(decl, decl.params, args, data=True)
            applied = next((c for c in _postorder(args) if isinstance(c, ast.Call) and c.target is not None
                            and c.target.kind == "table_apply"), None)
            if applied is not None:  # p4c's SideEffectOrdering (TablesInActions), a late frontend stage
                stages.defer(self.env, stages.SIDE_EFFECTS,
                             P4Error(applied.loc, f"{ast.text(applied)}: table invocation in action argument"),
                             owner=self.env.owner)
        else:  # default_action, an entry: p4c's TypeInference wants the action data known
            for a, p in zip(args, wanted):
                if p.direction == "" and a.value is None:
                    raise P4Error(a.loc, f"{ast.text(a)}: action argument must be a compile-time constant")

    def table(self, t: ast.TableDecl, scope: Scope) -> None:
        self._entries_place(t)
        refs = [*t.actions, *([t.default_action] if t.default_action else []), *(e.action for e in t.entries or [])]
        missing = next((ref for ref in refs if scope.lookup(ref.name) is None), None)
        if missing is not None:  # p4c's ResolveReferences, before any type rule
            raise P4Error(missing.loc, f"{missing.name}: declaration not found")
        self._keys(t, scope)
        _actions_listed_first(t)
        names = self._action_list(t, scope)
        self._properties(t, scope)
        self.env.profiles.check_profile_table(t)
        for entry in t.entries or []:
            self._entry(t, entry, scope, names)
            if entry.const_at is not None and not self.env.frontend:  # p4c's errors come first
                stages.defer(self.env, stages.TARGET, P4Error(
                    entry.const_at, "a 'const' on one table entry is not supported by the built-in target"))
        self._action_scopes(t)
        if t.entries:
            self._entry_priorities(t)
        if t.entries and self.env.frontend:
            check_entry_keys(self.env, t)

    def _entries_place(self, t: ast.TableDecl) -> None:
        """p4c's TypeInference: entries need a key, written before them."""
        entries, key = t.property_locs.get("entries"), t.property_locs.get("key")
        if entries is None or not t.entries:
            return
        if key is None or not t.keys:  # `key = {}` is no key either
            raise P4Error(t.loc, f"Entries cannot be specified for a table with no key {t.name}")
        if (key.line, key.col) >= (entries.line, entries.col):
            raise P4Error(entries, "EntriesList: Entries list must be after table key Key")

    def _action_scopes(self, t: ast.TableDecl) -> None:
        """p4c's TypeInference: a @defaultonly action in no entry, a @tableonly one never the
        default (the first in the source is reported, as p4c visits the properties in order)."""
        marked = {ref.decl: {a.name for a in ref.annotations} for ref in t.actions}
        wrong = [P4Error(e.loc, "Entry: Action marked with defaultonly used in table")
                 for e in t.entries or [] if "defaultonly" in marked.get(e.action.decl, ())]
        if "tableonly" in marked.get(t.default_action.decl, ()):
            wrong.append(P4Error(t.default_action.loc,
                                 "default_action: Action marked with tableonly used as default action"))
        if wrong:
            raise min(wrong, key=lambda err: (err.loc.line, err.loc.col))

    def _lpm_mask(self, t: ast.TableDecl, ks: ast.Mask, kt: object) -> None:
        """p4c's P4RuntimeSerializer: an LPM mask is a prefix (ones, then zeros)."""
        value, mask = ks.base.value, ks.mask.value
        if not (isinstance(kt, BitsT) and isinstance(value, int) and isinstance(mask, int)):
            return
        mask &= kt.mask
        zeros = kt.width if mask == 0 else (mask & -mask).bit_length() - 1
        if zeros + bin(mask).count("1") != kt.width:
            stages.defer(self.env, stages.P4RUNTIME,
                         P4Error(ks.loc, f"{value & kt.mask} &&& {mask} invalid mask for LPM key"), owner=t)

    def _keys(self, t: ast.TableDecl, scope: Scope) -> None:
        for key in t.keys:
            self.env.key_table = t
            try:
                kt = self.env.exprs.expr(key.expr, scope)
            finally:
                self.env.key_table = None
            try:
                key_name(key)
            except P4Error as err:  # p4c's TableKeyNames, after its type checker
                stages.defer(self.env, stages.TABLE_KEY_NAMES, err)
            if key.match_kind not in self.env.match_kinds:
                raise P4Error(key.loc, f"unknown match kind '{key.match_kind}'")
            if key.match_kind not in ("exact", "ternary", "lpm", "range", "optional", "selector"):
                raise P4Error(key.loc, f"match kind '{key.match_kind}' is not supported by the built-in target")
            # An error key: p4c-bm2-ss matches it as BMv2's 32-bit error code (exact; P4Info: bitwidth 0).
            if not (isinstance(kt, BitsT) or kt is BOOL or isinstance(kt, EnumT) or kt is ERROR):
                raise P4Error(key.expr.loc, f"a table key cannot have type {kt}")
            serializable = isinstance(kt, EnumT) and kt.underlying is not None
            if key.match_kind in ("lpm", "ternary", "range") and not (isinstance(kt, BitsT) or serializable):
                raise P4Error(key.expr.loc, f"{key.match_kind} keys must be bit<W>, not {kt}")
        if sum(k.match_kind == "lpm" for k in t.keys) > 1:
            raise P4Error(t.loc, "a table can have at most one lpm key")

    def _action_list(self, t: ast.TableDecl, scope: Scope) -> list[ast.ActionDecl]:
        """The actions the table may run (``NoAction`` added as p4c adds it); checks the default."""
        # `actions = {}` and no default_action: as p4c, NoAction is added below (@defaultonly) and is
        # the default, so the table only ever runs NoAction.  (No `actions` at all: refused by the parser.)
        names = []
        written = [ref.name for ref in t.actions]
        for i, ref in enumerate(t.actions):  # p4c: an action listed twice, refused at the second
            if ref.name in written[:i]:
                raise P4Error(ref.loc, f"{ref.name}: Duplicates declaration {ref.name}")
        for ref in t.actions:
            self._action_ref(ref, scope, all_args=False)
            names.append(ref.decl)
        if t.default_action is None:
            noaction = scope.lookup("NoAction")
            if not isinstance(noaction, ast.ActionDecl):
                raise P4Error(t.loc, f"table {t.name} has no default_action and NoAction is not declared")
            t.default_action = ast.ActionRef(t.loc, [], "NoAction", [])
            if noaction not in names:
                implicit = ast.ActionRef(t.loc, [ast.Annotation(t.loc, "defaultonly", [])], "NoAction", None)
                t.actions.append(implicit)
                self._action_ref(implicit, scope, all_args=False)
                names.append(noaction)
        self._action_ref(t.default_action, scope, all_args=True)
        _listed(t, t.default_action, names, "the default action must be in the table's actions list")
        _bound_args_match(t, t.default_action)
        return names

    def _properties(self, t: ast.TableDecl, scope: Scope) -> None:
        for name, value in t.properties.items():
            if name not in TABLE_PROPERTIES:
                raise P4Error(value.loc, f"table property '{name}' is not supported by the built-in target")
            if name == "implementation":
                self.env.profiles.table_implementation(t, value, scope)
            else:
                self.env.exprs.expr(value, scope)
        if "size" in t.properties:
            limits.table_size(t.name, t.properties["size"], self.env.exprs.const_int(t.properties["size"]))
            if self.env.exprs.const_int(t.properties["size"]) <= 0:
                raise P4Error(t.properties["size"].loc, "table size must be positive")
        counters = t.properties.get("counters")
        if counters is not None:
            kind = counters.type.decl.name if isinstance(counters.type, ExternT) else None
            if kind not in ("direct_counter", "DirectCounter"):
                raise P4Error(counters.loc, "'counters' must name a direct_counter (TNA: DirectCounter) instance")
        meters = t.properties.get("meters")
        if meters is not None:
            if not (isinstance(meters.type, ExternT) and meters.type.decl.name == "direct_meter"):
                raise P4Error(meters.loc, "'meters' must name a direct_meter instance")

    def _entry_priorities(self, t: ast.TableDecl) -> None:
        """p4c's rules (P4-16 v1.2.4 "Entry priorities"): `const entries` take none (the
        first entry wins); initial `entries` with none get priority_delta steps from the
        last entry up; otherwise the first entry needs one and each later entry without
        one takes the previous priority minus priority_delta."""
        given = [e for e in t.entries if e.priority is not None]
        if t.entries_const:
            if given:
                raise P4Error(given[0].loc, "a table with 'const' entries cannot have priorities")
            self._priority_annotations(t)
            return
        wins = t.properties.get("largest_priority_wins")
        if wins is not None and (wins.type is not BOOL or wins.value is None):
            raise P4Error(wins.loc, "largest_priority_wins must be a constant bool")
        if wins is not None and not wins.value and not self.env.frontend:  # p4c's errors come first
            stages.defer(self.env, stages.TARGET, P4Error(
                wins.loc, "largest_priority_wins = false is not supported by the built-in target"))
        delta_e = t.properties.get("priority_delta")
        delta = 1 if delta_e is None else self.env.exprs.const_int(delta_e)
        if delta <= 0:
            raise P4Error(delta_e.loc, "priority_delta must be positive")
        largest = wins is None or bool(wins.value)
        if not given:
            for i, e in enumerate(t.entries):
                rank = len(t.entries) - 1 - i if largest else i
                e.priority = ast.IntLit(e.loc, 1 + delta * rank, None, False)
                e.priority.value, e.priority.type = e.priority.number, INFINT
            return
        if all(k.match_kind in ("exact", "lpm") for k in t.keys):  # p4c's EntryPriorities, at the key's braces
            key_loc = t.property_locs.get("key", t.loc)
            raise P4Error(find_after(key_loc, r"\{"),
                          "Key key match type does not require priorities, but some are specified")
        if t.entries[0].priority is None:
            raise P4Error(t.entries[0].loc, "the first entry must have a priority")
        current = 0
        for e in t.entries:
            if e.priority is None:
                e.priority = ast.IntLit(e.loc, current, None, False)
                e.priority.value, e.priority.type = current, INFINT
            current = e.priority.value
            if current < delta and largest:  # p4c: the next priority would go below 0 (its counter is unsigned)
                raise P4Error(find_after(t.loc, rf"\btable\s+({re.escape(t.name)})\b", group=1),
                              f"{t.name} Overflow in priority computation")
            current += -delta if largest else delta

    def _priority_annotations(self, t: ast.TableDecl) -> None:
        """`@priority(N)` on const entries, as p4c's BMv2 backend passes them on: an entry's
        BMv2 priority is N, else its position (1 for the first), and BMv2 prefers the
        smallest; our tables prefer the largest, so the order is turned round."""
        notes = [ast.find_annotation(e.annotations, "priority") for e in t.entries]
        if not any(notes):
            return
        for i, (e, note) in enumerate(zip(t.entries, notes)):
            bmv2 = i + 1
            if note is not None:
                arg = note.args[0] if len(note.args) == 1 else None
                if not isinstance(arg, ast.IntLit) or arg.number < 0:
                    raise P4Error(note.loc, "@priority needs one non-negative integer")
                bmv2 = arg.number
            e.priority = ast.IntLit(e.loc, _BMV2_PRIORITY_SPAN - bmv2, None, False)
            e.priority.value, e.priority.type = e.priority.number, INFINT

    def _entry(self, t: ast.TableDecl, entry: ast.Entry, scope: Scope, actions: list) -> None:
        if len(entry.keyset) != len(t.keys):
            if not (len(entry.keyset) == 1 and isinstance(entry.keyset[0], ast.Default)):
                raise P4Error(entry.loc, f"entry has {len(entry.keyset)} key values, table has {len(t.keys)} keys")
            entry.keyset = [ast.Default(entry.loc) for _ in t.keys]
        for ks, key in zip(entry.keyset, t.keys):
            self.env.blocks.keyset_element(ks, key.expr.type, scope)
            if isinstance(ks, ast.Mask) and key.match_kind not in ("ternary", "lpm"):
                raise P4Error(ks.loc, f"a mask is not allowed on a {key.match_kind} key")
            if isinstance(ks, ast.Mask) and key.match_kind == "lpm":
                self._lpm_mask(t, ks, key.expr.type)
            if isinstance(ks, ast.Range) and key.match_kind != "range":
                raise P4Error(ks.loc, f"a range is not allowed on a {key.match_kind} key")
            if isinstance(ks, ast.Default) and key.match_kind == "exact":  # p4c's type checker lets it pass
                stages.defer(self.env, stages.P4RUNTIME, P4Error(ks.loc, "an exact key needs a value"), owner=t)
        self._action_ref(entry.action, scope, all_args=True)
        _listed(t, entry.action, actions, f"action {entry.action.name} is not in the table's actions list")
        _bound_args_match(t, entry.action)
        if entry.priority is not None:
            self.env.exprs.expr(entry.priority, scope)
            if self.env.exprs.const_int(entry.priority) < 0:
                raise P4Error(entry.priority.loc, "an entry priority cannot be negative")


def _listed(t: ast.TableDecl, ref: ast.ActionRef, actions: list[ast.ActionDecl], otherwise: str) -> None:
    """p4c's validateActionInitializer: the actions list has an element of the action's name,
    and it names the same action (``.a()`` is the top-level a, never a local a)."""
    if ref.decl in actions:
        return
    same_name = next((r for r in t.actions if r.name == ref.name), None)
    if same_name is not None:
        shown = ("." if ref.top_level else "") + f"{ref.name}({', '.join(ast.text(a) for a in ref.args or [])})"
        raise P4Error(ref.loc, f"{shown} and {same_name.name} refer to different actions")
    raise P4Error(ref.loc, otherwise)


def _bound_args_match(t: ast.TableDecl, ref: ast.ActionRef) -> None:
    """p4c's TypeInference: a default action or entry repeats the arguments the actions list binds."""
    listed = next((r for r in t.actions if r.decl is ref.decl), None)
    for bound, given in zip(listed.args or [] if listed else [], ref.args or []):
        same = bound.value == given.value if bound.value is not None else ast.text(bound) == ast.text(given)
        if not same:
            raise P4Error(given.loc, f"{_cast_text(given)}: argument does not match declaration in actions list: "
                          f"{_cast_text(bound)}")


def _cast_text(e: ast.Expr) -> str:
    """An argument as p4c prints it once typed: an untyped literal gets its cast and width."""
    if isinstance(e, ast.IntLit) and e.width is None and isinstance(e.type, BitsT) and isinstance(e.value, int):
        return f"({e.type}){e.type.width}{'s' if e.type.signed else 'w'}{e.value}"
    return ast.text(e)


def _actions_listed_first(t: ast.TableDecl) -> None:
    """p4c's TypeInference checks the properties in source order: a default action or an entry
    written before the actions list finds no list yet (at the table's name)."""
    actions = t.property_locs.get("actions")
    refs = [(t.property_locs.get("default_action"), t.default_action),
            (t.property_locs.get("entries"), t.entries[0].action if t.entries else None)]
    early = [(loc, ref) for loc, ref in refs if loc is not None and ref is not None
             and (actions is None or (loc.line, loc.col) < (actions.line, actions.col))]
    if early:
        ref = min(early, key=lambda pair: (pair[0].line, pair[0].col))[1]
        call = f"{ref.name}({', '.join(ast.text(a) for a in ref.args or [])})"
        raise P4Error(t.loc, f"{t.name} has no action list, so it cannot invoke '{call}'")


def _postorder(node: object):
    """The nodes under ``node`` (a node or a list), children before their parent."""
    for child in ast.children(node):
        yield from _postorder(child)
        yield child
