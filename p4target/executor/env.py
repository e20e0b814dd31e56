"""What the code generation passes share: the program, the state list being laid out, the generated
module's namespace and the IR being written, and the passes themselves.

Code generation is a set of passes, one file each: ``codegen.CodeGen`` (the program, controls,
statements), ``exprs.ExprGen`` (expressions), ``table_codegen.TableGen`` (tables),
``packet_codegen.PacketGen`` (parsers, the deparser),
``headers.HeaderOps`` (validity, copies, stacks, varbit), ``calls.CallGen`` (argument binding,
inlined bodies), ``subparsers.SubParserGen`` (sub-parser applies) and ``builder.Builder`` (the
block being written); the helper modules (loops, v1model_codegen, profile_codegen) are functions
of the environment.  Each pass keeps no state of its own: everything they share is here, set up in
``__init__``, and one pass reaches another's methods through it (``env.headers.pin(st)``).  A TNA
program's main, expressions and packet passes are ``tna_codegen.TnaCodeGen``, ``TnaExprGen`` and
``TnaPacketGen``; every pass calls those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..frontend import ast
from ..frontend.program import CheckedProgram
from ..p4info import qualify
from . import algorithms, ir
from .builder import Builder
from .exceptions import AssertionFailed, ExitBlock, LoopLimit, StackIndexError, stack_index
from .externs import Hooks
from .generated import Generated
from .storage import Scope, Storage

Pass = Callable[["GenEnv"], Any]  # a pass's class: built once per program, over the environment
# A pending state of the parse loop (subparsers.py): id, comment, state ids for its transitions, body.
LaterState = tuple[int, str, dict[str, int], Callable[[], None]]


class GenEnv:
    """The shared state of one program's code generation, and its passes."""

    def __init__(self, prog: CheckedProgram, gen: Any, headers: Pass, calls: Pass, subparsers: Pass,
                 exprs: Pass, tables: Pass, packet: Pass) -> None:
        """``gen``: the main pass (``codegen.CodeGen`` or ``tna_codegen.TnaCodeGen``), which builds the
        environment; ``headers``, ``calls``, ``subparsers``, ``exprs``, ``tables``, ``packet``: the
        classes of the other passes.  The passes are typed ``Any`` here because their modules import this one (no
        import circle, not even for typing)."""
        self.prog = prog
        self.template: list[Any] = []  # the state list's initial values, one per slot
        self.ns: dict[str, Any] = {  # the generated module's namespace
            "ExitBlock": ExitBlock, "pack_bits": algorithms.pack_bits, "csum16": algorithms.csum16,
            "stack_index": stack_index, "StackIndexError": StackIndexError, "LoopLimit": LoopLimit,
            "hash_offset": algorithms.hash_offset, "HASHES": algorithms.HASHES,
            "RT": Hooks(), "AssertionFailed": AssertionFailed, "PAYLOAD": [b""], "INGRESS_LENGTH": [0],
        }
        self.counter = 0  # for fresh names
        self.out = Generated("", self.ns, self.template, {})
        self.return_stmt: ir.Stmt = ir.Return()  # what P4 ``return`` becomes where the code is being inlined
        self.return_slot: Storage | None = None  # where an inlined function's ``return`` value goes
        self.error_codes = {name: i for i, name in enumerate(prog.errors)}
        self.std_storage: Storage | None = None
        self.action_depth = 0  # > 0 inside an action body, where HSIndexSimplifier leaves run-time indexes alone
        self.index_temps: dict[int, str] = {}  # id of a guarded run-time index expression: its variable
        self.globals = Scope()
        for d in prog.top_level:
            if isinstance(d, ast.ActionDecl):
                self.globals[d] = qualify("", d)
        # the parser being written: its states' numbers, and the states sub-parser applies add
        self.state_ids: dict[str, int] = {}
        self.state_count = 0
        self.later_states: list[LaterState] = []
        self.reads_packet_length: bool | None = None  # v1model_codegen: found on first use
        # TNA (tna_codegen): intrinsic metadata structs' storage; the slot of the registers executed so far
        self.bound: dict[str, Storage] = {}
        self.acc_slot = -1
        # the passes
        self.build = Builder()
        self.gen = gen
        self.headers = headers(self)  # headers.HeaderOps
        self.calls = calls(self)  # calls.CallGen
        self.subparsers = subparsers(self)  # subparsers.SubParserGen
        self.exprs = exprs(self)  # exprs.ExprGen (tna_codegen.TnaExprGen)
        self.tables = tables(self)  # table_codegen.TableGen
        self.packet = packet(self)  # packet_codegen.PacketGen (tna_codegen.TnaPacketGen)
