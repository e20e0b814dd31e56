"""ina_api's generated code is jobs.proto's: a field or method added to the .proto without `make proto`
fails here (the generator itself needs protobuf 4, kept out of the test venv)."""

from __future__ import annotations

import re
from pathlib import Path

from ina_api import jobs_pb2

PROTO = Path(jobs_pb2.__file__).with_name("jobs.proto")


def declared() -> tuple[dict[str, dict[str, int]], list[str]]:
    """Messages with their fields (name: number), and the service's methods, read from the .proto text."""
    messages: dict[str, dict[str, int]] = {}
    current = None
    for line in PROTO.read_text().splitlines():
        line = line.split("//")[0]
        if m := re.match(r"\s*message (\w+) \{", line):
            current = messages.setdefault(m.group(1), {})
        elif m := re.match(r"\s*(?:repeated [\w.]+|map<[^>]+>|[\w.]+) (\w+) = (\d+);", line):
            assert current is not None
            current[m.group(1)] = int(m.group(2))
    return messages, re.findall(r"rpc (\w+)\(", PROTO.read_text())


def test_generated_code_matches_the_proto():
    messages, methods = declared()
    generated = {name: {f.name: f.number for f in d.fields}
                 for name, d in jobs_pb2.DESCRIPTOR.message_types_by_name.items()}
    assert generated == messages
    assert [m.name for m in jobs_pb2.DESCRIPTOR.services_by_name["Jobs"].methods] == methods
