"""P4Info for a checked v1model program, named and numbered exactly as p4c (p4c-bm2-ss) does.

A P4Runtime controller written against p4c's P4Info uses its ids verbatim, so this module
reproduces p4c's control-plane names (``control-plane/p4RuntimeSymbolTable.cpp`` and the
frontend's ``Inline``/``LocalizeAllActions``/``HierarchicalNames`` passes) and its id
allocation (Jenkins one-at-a-time hash, linear probing in sorted-name order, ``@id`` first).

``qualified_objects`` is the naming walk alone, so the executor can name the objects it
runs the same way; ``build_p4info`` turns that walk into the ``P4Info`` message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from p4.config.v1 import p4info_pb2, p4types_pb2

from .frontend import ast
from .frontend.checker import CheckedProgram
from .frontend.control_plane import qualify
from .frontend.errors import P4Error, as_p4_errors
from .frontend.keynames import key_name, literal_text
from .frontend.profiles import implementation_of, is_constructed_in_place
from .frontend.types import BOOL, ERROR, BitsT, BlockT, EnumT, ExternT, HeaderT, TupleT, bit_width

# P4Runtime resource-type prefixes: the top byte of every id (p4info.proto, P4Ids.Prefix).
ACTION, TABLE, VALUE_SET, CONTROLLER_HEADER = 0x01, 0x02, 0x03, 0x04
ACTION_PROFILE, COUNTER, DIRECT_COUNTER, METER, DIRECT_METER, REGISTER, DIGEST = range(0x11, 0x18)
PREFIXES = {"action": ACTION, "table": TABLE, "action_profile": ACTION_PROFILE, "counter": COUNTER,
            "direct_counter": DIRECT_COUNTER,
            "register": REGISTER, "meter": METER, "direct_meter": DIRECT_METER, "value_set": VALUE_SET,
            "digest": DIGEST}
# TNA's externs (tofino.p4) and the P4Info resource each one is.
_TNA_KINDS = {"Register": "register", "Counter": "counter", "DirectCounter": "direct_counter"}
# v1model's action profile and action selector are both P4Info action profiles.
_PROFILE_KINDS = {"action_profile": "action_profile", "action_selector": "action_profile"}
# Annotations p4c reads into the ActionProfile message rather than copying into its preamble.
_PROFILE_ANNOTATIONS = {"max_group_size", "selector_size_semantics", "max_member_weight"}
_METER_UNITS = {"packets": p4info_pb2.MeterSpec.PACKETS, "bytes": p4info_pb2.MeterSpec.BYTES}
DEFAULT_TABLE_SIZE = 1024  # v1model's defaultTableSize in p4c
_MATCH_TYPES = {"exact": p4info_pb2.MatchField.EXACT, "lpm": p4info_pb2.MatchField.LPM,
                "ternary": p4info_pb2.MatchField.TERNARY, "range": p4info_pb2.MatchField.RANGE,
                "optional": p4info_pb2.MatchField.OPTIONAL}
_UNITS = {"packets": p4info_pb2.CounterSpec.PACKETS, "bytes": p4info_pb2.CounterSpec.BYTES,
          "packets_and_bytes": p4info_pb2.CounterSpec.BOTH}
_NOT_SERIALIZED = {"name", "id", "hidden", "brief", "description"}  # p4c keeps these out of `annotations`
_MASK32 = 0xFFFFFFFF


def jenkins_hash(name: str) -> int:
    """Jenkins one-at-a-time over the name's bytes, as p4c's jenkinsOneAtATimeHash (uint32)."""
    h = 0
    for byte in name.encode():
        h = (h + byte) & _MASK32
        h = (h + (h << 10)) & _MASK32
        h ^= h >> 6
    h = (h + (h << 3)) & _MASK32
    h ^= h >> 11
    return (h + (h << 15)) & _MASK32


class IdAllocator:
    """p4c's id assignment: ``@id`` values are reserved first, the rest hashed per resource type
    in sorted-name order (so ids are deterministic) and linearly probed on the hash on collision."""

    def __init__(self, hash_fn: Callable[[str], int] = jenkins_hash) -> None:
        self.hash_fn = hash_fn
        self.used: set[int] = set()

    def reserve(self, prefix: int, value: int, where: ast.Node) -> int:
        """An ``@id(value)``: gets the type prefix unless it already carries it."""
        top = value & 0xFF000000
        if value > _MASK32 or value < 0 or (top and top != prefix << 24):
            raise P4Error(where.loc, f"@id {value:#x} has the wrong 8-bit prefix (expected {prefix:#04x})")
        value |= prefix << 24
        if value in self.used:
            raise P4Error(where.loc, f"@id {value:#x} is assigned to multiple declarations")
        self.used.add(value)
        return value

    def assign(self, prefix: int, names: Iterable[str]) -> dict[str, int]:
        ids: dict[str, int] = {}
        for name in sorted(set(names)):
            h = self.hash_fn(name)
            for step in range(1 << 24):  # only the low 24 bits of h + step matter
                candidate = (prefix << 24) | ((h + step) & 0xFFFFFF)
                if candidate not in self.used:
                    break
            else:
                raise ValueError(f"no P4Runtime id left for {name}")
            self.used.add(candidate)
            ids[name] = candidate
        return ids


@dataclass(frozen=True, slots=True)
class QualifiedObject:
    """A control-plane object: ``name`` is its fully qualified name (``MyIngress.s.t``), ``scope``
    the name of the block instance that declares it ("" for top-level declarations).  One
    declaration appears once per instance of its control, so (decl, scope) identifies an object."""

    name: str
    kind: str  # action | table | action_profile | counter | direct_counter | register
    decl: ast.Decl
    scope: str


def annotation(decl: ast.Node, name: str) -> ast.Annotation | None:
    return ast.find_annotation(getattr(decl, "annotations", []), name)


def qualified_objects(prog: CheckedProgram) -> list[QualifiedObject]:
    """Every control-plane object p4c's P4Info lists, in p4c's order where that is known.

    Pipeline blocks are named by their type (V1Switch instantiates them anonymously); a
    control instantiated inside another is inlined under its instance name.  Top-level actions
    used by a control (tables or direct calls) are localized into it under their global name.
    ``@hidden`` objects are left out.
    """
    out: list[QualifiedObject] = []
    top_actions = {id(d) for d in prog.top_level if isinstance(d, ast.ActionDecl)}
    seen_top: set[int] = set()

    def walk(block: ast.ParserDecl | ast.ControlDecl, prefix: str) -> None:
        for d in block.locals:
            if annotation(d, "hidden"):
                continue
            if isinstance(d, ast.Instantiation) and isinstance(d.type, BlockT):
                walk(d.type.decl, qualify(prefix, d))
            elif isinstance(d, ast.Instantiation) and isinstance(d.type, ExternT) and extern_kind(d) in PREFIXES:
                out.append(QualifiedObject(qualify(prefix, d), extern_kind(d), d, prefix))
            elif isinstance(d, ast.ValueSetDecl):
                out.append(QualifiedObject(qualify(prefix, d), "value_set", d, prefix))
            elif isinstance(block, ast.ControlDecl) and isinstance(d, ast.ActionDecl | ast.TableDecl):
                kind = "action" if isinstance(d, ast.ActionDecl) else "table"
                out.append(QualifiedObject(qualify(prefix, d), kind, d, prefix))
                if kind == "table" and is_constructed_in_place(d):  # p4c adds it with its table
                    inst = implementation_of(d)
                    name = qualify("", inst) if annotation(inst, "name") else ""  # "": refused by build_p4info
                    out.append(QualifiedObject(name, "action_profile", inst, prefix))

    for block in prog.pipeline.blocks.values():
        if isinstance(block, ast.ControlDecl):
            for action in _used_actions(block):
                if id(action) in top_actions and id(action) not in seen_top and not annotation(action, "hidden"):
                    seen_top.add(id(action))
                    out.append(QualifiedObject(qualify("", action), "action", action, ""))
        walk(block, qualify("", block))
    for d in prog.top_level:
        if isinstance(d, ast.Instantiation) and isinstance(d.type, ExternT) and d.type.decl.name in PREFIXES:
            if not annotation(d, "hidden"):
                out.append(QualifiedObject(qualify("", d), d.type.decl.name, d, ""))
        elif isinstance(d, ast.Instantiation) and isinstance(d.type, ExternT) and d.type.decl.name in _PROFILE_KINDS:
            if not annotation(d, "hidden"):
                out.append(QualifiedObject(qualify("", d), "action_profile", d, ""))
    out += [QualifiedObject(qualify("", t.decl), "digest", t.decl, "") for t in digest_types(prog)]
    return out


def extern_kind(d: ast.Instantiation) -> str:
    """The P4Info resource kind of an extern instance (v1model's names, TNA's mapped)."""
    name = d.type.decl.name
    return _TNA_KINDS.get(name, _PROFILE_KINDS.get(name, name))


def digest_types(prog: CheckedProgram) -> list[HeaderT]:
    """The struct types passed to ``digest()``, in the order p4c meets the calls (pipeline
    controls in order, the actions they use before their bodies); one per type."""
    found: dict[int, HeaderT] = {}
    top_actions = [d for d in prog.top_level if isinstance(d, ast.ActionDecl)]
    for block in prog.pipeline.blocks.values():
        if not isinstance(block, ast.ControlDecl):
            continue
        used = {id(a) for a in _used_actions(block)}
        for node in [*_nodes([a for a in top_actions if id(a) in used]), *_nodes(block)]:
            if (isinstance(node, ast.Call) and node.target is not None and node.target.kind == "function"
                    and node.target.name == "digest" and isinstance(node.args[1].type, HeaderT)):
                found.setdefault(id(node.args[1].type), node.args[1].type)
    return list(found.values())


def _used_actions(control: ast.ControlDecl) -> Iterator[ast.ActionDecl]:
    """Actions a control (and the controls it instantiates) names in tables or calls directly;
    calls inside actions do not count: p4c inlines those before localizing actions."""
    for d in control.locals:
        if isinstance(d, ast.TableDecl):
            refs = [*d.actions, d.default_action, *(e.action for e in d.entries or [])]
            yield from (r.decl for r in refs if r is not None)
        elif isinstance(d, ast.Instantiation) and isinstance(d.type, BlockT):
            yield from _used_actions(d.type.decl)
    for node in _nodes(control.body):
        if isinstance(node, ast.Call) and node.target is not None and node.target.kind == "action":
            yield node.target.decl


def _nodes(node: object) -> Iterator[ast.Node]:
    if isinstance(node, list):
        for item in node:
            yield from _nodes(item)
    elif isinstance(node, ast.Node):
        yield node
        for f in dataclasses.fields(node):
            if f.name not in ("loc", "type", "value", "decl", "target"):
                yield from _nodes(getattr(node, f.name))


def aliases(names: Iterable[str]) -> dict[str, str]:
    """p4c's P4SymbolSuffixSet: the shortest dot-suffix shared by no other symbol."""
    split = {n: n.split(".") for n in set(names)}
    result = {}
    for name, comps in split.items():
        for k in range(1, len(comps) + 1):
            if sum(other[-k:] == comps[-k:] for other in split.values()) < 2:
                break
        result[name] = ".".join(comps[-k:])
    return result


@as_p4_errors()
def build_p4info(prog: CheckedProgram, arch: str = "v1model") -> p4info_pb2.P4Info:
    """The P4Info p4c-bm2-ss would write for this program (same names, ids and fields)."""
    every = qualified_objects(prog)
    objects, ids, alloc = _object_ids(every)
    alias = aliases(o.name for o in objects)
    names = {(id(o.decl), o.scope): o.name for o in every}

    def ref(decl: ast.Decl, scope: str, kind: str) -> int | None:
        """The id of what a table in ``scope`` names: declared in the same instance, or global."""
        name = names.get((id(decl), scope), names.get((id(decl), "")))
        return ids.get((kind, name)) if name else None

    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "tna" if prog.arch == "tna" else arch
    profile_tables = _profile_tables(every)
    digested = {qualify("", t.decl): t for t in digest_types(prog)}
    for o in objects:
        preamble = (ids[(o.kind, o.name)], o.name, alias[o.name])
        if o.kind == "action_profile":
            table_ids = [ids[("table", t)] for t in sorted(profile_tables.get(o.name, ()))]
            _add_action_profile(info.action_profiles.add(), o, preamble, table_ids)
        elif o.kind == "digest":
            _add_digest(info, preamble, digested[o.name])
        elif o.kind != "direct_meter":  # a direct meter is written with the table that uses it (_add_direct)
            _add_object(info, o, preamble, ref)
    _add_controller_headers(info, prog, alloc)
    if info.type_info.HasField("error"):
        info.type_info.error.members.extend(prog.errors)
    _add_direct(info, {ids[(o.kind, o.name)]: o for o in objects if o.kind == "direct_meter"}, alias)
    return info


def _object_ids(every: list[QualifiedObject]) -> tuple[list[QualifiedObject], dict[tuple[str, str], int], IdAllocator]:
    """The objects P4Info lists (the first of duplicate names, as p4c's symbol table keeps), their ids
    (``@id`` first, then by hash), and the allocator (controller headers take theirs after)."""
    first: dict[tuple[str, str], QualifiedObject] = {}
    for o in every:
        first.setdefault((o.kind, o.name), o)
    objects = list(first.values())
    alloc = IdAllocator()
    ids: dict[tuple[str, str], int] = {}
    for o in objects:
        if o.kind != "digest" and (ann := annotation(o.decl, "id")) is not None:  # p4c: digests by name only
            ids[(o.kind, o.name)] = alloc.reserve(PREFIXES[o.kind], _id_value(ann, o.decl), o.decl)
    for kind, prefix in PREFIXES.items():
        todo = [o.name for o in objects if o.kind == kind and (kind, o.name) not in ids]
        ids.update(((kind, n), i) for n, i in alloc.assign(prefix, todo).items())
    return objects, ids, alloc


def _set_preamble(msg: Any, preamble: tuple[int, str, str], annotations: list[ast.Annotation] | None = None) -> None:
    msg.preamble.id, msg.preamble.name, msg.preamble.alias = preamble
    if annotations is not None:
        msg.preamble.annotations.extend(_annotations(annotations))


def _add_object(info: p4info_pb2.P4Info, o: QualifiedObject, preamble: tuple[int, str, str], ref: Callable) -> None:
    """A table, an action, a value set, or a counter, direct counter or register."""
    if o.kind == "table":
        msg = info.tables.add()
        _table(msg, o, ref, info.type_info)
    elif o.kind == "action":
        msg = info.actions.add()
        _params(msg, o.decl, info.type_info)
    elif o.kind == "value_set":
        msg = info.value_sets.add()
        _value_set(msg, o.decl)
    else:
        msg = getattr(info, o.kind + "s").add()  # counters, direct_counters, registers
        _extern(msg, o, info.type_info)
    _set_preamble(msg, preamble, o.decl.annotations)


def _add_action_profile(msg: p4info_pb2.ActionProfile, o: QualifiedObject, preamble: tuple[int, str, str],
                        table_ids: list[int]) -> None:
    _set_preamble(msg, preamble, [a for a in o.decl.annotations if a.name not in _PROFILE_ANNOTATIONS])
    msg.table_ids.extend(table_ids)
    _action_profile(msg, o.decl)


def _add_digest(info: p4info_pb2.P4Info, preamble: tuple[int, str, str], header: HeaderT) -> None:
    msg = info.digests.add()
    msg.type_spec.CopyFrom(type_spec(header, info.type_info))
    _set_preamble(msg, preamble)  # p4c gives a digest no annotations


def _add_controller_headers(info: p4info_pb2.P4Info, prog: CheckedProgram, alloc: IdAllocator) -> None:
    """controller_packet_metadata: packet_in/packet_out headers, ids by the type's name (as p4c)."""
    cpu_headers = controller_headers(prog)
    cpu_ids = alloc.assign(CONTROLLER_HEADER, [h.decl.name for h in cpu_headers.values()])
    for name, header in cpu_headers.items():
        msg = info.controller_packet_metadata.add()
        _set_preamble(msg, (cpu_ids[header.decl.name], name, name), header.decl.annotations)
        fields = header.decl.fields
        for f, fid in zip(fields, _field_ids(fields), strict=True):
            md = msg.metadata.add(id=fid, name=f.name, bitwidth=bit_width(header.fields[f.name]))
            _type_name(md, header.fields[f.name], info.type_info)


def _add_direct(info: p4info_pb2.P4Info, direct_meters: dict[int, QualifiedObject], alias: dict[str, str]) -> None:
    """Direct meters, each added when the table that names it is (as p4c does), and each direct
    resource's table."""
    for t in info.tables:
        for rid in t.direct_resource_ids:
            if (o := direct_meters.get(rid)) is not None:
                dm = info.direct_meters.add(direct_table_id=t.preamble.id)
                _set_preamble(dm, (rid, o.name, alias[o.name]), o.decl.annotations)
                dm.spec.unit = _METER_UNITS[_enum_member(o.decl.args[-1])]
    for dc in info.direct_counters:
        dc.direct_table_id = next((t.preamble.id for t in info.tables if dc.preamble.id in t.direct_resource_ids), 0)


def controller_headers(prog: CheckedProgram) -> dict[str, HeaderT]:
    """Header types marked ``@controller_header("packet_in"|"packet_out")`` that the
    program's headers struct uses, by that name: the CPU port's packet metadata."""
    found: dict[str, HeaderT] = {}

    def walk(t) -> None:
        if isinstance(t, HeaderT):
            ann = annotation(t.decl, "controller_header") if t.decl is not None else None
            if ann and ann.args and isinstance(ann.args[0], ast.StringLit):
                found.setdefault(ann.args[0].text, t)
            for f in t.fields.values():
                walk(f)

    walk(prog.pipeline.headers)
    return found


def _id_value(ann: ast.Annotation, decl: ast.Node) -> int:
    arg = ann.args[0] if len(ann.args) == 1 else None
    if not isinstance(arg, ast.IntLit):
        raise P4Error(decl.loc, "@id needs one integer argument")
    return arg.number


def _field_ids(items: list) -> list[int]:
    """p4c's FieldIdAllocator: @id values first, the others take their 1-based position,
    skipping ids already taken."""
    given = [_id_value(a, it) if (a := annotation(it, "id")) else None for it in items]
    used = {g for g in given if g is not None}
    if 0 in used or len(used) != len(given) - given.count(None):
        raise P4Error(items[0].loc, "field @id values must be distinct and non-zero")
    result, index = [], 1
    for g in given:
        if g is not None:
            result.append(g)
            index += 1
            continue
        while index in used:
            index += 1
        used.add(index)
        result.append(index)
    return result


def _params(msg: p4info_pb2.Action, action: ast.ActionDecl, type_info: p4types_pb2.P4TypeInfo) -> None:
    data = [p for p in action.params if p.direction == ""]  # directional params are not action data
    for p, pid in zip(data, _field_ids(data), strict=True):
        param = msg.params.add(id=pid, name=qualify("", p), bitwidth=bit_width(p.type),
                               annotations=_annotations(p.annotations))
        _type_name(param, p.type, type_info)


def _type_name(msg: Any, t: Any, type_info: p4types_pb2.P4TypeInfo) -> None:
    """A match field, action parameter or packet metadata field of a P4 ``type`` gets its
    ``type_name``, and the type one ``new_types`` entry (p4c's getTypeName and
    TypeSpecConverter; the bit width stays the underlying one: no @p4runtime_translation)."""
    name = _new_type(t, type_info)
    if name is not None:
        msg.type_name.name = name


def _new_type(t: Any, type_info: p4types_pb2.P4TypeInfo) -> str | None:
    """The name of the ``type`` a value was declared with, described in ``type_info`` as its
    original bit<W>/int<W>; None for any other type (a typedef is its underlying type)."""
    decl = t.newtype if isinstance(t, BitsT) else None
    if decl is None:
        return None
    if decl.name not in type_info.new_types:
        entry = type_info.new_types[decl.name]
        getattr(entry.original_type.bitstring, "int" if t.signed else "bit").bitwidth = t.width
        entry.annotations.extend(_annotations(decl.annotations))
    return decl.name


def _table(msg: p4info_pb2.Table, o: QualifiedObject, ref: Callable, type_info: p4types_pb2.P4TypeInfo) -> None:
    t: ast.TableDecl = o.decl
    for key, fid in zip(t.keys, _field_ids(t.keys), strict=True):
        if key.match_kind == "selector":
            continue  # hashed, not matched: not in P4Info (its field id stays taken, as in p4c)
        field = msg.match_fields.add(id=fid, name=key_name(key), bitwidth=_key_width(key.expr),
                                     match_type=_MATCH_TYPES[key.match_kind], annotations=_annotations(key.annotations))
        _type_name(field, key.expr.type, type_info)
    for r in t.actions:
        action_id = ref(r.decl, o.scope, "action")
        if action_id is None:
            continue  # a @hidden action
        only_table, only_default = annotation(r, "tableonly"), annotation(r, "defaultonly")
        if only_table and only_default:
            raise P4Error(r.loc, f"action {r.name} is annotated both @tableonly and @defaultonly")
        scope = (p4info_pb2.ActionRef.TABLE_ONLY if only_table else p4info_pb2.ActionRef.DEFAULT_ONLY
                 if only_default else p4info_pb2.ActionRef.TABLE_AND_DEFAULT)
        msg.action_refs.add(id=action_id, scope=scope, annotations=_annotations(r.annotations))
    if t.default_is_const and t.default_action is not None:
        msg.const_default_action_id = ref(t.default_action.decl, o.scope, "action") or 0
    if t.default_action is not None:
        _initial_default(msg.initial_default_action, t.default_action, ref(t.default_action.decl, o.scope, "action"))
    if (inst := implementation_of(t)) is not None:
        msg.implementation_id = ref(inst, o.scope, "action_profile") or 0
    size = t.properties.get("size")
    msg.size = size.value if size is not None and size.value else DEFAULT_TABLE_SIZE
    if t.entries is not None:
        msg.has_initial_entries = True
        msg.is_const_table = t.entries_const
    counters = t.properties.get("counters")
    if counters is not None and (cid := ref(counters.decl, o.scope, "direct_counter")) is not None:
        msg.direct_resource_ids.append(cid)
    meters = t.properties.get("meters")
    if meters is not None and (mid := ref(meters.decl, o.scope, "direct_meter")) is not None:
        msg.direct_resource_ids.append(mid)


def _profile_tables(every: list[QualifiedObject]) -> dict[str, set[str]]:
    """Action profile name -> the tables that name it (p4c lists their ids in name order).
    A table constructed in place without ``@name`` is refused here, as p4c refuses it."""
    names = {(id(o.decl), o.scope): o.name for o in every if o.kind == "action_profile"}
    tables: dict[str, set[str]] = {}
    for o in every:
        inst = implementation_of(o.decl) if o.kind == "table" else None
        if inst is None:
            continue
        name = names.get((id(inst), o.scope), names.get((id(inst), "")))
        if name == "":
            raise P4Error(o.decl.properties["implementation"].loc, f"Table '{o.name}' has an anonymous table "
                          "property 'implementation' with no name annotation, which is not supported by P4Runtime")
        if name is not None:
            tables.setdefault(name, set()).add(o.name)
    return tables


def _action_profile(msg: p4info_pb2.ActionProfile, inst: ast.Instantiation) -> None:
    """p4c's addActionProfile: the size argument, a selector's @max_group_size and size semantics
    (the annotations are ignored, with a warning in p4c, on a profile without a selector)."""
    selector = inst.type.decl.name == "action_selector"
    msg.with_selector = selector
    msg.size = int(inst.args[1 if selector else 0].value)
    if not selector:
        return
    if (ann := annotation(inst, "max_group_size")) is not None:
        msg.max_group_size = _id_value(ann, inst)
    semantics = annotation(inst, "selector_size_semantics")
    if semantics is not None:
        arg = semantics.args[0] if len(semantics.args) == 1 else None
        kind = arg.text.lower() if isinstance(arg, ast.StringLit) else ""
        if kind == "sum_of_weights":
            msg.sum_of_weights.SetInParent()
        elif kind == "sum_of_members":
            msg.sum_of_members.SetInParent()
            if (weight := annotation(inst, "max_member_weight")) is not None:
                msg.sum_of_members.max_member_weight = _id_value(weight, inst)
        else:
            raise P4Error(semantics.loc, "@selector_size_semantics must be \"sum_of_weights\" or \"sum_of_members\"")


def _initial_default(msg: p4info_pb2.TableActionCall, action: ast.ActionRef, action_id: int | None) -> None:
    """The declared (or implicit NoAction) default with its action data, as p4c writes it
    (P4Runtime 1.4); values are zero-padded to whole bytes of the parameter's width."""
    if action_id is None:
        return  # a @hidden action
    msg.action_id = action_id
    data = [(p, a) for p, a in zip(action.decl.params, action.args or []) if p.direction == ""]
    for (p, a), pid in zip(data, _field_ids([p for p, _ in data]), strict=True):
        width = bit_width(p.type)
        value = int(a.value) & ((1 << width) - 1)
        msg.arguments.add(param_id=pid, value=value.to_bytes((width + 7) // 8, "big"))


def _extern(msg, o: QualifiedObject, type_info: p4types_pb2.P4TypeInfo | None = None) -> None:
    d: ast.Instantiation = o.decl
    if o.kind == "register":
        elem = d.type.args[0]
        if isinstance(elem, HeaderT):  # TNA: a struct of halves
            msg.type_spec.CopyFrom(type_spec(elem, type_info if type_info is not None else p4types_pb2.P4TypeInfo()))
        elif elem is BOOL:
            msg.type_spec.bool.SetInParent()
        else:
            getattr(msg.type_spec.bitstring, "int" if elem.signed else "bit").bitwidth = elem.width
        msg.size = d.args[0].value
        return
    unit = _enum_member(d.args[-1]).lower()  # TNA's CounterType_t members are upper case
    msg.spec.unit = _METER_UNITS[unit] if o.kind == "meter" else _UNITS[unit]
    if o.kind in ("counter", "meter"):
        msg.size = d.args[0].value


def _enum_member(e: ast.Expr) -> str:
    return e.type.members[e.value]


def _value_set(msg: p4info_pb2.ValueSet, d: ast.ValueSetDecl) -> None:
    """p4c's addValueSet: bit<W> is one unnamed exact field 1; a struct gives one field per
    member (``@match`` picks the match type, exact by default); a serializable enum one per member."""
    msg.size = d.size.value
    t = d.type
    if isinstance(t, HeaderT):
        fields = t.decl.fields
        for f, fid in zip(fields, _field_ids(fields), strict=True):
            ann = annotation(f, "match")
            kind = getattr(ann.args[0], "name", "exact") if ann and ann.args else "exact"
            if kind not in _MATCH_TYPES:
                raise P4Error(f.loc, f"unsupported match type {kind} for a value_set @match annotation")
            msg.match.add(id=fid, name=qualify("", f), bitwidth=bit_width(t.fields[f.name]),
                          match_type=_MATCH_TYPES[kind],
                          annotations=_annotations([a for a in f.annotations if a.name != "match"]))
    elif isinstance(t, EnumT):
        for i, member in enumerate(t.members, 1):
            msg.match.add(id=i, name=member, bitwidth=bit_width(t), match_type=p4info_pb2.MatchField.EXACT)
    else:
        msg.match.add(id=1, bitwidth=bit_width(t), match_type=p4info_pb2.MatchField.EXACT)


def type_spec(t, type_info: p4types_pb2.P4TypeInfo) -> p4types_pb2.P4DataTypeSpec:
    """p4c's TypeSpecConverter: named types are referenced by name and described once in ``type_info``."""
    spec = p4types_pb2.P4DataTypeSpec()
    if t is BOOL:
        spec.bool.SetInParent()
    elif t is ERROR:
        spec.error.SetInParent()
        type_info.error.SetInParent()  # p4c lists the error members
    elif isinstance(t, EnumT):
        name = qualify("", t.decl) if getattr(t, "decl", None) is not None else t.name
        if t.underlying is not None:
            spec.serializable_enum.name = name
            if name not in type_info.serializable_enums:
                e = type_info.serializable_enums[name]
                e.underlying_type.bitwidth = t.underlying.width
                for m in t.members:
                    e.members.add(name=m, value=t.values[m].to_bytes(max(1, (t.underlying.width + 7) // 8), "big"))
        else:
            spec.enum.name = name
            if name not in type_info.enums:
                type_info.enums[name].members.extend(p4types_pb2.P4EnumTypeSpec.Member(name=m) for m in t.members)
    elif isinstance(t, TupleT):  # anonymous: its members' specs in order
        for elem in t.elems:
            spec.tuple.members.add().CopyFrom(type_spec(elem, type_info))
    elif isinstance(t, HeaderT):
        name = qualify("", t.decl)
        kind, table = ("header", type_info.headers) if t.is_header else ("struct", type_info.structs)
        getattr(spec, kind).name = name
        if name not in table:
            entry = table[name]
            for f in t.decl.fields:
                member = entry.members.add(name=qualify("", f))
                sub = type_spec(t.fields[f.name], type_info)
                if not t.is_header and (named := _new_type(t.fields[f.name], type_info)) is not None:
                    sub = p4types_pb2.P4DataTypeSpec()  # a struct member of a `type`: by its name
                    sub.new_type.name = named
                (member.type_spec.CopyFrom(sub.bitstring) if t.is_header else member.type_spec.CopyFrom(sub))
    else:
        getattr(spec.bitstring, "int" if t.signed else "bit").bitwidth = t.width
    return spec


def _key_width(e: ast.Expr) -> int:
    if e.type is ERROR:
        return 0  # p4c: "Treat error type as string"
    if isinstance(e.type, EnumT) and e.type.underlying is None:
        raise P4Error(e.loc, f"a key of enum type {e.type} has no P4Runtime bit width")
    return bit_width(e.type)


def _annotations(anns: list[ast.Annotation]) -> list[str]:
    """Annotations as p4c copies them into P4Info, e.g. ``@noWarn("unused")``."""

    def render(x: object) -> str:
        if isinstance(x, ast.StringLit):
            return '"' + x.text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(x, ast.NamedArg):
            return f"{x.name}={render(x.arg)}"
        return literal_text(x) if isinstance(x, ast.IntLit) else getattr(x, "name", str(x))

    return [f"@{a.name}({', '.join(map(render, a.args))})" if a.args else f"@{a.name}"
            for a in anns if a.name not in _NOT_SERIALIZED]


__all__ = ["IdAllocator", "QualifiedObject", "aliases", "build_p4info", "jenkins_hash", "qualified_objects", "qualify"]
