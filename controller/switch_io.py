"""One connection per switch, and the idempotent writes and reads the controller makes through it.

Apart from the controller's jobs, so that what a switch holds (this module) and what it should hold
(``controller.Controller``) are read in different places.  Every write converges: an insert of
what exists becomes a modify, a delete of what is gone is no error.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable

from p4.v1 import p4runtime_pb2

from controller.network import Network
from controller.p4runtime_client import SwitchClient, SwitchConnection, WriteError
from controller.pipeline import Pipeline, PipelineOptions, build
from controller.schema import Entry, Schema, multicast_group

PLAIN_UDP_PORT = 9  # a plain switch's aggregation port (UDP discard): no job's frames go there

Update = p4runtime_pb2.Update
# A switch that answered before takes a reconnect in milliseconds when it is up; one whose process was killed
# refuses it for as long as we wait, and the watch round waiting on it decides its trees' fate (1 s here made a
# Mininet spine's death take 1.25 s to route around).
RECONNECT_TIMEOUT = 0.2
Groups = list[tuple[int, list[tuple[int, int]]]]  # multicast group id, [(port, instance)]


class SwitchIO:
    def __init__(self, network: Network, options: Callable[[], PipelineOptions], election_id: int | None,
                 connect: Callable[[str], SwitchConnection] | None = None, wake: threading.Event | None = None
                 ) -> None:
        """``options``: the pipeline knobs now (the controller's state may load new ones); ``connect`` opens a
        switch's connection by name (default: a SwitchClient over gRPC to its access's address, which sets
        ``wake`` when the switch reports a port change or its stream ends)."""
        self.network, self.options, self.election_id = network, options, election_id
        self.connect = connect or self._connect_grpc
        self.wake = wake
        self._clients: dict[str, SwitchConnection] = {}
        self._tried: set[str] = set()  # switches asked before: a reconnect waits less

    def pipeline(self, switch: str) -> Pipeline:
        """The switch's program (its access's arch: ina.p4 or the TNA program) built for its target.  A plain
        switch gets it with aggregation on ``PLAIN_UDP_PORT``, which no job uses: it forwards every job's
        frames as routed traffic (ina.p4 would take any frame to the aggregation port as its own)."""
        access = self.network.access[switch]
        options = self.options()
        plain = self.network.topology.switches.get(switch)
        if plain is not None and plain.plain:
            options = dataclasses.replace(options, udp_port=PLAIN_UDP_PORT)
        return build(access.target, options, access.arch)

    def client(self, switch: str) -> SwitchConnection:
        """The switch's connection, opened again if the switch went away since."""
        c = self._clients.get(switch)
        if c is None or not c.alive:
            if c is not None:
                c.close()
            c = self._clients[switch] = self.connect(switch)
        return c

    def known(self, switch: str) -> SwitchConnection | None:
        """The switch's connection if one was opened (without opening one)."""
        return self._clients.get(switch)

    def connections(self) -> list[tuple[str, SwitchConnection]]:
        return list(self._clients.items())

    def _connect_grpc(self, switch: str) -> SwitchClient:
        access = self.network.access[switch]
        again = switch in self._tried
        self._tried.add(switch)
        return SwitchClient(access.grpc_address, access.device_id, self.election_id,
                            connect_timeout=RECONNECT_TIMEOUT if again else 3.0, wake=self.wake)

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()

    def runs_our_pipeline(self, switch: str, timeout: float | None = None) -> bool:
        """``timeout``: a deadline shorter than the connection's (a switch already taken for dead)."""
        return self.client(switch).pipeline_cookie(timeout) == self.pipeline(switch).config.cookie.cookie

    def install(self, switch: str, entries: list[Entry], groups: Groups) -> None:
        """Insert, and modify whatever already exists: the same call converges from any state."""
        entities = list(self._entities(switch, entries, groups))
        client = self.client(switch)
        try:
            client.write([Update(type=Update.INSERT, entity=e) for e in entities])
        except WriteError as err:
            if set(err.codes) - {"OK", "ALREADY_EXISTS"}:
                raise
            client.write([Update(type=Update.MODIFY, entity=e) for e, c in zip(entities, err.codes)
                          if c == "ALREADY_EXISTS"])

    def remove(self, switch: str, entries: list[Entry], groups: Groups) -> None:
        entities = list(self._entities(switch, entries, groups, match_only=True))
        try:
            self.client(switch).write([Update(type=Update.DELETE, entity=e) for e in entities])
        except WriteError as err:
            if set(err.codes) - {"OK", "NOT_FOUND"}:
                raise

    def _entities(self, switch: str, entries: Iterable[Entry], groups: Groups, match_only: bool = False):
        schema = Schema(self.pipeline(switch).p4info)
        for e in entries:
            te = schema.match_only(e) if match_only else schema.table_entry(e)
            yield p4runtime_pb2.Entity(table_entry=te)
        for group_id, replicas in groups:
            yield multicast_group(group_id, [] if match_only else replicas)

    def read_counter(self, switch: str, name: str) -> dict[int, int]:
        schema = Schema(self.pipeline(switch).p4info)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = schema.counter_id(name)
        cells = self.client(switch).read([entity])
        return {e.counter_entry.index.index: e.counter_entry.data.packet_count for e in cells}

    def installed_entries(self, switch: str, table: str | None = None) -> set[Entry]:
        """What the switch holds in one table (default: every table we fill), read back over P4Runtime."""
        pipe = self.pipeline(switch)
        schema = Schema(pipe.p4info)
        tables = [table] if table else list(pipe.program.managed_tables)
        return {schema.decode(e.table_entry) for e in self.client(switch).read(schema.wildcard(t) for t in tables)}

    def installed_groups(self, switch: str) -> dict[int, list[tuple[int, int]]]:
        """Multicast groups as {id: sorted [(port, instance)]}, read back over P4Runtime."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        groups = {}
        for e in self.client(switch).read([entity]):
            g = e.packet_replication_engine_entry.multicast_group_entry
            groups[g.multicast_group_id] = sorted((r.egress_port, r.instance) for r in g.replicas)
        return groups
