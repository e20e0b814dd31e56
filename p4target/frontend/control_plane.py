"""Control-plane names and the refusals p4c makes on them.

``qualify`` is p4c's controlPlaneName (P4Info and the executor name objects with it).
p4c's DuplicateActionControlPlaneNameCheck (the end of its FrontEnd): two actions may not
share a control-plane name.  An action's name is its ``@name`` (absolute when it starts with
``.``, else under its control's name), or its own name; every action declared is checked, used
or not, and the later of two is refused, naming the earlier one's name as written.
p4c's P4RuntimeSerializer then refuses two tables of the pipeline with one P4Info name."""

from __future__ import annotations

import re

from . import ast, stages
from .env import CheckEnv
from .errors import Location, P4Error
from .source_text import find_after
from .types import BlockT


def qualify(prefix: str, decl: ast.Decl) -> str:
    """p4c's controlPlaneName: ``@name("x")`` is relative to the prefix, ``@name(".x")`` absolute."""
    ann = ast.find_annotation(getattr(decl, "annotations", []), "name")
    local = ann.args[0].text if ann and ann.args and isinstance(ann.args[0], ast.StringLit) else decl.name
    if local.startswith("."):
        return local[1:]
    return f"{prefix}.{local}" if prefix else local


def check_table_names(env: CheckEnv, blocks: list) -> None:
    """Defer p4c's P4Info refusal of a second table with a name (p4c gives no line: the table's)."""
    seen: set[str] = set()

    def walk(block: ast.ParserDecl | ast.ControlDecl, prefix: str) -> None:
        for d in block.locals:
            if isinstance(d, ast.Instantiation) and isinstance(d.type, BlockT):
                walk(d.type.decl, qualify(prefix, d))
            elif isinstance(d, ast.TableDecl) and ast.find_annotation(d.annotations, "hidden") is None:
                name = qualify(prefix, d)
                if name in seen:
                    message = f"Name '{name}' is used for multiple table objects in the P4Info message"
                    stages.defer(env, stages.P4RUNTIME, P4Error(d.loc, message))
                seen.add(name)

    for block in blocks:
        walk(block, qualify("", block))


def check_action_names(env: CheckEnv) -> None:
    """Defer p4c's refusal of the first action whose control-plane name an earlier one has."""
    seen: dict[str, str] = {}
    for action, control in _actions(env.program):
        written = _written_name(action)
        absolute = written if written.startswith(".") else "." + ".".join([*control, written])
        if absolute in seen:
            message = f"{written}: conflicting control plane name: {seen[absolute]}"
            stages.defer(env, stages.CONTROL_PLANE_NAMES, P4Error(_name_loc(action), message))
            return
        seen[absolute] = written


def _actions(program: ast.Program):
    """Every action with the names of the controls it sits in, in source order."""
    for decl in program.decls:
        if isinstance(decl, ast.ActionDecl):
            yield decl, []
        elif isinstance(decl, ast.ControlDecl):
            for local in decl.locals:
                if isinstance(local, ast.ActionDecl):
                    yield local, [decl.name]


def _written_name(action: ast.ActionDecl) -> str:
    note = ast.find_annotation(action.annotations, "name")
    if note is not None and note.args and isinstance(note.args[0], ast.StringLit):
        return note.args[0].text
    return action.name


def _name_loc(action: ast.ActionDecl) -> Location:
    """Where the action's name is written (p4c points there; ``loc`` may be its annotation's)."""
    return find_after(action.loc, rf"\baction\s+({re.escape(action.name)})\b", group=1)
