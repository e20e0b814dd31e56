"""Command-line tools of the built-in target.

``p4target-check`` checks a P4 program like p4c would, optionally writing its P4Info (and with
``--target tofino``, whether a TNA program fits Tofino 1: p4target/tofino_fit); with ``--frontend``
it checks the program against core.p4 alone, as p4c's p4test (no architecture, no ``main`` needed);
``p4target-stf`` runs an STF test on the built-in target or on real BMv2.  Errors print as
``file:line:col: message`` with the source line, and exit with status 1.
"""

from __future__ import annotations

import argparse
import sys

from google.protobuf import text_format

from .frontend import P4Error, load_frontend, load_program


def parse_defines(items: list[str]) -> dict[str, str]:
    """`-D NAME[=VALUE]` options as p4c takes them."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="p4target-check", description=__doc__.splitlines()[0])
    ap.add_argument("program", help="P4-16 source file (v1model or TNA; any architecture with --frontend)")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="preprocessor definition, as for p4c")
    ap.add_argument("--p4runtime-files", metavar="FILE", help="write the P4Info (text format) here")
    ap.add_argument("--target", choices=["tofino"],
                    help="tofino: also check that the TNA program fits one Tofino 1 pipe, and print its use")
    ap.add_argument("--show-python", action="store_true", help="print the Python the executor generates")
    ap.add_argument("--show-c", action="store_true",
                    help="print the C the native fast path runs (or why the program runs in Python)")
    ap.add_argument("--frontend", action="store_true",
                    help="check against core.p4 alone, as p4c's p4test: no architecture or main needed, "
                         "any extern accepted as declared (nothing runs, so no other option applies)")
    args = ap.parse_args(argv)
    if args.frontend:
        return _frontend_only(args)
    try:
        prog = load_program(args.program, parse_defines(args.defines))
        if args.target == "tofino":
            from .tofino_fit import check, render

            if prog.arch != "tna":
                print(f"p4target-check: {args.program} is not a TNA program: --target tofino checks TNA programs",
                      file=sys.stderr)
                return 1
            print(render(check(prog)))
        if args.p4runtime_files:
            from .p4info import build_p4info

            with open(args.p4runtime_files, "w") as f:
                f.write(text_format.MessageToString(build_p4info(prog)))
        if args.show_python or args.show_c:
            from .executor.tna_switch import switch_for

            sw = switch_for(prog, use_native=args.show_c, check_fit=False)  # the code; fit is --target tofino
            if args.show_python:
                print(sw.source)
            if args.show_c:
                if sw.native is None:
                    print(f"p4target-check: {args.program} runs in Python: {sw.native_status}", file=sys.stderr)
                    return 1
                print(sw.native.source)
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    return 0


def _frontend_only(args: argparse.Namespace) -> int:
    """``--frontend``: the frontend-only check; the options that need a target are refused."""
    others = [opt for opt, on in (("--p4runtime-files", args.p4runtime_files), ("--target", args.target),
                                  ("--show-python", args.show_python), ("--show-c", args.show_c)) if on]
    if others:
        print(f"p4target-check: --frontend checks only; it does not take {', '.join(others)}", file=sys.stderr)
        return 2
    try:
        load_frontend(args.program, parse_defines(args.defines))
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    return 0


def stf_main(argv: list[str] | None = None) -> int:
    from .stf import StfError, run_stf_file

    ap = argparse.ArgumentParser(prog="p4target-stf", description="Run a p4c-style STF test on a P4 program.")
    ap.add_argument("program", help="P4-16 v1model source file")
    ap.add_argument("stf", nargs="?", help="STF file (default: the program's name with .stf)")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]")
    ap.add_argument("--target", choices=["builtin", "bmv2"], default="builtin")
    args = ap.parse_args(argv)
    try:
        result = run_stf_file(args.program, args.stf, parse_defines(args.defines), args.target)
    except P4Error as err:
        print(err.render(), file=sys.stderr)
        return 1
    except (StfError, OSError) as err:
        print(f"p4target-stf: {err}", file=sys.stderr)
        return 1
    for skipped in result.ignored:
        print(f"ignored (as by p4c's BMv2 runner): {skipped}")
    for failure in result.failures:
        print(failure)
    print(f"{'PASS' if result.passed else 'FAIL'}: {result.packets_sent} packets sent, "
          f"{result.packets_checked} checked")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
