"""Match-action tables: entries added through this Python API, looked up per packet.

Priority follows P4Runtime (a larger number wins), as does the identity of an entry (its
match plus its priority).  Lookups take the fastest structure the key kinds allow: a dict
for all-exact keys, one dict per prefix length for exact+lpm, else a priority-ordered scan
with BMv2's rules (longest prefix first only when there is no explicit priority).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class TableError(Exception):
    """A table operation the control plane asked for that cannot be done."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code  # ALREADY_EXISTS | NOT_FOUND | RESOURCE_EXHAUSTED | INVALID_ARGUMENT | PERMISSION_DENIED


@dataclass(frozen=True, slots=True)
class KeySpec:
    name: str
    match_kind: str  # exact | lpm | ternary | range | optional
    width: int


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """An action a table may run: its compiled function and its action-data parameters."""

    name: str
    fn: Callable[..., Any]
    params: tuple[tuple[str, int], ...]  # (name, width)
    scope: str = "table_and_default"  # table_only | default_only | table_and_default


# One field of an entry's match, normalised: exact/optional/ternary/lpm -> ("mask", value, mask);
# range -> ("range", lo, hi).  An omitted (don't care) field is ("mask", 0, 0).
FieldMatch = tuple[str, int, int]


def exact(value: int) -> FieldMatch:
    return ("mask", value, -1)


def ternary(value: int, mask: int) -> FieldMatch:
    return ("mask", value & mask, mask)


def lpm(value: int, prefix_len: int, width: int) -> FieldMatch:
    mask = ((1 << prefix_len) - 1) << (width - prefix_len) if prefix_len else 0
    return ("mask", value & mask, mask)


def value_range(lo: int, hi: int) -> FieldMatch:
    return ("range", lo, hi)


DONT_CARE: FieldMatch = ("mask", 0, 0)


@dataclass(eq=False, slots=True)
class Entry:
    match: tuple[FieldMatch, ...]
    priority: int
    action: ActionSpec
    args: tuple[int, ...]
    handle: int = 0
    counter: list[int] = field(default_factory=lambda: [0, 0])  # packets, bytes

    @property
    def identity(self) -> tuple:
        return (self.match, self.priority)


class Table:
    def __init__(self, name: str, keys: list[KeySpec], actions: list[ActionSpec], size: int,
                 default: tuple[str, tuple[int, ...]], default_is_const: bool = False,
                 is_const: bool = False, has_direct_counter: bool = False) -> None:
        self.name = name
        self.keys = keys
        self.actions = {a.name: a for a in actions}
        self.size = size
        self.is_const = is_const
        self.default_is_const = default_is_const
        self.has_direct_counter = has_direct_counter
        kinds = {k.match_kind for k in keys}
        self.needs_priority = bool(kinds & {"ternary", "range", "optional"})
        self._lpm_index = next((i for i, k in enumerate(keys) if k.match_kind == "lpm"), None)
        self._mode = "exact" if kinds <= {"exact"} else ("lpm" if kinds <= {"exact", "lpm"} else "scan")
        self._entries: dict[tuple, Entry] = {}
        self._next_handle = 1  # an int, not itertools.count: switches are deep copies (Generated.copy)
        self._rebuild()
        self.default_entry = self._make_default(*default)
        self.initial_default = self.default_entry
        self.on_change: Callable[[], None] | None = None  # the native path rebuilds its image

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ control plane
    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def find(self, match: tuple[FieldMatch, ...] | list[FieldMatch], priority: int = 0) -> Entry | None:
        return self._entries.get(self._identity(match, priority))

    def _identity(self, match, priority: int) -> tuple:
        """An entry's identity as stored: exact matches carry their full mask."""
        norm = tuple((kind, a, (1 << k.width) - 1 if b == -1 else b) for (kind, a, b), k in zip(match, self.keys))
        return (norm, priority if self.needs_priority else 0)

    def add(self, match: list[FieldMatch], action: str, args: list[int] | tuple[int, ...] = (),
            priority: int = 0, *, const_ok: bool = False) -> Entry:
        if self.is_const and not const_ok:
            raise TableError("PERMISSION_DENIED", f"{self.name} has const entries")
        return self._insert(self._make_entry(match, action, args, priority))

    def _insert(self, entry: Entry) -> Entry:
        if entry.identity in self._entries:
            raise TableError("ALREADY_EXISTS", f"{self.name}: an entry with this match already exists")
        if len(self._entries) >= self.size:
            raise TableError("RESOURCE_EXHAUSTED", f"{self.name} is full ({self.size} entries)")
        entry.handle, self._next_handle = self._next_handle, self._next_handle + 1
        self._entries[entry.identity] = entry
        self._index(entry)
        self._changed()
        return entry

    def modify(self, match: list[FieldMatch], action: str, args: list[int] | tuple[int, ...] = (),
               priority: int = 0) -> Entry:
        if self.is_const:
            raise TableError("PERMISSION_DENIED", f"{self.name} has const entries")
        return self._replace(self._make_entry(match, action, args, priority))

    def _replace(self, new: Entry) -> Entry:
        old = self._entries.get(new.identity)
        if old is None:
            raise TableError("NOT_FOUND", f"{self.name}: no such entry")
        new.handle, new.counter = old.handle, old.counter
        self._unindex(old)
        self._entries[new.identity] = new
        self._index(new)
        self._changed()
        return new

    def delete(self, match: list[FieldMatch], priority: int = 0) -> None:
        if self.is_const:
            raise TableError("PERMISSION_DENIED", f"{self.name} has const entries")
        old = self._entries.pop(self._identity(match, priority), None)
        if old is None:
            raise TableError("NOT_FOUND", f"{self.name}: no such entry")
        self._unindex(old)
        self._changed()

    def clear(self) -> None:
        if not self.is_const:
            self._entries.clear()
            self._rebuild()
            self._changed()

    def set_default(self, action: str, args: list[int] | tuple[int, ...] = ()) -> None:
        if self.default_is_const:
            raise TableError("PERMISSION_DENIED", f"{self.name} has a const default action")
        entry = self._make_default(action, tuple(args))
        self.default_entry = entry
        self._changed()

    def reset_default(self) -> None:
        self.default_entry = self.initial_default
        self._changed()

    @property
    def exact_only(self) -> bool:
        """Every key is exact: at most one entry matches a key (a hash finds it)."""
        return self._mode == "exact"

    def lookup_order(self) -> list[Entry]:
        """The entries in the order ``lookup`` tries them: the first that matches wins (for an
        exact-only table any order, as at most one matches)."""
        if self._mode == "exact":
            return list(self._exact.values())
        if self._mode == "lpm":
            return [e for _, bucket in self._by_prefix for e in bucket.values()]
        return list(self._ordered)

    # ------------------------------------------------------------------ data plane
    def lookup(self, key: tuple) -> Entry | None:
        if self._mode == "exact":
            return self._exact.get(key)
        if self._mode == "lpm":
            i = self._lpm_index
            value = key[i]
            for mask, bucket in self._by_prefix:
                e = bucket.get(key[:i] + (value & mask,) + key[i + 1:])
                if e is not None:
                    return e
            return None
        for e in self._ordered:
            for (kind, a, b), k in zip(e.match, key):
                if kind == "mask":
                    if k & b != a:
                        break
                elif not a <= k <= b:
                    break
            else:
                return e
        return None

    # ------------------------------------------------------------------ internals
    def _check_args(self, spec: ActionSpec, args: tuple[int, ...]) -> None:
        if len(args) != len(spec.params):
            raise TableError("INVALID_ARGUMENT", f"{spec.name} takes {len(spec.params)} parameters, got {len(args)}")
        for (pname, width), v in zip(spec.params, args):
            if not 0 <= v < (1 << width):
                raise TableError("OUT_OF_RANGE", f"{spec.name}: {pname}={v} does not fit in {width} bits")

    def _action(self, action: str, args) -> ActionSpec:
        spec = self.actions.get(action)
        if spec is None:
            raise TableError("INVALID_ARGUMENT", f"{self.name} has no action {action}")
        self._check_args(spec, tuple(args))
        return spec

    def _make_default(self, action: str, args: tuple[int, ...]) -> Entry:
        spec = self._action(action, args)
        if spec.scope == "table_only":
            raise TableError("PERMISSION_DENIED", f"{action} cannot be the default action of {self.name}")
        return Entry((), 0, spec, tuple(args))

    def _make_entry(self, match: list[FieldMatch], action: str, args, priority: int) -> Entry:
        if len(match) != len(self.keys):
            raise TableError("INVALID_ARGUMENT", f"{self.name} has {len(self.keys)} key fields, got {len(match)}")
        spec = self._action(action, args)
        if spec.scope == "default_only":
            raise TableError("INVALID_ARGUMENT", f"{action} is a default-only action of {self.name}")
        norm, priority = self._normalize(match, priority)
        return Entry(norm, priority, spec, tuple(args))

    def _normalize(self, match: list[FieldMatch], priority: int) -> tuple[tuple[FieldMatch, ...], int]:
        """An entry's match as stored (exact masks filled in, checked against the keys) and its priority."""
        if len(match) != len(self.keys):
            raise TableError("INVALID_ARGUMENT", f"{self.name} has {len(self.keys)} key fields, got {len(match)}")
        norm = []
        for m, k in zip(match, self.keys):
            kind, a, b = m
            top = (1 << k.width) - 1
            if kind == "mask":
                b = top if b == -1 else b
                if not (0 <= a <= top and 0 <= b <= top) or a & ~b:
                    raise TableError("INVALID_ARGUMENT", f"{self.name}: bad value/mask for {k.name}")
                if k.match_kind == "exact" and b != top:
                    raise TableError("INVALID_ARGUMENT", f"{self.name}: {k.name} is an exact key")
                inverse = ~b & top
                if k.match_kind == "lpm" and inverse & (inverse + 1):
                    raise TableError("INVALID_ARGUMENT", f"{self.name}: {k.name} mask is not a prefix")
                if k.match_kind == "optional" and b not in (0, top):
                    raise TableError("INVALID_ARGUMENT", f"{self.name}: {k.name} is optional: exact or wildcard")
            elif k.match_kind != "range" or not 0 <= a <= b <= top:
                raise TableError("INVALID_ARGUMENT", f"{self.name}: bad range for {k.name}")
            norm.append((kind, a, b))
        if self.needs_priority:
            if priority <= 0:
                raise TableError("INVALID_ARGUMENT", f"{self.name} needs a positive priority")
        elif priority:
            raise TableError("INVALID_ARGUMENT", f"{self.name} takes no priority")
        return tuple(norm), priority if self.needs_priority else 0

    def _rebuild(self) -> None:
        """Index every entry afresh (construction and clear()); single changes use _index/_unindex.

        Lookups and control-plane changes both run under the switch's lock, so in-place updates are safe."""
        self._exact: dict[tuple, Entry] = {}
        self._buckets: dict[int, dict[tuple, Entry]] = {}  # lpm: prefix mask -> exact bucket
        self._by_prefix: list[tuple[int, dict[tuple, Entry]]] = []
        self._ordered: list[Entry] = []
        for e in self._entries.values():
            self._index(e)

    def _index(self, e: Entry) -> None:
        key = tuple(a for _, a, _ in e.match)
        if self._mode == "exact":
            self._exact[key] = e
        elif self._mode == "lpm":
            mask = e.match[self._lpm_index][2]
            if mask not in self._buckets:
                self._buckets[mask] = {}
                self._by_prefix = sorted(self._buckets.items(), key=lambda kv: -bin(kv[0]).count("1"))
            self._buckets[mask][key] = e
        else:
            bisect.insort(self._ordered, e, key=lambda x: (-x.priority, x.handle))

    def _unindex(self, e: Entry) -> None:
        key = tuple(a for _, a, _ in e.match)
        if self._mode == "exact":
            del self._exact[key]
        elif self._mode == "lpm":
            mask = e.match[self._lpm_index][2]
            bucket = self._buckets[mask]
            del bucket[key]
            if not bucket:
                del self._buckets[mask]
                self._by_prefix = [(m, b) for m, b in self._by_prefix if m != mask]
        else:
            self._ordered.remove(e)
