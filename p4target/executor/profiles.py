"""v1model action profiles and action selectors, and the tables whose entries point into them.

A table with ``implementation = ...`` does not hold actions: its entries name a *member*
(an action with its data, kept in the profile and shareable between entries and tables) or,
with an action selector, a *group* of members, one of which runs per packet.  The model is
BMv2's (``bm_sim/action_profile.cpp``) as PI drives it for P4Runtime:

* every member has a BMv2 member handle, the lowest one free when it is created;
* a member of weight W in some group gets W handles (PI makes W-1 copies of it, and drops
  copies no group needs any more), so weights bias the choice;
* a group's choice is ``handles[hash % n]`` over its n handles in increasing order, the hash
  being the selector's algorithm over its ``selector`` keys packed as BMv2 packs a field list
  (``algorithms.pack_bits``); an empty group runs no action;
* a miss runs the default member or group the control plane set, else no action at all:
  BMv2's indirect tables have no P4 default action (p4c-bm2-ss warns it ignores it).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from .algorithms import HASHES
from .tables import ActionSpec, Entry, FieldMatch, KeySpec, Table, TableError

log = logging.getLogger(__name__)

Ref = tuple[str, Hashable]  # ("member", key) | ("group", key)


@dataclass(eq=False)
class Member:
    """An action with its data; ``handles`` are its BMv2 handles, its own first, then the copies
    weighted group membership needs."""

    action: str
    args: tuple[int, ...]
    handles: list[int] = field(default_factory=list)


@dataclass(eq=False)
class Group:
    """Members by key with their weight (and the watch port P4Runtime gave, kept as written)."""

    weights: dict[Hashable, int] = field(default_factory=dict)
    max_size: int = 0
    watch: dict[Hashable, Any] = field(default_factory=dict)
    choices: list[Member] = field(default_factory=list)  # one per handle, in handle order


class ActionProfile:
    """One ``action_profile`` or ``action_selector`` instance: members, groups, and the per-packet
    choice.  ``algorithm`` is the selector's hash (None: a profile without groups)."""

    def __init__(self, name: str, size: int, algorithm: str | None = None) -> None:
        self.name = name
        self.size = size
        self.algorithm = algorithm
        self.hash: Callable[[bytes], int] | None = HASHES[algorithm] if algorithm else None
        self.members: dict[Hashable, Member] = {}
        self.groups: dict[Hashable, Group] = {}
        self.actions: dict[str, ActionSpec] = {}  # every action a table using the profile may run
        self.uses: Counter[Ref] = Counter()  # table entries and default entries pointing here
        self._handles: set[int] = set()

    @property
    def with_selector(self) -> bool:
        return self.hash is not None

    # ------------------------------------------------------------------ members
    def add_member(self, key: Hashable, action: str, args: list[int] | tuple[int, ...] = ()) -> Member:
        if key in self.members:
            raise TableError("ALREADY_EXISTS", f"{self.name}: member {key} exists")
        if len(self.members) >= self.size:
            raise TableError("RESOURCE_EXHAUSTED", f"{self.name} is full ({self.size} members)")
        self._check_action(action, args)
        member = Member(action, tuple(args), [self._new_handle()])
        self.members[key] = member
        return member

    def modify_member(self, key: Hashable, action: str, args: list[int] | tuple[int, ...] = ()) -> None:
        member = self._member(key)
        self._check_action(action, args)
        member.action, member.args = action, tuple(args)  # copies share the object: all change at once

    def delete_member(self, key: Hashable) -> None:
        member = self._member(key)
        if any(key in g.weights for g in self.groups.values()) or self.uses[("member", key)]:
            raise TableError("FAILED_PRECONDITION", f"{self.name}: member {key} is still used by a group or an entry")
        self._handles.difference_update(member.handles)
        del self.members[key]

    # ------------------------------------------------------------------ groups
    def add_group(self, key: Hashable, max_size: int = 0) -> Group:
        if not self.with_selector:
            raise TableError("INVALID_ARGUMENT", f"{self.name} is an action profile without a selector: no groups")
        if key in self.groups:
            raise TableError("ALREADY_EXISTS", f"{self.name}: group {key} exists")
        group = self.groups[key] = Group(max_size=max_size)
        return group

    def set_group(self, key: Hashable, weights: dict[Hashable, int], watch: dict[Hashable, Any] | None = None) -> None:
        """Replace a group's members (key -> weight), making and dropping weighted copies as PI does:
        copies are made in member-key order before the change, unneeded ones dropped after it."""
        group = self._group(key)
        for k, w in weights.items():
            self._member(k)
            if w <= 0:
                raise TableError("INVALID_ARGUMENT", f"{self.name}: member {k} has weight {w} (must be positive)")
        touched = sorted(set(group.weights) | set(weights), key=_order)
        for k in touched:
            member = self.members[k]
            while len(member.handles) < weights.get(k, 0):
                member.handles.append(self._new_handle())
        group.weights, group.watch = dict(weights), dict(watch or {})
        for k in touched:
            self._trim(k)
        self._rebuild()

    def delete_group(self, key: Hashable) -> None:
        group = self._group(key)
        if self.uses[("group", key)]:
            raise TableError("FAILED_PRECONDITION", f"{self.name}: group {key} is still used by an entry")
        del self.groups[key]
        for k in sorted(group.weights, key=_order):
            self._trim(k)
        self._rebuild()

    # ------------------------------------------------------------------ data plane
    def pick(self, key: Hashable, data: bytes) -> Member | None:
        """The member of group ``key`` a packet whose selector fields pack to ``data`` runs."""
        choices = self.groups[key].choices
        if not choices:
            return None
        return choices[self.hash(data) % len(choices)]

    # ------------------------------------------------------------------ internals
    def check_ref(self, ref: Ref) -> None:
        """A table entry may point at ``ref``: it exists (and a group is not empty, as BMv2 requires)."""
        kind, key = ref
        if kind == "member":
            self._member(key)
        elif kind == "group":
            if not self.with_selector:
                raise TableError("INVALID_ARGUMENT", f"{self.name} has no selector: entries name members only")
            if not self._group(key).choices:
                raise TableError("FAILED_PRECONDITION", f"{self.name}: group {key} is empty (BMv2 refuses it)")
        else:
            raise TableError("INVALID_ARGUMENT", f"{self.name}: {kind} is neither a member nor a group")

    def actions_of(self, ref: Ref) -> set[str]:
        kind, key = ref
        if kind == "member":
            return {self.members[key].action}
        return {self.members[k].action for k in self.groups[key].weights}

    def _check_action(self, action: str, args: list[int] | tuple[int, ...]) -> None:
        spec = self.actions.get(action)
        if spec is None:
            raise TableError("INVALID_ARGUMENT", f"{self.name} has no action {action}")
        if len(args) != len(spec.params):
            raise TableError("INVALID_ARGUMENT", f"{action} takes {len(spec.params)} parameters, got {len(args)}")
        for (pname, width), v in zip(spec.params, args):
            if not 0 <= v < (1 << width):
                raise TableError("OUT_OF_RANGE", f"{action}: {pname}={v} does not fit in {width} bits")

    def _member(self, key: Hashable) -> Member:
        member = self.members.get(key)
        if member is None:
            raise TableError("NOT_FOUND", f"{self.name}: no member {key}")
        return member

    def _group(self, key: Hashable) -> Group:
        group = self.groups.get(key)
        if group is None:
            raise TableError("NOT_FOUND", f"{self.name}: no group {key}")
        return group

    def _new_handle(self) -> int:
        """BMv2's handle manager: the lowest handle not in use."""
        h = 0
        while h in self._handles:
            h += 1
        self._handles.add(h)
        return h

    def _trim(self, key: Hashable) -> None:
        """Drop the copies of a member beyond the largest weight any group gives it."""
        member = self.members[key]
        need = max([g.weights[key] for g in self.groups.values() if key in g.weights] + [1])
        while len(member.handles) > need:
            self._handles.discard(member.handles.pop())

    def _rebuild(self) -> None:
        """Every group's handles in order (a change of one member's copies may reorder any group)."""
        for group in self.groups.values():
            pairs = [(h, self.members[k]) for k, w in group.weights.items() for h in self.members[k].handles[:w]]
            group.choices = [m for _, m in sorted(pairs, key=lambda p: p[0])]


def _order(key: Hashable) -> tuple:
    """Member keys in PI's order: P4Runtime ids ascending, then other keys (hidden one-shot members)."""
    return (0, key, "") if isinstance(key, int) else (1, 0, repr(key))


@dataclass(eq=False, slots=True)
class IndirectEntry(Entry):
    """A table entry that names a member or group instead of an action."""

    ref: Ref = ("member", 0)


class IndirectTable(Table):
    """A table whose ``implementation`` is an action profile or selector."""

    def __init__(self, name: str, keys: list[KeySpec], actions: list[ActionSpec], size: int,
                 default: tuple[str, tuple[int, ...]], profile: ActionProfile, default_is_const: bool = False) -> None:
        super().__init__(name, keys, actions, size, default, default_is_const=default_is_const)
        self.profile = profile
        self.default_ref: Ref | None = None  # BMv2's default member or group, once the control plane sets one
        for spec in actions:
            if spec.scope != "default_only":
                profile.actions.setdefault(spec.name, spec)

    # ------------------------------------------------------------------ control plane
    def add(self, match: list[FieldMatch], action: str, args: list[int] | tuple[int, ...] = (),
            priority: int = 0, *, const_ok: bool = False) -> Entry:
        raise TableError("INVALID_ARGUMENT", f"{self.name} has an action profile: an entry names a member or group")

    def modify(self, match: list[FieldMatch], action: str, args: list[int] | tuple[int, ...] = (),
               priority: int = 0) -> Entry:
        raise TableError("INVALID_ARGUMENT", f"{self.name} has an action profile: an entry names a member or group")

    def add_ref(self, match: list[FieldMatch], ref: Ref, priority: int = 0) -> IndirectEntry:
        entry = self._ref_entry(match, ref, priority)
        self._insert(entry)
        self.profile.uses[ref] += 1
        return entry

    def modify_ref(self, match: list[FieldMatch], ref: Ref, priority: int = 0) -> IndirectEntry:
        new = self._ref_entry(match, ref, priority)
        old = self.find(new.match, new.priority)
        self._replace(new)
        self.profile.uses[ref] += 1
        if isinstance(old, IndirectEntry):
            self.profile.uses[old.ref] -= 1
        return new

    def delete(self, match: list[FieldMatch], priority: int = 0) -> None:
        old = self.find(match, priority)
        super().delete(match, priority)
        if isinstance(old, IndirectEntry):
            self.profile.uses[old.ref] -= 1

    def clear(self) -> None:
        for e in self.entries():
            if isinstance(e, IndirectEntry):
                self.profile.uses[e.ref] -= 1
        super().clear()

    def set_default_ref(self, ref: Ref) -> None:
        if self.default_is_const:
            raise TableError("PERMISSION_DENIED", f"{self.name} has a const default action")
        self._check_ref(ref)
        self.reset_default()
        self.profile.uses[ref] += 1
        self.default_ref = ref

    def reset_default(self) -> None:
        if self.default_ref is not None:
            self.profile.uses[self.default_ref] -= 1
            self.default_ref = None
        super().reset_default()

    # ------------------------------------------------------------------ data plane
    def choose(self, ref: Ref | None, data: bytes) -> tuple[ActionSpec, tuple[int, ...]] | None:
        """The action (this table's compiled one) and data a hit on ``ref`` runs, or None for no action."""
        if ref is None:
            return None
        kind, key = ref
        member = self.profile.members[key] if kind == "member" else self.profile.pick(key, data)
        if member is None:
            return None
        spec = self.actions.get(member.action)
        return (spec, member.args) if spec is not None else None

    # ------------------------------------------------------------------ internals
    def _ref_entry(self, match: list[FieldMatch], ref: Ref, priority: int) -> IndirectEntry:
        norm, priority = self._normalize(match, priority)
        self._check_ref(ref)
        placeholder = self.default_entry.action  # never run: ``choose`` resolves the ref per packet
        return IndirectEntry(norm, priority, placeholder, (), ref=ref)

    def _check_ref(self, ref: Ref) -> None:
        self.profile.check_ref(ref)
        for action in self.profile.actions_of(ref):
            spec = self.actions.get(action)
            if spec is None or spec.scope == "default_only":
                raise TableError("INVALID_ARGUMENT", f"{self.name} cannot run {action} (member of {self.profile.name})")
