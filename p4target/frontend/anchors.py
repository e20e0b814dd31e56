"""Where a failed type unification is reported: at the node that asked for it, as p4c does.

p4c's TypeInference equates an expression's type with the type its context wants and, when
that fails, reports the error at the *outer* node whose check asked for the unification (an
assignment ``'x = e'``, a call ``'f(b)'``, ``'return x'``, a declaration ``'x'``), the inner
expression only under "---- Actual error".  Our checks raise at the inner expression; inside
``at_outer`` such an error moves to the outer node's line.  On the same line it keeps its own
column and words (what the tests of each rule assert), so only the line p4c names changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .errors import Location, P4Error
from .source_text import find_after


@contextmanager
def at_outer(where: Location | Callable[[], Location] | None,
             shown: Callable[[], str] | None = None) -> Iterator[None]:
    """Errors raised inside move to ``where`` (the outer node; a function computing it, called only
    on an error: it reads the source), named ``'shown()'`` when given, if they were on another line."""
    try:
        yield
    except P4Error as err:
        loc = where() if callable(where) else where
        if loc is None or (err.loc.file, err.loc.line) == (loc.file, loc.line) or loc.line <= 0:
            raise
        prefix = f"'{shown()}': " if shown else ""
        raise P4Error(loc, prefix + err.message) from None


def assignment_loc(stmt_loc: Location) -> Location:
    """The ``=`` of an assignment statement (p4c's AssignmentStatement is there)."""
    return find_after(stmt_loc, r"(?<![=!<>])=(?!=)")


def name_loc(decl_loc: Location, name: str) -> Location:
    """A declaration's name followed by its initializer's ``=`` (p4c reports a declaration there)."""
    return find_after(decl_loc, rf"\b({re.escape(name)})\s*=", group=1)


def instance_loc(decl_loc: Location, name: str) -> Location:
    """An instance's name after its constructor call (``E(...) e;``: p4c reports its arguments there)."""
    return find_after(decl_loc, rf"[)>]\s*({re.escape(name)})\s*[;=]", group=1)
