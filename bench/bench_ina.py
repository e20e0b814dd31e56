"""Aggregated packets per second of p4src/ina.p4 on the built-in target, in-process (one core).

Two workers on one root switch sum chunks round after round (window of 32 slots), so every
packet does the full slot work: round check, bitmap pair, V lanes read-add-write, and every
second packet completes a slot and is multicast.  Prints the median of several runs for
V = 64 and V = 256, and the gradient bytes/s that implies (4 bytes per value per packet).
Through real veth ports: bench/bench_veth_ina.py.

    python -m bench.bench_ina [--runs 5] [--packets 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from scapy.all import IP, UDP, Ether, raw

from p4target.executor.switch import Switch
from p4target.executor.tables import exact
from worker import protocol

INA_P4 = Path(__file__).resolve().parent.parent / "p4src" / "ina.p4"
JOB, GROUP, WINDOW = 7, 5, 32


def root_switch(values: int) -> Switch:
    sw = Switch.from_file(INA_P4, {"INA_VALUES": str(values)})
    for child in (0, 1):
        sw.tables["InaIngress.jobs"].add([exact(child + 1), exact(JOB), exact(child)], "InaIngress.member",
                                         [0, WINDOW, 2, 1, GROUP, 0, 0, 1, 0])
        sw.tables["InaEgress.receivers"].add([exact(JOB), exact(child)], "InaEgress.address",
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


def measure(values: int, packets: int) -> float:
    sw = root_switch(values)
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
    for values in (64, 256):
        rates = []
        for run in range(args.runs):
            rates.append(measure(values, args.packets))
            print(f"  V={values} run {run + 1}/{args.runs}: {rates[-1]:,.0f} pps", flush=True)
        med = statistics.median(rates)
        print(f"V={values}: median {med:,.0f} aggregated pps = {med * values * 4 / 1e6:,.1f} MB/s of int32 "
              f"gradient in ({min(rates):,.0f}-{max(rates):,.0f})")


if __name__ == "__main__":
    main()
