"""PHV bits a TNA program needs: its parsed headers and the metadata it uses, per gress.

Per gress: every header instance its parser extracts (the whole header) or its control
writes, plus every metadata field (the user's struct, intrinsic metadata, control locals)
the gress uses.  A parsed header field no control reads or writes (only parsed and deparsed)
may go to tag-along containers; everything else needs normal ones.  Parsed headers the
control never sets valid count on their parser paths only: the widest path counts, as headers
never extracted together are never live together.  No container packing or other liveness
overlap is modelled: a guard, not bf-p4c's PHV allocation.  Sources: limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontend import ast
from ..frontend.types import BOOL, BitsT, EnumT, HeaderT, StackT, VarbitT, bit_width
from .units import PSEUDO, TEMP, UnitWalker, path_of

MAX_PARSER_PATHS = 4096  # beyond this, every parsed header is counted as live at once


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


def _extracted(parser: ast.ParserDecl, env: dict[int, str]) -> tuple[dict[str, set[str]], set[str]]:
    """Header paths each parser state extracts, and the other paths the states mention."""
    by_state: dict[str, set[str]] = {}
    mentioned: set[str] = set()
    extracted: set[str] = set()

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
        if isinstance(node, ast.Call) and node.target is not None and node.target.kind == "header_method" \
                and node.target.name == "setValid":  # made valid on this path, as if extracted
            path = path_of(node.target.instance, env)
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
        extracted = by_state[state.name] = set()
        visit(state.stmts)
        visit(state.transition)
    return by_state, mentioned


class _TooManyPaths(Exception):
    pass


def _parser_paths(parser: ast.ParserDecl, by_state: dict[str, set[str]]) -> list[set[str]]:
    """The headers extracted together along each path from start to accept or reject (a loop
    taken once: its headers are on the path already); one path of all of them when too many."""
    states = {st.name: st for st in parser.states}
    paths: list[set[str]] = []

    def walk(name: str, seen: frozenset[str], on_path: set[str]) -> None:
        if name not in states or name in seen:
            paths.append(on_path)
            if len(paths) > MAX_PARSER_PATHS:
                raise _TooManyPaths
            return
        on_path = on_path | by_state[name]
        t = states[name].transition
        for nxt in dict.fromkeys([t.state] if t.state is not None else [c.state for c in t.cases or []]):
            walk(nxt, seen | {name}, on_path)

    try:
        walk("start", frozenset(), set())
    except _TooManyPaths:
        return [set().union(*by_state.values())]
    return paths or [set()]


def _on(path: str, headers: set[str]) -> bool:
    """Whether a header instance is one of these (a stack's element when the stack is)."""
    return path in headers or any(path.startswith(f"{x}[") for x in headers)


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
    by_state, in_parser = _extracted(parser, parser_names)
    extracted = set().union(*by_state.values())
    validated = walker.validated
    used = _Used(in_control)
    used_anywhere = _Used(in_control | in_parser)
    normal = tagalong = 0
    per_header: dict[str, tuple[int, int]] = {}  # parsed headers the control never validates
    for h in headers:
        parsed = _on(h.path, extracted)
        if not parsed and h.path not in used:
            continue
        bits_normal = sum(bits for f, bits in h.fields.items() if f in used or not parsed)
        bits_tagalong = sum(h.fields.values()) - bits_normal
        if parsed and not _on(h.path, validated) and not any(h.path.startswith(f"{v}.") for v in validated):
            per_header[h.path] = (bits_normal, bits_tagalong)
        else:
            normal += bits_normal
            tagalong += bits_tagalong
    # Headers no parser path extracts together are never live together: the widest path counts.
    paths = [[b for path, b in per_header.items() if _on(path, on)] for on in _parser_paths(parser, by_state)]
    normal += max(sum(b[0] for b in p) for p in paths)
    tagalong += max(sum(b[1] for b in p) for p in paths)
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
