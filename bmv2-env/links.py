"""Topology links as Mininet links: plain veth pairs, or TCLinks when the file shapes them.

Loss is made by the link itself, frame by frame, as a wire loses frames, and without netem
(our CI's kernel has none).  Each end of a lossy link gets this qdisc tree:

    tbf (line rate, a one-frame bucket)  ->  htb (the link's bw, as Mininet shapes it)
                                             + a classic-BPF filter that drops at random

The tbf is there only to cut segmentation-offload buffers into frames: a UDP GSO send (a
worker's window) or a TCP TSO buffer is one packet to every hook before the device, so a
drop there would lose it whole.  tbf segments any buffer larger than its bucket (one frame)
before handing it on, so the filter below it sees single frames.  The filter is four classic
BPF instructions (``ld rand``, compare, ``ret SHOT`` or ``ret UNSPEC``) in direct-action
mode: it needs neither netem nor act_gact, which kernels like ours also lack.  A GSO send
whose frames add up to one frame's size or less (a few tiny datagrams) still goes whole.

Mininet only prints tc's errors and carries on, so ``add_link`` checks that every option
really took effect and raises LinkSetupError otherwise.  Mininet also ignores a ``bw`` above
1 Gbit/s (its TCIntf's limit): such a link gets the same htb as a lossy one, at the root, without
the filter (``limit_rate``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any, NamedTuple

from mininet.link import Link, TCIntf, TCLink
from mininet.net import Mininet

from controller.topology import PORT_NAME
from controller.topology import Link as TopologyLink
from p4target import netns

NETEM_OPTIONS = ("delay", "jitter", "max_queue_size")  # TCIntf makes these with netem
RATE_QDISCS = ("htb", "tbf", "hfsc")  # and bw with one of these
LINE_RATE = "10gbit"  # an unshaped lossy link: faster than anything a veth carries here
SEGMENT_ABOVE = 1600  # bytes: tbf's bucket, so any buffer of two or more wire frames is cut
HTB_BURST = "15k"  # Mininet's burst for bw, so a lossy link is shaped as a clean one is


class LinkSetupError(RuntimeError):
    """A link whose bandwidth, delay or loss could not be set up."""


class HostEnd(NamedTuple):
    """Where a topology host's end of its link is in Mininet: a machine's NIC is port i of the machine
    (``machines.py``), its interface made with the NIC's MAC and address (``params``: mac, ip)."""

    node: str
    port: int
    params: dict[str, Any]


def endpoint(name: str, hosts: Mapping[str, HostEnd] | None = None) -> tuple[str, int]:
    """A link end of the topology file as (node, Mininet port): ``"s1-p3"`` -> (s1, 3), ``"h1"`` -> (h1, 0),
    a machine's NIC in ``hosts`` -> (machine, its port)."""
    if hosts and name in hosts:
        return hosts[name].node, hosts[name].port
    m = PORT_NAME.match(name)
    return (m["switch"], int(m["port"])) if m else (name, 0)


def _end_options(end: HostEnd | None, side: int) -> dict[str, Any]:
    """addLink's options for a machine NIC's end: the MAC at creation, the address by Mininet's Intf.config."""
    if end is None or not end.params:
        return {}
    return {f"addr{side}": end.params["mac"], f"params{side}": {"ip": end.params["ip"]}}


def add_link(net: Mininet, link: TopologyLink, hosts: Mapping[str, HostEnd] | None = None) -> Link:
    """The topology link in ``net``; ``hosts`` places the machines' NICs (a host not in it is its own node)."""
    hosts = hosts or {}
    (a, port_a), (b, port_b) = endpoint(link.a, hosts), endpoint(link.b, hosts)
    ends = {**_end_options(hosts.get(link.a), 1), **_end_options(hosts.get(link.b), 2)}
    loss = link.options.get("loss")
    shaping = {k: v for k, v in link.options.items() if k != "loss"}
    if loss and any(shaping.get(k) for k in NETEM_OPTIONS):
        raise LinkSetupError(f"link {link.a} -- {link.b}: loss cannot be combined with {', '.join(NETEM_OPTIONS)} "
                             f"(both would need the root qdisc)")
    fast = shaping.get("bw") is not None and float(shaping["bw"]) > TCIntf.bwParamMax and \
        not any(shaping.get(k) for k in NETEM_OPTIONS)  # Mininet would ignore the bw: our own htb
    if shaping and not loss and not fast:
        made = net.addLink(a, b, port1=port_a, port2=port_b, cls=TCLink, **ends, **shaping)
    else:
        made = net.addLink(a, b, port1=port_a, port2=port_b, **ends)
    for intf in (made.intf1, made.intf2):
        if loss:
            lose_frames(intf, float(loss), link.options.get("bw"), link)
        elif fast:
            limit_rate(intf, float(shaping["bw"]), link)
        elif shaping:
            _check_shaping(intf, link)
    return made


def kernel_has_netem() -> bool:
    """Whether tc can make a netem qdisc here (some kernels, ours among them, are built without sch_netem)."""
    with netns.Sandbox() as box:
        ns = box.netns("netem")
        return subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                               "delay", "1ms"], capture_output=True).returncode == 0


def limit_rate(intf: object, bw: float, link: TopologyLink) -> None:
    """Make ``intf`` send at ``bw`` Mbit/s with an htb at the root, as Mininet shapes (any rate)."""
    _run_tc(intf, [f"tc qdisc replace dev {intf.name} root handle 10: htb default 1",
                   f"tc class add dev {intf.name} parent 10: classid 10:1 htb rate {bw}mbit burst {HTB_BURST} "
                   f"quantum 1514"], f"cannot shape {intf.name} to {bw} Mb/s", link)


def _run_tc(intf: object, commands: list[str], what: str, link: TopologyLink) -> None:
    for command in commands:
        out = intf.cmd(f"{command} 2>&1 && echo TC_OK")
        if "TC_OK" not in out:
            raise LinkSetupError(f"link {link.a} -- {link.b}: {what}: `{command}`: {out.strip()}")


def drop_filter(percent: float) -> str:
    """tc's ``bytecode`` for a classic BPF filter that drops ``percent`` % of frames at random."""
    threshold = min(2**32 - 1, round(percent / 100 * 2**32))
    load_random = f"32 0 0 {0xFFFFF000 + 0x38}"  # BPF_LD|BPF_W|BPF_ABS of SKF_AD_OFF + SKF_AD_RANDOM
    keep_at_or_above = f"53 1 0 {threshold}"  # BPF_JMP|BPF_JGE|BPF_K: jump over the drop
    return f"4,{load_random},{keep_at_or_above},6 0 0 2,6 0 0 {2**32 - 1}"  # ret TC_ACT_SHOT / TC_ACT_UNSPEC


def lose_frames(intf: object, percent: float, bw: float | None, link: TopologyLink) -> None:
    """Make ``intf`` send at ``bw`` Mbit/s (or line rate) and lose ``percent`` % of its frames."""
    if not 0 < percent <= 100:
        raise LinkSetupError(f"link {link.a} -- {link.b}: loss {percent} is not a percentage in (0, 100]")
    rate = f"{float(bw)}mbit" if bw else LINE_RATE
    dev = intf.name
    commands = [f"tc qdisc replace dev {dev} root handle 1: tbf rate {LINE_RATE} burst {SEGMENT_ABOVE} latency 1s",
                f"tc qdisc add dev {dev} parent 1:1 handle 10: htb default 1",
                f"tc class add dev {dev} parent 10: classid 10:1 htb rate {rate} burst {HTB_BURST} quantum 1514",
                f"tc filter add dev {dev} parent 10: protocol all prio 1 bpf bytecode '{drop_filter(percent)}' da"]
    _run_tc(intf, commands, f"cannot make {percent}% loss on {dev}", link)


def _check_shaping(intf: object, link: TopologyLink) -> None:
    qdiscs = intf.cmd(f"tc qdisc show dev {intf.name}")
    netem = {k: v for k, v in link.options.items() if k in NETEM_OPTIONS and v}
    if netem and "netem" not in qdiscs:
        raise LinkSetupError(f"link {link.a} -- {link.b}: no netem qdisc on {intf.name} for {netem} (does this "
                             f"kernel have sch_netem?); tc shows: {qdiscs.strip() or 'nothing'}")
    if link.options.get("bw") is not None and not any(q in qdiscs for q in RATE_QDISCS):
        raise LinkSetupError(f"link {link.a} -- {link.b}: no rate limit on {intf.name} for bw={link.options['bw']}; "
                             f"tc shows: {qdiscs.strip() or 'nothing'}")
