"""The project as a training node installs it (issue 32): a wheel, in a fresh virtualenv, with
no checkout in sight, reads its P4 programs from the installed packages and runs an allreduce.

The wheel is built from a copy of the packages pyproject.toml names (so the build leaves no
build/ or egg-info in the checkout) with the build tools already installed (no download), and
installed with ``--no-deps`` into a virtualenv made from the same base interpreter as the
project's; a .pth file lends it the dependencies of the environment running the tests, by
path only (so that environment's editable install, whose finder a .pth file *there* installs,
stays out).  Two processes of the new virtualenv then run from a folder outside the checkout:
the switch side (a P4Runtime server running ina.p4 on the built-in target, the controller, and
a UDP bridge to it, as tests/loopback_net.py does, which the installed wheel cannot import)
writes a job spec, and the worker side sums the arrays of three workers through it.  The worker
side runs as a training node does, without the P4 frontend (issue 63): no ``cpp`` on its PATH
and ``lark`` unimportable, and it checks the frontend was never imported.  Each side checks that
every module of ours comes from the new virtualenv.  The native cache is cold, so the switch's
C and the worker's are compiled from the installed files.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The site-packages of the environment running the tests, lent to the new virtualenv by path.
LENT = [str(Path(p).resolve()) for p in dict.fromkeys((*site.getsitepackages(), sysconfig.get_path("purelib"),
                                                       sysconfig.get_path("platlib"))) if Path(p).is_dir()]


def _source_copy(dest: Path) -> Path:
    """The checkout's top-level files (pyproject.toml, README.md ...) and the folders of the
    packages pyproject.toml names, copied to ``dest``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {config.get("package-dir", {}).get(p.split(".")[0], p.split(".")[0]) for p in config["packages"]}
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    for folder in sorted(folders):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    for path in ROOT.iterdir():
        if path.is_file():
            shutil.copy2(path, dest / path.name)
    return dest


def _env() -> dict[str, str]:
    """The environment without anything that would put the checkout on a new interpreter's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "P4TARGET_NATIVE")}
    env.update(PYTHONNOUSERSITE="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    return env


def _run(*cmd: str | Path, **kwargs) -> str:
    """Run ``cmd`` (by default in / with ``_env()``); its stdout, or a failure showing its output."""
    kwargs.setdefault("env", _env())
    kwargs.setdefault("cwd", "/")
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the python of a fresh virtualenv holding it and nothing else of ours)."""
    pytest.importorskip("setuptools", reason="building the wheel without isolation needs setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp / "src")
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", tmp / "dist", src)
    (wheel,) = (tmp / "dist").glob("ina-*.whl")
    venv = tmp / "venv"
    # From the base interpreter (venv does that even when run by a virtualenv's python), as make does.
    _run(sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    (Path(purelib) / "_test_wheel_deps.pth").write_text("\n".join(LENT) + "\n")
    return wheel, python



def test_the_wheel_carries_every_file_read_at_run_time(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "p4src").rglob("*.p4"))]
    wanted += [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "p4target" / "p4include").glob("*.p4"))]
    wanted += ["p4target/frontend/p4.lark", "p4target/portio.c", "p4src/__init__.py"]
    wanted += [f"p4target/executor/native/{h}" for h in ("runtime.h", "v1model.h", "tna.h")]
    wanted += [f"worker/native/{c}" for c in ("core.h", "core.c", "relay.h", "relay.c", "run.c")]
    wanted += [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "worker" / "tp").glob("*.py"))]  # a subpackage
    wanted += [f"bmv2env/topologies/{p.name}" for p in sorted((ROOT / "bmv2-env" / "topologies").glob("*.json"))]
    assert {"p4src/protocol.p4", "p4src/tofino/ina_tna.p4", "p4src/v1model/parser.p4"} <= set(wanted)
    assert [n for n in wanted if n not in names] == []


# Both sides start with this, run by the new virtualenv's python in a folder outside the checkout:
# argv[1] is the checkout, argv[2] LENT as JSON, argv[3] the job spec's file.
COMMON = r"""
import json, os, shutil, sys, sysconfig, threading, traceback
from pathlib import Path

import numpy as np

# A failure ends the process at once: the P4Runtime server's threads would hold a normal exit.
sys.excepthook = lambda *e: (traceback.print_exception(*e), sys.stderr.flush(), os._exit(1))

checkout, lent = Path(sys.argv[1]), [Path(p) for p in json.loads(sys.argv[2])]  # the dependencies' folders
spec_file = Path(sys.argv[3])
site_packages = Path(sysconfig.get_path("purelib")).resolve()
assert all(Path(p or ".").resolve() != checkout for p in sys.path), sys.path


def ours_from_the_wheel():
    # every module of ours came from the new virtualenv, nothing from the checkout: how many of ours
    packages = ("worker", "controller", "p4target", "p4src", "bmv2env")
    ours = {n: Path(m.__file__).resolve() for n, m in list(sys.modules.items())
            if n.split(".")[0] in packages and getattr(m, "__file__", None)}
    outside = sorted(n for n, f in ours.items() if not f.is_relative_to(site_packages))
    assert not outside, f"not from the installed wheel: {outside}"
    files = {n: Path(m.__file__).resolve() for n, m in list(sys.modules.items()) if getattr(m, "__file__", None)}
    leaked = sorted(n for n, f in files.items()
                    if f.is_relative_to(checkout) and not any(f.is_relative_to(d) for d in lent))
    assert not leaked, f"imported from the checkout: {leaked}"
    return len(ours)
"""

# The switch side: a P4Runtime server running ina.p4, the controller, and a UDP bridge to the switch; it
# writes the job spec, says so on stdout, and serves until its stdin closes.
SWITCH = COMMON + r"""
import select, socket, struct

from controller import programs
from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.topology import Topology
from p4target.cbuild import compiler
from p4target.dataplane import Dataplane
from p4target.runtime.device_config import build_device_config
from p4target.runtime.service import P4RuntimeServer, serve

# The TNA program's every #include is found inside the installed package.
tna = json.loads(build_device_config(programs.TNA.source))
assert tna["main"] == "tofino/ina_tna.p4" and "common/parse_wire.p4" in tna["files"], sorted(tna["files"])

WORKERS, SWITCH_IP = 3, "127.0.0.253"  # not tests/loopback_net.py's addresses: both may run at once
hosts = {f"h{i}": {"ip": f"127.0.2.{i}/8", "mac": f"02:00:00:00:02:{i:02x}"} for i in range(1, WORKERS + 1)}
topology = Topology.from_dict({"hosts": hosts, "switches": {"s1": {"ip": SWITCH_IP}},
                               "links": [[h, f"s1-p{i}"] for i, h in enumerate(hosts, 1)]})
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    grpc_address = f"127.0.0.1:{s.getsockname()[1]}"
service = P4RuntimeServer(Dataplane([]), device_id=1)
server = serve(service, grpc_address)
controller = Controller(Network(topology, {"s1": SwitchAccess(grpc_address, 1, "builtin")}),
                        Path("state.json"), PipelineOptions(udp_port=48864))
controller.setup()
switch = service.pipeline.switch
has_compiler = compiler() is not None and shutil.which(compiler()) is not None
if has_compiler:  # the C was built from the installed headers
    assert switch.native is not None, switch.native_status

wire = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
wire.bind((SWITCH_IP, 48864))
port_of = {str(h.ip.ip): topology.attachment[h.name][1] for h in topology.hosts.values()}
mac_of = {str(h.ip.ip): bytes.fromhex(h.mac.replace(":", "")) for h in topology.hosts.values()}
switch_mac = bytes.fromhex(topology.switches["s1"].mac.replace(":", ""))
stop = threading.Event()


def serve_wire():  # each datagram as the frame a host would send; each frame out as a datagram
    while not stop.is_set():
        if not select.select([wire], [], [], 0.05)[0]:
            continue
        payload, (ip, sport) = wire.recvfrom(65536)
        ip_header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0,
                                socket.inet_aton(ip), socket.inet_aton(SWITCH_IP))
        frame = (switch_mac + mac_of[ip] + b"\x08\x00" + ip_header
                 + struct.pack("!HHHH", sport, 48864, 8 + len(payload), 0) + payload)
        for _, out in switch.process(port_of[ip], frame):
            wire.sendto(out[42:], (socket.inet_ntoa(out[30:34]), struct.unpack("!H", out[36:38])[0]))


threading.Thread(target=serve_wire, daemon=True).start()
controller.create_job("wheel", sorted(hosts), 16, mode="ina").save(spec_file)
print(json.dumps({"ready": str(spec_file)}), flush=True)
sys.stdin.read()  # the test closes it when the workers are done
stop.set()
controller.close()
server.stop(None)
print(json.dumps({"modules": ours_from_the_wheel(), "native": switch.native is not None}), flush=True)
os._exit(0)
"""

# The worker side, as a training node runs it: no cpp on PATH, no lark (the frontend's parser) to import.
WORKERS = r"""
import sys
sys.modules["lark"] = None  # before any import: importing it now fails, as where it is not installed
""" + COMMON + r"""
assert shutil.which("cpp") is None, shutil.which("cpp")

from worker import protocol  # the issue's reproducer
p = protocol.load(256, 48864)
assert (p.values, p.INA_UDP_PORT) == (256, 48864), (p.values, p.INA_UDP_PORT)
assert protocol.PROTOCOL_P4.is_relative_to(site_packages / "p4src"), protocol.PROTOCOL_P4

from worker import Worker, quantize
from worker.jobspec import JobSpec

spec, WORKERS = JobSpec.load(spec_file), 3
rng = np.random.default_rng(32)
ints = [rng.integers(-2**20, 2**20, 3000, dtype=np.int32) for _ in range(WORKERS)]
floats = [rng.standard_normal(5000).astype(np.float32) * 10.0 ** rng.integers(-3, 4) for _ in range(WORKERS)]
results, errors, cores = {}, [], set()


def rank(r):
    try:
        with Worker(spec, r, timeout=20.0) as w:
            cores.add(type(w._trees[0]).__name__)
            results[r] = (w.allreduce(ints[r]), w.allreduce(floats[r]))
    except BaseException as e:
        errors.append(e)


threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
exact_int = np.sum(ints, axis=0, dtype=np.int64).astype(np.int32)
exact = np.sum([f.astype(np.float64) for f in floats], axis=0)
bound = quantize.elementwise_bound(floats, spec.values) + np.abs(exact) * np.finfo(np.float32).eps
for r, (total_int, total) in results.items():
    assert total_int.dtype == np.int32 and np.array_equal(total_int, exact_int), f"rank {r}: int32 sum"
    assert total.dtype == np.float32 and total.tobytes() == results[0][1].tobytes(), f"rank {r} disagrees"
    assert (np.abs(total.astype(np.float64) - exact) <= bound).all(), f"rank {r}: float32 sum out of bound"

frontend = sorted(n for n, m in sys.modules.items() if n.startswith("p4target.frontend") or n.startswith("lark") and m)
assert not frontend, f"the worker imported the P4 frontend: {frontend}"
print(json.dumps({"modules": ours_from_the_wheel(), "ranks": sorted(results), "cores": sorted(cores),
                  "p4target": sorted(n for n in sys.modules if n.startswith("p4target"))}), flush=True)
os._exit(0)
"""


def _path_without_cpp(folder: Path) -> str:
    """A PATH of one folder: links to every program on ours but the C preprocessor (cpp, cpp-12 ...).
    The compiler stays (gcc runs its cc1 itself), so the worker still builds its C."""
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = folder / program.name
            if "cpp" not in program.name and not link.exists() and os.access(program, os.X_OK):
                link.symlink_to(program)
    return str(folder)


def _allreduce(python: Path, tmp_path: Path, **env: str) -> tuple[dict, dict, str]:
    """The switch side and the worker side of one allreduce, each its own process of the new virtualenv:
    (the switch's report, the workers' report, the workers' stderr)."""
    run = tmp_path / "elsewhere"
    run.mkdir()
    (run / "switch_side.py").write_text(SWITCH)
    (run / "worker_side.py").write_text(WORKERS)
    args = [str(ROOT), json.dumps(LENT), str(tmp_path / "spec.json")]
    env = {**_env(), "P4TARGET_CACHE": str(tmp_path / "native-cache"), **env}  # cold: C built from the wheel
    with open(tmp_path / "switch.err", "w+") as err, subprocess.Popen(
            [str(python), "switch_side.py", *args], cwd=run, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err) as switch:
        try:
            ready = select.select([switch.stdout], [], [], 60)[0] and switch.stdout.readline()
            assert ready, f"the switch side is not ready:\n{(tmp_path / 'switch.err').read_text()[-4000:]}"
            workers = subprocess.run([str(python), "worker_side.py", *args], cwd=run, capture_output=True, text=True,
                                     timeout=120, env={**env, "PATH": _path_without_cpp(tmp_path / "bin")})
            assert workers.returncode == 0, workers.stderr[-4000:]
            out, _ = switch.communicate("", timeout=30)
            assert switch.returncode == 0, (tmp_path / "switch.err").read_text()[-4000:]
        finally:
            switch.kill()
    return (json.loads(out.strip().splitlines()[-1]), json.loads(workers.stdout.strip().splitlines()[-1]),
            workers.stderr)


def test_an_installed_wheel_runs_an_allreduce_outside_the_checkout_and_the_worker_without_the_frontend(
        installed, tmp_path):
    _, python = installed
    where = _run(python, "-c", "import worker, p4src; print(worker.__file__); print(p4src.ROOT)", cwd=tmp_path).split()
    assert all(Path(w).is_relative_to(python.parent.parent) for w in where), where  # inside the new venv
    switch, workers, _ = _allreduce(python, tmp_path)
    assert switch["native"] and switch["modules"] > 20, switch
    assert workers["ranks"] == [0, 1, 2] and workers["modules"] > 10, workers
    assert workers["cores"] == ["NativeTree"], workers  # the worker's C, built from the installed files
    assert workers["p4target"] == ["p4target", "p4target.cbuild"], workers  # the C build only: no frontend


def test_an_installed_wheel_without_a_compiler_runs_the_reference_core_and_says_so_once(installed, tmp_path):
    """A training node with no C compiler: the switch and the worker fall back to Python, and the worker
    says so once (three workers in the process), not silently."""
    _, python = installed
    switch, workers, stderr = _allreduce(python, tmp_path, CC=str(tmp_path / "no-such-cc"))
    assert workers["ranks"] == [0, 1, 2] and workers["cores"] == ["Tree"] and not switch["native"], (switch, workers)
    said = [line for line in stderr.splitlines() if "the worker runs its reference Python core" in line]
    assert len(said) == 1 and "no-such-cc" in said[0], stderr[-2000:]
