"""p4c's DuplicateActionControlPlaneNameCheck (the end of its FrontEnd): two actions may not
share a control-plane name.  An action's name is its ``@name`` (absolute when it starts with
``.``, else under its control's name), or its own name; every action declared is checked, used
or not, and the later of two is refused, naming the earlier one's name as written."""

from __future__ import annotations

import re
from pathlib import Path

from . import ast, stages
from .env import CheckEnv
from .errors import Location, P4Error


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
    try:
        lines = Path(action.loc.file).read_text().splitlines()
    except OSError:
        return action.loc
    pattern = re.compile(rf"\baction\s+({re.escape(action.name)})\b")
    for number in range(action.loc.line, min(action.loc.line + 20, len(lines) + 1)):
        start = action.loc.col - 1 if number == action.loc.line else 0
        if m := pattern.search(lines[number - 1], start):
            return Location(action.loc.file, number, m.start(1) + 1)
    return action.loc
