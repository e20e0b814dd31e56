"""One error type for everything the frontend rejects, always with a source location.

Errors print as ``file:line:col: message`` followed by the offending line and a caret,
the way compilers do, so a user can jump straight to the spot.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any


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


@contextmanager
def as_p4_errors() -> Iterator[None]:
    """Turn a bug in the target met while loading a program into a P4Error at the construct
    being handled, so users see ``file:line:col: ... not supported`` and never a traceback."""
    try:
        yield
    except P4Error:
        raise
    except RecursionError:
        raise P4Error(UNKNOWN, "the program nests too deeply for the built-in target") from None
    except MemoryError:  # a size the limits module does not know yet: say what happened, not "X is not supported"
        node = _innermost_node(sys.exc_info()[2])
        raise P4Error(node.loc if node is not None else UNKNOWN,
                      "the program needs more memory than the built-in target has") from None
    except Exception as exc:  # noqa: BLE001 - every other failure is ours, not the user's
        node = _innermost_node(exc.__traceback__)
        loc = node.loc if node is not None else UNKNOWN
        what = type(node).__name__ if node is not None else "this program"
        raise P4Error(loc, f"{what} is not supported by the built-in target "
                           f"(internal: {type(exc).__name__}: {exc})") from exc


def _innermost_node(tb: TracebackType | None) -> Any:
    """The syntax-tree node the deepest frame of the failure was working on."""
    found = None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():  # arguments first: the node passed in
            if isinstance(getattr(value, "loc", None), Location) and value.loc is not UNKNOWN:
                found = value
                break
        tb = tb.tb_next
    return found
