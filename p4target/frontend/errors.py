"""One error type for everything the frontend rejects, always with a source location.

Errors print as ``file:line:col: message`` followed by the offending line and a caret,
the way compilers do, so a user can jump straight to the spot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN = Location("<unknown>", 0, 0)


class P4Error(Exception):
    """A problem in a P4 program, at a location in the user's own file."""

    def __init__(self, loc: Location, message: str) -> None:
        super().__init__(f"{loc}: {message}")
        self.loc = loc
        self.message = message

    def render(self) -> str:
        """The message plus the source line and a caret under the column."""
        text = str(self)
        try:
            line = Path(self.loc.file).read_text(errors="replace").splitlines()[self.loc.line - 1]
        except (OSError, IndexError):
            return text
        caret = " " * (max(self.loc.col, 1) - 1) + "^"
        return f"{text}\n    {line}\n    {caret}"


def fail(loc: Location, message: str) -> P4Error:
    """Build the error; callers ``raise fail(...)`` so the raise site stays visible."""
    return P4Error(loc, message)
