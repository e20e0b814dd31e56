"""The frontend-only check (``load_frontend``, ``p4target-check --frontend``), as p4c's p4test: a
program is checked against core.p4 alone, with no architecture and no ``main`` needed, while
``load_program`` (the built-in target) still refuses what it cannot run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from p4target.frontend import FrontendProgram, P4Error, load_frontend, load_program

REPO = Path(__file__).resolve().parents[1]

# An architecture of its own: a package, a parser and control type, an extern object and an extern
# function the built-in target does not implement; C has a constructor parameter.
ARCH_FREE = """\
#include <core.p4>
header h_t { bit<8> f; }
struct hs { h_t h; }
extern Checksum { Checksum(); void add<T>(in T data); bit<16> get(); }
extern bit<8> twice(in bit<8> x);
parser P(packet_in pkt, out hs hdr) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control C(inout hs hdr)(bit<8> k) {
    Checksum() ck;
    action a() { hdr.h.f = twice(k); ck.add(hdr.h.f); }
    table t { key = { hdr.h.f : exact; } actions = { a; NoAction; } }
    apply { t.apply(); }
}
parser Pa(packet_in p, out hs h);
control Ca(inout hs h);
package Top(Pa p, Ca c);
Top(P(), C(3)) main;
"""


def write(tmp_path: Path, text: str, name: str = "prog.p4") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_architecture_free_program_is_accepted(tmp_path: Path) -> None:
    prog = load_frontend(write(tmp_path, ARCH_FREE))
    assert isinstance(prog, FrontendProgram)
    assert prog.main is not None and prog.main.type.decl.name == "Top"
    with pytest.raises(P4Error, match="standard_metadata_t is not declared"):  # the target runs v1model/TNA
        load_program(write(tmp_path, ARCH_FREE))


def test_a_type_error_is_refused_at_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, ARCH_FREE.replace("twice(k)", "twice(true)"))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert str(info.value).startswith(f"{path}:11:34: argument 'x': expected bit<8>, got bool")


def test_no_main_is_accepted_in_frontend_mode_only(tmp_path: Path) -> None:
    path = write(tmp_path, ARCH_FREE.replace("Top(P(), C(3)) main;\n", ""))
    assert load_frontend(path).main is None
    with pytest.raises(P4Error, match="the program has no 'main' package instantiation"):
        load_program(path)


def test_a_block_nothing_instantiates_is_still_checked(tmp_path: Path) -> None:
    """C's constructor parameter is bound as a value of its type: ``k + true`` is a type error."""
    text = ARCH_FREE.replace("Top(P(), C(3)) main;\n", "").replace("twice(k)", "twice(k + true)")
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    assert ":11:" in str(info.value)


@pytest.mark.parametrize(("change", "line", "message"), [
    (("extern main {}\n",), 19, "main: must be a package declaration"),
    (("control Ca(inout hs h);", "control Ca(inout hs h, Pa p);"), 16, "p: parameter cannot have type parser Pa"),
    (("extern W { W(Ca c); }\n",), 19, "c: parameter cannot have type control Ca"),
    (("package Top(Pa p, Ca c);", "package Top(Pa p, Ca p);"), 17, "p: Duplicates declaration p"),
    (("control Ca(inout hs h);", "control Ca(in Checksum x);"), 16, "x: a parameter with type Checksum cannot have"),
    (("control Ca(inout hs h);", "control Ca(in hs h);"), 17, "'package Top'"),
    (("Top(P(), C(3)) main;", "Top(P()) main;"), 18, "missing an argument for parameter 'c'"),
    (("Top(P(), C(3)) main;", "Top(P(), C(3), C(4)) main;"), 17, "'package Top' takes 2 arguments, got 3"),
    (("bit<16> get();", "int get();"), 4, "int: illegal return type for method"),
    (("Checksum();", "Checksum(); void Checksum();"), 4, "Checksum: invalid constructor; cannot have a return"),
    (("apply { t.apply(); }", "apply { verify(true, error.NoError); }"), 13, "verify: may only be invoked in parsers"),
])
def test_p4c_rules_on_prototypes_and_the_package(tmp_path: Path, change: tuple[str, ...], line: int,
                                                message: str) -> None:
    text = ARCH_FREE + change[0] if len(change) == 1 else ARCH_FREE.replace(*change)
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    assert f":{line}:" in str(info.value).split(" ")[0] and message in str(info.value)


def check_cli(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("p4target-check", path=str(Path(sys.executable).parent))
    assert exe is not None, "the p4target-check console script is not installed beside this Python"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code, wherever the script was installed from
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, env=env)


def test_the_cli_flag(tmp_path: Path) -> None:
    good = write(tmp_path, ARCH_FREE.replace("Top(P(), C(3)) main;\n", ""))
    assert check_cli("--frontend", str(good)).returncode == 0
    target = check_cli(str(good))
    assert target.returncode == 1 and "no 'main'" in target.stderr
    bad = write(tmp_path, ARCH_FREE.replace("twice(k)", "twice(true)"), "bad.p4")
    refused = check_cli("--frontend", str(bad))
    assert refused.returncode == 1 and f"{bad}:11:34: argument 'x'" in refused.stderr
    assert check_cli("--frontend", "--show-c", str(good)).returncode == 2


@pytest.mark.parametrize("program", ["p4src/ina.p4", "p4src/tofino/ina_tna.p4"])
def test_what_the_target_runs_passes_the_frontend_only_check(program: str) -> None:
    """v1model's V1Switch and TNA's Switch (its @optional pipes and parser parameters) as generic packages."""
    prog = load_frontend(REPO / program)
    assert prog.main is not None and prog.main.type.decl.name in ("V1Switch", "Switch")


VIRTUAL = """\
#include <core.p4>
extern Virtual { Virtual(); abstract bit<16> f(in bit<16> ix); abstract bit<16> g(); }
control C(inout bit<16> p) {
    Virtual() v = { bit<16> f(in bit<16> ix) { return ix + 1; } IMPL_G };
    apply { p = v.f(6); }
}
"""


def test_abstract_methods_all_implemented_and_callable(tmp_path: Path) -> None:
    load_frontend(write(tmp_path, VIRTUAL.replace("IMPL_G", "bit<16> g() { return 2; }")))
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, VIRTUAL.replace("IMPL_G", "")))
    assert ":4:5: v: g abstract method not implemented" in str(info.value)


def test_a_type_variable_bound_to_string_cannot_have_a_direction(tmp_path: Path) -> None:
    text = ARCH_FREE.replace("extern bit<8> twice(in bit<8> x);", "extern void say<T>(in T data);") \
        .replace("hdr.h.f = twice(k);", 'say("hello");')
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    assert ":5:" in str(info.value) and "data: a parameter with type string cannot have a direction" in str(info.value)
    load_frontend(write(tmp_path, text.replace('say("hello");', "say(k);")))


# A package's parameters and the arguments of its instances (frontend/packages.py): p4c equates each
# argument's type with its parameter's, and reports a mismatch at the package declaration's name.
PACKAGE = """\
#include <core.p4>
struct A { bit<8> x; }
struct B { bit<8> y; }
parser Pa<H>(out H h);
control Ca<H>(inout H h);
package Top<H>(Pa<H> p, Ca<H> c);
parser MyP(out A a) { state start { transition accept; } }
control MyC(inout A a) { apply { } }
Top(MyP(), MyC()) main;
"""


@pytest.mark.parametrize(("change", "message"), [
    (("Top(MyP(), MyC())", "Top(MyC(), MyC())"), "Cannot cast implicitly type 'control MyC' to type 'parser Pa'"),
    (("Ca<H> c);", "tuple<> c);"), "Cannot cast implicitly type 'control MyC' to type 'tuple<>'"),
    (("inout A a) { apply", "inout B a) { apply"), "Cannot unify 'B' with 'A'"),
    (("Top(MyP()", "Top<B>(MyP()"), "Cannot unify 'A' with 'B'"),
    (("Top(MyP(), MyC()) main;", "Top(MyP(), MyC()) t1;\npackage S<H>(Top<H> t);\nS<B>(t1) main;"),
     "Cannot unify 'A' with 'B'"),
    (("Top(MyP(), MyC()) main;", "package S(Ca<A> c);\nS(Top(MyP(), MyC())) main;"),
     "Cannot cast implicitly type 'package Top' to type 'control Ca'"),
])
def test_package_arguments_are_unified_with_the_parameters_at_the_package(tmp_path: Path, change: tuple[str, str],
                                                                        message: str) -> None:
    assert load_frontend(write(tmp_path, PACKAGE)).main is not None
    text = PACKAGE.replace(*change)
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    package = "S" if "package S" in text else "Top"
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith(f"package {package}"))
    err = info.value
    assert (err.loc.line, err.loc.col) == (line, 9) and err.message.startswith(f"'package {package}': {message}")


def test_an_abstract_method_implemented_with_another_signature_is_refused_at_the_instance(tmp_path: Path) -> None:
    """p4c unifies the implementation with the abstract method at the instance ('v')."""
    text = VIRTUAL.replace("IMPL_G", "bit<16> g() { return 2; }").replace("f(in bit<16> ix) {", "f(inout bit<16> ix) {")
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    err = info.value
    assert (err.loc.line, err.loc.col) == (4, 15) and err.message.startswith(
        "'v': parameter 'ix' of f must be 'in bit<16>'")


def test_bit_0_is_a_type_in_frontend_mode(tmp_path: Path) -> None:
    text = "#include <core.p4>\ncontrol c(inout bit<8> x) {\n    apply { bit<0> z; x = (bit<8>)z; }\n}\n"
    load_frontend(write(tmp_path, text))
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text.replace("(bit<8>)z", "(bit<8>)(int<2>)z")))
    assert (info.value.loc.line, info.value.loc.col) == (3, 35) and "cannot cast bit<0> to int<2>" in info.value.message


def test_an_extern_constructor_argument_of_another_type_is_refused_at_the_instance(tmp_path: Path) -> None:
    """p4c reports an instance's constructor arguments at its name ('e'), here on another line."""
    text = ("#include <core.p4>\nextern E { E(bit<8> x); void run(); }\ncontrol c() {\n"
            "    E(16w3\n    ) e;\n    apply { e.run(); }\n}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    err = info.value
    assert (err.loc.line, err.loc.col, err.message) == (5, 7, "argument 'x': expected bit<8>, got bit<16>")


EXTERN_ARG = """\
#include <core.p4>
extern E { E(); bit<8> get(); }
control C1(inout bit<8> x)(E e) {
    apply { x = e.get(); }
}
control Top(inout bit<8> x);
package P(Top t);
E() e;
P(C1(e)) main;
"""


def test_an_extern_instance_passed_to_a_constructor_parameter_in_frontend_mode(tmp_path: Path) -> None:
    """p4test takes an extern instance for a parser's/control's constructor parameter of its type; the
    copy of the control is then checked with the parameter naming that instance."""
    load_frontend(write(tmp_path, EXTERN_ARG))
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, EXTERN_ARG.replace("x = e.get();", "x = e.get() + true;")))
    assert info.value.loc.line == 4


def test_a_package_value_argument_of_another_type_is_refused_at_the_package(tmp_path: Path) -> None:
    text = "#include <core.p4>\npackage V<T>(bit<8> x, T y, T z);\nV(8w1, 8w2, 8w3) main;\n"
    load_frontend(write(tmp_path, text))
    for bad, message in (("V(true, 8w2, 8w3)", "argument for parameter 'x': expected bit<8>, got bool"),
                         ("V(8w1, 8w2, true)", "Cannot unify 'bool' with 'bit<8>'")):
        with pytest.raises(P4Error) as info:
            load_frontend(write(tmp_path, text.replace("V(8w1, 8w2, 8w3)", bad)))
        err = info.value
        assert (err.loc.line, err.loc.col) == (2, 9) and err.message.startswith(f"'package V': {message}")


def test_a_package_type_variable_no_argument_binds(tmp_path: Path) -> None:
    """p4c's BindTypeVariables: a package's type parameter a default argument names only as itself."""
    path = tmp_path / "p.p4"
    path.write_text("#include <core.p4>\nstruct s_t { }\n"
                    "control Empty<H>(inout H h) { apply { } }\n"
                    "control Ct<H>(inout H h);\npackage Pk<H>(Ct<H> c = Empty<H>());\nPk() main;\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (
        6, 1, "main: could not infer a type for variable H")
    path.write_text(path.read_text().replace("Pk() main;", "Pk(Empty<s_t>()) main;"))
    load_frontend(path)


_DONTCARE = """\
#include <core.p4>
extern E<T> { E(); void f(in T arg); }
extern W<A, B> { W(A a); }
control c() {
    E<_>() e;
    apply { e.f(8w1); }
}
control proto();
package top(proto p);
top(c()) main;
"""


@pytest.mark.parametrize("change, line, col, message", [
    ((), 6, 17, "8w1: Could not infer a type for parameter arg (inferred type is don't care '_')"),
    (("E<_>() e;", "E<_, bit<8>>() e;"), 5, 5,
     "E<_, bit<8>>: Type E has 1 type parameter(s), but it is specialized with 2"),
    (("E<_>() e;", "W<W<bit<8>, bit<8>>, bit<8>>(8w1) w;"), 5, 5, "W: contains self 'W' as type argument"),
])
def test_dont_care_type_arguments(tmp_path: Path, change: tuple[str, ...], line: int, col: int,
                                  message: str) -> None:
    path = tmp_path / "p.p4"
    path.write_text(_DONTCARE.replace(*change) if change else _DONTCARE)
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, col, message)


def test_dont_care_type_argument_takes_any_type(tmp_path: Path) -> None:
    path = tmp_path / "p.p4"
    path.write_text(_DONTCARE.replace("control c() {", "control d(E<_> x) { apply { } }\ncontrol c() {")
                    .replace("apply { e.f(8w1); }", "d() di;\n    apply { di.apply(e); }")
                    .replace("E<_>() e;", "E<bit<8>>() e;"))
    load_frontend(path)


_LIST = """\
#include <core.p4>
extern E { E(list<bit<8>> data); void run(); }
control c() {
    E((list<bit<8>>) {1, 2}) e;
    apply { e.run(); }
}
control proto();
package top(proto p);
top(c()) main;
"""


@pytest.mark.parametrize("change, line, col, message", [
    (("(list<bit<8>>) {1, 2}", "(list<bit<16>>) {1, 2}"), 4, 7,
     "argument 'data': expected list<bit<8>>, got list<bit<16>>"),
    (("(list<bit<8>>) {1, 2}", "(list<bit<8>>) {1, true}"), 4, 26, "(list<bit<8>>): expected bit<8>, got bool"),
    (("apply { e.run(); }", "apply { list<bit<8>> l; bit<8> x = l[0]; }"), 5, 40,
     "Indexing l[0] applied to non-array and non-tuple type list<bit<8>>"),
])
def test_list_type(tmp_path: Path, change: tuple[str, ...], line: int, col: int, message: str) -> None:
    path = tmp_path / "p.p4"
    path.write_text(_LIST)
    load_frontend(path)
    path.write_text(_LIST.replace(*change))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, col, message)


def test_a_const_on_one_entry_is_frontend_only(write_p4) -> None:
    """p4c takes `const` on one initial entry (P4Runtime's is_const); the built-in target does not,
    after the check."""
    path = write_p4(locals="action a() { } table t { key = { hdr.h.a : exact; } actions = { a; } "
                           "entries = { const 8w1 : a(); 8w2 : a(); } }", body="t.apply();")
    load_frontend(path)
    with pytest.raises(P4Error, match="a 'const' on one table entry is not supported by the built-in target"):
        load_program(path)


@pytest.mark.parametrize("text, line, col, message", [
    ("control c() {\n  action b(out bit<8> x = ...) { }\n  apply { } }\n", 2, 12,
     "x: out parameters cannot have default values"),
    ("#include <core.p4>\ntype tuple<bit<8>> T;\n", 2, 20, "T: `type' can only be applied to base types"),
    ("control c<p>(inout bit<8> p) { apply { } }\n", 1, 14, "Re-declaration of p with different type: "),
    ("control c<p>(inout bit<8> x)(bit<8> p) { apply { } }\n", 1, 30, "p duplicates p."),
    ("control c() { apply { if ((...) &&\n(...)) { } } }\n", 1, 27, "... && ...: not defined on ANYTYPE and ANYTYPE"),
    ("extern e { abstract tuple<bit<8>, void> f(); }\n", 1, 35,
     "Field 'f1' of 'struct tuple_0' cannot have type 'void'"),
    ("extern void f<T>(in T x);\ncontrol c() { apply {\nf({ a = 8w1 }); } }\n", 3, 3,
     "unknown struct: Cannot infer type for unknown struct type initializer"),
    ("struct s { error e; }\n", 1, 12, "error: declaration not found"),
    ("package X();\ncontrol t() {\n  X() x = {};\n  apply { } }\n", 3, 11,
     "BlockStatement: initializers only allowed for extern instances"),
    ("type bit<8> T8;\nenum T8 E { A = 1 }\n", 2, 6, "T8: Illegal type for enum; only bit<> and int<> are allowed; "
     "note that type-declared types are not allowed even if they are fixed-size"),
    ("extern E { E(tuple<string> x); }\n", 1, 20,
     "Field 'f0' of the struct for tuple<string> cannot have type 'string'"),
    ("control c() {\n  action a(int x) { }\n  apply { } }\n", 2, 12, "x: actions cannot have parameters with type int"),
    ("extern E { E(); }\ncontrol c() {\n  action a(E e) { }\n  apply { } }\n", 3, 12,
     "E: Action parameters cannot have extern types"),
    ("extern ct { void run(); }\nvoid f(tuple<bit<8>, ct> t) { }\n", 2, 22, "ct: not supported as a tuple field"),
    ("package pk();\npackage g(tuple<pk> b);\n", 2, 17, "pk: not supported as a tuple field"),
    ("extern e { e(); }\nparser p()() {\n  e() ee = {\n    bit<1> f<T, T>(in bit<1> a) { return a; }\n  };\n"
     "  state start { transition accept; } }\n", 4, 17, "T: Duplicates declaration T"),
    ("control c<T>(in T x) { apply { } }\ncontrol d() { c<bit<8>, bit<8>>() ci; apply { } }\n", 2, 15,
     "c<bit<8>, bit<8>>: Type c has 1 type parameter(s), but it is specialized with 2"),
    ("#include <core.p4>\ncontrol c() { apply { bool b =\n(match_kind)(...) == exact; } }\n", 3, 2,
     "match_kind: cast not supported"),
    ("control c() { apply { bool b =\n{ a = 8w1 } == { a = 8w1 }; } }\n", 2, 1,
     "{ a = 8w1 } == { a = 8w1 }: cannot compare structure-valued expressions with unknown types"),
])
def test_p4c_type_rules_met_on_the_way(tmp_path: Path, text: str, line: int, col: int, message: str) -> None:
    """Rules the constructs p4c's grammar takes (type variables, '...', structure-valued expressions,
    list<T>, '_') reach now they parse: each refused at p4c's line with p4c's meaning."""
    path = tmp_path / "p.p4"
    path.write_text(text)
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, col, message)


def test_comparing_list_expressions_is_frontend_only(tmp_path: Path) -> None:
    path = tmp_path / "p.p4"
    path.write_text("control c() { apply { bool b = { 1, 2 } == { 1, 2 }; } }\n")
    load_frontend(path)


_CONST_STRUCT = """\
#include <core.p4>
struct s_t { bit<8> a; bit<8> b; }
const s_t K = { b = 2, a = 1 };
const tuple<bit<8>, bit<8>> TUP = { 3, 4 };
const bool OK = static_assert(K.b == {b} && TUP[1] == 4);
control c(out bool z) {{ apply {{ s_t v = {{ 1, 2 }}; z = v == {{ 1, 2 }}; }} }}
"""


def test_constant_structs_and_tuples_fold_in_the_frontend(tmp_path: Path) -> None:
    """p4c folds a constant struct's field and a constant tuple's element (frontend mode)."""
    path = tmp_path / "p.p4"
    path.write_text(_CONST_STRUCT.replace("{b}", "2").replace("{{", "{").replace("}}", "}"))
    load_frontend(path)
    path.write_text(_CONST_STRUCT.replace("{b}", "1").replace("{{", "{").replace("}}", "}"))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert info.value.loc.line == 5


_GENERIC_INSTANCE = """\
#include <core.p4>
control c1<T>(inout T x) { apply { } }
control c2(inout bit<8> y) {
    c1<bit<8>>() c;
    c1<bool>() d;
    apply { c.apply(y); c1.apply(y); }
}
control proto(inout bit<8> y);
package top(proto p);
top(c2()) main;
"""


def test_an_instance_of_a_generic_control_binds_its_type_arguments(tmp_path: Path) -> None:
    path = tmp_path / "p.p4"
    path.write_text(_GENERIC_INSTANCE)
    load_frontend(path)
    path.write_text(_GENERIC_INSTANCE.replace("c.apply(y);", "d.apply(y);"))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (6, 21, "argument 'x': expected bool, "
                                                                                     "got bit<8>")


_PACKAGE_VARS = """\
#include <core.p4>
struct h_t { }
struct m_t { }
parser Pa<H, M>(out H h, inout M m);
control Ct<H, M>(inout H h, inout M m);
package Pk<H, M>(Pa<H, M> p, Ct<H, M> c);
parser p(out h_t h, inout m_t m) { state start { transition accept; } }
control c(inout h_t h, inout m_t m) { apply { } }
Pk(p(), c()) main;
"""


@pytest.mark.parametrize("change, message", [
    (("control c(inout h_t h, inout m_t m)", "control c(inout m_t m, inout h_t h)"),
     "'package Pk': Cannot unify 'm_t' with 'h_t'"),
    (("Pk(p(), c()) main;", "Pk<int, m_t>(p(), c()) main;"),
     "'package Pk': 'int' type can only be unified with 'int', 'bit<>', or 'signed<>' types, not with 'h_t'"),
    (("package Pk<H, M>(Pa<H, M> p, Ct<H, M> c);", "package Pk<H, M>(Pa<H, M> p, tuple<> c);"),
     "'package Pk': Cannot cast implicitly type 'control c' to type 'tuple<>'"),
])
def test_a_package_type_variable_takes_one_type(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    """p4c's unification of a package's arguments: at the package, "'package Pk'"."""
    path = tmp_path / "p.p4"
    path.write_text(_PACKAGE_VARS)
    load_frontend(path)
    path.write_text(_PACKAGE_VARS.replace(*change))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert info.value.loc.line == 6 and info.value.message.startswith(message)


def test_a_package_instance_argument_brings_its_type_variables(tmp_path: Path) -> None:
    text = _PACKAGE_VARS.replace("Pk(p(), c()) main;", "Pk(p(), c()) pk;\npackage Sw<H>(Pk<H, m_t> one);\n"
                                                        "Sw<h_t>(pk) main;")
    path = tmp_path / "p.p4"
    path.write_text(text)
    load_frontend(path)
    path.write_text(text.replace("Sw<h_t>(pk) main;", "Sw<tuple<>>(pk) main;"))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert info.value.loc.line == 10
    assert info.value.message.startswith("'package Sw': Cannot cast implicitly type 'h_t' to type 'tuple<>'")


@pytest.mark.parametrize("body", ["hdr.h.a = hdr.h.c[12 +: 8];", "hdr.h.c[hdr.h.b +: 8] = 1;",
                                  "hdr.h.a = hdr.h.c[hdr.h.b +: 8];"])
def test_an_indexed_slice_the_target_does_not_run(write_p4, body: str) -> None:
    """p4c takes a run-time lo and a slice past the width (only lo must be within it); the target
    refuses them after the check."""
    path = write_p4(body=body)
    load_frontend(path)
    with pytest.raises(P4Error, match="this indexed slice is not supported by the built-in target"):
        load_program(path)


def test_a_parameter_named_as_its_parser(tmp_path: Path) -> None:
    """`parser p(packet_in p, ...)`: p4c's scopes make `p.extract` the parameter's method."""
    path = tmp_path / "p.p4"
    path.write_text("#include <core.p4>\nheader h_t { bit<8> f; }\nstruct hs { h_t h; }\n"
                    "parser p(packet_in p, out hs h) { state start { p.extract(h.h); transition accept; } }\n"
                    "parser Pa(packet_in b, out hs h);\npackage Top(Pa a);\nTop(p()) main;\n")
    load_frontend(path)


def test_an_extern_instance_infers_its_type_arguments(tmp_path: Path) -> None:
    """p4c's unification: `R(16w256) r;` is an R<bit<16>>; a type no argument binds is refused."""
    text = "extern R<T> { R(T min); T get(); }\ncontrol c(out bit<16> x) {\n    R(16w256) r;\n" \
           "    apply { x = r.get(); } }\n"
    path = tmp_path / "p.p4"
    path.write_text(text)
    load_frontend(path)
    path.write_text(text.replace("R(16w256) r;", "R(8w1) r;"))
    with pytest.raises(P4Error, match="assignment: expected bit<16>, got bit<8>"):
        load_frontend(path)


@pytest.mark.parametrize("decl", ["extern E { E(bit<8> data = ...); }",
                                  "control C(in bit<8> x)(bool b = ...) { apply { } }"])
def test_a_parameter_default_of_dots_has_no_default_value(tmp_path: Path, decl: str) -> None:
    """p4c never unifies a parameter's default with the parameter's type: its DefaultValues pass
    finds no type for `...` there (after the type checker's errors)."""
    text = f"#include <core.p4>\n{decl}\n"
    with pytest.raises(P4Error) as info:
        load_frontend(write(tmp_path, text))
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (
        2, decl.index("...") + 1, "...: could not find default value")
    with pytest.raises(P4Error) as info:  # a type error in the program comes first
        load_frontend(write(tmp_path, text + "const bit<8> k = true;\n"))
    assert info.value.loc.line == 3
