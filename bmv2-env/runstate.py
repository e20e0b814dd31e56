"""What a run directory records about a running network, and how a later run cleans up after it.

``state.json`` names the process that owns the network, the switch processes and host
shells it started, and the interfaces it made.  A run that crashed (kill -9, power cut of
the terminal) leaves all that behind; the next ``start`` in the same run directory, or
``ina-net clean``, stops those processes and deletes those interfaces, and nothing else:
Mininet's own ``mn -c`` would also sweep Open vSwitch and every ``*-eth*`` link on the machine.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from p4target.netns import delete_link

from .processes import ProcessRef, processes_with_argument, stop_processes

STATE_FILE = "state.json"
NET_FILE = "net.json"
LOG_DIR = "logs"


class NetworkBusy(RuntimeError):
    """Another live network owns this run directory or these interfaces."""


@dataclass
class RunState:
    owner: ProcessRef
    interfaces: list[str]
    switches: dict[str, ProcessRef] = field(default_factory=dict)
    hosts: dict[str, ProcessRef] = field(default_factory=dict)

    def save(self, run_dir: Path) -> None:
        tmp = run_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(run_dir / STATE_FILE)

    @classmethod
    def load(cls, run_dir: Path) -> RunState | None:
        """The recorded state, or None when there is none (or it is unreadable: nothing to trust)."""
        try:
            data = json.loads((run_dir / STATE_FILE).read_text())
            return cls(ProcessRef(**data["owner"]), list(data["interfaces"]),
                       {n: ProcessRef(**r) for n, r in data["switches"].items()},
                       {n: ProcessRef(**r) for n, r in data["hosts"].items()})
        except (OSError, ValueError, KeyError, TypeError):
            return None


def link_exists(name: str) -> bool:
    """Whether a link of this name is in our (the root) network namespace."""
    return Path("/sys/class/net", name).exists()


def switches_using(interfaces: Iterable[str]) -> dict[int, list[str]]:
    """Live processes started with ``-i N@IFACE`` for one of these interfaces: pid -> argv."""
    names = set(interfaces)

    def attaches_one(argument: str) -> bool:
        port, at, iface = argument.partition("@")
        return bool(at) and port.isdigit() and iface in names

    return processes_with_argument(attaches_one)


def clean_run_dir(run_dir: Path, interfaces: Iterable[str] = (), force: bool = False) -> list[str]:
    """Stop what a dead run left in ``run_dir`` and delete its (and these) interfaces; say what went.

    Raises NetworkBusy when the run's owner is still alive (stop it instead), or when a switch
    process that no run directory here knows about uses one of the interfaces (``force``: stop it).
    """
    state = RunState.load(run_dir)
    if state is not None and state.owner.alive():
        raise NetworkBusy(f"a network from {run_dir} is running (pid {state.owner.pid}); "
                          f"stop it with `ina-net stop --run-dir {run_dir}`")
    removed: list[str] = []
    names = set(interfaces)
    if state is not None:
        names |= set(state.interfaces)
        stopped = stop_processes(list(state.switches.values())) + \
            stop_processes(list(state.hosts.values()), first=signal.SIGHUP)
        removed += [f"process {ref.pid}" for ref in stopped]
    users = switches_using(names)
    if users and not force:
        described = "; ".join(f"pid {pid}: {' '.join(argv)}" for pid, argv in sorted(users.items()))
        raise NetworkBusy(f"switch processes from another run use these interfaces ({described}); "
                          "stop that network, or kill them with `ina-net clean --force TOPOLOGY`")
    for ref in stop_processes([r for r in map(ProcessRef.of, users) if r is not None]):
        removed.append(f"process {ref.pid}")
    for name in sorted(names):
        if link_exists(name):
            delete_link(name)
            removed.append(f"link {name}")
    for leftover in (STATE_FILE, NET_FILE):
        (run_dir / leftover).unlink(missing_ok=True)
    return removed
