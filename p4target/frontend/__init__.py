"""The P4-16 frontend: preprocess, parse, check.  ``load_program`` is the entry point (a program for
the built-in target); ``load_frontend`` checks a program against core.p4 alone, as p4c's p4test."""

from __future__ import annotations

from pathlib import Path

from .checker import CheckedProgram, Declarations, FrontendProgram, check, check_declarations, check_frontend
from .errors import P4Error, as_p4_errors
from .preprocess import preprocess
from .syntax import parse

__all__ = ["CheckedProgram", "Declarations", "FrontendProgram", "P4Error", "as_p4_errors", "load_declarations",
           "load_frontend", "load_program"]


def load_program(path: str | Path, defines: dict[str, str] | None = None) -> CheckedProgram:
    """Preprocess, parse and check a P4 file; raises P4Error with the user's file:line:col."""
    with as_p4_errors():
        return check(parse(preprocess(path, defines)))


def load_frontend(path: str | Path, defines: dict[str, str] | None = None) -> FrontendProgram:
    """Preprocess, parse and check a P4 file with no architecture: no ``main`` needed, any extern
    accepted as declared (p4c's p4test; ``p4target-check --frontend``).  Raises P4Error."""
    with as_p4_errors():
        return check_frontend(parse(preprocess(path, defines)))


def load_declarations(path: str | Path, defines: dict[str, str] | None = None) -> Declarations:
    """Constants and types of a declarations-only P4 file (no ``main`` needed)."""
    return check_declarations(parse(preprocess(path, defines)))
