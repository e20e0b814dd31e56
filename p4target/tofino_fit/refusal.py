"""The one shape of a fit refusal: ``file:line:col: tofino: <resource>: <count> > <limit>``."""

from __future__ import annotations

from ..frontend.errors import Location, P4Error


def over(loc: Location, resource: str, count: int, limit: int, detail: str = "") -> P4Error:
    """A P4Error saying which resource went over, by how much, at the construct that did it."""
    return P4Error(loc, f"tofino: {resource}: {count} > {limit}" + (f" ({detail})" if detail else ""))


def refuse(loc: Location, message: str) -> P4Error:
    """A refusal that is not a count (a rule of shape)."""
    return P4Error(loc, f"tofino: {message}")
