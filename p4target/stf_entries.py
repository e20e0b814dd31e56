"""STF table entries: STF's table, key and action names and values -> our tables' entries.

Shared by the STF runner (``stf``) and its BMv2 target (``stf_bmv2``), below both, so
the runner can pick a target without the targets importing the runner back.
"""

from __future__ import annotations

import re

from .executor.tables import DONT_CARE, KeySpec, Table, exact, lpm, ternary


class StfError(Exception):
    """A malformed STF file or a command the target rejected, with its line."""


def _unique(name: str, candidates: list[str], what: str) -> str:
    if name in candidates:
        return name
    found = [c for c in candidates if c.endswith(name)]
    if len(found) != 1:
        raise StfError(f"{what} '{name}': {'ambiguous' if found else 'not found'} among {candidates}")
    return found[0]


def parse_key_value(text: str, key: KeySpec):
    """STF key syntax -> a table match: hex with '*' nibbles, value/prefix, decimal."""
    if key.match_kind == "lpm" and "/" in text:
        value, plen = text.split("/")
        return lpm(int(value, 0), int(plen), key.width)
    if "*" in text:
        digits, base = (text[2:], 16) if text.lower().startswith("0x") else (text[2:], 2)
        value = int("".join("0" if c == "*" else c for c in digits), base)
        mask = int("".join("0" if c == "*" else ("f" if base == 16 else "1") for c in digits), base)
        if key.match_kind == "lpm":
            return lpm(value, bin(mask).count("1"), key.width)
        return ternary(value, mask & ((1 << key.width) - 1))
    value = int(text, 0)
    if key.match_kind == "lpm":
        return lpm(value, key.width, key.width)
    if key.match_kind in ("ternary", "optional"):
        return ternary(value, (1 << key.width) - 1)
    return exact(value)


def _key_field(name: str, names: list[str]) -> str:
    """An STF key name as p4c's bmv2stf.py resolves it: ``s$0`` is ``s[0]``, and ``h.valid``
    or a bare header ``h`` may name the key ``h.isValid()`` (``h.$valid$``)."""
    name = re.sub(r"\$(\d+)", r"[\1]", name)
    tries = [name, f"{name}.$valid$"]
    if name.endswith(".valid"):
        tries.append(name[: -len("valid")] + "$valid$")
    for candidate in tries:
        if candidate in names:
            return candidate
        found = [n for n in names if n.endswith("." + candidate)]
        if len(found) == 1:
            return found[0]
    raise StfError(f"key field '{name}': not found (or ambiguous) among {names}")


def resolve_entry(tables: dict[str, Table], table: str, keys: list[tuple[str, str]], action: str,
                  args: list[tuple[str, str]]) -> tuple[Table, list, str, list[int]]:
    """STF names and values -> (table, one match per key, full action name, action data)."""
    t = tables[_unique(table, list(tables), "table")]
    match = [DONT_CARE if k.match_kind != "exact" else exact(0) for k in t.keys]
    names = [k.name for k in t.keys]
    for kname, value in keys:
        i = names.index(_key_field(kname, names))
        match[i] = parse_key_value(value, t.keys[i])
    full = _unique(action, list(t.actions), "action")
    given = dict(args)
    params = t.actions[full].params
    missing = [p for p, _ in params if p not in given]
    if missing:
        raise StfError(f"action {full}: missing arguments {missing}")
    return t, match, full, [int(given[p], 0) for p, _ in params]
