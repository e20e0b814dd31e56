"""Packets per second of a host's relay: the reference (worker/relay.py) against its C mirror (worker/native/relay.c).

Why: a relay sums every packet of a chain that passes its host (issue 58), in the virtual fabric (up to 128
workers x 16 MB of calls) and on sockets, so its cost per packet bounds both.

How: one relay in the middle of ring_tree's half chain (children: its host on port 0, the next relay up the
chain on port 1; parent on port 2), ``--values`` values per packet, a pool of ``--window`` slots.  Each round
is a chain's worth of traffic: the host's and the upstream relay's DATA (the second completes the round: a
DATA to the parent), then the parent's RESULT (kept and multicast to both children): 3 datagrams in, 3 out.
The payloads are made beforehand; a run feeds ``--rounds`` rounds one datagram at a time (``receive``) and, for
the native relay, a window of rounds per port at a time (``receive_batch``: three calls per window).  Printed:
datagrams in per second, best of ``--runs``.

    python -m bench.bench_relay [--values 256] [--window 64] [--rounds 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from worker import protocol
from worker.relay import Relay, RelayTree

JOB = 1


def traffic(P: protocol.Protocol, rounds: int, window: int) -> dict[int, np.ndarray]:
    """Each port's datagrams, one row per round: the host's and the upstream's DATA, the parent's RESULT."""
    rng = np.random.default_rng(0)
    r = np.arange(rounds)
    cells = dict(job_id=JOB, slot=r % window, set=(r // window) % 2, seq=r + 1)
    rows = {}
    for port, msg_type, child in ((0, P.MSG_DATA, 0), (1, P.MSG_DATA, 1), (2, P.MSG_RESULT, 3)):
        values = rng.integers(-(1 << 20), 1 << 20, (rounds, P.values), dtype=np.int32).astype(">i4")
        heads = P.pack_headers(rounds, msg_type=msg_type, child=child, **cells)
        rows[port] = np.concatenate([heads, values.view(np.uint8)], axis=1)
    return rows


def one_by_one(relay: Relay, rows: dict[int, np.ndarray]) -> None:
    payloads = {port: [r.tobytes() for r in got] for port, got in rows.items()}
    for k in range(len(rows[0])):
        for port in (0, 1, 2):
            relay.receive(port, payloads[port][k])


def batched(window: int) -> Callable[[Relay, dict[int, np.ndarray]], None]:
    def run(relay: Relay, rows: dict[int, np.ndarray]) -> None:
        lengths = np.full(window, rows[0].shape[1], np.int64)
        for start in range(0, len(rows[0]), window):
            for port in (0, 1, 2):
                chunk = rows[port][start:start + window]
                relay.receive_batch(port, chunk, lengths[:len(chunk)])
    return run


def rate(make: Callable[[], Relay], feed: Callable, rows: dict[int, np.ndarray], runs: int) -> float:
    """Datagrams in per second, best of ``runs`` (a fresh relay each: every round is new to it)."""
    best = float("inf")
    for _ in range(runs):
        relay = make()
        start = time.perf_counter()
        feed(relay, rows)
        best = min(best, time.perf_counter() - start)
        assert relay.stats.named(JOB)["JOB_STAT_RESULTS"] == len(rows[0]), "the rounds did not complete"
    return 3 * len(rows[0]) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=256)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from worker.native.relay import NativeRelay, relay_class

    P = protocol.load(args.values)
    tree = RelayTree(JOB, args.window, ((0, 0), (1, 1)), is_root=False, parent_port=2, index_at_parent=3)
    rows = traffic(P, args.rounds, args.window)
    reference_rows = {port: got[:max(args.window, args.rounds // 10)] for port, got in rows.items()}  # slow
    sides = [("reference, receive", Relay, one_by_one, reference_rows),
             ("reference, receive_batch", Relay, batched(args.window), reference_rows)]
    if relay_class() is NativeRelay:
        sides += [("native, receive", NativeRelay, one_by_one, rows),
                  ("native, receive_batch", NativeRelay, batched(args.window), rows)]
    else:
        print("the native relay cannot be built here: the reference alone")
    print(f"V = {args.values}, W = {args.window}: datagrams in per second (3 per round, 3 out)")
    for name, cls, feed, got in sides:
        print(f"  {name:26s} {rate(lambda cls=cls: cls([tree], P), feed, got, args.runs):>12,.0f}")


if __name__ == "__main__":
    main()
