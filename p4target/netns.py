"""Throwaway network namespaces and veth pairs for tests and benchmarks (root only).

Real ports need real links: a veth pair whose one end the switch opens (in the root
namespace) and whose other end lives in a namespace standing for a host.  Everything is
made with the ``ip`` command and tracked by a ``Sandbox``, which deletes it on exit,
also when the block fails::

    with Sandbox() as box:
        h1 = box.netns("h1")
        link = box.veth("s1", "h1", b_netns=h1)  # s1 in the root namespace, h1 inside h1
        with entered(h1):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # stays in h1

Names are ``p4t<pid>-<tag>``: unique per process (parallel test runs never collide), at
most 15 characters (the kernel's limit for interface names), and recognisable, so
``remove_stale`` can delete what a killed process left behind.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PREFIX = "p4t"
IFNAMSIZ = 16  # interface names are at most IFNAMSIZ - 1 characters
CLONE_NEWNET = 0x40000000
_NAME = re.compile(rf"^{PREFIX}(\d+)-[A-Za-z0-9_.]+$")


class NetnsError(RuntimeError):
    """An ``ip`` command that failed, with its stderr."""


def unique_name(tag: str, pid: int | None = None) -> str:
    """``p4t<pid>-<tag>``: unique per process and short enough for an interface name."""
    name = f"{PREFIX}{os.getpid() if pid is None else pid}-{tag}"
    if not _NAME.match(name) or len(name) >= IFNAMSIZ:
        raise ValueError(f"bad name {name!r} (tag {tag!r}): letters, digits, '_' or '.', at most 15 characters")
    return name


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """Run ``ip [-n netns] args...`` and return its stdout; raise NetnsError with its stderr."""
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetnsError(f"{' '.join(cmd)}: {e}") from e
    if check and result.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {result.stderr.strip()}")
    return result.stdout


def _sysctl(netns: str | None, setting: str) -> None:
    cmd = ["sysctl", "-qw", setting]
    if netns:  # `ip netns exec` also mounts the namespace's own /proc/sys/net view
        cmd = ["ip", "netns", "exec", netns, *cmd]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {result.stderr.strip()}")


def add_netns(name: str) -> None:
    """Create a namespace with IPv6 off by default, so its links stay silent (no RS, MLD, DAD)."""
    ip("netns", "add", name)
    if os.path.exists("/proc/sys/net/ipv6"):
        _sysctl(name, "net.ipv6.conf.all.disable_ipv6=1")
        _sysctl(name, "net.ipv6.conf.default.disable_ipv6=1")


def delete_netns(name: str) -> None:
    """Delete a namespace (and the links inside, with their veth peers); a missing one is fine."""
    if os.path.exists(f"/run/netns/{name}"):
        ip("netns", "delete", name, check=False)


def add_veth(a: str, b: str, a_netns: str | None = None, b_netns: str | None = None) -> None:
    """Create the veth pair ``a``--``b``, each end directly in its namespace (None: where ``a`` is).

    Creating the far end inside its namespace (rather than moving it) leaves no window in which
    a stray end sits in the root namespace.
    """
    ip("link", "add", a, "type", "veth", "peer", "name", b, *(["netns", b_netns] if b_netns else []),
       netns=a_netns)


def delete_link(name: str, netns: str | None = None) -> None:
    """Delete a link (a veth end takes its peer along); a missing one is fine."""
    ip("link", "delete", name, netns=netns, check=False)


def disable_ipv6(iface: str, netns: str | None = None) -> None:
    """Turn IPv6 off on one link, so the kernel sends nothing on it (no link-local address)."""
    if os.path.exists("/proc/sys/net/ipv6"):
        _sysctl(netns, f"net.ipv6.conf.{iface.replace('.', '/')}.disable_ipv6=1")


def link_up(iface: str, netns: str | None = None) -> None:
    ip("link", "set", iface, "up", netns=netns)


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python >= 3.12
        os.setns(fd, CLONE_NEWNET)
    elif ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def entered(netns: str | None) -> Iterator[None]:
    """Run the block in ``netns`` (None: stay), for this thread only.

    Sockets opened inside keep working in that namespace after the block, which is all a test
    needs; ``/sys`` is not remounted, so use ``ip -n`` rather than ``/sys/class/net`` there.
    """
    if netns is None:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


@functools.cache
def can_use_netns() -> tuple[bool, str]:
    """Whether this process can make namespaces and veth pairs, and if not why (for a skip reason)."""
    if os.geteuid() != 0:
        return False, "network namespaces and raw sockets need root"
    if shutil.which("ip") is None:
        return False, "the `ip` command (iproute2) is not installed"
    probe = unique_name("probe")
    try:
        ip("netns", "add", probe)
        try:
            add_veth("probe0", "probe1", a_netns=probe)  # both ends inside: nothing to leak
        finally:
            delete_netns(probe)
    except NetnsError as e:
        return False, f"cannot create a network namespace and a veth pair here: {e}"
    return True, ""


@dataclass(frozen=True)
class Veth:
    """A veth pair: end ``a`` in namespace ``a_netns``, end ``b`` in ``b_netns`` (None: the root one)."""

    a: str
    b: str
    a_netns: str | None = None
    b_netns: str | None = None


class Sandbox:
    """Namespaces and veth pairs that are all deleted on ``close()``, whatever happened before.

    Each object is recorded before it is created, so a half-made one is deleted too.
    """

    def __init__(self) -> None:
        self.namespaces: list[str] = []
        self.links: list[tuple[str, str | None]] = []  # veth ends to delete explicitly

    def netns(self, tag: str) -> str:
        """A new namespace ``p4t<pid>-<tag>`` (IPv6 off, loopback up); returns its name."""
        name = unique_name(tag)
        self.namespaces.append(name)
        add_netns(name)
        link_up("lo", netns=name)
        return name

    def veth(self, a_tag: str, b_tag: str, a_netns: str | None = None, b_netns: str | None = None) -> Veth:
        """A veth pair ``p4t<pid>-<a_tag>``--``p4t<pid>-<b_tag>``, up, with IPv6 off on both ends."""
        link = Veth(unique_name(a_tag), unique_name(b_tag), a_netns, b_netns or a_netns)
        # A pair with an end outside our namespaces would outlive them: delete it by name.
        self.links.append((link.a, a_netns))
        add_veth(link.a, link.b, a_netns, b_netns)
        for iface, ns in ((link.a, link.a_netns), (link.b, link.b_netns)):
            disable_ipv6(iface, ns)  # before going up, so not even one router solicitation leaves
        for iface, ns in ((link.a, link.a_netns), (link.b, link.b_netns)):
            link_up(iface, ns)
        return link

    def close(self) -> None:
        """Delete every link and namespace; raise NetnsError if anything is still there afterwards."""
        for name, ns in reversed(self.links):
            if ns is None or ns not in self.namespaces:
                delete_link(name, ns)
        for ns in reversed(self.namespaces):
            delete_netns(ns)
        left = leftovers(self.namespaces, [name for name, ns in self.links if ns is None])
        self.links.clear()
        self.namespaces.clear()
        if left:
            raise NetnsError(f"could not delete {', '.join(left)}")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self.close()
        except NetnsError as e:
            if exc_type is None:
                raise
            warnings.warn(str(e), stacklevel=2)  # do not hide the exception that got us here


def _root_links() -> list[str]:
    return [line.split(":")[1].strip().split("@")[0] for line in ip("-o", "link", "show").splitlines()]


def _namespaces() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def leftovers(namespaces: list[str], root_links: list[str]) -> list[str]:
    """Which of these namespaces and root-namespace links still exist."""
    existing_ns, existing_links = set(_namespaces()), set(_root_links())
    return [f"netns {n}" for n in namespaces if n in existing_ns] + \
        [f"link {n}" for n in root_links if n in existing_links]


def remove_stale() -> list[str]:
    """Delete the ``p4t<pid>-*`` namespaces and links of processes that no longer run (killed runs)."""

    def stale(name: str) -> bool:
        m = _NAME.match(name)
        return m is not None and int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/{m.group(1)}")

    removed = []
    for name in filter(stale, _root_links()):
        delete_link(name)
        removed.append(f"link {name}")
    for name in filter(stale, _namespaces()):
        delete_netns(name)
        removed.append(f"netns {name}")
    return removed
