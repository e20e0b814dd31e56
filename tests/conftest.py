"""Shared fixtures: paths to the P4 programs, a helper to write small programs, free TCP ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

P4_DIR = Path(__file__).resolve().parent / "p4"


@pytest.fixture(params=["native", "reference"])
def worker_core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A worker test runs on both cores: the native one (worker/native) and the reference (INA_NATIVE=0)."""
    if request.param == "reference":
        monkeypatch.setenv("INA_NATIVE", "0")
    else:
        from worker import native

        if not native.available():
            pytest.skip(f"the native core cannot be built here: {native.why_not()}")
        monkeypatch.delenv("INA_NATIVE", raising=False)
    return request.param


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a P4Runtime server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count: int) -> list[int]:
    """``count`` different such ports: all held at once while drawn (``free_port`` twice may give one twice)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()

PRELUDE = """#include <core.p4>
#include <v1model.p4>
"""

# A v1model skeleton whose ingress body, declarations and headers a test fills in.
SKELETON = PRELUDE + """
header h_t {{ bit<8> a; bit<8> b; bit<16> c; }}
struct headers {{ h_t h; }}
struct metadata {{ }}
{decls}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control V(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    {locals}
    apply {{ {body} }}
}}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.fixture
def write_p4(tmp_path: Path):
    """Write a program built from SKELETON (or a full text) and return its path."""

    def write(body: str = "", locals: str = "", decls: str = "", text: str | None = None,
              name: str = "prog.p4") -> Path:
        path = tmp_path / name
        path.write_text(text if text is not None else SKELETON.format(body=body, locals=locals, decls=decls))
        return path

    return write
