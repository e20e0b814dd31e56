"""The native fast path runs what the Python executor runs, bit for bit.

Every STF program of the suite, and random traffic (valid, duplicated, reordered, mangled,
truncated) through both aggregation programs, gives the same packets, the same register
cells and the same counters with the fast path on and off.  Programs the native path does
not cover are listed with the reason the switch gives; every other program must run
natively, so a program that silently falls back to Python fails here.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from p4target.cbuild import FAST_MAX_LINES, HERE, compiler, pipeline_flags
from p4target.executor.native.engine import FrameBatch
from p4target.executor.tna_switch import load_switch
from p4target.stf import BuiltinTarget, parse_stf, run_stf
from worker import protocol

from .conftest import P4_DIR
from .ina_programs import TNA, V1MODEL, InaProgram

STF_FILES = sorted(P4_DIR.rglob("*.stf"))
# The programs that run in Python, and the words of the reason the switch gives.
PYTHON_ONLY = {
    "stf/clone.p4": "clone", "stf/meter_misc.p4": "meters", "stf/qa_packet_length.p4": "packet-length",
    "stf/resubmit_recirculate.p4": "recirculate", "stf/truncate.p4": "truncate", "stf/rw_ipv4_options.p4": "varbit",
    "stf/varbit.p4": "varbit", "stf/checksum_payload2.p4": "varbit",
}


def state(sw) -> dict:
    """Everything a packet can change that the control plane can read."""
    return {
        "registers": {n: list(r.cells) for n, r in sw.registers.items()},
        "counters": {n: (list(c.packets), list(c.bytes)) for n, c in sw.counters.items()},
        "direct": {n: [list(e.counter) for e in t.entries()] for n, t in sw.tables.items() if t.has_direct_counter},
        "stats": dict(sw.stats),
    }


def mutations(frames: list[tuple[int, bytes]], count: int, seed: int):
    """Frames like the given ones: bytes flipped, cut short, lengthened, or sent to another port."""
    rng = np.random.default_rng(seed)
    ports = sorted({p for p, _ in frames}) + [0, 1, 2, 511 % 16]
    for _ in range(count):
        port, frame = frames[int(rng.integers(len(frames)))]
        data = bytearray(frame)
        for _ in range(int(rng.integers(0, 4))):
            if data:
                data[int(rng.integers(len(data)))] = int(rng.integers(256))
        r = rng.random()
        if r < 0.15:
            data = data[:int(rng.integers(0, len(data) + 1))]
        elif r < 0.25:
            data += rng.bytes(int(rng.integers(1, 64)))
        yield (int(rng.choice(ports)) if rng.random() < 0.2 else port), bytes(data)


@pytest.mark.parametrize("stf", STF_FILES, ids=[str(p.relative_to(P4_DIR)) for p in STF_FILES])
def test_stf_program_runs_the_same_natively(stf: Path) -> None:
    """The STF test, then its packets mutated: the same packets and state on both paths."""
    name = str(stf.relative_to(P4_DIR).with_suffix(".p4"))
    runs, switches = {}, {}
    for use_native in (False, True):
        sw = switches[use_native] = load_switch(stf.with_suffix(".p4"), use_native=use_native)
        target = BuiltinTarget(sw)
        result = run_stf(stf.read_text(), target)
        runs[use_native] = (target.outputs, state(sw), result.failures)
        if use_native:
            if name in PYTHON_ONLY:
                assert sw.native is None and PYTHON_ONLY[name] in sw.native_status, sw.native_status
            else:
                assert sw.native is not None, f"{name} fell back to Python: {sw.native_status}"
    assert runs[True][0] == runs[False][0], "different packets"
    assert runs[True][1] == runs[False][1], "different state"
    assert runs[True][2] == runs[False][2]
    frames = [(int(c.args[0]), bytes.fromhex("".join(c.args[1:]))) for c in parse_stf(stf.read_text())
              if c.verb == "packet"]
    for i, (port, data) in enumerate(mutations(frames, 300, seed=len(name))):
        want = switches[False].process(port, data)
        assert switches[True].process(port, data) == want, f"mutation {i} on port {port}: {data.hex()}"
    assert state(switches[True]) == state(switches[False])


U64_EDGES = [0, 1, 2, 3, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1]


def test_integer_operations_at_64_bits_are_the_same_natively() -> None:
    """tests/p4/native_ops.p4: every operation on operands at the 64-bit edges and at random."""
    path = P4_DIR / "native_ops.p4"
    python, fast = load_switch(path, use_native=False), load_switch(path, use_native=True)
    assert fast.native is not None, fast.native_status
    rng = np.random.default_rng(64)

    def pick(values: list[int]) -> int:
        return values[int(rng.integers(len(values)))]

    def operand() -> int:
        return pick(U64_EDGES) if rng.random() < 0.5 else int(rng.integers(0, 2**63)) * 2 + int(rng.integers(2))

    for _ in range(4000):
        s = pick([0, 1, 31, 32, 62, 63, 64, 65, 127, 128, 255]) if rng.random() < 0.5 else int(rng.integers(256))
        fields = (operand().to_bytes(8, "big") + operand().to_bytes(8, "big") + bytes([s, int(rng.integers(20))])
                  + int(rng.integers(2**48)).to_bytes(6, "big") + bytes([int(rng.integers(256))]))
        frame = fields + bytes(24 * 8)
        want = python.process(1, frame)
        assert fast.process(1, frame) == want, f"operands {fields.hex()}"
    assert state(fast) == state(python)


# ---------------------------------------------------------------------------- random traffic
JOB, LEAF_JOB, GROUP, LEAF_GROUP = 7, 9, 5, 6
PARENT_PORT = 20
I32_EDGES = np.array([0, 1, -1, 2**31 - 1, -(2**31), 2**31 - 2, -(2**31) + 1], dtype=np.int64)


def configured(program: InaProgram, values: int, use_native: bool):
    """A root job of three children on ports 1-3 and a leaf job (parent on port 20) on ports 3-4."""
    sw = load_switch(program.path, {"INA_VALUES": str(values)}, use_native=use_native)
    assert (sw.native is not None) == use_native, sw.native_status
    return configure(program, sw)


def configure(program: InaProgram, sw):
    """``configured``'s entries and groups, on a given switch."""
    for child, port in enumerate((1, 2, 3)):
        program.add_member(sw, port, JOB, child, [0, 8, 3, 1, GROUP, 0, 0, 1, 0])
        program.add_receiver(sw, JOB, child, [0x020000000100 + child, 0x02AA00000001, 0x0A000001 + child,
                                              0x0A0000FE, 40000 + child])
    for child, port in enumerate((3, 4)):
        program.add_member(sw, port, LEAF_JOB, child, [8, 4, 2, 0, LEAF_GROUP, PARENT_PORT, 1, 2, 8])
        program.add_receiver(sw, LEAF_JOB, child, [0x020000000200 + child, 0x02AA00000001, 0x0A000101 + child,
                                                   0x0A0000FE, 41000 + child])
    program.add_result_from_parent(sw, PARENT_PORT, LEAF_JOB, 1, LEAF_GROUP, 8, cell=(8, 4, 2, 2))
    program.add_receiver(sw, LEAF_JOB, 0xFF, [0x020000000300, 0x02AA00000001, 0x0A000201, 0x0A0000FE, 42000])
    program.add_route(sw, 0x0A000000, 8, 9, 0x020000000999, 0x02AA00000001)
    sw.set_multicast_group(GROUP, [(1, 0), (2, 1), (3, 2)])
    sw.set_multicast_group(LEAF_GROUP, [(3, 0), (4, 1)])
    return sw


def random_frames(values: int, count: int, seed: int):
    """(port, frame) pairs: mostly contributions that collide on a few slots and rounds, with
    values at the int32 edges now and then; some mangled, truncated or not ours at all."""
    P = protocol.load(values)
    rng = np.random.default_rng(seed)
    eth = bytes.fromhex("02aa00000001" "020000000100" "0800")
    for _ in range(count):
        port = int(rng.choice([1, 2, 3, 4, PARENT_PORT, 7]))
        vals = rng.integers(-(2**31), 2**31, values, dtype=np.int64)
        edges = rng.random(values) < 0.1
        vals[edges] = rng.choice(I32_EDGES, int(edges.sum()))
        head = struct.pack(">BBHBBHIbBH", int(rng.choice([1, 1, 1, 2, 0, 0xA7])),
                           int(rng.choice([0, 0, 0, 1, 2, int(rng.integers(256))])),
                           int(rng.choice([JOB, JOB, LEAF_JOB, 8])), int(rng.choice([0, 1, 2, 1, 0xC0])),
                           int(rng.integers(2)), int(rng.choice([0, 1, 2, 3, 5, 0xFFFF])),
                           int(rng.choice([1, 2, 3, 4, int(rng.integers(2**32))])), int(rng.integers(-128, 128)),
                           0, 0)
        payload = head + vals.astype(">i4").tobytes()
        udp_port = P.INA_UDP_PORT if rng.random() < 0.9 else int(rng.integers(65536))
        udp = struct.pack(">HHHH", 40000, udp_port, 8 + len(payload), int(rng.integers(65536)))
        ip = struct.pack(">BBHHHBBH4s4s", 0x45 if rng.random() < 0.95 else 0x46, 0, 20 + len(udp) + len(payload),
                         1, 0 if rng.random() < 0.95 else 0x2001, 64, 17, 0,
                         bytes([10, 0, 0, int(rng.integers(1, 5))]), bytes([10, 0, 0, 254]))
        frame = eth + ip + udp + payload
        r = rng.random()
        if r < 0.05:
            frame = frame[:int(rng.integers(0, len(frame)))]
        elif r < 0.08:
            frame = rng.bytes(int(rng.integers(1, 1600)))
        elif r < 0.1:
            frame = eth[:12] + b"\x86\xdd" + frame[14:]
        yield port, frame


@pytest.mark.parametrize("program, values", [(V1MODEL, 64), (V1MODEL, 256), (TNA, 64)],
                         ids=["ina.p4-64", "ina.p4-256", "ina_tna.p4-64"])
def test_random_traffic_gives_the_same_packets_and_state(program: InaProgram, values: int) -> None:
    python, fast = configured(program, values, False), configured(program, values, True)
    sent = 0
    for i, (port, frame) in enumerate(random_frames(values, 3000, seed=values)):
        want = python.process(port, frame)
        assert fast.process(port, frame) == want, f"packet {i} on port {port}: {frame.hex()}"
        sent += len(want)
    assert sent > 300, "the traffic hardly completed a round: it tests too little"
    assert state(fast) == state(python)


def test_a_batch_in_one_call_leaves_the_state_packets_one_by_one_leave() -> None:
    """p4t_process_batch (bench_ina --batch) runs each frame as p4t_process does: same outputs counted,
    same registers, counters and stats, dropped and mangled frames included."""
    frames = list(random_frames(64, 600, seed=5))
    one_by_one, batched = configured(V1MODEL, 64, True), configured(V1MODEL, 64, True)
    sent = sum(len(one_by_one.process(port, frame)) for port, frame in frames)
    assert batched.native.process_batch(FrameBatch.pack(frames)) == sent > 50
    assert state(batched) == state(one_by_one)


def test_value_lanes_share_one_bank_and_each_keeps_its_own_cells() -> None:
    """ina.p4's lane registers (same type and size, one after another) live in one [cells][lanes] array:
    each lane's cells are a column the control plane reads and writes as before, and no other's."""
    sw = configured(V1MODEL, 8, True)
    lanes = [sw.registers[f"InaIngress.lane{i}"].cells for i in range(8)]
    bank = lanes[0].array.base
    assert bank is not None and all(cells.array.base is bank for cells in lanes)
    for i, cells in enumerate(lanes):
        cells[0] = 100 + i
    columns = [int(np.flatnonzero(bank[0] == 100 + i)[0]) for i in range(8)]
    assert columns == list(range(columns[0], columns[0] + 8)), "lanes side by side, in order"
    lanes[3][5] = -7
    assert lanes[3][5] == -7 and bank[5, columns[3]] == -7 and [c[5] for c in lanes].count(0) == 7
    assert len(lanes[3]) == 2048 and lanes[3][:2] == [103, 0]


def test_lane_runs_become_loops_so_the_c_does_not_grow_with_the_lanes() -> None:
    """ina.p4's lanes (each the same statements on its own register and slots) print as C loops over the
    bank, and the header's value array as a load/store loop: V = 256 lowers to as many lines as V = 64
    (the random traffic tests check those loops against the Python executor)."""
    sources = {v: configured(V1MODEL, v, True).native.source for v in (64, 256)}
    assert sources[256].count("\n") == sources[64].count("\n") < 1500
    assert "_roll" in sources[256] and "< 256;" in sources[256] and "< 64;" in sources[64]


FIELD_LOOP = """#define N_SLOTS 1
#define N_REGS 0
#define N_COUNTERS 0
#define N_TABLES 0
#define N_VSETS 0
#define MAX_HEADER_BYTES 64
#include "runtime.h"
void deparse(uint8_t *o, const v_t *S) { UNROLL_FIELDS for (long i = 0; i < 16; i++) store_be(o + 4 * i, 4, S[i]); }
"""


def _byte_swaps(flags: tuple[str, ...], folder: Path) -> int:
    """How many byte swaps gcc emits with ``flags`` for a 16-field header's store loop."""
    src = folder / "fields.c"
    src.write_text(FIELD_LOOP)
    cc = compiler()
    assert cc is not None
    asm = subprocess.run([cc, *flags, "-S", f"-I{HERE}", "-o", "-", str(src)], capture_output=True, text=True,
                         check=True).stdout
    body = asm[asm.index("deparse:"):]
    return body[:body.index(".size")].count("bswap")


def test_header_field_loops_are_unrolled_where_the_c_builds_at_o1(tmp_path: Path) -> None:
    """A long program builds at -O1, which leaves loops rolled: its header field loops (a value array's
    load_be/store_be) must come out as the straight line they replaced, or TNA's parser and deparser
    run 2.5k instructions a packet more.  A short one builds at -O3, which decides for itself."""
    slow, fast = pipeline_flags("\n" * (FAST_MAX_LINES + 1)), pipeline_flags("\n")
    assert "-O1" in slow and "-O3" in fast and "-DP4T_UNROLL_FIELDS" not in fast
    assert _byte_swaps(slow, tmp_path) == 16
    assert _byte_swaps(tuple(f for f in slow if f != "-DP4T_UNROLL_FIELDS"), tmp_path) < 16, \
        "gcc -O1 unrolls without the pragma now: the test no longer shows what the pragma does"


def test_arithmetic_under_a_mask_is_lowered_to_64_bits() -> None:
    """A value under a mask below 2**64 (every bit<W> field) needs only its operands' low 64 bits, so + - * and
    the like run in uint64_t, not __int128: the lanes' read-add-write above all; an int<W>'s wrap-around is two
    shifts.  native_ops.p4 (above) checks the results at the 64-bit edges against the Python executor."""
    source = configured(V1MODEL, 64, True).native.source
    lane_add = re.search(r"_s(\d+)_(\d+) = \(\(v_t\)\(\(\(\(uint64_t\)\(_s\d+_\2\)\) \+ \(\(uint64_t\)\(_s\d+_\2\)\)\) "
                         r"& 4294967295ULL\)\);", source)
    assert lane_add is not None, "the lanes' sum is no longer 64-bit arithmetic"
    wrap = r"S\[\d+ \+ 1 \* _roll\d+\] = \(\(v_t\)\(\(int64_t\)\(\(\(uint64_t\)\(_s\d+_\d+\)\) << 32\) >> 32\)\);"
    assert re.search(wrap, source), "int<32>'s wrap-around of the lanes' sum is no longer two shifts"


def test_control_plane_changes_between_packets_reach_the_native_path() -> None:
    """Entries added, modified and deleted, defaults set, groups changed and registers and
    counters written by the control plane in the middle of traffic: both paths agree."""
    program, values = V1MODEL, 64
    python, fast = configured(program, values, False), configured(program, values, True)
    rng = np.random.default_rng(7)
    frames = list(random_frames(values, 1500, seed=11))
    lane = next(name for name in python.registers if name.endswith("lane3"))

    def churn(sw, op: int) -> None:
        jobs, receivers = sw.tables[program.jobs], sw.tables[program.receivers]
        if op == 0:
            program.clear_jobs(sw)
        elif op == 1:
            program.clear_jobs(sw)
            for child, port in enumerate((1, 2, 3)):
                program.add_member(sw, port, JOB, child, [0, 8, 3, 1, GROUP, 0, 0, 1, 0])
                program.add_receiver(sw, JOB, child, [0x020000000100 + child, 0x02AA00000001, 0x0A000001 + child,
                                                      0x0A0000FE, 40000 + child])
        elif op == 2 and len(jobs.entries()):
            e = jobs.entries()[0]
            jobs.modify(list(e.match), e.action.name, [0, 4, 3, 1, GROUP, 0, 0, 2, 0])
        elif op == 3:
            sw.set_multicast_group(GROUP, [(2, 1), (1, 0)])
        elif op == 4:
            sw.delete_multicast_group(GROUP)
        elif op == 5:
            sw.registers[lane].cells[1] = -5
            sw.counters[program.job_stats].packets[0] = 1000
        elif op == 6 and len(receivers.entries()):
            e = receivers.entries()[-1]
            receivers.delete(list(e.match))
        elif op == 7:
            sw.tables[program.routes].set_default(program.forward, [4, 0x020000000777, 0x02AA00000001])

    for i in range(0, len(frames), 25):
        op = int(rng.integers(10))
        churn(python, op)
        churn(fast, op)
        for port, frame in frames[i:i + 25]:
            assert fast.process(port, frame) == python.process(port, frame), f"after op {op}, packet {frame.hex()}"
    assert state(fast) == state(python)


def test_without_a_compiler_the_program_runs_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    sw = load_switch(P4_DIR / "basic.p4")
    assert sw.native is None and "does not run" in sw.native_status
    python = load_switch(P4_DIR / "basic.p4", use_native=False)
    frame = bytes(range(64))
    assert sw.process(1, frame) == python.process(1, frame)
