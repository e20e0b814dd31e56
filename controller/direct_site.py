"""A real direct-connect cluster's addresses: the *site* file, which the cluster file (``controller.direct``,
sizes and rates only) leaves out.  ``controller.direct_jobs`` turns a plan and a site into every rank's parts.

    {"workers": [{"interfaces": [{"ip": "192.168.0.0/31", "mac": "0c:42:a1:00:00:01"},
                                 {"ip": "192.168.0.3/31", "mac": "0c:42:a1:00:00:02"}, ...]}, ...],
     "devices": [{"p4runtime": "10.0.0.21:9559", "device_id": 1, "target": "builtin",
                  "ip": "192.168.200.1", "mac": "0c:42:a1:00:01:00"}],
     "ring_port": 29500}

A worker may also give its streaming NIC (a SmartNIC that sums as data passes, between the worker's interfaces and
its circuits: the cluster's ``workers.nic_streaming``), a P4Runtime device as a device is:
``"nic": {"p4runtime": ..., "device_id": ..., "target": ..., "ip": ..., "mac": ...}``; a cluster with
``nic_streaming`` needs one on every worker, one without it takes none.

Worker w's interfaces are in interface order (the plan's interface i is the i-th) and devices in device
order (the plan's device j is the j-th).  A device's ``p4runtime``, ``device_id`` and ``target`` are how the
controller reaches it (``controller.network.SwitchAccess``; ``arch`` is optional, v1model by default); its
``ip`` and ``mac`` are its own, the address workers send aggregation packets to and that results come from.
Ring and torus parts listen on ``ring_port`` and the ports after it (``controller.direct_jobs``).

On real circuits each circuit is its own point-to-point subnet (an interface pair, or an interface and a
device port), so an interface's prefix is the operator's choice, and so are the routes (and neighbour
entries) that send a worker's packets for a ring peer or a device out of the interface on that circuit:
nothing here installs them on the workers (in Mininet, bmv2-env/direct.py does).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.direct import DirectCluster, DirectError
from controller.network import TARGETS, SwitchAccess
from controller.programs import PROGRAMS
from controller.topology import read_json

MAC = re.compile(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$")
DEFAULT_RING_PORT = 29500


@dataclass(frozen=True)
class Interface:
    """One circuit interface of a worker."""

    ip: ipaddress.IPv4Interface
    mac: str


@dataclass(frozen=True)
class Device:
    """An aggregation device: how the controller reaches it, and its own address on the circuits."""

    p4runtime: str  # host:port of its P4Runtime server
    device_id: int
    target: str  # "builtin" (p4target-switch-grpc) or "bmv2"
    ip: ipaddress.IPv4Address
    mac: str
    arch: str = "v1model"

    @property
    def access(self) -> SwitchAccess:
        return SwitchAccess(self.p4runtime, self.device_id, self.target, self.arch)


@dataclass(frozen=True)
class DirectSite:
    """Every worker's interfaces and every device of a direct-connect cluster, and the rings' first port."""

    workers: tuple[tuple[Interface, ...], ...]
    devices: tuple[Device, ...]
    ring_port: int = DEFAULT_RING_PORT
    nics: tuple[Device | None, ...] = ()  # worker w's streaming NIC, or None (empty: none at all)

    def nic(self, worker: int) -> Device | None:
        return self.nics[worker] if self.nics else None

    def check(self, cluster: DirectCluster, where: str = "site") -> None:
        """The site has the cluster's workers, interfaces and devices (a DirectError naming the field)."""
        if len(self.workers) != cluster.workers:
            raise DirectError(f"{where}: workers: {len(self.workers)} listed, the cluster has {cluster.workers}")
        for w, interfaces in enumerate(self.workers):
            if len(interfaces) != cluster.interfaces:
                raise DirectError(f"{where}: workers[{w}].interfaces: {len(interfaces)} listed, each worker of the "
                                  f"cluster has {cluster.interfaces}")
        if len(self.devices) != cluster.devices:
            raise DirectError(f"{where}: devices: {len(self.devices)} listed, the cluster has {cluster.devices}")
        for w in range(cluster.workers):
            if cluster.nic_streaming and self.nic(w) is None:
                raise DirectError(f"{where}: workers[{w}].nic is missing: the cluster's workers have streaming NICs "
                                  f"(workers.nic_streaming)")
            if not cluster.nic_streaming and self.nic(w) is not None:
                raise DirectError(f"{where}: workers[{w}].nic: the cluster's workers have no streaming NIC "
                                  f"(workers.nic_streaming is false)")

    def to_dict(self) -> dict:
        workers = []
        for w, interfaces in enumerate(self.workers):
            worker: dict[str, Any] = {"interfaces": [{"ip": str(i.ip), "mac": i.mac} for i in interfaces]}
            nic = self.nic(w)
            if nic is not None:
                worker["nic"] = _device_dict(nic)
            workers.append(worker)
        return {"workers": workers, "devices": [_device_dict(d) for d in self.devices], "ring_port": self.ring_port}

    @classmethod
    def from_dict(cls, data: Any, where: str = "site") -> DirectSite:
        if not isinstance(data, dict):
            raise DirectError(f"{where}: a site is a JSON object with 'workers', 'devices' and 'ring_port'")
        _known(data, {"workers", "devices", "ring_port"}, "", where)
        listed = _list(data, "workers", where)
        workers = tuple(_worker(w, f"workers[{i}]", where) for i, w in enumerate(listed))
        nics = tuple(_device(w["nic"], f"workers[{i}].nic", where) if "nic" in w else None
                     for i, w in enumerate(listed))
        devices = tuple(_device(d, f"devices[{j}]", where)
                        for j, d in enumerate(_list(data, "devices", where, required=False)))
        port = data.get("ring_port", DEFAULT_RING_PORT)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise DirectError(f"{where}: ring_port: a TCP port from 1 to 65535, not {port!r}")
        _unique([(f"workers[{w}].interfaces[{i}]", str(x.ip.ip), x.mac) for w, xs in enumerate(workers)
                 for i, x in enumerate(xs)] + [(f"devices[{j}]", str(d.ip), d.mac) for j, d in enumerate(devices)]
                + [(f"workers[{w}].nic", str(n.ip), n.mac) for w, n in enumerate(nics) if n is not None], where)
        _unique_access([(f"devices[{j}]", d) for j, d in enumerate(devices)]
                       + [(f"workers[{w}].nic", n) for w, n in enumerate(nics) if n is not None], where)
        return cls(workers, devices, port, nics if any(n is not None for n in nics) else ())

    @classmethod
    def load(cls, path: str | Path) -> DirectSite:
        return cls.from_dict(read_json(path, DirectError), str(path))


def _known(data: dict, fields: set[str], prefix: str, where: str) -> None:
    unknown = sorted(set(data) - fields)
    if unknown:
        raise DirectError(f"{where}: unknown field(s) {[prefix + u for u in unknown]}")


def _list(data: dict, name: str, where: str, required: bool = True) -> list:
    value = data.get(name, None if required else [])
    if not isinstance(value, list):
        raise DirectError(f"{where}: {name}: a list, not {value!r}")
    return value


def _object(value: Any, field: str, fields: set[str], where: str, optional: frozenset[str] = frozenset()) -> dict:
    if not isinstance(value, dict):
        raise DirectError(f"{where}: {field}: an object with {', '.join(sorted(fields))}, not {value!r}")
    _known(value, fields | optional, f"{field}.", where)
    missing = sorted(fields - set(value))
    if missing:
        raise DirectError(f"{where}: {field}.{missing[0]} is missing")
    return value


def _worker(value: Any, field: str, where: str) -> tuple[Interface, ...]:
    interfaces = _object(value, field, {"interfaces"}, where, frozenset({"nic"}))["interfaces"]
    if not isinstance(interfaces, list) or not interfaces:
        raise DirectError(f"{where}: {field}.interfaces: a list of interfaces in interface order, not {interfaces!r}")
    out = []
    for i, x in enumerate(interfaces):
        name = f"{field}.interfaces[{i}]"
        x = _object(x, name, {"ip", "mac"}, where)
        try:
            if not isinstance(x["ip"], str) or "/" not in x["ip"]:
                raise ValueError("an address with its prefix, like 192.168.0.1/31")
            ip = ipaddress.IPv4Interface(x["ip"])
        except ValueError as e:
            raise DirectError(f"{where}: {name}.ip: {e}, not {x['ip']!r}") from None
        out.append(Interface(ip, _mac(x["mac"], f"{name}.mac", where)))
    return tuple(out)


def _device(value: Any, field: str, where: str) -> Device:
    d = _object(value, field, {"p4runtime", "device_id", "target", "ip", "mac"}, where, frozenset({"arch"}))
    host, _, port = d["p4runtime"].rpartition(":") if isinstance(d["p4runtime"], str) else ("", "", "")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise DirectError(f"{where}: {field}.p4runtime: host:port of its P4Runtime server, not {d['p4runtime']!r}")
    if isinstance(d["device_id"], bool) or not isinstance(d["device_id"], int) or not 0 <= d["device_id"] < 1 << 64:
        raise DirectError(f"{where}: {field}.device_id: a P4Runtime device id (a whole number >= 0), not "
                          f"{d['device_id']!r}")
    if d["target"] not in TARGETS:
        raise DirectError(f"{where}: {field}.target: one of {', '.join(TARGETS)}, not {d['target']!r}")
    arch = d.get("arch", "v1model")
    if arch not in PROGRAMS:
        raise DirectError(f"{where}: {field}.arch: one of {', '.join(PROGRAMS)}, not {arch!r}")
    try:
        ip = ipaddress.IPv4Address(d["ip"] if isinstance(d["ip"], str) else "")
    except ValueError:
        raise DirectError(f"{where}: {field}.ip: the device's own address, like 192.168.200.1 (no prefix), not "
                          f"{d['ip']!r}") from None
    return Device(d["p4runtime"], d["device_id"], d["target"], ip, _mac(d["mac"], f"{field}.mac", where), arch)


def _device_dict(d: Device) -> dict:
    return {"p4runtime": d.p4runtime, "device_id": d.device_id, "target": d.target, "ip": str(d.ip), "mac": d.mac,
            "arch": d.arch}


def _mac(value: Any, field: str, where: str) -> str:
    if not isinstance(value, str) or not MAC.match(value):
        raise DirectError(f"{where}: {field}: a MAC address like 0c:42:a1:00:00:01, not {value!r}")
    return value.lower()


def _unique(ends: list[tuple[str, str, str]], where: str) -> None:
    """No address or MAC given twice: each is one end of one circuit."""
    for column, what in ((1, "ip"), (2, "mac")):
        seen: dict[str, str] = {}
        for end in ends:
            if end[column] in seen:
                raise DirectError(f"{where}: {end[0]}.{what}: {end[column]} is also {seen[end[column]]}.{what}")
            seen[end[column]] = end[0]


def _unique_access(devices: list[tuple[str, Device]], where: str) -> None:
    """No device (a NIC is one too) reached as another is: the same P4Runtime server and device id."""
    seen: dict[tuple[str, int], str] = {}
    for name, d in devices:
        key = (d.p4runtime, d.device_id)
        if key in seen:
            raise DirectError(f"{where}: {name}: P4Runtime {d.p4runtime} device_id {d.device_id} is also "
                              f"{seen[key]}'s")
        seen[key] = name
