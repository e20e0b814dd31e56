"""p4c-style STF packet tests: parse a .stf file and run it against a switch.

The format is p4c's (tools/stf, backends/bmv2/bmv2stf.py): ``packet``, ``expect`` with
``*`` nibble wildcards and a trailing ``$`` for exact length, ``add`` with optional
priority (larger wins), ``setdefault``, ``mc_mgrp_create``, ``mc_node_create``,
``mc_node_associate``, ``mirroring_add``; ``#`` starts a comment.  Expectations are checked per port, in
order; a packet on a port nobody expected is a failure.  The runner talks to a target
through the small ``Target`` interface, so the same files run on our built-in target and
on real BMv2 (``stf_bmv2``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .executor.switch import Switch
from .stf_bmv2 import Bmv2Target
from .stf_entries import StfError, resolve_entry


@dataclass
class Command:
    line: int
    verb: str
    args: list[str]
    text: str


@dataclass
class Expectation:
    line: int
    pattern: str  # hex nibbles with '*' wildcards; '' matches any packet
    exact_length: bool


@dataclass
class StfResult:
    failures: list[str] = field(default_factory=list)
    packets_sent: int = 0
    packets_checked: int = 0
    ignored: list[str] = field(default_factory=list)  # commands p4c's BMv2 runner also skips

    @property
    def passed(self) -> bool:
        return not self.failures


class Target(Protocol):
    """What the runner needs from a switch."""

    def add_entry(self, table: str, priority: int | None, keys: list[tuple[str, str]], action: str,
                  args: list[tuple[str, str]]) -> None: ...
    def set_default(self, table: str, action: str, args: list[tuple[str, str]]) -> None: ...
    def multicast(self, verb: str, args: list[int]) -> None:
        """mc_mgrp_create / mc_node_create / mc_node_associate, as simple_switch_CLI takes them."""
    def mirroring_add(self, session: int, port: int) -> None:
        """A clone session sending to one port, as simple_switch_CLI's mirroring_add."""
    def send(self, port: int, data: bytes) -> None: ...
    def received(self) -> list[tuple[int, bytes]]: ...


def parse_stf(text: str) -> list[Command]:
    commands = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        verb, *args = line.split()
        commands.append(Command(n, verb.lower(), args, line))
    return commands


_ACTION = re.compile(r"^(?P<name>[\w.$\[\]]+)\((?P<args>.*)\)\s*(=\s*\w+)?$")


def _split_action(text: str, line: int) -> tuple[str, list[tuple[str, str]]]:
    m = _ACTION.match(text.strip())
    if not m:
        raise StfError(f"line {line}: expected action(param:value, ...), got {text!r}")
    args = []
    for part in filter(None, (p.strip() for p in m.group("args").split(","))):
        name, sep, value = part.partition(":")
        if not sep:
            raise StfError(f"line {line}: action argument {part!r} is not name:value")
        args.append((name.strip(), value.strip()))
    return m.group("name"), args


def run_stf(text: str, target: Target) -> StfResult:
    result = StfResult()
    expected: dict[int, list[Expectation]] = defaultdict(list)
    for cmd in parse_stf(text):
        try:
            _execute(cmd, target, result, expected)
        except (ValueError, KeyError, IndexError) as exc:
            raise StfError(f"line {cmd.line}: {cmd.text}: {exc}") from exc
    _check(target.received(), expected, result)
    return result


def _execute(cmd: Command, target: Target, result: StfResult, expected) -> None:
    v, a = cmd.verb, cmd.args
    if v == "packet":
        target.send(int(a[0]), bytes.fromhex("".join(a[1:])))
        result.packets_sent += 1
    elif v == "expect":
        data = "".join(a[1:])
        exact_len = data.endswith("$")
        expected[int(a[0])].append(Expectation(cmd.line, data.rstrip("$").lower(), exact_len))
    elif v == "add":
        rest = cmd.text.split(None, 2)[2] if len(a) > 1 else ""
        table = a[0]
        priority = None
        tokens = rest.split()
        if tokens and tokens[0].isdigit():
            priority = int(tokens[0])
            rest = rest.split(None, 1)[1]
        keys: list[tuple[str, str]] = []
        while rest and not _ACTION.match(rest.strip()):
            token, _, rest = rest.strip().partition(" ")
            name, sep, value = token.partition(":")
            if not sep:
                raise StfError(f"line {cmd.line}: expected key:value, got {token!r}")
            keys.append((name, value))
        action, args = _split_action(rest, cmd.line)
        target.add_entry(table, priority, keys, action, args)
    elif v == "setdefault":
        action, args = _split_action(cmd.text.split(None, 2)[2], cmd.line)
        target.set_default(a[0], action, args)
    elif v in ("mc_mgrp_create", "mc_node_create", "mc_node_associate"):
        target.multicast(v, [int(x) for x in a])
    elif v == "mirroring_add":
        target.mirroring_add(int(a[0]), int(a[1]))
    elif v == "wait":
        pass
    else:  # as p4c's bmv2stf.py does (check_counter, remove, no_packet, ...): noted, not run
        result.ignored.append(f"line {cmd.line}: {cmd.text}")


def _check(received: list[tuple[int, bytes]], expected: dict[int, list[Expectation]], result: StfResult) -> None:
    by_port: dict[int, list[bytes]] = defaultdict(list)
    for port, data in received:
        by_port[port].append(data)
    for port in sorted(set(by_port) | set(expected)):
        got, want = by_port.get(port, []), expected.get(port, [])
        if want and want[0].pattern == "" and len(want) == 1:
            continue  # 'expect <port>' alone: anything goes
        for i, data in enumerate(got):
            if i >= len(want):
                result.failures.append(f"port {port}: unexpected packet {data.hex()}")
                continue
            result.packets_checked += 1
            problem = _compare(want[i], data.hex())
            if problem:
                result.failures.append(f"port {port}, expect at line {want[i].line}: {problem}")
        for exp in want[len(got):]:
            result.failures.append(f"port {port}: expected packet (line {exp.line}) never came")


def _compare(exp: Expectation, got: str) -> str | None:
    pattern = exp.pattern
    if len(got) < len(pattern):
        return f"packet too short: got {got}, expected {pattern}"
    if exp.exact_length and len(got) != len(pattern):
        return f"packet too long: got {got}, expected {pattern}$"
    for i, (w, g) in enumerate(zip(pattern, got)):
        if w != "*" and w != g:
            return f"mismatch at nibble {i}: got {got}, expected {pattern}"
    return None


# ---------------------------------------------------------------------- built-in target
class BuiltinTarget:
    """Runs STF commands against an in-process ``Switch``."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch
        self.outputs: list[tuple[int, bytes]] = []
        self.nodes: list[tuple[int, list[int]]] = []  # node handle -> (rid, ports), as BMv2 numbers them
        self.groups: dict[int, list[int]] = {}  # group -> node handles

    def add_entry(self, table, priority, keys, action, args) -> None:
        t, match, full, values = resolve_entry(self.switch.tables, table, keys, action, args)
        t.add(match, full, values, priority or (1 if t.needs_priority else 0))

    def set_default(self, table, action, args) -> None:
        t, _, full, values = resolve_entry(self.switch.tables, table, [], action, args)
        t.set_default(full, values)

    def multicast(self, verb: str, args: list[int]) -> None:
        if verb == "mc_node_create":
            self.nodes.append((args[0], args[1:]))
            return
        group = args[0]
        self.groups.setdefault(group, [])
        if verb == "mc_node_associate":
            self.groups[group].append(args[1])
        replicas = [(port, self.nodes[h][0]) for h in self.groups[group] for port in sorted(self.nodes[h][1])]
        self.switch.set_multicast_group(group, replicas)

    def mirroring_add(self, session: int, port: int) -> None:
        self.switch.set_clone_session(session, [(port, 0)])

    def send(self, port: int, data: bytes) -> None:
        self.outputs += [(o.port, o.data) for o in self.switch.process(port, data)]

    def received(self) -> list[tuple[int, bytes]]:
        return self.outputs


def stf_ports(text: str) -> list[int]:
    """The ports a test sends to or expects on (a real switch must open them up front)."""
    return sorted({int(c.args[0]) for c in parse_stf(text) if c.verb in ("packet", "expect")})


def run_stf_file(p4_path: str | Path, stf_path: str | Path | None = None,
                 defines: dict[str, str] | None = None, target: str = "builtin") -> StfResult:
    """Run ``X.stf`` (default: beside ``X.p4``) on the built-in target or on real BMv2."""
    p4_path = Path(p4_path)
    stf_path = Path(stf_path) if stf_path else p4_path.with_suffix(".stf")
    text = stf_path.read_text()
    from .executor.tna_switch import load_switch  # v1model or TNA, by the program's main

    switch = load_switch(p4_path, defines)
    if target == "builtin":
        return run_stf(text, BuiltinTarget(switch))
    if target == "bmv2":
        with Bmv2Target(p4_path, switch.tables, stf_ports(text), defines) as bmv2:
            return run_stf(text, bmv2)
    raise ValueError(f"unknown STF target {target!r}: builtin or bmv2")
