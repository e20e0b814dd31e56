"""PHV bits a TNA program needs: its parsed headers and the metadata it uses, per gress.

Per gress: every header instance its parser extracts (the whole header) or its control
writes, plus every metadata field (the user's struct, intrinsic metadata, control locals)
the gress uses.  A parsed header field no control reads or writes (only parsed and deparsed)
may go to tag-along containers; everything else needs normal ones.  No container packing
or liveness overlap is modelled: a guard, not bf-p4c's PHV allocation.  Sources: limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontend import ast
from ..frontend.types import BOOL, BitsT, EnumT, HeaderT, StackT, VarbitT, bit_width
from .units import PSEUDO, TEMP, UnitWalker, path_of


@dataclass
class PhvUse:
    normal: int
    tagalong: int


@dataclass
class _Header:
    path: str
    fields: dict[str, int]  # field path -> bits


def _tree(path: str, t, headers: list[_Header], meta: dict[str, int]) -> None:
    """Header instances and metadata leaves under ``path`` of type ``t``."""
    if isinstance(t, StackT):
        for i in range(t.size):
            _tree(f"{path}[{i}]", t.elem, headers, meta)
    elif isinstance(t, HeaderT) and t.is_header:
        headers.append(_Header(path, {f"{path}.{f}": _field_bits(ft) for f, ft in t.fields.items()}))
    elif isinstance(t, HeaderT):
        for f, ft in t.fields.items():
            _tree(f"{path}.{f}", ft, headers, meta)
    elif isinstance(t, (BitsT, EnumT)) or t is BOOL:
        meta[path] = 1 if t is BOOL else bit_width(t)


def _field_bits(t) -> int:
    """A header field's bits; a varbit's at its longest, all of which one packet may carry."""
    return t.max_width if isinstance(t, VarbitT) else bit_width(t)


class _Used:
    """Field paths a gress uses: a field counts when it, a part of it or a whole around it is used."""

    def __init__(self, paths: set[str]) -> None:
        self.whole = {p for p in paths if not p.startswith((TEMP, PSEUDO))}
        self.parts = set()
        for p in self.whole:
            for i, ch in enumerate(p):
                if ch in ".[":
                    self.parts.add(p[:i])
            self.parts.add(p.removesuffix(".$valid"))

    def __contains__(self, path: str) -> bool:
        if path in self.whole or path in self.parts:
            return True
        return any(path[:i] in self.whole for i, ch in enumerate(path) if ch in ".[")


def _canonical(block, control: ast.ControlDecl) -> dict[int, str]:
    """A parser's or deparser's parameters named as the gress's control names them (by type)."""
    names: dict[int, str] = {}
    for p in block.params:
        same = next((c for c in control.params if c.type is not None and c.type == p.type), None)
        names[id(p)] = same.name if same is not None else p.name
    return names


def _extracted(parser: ast.ParserDecl, env: dict[int, str]) -> tuple[set[str], set[str]]:
    """Header paths the parser extracts, and the other paths its states mention."""
    extracted: set[str] = set()
    mentioned: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, ast.Call) and node.target is not None and node.target.kind == "method" \
                and getattr(node.target.decl, "name", "") == "packet_in":
            if node.target.name == "extract" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Member) and arg.member in ("next", "last"):
                    arg = arg.base
                path = path_of(arg, env)
                if path is not None:
                    extracted.add(path)
            return
        if isinstance(node, (ast.Member, ast.PathExpr)):
            path = path_of(node, env)
            if path is not None:
                mentioned.add(path)
                return
        for c in ast.children(node):
            visit(c)

    for state in parser.states:
        visit(state.stmts)
        visit(state.transition)
    return extracted, mentioned


def gress_phv(parser: ast.ParserDecl, control: ast.ControlDecl, deparser: ast.ControlDecl,
              walker: UnitWalker) -> PhvUse:
    """Normal and tag-along bits one gress needs; ``walker`` has walked ``control``."""
    headers: list[_Header] = []
    meta: dict[str, int] = {}
    for p in control.params:
        _tree(p.name, p.type, headers, meta)
    parser_names = _canonical(parser, control)
    for p in parser.params:  # what only the parser sees (egress_intrinsic_metadata_t when egress omits it)
        if parser_names[id(p)] not in {c.name for c in control.params}:
            _tree(parser_names[id(p)], p.type, headers, meta)
    in_control = {x for u in walker.units for x in u.reads | u.writes}
    side = UnitWalker(walker.gress)
    side.control(deparser)
    dep_env = _canonical(deparser, control)
    in_control |= {_rename(x, deparser, dep_env) for u in side.units for x in u.reads | u.writes}
    extracted, in_parser = _extracted(parser, parser_names)
    used = _Used(in_control)
    used_anywhere = _Used(in_control | in_parser)
    normal = tagalong = 0
    for h in headers:
        parsed = h.path in extracted or any(h.path.startswith(f"{x}[") for x in extracted)
        if not parsed and h.path not in used:
            continue
        for f, bits in h.fields.items():
            if f in used or not parsed:
                normal += bits
            else:
                tagalong += bits
    normal += sum(bits for path, bits in meta.items() if path in used_anywhere)
    normal += sum(walker.locals.values())
    return PhvUse(normal, tagalong)


def _rename(path: str, block: ast.ControlDecl, env: dict[int, str]) -> str:
    """A deparser's path, its root parameter renamed to the control's name for it."""
    root, sep, rest = path.partition(".")
    for p in block.params:
        if p.name == root:
            return env[id(p)] + sep + rest
    return path
