"""The named stages of p4c's refusals that come after its type checker, in p4c's order.

p4test runs p4c's FrontEnd (frontends/p4/frontend.cpp), then the P4RuntimeSerializer, then
the midend, and stops at the first pass that reports an error.  Our checker walks the program
once, so a refusal of a later pass is put aside (``defer``) and raised at the end of
``Checker.check()``: the earliest stage first, then source order within it.  The midend stages
keep their numbers (0..2, see divisions.Divisions.defer); the frontend's late passes and the
serializer come before them.
"""

from __future__ import annotations

from typing import Any

from . import ast
from .env import CheckEnv
from .errors import P4Error

VALIDATE_MATCH_ANNOTATIONS = -7  # ValidateMatchAnnotations: a struct field's @match names no match_kind
DEFAULT_VALUES = -6.8  # DefaultValues: a `...` no context gives a type (a parameter's default value)
CHECK_CORE_METHODS = -6.5  # CheckCoreMethods: packet_in/packet_out methods' type arguments
TABLE_KEY_NAMES = -6  # TableKeyNames: a complex key needs @name
SIMPLIFY_PARSERS = -5  # SimplifyParsers: a parser that never reaches accept or reject
SIDE_EFFECTS = -4  # SideEffectOrdering: a table applied in an action argument
SIMPLIFY_DEF_USE = -3.5  # SimplifyDefUse: a function that does not return a value on all paths
CONTROL_PLANE_NAMES = -3  # DuplicateActionControlPlaneNameCheck, at the end of the FrontEnd
P4RUNTIME = -2  # P4RuntimeSerializer: P4Info duplicates, LPM masks of entries
CHECK_TABLE_ENTRIES = -0.5  # p4test's CheckTableEntries: an entry with the keys of an earlier one
ELIMINATE_TUPLES = -0.4  # the midend's EliminateTuples: a tuple's element is no struct field (string, int)
NESTED_STRUCTS = -0.3  # the midend's NestedStructs: an extern's out/inout argument of a nested struct
MIDEND_UNSUPPORTED = 0  # the midend's refusals (EliminateSwitch, BMv2's CheckUnsupported)
MIDEND_FOLDING = 1  # ConstantFolding and StrengthReduction after LocalCopyPropagation
MIDEND_COMPILE_TIME = 2  # CompileTimeOperations
FLATTEN_HEADER_UNION = 2.5  # p4test's FlattenHeaderUnion: a union stack index a parser does not know
TARGET = 3  # the built-in target's own refusals (limits.py), after every refusal p4c would give


def defer(env: CheckEnv, stage: int, err: P4Error, owner: Any = None) -> None:
    """Raise ``err`` at the end of the check unless an earlier stage refuses first; with an
    ``owner`` (action, function, table) only if something uses it (p4c removed it unused)."""
    env.midend.append((stage, err, owner))


def blocks_kept(env: CheckEnv) -> bool:
    """Whether p4c's midend sees the parsers and controls: with no ``main`` nothing instantiates
    them, and its frontend removes them all (RemoveAllUnusedDeclarations)."""
    return any(isinstance(d, ast.Instantiation) and d.name == "main" for d in env.program.decls)
