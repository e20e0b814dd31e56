"""A running network as the controller sees it: the topology plus how to reach each switch.

bmv2-env writes this file (``net.json`` in its run directory) once every switch answers
P4Runtime; the controller reads it.  Any other way of starting switches (real hardware,
a hand-made script) only has to write the same file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controller.programs import PROGRAMS
from controller.topology import Topology, TopologyError

TARGETS = ("builtin", "bmv2")


@dataclass(frozen=True)
class SwitchAccess:
    grpc_address: str  # host:port of the switch's P4Runtime server
    device_id: int
    target: str  # "builtin" (p4target-switch-grpc) or "bmv2" (simple_switch_grpc)
    arch: str = "v1model"  # the program it runs (controller.programs): "v1model" (ina.p4) or "tna" (ina_tna.p4)


@dataclass
class Network:
    topology: Topology
    access: dict[str, SwitchAccess]
    host_exec: dict[str, list[str]] = field(default_factory=dict)  # host -> command prefix running on it

    def run_on(self, host: str, command: list[str]) -> list[str]:
        """The argument list that runs ``command`` on ``host`` (``ina-ctl calibrate`` needs it)."""
        if host not in self.host_exec:
            raise TopologyError(f"the network file gives no way to run commands on {host} (bmv2-env writes one for "
                                f"Mininet hosts: 'host_exec')")
        return [*self.host_exec[host], *command]

    def __post_init__(self) -> None:
        missing = sorted(set(self.topology.devices) - set(self.access))
        if missing:
            raise TopologyError(f"no P4Runtime address for switches or servers {missing}")
        bad = sorted(n for n, a in self.access.items() if a.target not in TARGETS)
        if bad:
            raise TopologyError(f"switches {bad}: target must be one of {TARGETS}")
        bad = sorted(n for n, a in self.access.items() if a.arch not in PROGRAMS)
        if bad:
            raise TopologyError(f"switches {bad}: arch must be one of {tuple(PROGRAMS)}")

    def save(self, path: str | Path) -> None:
        data = {"topology": self.topology.to_dict(), "switches": {n: asdict(a) for n, a in self.access.items()},
                "host_exec": self.host_exec}
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> Network:
        try:
            data = json.loads(Path(path).read_text())
            if isinstance(data, dict) and "topology" not in data and "links" in data:
                raise TopologyError(f"{path} is a topology file, not a network file: `ina-ctl job plan --topology "
                                    f"{path}` plans on it; other commands need the net.json bmv2-env writes once "
                                    f"the switches run")
            access = {n: SwitchAccess(**a) for n, a in data["switches"].items()}
            host_exec = {h: [str(a) for a in prefix] for h, prefix in data.get("host_exec", {}).items()}
        except TopologyError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise TopologyError(f"{path}: not a network file: {e}") from None
        return cls(Topology.from_dict(data["topology"], str(path)), access, host_exec)
