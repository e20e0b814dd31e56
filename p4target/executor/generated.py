"""What code generation hands the switch: the generated source and the objects it runs with.

Its own module so the code generators' helper modules can name it without importing ``codegen``.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field
from typing import Any

from .externs import Counter, Meter, Register, ValueSet
from .tables import Table


@dataclass
class Generated:
    """The result of code generation: source, its namespace, and the runtime objects."""

    source: str
    namespace: dict[str, Any]
    template: list[Any]
    std: dict[str, int]  # standard_metadata field -> slot
    tables: dict[str, Table] = field(default_factory=dict)
    registers: dict[str, Register] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    meters: dict[str, Meter] = field(default_factory=dict)
    value_sets: dict[str, ValueSet] = field(default_factory=dict)
    profiles: dict[str, Any] = field(default_factory=dict)  # action profiles and selectors (profiles.py)
    intrinsic: dict[str, int] = field(default_factory=dict)  # clone/resubmit/recirculate -> slot
    field_lists: dict[int, list[int]] = field(default_factory=dict)  # @field_list index -> slots
    meta_storage: Any = None  # the user metadata struct's Storage
    uses_payload: bool = False  # the generated code reads PAYLOAD / INGRESS_LENGTH
    length_slot: int | None = None  # BMv2's packet-length register (setValid/setInvalid deltas)


@functools.lru_cache(maxsize=1024)
def compiled(source: str, filename: str) -> types.CodeType:
    """``compile`` of generated code, kept by its text: every switch of a program generates the same
    code, and one code object runs the same in each switch's own namespace."""
    return compile(source, filename, "exec")

