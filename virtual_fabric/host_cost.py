"""What a packet costs a simulated host's CPU (``ina-sim run --host-cost``), and the calibration it may come from.

Without it a simulated host is infinitely fast: the fabric shows what the links and the protocol allow.
``--host-cost`` gives each host one CPU that spends ``send`` seconds on every datagram it sends and
``receive`` on every datagram it receives (and, from the calibration, a part per byte of each), one after
another (``virtual_fabric.hosts``); the controller's model is given the same cost (``controller.model.HostCost``).

``measured`` reads ``host_cost.json`` beside this module: a worker's CPU seconds per packet against an ideal
switch at two packet sizes, fitted as a per-datagram and a per-byte part, as ``python -m bench.host_cost``
measured it (the file says on what machine, when, with which command, and how send and receive were split).
"""

from __future__ import annotations

import json
from pathlib import Path

from controller.model import NO_HOST_COST, HostCost

CALIBRATION = Path(__file__).with_name("host_cost.json")
CHOICES = "none, measured, a per-datagram cost in us each way (0.5), or send/receive in us (0.4/0.6)"


def measured(path: Path = CALIBRATION) -> HostCost:
    """The committed calibration (``bench/host_cost.py`` writes it)."""
    data = json.loads(path.read_text())
    us = 1e-6
    return HostCost(data["send_us"] * us, data["receive_us"] * us, data["send_us_per_byte"] * us,
                    data["receive_us_per_byte"] * us)


def parse(text: str) -> HostCost:
    """``none``, ``measured``, ``<us>`` (each way) or ``<send us>/<receive us>``: the hosts' cost."""
    text = text.strip()
    if text == "none":
        return NO_HOST_COST
    if text == "measured":
        return measured()
    send, slash, receive = text.partition("/")
    try:
        each = [float(send), float(receive if slash else send)]
    except ValueError:
        raise ValueError(f"host cost {text!r}: {CHOICES}") from None
    if any(not 0 <= x < 1e6 for x in each):
        raise ValueError(f"host cost {text!r}: microseconds per datagram, 0 or more")
    return HostCost(each[0] * 1e-6, each[1] * 1e-6)


def describe(cost: HostCost) -> str:
    """One line: what a datagram costs each way."""
    def way(fixed: float, per_byte: float) -> str:
        return f"{fixed * 1e6:.3g} us" + (f" + {per_byte * 1e9:.3g} ns/B" if per_byte else "")

    cpus = "one CPU" if cost.cores == 1 else f"{cost.cores} CPUs"
    return f"send {way(cost.send, cost.send_per_byte)}, receive {way(cost.receive, cost.receive_per_byte)} " \
           f"per datagram, on {cpus}"
