"""The plain C loop's process for bench_worker: what the worker's datapath is measured against (issue 42).

``bench/plain_loop.c`` moves each call's bytes to the ideal switch and back on the socket a worker
would have (UDP, bound to the worker's address and port, non-blocking, the same receive buffer),
with UDP GSO and GRO, a window of ``--window`` packets of the protocol's size, and a copy of the
values in and out, but no protocol and no quantization.  Built with the built-in target's compiler
cache as bench/ideal_switch.c is; ctypes releases the GIL while it runs.

Takes bench/worker_runner.py's command line (``--job-id`` and ``--call`` are the worker's and are
ignored here; ``--pace`` and a ``--threads`` other than 1 are refused: the loop is one thread, unpaced)
and answers as it does: after a checked warm-up call (the results, copied out, equal the input) it
prints ``ready``, waits for a line on stdin, makes ``--calls`` timed calls of ``--mb`` MB and prints
one JSON line: wall and CPU seconds, bytes, packets, and its syscalls and polls (as ``polls``).
The protocol's facts (packet size, the DATA type's byte, the switch's port) are read from
``worker.protocol``; the header is the DATA type and zeros.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
from worker_runner import arguments, timed

from p4target.cbuild import build
from worker import protocol

SOURCE = Path(__file__).resolve().parent / "plain_loop.c"
NO_GSO, NO_GRO = 1, 2  # plain_loop's flags
STATS = ("packets", "sends", "receives", "polls", "gso", "gro")  # its stats, in order


class PlainLoop:
    """The loop on one bound socket: ``run(src, dst)`` moves ``src``'s bytes through the switch into ``dst``."""

    def __init__(self, values: int, window: int, worker: tuple[str, int], switch_ip: str, *, gso: bool = True,
                 gro: bool = True, timeout: float = 30.0) -> None:
        P = protocol.load(values)
        self.lib = build(SOURCE.read_text())
        u8 = ctypes.POINTER(ctypes.c_uint8)
        self.lib.plain_loop.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_int, u8, u8, ctypes.c_int64, ctypes.c_int,
                                        ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
        self.lib.plain_loop.restype = ctypes.c_int64
        self.values, self.window, self.packet_bytes = values, window, P.packet_bytes
        self.header = P.pack_headers(1, msg_type=P.MSG_DATA)[0].tobytes()
        self.switch = (socket.inet_aton(switch_ip), P.INA_UDP_PORT)
        self.flags = (0 if gso else NO_GSO) | (0 if gro else NO_GRO)
        self.timeout_ms = int(timeout * 1000)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # as worker/api.py makes a tree's socket
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(worker)
        self.sock.setblocking(False)
        self._stats = (ctypes.c_int64 * len(STATS))()
        self.totals = dict.fromkeys(STATS, 0)

    def run(self, src: np.ndarray, dst: np.ndarray) -> int:
        """One call: the packets it took.  ``src`` and ``dst`` are C-contiguous and of one size."""
        if src.nbytes != dst.nbytes or not (src.flags.c_contiguous and dst.flags.c_contiguous):
            raise ValueError("src and dst must be C-contiguous and of one size")
        u8 = ctypes.POINTER(ctypes.c_uint8)
        n = self.lib.plain_loop(self.sock.fileno(), self.switch[0], self.switch[1], self.header, len(self.header),
                                self.values, self.window, src.ctypes.data_as(u8), dst.ctypes.data_as(u8), src.nbytes,
                                self.timeout_ms, self.flags, self._stats)
        if n < 0:
            raise OSError(-n, f"plain_loop: {os.strerror(-n)}")
        for name, v in zip(STATS, self._stats):
            self.totals[name] = v if name in ("gso", "gro") else self.totals[name] + v
        return n

    def close(self) -> None:
        self.sock.close()


def main() -> int:
    ap = arguments(__doc__.splitlines()[0])
    ap.add_argument("--no-gso", action="store_true", help="send with sendmmsg (GSO's fallback)")
    ap.add_argument("--no-gro", action="store_true", help="receive single datagrams (GRO's fallback)")
    args = ap.parse_args()
    if args.pace:
        ap.error("--pace: the plain loop is unpaced")
    if args.threads != 1:
        ap.error(f"--threads {args.threads}: the plain loop is one thread")
    loop = PlainLoop(args.values, args.window, (args.worker_ip, args.port), args.switch_ip, gso=not args.no_gso,
                     gro=not args.no_gro)
    try:
        data = np.random.default_rng(0).standard_normal(int(args.mb * 1e6) // 4).astype(np.float32)
        out = np.empty_like(data)
        loop.run(data, out)  # warm-up, checked: the ideal switch answers each packet with itself, in order
        if not np.array_equal(out.view(np.uint32), data.view(np.uint32)):
            print(json.dumps({"error": "the plain loop's warm-up results are not its input"}), flush=True)
            return 1
        before = dict(loop.totals)
        wall, cpu = timed(args.calls, lambda: loop.run(data, out))
        counts = {k: loop.totals[k] - before[k] for k in ("packets", "sends", "receives", "polls")}
        print(json.dumps({"wall": wall, "cpu": cpu, "calls": args.calls, "bytes": data.nbytes * args.calls, **counts,
                          "gso": bool(loop.totals["gso"]), "gro": bool(loop.totals["gro"])}), flush=True)
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
