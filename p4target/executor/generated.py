"""What code generation hands the switch: the generated source and the objects it runs with.

Its own module so the code generators' helper modules can name it without importing ``codegen``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import struct
import types
from dataclasses import dataclass, field
from typing import Any

from . import ir
from .externs import Counter, Hooks, Meter, Register, ValueSet
from .tables import Table

STATE = ("tables", "registers", "counters", "meters", "value_sets", "profiles")  # a switch's own objects


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
    code: list[types.CodeType] = field(default_factory=list)  # the namespace's functions, as exec'd into it
    module: ir.Module | None = None  # what ``source`` is printed from (native/lower.py prints it as C)

    def copy(self) -> Generated:
        """The same program for another switch, without generating it again (a simulated fabric
        starts hundreds of switches of one program, and code generation was most of each start).

        The copy has its own namespace, with the compiled code exec'd into it, and its own
        runtime objects: deep copies of this one's tables (const entries included), registers,
        counters, meters, value sets, action profiles and scratch lists, whose action functions
        are the new namespace's, and new hooks (digests, random numbers, the meters' clock).  What
        nothing changes is shared: the layout (template, slots), helper functions, struct formats."""
        ns: dict[str, Any] = {}
        for code in self.code:
            exec(code, ns)  # noqa: S102 - compiler output; only defines functions
        memo: dict[int, Any] = {id(self.namespace["RT"]): Hooks()}
        for name, value in self.namespace.items():
            if isinstance(value, types.FunctionType) and value.__globals__ is self.namespace:
                memo[id(value)] = ns[name]  # tables' and profiles' actions: the new switch's functions
            elif isinstance(value, struct.Struct):  # immutable, and copy cannot copy it
                memo[id(value)] = value
        for name, value in self.namespace.items():
            if name not in ns:
                ns[name] = copy.deepcopy(value, memo)
        objects = {name: copy.deepcopy(getattr(self, name), memo) for name in STATE}
        return dataclasses.replace(self, namespace=ns, **objects)


@functools.lru_cache(maxsize=1024)
def compiled(source: str, filename: str) -> types.CodeType:
    """``compile`` of generated code, kept by its text: every switch of a program generates the same
    code, and one code object runs the same in each switch's own namespace."""
    return compile(source, filename, "exec")
