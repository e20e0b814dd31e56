"""Calls of extern functions and extern methods (a pass of the checker, env.py): what the
executor implements, and the load-time facts it needs (constant algorithms, hash inputs).
"""

from __future__ import annotations

from . import ast, stages
from .calls import directionless_constants
from .env import Pass, from_p4include
from .errors import P4Error
from .scope import CallTarget
from .source_text import find_after
from .tna import TNA_METHODS, present_params
from .types import (
    BOOL,
    STRING,
    VOID,
    BitsT,
    EnumT,
    ExternT,
    HeaderT,
    StackT,
    TupleT,
    Type,
    VarbitT,
    bit_width,
)


def _varbits_or_unions(t: Type) -> bool:
    """p4c's hasVarbitsOrUnions: a union, a varbit, a struct-like type with a varbit field, or an
    array or tuple of such."""
    if isinstance(t, VarbitT) or isinstance(t, HeaderT) and t.is_union:
        return True
    if isinstance(t, TupleT):
        return any(_varbits_or_unions(f) for f in t.elems)
    if isinstance(t, HeaderT):
        return t.varbit_field is not None
    return isinstance(t, StackT) and _varbits_or_unions(t.elem)


# v1model extern functions with packet-path or control-plane effects (see executor/v1model_externs.py)
V1MODEL_FUNCTIONS = {
    "clone", "clone_preserving_field_list", "resubmit_preserving_field_list", "recirculate_preserving_field_list",
    "digest", "log_msg", "assert", "assume", "random", "verify_checksum_with_payload",
    "update_checksum_with_payload", "truncate",
}
SUPPORTED_FUNCTIONS = {
    "mark_to_drop", "hash", "verify_checksum", "update_checksum", "verify", "static_assert",
} | V1MODEL_FUNCTIONS
# The pre-2021 v1model forms with a field-list argument: still declared (deprecated) in
# v1model.p4, but p4c-bm2-ss has had no converter for them since p4c PR #2902 (it stops
# with "unknown extern function"), so there is no BMv2 behaviour to follow.
FIELD_LIST_FORMS = {"clone3": "clone_preserving_field_list", "resubmit": "resubmit_preserving_field_list",
                    "recirculate": "recirculate_preserving_field_list"}
SUPPORTED_METHODS = {
    "packet_in": {"extract", "advance", "length", "lookahead"},
    "packet_out": {"emit"},
    "register": {"read", "write"},
    "counter": {"count"},
    "direct_counter": {"count"},
    "meter": {"execute_meter"},
    "direct_meter": {"read"},
    **TNA_METHODS,
}
SUPPORTED_HASHES = {"crc16", "crc32", "csum16", "identity"}


class Externs(Pass):
    """Extern functions and methods."""

    def arity(self, e: ast.Call, n: int) -> None:
        if len(e.args) != n:
            raise P4Error(e.loc, f"expected {n} arguments, got {len(e.args)}")

    def _static_assert(self, e: ast.Call) -> None:
        """core.p4's ``static_assert(check[, message])``: true, or the program is refused."""
        check = e.args[0]
        if not isinstance(check.value, bool):
            raise P4Error(check.loc, "static_assert needs a compile-time condition")
        if not check.value:
            text = e.args[1].value if len(e.args) > 1 else "static_assert failed"
            raise P4Error(e.loc, f"static assertion failed: {text}")
        e.value = True

    def call_function(self, e: ast.Call, d: ast.ExternFunction) -> Type:
        if self.env.frontend:
            return self._prototype_call(e, d)
        if d.name in FIELD_LIST_FORMS:
            raise P4Error(e.loc, f"{d.name}: unknown extern function (p4c-bm2-ss's words: it dropped the field "
                          f"list forms in 2021): use {FIELD_LIST_FORMS[d.name]} with @field_list")
        if d.name not in SUPPORTED_FUNCTIONS:
            raise P4Error(e.loc, f"extern function '{d.name}' is not supported by the built-in target")
        d = next((o for o in self.env.overloads.get(d.name, []) if len(o.proto.params) == len(e.args)), d)
        bindings: dict[str, Type] = {}
        self.env.calls.check_args(e.loc, d.proto.params, e.args, bindings, d.proto.type_params)
        directionless_constants(d.proto.params, e.args)
        if d.name in ("hash", "verify_checksum", "update_checksum"):
            algo = e.args[1] if d.name == "hash" else e.args[3]
            if algo.value is None or not isinstance(algo.type, EnumT):
                raise P4Error(algo.loc, "the hash algorithm must be a constant HashAlgorithm member")
            name = algo.type.members[algo.value]
            if name not in SUPPORTED_HASHES:
                raise P4Error(algo.loc, f"hash algorithm {name} is not supported by the built-in target")
            if d.name != "hash" and name != "csum16":
                raise P4Error(algo.loc, f"{d.name} supports only HashAlgorithm.csum16")
            data = e.args[3] if d.name == "hash" else e.args[1]
            self.hash_data(data, varbit_ok=d.name != "hash")
            if d.name == "hash":
                for a in (e.args[0], e.args[2], e.args[4]):
                    if not isinstance(a.type, BitsT):
                        raise P4Error(a.loc, f"hash needs bit<W> values here, got {a.type}")
            else:
                if e.args[2].type != BitsT(16):
                    raise P4Error(e.args[2].loc, "the checksum field must be bit<16>")
        if d.name == "static_assert":
            self._static_assert(e)
        if d.name in V1MODEL_FUNCTIONS:
            self._v1model_function(e, d.name)
        e.target = CallTarget("function", d.name, d)
        return self.env.calls.resolve_return(d.proto, bindings)

    def _prototype_call(self, e: ast.Call, d: ast.ExternFunction) -> Type:
        """Frontend mode: any extern function, checked against its declared prototype only (what
        the built-in target implements does not matter; core.p4's static_assert still holds)."""
        d = next((o for o in self.env.overloads.get(d.name, []) if len(o.proto.params) == len(e.args)), d)
        bindings: dict[str, Type] = {}
        self.env.calls.check_args(e.loc, d.proto.params, e.args, bindings, d.proto.type_params)
        directionless_constants(d.proto.params, e.args)
        for p in d.proto.params:  # p4c's rule on a type variable bound to string (as on a declared string)
            if p.direction and p.type_ref.kind == "named" and bindings.get(p.type_ref.name) == STRING:
                raise P4Error(p.loc, f"{p.name}: a parameter with type string cannot have a direction")
        if d.name == "static_assert" and from_p4include(d):
            self._static_assert(e)
        self._nested_out_args(e, d.proto.params, bindings, d.proto.type_params)
        in_parser = self.env.open_blocks and isinstance(self.env.open_blocks[-1], ast.ParserDecl)
        if d.name == "verify" and from_p4include(d) and not in_parser:
            raise P4Error(e.loc, "verify: may only be invoked in parsers")
        e.target = CallTarget("function", d.name, d)
        return self.env.calls.resolve_return(d.proto, bindings)

    def _nested_out_args(self, e: ast.Call, params: list[ast.Param], bindings: dict[str, Type],
                         type_params: list[str]) -> None:
        """p4c's midend (NestedStructs) cannot split a struct with struct-like, tuple or stack fields
        that an extern writes back: an out/inout parameter of such a type is refused at the call."""
        for p in params:
            if p.direction not in ("out", "inout") or not stages.blocks_kept(self.env):
                continue
            ref = p.type_ref
            t = bindings.get(ref.name) if ref.kind == "named" and ref.name in type_params else \
                self.env.decls.resolve_type(ref)
            if isinstance(t, HeaderT) and t.kind == "struct" and \
                    any(isinstance(f, (HeaderT, StackT)) for f in t.fields.values()):
                stages.defer(self.env, stages.NESTED_STRUCTS, P4Error(
                    e.loc, f"{ast.text(e)}: extern functions with 'out' nested struct argument ({p.name}) not "
                    "supported"), self.env.owner)

    def _v1model_function(self, e: ast.Call, name: str) -> None:
        """Arguments the executor needs at load time (indexes, strings, algorithms)."""
        args = e.args
        if name in ("clone", "clone_preserving_field_list") and args[0].value is None:
            raise P4Error(args[0].loc, "the clone type must be a constant CloneType member")
        if name.endswith("_preserving_field_list") and args[-1].value is None:
            raise P4Error(args[-1].loc, "the field list index must be a compile-time constant")
        if name == "log_msg" and not isinstance(args[0], ast.StringLit):
            raise P4Error(args[0].loc, "log_msg needs a string literal")
        if name == "digest":
            data = args[1].type
            if isinstance(data, TupleT):
                raise P4Error(args[1].loc, f"digest of a {data} is not supported by the built-in target: "
                              "name a struct type, digest<S>(receiver, {...})")
            if not (isinstance(data, HeaderT) and not data.is_header):
                raise P4Error(args[1].loc, f"digest of a {data} is not supported by the built-in target: use a struct")
        if name == "random" and not isinstance(args[0].type, BitsT):
            raise P4Error(args[0].loc, f"random needs bit<W>, got {args[0].type}")
        if name.endswith("_with_payload"):
            algo = args[3]
            if algo.value is None or not isinstance(algo.type, EnumT) or algo.type.members[algo.value] != "csum16":
                raise P4Error(algo.loc, f"{name} supports only HashAlgorithm.csum16 on the built-in target")
            self.hash_data(args[1], varbit_ok=True)
            if args[2].type != BitsT(16):
                raise P4Error(args[2].loc, "the checksum field must be bit<16>")

    def hash_data(self, data: ast.Expr, varbit_ok: bool = False) -> None:
        """The inputs of hash and checksum calls.  Checksums may hold varbit fields (BMv2
        sums their extracted bits, e.g. IPv4 options); hash inputs may not.  As p4c's BMv2
        field lists, nested lists, structs and tuples are flattened field by field."""
        items = data.items if isinstance(data, ast.ListExpr) else [data]
        for item in items:
            t = item.type
            if isinstance(item, ast.ListExpr):
                self.hash_data(item, varbit_ok)
                continue
            if isinstance(t, HeaderT) and not t.is_header:
                self._hash_fields(item, t)
                continue
            if isinstance(t, VarbitT) or isinstance(t, HeaderT) and t.varbit_field is not None:
                in_header = isinstance(item, ast.Member) and isinstance(item.base.type, HeaderT) and \
                    item.base.type.is_header
                if varbit_ok and (isinstance(t, HeaderT) and t.is_header or in_header):
                    continue
                raise P4Error(item.loc, "varbit fields in hash inputs (or outside a header in checksum inputs) "
                              "are not supported by the built-in target")
            try:
                bit_width(item.type)
            except TypeError:
                raise P4Error(item.loc, f"cannot hash a value of type {item.type}") from None

    def _hash_fields(self, item: ast.Expr, t: Type) -> None:
        """A struct, tuple or union in a hash or checksum input: every field must have a width."""
        if isinstance(t, HeaderT) and not (t.is_header and t.varbit_field is None):
            for ft in t.fields.values():
                self._hash_fields(item, ft)
            return
        try:
            bit_width(t)
        except TypeError:
            raise P4Error(item.loc, f"cannot hash a value of type {t} (in {item.type})") from None

    def _lookahead_type(self, ref: ast.TypeRef) -> None:
        """p4c's CheckCoreMethods (after its type checker): lookahead reads a fixed-width type."""
        t = self.env.decls.resolve_type(ref)
        if t is VOID:
            err = P4Error(ref.loc, f"{t}: illegal type argument for 'lookahead'")
        elif _varbits_or_unions(t):
            err = P4Error(ref.loc, f"{ref.name or t}: type argument must be a fixed-width type")
        else:
            return
        stages.defer(self.env, stages.CHECK_CORE_METHODS, err)

    def call_method(self, e: ast.Call, t: ExternT, m: str, base: ast.Expr) -> Type:
        ext = t.decl
        if m not in SUPPORTED_METHODS.get(ext.name, ()) and not self.env.frontend:
            raise P4Error(e.loc, f"{ext.name}.{m} is not supported by the built-in target")
        callable_ = ext.methods + ext.abstracts if self.env.frontend else ext.methods  # p4c: abstracts too
        fitting = [p for p in callable_ if p.name == m and self.env.calls.arity_fits(p.params, e.args)]
        if len(fitting) > 1:  # p4c's Type_Extern::lookupMethod
            raise P4Error(find_after(e.func.loc, rf"\.\s*({m})\b", group=1), f"Ambiguous method {m}")
        proto = fitting[0] if fitting else None
        if proto is None:
            raise P4Error(e.loc, f"no method {ext.name}.{m} takes {len(e.args)} arguments")
        bindings = dict(zip(ext.type_params, t.args))
        self.env.calls.check_args(e.loc, present_params(proto.params, e.args), e.args, bindings, proto.type_params)
        if self.env.frontend and not from_p4include(ext):  # a program's own extern: its prototype is all
            self._nested_out_args(e, proto.params, bindings, ext.type_params + proto.type_params)
            e.target = CallTarget("method", m, ext, instance=base)
            return self.env.calls.resolve_return(proto, bindings)
        if ext.name in TNA_METHODS:
            self.env.tna.tna_method(e, ext, m)
        if ext.name == "packet_in" and m == "extract":
            target = e.args[0]
            if isinstance(target, ast.Default):  # `extract<h_t>(_)`: the bytes are read into a temporary
                bound = bindings.get(proto.type_params[0]) if proto.type_params else None
                if bound is None:
                    raise P4Error(target.loc, "extract into '_' needs the header type: extract<H>(_)")
                target.type = bound
            if not (isinstance(target.type, HeaderT) and target.type.is_header):
                raise P4Error(target.loc, f"extract needs a header, got {target.type}")
            if (target.type.varbit_field is None) != (len(e.args) == 1):  # as p4c: the length iff a varbit
                raise P4Error(e.loc, f"extract of header {target.type} needs "
                              f"{'one argument' if len(e.args) == 2 else 'two arguments (it has a varbit field)'}")
        if ext.name == "packet_in" and m == "lookahead" and e.type_args:
            self._lookahead_type(e.type_args[0])
        if ext.name == "packet_out" and m == "emit":
            arg_t = e.args[0].type
            if not (isinstance(arg_t, (HeaderT, StackT))):
                raise P4Error(e.args[0].loc, f"emit needs a header, stack or struct, got {arg_t}")
        if ext.name in ("meter", "direct_meter"):
            out = e.args[-1]
            if not (isinstance(out.type, BitsT) and out.type.width >= 2):
                raise P4Error(out.loc, f"a meter colour needs bit<W> with W >= 2, got {out.type}")
        if ext.name == "register":
            elem = t.args[0]
            if not (isinstance(elem, BitsT) or elem is BOOL):
                raise P4Error(e.loc, f"register<{elem}> is not supported by the built-in target: use bit<W> or int<W>")
        e.target = CallTarget("method", m, ext, instance=base)
        return self.env.calls.resolve_return(proto, bindings)
