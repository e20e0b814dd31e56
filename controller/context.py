"""What every unit of the controller shares: the network, the state store, the switches' connections, the
reconciler, the failover's books, the locks, and the views derived from the state now (the calibrated
topology, the hosts' latency, the protocol, the switches' pools and what live jobs hold of them).

The state object is replaced when its file changes (``StateStore.reload``): units read ``ctx.state`` each
time and never keep it."""

from __future__ import annotations

import threading

from controller.admission import Held, Pools
from controller.failover import Failover
from controller.model import DEFAULT_HOST_LATENCY, HostCost
from controller.network import Network
from controller.pipeline import Pipeline
from controller.reconcile import Reconciler
from controller.servers import with_rates
from controller.state import ControllerState
from controller.store import StateStore
from controller.switch_io import SwitchIO
from controller.topology import Topology
from worker import protocol


class Context:
    def __init__(self, network: Network, store: StateStore, io: SwitchIO, failover: Failover,
                 wake: threading.Event, host_latency: float | None, host_cost: HostCost) -> None:
        """``host_latency`` the model's when given (else a calibration's, else the model's default)."""
        self.network, self.store, self.io, self.failover, self.wake = network, store, io, failover, wake
        self.host_cost = host_cost
        self._host_latency = host_latency
        self._topology: tuple[tuple, Topology] = ((), network.topology)  # the servers' rates it has, and it
        # entries do not depend on servers' rates: the reconciler keeps the topology as it starts
        self.reconciler = Reconciler(self.topology, io, lambda: self.store.state)
        self.lock = threading.RLock()
        self.rounds = threading.Lock()  # one watch round (or probe) at a time: they share the failover's books

    @property
    def state(self) -> ControllerState:
        return self.store.state

    @property
    def topology(self) -> Topology:
        """The network's topology with each server's per-core rate as calibrated (``server_calibrated``): what
        plans, models, admission and failover see."""
        rates = tuple(sorted(self.state.server_rates.items()))
        if rates != self._topology[0]:
            self._topology = (rates, with_rates(self.network.topology, dict(rates)))
        return self._topology[1]

    @property
    def host_latency(self) -> float:
        """Seconds from the wire to a worker's loop, as the model takes it."""
        if self._host_latency is not None:
            return self._host_latency
        return self.state.host_latency if self.state.host_latency is not None else DEFAULT_HOST_LATENCY

    def protocol(self) -> protocol.Protocol:
        return protocol.load(self.state.options.values, self.state.options.udp_port)

    def pipeline(self, switch: str) -> Pipeline:
        return self.io.pipeline(switch)

    def pools(self) -> Pools:
        """Each switch's pool slots and job cells."""
        return {s: (self.pipeline(s).pool_slots, self.pipeline(s).max_jobs) for s in self.topology.devices}

    def held(self) -> Held:
        """What live jobs hold on each switch: (pool base, pool size, cell) per tree."""
        held: Held = {}
        for job in self.state.jobs.values():
            for t in job.trees:
                for switch, a in t.allocations.items():
                    held.setdefault(switch, []).append((a.pool_base, job.pool_size, a.cell))
        return held
