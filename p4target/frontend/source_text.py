"""Where a word is written after a node's location, read back from the source file: p4c
points some refusals at a name (an action's, an enum member's) that the AST keeps as text
only.  Falls back to the node's own location when the file cannot be read."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import Location


def find_after(loc: Location, pattern: str, nth: int = 0, group: int = 0) -> Location:
    """The location of the ``nth`` match (0: the first) of ``pattern`` at or after ``loc``."""
    try:
        text = Path(loc.file).read_text()
    except OSError:
        return loc
    lines = text.splitlines(keepends=True)
    if not 1 <= loc.line <= len(lines):
        return loc
    start = sum(len(line) for line in lines[:loc.line - 1]) + loc.col - 1
    for i, m in enumerate(re.compile(pattern).finditer(text, start)):
        if i == nth:
            pos = m.start(group)
            return Location(loc.file, text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos))
    return loc
