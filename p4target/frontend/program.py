"""What the checker hands the back ends: the checked program and its pipeline's blocks.

Kept below ``checker`` so the TNA pass builds one without importing the checker back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ast
from .types import HeaderT


@dataclass(slots=True)
class Pipeline:
    """The six blocks of the ``V1Switch`` package, and the user's header/metadata types."""

    main: ast.Instantiation
    blocks: dict[str, Any]  # PIPELINE_BLOCKS name -> ParserDecl/ControlDecl
    headers: HeaderT
    metadata: HeaderT
    egress_headers: HeaderT | None = None  # TNA: egress has its own types
    egress_metadata: HeaderT | None = None


@dataclass(slots=True)
class CheckedProgram:
    """A program that passed the checker, with its architecture's pipeline resolved."""

    program: ast.Program
    errors: list[str]  # error members in code order (error.NoError == 0)
    standard_metadata: HeaderT
    pipeline: Pipeline
    top_level: list[ast.Decl] = field(default_factory=list)
    arch: str = "v1model"  # or "tna" (frontend/tna.py)


@dataclass(slots=True)
class FrontendProgram:
    """A program that passed the frontend-only check (``load_frontend``): no architecture, so no
    pipeline and no executor; ``main`` is the package instantiation, if the program has one."""

    program: ast.Program
    errors: list[str]  # error members in code order (error.NoError == 0)
    top_level: list[ast.Decl] = field(default_factory=list)
    main: ast.Instantiation | None = None
