"""The packet path: ports in, the running pipeline, ports (or the controller) out.

One thread waits on every port and runs each frame through the current ``Switch``.  When the
pipeline runs natively and every port is a raw interface, the frames are served in batches
by C (portio.py) without a Python object per frame; otherwise one frame at a time.  The
pipeline is swapped by assigning ``switch`` (SetForwardingPipelineConfig); frames that
arrive with no pipeline are dropped and counted.  Frames the program sends to the CPU port
go to ``packet_in`` (the P4Runtime stream); packet-outs come back in through ``inject``.
"""

from __future__ import annotations

import logging
import selectors
import threading
from collections import Counter
from collections.abc import Callable

from .executor.native import NativeFork, NativePipeline
from .executor.switch import Switch
from .portio import BatchedPorts
from .ports import Port, PortError
from .udpio import UdpSocket

log = logging.getLogger(__name__)


class Dataplane:
    def __init__(self, ports: list[Port], cpu_port: int | None = None) -> None:
        self.ports = {p.number: p for p in ports}
        self.cpu_port = cpu_port
        self.switch: Switch | None = None
        self.packet_in: Callable[[bytes], None] | None = None
        self.stats: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dataplane", daemon=True)
        self._batched = BatchedPorts.available(ports)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._batched is not None:
            self._batched.close()
        for port in self.ports.values():
            port.close()

    def inject(self, port: int, data: bytes) -> None:
        """Run a frame as if it arrived on ``port`` (packet-out arrives on the CPU port)."""
        self._process(port, data)

    def _process(self, in_port: int, data: bytes) -> None:
        switch = self.switch
        if switch is None:
            self.stats["dropped_no_pipeline"] += 1
            return
        for out in switch.process(in_port, data):
            self._deliver(out.port, out.data)

    def _deliver(self, number: int, data: bytes) -> None:
        port = self.ports.get(number)
        if port is not None:
            port.send(data)
        elif number == self.cpu_port and self.packet_in is not None:
            self.packet_in(data)
        else:
            self.stats["dropped_no_port"] += 1

    def _pump(self, switch: Switch) -> None:
        """Wait for frames (not holding the switch's lock), then serve them in batches under it."""
        if not self._batched.wait(200):
            return
        with switch.lock:
            native = switch.native
            if native is None or self.switch is not switch:
                return
            punted = self._batched.pump(native)
        for number, data in punted:
            self._deliver(number, data)

    def _run(self) -> None:
        with selectors.DefaultSelector() as sel:
            for port in self.ports.values():
                sel.register(port.fileno(), selectors.EVENT_READ, port)
            while not self._stop.is_set():
                switch = self.switch
                if self._batched is not None and switch is not None and switch.native is not None:
                    self._pump(switch)
                    continue
                for key, _ in sel.select(timeout=0.2):
                    port: Port = key.data
                    try:
                        for _ in range(64):  # drain a burst, then look at the other ports
                            data = port.recv()
                            if data is None:
                                break
                            self._process(port.number, data)
                    except (OSError, PortError) as err:  # an interface went away: keep serving the others
                        log.warning("port %d (%s): %s; no longer polled", port.number, port.name, err)
                        sel.unregister(key.fileobj)
                        continue
                    if not port.readable:  # a finished pcap input stays "ready" forever
                        sel.unregister(key.fileobj)


class UdpDataplane(Dataplane):
    """An aggregation server's packet path: datagrams on UDP sockets (udpio.py) instead of ports, one
    thread per socket, each serving its batches in C through the native pipeline.  A program that does
    not run natively is not served (its datagrams wait, then the kernel drops them)."""

    def __init__(self, sockets: list[UdpSocket], cpu_port: int | None = None) -> None:
        super().__init__([], cpu_port)
        self.sockets = sockets
        self._threads = [threading.Thread(target=self._serve, args=(s,), name=f"udp-{i}", daemon=True)
                         for i, s in enumerate(sockets)]
        self._warned: Switch | None = None

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=5)
        for s in self.sockets:
            s.close()

    def udp_stats(self) -> Counter[str]:
        """The sockets' counters summed (received datagrams and segments, sent messages, drops)."""
        total: Counter[str] = Counter()
        for s in self.sockets:
            total.update(s.stats)
        return total

    def _serve(self, sock: UdpSocket) -> None:
        """One thread: its socket's batches through its own context of the pipeline (the first thread the
        pipeline's own, the others forks), holding that context's lock; a table change is synced under the
        switch's lock, which waits for every thread's running batch."""
        first = sock is self.sockets[0]
        context: tuple[NativePipeline, NativePipeline | NativeFork] | None = None
        while not self._stop.is_set():
            switch = self.switch
            native = None if switch is None else switch.native
            if switch is None or native is None:
                if switch is not None and self._warned is not switch:
                    self._warned = switch
                    log.warning("the UDP server needs a natively run pipeline (%s): datagrams not served",
                                switch.native_status)
                self._stop.wait(0.2)
                continue
            if not sock.wait(200):
                continue
            if native.dirty or context is None or context[0] is not native:
                with switch.lock:
                    if self.switch is not switch:
                        continue
                    native.sync_if_dirty()
                    if context is None or context[0] is not native:
                        context = (native, native if first else native.fork())
            with context[1].lock:
                sock.pump(context[1])
