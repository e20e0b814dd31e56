"""The aggregation P4 programs as package data: where the worker and the controller find them.

``protocol.p4``, ``ina.p4``, ``headers.p4``, ``lanes.p4`` and the ``common/``, ``v1model/`` and
``tofino/`` folders ship inside the installed package (pyproject.toml's package-data), so a
worker installed from a wheel reads the same files as one run from a checkout (an editable
install maps this package to the checkout's ``p4src/``).  Every reader goes through ``path``:
no module locates these files relative to the checkout.  The files must be plain files on disk,
since cpp reads them and resolves their ``#include``s.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["ROOT", "path"]


def _root() -> Path:
    found = resources.files(__name__)
    if not isinstance(found, Path):  # e.g. imported from a zip: cpp could not read the files
        raise ImportError(f"the p4src package must be installed as files on disk, not in {found}")
    return found.resolve()


ROOT = _root()


def path(*parts: str) -> Path:
    """The file at ``parts`` inside p4src (``path("tofino", "ina_tna.p4")``); a clear error if the
    installed package lacks it (built without its package data)."""
    found = ROOT.joinpath(*parts)
    if not found.is_file():
        raise FileNotFoundError(f"{found}: not in the p4src package at {ROOT} (was the package built without "
                                f"its .p4 files? see [tool.setuptools.package-data] in pyproject.toml)")
    return found
