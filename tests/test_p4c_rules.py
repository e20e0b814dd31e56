"""p4c's semantic refusals (issue 64): each rule refuses at the line and column p4c names,
with p4c's meaning, and in p4c's pass order when a later pass also objects."""

from __future__ import annotations

import pytest

from p4target.frontend import P4Error, load_frontend, load_program


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


def test_generic_function_body_is_checked_uncalled(write_p4):
    """p4c's TypeInference checks a generic body with its type variables, called or not."""
    _assert_at_both(write_p4, "x; }", "return value: expected bit<8>, got T",
                    decls="bit<8> f<T>(in T x) {\nreturn\nx; }")


def test_type_variable_takes_no_unsized_constant(write_p4):
    _assert_at_both(write_p4, "0; }", "'int' type can only be unified with 'int', 'bit<>', or 'signed<>' types, "
                    "not with 'T'", decls="void f<T>(in T x) {\nT y =\n0; }")


def test_type_variable_value_passed_for_another_type(write_p4):
    _assert_at_both(write_p4, "b); }", "argument 'a': expected bit<8>, got T",
                    decls="void f(in bit<8> a) { }\nvoid g<T>(in T b) { f(\nb); }")


def test_generic_function_body_with_its_own_types_is_accepted(write_p4):
    path = write_p4(decls="T pick<T>(in bool c, in T a, in T b) { T r = b; if (c) { r = a; } return r; }",
                    body="hdr.h.a = pick(true, hdr.h.a, hdr.h.b);")
    load_program(path)
    load_frontend(path)


_GENERIC_CONTROL = "control G<T>(in T x, out bit<8> y) {{ apply {{ {body} }} }}"


def test_generic_control_body_is_checked_with_its_type_variable(write_p4):
    _assert_at_both(write_p4, "x; }", "assignment: expected bit<8>, got T",
                    decls=_GENERIC_CONTROL.format(body="y =\nx;"))


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
    ("hdr.h =\n{ b = 1, a = 2 };", "{ b = 1, a = 2 };", "{ b = 1, a = 2 }: Number of fields 2 in initializer different "
     "than number of fields in structure 3: unknown struct to header h_t"),
    ("hdr.h =\n{ b = 1, a = 2, d = 3 };", "{ b = 1, a = 2, d = 3 };",
     "{ b = 1, a = 2, d = 3 }: No initializer for field c"),
    ("hdr.h = { b = 1, c = 3,\na = true };", "true };", "field 'a' of header h_t: expected bit<8>, got bool"),
    ("hdr.h = { b = 1, c = 3,\nb = 2 };", "2 };", "b: Duplicates declaration b"),
    ("hdr.h.a =\n{#};", "{#};", "assignment: expected bit<8>, got the invalid header {#}"),
])
def test_structure_valued_expression(write_p4, body: str, marker: str, message: str):
    """p4c's TypeUnification of an initializer with the struct or header its context expects."""
    _assert_at_both(write_p4, marker, message, body=body)


_REGISTER_FN = "void w<T>(register<T> r, in T v) { r.write(0, v); }"


def test_type_variable_bound_inside_a_parameter_type(write_p4):
    """p4c's unification binds T of `register<T> r` from the argument's register<bit<8>>."""
    path = write_p4(decls=_REGISTER_FN, locals="register<bit<8>>(4) reg;", body="w(reg, hdr.h.a);")
    load_program(path)
    load_frontend(path)
    _assert_at_both(write_p4, "true);", "argument 'v': expected bit<8>, got bool",
                    decls=_REGISTER_FN, locals="register<bit<8>>(4) reg;", body="w(reg,\ntrue);")


@pytest.mark.parametrize("start, marker, message", [
    ("state start { pkt.lookahead<\nvoid>(); transition accept; }", "void>();",
     "void: illegal type argument for 'lookahead'"),
    ("state start { vh_t v = pkt.lookahead<\nvh_t>(); transition accept; }", "vh_t>();",
     "vh_t: type argument must be a fixed-width type"),
])
def test_lookahead_type_argument(write_p4, start: str, marker: str, message: str):
    """p4c's TypeInference: lookahead<T> takes a fixed-width T."""
    text = write_p4().read_text().replace("state start { pkt.extract(hdr.h); transition accept; }", start)
    text = text.replace("struct headers {", "header vh_t { varbit<16> v; }\nstruct headers {")
    path = write_p4(text=text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith(marker))
    for load in (load_program, load_frontend):
        with pytest.raises(P4Error) as info:
            load(path)
        assert (info.value.loc.line, info.value.loc.col, info.value.message) == (line, 1, message)


def test_values_of_a_type_variable_are_not_compared(write_p4):
    _assert_at_both(write_p4, "a == b; }", "a and b: values of a type variable cannot be compared",
                    decls="bool same<T>(in T a, in T b) { return\na == b; }")


def test_generic_body_meets_only_p4c_rules(write_p4):
    """The target's own rules (hash inputs, register types) wait for the copies with real types."""
    path = write_p4(decls="void h<T>(out bit<16> r, in T d) { hash(r, HashAlgorithm.crc16, 16w0, {d}, 16w0xffff); }",
                    body="h(hdr.h.c, hdr.h.a);")
    load_program(path)
    load_frontend(path)
