"""Aggregated packets per second of the aggregation programs on the built-in target, in-process
(one core): p4src/ina.p4 (v1model) at V = 64 and 256, p4src/tofino/ina_tna.p4 (TNA) at V = 64.

Two workers on one root switch sum chunks round after round (window of 32 slots), so every
packet does the full slot work: round check, bitmap pair, V lanes read-add-write, and every
second packet completes a slot and is multicast.  The TNA program also pays for its passes
(a contribution crosses egress and ingress again; a completion a third ingress pass), which
the built-in target runs one after the other.  Prints the median of several runs per
program, the runs of the programs alternated, and the gradient bytes/s that implies (4 bytes
per value per packet).  Through real veth ports: bench/bench_veth_ina.py.

    python -m bench.bench_ina [--runs 5] [--packets 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scapy.all import IP, UDP, Ether, raw

from controller.programs import TNA, V1MODEL, Program
from p4target.executor.switch import Switch
from p4target.executor.tables import exact
from p4target.executor.tna_switch import TnaSwitch, load_switch
from worker import protocol

JOB, GROUP, WINDOW = 7, 5, 32
CASES = ((V1MODEL, 64), (TNA, 64), (V1MODEL, 256))


def root_switch(program: Program, values: int) -> Switch | TnaSwitch:
    sw = load_switch(program.source, {"INA_VALUES": str(values)})
    for child in (0, 1):
        sw.tables[program.jobs].add([exact(child + 1), exact(JOB), exact(child)], program.member,
                                    [0, WINDOW, 2, 1, GROUP, 0, 0, 1, 0])
        sw.tables[program.receivers].add([exact(JOB), exact(child)], program.address,
                                         [0x020000000010 + child, 0x0200000000FE, 0x0A000001 + child,
                                          0x0A0000FE, 40000])
    sw.set_multicast_group(GROUP, [(1, 0), (2, 1)])
    return sw


def frames(values: int, rounds: int) -> list[tuple[int, bytes]]:
    P = protocol.load(values)
    rng = np.random.default_rng(1)
    out = []
    for p in range(1, rounds + 1):
        for child in (0, 1):
            payload = P.pack(rng.integers(-1000, 1000, values, dtype=np.int32), msg_type=P.MSG_DATA, job_id=JOB,
                             child=child, slot=p % WINDOW, set=(p // WINDOW) % 2, seq=p)
            out.append((child + 1, raw(Ether() / IP(src=f"10.0.0.{child + 1}", dst="10.0.0.254")
                                       / UDP(sport=40000, dport=P.INA_UDP_PORT) / payload)))
    return out


def measure(program: Program, values: int, packets: int) -> float:
    sw = root_switch(program, values)
    work = frames(values, packets // 2)
    process = sw.process
    start = time.perf_counter()
    results = sum(len(process(port, data)) for port, data in work)
    elapsed = time.perf_counter() - start
    assert results == len(work), f"expected one result copy per packet sent, got {results}/{len(work)}"
    return len(work) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--packets", type=int, default=20000)
    args = ap.parse_args()
    rates: dict[tuple[str, int], list[float]] = {(p.arch, v): [] for p, v in CASES}
    for run in range(args.runs):
        for program, values in CASES:
            rates[program.arch, values].append(measure(program, values, args.packets))
            print(f"  {program.arch} V={values} run {run + 1}/{args.runs}: "
                  f"{rates[program.arch, values][-1]:,.0f} pps", flush=True)
    for (arch, values), r in rates.items():
        med = statistics.median(r)
        print(f"{arch} V={values}: median {med:,.0f} aggregated pps = {med * values * 4 / 1e6:,.1f} MB/s of "
              f"int32 gradient in ({min(r):,.0f}-{max(r):,.0f})")


if __name__ == "__main__":
    main()
