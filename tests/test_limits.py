"""Sizes written in a program (widths, literal widths, shifts, stack sizes, indexes, extern
sizes) are refused as limits, at the construct that asks for them, before any integer of that
size is built: each of these programs used to hang or die in a MemoryError."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, ast, load_program
from p4target.frontend.errors import as_p4_errors


def _at(path: Path, needle: str) -> tuple[int, int]:
    """(line, column) of the first ``needle`` in the program: where the error must point."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(f"{needle!r} is not in the program")


# (program pieces, the text the error points at, the message)
CASES = {
    "p4c: a width beyond a C int": (
        {"decls": "const bit<12301923123132> too_large = 0;"},
        "12301923123132", "12301923123132: this implementation does not support bitstrings this large"),
    "p4c: a varbit width beyond a C int": (
        {"decls": "header v_t { varbit<4294967296> v; }"},
        "4294967296", "4294967296: this implementation does not support bitstrings this large"),
    "p4c: a negative width": (
        {"decls": "const bit<(-3)> x = 0;"}, "bit<(-3)>", "Width -3 of type cannot be negative"),
    "p4c: a signed zero width": (
        {"decls": "const int<0> x = 0;"}, "int<0>", "Width of signed type cannot be zero"),
    "p4c: a literal wider than 2048 bits": (
        {"body": "hdr.h.a = (bit<8>)3000w5;"}, "3000w5", "3000w5: 3000 size too large"),
    "p4c: an unsized shift folded past 2048 bits": (
        {"body": "hdr.h.a = (bit<8>)(1985245330 << 903012108);"},
        "1985245330 << 903012108", "1985245330 << 903012108: Compiler only supports widths up to 2048"),
    "p4c: a constant concatenation past 2048 bits": (
        {"decls": "const bit<2000> a = 1; const bit<4000> b = a ++ a;"},
        "a ++ a", "a ++ a: Compiler only supports widths up to 2048"),
    "p4c: a constant slice past 2048 bits": (
        {"decls": "const bit<4096> a = 1; const bit<3001> b = a[3000:0];"},
        "a[3000:0]", "a[3000:0]: Compiler only supports widths up to 2048"),
    "p4c: a shift amount beyond a C int": (
        {"body": "hdr.h.a = 8w1 << 100000000000;"}, "100000000000", "100000000000: Value too large for int"),
    "p4c: a stack size beyond a C int": (
        {"locals": "h_t[1231092310293] st;"}, "1231092310293", "1231092310293: Value too large for int"),
    "p4c: a stack index beyond a C int": (
        {"locals": "h_t[4] st;", "body": "st[1231092310293].a = 1;"},
        "1231092310293", "1231092310293: Value too large for int"),
    "p4c: a slice bound beyond a C int": (
        {"body": "hdr.h.a[4294967296:0] = 1;"}, "4294967296", "4294967296: Value too large for int"),
    "target: a type wider than a frame": (
        {"decls": "const bit<100000000> x = 1;"}, "bit<100000000>",
        "bit<100000000> is wider than the built-in target supports (524288)"),
    "target: a cast to a type wider than a frame": (
        {"body": "hdr.h.a = (bit<8>)(bit<1000000000>)hdr.h.a;"}, "bit<1000000000>",
        "bit<1000000000> is wider than the built-in target supports (524288)"),
    "target: a run-time concatenation wider than a frame": (
        {"locals": "bit<300000> x = 0;", "body": "hdr.h.a = (bit<8>)(x ++ x);"}, "x ++ x",
        "bit<600000> is wider than the built-in target supports (524288)"),
    "target: a stack with more elements than a frame has bytes": (
        {"locals": "h_t[1000000000] st;"}, "1000000000",
        "a stack of 1000000000 elements is larger than the built-in target supports (65536)"),
    "target: squaring unsized constants past a frame": (
        {"decls": "const int a = 1 << 2000; const int b = a * a; const int c = b * b; const int d = c * c;"
                  " const int e = d * d; const int f = e * e; const int g = f * f; const int h = g * g;"
                  " const int i = h * h; const int j = i * i;"},
        "i * i", "i * i: the product is wider than the built-in target supports (524288 bits)"),
    "target: a register of four billion cells": (
        {"locals": "register<bit<32>>(32w4000000000) r;"}, "32w4000000000",
        "r: 4000000000 cells is more than the built-in target supports (1048576)"),
    "target: a table of a trillion entries": (
        {"locals": "action a() { } table t { key = { hdr.h.a: exact; } actions = { a; } size = 1231092310293; }",
         "body": "t.apply();"}, "1231092310293",
        "t: a size of 1231092310293 entries is more than the built-in target supports (1048576)"),
}


@pytest.mark.parametrize("pieces, at, message", CASES.values(), ids=CASES.keys())
def test_a_limit_is_refused_at_its_construct_and_fast(write_p4, pieces, at, message):
    path = write_p4(**pieces)
    started = time.monotonic()
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert time.monotonic() - started < 1.0
    assert info.value.message == message
    assert (info.value.loc.line, info.value.loc.col) == _at(path, at)


def test_sizes_within_the_limits_still_load_and_fold(write_p4):
    """The guards cost nothing below the limits: a shift of a fixed-width constant past its
    width folds to 0 without building the wide value, and long literals still parse."""
    path = write_p4(decls="const bit<8> gone = 8w1 << 2000;\n"
                          "const bit<4096> wide = (bit<4096>)1 << 2000 << 2000;\n"
                          "const int many_digits = " + "9" * 5000 + ";\n"
                          "const bit<8> low = (bit<8>)many_digits;",
                    locals="bit<524288> widest = 0; h_t[65536] st; register<bit<8>>(1048576) r;",
                    body="hdr.h.a = hdr.h.a << 100000;")
    consts = {d.name: d.init.value for d in load_program(path).top_level if isinstance(d, ast.ConstDecl)}
    assert consts["gone"] == 0
    assert consts["wide"] == 1 << 4000
    assert consts["low"] == 10 ** 5000 - 1 & 0xFF


def test_the_widest_type_runs_on_a_packet(write_p4):
    """bit<524288> values and constants (printed in hex by the code generators) work end to end."""
    sw = Switch.from_file(write_p4(locals="bit<524288> w = 3;",
                                   body="w = w * w * (w << 524000); hdr.h.a = w[524007:524000]; sm.egress_spec = 1;"))
    out = sw.process(0, bytes(4))
    assert out[0].data[0] == 27


def test_a_memory_error_is_a_clear_message_not_an_unsupported_construct():
    with pytest.raises(P4Error) as info, as_p4_errors():
        raise MemoryError()
    assert info.value.message == "the program needs more memory than the built-in target has"


ARRAYS = {
    "an index beyond a C int comes before the array's own refusal": (
        {"decls": "struct s_t { bit<8> x; }", "locals": "s_t[5] arr; h_t[5] st;",
         "body": "hdr.h = st[1231092310293];"},
        "1231092310293", "1231092310293: Value too large for int"),
    "p4c: 'next' on an array of structs": (
        {"decls": "struct s_t { bit<8> x; }", "locals": "s_t[5] arr;", "body": "hdr.h.a = arr.next.x;"},
        "arr.next", "arr.next: 'next' can only be used on header stacks"),
    "p4c: 'push_front' on an array of bits": (
        {"locals": "bit<8>[4] arr;", "body": "arr.push_front(1);"},
        "arr.push_front", "arr.push_front: 'push_front' can only be used on header stacks"),
    "target: an array of structs": (
        {"decls": "struct s_t { bit<8> x; }\nstruct w_t { s_t[2] arr; }"}, "s_t[2]",
        "arrays of s_t are not supported by the built-in target (only header stacks)"),
}


@pytest.mark.parametrize("pieces, at, message", ARRAYS.values(), ids=ARRAYS.keys())
def test_arrays_of_other_types_pass_p4cs_rules_before_the_targets_refusal(write_p4, pieces, at, message):
    """P4-16 1.2.4 allows arrays of any type; p4c's errors on their uses come first, then ours."""
    path = write_p4(**pieces)
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert info.value.message == message
    assert (info.value.loc.line, info.value.loc.col) == _at(path, at)
