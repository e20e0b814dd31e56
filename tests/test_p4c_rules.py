"""p4c's semantic refusals (issue 64): each rule refuses at the line and column p4c names,
with p4c's meaning, and in p4c's pass order when a later pass also objects."""

from __future__ import annotations

import pytest

from p4target.frontend import P4Error, load_frontend, load_program

from .conftest import SKELETON


def _refusal(write_p4, marker: str, **parts: str) -> tuple[P4Error, int, int]:
    """The error loading the program, and the (line, column) of ``marker`` in its text."""
    path = write_p4(**parts)
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if marker in text)
    with pytest.raises(P4Error) as info:
        load_program(path)
    return info.value, line, lines[line - 1].index(marker) + 1


def _assert_at(write_p4, marker: str, message: str, **parts: str) -> None:
    err, line, col = _refusal(write_p4, marker, **parts)
    assert (err.loc.line, err.loc.col, err.message) == (line, col, message)


def test_default_action_data_must_be_constant(write_p4):
    _assert_at(write_p4, "(bit<8>)hdr.h.b", "(bit<8>)hdr.h.b: action argument must be a compile-time constant",
               locals="action a(bit<8> v) { hdr.h.a = v; }\n"
                      "table t { key = { hdr.h.a : exact; } actions = { a; }\n"
                      "default_action = a((bit<8>)hdr.h.b); }",
               body="t.apply();")


def test_int_parameter_must_be_directionless(write_p4):
    _assert_at(write_p4, "in int val", "val: parameters with type int must be directionless",
               locals="action a(in int val) { hdr.h.a = hdr.h.a + val; }", body="a(1);")


def test_control_instantiated_at_top_level(write_p4):
    _assert_at(write_p4, "Cx() cx;", "cx: cannot instantiate at top-level",
               decls="control Cx() { apply { } }\nCx() cx;")


def test_shift_by_a_newtype(write_p4):
    _assert_at(write_p4, "amount;", "amount: The right operand of shift must be either an expression of type "
               "bit<S> or a compile-time known value that is a non-negative integer, but is Amount_t",
               decls="type bit<8> Amount_t;", locals="Amount_t amount = (Amount_t)8w1;",
               body="hdr.h.a = hdr.h.a <<\namount;")


_SWITCH_ACTION = "action {name}() {{ switch (hdr.h.a) {{ 8w1: {{ hdr.h.b = 1; }} }} }}\n"


def test_switch_in_a_used_action_is_refused_by_the_midend(write_p4):
    _assert_at(write_p4, "switch (hdr.h.a)", "SwitchStatement: switch statements not supported in actions on "
               "this target", locals=_SWITCH_ACTION.format(name="a"), body="a();")


def test_switch_in_an_unused_action_is_accepted(write_p4):
    load_program(write_p4(locals=_SWITCH_ACTION.format(name="unused")))


_SCOPED_TABLE = """action a(bit<8> v) {{ hdr.h.a = v; }}
action b() {{ }}
table t {{ key = {{ hdr.h.a : exact; }} actions = {{ @tableonly a; @defaultonly b; }}
  {first}
  {second}
}}"""


@pytest.mark.parametrize("first, second, marker, message", [
    ("const entries = { 1 : b(); }", "default_action = a(1);", "1 : b();",
     "Entry: Action marked with defaultonly used in table"),
    ("default_action = a(1);", "const entries = { 1 : b(); }", "a(1);",
     "default_action: Action marked with tableonly used as default action"),
])
def test_defaultonly_and_tableonly_actions(write_p4, first, second, marker, message):
    _assert_at(write_p4, marker, message, locals=_SCOPED_TABLE.format(first=first, second=second),
               body="t.apply();")


def test_complex_key_needs_a_name(write_p4):
    _assert_at(write_p4, "hdr.h.a + hdr.h.b :", "hdr.h.a + hdr.h.b: Complex key expression requires a @name annotation",
               locals="table t { key = { hdr.h.a + hdr.h.b : exact; } actions = { NoAction; } }", body="t.apply();")


def test_complex_key_with_a_name(write_p4):
    load_program(write_p4(locals='table t { key = { hdr.h.a + hdr.h.b : exact @name("sum"); } '
                                 'actions = { NoAction; } }',
                          body="t.apply();"))


def test_parser_that_never_ends(write_p4):
    text = write_p4().read_text().replace("transition accept;", "transition loop; }\n    state loop { transition loop;")
    path = write_p4(text=text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith("parser P("))
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert (info.value.loc.line, info.value.message) == (line, "parser P: Parser never reaches accept or reject state")


@pytest.mark.parametrize("mask, refused", [("0xE1", True), ("0x1F0", False), ("0xF0", False), ("0", False)])
def test_lpm_entry_mask_must_be_a_prefix(write_p4, mask, refused):
    parts = dict(locals="action a() { }\ntable t { key = { hdr.h.a : lpm; } actions = { a; }\n"
                        f"const entries = {{ 0x11 &&& {mask} : a(); }} }}", body="t.apply();")
    if refused:
        _assert_at(write_p4, "0x11 &&&", "17 &&& 225 invalid mask for LPM key", **parts)
    else:
        load_program(write_p4(**parts))


def test_table_applied_in_an_action_argument(write_p4):
    _assert_at(write_p4, "t2.apply().hit", "t2.apply(): table invocation in action argument",
               locals="action a(in bit<8> v) { hdr.h.a = v; }\n"
                      "table t2 { key = { hdr.h.a : exact; } actions = { NoAction; } }\n"
                      "table t1 { key = { hdr.h.a : exact; } actions = {\n"
                      "a(t2.apply().hit ? hdr.h.b : hdr.h.a); } }", body="t1.apply();")


@pytest.mark.parametrize("props, marker, message", [
    ("const entries = { 1 : a(); }\nkey = { hdr.h.a : exact; }", "entries =",
     "EntriesList: Entries list must be after table key Key"),
    ("key = { hdr.h.a : exact; }\nkey = { hdr.h.b : exact; }", "key = { hdr.h.b", "key: Duplicates declaration key"),
    ("key = { hdr.h.a : exact; } size = 4;\nsize = 8;", "size = 8", "size: Duplicates declaration size"),
])
def test_table_property_order_and_duplicates(write_p4, props, marker, message):
    _assert_at(write_p4, marker, message, locals="action a() { }\ntable t { actions = { a; }\n" + props + " }",
               body="t.apply();")


def test_entries_need_a_key(write_p4):
    err, line, _ = _refusal(write_p4, "table t", locals="action a() { }\ntable t { actions = { a; }\n"
                            "const entries = { _ : a(); } }", body="t.apply();")
    assert (err.loc.line, err.message) == (line, "Entries cannot be specified for a table with no key t")


@pytest.mark.parametrize("decls, locals, marker, message", [
    ('@name("x") action t1() { }\n@name(".x") action t2() { }', "", "t2()", ".x: conflicting control plane name: x"),
    ('action x() { }', '@name(".x") action a() { }', "a()", ".x: conflicting control plane name: x"),
    ("", '@name(".y") action a() { }\n@name(".y") action b() { }', "b()", ".y: conflicting control plane name: .y"),
    ("", '@name("y") action a() { }\n@name(".I.y") action b() { }', "b()", ".I.y: conflicting control plane name: y"),
])
def test_actions_with_one_control_plane_name(write_p4, decls, locals, marker, message):
    _assert_at(write_p4, marker, message, decls=decls, locals=locals)


@pytest.mark.parametrize("version, message", [
    ("-5", "-5: expected v1model version to be a non-negative number"),
    ("20000101", "20000101: unknown v1model version; initial supported version is 20180101, latest is 20200408"),
    ("20200408", None),
])
def test_v1model_version(write_p4, version, message):
    text = write_p4().read_text().replace("#include <v1model.p4>", f"#define V1MODEL_VERSION {version}\n"
                                          "#include <v1model.p4>")
    path = write_p4(text=text)
    if message is None:
        load_program(path)
        return
    with pytest.raises(P4Error) as info:
        load_program(path)
    loc = info.value.loc  # at p4c's line of its v1model.p4
    assert (loc.file.endswith("v1model.p4"), loc.line, loc.col, info.value.message) == (True, 48, 35, message)


@pytest.mark.parametrize("name, refused", [('@name(".t0") ', True), ("", False)])
def test_one_p4info_name_for_two_tables(write_p4, name, refused):
    sub = ("control Sub(inout headers hdr) {\n"
           f"    {name}table t0 {{ key = {{ hdr.h.a : exact; }} actions = {{ NoAction; }} }}\n"
           "    apply { t0.apply(); } }")
    parts = dict(decls=sub, locals="Sub() s1; Sub() s2;", body="s1.apply(hdr); s2.apply(hdr);")
    if refused:
        _assert_at(write_p4, "@name(\".t0\") table t0",
                   "Name 't0' is used for multiple table objects in the P4Info message", **parts)
    else:
        load_program(write_p4(**parts))


def test_action_listed_twice(write_p4):
    _assert_at(write_p4, "a; }", "a: Duplicates declaration a",
               locals="action a() { }\ntable t { key = { hdr.h.a : exact; } actions = { a;\na; } }", body="t.apply();")


@pytest.mark.parametrize("subject, labels", [
    ("t.apply().action_run", "a: { } default: { } default: { }"),
    ("hdr.h.a", "1: { } default: { } default: { }"),
])
def test_switch_with_two_default_labels(write_p4, subject, labels):
    _assert_at(write_p4, "switch (", "switch has multiple 'default' labels:",
               locals="action a() { }\ntable t { key = { hdr.h.a : exact; } actions = { a; } }",
               body=f"switch ({subject}) {{ {labels} }}")


def test_duplicate_property_before_missing_actions(write_p4):
    _assert_at(write_p4, "key = { hdr.h.b", "key: Duplicates declaration key",
               locals="table t { key = { hdr.h.a : exact; }\nkey = { hdr.h.b : exact; } }")


@pytest.mark.parametrize("decls, marker, name", [
    ("enum Color { red, blue,\nred }", "red }", "red"),
    ("enum bit<8> Kind { one = 1, two = 2,\n  one = 3 }", "one = 3", "one"),
    ("error { Oops,\nOops }", "Oops }", "Oops"),
    ("error {\nPacketTooShort }", "PacketTooShort }", "PacketTooShort"),  # core.p4 declares it
])
def test_member_declared_twice(write_p4, decls, marker, name):
    _assert_at(write_p4, marker, f"{name}: Duplicates declaration {name}", decls=decls)


_PRIORITY_TABLE = ("action s() {{ }}\ntable t {{ key = {{ hdr.h.a : {kind}; }} actions = {{ s; }}\n"
                   "entries = {{ priority = {first} : 1 : s(); 2 : s(); }} }}")


def test_priorities_for_keys_that_need_none(write_p4):
    _assert_at(write_p4, "{ hdr.h.a : exact", "Key key match type does not require priorities, but some are specified",
               locals=_PRIORITY_TABLE.format(kind="exact", first="3"), body="t.apply();")


@pytest.mark.parametrize("first, refused", [("1", True), ("2", False)])
def test_priority_computation_overflow(write_p4, first, refused):
    parts = dict(locals=_PRIORITY_TABLE.format(kind="ternary", first=first), body="t.apply();")
    if refused:
        _assert_at(write_p4, "t { key = { hdr.h.a : ternary", "t Overflow in priority computation", **parts)
    else:
        load_program(write_p4(**parts))


@pytest.mark.parametrize("label, shown", [("4w1", "'4w1' with type 'bit<4>'"), ("1", "'1' with type 'int'"),
                                          ("false", "'false' with type 'bool'")])
def test_switch_label_of_another_type(write_p4, label, shown):
    _assert_at(write_p4, "kind) {", f"'kind' with type 'Kind' cannot be compared to {shown}",
               decls="enum bit<4> Kind { one = 1 }", locals="Kind kind = Kind.one;",
               body=f"switch (kind) {{ {label}: {{ }} default: {{ }} }}")


def test_entry_errors_of_the_type_checker_before_a_default_exact_key(write_p4):
    _assert_at(write_p4, "(1, 2) : a()", "entry has 2 key values, table has 1 keys",
               locals="action a() { }\ntable t { key = { hdr.h.a : exact; } actions = { a; }\n"
                      "const entries = { _ : a();\n(1, 2) : a(); } }", body="t.apply();")
    _assert_at(write_p4, "_ : a()", "an exact key needs a value",
               locals="action a() { }\ntable t { key = { hdr.h.a : exact; } actions = { a; }\n"
                      "const entries = { _ : a(); } }", body="t.apply();")


def test_unknown_action_of_an_entry_before_its_type_errors(write_p4):
    _assert_at(write_p4, "missing()", "missing: declaration not found",
               locals="action a() { }\ntable t { key = { hdr.h.a : ternary; } actions = { a; }\n"
                      "const entries = { 1 .. 2 : a();\n1 : missing(); } }", body="t.apply();")


@pytest.mark.parametrize("cases, message", [
    ("(1, 2): accept;", "'SelectExpression': keyset has 2 elements, select has 1"),
    ("true: accept;", "'SelectExpression': keyset: expected bit<8>, got bool"),
])
def test_select_keyset_that_does_not_fit(write_p4, cases, message):
    text = write_p4().read_text().replace("transition accept;",
                                          f"transition select(hdr.h.a) {{\n{cases} default: accept; }}")
    path = write_p4(text=text)
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if "transition select(" in s)
    with pytest.raises(P4Error) as info:
        load_program(path)
    loc = info.value.loc
    assert (loc.line, loc.col, info.value.message) == (line, lines[line - 1].index("select(") + 1, message)


@pytest.mark.parametrize("target, message", [("nowhere", "nowhere: declaration not found"),
                                             ("vs", "SelectCase must be state")])
def test_select_case_to_something_not_a_state(write_p4, target, message):
    text = write_p4().read_text().replace(
        "state start {", "value_set<bit<8>>(4) vs;\n    state start {").replace(
        "transition accept;", f"transition select(hdr.h.a) {{\n1: {target}; default: accept; }}")
    path = write_p4(text=text)
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if s.startswith(f"1: {target}"))
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, 1, message)


def test_select_range_of_two_widths_stays_at_the_element(write_p4):
    text = write_p4().read_text().replace("transition accept;",
                                          "transition select(hdr.h.a) {\n8w1 .. 4w3: accept; default: accept; }")
    with pytest.raises(P4Error) as info:
        load_program(write_p4(text=text))
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith("8w1 .. 4w3"))
    assert info.value.loc.line == line and not info.value.message.startswith("'SelectExpression'")


def _assert_at_both(write_p4, marker: str, message: str, **parts: str) -> None:
    """As ``_assert_at``, in the target mode and in the frontend-only mode (issue 64)."""
    _assert_at(write_p4, marker, message, **parts)
    path = write_p4(**parts)
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err, (_, line, col) = info.value, _refusal(write_p4, marker, **parts)
    assert (err.loc.line, err.loc.col, err.message) == (line, col, message)


def test_entries_on_a_table_with_an_empty_key(write_p4):
    _assert_at_both(write_p4, "table t", "Entries cannot be specified for a table with no key t",
                    locals="action a() { }\ntable t { key = { } actions = { a; }\nconst entries = { _ : a(); } }",
                    body="t.apply();")


def test_switch_label_after_default(write_p4):
    _assert_at_both(write_p4, "switch (t.apply()", "switch label b follows 'default' label, which is not allowed.",
                    locals="action a() { }\naction b() { }\ntable t { actions = { a; b; } }",
                    body="switch (t.apply().action_run) { default: b: { } }")


def test_function_calls_an_action(write_p4):
    _assert_at_both(write_p4, "a();", "a(): Functions cannot call actions",
                    decls="action a() { }\nvoid f() {\na(); }")


def test_control_applied_in_an_action(write_p4):
    _assert_at_both(write_p4, "sub.apply();", "sub.apply(): apply cannot be called from actions",
                    decls="control Sub() { apply { } }",
                    locals="Sub() sub;\naction a() {\nsub.apply(); }", body="a();")


_TABLE_T = "action a() { }\ntable t { actions = { a; } }"


def test_apply_results_compared(write_p4):
    _assert_at_both(write_p4, "t.apply() ==", "t.apply() and t.apply(): table application results cannot be compared",
                    locals=_TABLE_T, body="if (t.apply() == t.apply()) { }")


def test_action_run_outside_a_switch(write_p4):
    _assert_at_both(write_p4, "t.apply().action_run", "t.apply().action_run: only allowed in switch statements",
                    locals=_TABLE_T, body="bool b = t.apply().action_run == t.apply().action_run;")


def test_default_action_before_the_actions_list(write_p4):
    _assert_at_both(write_p4, "table t", "t has no action list, so it cannot invoke 'a()'",
                    locals="action a() { }\ntable t { default_action = a;\nactions = { a; } }", body="t.apply();")


def test_default_action_rebinds_a_listed_argument(write_p4):
    _assert_at_both(write_p4, "hdr.h.b, 1)", "hdr.h.b: argument does not match declaration in actions list: hdr.h.a",
                    locals="action a(inout bit<8> x, bit<8> v) { x = v; }\n"
                           "table t { actions = { a(hdr.h.a); }\ndefault_action = a(hdr.h.b, 1); }",
                    body="t.apply();")


def test_entry_rebinds_a_listed_constant(write_p4):
    _assert_at_both(write_p4, "2)", "(bit<8>)8w2: argument does not match declaration in actions list: (bit<8>)8w1",
                    locals="action a(in bit<8> v) { hdr.h.b = v; }\n"
                           "table t { key = { hdr.h.a : exact; } actions = { a(1); }\n"
                           "const entries = { 8w1 : a(\n2); } }",
                    body="t.apply();")


def test_extern_methods_that_cannot_be_told_apart(write_p4):
    _assert_at_both(write_p4, "void f(bit<8> b, bit<8> a);", "Duplicate declaration of f: previous declaration at ",
                    decls="extern X {\nX();\nvoid f(bit<8> a, bit<8> b);\nvoid f(bit<16> a);\n"
                          "void f(bit<8> b, bit<8> a);\n}")


def test_a_top_level_name_is_a_type_or_a_value(write_p4):
    _assert_at_both(write_p4, "bool foo()", "Re-declaration of foo with different type: ",
                    decls="control foo(inout bit<8> x) { apply { } }\nbool foo() { return true; }")


def test_local_shadows_a_parameter(write_p4):
    _assert_at_both(write_p4, "headers hdr = hdr;", "declaration of 'hdr' shadows a parameter 'hdr'",
                    body="headers hdr = hdr;")


_HALF_RETURN = "bit<8> {name}(in bit<8> x) {{ if (x > 1) {{ return x; }} }}\n"


def test_function_without_a_return_on_every_path(write_p4):
    _assert_at_both(write_p4, "bit<8> f(", "Function 'f' does not return a value on all paths",
                    decls=_HALF_RETURN.format(name="f"), body="hdr.h.a = f(hdr.h.a);")


def test_unused_function_without_a_return_on_every_path_is_accepted(write_p4):
    load_program(write_p4(decls=_HALF_RETURN.format(name="unused")))


def test_function_calling_itself(write_p4):
    _assert_at_both(write_p4, "f(x);", "f: declaration not found",
                    decls="void f(in bit<8> x) {\nf(x); }", body="f(hdr.h.a);")


def test_type_variable_bound_to_a_control(write_p4):
    _assert_at_both(write_p4, "sub);", "sub: argument cannot have type control Sub",
                    decls="control Sub() { apply { } }\nvoid g<T>(in T t) { }",
                    locals="Sub() sub;", body="g(\nsub);")


def test_match_annotation_names_a_match_kind(write_p4):
    _assert_at_both(write_p4, "1 + 1)", "2: value must be a match_kind",
                    decls="struct vs_t {\n@match(ternary) bit<8> a;\n@match(1 + 1) bit<8> b; }")


# ---- generic structs, headers and header_unions (p4c's TypeInference on their specializations)
GEN = "struct S<T> { T f; }\nheader G<T> { bit<8> a; T t; }\n"


@pytest.mark.parametrize("decls, locals, marker, message", [
    ("", "G<int> g;", "t; }", "Field 't' of 'header G' cannot have type 'int'"),
    ("", "S<int> s;", "f; }", "Field 'f' of 'struct S' cannot have type 'int'"),
    ("header_union U<T> { T u; }\n", "U<bit<8>> x;", "u; }", "Field 'u' of 'header_union U' cannot have type 'bit<8>'"),
    ("struct R { bit<8> r; }\n", "G<R[2]>[2] g;", "t; }", "Field 't' of 'header G' cannot have type 'R[2]'"),
    ("typedef S<bit<8>> S8;\ntypedef S<S8> SS;", "", "S<S8>", "S: contains self 'struct S' as type argument"),
    ("typedef S<S> SS;", "", "S<S>", "S: contains self 'struct S' as type argument"),
    ("typedef G<S> GS;", "", "S> GS", "S: generic type needs type arguments"),
    ("typedef S X;", "", "S X", "S: no type parameters supplied for generic type"),
    ("extern S f();", "", "S f()", "S: no type parameters supplied for return generic type"),
    ("parser Q<T>(in T a);", "S<Q<bit<8>>> s;", "S<Q<bit<8>>> s",
     "S<Q<bit<8>>>: Cannot use parser Q as a type parameter"),
    ("", "S<bit<8>, bit<8>> s;", "S<bit<8>, bit<8>> s",
     "S<bit<8>, bit<8>>: Type struct S has 1 type parameter(s), but it is specialized with 2"),
    ("struct Z { Z z; }", "", "Z z", "Self-referencing types not supported: 'Z' within 'struct Z'"),
    ("type int N_t;", "", "N_t", "N_t: `type' can only be applied to base types"),
    ("", "I() inner;", "I() inner", "Self-referencing types not supported: 'I' within 'control I'"),
    ("header_union V<T> { tuple<T, T> v; }", "", "v; }",
     "Field 'v' of 'header_union V' cannot have type 'tuple<T, T>'"),
    ("struct D<T, T> { T d; }", "", "T> { T d", "T: Duplicates declaration T"),
    ("header_union U<T> { T u; }\nextern X { X(in U<bit<8>> d); }", "", "u; }",
     "Field 'u' of 'header_union U' cannot have type 'bit<8>'"),
    ("extern bit<8> ef<T>(in S<S<T>> s);", "", "S<S<T>>", "S: contains self 'struct S' as type argument"),
    ("", "G<bit<8>>[-2] g;", "-2]", "Illegal array size: -2"),
])
def test_generic_declarations_and_their_specializations(write_p4, decls, locals, marker, message):
    _assert_at_both(write_p4, marker, message, decls=GEN + decls, locals=locals)


def test_values_of_a_type_variable_are_not_compared(write_p4):
    """p4c checks a generic function's body once, with its type variables unbound."""
    _assert_at_both(write_p4, "a == b", "a and b: values of a type variable cannot be compared",
                    decls="bool same<T>(in T a, in T b) { return a == b; }",
                    body="if (same(hdr.h.a, hdr.h.b)) { hdr.h.c = 1; }")


def test_a_generic_struct_in_a_generic_function_takes_its_type_variable(write_p4):
    """``S<T>`` inside ``f<T>`` is no self-reference even where the call binds T to an ``S``."""
    decls = GEN + "T pick<T>(in T a) { S<T> v; v.f = a; return v.f; }"
    assert load_program(write_p4(decls=decls, locals="S<bit<8>> s;", body="s.f = hdr.h.a; s = pick(s);"))


def test_a_varbit_field_in_a_struct_is_p4c_valid_and_refused_by_the_target_last(write_p4):
    """p4c's struct validator allows varbit; the built-in target's refusal waits for p4c's errors."""
    decls = "struct VS { varbit<16> v; }"
    load_frontend(write_p4(decls=decls, locals="VS x;"))
    _assert_at(write_p4, "varbit<16> v", "a varbit field ('v') in a struct is not supported by the built-in target",
               decls=decls, locals="VS x;")
    _assert_at(write_p4, "hdr.h.a + true", "operator '+' cannot combine bit<8> and bool",
               decls=decls, locals="VS x;", body="hdr.h.a = hdr.h.a + true;")


def test_a_tuple_field_of_dont_cares_is_refused_once_specialized(tmp_path):
    """``S<_>`` with a ``tuple<T, T>`` field: p4c refuses the '_' elements once its midend makes
    the tuple a struct (``_`` bound here as a type variable's value, as a type argument binds it)."""
    from p4target.frontend import ast as p4ast
    from p4target.frontend.checker import Checker
    from p4target.frontend.preprocess import preprocess
    from p4target.frontend.syntax import parse
    from p4target.frontend.types import DONTCARE

    path = tmp_path / "g.p4"
    path.write_text("struct S<T> {\n  tuple<T, T> t;\n}\n")
    checker = Checker(parse(preprocess(path, None)), frontend=True)
    for decl in checker.env.program.decls:
        checker.env.decls.top_level(decl)
    checker.env.type_vars = {"X": DONTCARE}
    ref = p4ast.TypeRef(checker.env.program.loc, "named", name="S",
                        args=[p4ast.TypeRef(checker.env.program.loc, "named", name="X")])
    with pytest.raises(P4Error) as info:
        checker.env.decls.resolve_type(ref)
    assert (info.value.loc.line, info.value.message) == (2, "Field 'f0' of 'tuple<_, _>' cannot have type '_'")


@pytest.mark.parametrize("underlying", ["tuple<bit<8>>", "h_t", "varbit<8>"])
def test_newtype_of_a_type_that_is_not_a_base_type(write_p4, underlying):
    _assert_at_both(write_p4, "T_t;", "T_t: `type' can only be applied to base types",
                    decls=f"type {underlying} T_t;")


def test_newtype_of_bool_and_of_a_newtype(write_p4):
    load_program(write_p4(decls="type bool B_t;\ntype B_t C_t;\ntype bit<8> D_t;\ntype D_t E_t;"))


@pytest.mark.parametrize("decls", ["extern X { X(); }", "control X();"])
def test_tuple_of_an_extern_or_a_block(write_p4, decls):
    _assert_at_both(write_p4, "X> t)", "X: not supported as a tuple field",
                    decls=f"{decls}\nvoid f(in tuple<bit<8>, X> t) {{ }}")


def test_tuple_of_a_package_in_a_package_parameter(tmp_path):
    path = tmp_path / "prog.p4"
    path.write_text("#include <core.p4>\npackage Pk();\npackage G(tuple<Pk> b);\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err = info.value
    assert (err.loc.line, err.loc.col, err.message) == (3, 17, "Pk: not supported as a tuple field")


@pytest.mark.parametrize("elem", ["string", "int"])
def test_tuple_in_a_prototype_that_the_midend_cannot_make_a_struct_of(tmp_path, elem):
    path = tmp_path / "prog.p4"
    path.write_text(f"#include <core.p4>\nextern E {{\n  E(tuple<bit<8>, {elem}> x);\n}}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err = info.value
    assert (err.loc.line, err.loc.col) == (3, 19)
    assert err.message == f"Field 'f1' of the struct for tuple<bit<8>, {elem}> cannot have type '{elem}'"


@pytest.mark.parametrize(("targ", "message"), [
    ("void", "void: illegal type argument for 'lookahead'"),
    ("vh_t", "vh_t: type argument must be a fixed-width type"),
])
def test_lookahead_type_argument(write_p4, targ, message):
    text = SKELETON.replace("pkt.extract(hdr.h);", f"pkt.lookahead<{targ}>();").format(
        decls="header vh_t { bit<8> a; varbit<16> v; }", locals="", body="")
    _assert_at_both(write_p4, f"{targ}>()", message, text=text)


def test_extern_instances_compared(write_p4):
    _assert_at_both(write_p4, "c1 == c2", "c1 and c2: externs cannot be compared",
                    locals="counter(1, CounterType.packets) c1;\ncounter(1, CounterType.packets) c2;",
                    body="if (c1 == c2) { hdr.h.a = 1; }")


def test_extern_instances_compared_in_a_structured_annotation(write_p4):
    _assert_at_both(write_p4, "x1 != x2", "x1 and x2: externs cannot be compared",
                    decls="counter(1, CounterType.packets) x1;\ncounter(1, CounterType.packets) x2;\n"
                          "@note[x1 != x2] const bit<8> k = 1;")


@pytest.mark.parametrize(("prop", "marker"), [
    ("default_action = .a();", ".a()"),
    ("const entries = { 1 : .a(); }", ".a()"),
])
def test_top_level_action_is_not_the_local_one_listed(write_p4, prop, marker):
    _assert_at_both(write_p4, marker, ".a() and a refer to different actions",
                    decls="action a() { }",
                    locals=f"action a() {{ }}\ntable t {{ key = {{ hdr.h.a : exact; }} actions = {{ a; }}\n{prop} }}",
                    body="t.apply();")


def test_top_level_action_listed_as_such(write_p4):
    load_program(write_p4(decls="action a() { }", locals="action b() { }\ntable t { actions = { .a; b; }\n"
                          "default_action = .a(); }", body="t.apply();"))


@pytest.mark.parametrize(("decl", "line", "col"), [
    ("struct s_t {\n  error e; }", 2, 3), ("typedef error E_t;", 1, 9), ("void f(in error e) { }", 1, 11)])
def test_error_type_without_an_error_declaration(tmp_path, decl, line, col):
    """No core.p4: ``error`` names no declaration (p4c's ResolveReferences)."""
    path = tmp_path / "prog.p4"
    path.write_text(f"{decl}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err = info.value
    assert (err.loc.line, err.loc.col, err.message) == (line, col, "error: declaration not found")


def test_initializer_of_a_block_instance(write_p4):
    _assert_at_both(write_p4, "{ };", "BlockStatement: initializers only allowed for extern instances",
                    decls="control Sub() { apply { } }", locals="Sub() sub = { };", body="sub.apply();")


@pytest.mark.parametrize(("note", "marker", "message"), [
    ("@pkginfo", "@pkginfo", "@pkginfo: syntax error: the annotation holds a list of key=value pairs"),
    ('@pkginfo("x")', "@pkginfo", "@pkginfo: syntax error: the annotation holds a list of key=value pairs"),
    ('@name("a", "b")', '"b"', "@name: syntax error: the annotation holds one expression"),
    ("@hidden(1)", "@hidden", "@hidden should not have any arguments"),
    ("@name(4)", "@name", "@name: should contain a string"),
    ('@deprecated("a" | "b")', '"a" |', "\"a\" | \"b\": @deprecated annotation's value must be a string"),
])
def test_annotation_bodies(write_p4, note, marker, message):
    _assert_at_both(write_p4, marker, message, decls=f"{note}\nconst bit<8> k = 1;")


def test_string_annotations_folded(write_p4):
    load_program(write_p4(decls='@deprecated("a" ++ "b")\nconst bit<8> k = 1;\n@pkginfo(version="1")\n'
                                'const bit<8> k2 = 1;'))


def test_extern_method_call_that_two_overloads_fit(tmp_path):
    path = tmp_path / "prog.p4"
    path.write_text("#include <core.p4>\nextern X {\n  X();\n  void f(in bit<8> a);\n  void f(in bit<8> b);\n}\n"
                    "control C() {\n  X() x;\n  apply {\n    x.f(1);\n  }\n}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err = info.value
    assert (err.loc.line, err.loc.col, err.message) == (10, 7, "Ambiguous method f")
    path.write_text(path.read_text().replace("x.f(1);", "x.f(b = 1);"))
    load_frontend(path)


@pytest.mark.parametrize(("decls", "marker", "kind"), [
    ("struct s_t { bit<8> a; s_t b; }", "s_t b;", "struct"),
    ("header s_t { bit<8> a; }\nheader_union u_t { s_t a; u_t b; }", "u_t b;", "header_union"),
    ("struct s_t { tuple<bit<8>, s_t> b; }", "s_t> b", "struct"),
])
def test_type_that_refers_to_itself(write_p4, decls, marker, kind):
    name = marker.split()[0].rstrip(">")
    _assert_at_both(write_p4, marker, f"Self-referencing types not supported: '{name}' within '{kind} {name}'",
                    decls=decls)


def test_switch_on_a_value_needs_the_exact_match_kind(tmp_path):
    """No core.p4: p4c's midend makes a table with an exact key of the switch, and finds no exact."""
    path = tmp_path / "prog.p4"
    text = "control C(in bit<4> a) {\n  apply {\n    switch (a) {\n      4w0: {}\n    }\n  }\n}\n" \
           "control CT(in bit<4> a);\npackage Pk(CT c);\nPk(C()) main;\n"
    path.write_text(text)
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.message) == (3, "Could not find declaration for 'match_kind.exact', "
                                                            "which is needed to implement switch statements")
    path.write_text("match_kind { exact }\n" + text)
    load_frontend(path)
    path.write_text(text.replace("4w0: {}", ""))  # p4c's frontend removes a switch with no cases
    load_frontend(path)


def test_union_stack_index_in_a_parser_must_be_constant(tmp_path):
    """p4test's midend (FlattenHeaderUnion) names no line; a constant index passes."""
    path = tmp_path / "prog.p4"
    text = ("#include <core.p4>\nheader a_t { bit<8> a; }\nheader b_t { bit<16> b; }\n"
            "header_union u_t { a_t a; b_t b; }\nstruct hs_t { u_t[2] us; }\n"
            "parser P(packet_in pkt, out hs_t hs, in bit<1> i) {\n"
            "  state start {\n    pkt.extract(hs.us[i].a);\n    transition accept;\n  }\n}\n"
            "parser PT(packet_in pkt, out hs_t hs, in bit<1> i);\npackage Pk(PT p);\nPk(P()) main;\n")
    path.write_text(text)
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.message) == (8, "Target expects constant array indices for accessing "
                                                            "header union stack elements, i is not a constant")
    path.write_text(text.replace("us[i]", "us[1]"))
    load_frontend(path)


_ENTRIES = ("#include <core.p4>\nheader h_t {{ bit<8> a; bit<8> b; }}\n"
            "control C(inout h_t h) {{\n  action a1(bit<8> v) {{ h.a = v; }}\n"
            "  table t {{\n    key = {{ h.a : exact; h.b : {kind}; }}\n    actions = {{ a1; }}\n"
            "    const entries = {{\n      (1, {first}) : a1(1);\n      (1, {second}) : a1(2);\n    }}\n  }}\n"
            "  apply {{ t.apply(); }}\n}}\ncontrol CT(inout h_t h);\npackage Pk(CT c);\nPk(C()) main;\n")


@pytest.mark.parametrize(("kind", "first", "second", "refused"), [
    ("exact", "2", "2", True),
    ("exact", "2", "3", False),
    ("ternary", "2 &&& 0xf", "2 &&& 0xf", True),
    ("ternary", "_", "2", False),  # covered by the earlier entry: p4c only warns
])
def test_entry_with_the_keys_of_an_earlier_one(tmp_path, kind, first, second, refused):
    path = tmp_path / "prog.p4"
    path.write_text(_ENTRIES.format(kind=kind, first=first, second=second))
    if not refused:
        load_frontend(path)
        return
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (10, 7, "Duplicate entry keys")


@pytest.mark.parametrize(("fields", "refused"), [("h_t h;", True), ("bit<8> b;", False)])
def test_extern_writing_back_a_nested_struct(tmp_path, fields, refused):
    path = tmp_path / "prog.p4"
    path.write_text(f"#include <core.p4>\nheader h_t {{ bit<8> a; }}\nstruct s_t {{ {fields} }}\n"
                    "extern void fill(inout s_t s);\ncontrol C(inout s_t s) {\n  apply {\n    fill(s);\n  }\n}\n"
                    "control CT(inout s_t s);\npackage Pk(CT c);\nPk(C()) main;\n")
    if not refused:
        load_frontend(path)
        return
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (
        7, 5, "fill(s): extern functions with 'out' nested struct argument (s) not supported")


def test_parser_state_declared_twice(write_p4):
    text = SKELETON.format(decls="", locals="", body="").replace(
        "transition accept; }", "transition accept; }\n    state s { transition accept; }\n"
        "    state s { transition reject; }", 1)
    _assert_at_both(write_p4, "s { transition reject", "s: Duplicates declaration s", text=text)


@pytest.mark.parametrize(("decls", "marker"), [("match_kind { fast, slow,\nfast }", "fast }"),
                                                ("match_kind { fast }\nmatch_kind { slow,\nfast, other }", "fast,")])
def test_match_kind_declared_twice(write_p4, decls, marker):
    _assert_at_both(write_p4, marker, "fast: Duplicates declaration fast", decls=decls)


def test_type_parameter_named_twice_in_an_initializer_function(tmp_path):
    path = tmp_path / "prog.p4"
    path.write_text("#include <core.p4>\nextern E {\n  E();\n  abstract void f();\n}\ncontrol C() {\n"
                    "  E() e = {\n    void f<T, U, T>() {}\n  };\n  apply {}\n}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (8, 18, "T: Duplicates declaration T")


@pytest.mark.parametrize(("noaction", "message"), [
    ("const bit<1> NoAction = 1;", "NoAction: expected to be an action; did you include core.p4?"),
    ("action NoAction(in bit<1> x) {}", "NoAction: Expected an action with no parameters; did you include core.p4?"),
    ("action NoAction() { exit; }", "NoAction: Expected an action with no body; did you include core.p4?"),
])
def test_the_noaction_a_table_defaults_to(tmp_path, noaction, message):
    """No core.p4: a table with no default_action needs a NoAction of core.p4's shape."""
    path = tmp_path / "prog.p4"
    text = "{}\ncontrol C() {{\n  action a() {{}}\n  table t {{ actions = {{ a; }} }}\n  apply {{}}\n}}\n"
    path.write_text(text.format(noaction))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (1, noaction.index("NoAction") + 1,
                                                                             message)
    path.write_text(text.format("").replace("a; }", "a; } default_action = a();"))
    load_frontend(path)


@pytest.mark.parametrize(("decls", "marker"), [
    ("bit<8> f(@optional bit<8> a) { return 1; }", "a)"),
    ("control G(inout bit<8> x)(@optional bit<8> k) { apply { } }", "k)"),
])
def test_optional_parameter_where_nothing_could_leave_it_out(write_p4, decls, marker):
    name = marker[0]
    _assert_at_both(write_p4, marker, f"{name}: optional parameter not allowed here", decls=decls)


@pytest.mark.parametrize(("decls", "shown", "note"), [
    ("type bit<8> B_t;\nenum B_t En { a = 1 }", "B_t",
     "; note that type-declared types are not allowed even if they are fixed-size"),
    ("type bit<8> B_t;\ntypedef B_t C_t;\nenum C_t En { a = 1 }", "C_t",
     "; note that type-declared types are not allowed even if they are fixed-size"),
    ("enum int En { a = 1 }", "int", "; note that the used type is unsized integral type"),
    ("enum bool En { a = 1 }", "bool", ""),
])
def test_serializable_enum_of_a_type_that_is_not_bits(write_p4, decls, shown, note):
    _assert_at_both(write_p4, f"{shown} En", f"{shown}: Illegal type for enum; only bit<> and int<> are allowed{note}",
                    decls=decls)


def test_serializable_enum_of_a_typedef_of_bits(write_p4):
    load_program(write_p4(decls="typedef bit<8> B_t;\nenum B_t En { a = 1 }"))


def test_int_constant_of_a_fixed_width_value_cast_to_bool(write_p4):
    _assert_at_both(write_p4, "(bool)k", "(bool)2: Only 0 and 1 can be cast to booleans",
                    decls="const int k = 4w2;\nconst bool b = (bool)k;")
    load_program(write_p4(decls="const int k = 4w1;\nconst bool b = (bool)k;"))


def test_length_annotation_names_a_later_field(write_p4):
    _assert_at_both(write_p4, "n)", "n: declaration not found",
                    decls="header v_t {\n  bit<8> a;\n  @length(n)\n  varbit<16> v;\n  bit<8> n; }")


@pytest.mark.parametrize(("decls", "marker", "message"), [
    ("parser Sp(packet_in b);\nparser Mp(packet_in b) { state start { transition accept; } }\n"
     "control Uc()(Sp sp) { apply { } }\ncontrol Wc() { Uc(Mp()) u; apply { u.apply(); } }",
     "sp)", "sp: instantiation of parser in control"),
    ("control Sc();\ncontrol Mc() { apply { } }\n"
     "parser Up(packet_in b)(Sc sc) { state start { transition accept; } }\n"
     "parser Wp(packet_in b) { Up(Mc()) u; state start { u.apply(b); transition accept; } }",
     "sc)", "sc: instantiation of control in parser"),
])
def test_block_argument_of_the_other_kind(write_p4, decls, marker, message):
    _assert_at_both(write_p4, marker, message, decls=decls)


def test_parser_implements_a_built_in_state(write_p4):
    text = SKELETON.format(decls="", locals="", body="").replace(
        "transition accept; }", "transition accept; }\n    state reject { transition accept; }", 1)
    _assert_at_both(write_p4, "reject { transition", "Invalid parser state: reject should not be implemented, "
                    "it is built-in", text=text)


@pytest.mark.parametrize(("decl", "message"), [
    ("parser Q(Sp p);", "p: parameter cannot have type parser Sp"),
    ("control Q(Pk p) { apply { } }", "p: parameter cannot be a package"),
])
def test_apply_parameter_of_a_parser_or_package_type(tmp_path, decl, message):
    path = tmp_path / "prog.p4"
    path.write_text(f"#include <core.p4>\nparser Sp();\npackage Pk();\n{decl}\n")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (4, decl.index(" p)") + 2, message)


def test_compound_division_refused_where_its_value_is_read(write_p4):
    """p4c's RemoveOpAssign gives `r / b` no location: its LocalCopyPropagation puts it at the read."""
    _assert_at(write_p4, "r; }", "hdr.h.a / hdr.h.b: could not evaluate expression at compilation time",
               locals="action a() { bit<8> r = hdr.h.a;\nr /= hdr.h.b;\nhdr.h.a = r; }", body="a();")


# p4c's `type` (Type_Newtype) is a type of its own (frontend/newtypes.py).
NEWTYPE = "type bit<8> N8;\ntype bit<4> N4;"


@pytest.mark.parametrize("locals, body, marker, message", [
    ("N8 n;", "n = hdr.h.a;", "hdr.h.a;", "assignment: Cannot cast implicitly type 'bit<8>' to type 'N8'"),
    ("N8 n = 1;", "hdr.h.a = n;", "n;", "assignment: Cannot cast implicitly type 'N8' to type 'bit<8>'"),
    ("N8 n = 1; N8 m;", "m = n + 1;", "n + 1", "+: cannot be applied to expression 'n' with type 'N8'"),
    ("N4 n;", "n = (N4)hdr.h.a;", "(N4)", "'(N4)hdr.h.a': Cannot cast from 'bit<8>' to 'N4'"),
    ("N8 n = 1; N8 m = 2;", "if (n < m) { hdr.h.a = 1; }", "n < m", "n < m: not defined on N8 and N8"),
])
def test_a_newtype_is_not_its_underlying_type(write_p4, locals, body, marker, message):
    _assert_at_both(write_p4, marker, message, decls=NEWTYPE, locals=locals, body=body)


def test_newtype_casts_and_constants_are_accepted(write_p4):
    path = write_p4(decls=NEWTYPE, locals="N8 n = 1; N8 m = (N8)hdr.h.a; N4 k = (N4)2;",
                    body="m = n; hdr.h.a = (bit<8>)m; if (n == m) { hdr.h.a = 0; }")
    load_program(path)
    load_frontend(path)


def test_a_range_of_another_width_than_the_select_is_refused_at_the_select(write_p4):
    text = write_p4().read_text().replace("transition accept;",
                                          "transition select(hdr.h.a) {\n(4w2 .. 3): accept; default: accept; }")
    path = write_p4(text=text)
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if "transition select(" in s)
    with pytest.raises(P4Error) as info:
        load_program(path)
    loc = info.value.loc
    assert (loc.line, loc.col, info.value.message) == (
        line, lines[line - 1].index("select(") + 1, "'SelectExpression': keyset: expected bit<8>, got bit<4>")


SER_ENUM_ACTION = """\
#include <core.p4>
enum bit<2> E { A = 0, B = 1 }
struct m_t { bit<2> x; bit<6> y; }
control c(inout m_t m) {
    action set_x(E v) { m.x = v; }
    table t { key = { m.y : exact; } actions = { set_x; } default_action = set_x(E.B); }
    apply { t.apply(); }
}
"""


def test_a_serializable_enum_action_argument_is_type_checked_first_in_frontend_mode(tmp_path):
    path = tmp_path / "prog.p4"
    path.write_text(SER_ENUM_ACTION)
    load_frontend(path)  # p4test: an enum's value casts implicitly to its underlying bit<2>
    path.write_text(SER_ENUM_ACTION.replace("set_x(E.B)", "set_x(2w1)"))
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    err = info.value
    assert (err.loc.line, err.loc.col, err.message) == (6, 82, "argument 'v': expected E, got bit<2>")


# A failed unification is p4c's at the node that asked for it (frontend/anchors.py): written over
# two lines, the refusal moves to the outer node's line.
@pytest.mark.parametrize("decls, locals, body, marker, message", [
    ("", "", "hdr.h.a = /* two lines */\nhdr.h.c;", "= /*",
     "'hdr.h.a = hdr.h.c': assignment: expected bit<8>, got bit<16>"),
    ("", "", "bit<8> x =\nhdr.h.c; hdr.h.a = x;", "x =", "'x': initializer: expected bit<8>, got bit<16>"),
    ("", "const bit<8> k =\n16w3;", "hdr.h.a = k;", "k =", "'k': constant initializer: expected bit<8>, got bit<16>"),
    ("bit<8> f(in bit<8> v) { return v; }", "", "hdr.h.a = f (\nhdr.h.c);", "f (",
     "argument 'v': expected bit<8>, got bit<16>"),
    ("bit<8> f(in bit<16> v) { return\n(v); }", "", "hdr.h.a = f(hdr.h.c);", "return",
     "'return v': return value: expected bit<8>, got bit<16>"),
])
def test_a_type_mismatch_is_refused_at_the_outer_node(write_p4, decls, locals, body, marker, message):
    _assert_at_both(write_p4, marker, message, decls=decls, locals=locals, body=body)


@pytest.mark.parametrize("decls, marker, message", [
    ("void f2<T>(inout T a) { }\nvoid g2<T>(in T b) { f2(b); }", "b); }", "cannot assign to 'b': an 'in' parameter"),
    ("T r2<T>(in bit<8> x) { return x; }", "x; }", "return value: expected T, got bit<8>"),
    ("bit<8> r3<T>(in T x) { return x; }", "x; }", "return value: expected bit<8>, got T"),
])
def test_a_generic_function_is_checked_once_unbound_even_if_unused(write_p4, decls, marker, message):
    """p4c type-checks a generic function's body with its type parameters unbound."""
    _assert_at_both(write_p4, marker, message, decls=decls)


def test_a_generic_function_used_as_p4c_allows_is_accepted(write_p4):
    path = write_p4(decls="T id<T>(in T x) { return x; }\nvoid sw<T>(inout T a, inout T b) { T t = a; a = b; b = t; }",
                    body="hdr.h.a = id(hdr.h.b); sw(hdr.h.a, hdr.h.b);")
    load_program(path)
    load_frontend(path)


def test_a_block_constructor_argument_of_another_type_is_refused_at_the_instance(write_p4):
    _assert_at_both(write_p4, "Cx (", "constructor argument 'k': expected bit<8>, got bit<16>",
                    decls="control Cx(inout headers hdr)(bit<8> k) { apply { hdr.h.a = k; } }",
                    locals="Cx (\n16w3) cx;", body="cx.apply(hdr);")


def test_a_serializable_enum_over_a_newtype_is_refused(write_p4):
    message = ("N8: Illegal type for enum; only bit<> and int<> are allowed; note that type-declared types are not "
               "allowed even if they are fixed-size")
    _assert_at_both(write_p4, "N8 E2", message, decls=NEWTYPE + "\nenum N8 E2 { A = 1 }")
    load_program(write_p4(decls=NEWTYPE + "\ntypedef bit<8> B8;\nenum B8 E2 { A = 1 }"))


def test_a_table_named_as_a_control_parameter_hides_it_and_cannot_be_its_own_key(write_p4):
    """p4c only warns that the table shadows the parameter; the key then names the table itself."""
    control = "control Cx(inout headers hdr, in bit<8> t) {\n    table t { key = { KEY : exact; } actions = { } }\n" \
              "    apply { t.apply(); }\n}"
    _assert_at_both(write_p4, "t : exact", "t: Cannot refer to the containing table t",
                    decls=control.replace("KEY", "t"))
    load_frontend(write_p4(decls=control.replace("KEY", "hdr.h.a")))


def test_generic_function_body_is_checked_uncalled(write_p4):
    """p4c's TypeInference checks a generic body with its type variables, called or not."""
    _assert_at_both(write_p4, "x; }", "return value: expected bit<8>, got T",
                    decls="bit<8> f<T>(in T x) { return x; }")


def test_type_variable_takes_no_unsized_constant(write_p4):
    _assert_at_both(write_p4, "0; }", "'int' type can only be unified with 'int', 'bit<>', or 'signed<>' types, "
                    "not with 'T'", decls="void f<T>(in T x) { T y = 0; }")


def test_type_variable_value_passed_for_another_type(write_p4):
    _assert_at_both(write_p4, "b); }", "argument 'a': expected bit<8>, got T",
                    decls="void f(in bit<8> a) { }\nvoid g<T>(in T b) { f(b); }")


def test_generic_function_body_with_its_own_types_is_accepted(write_p4):
    path = write_p4(decls="T pick<T>(in bool c, in T a, in T b) { T r = b; if (c) { r = a; } return r; }",
                    body="hdr.h.a = pick(true, hdr.h.a, hdr.h.b);")
    load_program(path)
    load_frontend(path)


_GENERIC_CONTROL = "control G<T>(in T x, out bit<8> y) {{ apply {{ {body} }} }}"


def test_generic_control_body_is_checked_with_its_type_variable(write_p4):
    _assert_at_both(write_p4, "x; }", "assignment: expected bit<8>, got T",
                    decls=_GENERIC_CONTROL.format(body="y = x;"))


def test_generic_control_the_target_cannot_run_is_refused_after_the_check(write_p4):
    path = write_p4(decls=_GENERIC_CONTROL.format(body="y = 1;"))
    load_frontend(path)
    with pytest.raises(P4Error) as info:
        load_program(path)
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.startswith("control G<T>"))
    assert (info.value.loc.line, info.value.message) == (line, "generic controls are not supported by the "
                                                                "built-in target")


def test_extern_directionless_parameter_takes_a_constant(write_p4):
    path = write_p4(decls="extern void ext(bit<8> v);", body="ext(\nhdr.h.a);")
    with pytest.raises(P4Error) as info:
        load_frontend(path)
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.startswith("hdr.h.a);"))
    assert (info.value.loc.line, info.value.loc.col, info.value.message) == (
        line, 1, "hdr.h.a: argument used for directionless parameter 'v' must be a compile-time constant")


@pytest.mark.parametrize("body, marker, message", [
    ("hdr.h.a = hdr.h.c[\n16 +: 8];", "16 +: 8];", "Bit index 16 greater than width 16"),
    ("hdr.h.a = hdr.h.c[4 +:\nhdr.h.b];", "hdr.h.b];", "hdr.h.b: slice bit index values must be constants"),
    ("bool b = true; hdr.h.a = (bit<8>)\nb[0 +: 1];", "b[0 +: 1];",
     "b[0 +: 1]: bit extraction only defined for bit<> types"),
])
def test_indexed_slice(write_p4, body: str, marker: str, message: str):
    """p4c's TypeInference (PlusSlice): a bit<> base, a constant width, a constant lo within it."""
    _assert_at_both(write_p4, marker, message, body=body)


@pytest.mark.parametrize("body, marker, message", [
    ("hdr.h = { b = 1, a = 2 };", "{ b = 1, a = 2 };", "{ b = 1, a = 2 }: Number of fields 2 in initializer different "
     "than number of fields in structure 3: unknown struct to header h_t"),
    ("hdr.h = { b = 1, a = 2, d = 3 };", "{ b = 1, a = 2, d = 3 };",
     "{ b = 1, a = 2, d = 3 }: No initializer for field c"),
    ("hdr.h = { b = 1, c = 3, a = true };", "true };", "field 'a' of header h_t: expected bit<8>, got bool"),
    ("hdr.h = { b = 1, c = 3,\nb = 2 };", "2 };", "b: Duplicates declaration b"),
    ("hdr.h.a = {#};", "{#};", "assignment: expected bit<8>, got the invalid header {#}"),
])
def test_structure_valued_expression(write_p4, body: str, marker: str, message: str):
    """p4c's TypeUnification of an initializer with the struct or header its context expects (on
    one line: across lines the error is the assignment's, anchors.py)."""
    _assert_at_both(write_p4, marker, message, body=body)


_REGISTER_FN = "void w<T>(register<T> r, in T v) { r.write(0, v); }"


def test_type_variable_bound_inside_a_parameter_type(write_p4):
    """p4c's unification binds T of `register<T> r` from the argument's register<bit<8>>."""
    path = write_p4(decls=_REGISTER_FN, locals="register<bit<8>>(4) reg;", body="w(reg, hdr.h.a);")
    load_program(path)
    load_frontend(path)
    _assert_at_both(write_p4, "true);", "argument 'v': expected bit<8>, got bool",
                    decls=_REGISTER_FN, locals="register<bit<8>>(4) reg;", body="w(reg, true);")


@pytest.mark.parametrize("start, marker, message", [
    ("state start { pkt.lookahead<\nvoid>(); transition accept; }", "void>();",
     "void: illegal type argument for 'lookahead'"),
    ("state start { vh_t v = pkt.lookahead<\nvh_t>(); transition accept; }", "vh_t>();",
     "vh_t: type argument must be a fixed-width type"),
])
def test_lookahead_type_argument_on_its_own_line(write_p4, start: str, marker: str, message: str):
    """p4c's TypeInference: lookahead<T> takes a fixed-width T."""
    text = write_p4().read_text().replace("state start { pkt.extract(hdr.h); transition accept; }", start)
    text = text.replace("struct headers {", "header vh_t { varbit<16> v; }\nstruct headers {")
    path = write_p4(text=text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith(marker))
    for load in (load_program, load_frontend):
        with pytest.raises(P4Error) as info:
            load(path)
        assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, 1, message)


def test_values_of_a_type_variable_are_not_compared_across_lines(write_p4):
    _assert_at_both(write_p4, "a == b; }", "a and b: values of a type variable cannot be compared",
                    decls="bool same<T>(in T a, in T b) { return\na == b; }")


def test_generic_body_meets_only_p4c_rules(write_p4):
    """The target's own rules (hash inputs, register types) wait for the copies with real types."""
    path = write_p4(decls="void h<T>(out bit<16> r, in T d) { hash(r, HashAlgorithm.crc16, 16w0, {d}, 16w0xffff); }",
                    body="h(hdr.h.c, hdr.h.a);")
    load_program(path)
    load_frontend(path)
