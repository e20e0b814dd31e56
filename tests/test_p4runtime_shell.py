"""p4runtime-shell 0.0.6, unchanged, drives our target: the same client code controllers
use against real simple_switch_grpc (setup, table entries, multicast, counters)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from google.protobuf import text_format
from p4runtime_sh import shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException

from p4target.dataplane import Dataplane
from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.ports import MemoryPort
from p4target.runtime.device_config import build_device_config
from p4target.runtime.service import P4RuntimeServer, serve

from .conftest import P4_DIR, free_port

PROGRAM = P4_DIR / "runtime.p4"
TAG = bytes(6) + bytes.fromhex("000000000001") + b"\x88\xb5"  # ethernet header with our etherType



@pytest.fixture(scope="module")
def pipeline_files(tmp_path_factory):
    """The two files FwdPipeConfig wants: P4Info text and the device config blob."""
    d = tmp_path_factory.mktemp("pipe")
    (d / "p4info.txt").write_text(text_format.MessageToString(build_p4info(load_program(PROGRAM))))
    (d / "device_config.bin").write_bytes(build_device_config(PROGRAM))
    return sh.FwdPipeConfig(str(d / "p4info.txt"), str(d / "device_config.bin"))


@pytest.fixture
def switch(pipeline_files):
    ports = [MemoryPort(n) for n in (1, 2, 3)]
    dataplane = Dataplane(ports, cpu_port=255)
    address = f"127.0.0.1:{free_port()}"
    server = serve(P4RuntimeServer(dataplane), address)
    dataplane.start()
    sh.setup(device_id=0, grpc_addr=address, election_id=(0, 1), config=pipeline_files, verbose=False)
    yield {p.number: p for p in ports}
    sh.teardown()
    server.stop(grace=None)
    dataplane.stop()


def test_table_entries_multicast_and_counters(switch):
    te = sh.TableEntry("I.t_exact")(action="I.forward")
    te.match["hdr.tag.a"] = "1"
    te.action["port"] = "2"
    te.insert()
    mc = sh.TableEntry("I.t_exact")(action="I.flood")
    mc.match["hdr.tag.a"] = "2"
    mc.action["group"] = "7"
    mc.insert()
    sh.MulticastGroupEntry(7).add(1, 1).add(3, 1).insert()

    switch[1].inject(TAG + bytes([1, 0, 0, 0]))
    assert switch[2].wait_sent(1)[0][-4:] == bytes([1, 0, 0, 0])
    switch[2].inject(TAG + bytes([2, 0, 0, 0]))
    assert len(switch[1].wait_sent(1)) == 1 and len(switch[3].wait_sent(1)) == 1

    entries = list(sh.TableEntry("I.t_exact").read())
    assert sorted(e.match["hdr.tag.a"].exact.value for e in entries) == [b"\x01", b"\x02"]
    groups = list(sh.MulticastGroupEntry(7).read())
    assert [(r.egress_port, r.instance) for r in groups[0].replicas] == [(1, 1), (3, 1)]

    counter = sh.CounterEntry("I.port_counter")
    counter.index = 1
    (cell,) = counter.read()
    assert cell.packet_count == 1 and cell.byte_count == len(TAG) + 4

    te.action["port"] = "3"
    te.modify()
    switch[1].inject(TAG + bytes([1, 0, 0, 0]))
    assert len(switch[3].wait_sent(2)) == 2
    te.delete()
    assert [e.match["hdr.tag.a"].exact.value for e in sh.TableEntry("I.t_exact").read()] == [b"\x02"]


def test_errors_reach_the_shell_as_exceptions(switch):
    te = sh.TableEntry("I.t_exact")(action="I.forward")
    te.match["hdr.tag.a"] = "9"
    te.action["port"] = "2"
    te.insert()
    with pytest.raises(P4RuntimeWriteException, match="ALREADY_EXISTS"):
        te.insert()
    const = sh.TableEntry("I.t_const")(action="I.const_mark")
    const.match["hdr.tag.c"] = "1"
    const.action["v"] = "1"
    with pytest.raises(P4RuntimeWriteException, match="PERMISSION_DENIED"):
        const.insert()


# ---------------------------------------------------------------------- the command
def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "p4target.switch_grpc", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_command_serves_a_pipeline_pushed_later(pipeline_files):
    """Like simple_switch_grpc --no-p4: start empty, the controller pushes the program."""
    address = f"127.0.0.1:{free_port()}"
    proc = _start("--no-p4", "--device-id", "3", "--", "--grpc-server-addr", address, "--cpu-port", "255")
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", int(address.rsplit(":", 1)[1]))) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.1)
        sh.setup(device_id=3, grpc_addr=address, election_id=(0, 1), config=pipeline_files, verbose=False)
        try:
            te = sh.TableEntry("I.t_lpm")(action="I.mark_d")
            te.match["hdr.tag.d"] = "0x40/2"
            te.action["d"] = "5"
            te.insert()
            (back,) = sh.TableEntry("I.t_lpm").read()
            assert back.match["hdr.tag.d"].lpm.prefix_len == 2
        finally:
            sh.teardown()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0, "SIGTERM is a clean shutdown"


@pytest.mark.parametrize("args, message", [
    (["-i", "one@eth0", "--no-p4"], "N@IFACE"),
    ([], "--no-p4"),
    (["-i", "1@no-such-if0", "--no-p4"], "no-such-if0"),
])
def test_the_command_rejects_bad_arguments(args, message):
    proc = _start(*args)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and message in err and "Traceback" not in err


def test_the_command_reports_p4_errors_with_a_location(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text((PROGRAM).read_text().replace("table t_lpm {", "table t_lpm {{"))
    proc = _start(str(bad))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and f"{bad}:" in err and "Traceback" not in err


def test_the_command_accepts_bmv2_only_options():
    """A simple_switch_grpc launch line, BMv2-only options included, parses unchanged."""
    from p4target.switch_grpc import parse_args

    args = parse_args(["--pcap", "/tmp/pcaps", "--thrift-port", "9090", "--log-flush", "-i", "1@veth1",
                       str(PROGRAM), "--", "--grpc-server-addr", "127.0.0.1:50001", "--cpu-port", "255"])
    assert args.config == str(PROGRAM) and args.ports == [(1, "veth1")]
    assert args.target.grpc_server_addr == "127.0.0.1:50001" and args.target.cpu_port == 255
