"""Whether this machine can run Mininet networks (root, namespaces, Debian's mininet and tools)."""

from __future__ import annotations

import shutil

import pytest

from p4target import netns


def _can_run_mininet() -> tuple[bool, str]:
    usable, why = netns.can_use_netns()
    if not usable:
        return False, why
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return False, "Mininet is not installed (scripts/setup-system.sh installs Debian's)"
    missing = [tool for tool in ("mnexec", "ethtool", "ping", "tc") if shutil.which(tool) is None]
    if missing:
        return False, f"not installed: {', '.join(missing)} (scripts/setup-system.sh installs them)"
    return True, ""


USABLE, WHY_NOT = _can_run_mininet()
needs_mininet = pytest.mark.skipif(not USABLE, reason=WHY_NOT or "Mininet is usable")

try:  # checks that build commands without running a network need Mininet importable only
    import mininet.node  # noqa: F401

    HAVE_MININET = True
except ImportError:
    HAVE_MININET = False
needs_mininet_module = pytest.mark.skipif(not HAVE_MININET, reason="Mininet is not installed")
