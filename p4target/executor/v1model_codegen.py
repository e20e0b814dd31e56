"""Code generation for v1model's packet-path externs: clone, resubmit, recirculate,
digest, log_msg, assert/assume, random, checksums over the payload, meters.

Requests that BMv2 acts on at the end of a pipeline (clone, resubmit, recirculate) are
stored in extra slots of the state list, so they travel with the packet exactly as BMv2's
packet registers do (a multicast copy starts with them cleared, a unicast packet keeps
them); ``switch.Switch`` reads the slots only when the program has them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.checker import V1MODEL_FUNCTIONS
from ..frontend.errors import P4Error
from ..frontend.types import BitsT, HeaderT, StackT
from ..p4info import qualify
from . import ir
from .externs import Meter
from .storage import Scope, Storage, member_storage

if TYPE_CHECKING:
    from .env import GenEnv

__all__ = ["V1MODEL_FUNCTIONS", "intrinsic_slot", "v1model_function"]


def intrinsic_slot(env: GenEnv, name: str) -> int:
    """A slot that holds None until the program requests ``name`` for this packet."""
    slot = env.out.intrinsic.get(name)
    if slot is None:
        slot = env.out.intrinsic[name] = len(env.template)
        env.template.append(None)
    return slot


def _reads_packet_length(env: GenEnv) -> bool:
    """Whether the program mentions ``standard_metadata.packet_length`` anywhere."""
    found = env.reads_packet_length
    if found is None:
        std_t = env.prog.standard_metadata
        seen: set[int] = set()

        def visit(node: Any) -> bool:
            if isinstance(node, list):
                return any(visit(x) for x in node)
            if not isinstance(node, ast.Node) or id(node) in seen:
                return False
            seen.add(id(node))
            if (isinstance(node, ast.Member) and node.member == "packet_length"
                    and getattr(node.base, "type", None) in (std_t,)):
                return True
            return any(visit(getattr(node, f.name, None)) for f in dataclasses.fields(node))

        found = visit(list(env.prog.program.decls))
        env.reads_packet_length = found
    return found


def length_register_update(env: GenEnv, st: Storage, valid: bool) -> None:
    """simple_switch's ``add_header``/``remove_header`` (``setValid()``/``setInvalid()``)
    add/subtract the header's size to/from the packet-length register, which egress,
    multicast replicas and egress clones then see as ``packet_length``.  Only programs
    that read ``packet_length`` pay for it."""
    if not _reads_packet_length(env):
        return
    slot = env.out.length_slot
    if slot is None:
        slot = env.out.length_slot = len(env.template)
        env.template.append(0)
    t = st.type
    size: ir.Expr = ir.Const(t.width // 8)
    if t.varbit_field is not None:  # a varbit field's slot holds its bytes (Python only)
        vb = st.base + 1 + list(t.fields).index(t.varbit_field)
        size = ir.bin_("+", size, ir.MethodCall(ir.Name("len"), (ir.slot(vb),)))
    if valid:
        with env.build.if_(ir.Not(ir.slot(st.base))):
            env.build.emit(ir.AugAssign(ir.slot(slot), "+", size))
    else:
        with env.build.if_(ir.slot(st.base)):
            env.build.emit(ir.AugAssign(ir.slot(slot), "-", size))


def _annotation_value(env: GenEnv, e: Any) -> int:
    """``@field_list`` arguments: integer literals or serializable enum members."""
    if getattr(e, "value", None) is not None and isinstance(e.value, int):
        return int(e.value)
    if isinstance(e, ast.IntLit):
        return e.number
    if isinstance(e, ast.Member) and isinstance(e.base, ast.PathExpr):
        for d in env.prog.program.decls:
            if isinstance(d, ast.EnumDecl) and d.name == e.base.name and e.member in d.members and d.values:
                v = d.values[d.members.index(e.member)].value
                if isinstance(v, int):
                    return v
    raise P4Error(e.loc, "@field_list arguments must be integer constants or serializable enum members")


def field_list_slots(env: GenEnv, index: int | None) -> list[int]:
    """The user-metadata slots annotated ``@field_list(..., index, ...)`` (BMv2 copies these)."""
    if index is None:
        return []
    cache = env.out.field_lists
    if index in cache:
        return cache[index]
    slots: list[int] = []

    def walk(st: Storage) -> None:
        t = st.type
        assert isinstance(t, HeaderT)
        for f in t.decl.fields if t.decl is not None else []:
            sub = member_storage(st, f.name)
            ann = ast.find_annotation(f.annotations, "field_list")
            if ann is not None and index in [_annotation_value(env, a) for a in ann.args]:
                if isinstance(sub.type, (HeaderT, StackT)):
                    raise P4Error(ann.loc, "@field_list on a header or struct field is not supported by the "
                                  "built-in target")
                slots.append(sub.base)
            elif isinstance(sub.type, HeaderT) and not sub.type.is_header:
                walk(sub)

    walk(env.out.meta_storage)
    cache[index] = slots
    return slots


def _flat_values(env: GenEnv, st: Storage, loc: Any) -> list[ir.Expr]:
    t = st.type
    if isinstance(t, HeaderT):
        if t.is_header:
            raise P4Error(loc, "digest of a struct holding a header is not supported by the built-in target")
        out = []
        for name in t.fields:
            out += _flat_values(env, member_storage(st, name), loc)
        return out
    if isinstance(t, StackT):
        raise P4Error(loc, "digest of a struct holding a header stack is not supported by the built-in target")
    return [ir.slot(st.base)]


def _rt(method: str, *args: ir.Expr) -> ir.MethodCall:
    """A call of the runtime's hooks (``RT.digest(...)``): Python only."""
    return ir.MethodCall(ir.Attr(ir.Name("RT"), method), args)


def v1model_function(env: GenEnv, call: ast.Call, scope: Scope) -> None:
    name, args = call.target.name, call.args
    if name in ("clone", "clone_preserving_field_list"):
        index = args[2].value if name == "clone_preserving_field_list" else None
        field_list_slots(env, index)  # refuse bad annotations at load time
        env.build.emit(ir.Assign(ir.slot(intrinsic_slot(env, "clone")), ir.Tuple((ir.lift(env.exprs.ex(args[1], scope)),
                                                                           ir.Const(index)))))
    elif name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
        index = args[0].value
        field_list_slots(env, index)
        env.build.emit(ir.Assign(ir.slot(intrinsic_slot(env, name.split("_")[0])), ir.Const(index)))
    elif name == "digest":
        st = env.gen.storage(args[1], scope)  # `digest<S>(r, {a, b})`: the list fills a temporary S
        values = ir.Tuple(tuple(_flat_values(env, st, args[1].loc)))
        name = qualify("", args[1].type.decl)  # the P4Info name (a struct's @name, if any)
        env.build.emit(ir.Do(_rt("digest", ir.Const(name), ir.lift(env.exprs.ex(args[0], scope)), values)))
    elif name == "log_msg":
        fmt_name = env.gen.const(args[0].text, "FMT")
        fmt = ir.Obj(fmt_name, env.ns[fmt_name])
        if len(args) == 1:
            env.build.emit(ir.Do(_rt("log_msg", fmt)))
        else:
            data = args[1]
            items = data.items if isinstance(data, ast.ListExpr) else [data]
            values = []
            for item in items:
                if isinstance(item.type, (HeaderT, StackT)):
                    raise P4Error(item.loc, "log_msg of a header or struct is not supported by the built-in target")
                values.append(ir.lift(env.exprs.ex(item, scope)))
            env.build.emit(ir.Do(_rt("log_msg", fmt, ir.Tuple(tuple(values)))))
    elif name in ("assert", "assume"):
        where = f"{call.loc.file}:{call.loc.line}" if call.loc is not None else name
        with env.build.if_(ir.Not(ir.lift(env.exprs.ex(args[0], scope)))):
            env.build.emit(ir.Raise(ir.Exc.ASSERTION, f"{name} failed at {where}"))
    elif name == "random":
        dst = env.gen.storage(args[0], scope)
        lo = ir.lift(env.exprs.ex(args[1], scope))
        env.build.emit(ir.Assign(ir.slot(dst.base), _rt("random", lo, ir.lift(env.exprs.ex(args[2], scope)))))
    elif name == "truncate":  # BMv2: the smallest length wins; only this packet's own transmission is cut
        slot, n = ir.slot(intrinsic_slot(env, "truncate")), ir.Var(env.gen.fresh("n"))
        env.build.emit(ir.Assign(n, ir.lift(env.exprs.ex(args[0], scope))))
        with env.build.if_(ir.Or((ir.IsNone(slot), ir.cmp("<", n, slot)))):  # an intrinsic slot: None until requested
            env.build.emit(ir.Assign(slot, n))
    elif name in ("verify_checksum_with_payload", "update_checksum_with_payload"):
        target = env.gen.storage(args[2], scope)
        data = ir.lift(env.gen.hash_input(args[1], scope))
        cond = ir.lift(env.exprs.ex(args[0], scope))
        csum = ir.Call("csum16", (ir.Concat(data, ir.Payload()),))
        if name.startswith("verify"):
            with env.build.if_(ir.And((cond, ir.cmp("!=", csum, ir.slot(target.base))))):
                env.build.emit(ir.Assign(ir.slot(env.out.std["checksum_error"]), ir.Const(1)))
        else:
            with env.build.if_(cond):
                env.build.emit(ir.Assign(ir.slot(target.base), csum))
        env.out.uses_payload = True
    else:
        raise P4Error(call.loc, f"{name} is not supported by the built-in target")


def meter_instance(env: GenEnv, decl: ast.Instantiation, name: str) -> Meter:
    t = decl.type
    unit_arg = decl.args[-1]
    unit = unit_arg.type.members[unit_arg.value]
    if t.decl.name == "meter":
        return Meter(name, decl.args[0].value, unit)
    return Meter(name, 0, unit)


def meter_method(env: GenEnv, call: ast.Call, scope: Scope, obj: str) -> None:
    """``execute_meter``: out-of-range indexes leave the result unchanged (BMv2)."""
    args = call.args
    if call.target.name == "read":
        return  # the table writes the colour on a hit; see direct_meter_destination
    meter: Meter = env.ns[obj]
    dst = env.gen.storage(args[1], scope)
    i = ir.Var(env.gen.fresh("i"))
    amount: ir.Expr = ir.Const(1) if meter.unit == "packets" else ir.IngressLength()
    if meter.unit != "packets":
        env.out.uses_payload = True
    env.build.emit(ir.Assign(i, ir.lift(env.exprs.ex(args[0], scope))))
    with env.build.if_(ir.cmp("<", i, meter.size)):
        cell = ir.Item(ir.Attr(ir.Obj(obj, meter), "cells"), i)
        env.build.emit(ir.Assign(ir.slot(dst.base), ir.MethodCall(ir.Attr(cell, "execute"), (_rt("micros"), amount))))


def direct_meter_destination(env: GenEnv, t: ast.TableDecl, meter_decl: Any, scope: Scope) -> Storage | None:
    """The field every ``m.read(field)`` of the table's actions writes (p4c requires one)."""
    found: list[ast.Expr] = []

    def visit(node: Any) -> None:
        if isinstance(node, ast.Call):
            tgt = node.target
            if (tgt is not None and tgt.kind == "method" and tgt.decl.name == "direct_meter"
                    and isinstance(tgt.instance, ast.PathExpr) and tgt.instance.decl is meter_decl):
                found.append(node.args[0])
        if isinstance(node, list):
            for x in node:
                visit(x)
        elif isinstance(node, ast.Node):
            for f in dataclasses.fields(node):
                visit(getattr(node, f.name, None))

    for ref in t.actions:
        visit(ref.decl.body)
    if not found:
        return None
    try:
        st = env.gen.storage(found[0], scope)
    except P4Error:
        raise P4Error(found[0].loc, "direct_meter.read into an action parameter is not supported by the "
                      "built-in target") from None
    if not isinstance(st.type, BitsT):
        raise P4Error(found[0].loc, "direct_meter.read needs a bit<W> field")
    return st
