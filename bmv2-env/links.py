"""Topology links as Mininet links: plain veth pairs, or TCLinks when the file shapes them.

Loss is made by nftables, not netem: a rule on each end's egress hook drops that share of
the frames it sends, at random.  It works on kernels without sch_netem (like our CI's) and
also for the switch's AF_PACKET sends, and gives the same per-direction loss as Mininet's
netem on both ends.  Delay and jitter still need netem.  Mininet only prints tc's errors and
carries on, so ``add_link`` checks that every option really took effect and raises
LinkSetupError otherwise.
"""

from __future__ import annotations

import subprocess

from mininet.link import Link, TCLink
from mininet.net import Mininet

from controller.topology import PORT_NAME
from controller.topology import Link as TopologyLink

NETEM_OPTIONS = ("delay", "jitter", "max_queue_size")  # TCIntf makes these with netem
LOSS_TABLE = "ina_loss"  # nftables table (netdev family) holding the loss rules of a namespace
RATE_QDISCS = ("htb", "tbf", "hfsc")  # and bw with one of these


class LinkSetupError(RuntimeError):
    """A link whose bandwidth, delay or loss could not be set up."""


def endpoint(name: str) -> tuple[str, int]:
    """A link end of the topology file as (node, Mininet port): ``"s1-p3"`` -> (s1, 3), ``"h1"`` -> (h1, 0)."""
    m = PORT_NAME.match(name)
    return (m["switch"], int(m["port"])) if m else (name, 0)


def add_link(net: Mininet, link: TopologyLink) -> Link:
    (a, port_a), (b, port_b) = endpoint(link.a), endpoint(link.b)
    shaping = {k: v for k, v in link.options.items() if k != "loss"}
    if shaping:
        made = net.addLink(a, b, port1=port_a, port2=port_b, cls=TCLink, **shaping)
    else:
        made = net.addLink(a, b, port1=port_a, port2=port_b)
    for intf in (made.intf1, made.intf2):
        if shaping:
            _check_shaping(intf, link)
        if link.options.get("loss"):
            drop_at_random(intf, float(link.options["loss"]), link)
    return made


def drop_at_random(intf: object, percent: float, link: TopologyLink) -> None:
    """Drop ``percent`` % of the frames ``intf`` sends (nftables netdev egress, in its namespace).

    The hook sees a packet before segmentation: a UDP GSO send (a window of the worker) is one
    packet to it, lost or kept whole.  Workers under emulated loss set INA_UDP_GSO=0 to lose
    single frames, as on a wire (an ingress hook would come after the switch's packet sockets)."""
    if not 0 < percent <= 100:
        raise LinkSetupError(f"link {link.a} -- {link.b}: loss {percent} is not a percentage in (0, 100]")
    chain = intf.name.replace("-", "_")  # remove_loss_rules() names it the same way
    threshold = min(999_999, round(percent * 10_000))
    script = (f"add table netdev {LOSS_TABLE}\n"
              f"add chain netdev {LOSS_TABLE} {chain} "
              f"{{ type filter hook egress device \"{intf.name}\" priority 0; }}\n"
              f"flush chain netdev {LOSS_TABLE} {chain}\n"
              f"add rule netdev {LOSS_TABLE} {chain} numgen random mod 1000000 < {threshold} counter drop\n")
    out = intf.cmd(f"printf '{script}' | nft -f - && echo NFT_OK")
    if "NFT_OK" not in out:
        raise LinkSetupError(f"link {link.a} -- {link.b}: cannot make {percent}% loss on {intf.name} with nftables: "
                             f"{out.strip()}")


def remove_loss_rules(interfaces: list[str]) -> None:
    """Delete the loss chains of these root-namespace interfaces (host namespaces take theirs along)."""
    for name in interfaces:
        subprocess.run(["nft", "delete", "chain", "netdev", LOSS_TABLE, name.replace("-", "_")], capture_output=True)


def _check_shaping(intf: object, link: TopologyLink) -> None:
    qdiscs = intf.cmd(f"tc qdisc show dev {intf.name}")
    netem = {k: v for k, v in link.options.items() if k in NETEM_OPTIONS and v}
    if netem and "netem" not in qdiscs:
        raise LinkSetupError(f"link {link.a} -- {link.b}: no netem qdisc on {intf.name} for {netem} (does this "
                             f"kernel have sch_netem?); tc shows: {qdiscs.strip() or 'nothing'}")
    if link.options.get("bw") is not None and not any(q in qdiscs for q in RATE_QDISCS):
        raise LinkSetupError(f"link {link.a} -- {link.b}: no rate limit on {intf.name} for bw={link.options['bw']}; "
                             f"tc shows: {qdiscs.strip() or 'nothing'}")
