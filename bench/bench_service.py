"""Jobs on demand (issue 34) in Mininet: trainings that ask the controller service for their switches.

Starts bmv2-env/topologies/fattree-4.json (16 hosts, 20 built-in-target switches) with its
management network, and ``ina-ctl serve`` in the root namespace on the management address (a
token file, leases of ``--lease`` s, ``--pool-size 1024``: a job fills the slot pools of the
switches it crosses).  Every training is ``torchrun`` on Mininet hosts, one node per host,
rendezvous on the first host's management address, ``examples/train_ddp.py --comm ina-backend``;
its environment names the service and the token (INA_CONTROLLER, INA_TOKEN_FILE) and nothing
about a job.  Two more variables are Mininet's, not the service's: GLOO_SOCKET_IFNAME=<host>-eth0
(every host has the machine's host name, which resolves to an address of the root namespace:
gloo would bind that) and PYTHONPATH (the checkout).  torchrun also gets ``--local-addr``
and ``--rdzv-conf is_host=1|0`` for the same reason: it cannot tell from the host name which node
is the rendezvous host.

Parts (``--part``, all by default):

a. A (h1,h3,h5,h7: one host per edge switch of pods 1-2, so its tree crosses a core) and B
   (h9..h12: pod 3, below a core) train at once; the status's counters show packets of both jobs;
   each ends within 1 point of the accuracy of a gloo training of the same script and seed (run
   once first, on A's hosts).  B is not h9,h11,h13,h15: with pools of 1024 slots (all a switch
   has) two jobs across pods both need a core, the planner puts both on the same one, and the
   second runs round the ring.
b. Every process of A is SIGKILLed mid-training: the time from the kill to A gone from the status
   and its slots free again, against the lease + 2 s; B trains on.
c. C (h2,h4,h6,h8: the edge switches A fills) starts while A runs: it is admitted anyway (the
   status's admission says what it got and why) and reaches the same accuracy.
d. The service is SIGKILLed mid-training and started again: the trainings go on, and their jobs
   are in the status afterwards with leases their owners renewed.
e. Set-up latency: from the last rank entering init_process_group to the job's first allreduce
   starting (and to init_process_group's return), median of ``--rounds``, at 4 and 16 ranks.

    python -m bench.bench_service [--part a,b,c,d,e] [--epochs 12] [--rounds 5]

Prints progress as it goes and the figures at the end; writes bench/results/service.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "train_ddp.py"
SETUP = ROOT / "examples" / "setup_latency.py"  # part e: init_process_group and one allreduce
sys.path.insert(0, str(ROOT))

from bmv2env.network import InaNetwork  # noqa: E402

from bench.common import RESULTS, write_rows  # noqa: E402
from ina_api.client import JobsClient, ServiceError  # noqa: E402

TOPOLOGY = ROOT / "bmv2-env" / "topologies" / "fattree-4.json"
A = ["h1", "h3", "h5", "h7"]
B = ["h9", "h10", "h11", "h12"]  # pod 3 alone: no switch in common with A's tree, whichever core A gets
C = ["h2", "h4", "h6", "h8"]  # beside A's hosts on edge1..edge4
ALL = [f"h{n}" for n in range(1, 17)]
PARTS = "abcde"
SERVICE_PORT = 50051
RDZV_PORT = 29400
POLL = 0.05  # s between status reads while timing an expiry
CSV = RESULTS / "service.csv"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (torchrun's workers), from /proc."""
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        for task in Path(f"/proc/{here}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


class Service:
    """``ina-ctl serve`` as a process of its own in the root namespace, which the bench can kill and restart."""

    def __init__(self, net: InaNetwork, args: argparse.Namespace, token_file: Path) -> None:
        self.address = f"{net.management_address}:{SERVICE_PORT}"
        self.command = [sys.executable, "-m", "controller.cli", "--net", str(net.net_file), "--token-file",
                        str(token_file), "serve", "--listen", self.address,
                        "--lease-seconds", str(args.lease), "--pool-size", str(args.pool_size)]
        self.log_path = net.log_dir / "service.log"
        # Reading every switch's counters takes seconds when the switches share the cores with trainings.
        self.client = JobsClient(self.address, token_file.read_text().strip(), timeout=30.0)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 300.0) -> float:
        """Start it and wait until it answers; returns the seconds that took."""
        started = time.monotonic()
        with self.log_path.open("a") as out:
            self.proc = subprocess.Popen(self.command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        while True:
            try:
                self.client.status()
                return time.monotonic() - started
            except ServiceError:
                if self.proc.poll() is not None or time.monotonic() - started > timeout:
                    raise RuntimeError(f"the service did not come up: see {self.log_path}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def jobs(self, counters: bool = False) -> dict:
        """Job name -> Job; empty (and a line) when the service did not answer, so a poll goes on."""
        try:
            return {j.name: j for j in self.client.status(counters=counters).jobs}
        except ServiceError as e:
            log(f"  status: {e}")
            return {}


@dataclass
class Training:
    """torchrun on each of ``hosts``; rank lines (epochs, set-up, errors) collected as they come."""

    name: str
    hosts: list[str]
    procs: list[subprocess.Popen] = field(default_factory=list)
    epochs: list[dict] = field(default_factory=list)
    setups: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    killed: bool = False

    def start(self, net: InaNetwork, comm: str, port: int, train_args: list[str], service: Service | None,
              token_file: Path, quiet: bool = False, script: Path = TRAIN) -> Training:
        first = net.management_ip(self.hosts[0])
        for i, host in enumerate(self.hosts):
            env = dict(os.environ, PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME=f"{host}-eth0")
            for name in ("INA_JOB_SPEC", "INA_CONTROLLER", "INA_TOKEN_FILE", "RANK", "WORLD_SIZE", "MASTER_ADDR"):
                env.pop(name, None)
            if service is not None:
                env.update(INA_CONTROLLER=service.address, INA_TOKEN_FILE=str(token_file))
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(self.hosts)),
                       "--nproc-per-node", "1", "--max-restarts", "0", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", f"{first}:{port}", "--rdzv-id", self.name,
                       "--rdzv-conf", f"is_host={int(i == 0)}", "--local-addr", net.management_ip(host),
                       str(script), *(["--comm", comm] if script == TRAIN else []), *train_args]
            proc = net.host(host).popen(command, env=env, cwd=str(ROOT), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
            self.procs.append(proc)
            thread = threading.Thread(target=self._read, args=(host, proc, quiet), daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def _read(self, host: str, proc: subprocess.Popen, quiet: bool) -> None:
        tail: list[str] = []
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-30:]
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "setup" in record:
                self.setups.append(record["setup"])
            elif "error" in record:
                self.errors.append(f"{host}: {record['error']}")
            elif "epoch" in record:
                self.epochs.append(record)
                if not quiet:
                    log(f"  {self.name}: epoch {record['epoch']}, loss {record['loss']:.4f}, "
                        f"test accuracy {record['test_accuracy']:.1%}, {record['seconds_per_step'] * 1e3:.0f} ms/step")
        if proc.wait() != 0 and not self.killed:
            self.errors.append(f"{host}: exit {proc.returncode}: " + " | ".join(tail[-12:]))

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        """SIGKILL every process of every node at once (torchrun and its rank): no goodbye to anyone."""
        self.killed = True
        pids = [pid for p in self.procs for pid in descendants(p.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.errors.append(f"{self.name}: still running after {timeout:.0f} s: killed")
                self.kill()
                p.wait()
        for t in self.threads:
            t.join(5)

    @property
    def accuracy(self) -> float | None:
        return self.epochs[-1]["test_accuracy"] if self.epochs else None


def wait_for(condition, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return False


@dataclass
class Bench:
    net: InaNetwork
    service: Service
    token_file: Path
    args: argparse.Namespace
    rows: list[dict] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    port: int = RDZV_PORT

    def train(self, name: str, hosts: list[str], comm: str = "ina-backend", extra: list[str] | None = None,
              quiet: bool = False) -> Training:
        self.port += 1
        train_args = ["--epochs", str(self.args.epochs), "--timeout", str(self.args.worker_timeout)] + (extra or [])
        log(f"{name}: torchrun on {','.join(hosts)} ({comm})")
        return Training(name, hosts).start(self.net, comm, self.port, train_args,
                                           None if comm == "gloo" else self.service, self.token_file, quiet)

    def record(self, part: str, figure: str, value: float | str, goal: str = "", met: bool | None = None) -> None:
        self.rows.append({"part": part, "figure": figure, "value": value, "goal": goal,
                          "met": "" if met is None else ("yes" if met else "NOT MET")})
        shown = f"{value:.3f}" if isinstance(value, float) else value
        verdict = "" if met is None else (" ok" if met else " NOT MET")
        line = f"({part}) {figure}: {shown}{f' (goal {goal})' if goal else ''}{verdict}"
        self.verdicts.append(line)
        log(line)

    # --- a, b, c, d: trainings side by side ----------------------------------------------------

    def gloo_reference(self) -> float:
        """Test accuracy of A's hosts trained with gloo: what an INA training should reach."""
        gloo = self.train("gloo-ref", A, comm="gloo")
        gloo.wait(self.args.train_timeout)
        if gloo.errors or gloo.accuracy is None:
            raise RuntimeError(f"the gloo reference failed: {gloo.errors}")
        self.record("a", "gloo reference test accuracy (A's hosts)", f"{gloo.accuracy:.2%}")
        return gloo.accuracy

    def scenario(self, parts: str) -> None:
        reference = self.gloo_reference() if "a" in parts or "c" in parts else None
        run = secrets.token_hex(2)
        a = self.train(f"a-{run}", A)
        b = self.train(f"b-{run}", B)
        if not wait_for(lambda: {a.name, b.name} <= set(self.service.jobs()), 120):
            raise RuntimeError(f"A and B have no jobs after 120 s: {a.errors + b.errors}")
        jobs = self.service.jobs()
        for t in (a, b):
            job = jobs[t.name]
            self.record("a", f"{t.name}: job", f"{job.mode}, {job.trees} tree(s), pool {job.pool_size}, switches "
                        f"{','.join(job.switches)}; admission: {job.admission or 'as asked'}")
        packets = self.packets_seen([a, b])
        if "a" in parts:
            for t in (a, b):
                self.record("a", f"{t.name}: aggregation packets counted by the switches", packets.get(t.name, 0),
                            "> 0", packets.get(t.name, 0) > 0)
        c = None
        if "c" in parts:
            c = self.train(f"c-{run}", C)
            if wait_for(lambda: c.name in self.service.jobs(), 120) and (job := self.service.jobs().get(c.name)):
                self.record("c", f"{c.name}: admission", job.admission or "(none: got what it asked)",
                            "says why it got less", bool(job.admission))
                calls = ", ".join(f"{p.bytes >> 10} KB {p.method}" for p in job.predictions)
                self.record("c", f"{c.name}: job", f"mode {job.mode} ({calls}), {job.trees} tree(s)")
            else:
                self.record("c", f"{c.name}: job", f"none after 120 s: {c.errors}", met=False)
        if "b" in parts:
            self.expiry(a)
        if "d" in parts:
            self.restart_service([t for t in (b, c) if t is not None and t.running()])
        for t in (a, b, c):
            if t is not None and not t.killed:
                t.wait(self.args.train_timeout)
        self.judge(parts, reference, a, b, c)

    def judge(self, parts: str, reference: float | None, a: Training, b: Training, c: Training | None) -> None:
        """The finished trainings' verdicts: accuracy against gloo's, B on after A's kill, epochs across the
        restart, no job left."""
        for part, t in (("a", a), ("a", b), ("c", c)):
            if t is None or t.killed or part not in parts:
                continue
            if t.errors or t.accuracy is None:
                self.record(part, f"{t.name}: training", f"failed: {'; '.join(t.errors)[-800:]}", met=False)
                continue
            diff = abs(t.accuracy - reference) * 100
            self.record(part, f"{t.name}: test accuracy {t.accuracy:.2%}, points from gloo's", diff, "<= 1",
                        diff <= 1.0)
        if "b" in parts and "a" not in parts:
            self.record("b", f"{b.name}: trained on after A's kill", "yes" if not b.errors else str(b.errors),
                        met=not b.errors)
        if "d" in parts:
            for t in (b, c):
                if t is not None:
                    self.record("d", f"{t.name}: finished its epochs across the restart",
                                f"{len(t.epochs)}/{self.args.epochs}", met=len(t.epochs) == self.args.epochs
                                and not t.errors)
        gone = wait_for(lambda: not self.service.jobs(), 30)
        self.record("a", "jobs left after the trainings ended", ", ".join(self.service.jobs()) or "none",
                    "none (destroy_process_group deletes them)", gone)

    def packets_seen(self, trainings: list[Training], within: float = 90.0) -> dict[str, int]:
        """Each job's aggregation packets as the switches count them, once every job has some (or time is up)."""
        counts: dict[str, int] = {}
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            jobs = self.service.jobs(counters=True)
            counts = {t.name: sum(jobs[t.name].packets.values()) for t in trainings if t.name in jobs}
            if len(counts) == len(trainings) and all(counts.values()):
                break
            time.sleep(1.0)
        log(f"  packets counted per job: {counts}")
        return counts

    def expiry(self, a: Training) -> None:
        """(b) SIGKILL every process of A mid-training; time until its job is gone and its slots are free."""
        wait_for(lambda: len(a.epochs) >= 2 or not a.running(), 120)
        status = self.service.client.status()
        job = next((j for j in status.jobs if j.name == a.name), None)
        if job is None or not a.running():
            self.record("b", f"{a.name}: running when it was to be killed", "no (finished, or failed)", met=False)
            return
        free_before = {s.name: s.free_slots for s in status.switches if s.name in job.switches}
        log(f"(b) killing every process of {a.name} after {len(a.epochs)} epoch(s); "
            f"lease {job.lease_remaining:.2f} s left of {job.lease_seconds:g}")
        a.kill()
        killed = time.monotonic()
        gone_at = freed_at = None
        while time.monotonic() - killed < 3 * self.args.lease + 10:
            status = self.service.client.status()
            now = time.monotonic()
            if gone_at is None and a.name not in {j.name for j in status.jobs}:
                gone_at = now
            free = {s.name: s.free_slots for s in status.switches if s.name in free_before}
            if freed_at is None and all(free[n] > free_before[n] for n in free_before):
                freed_at = now
                log(f"  slots freed: {sum(free.values()) - sum(free_before.values())} on {len(free)} switch(es)")
            if gone_at is not None and freed_at is not None:
                break
            time.sleep(POLL)
        goal = self.args.lease + 2
        for what, at in (("job gone", gone_at), ("its slots free", freed_at)):
            if at is None:
                self.record("b", f"kill of {a.name} to {what}", "never (within the wait)", f"<= {goal:g} s", False)
            else:
                self.record("b", f"kill of {a.name} to {what}, s", at - killed, f"<= {goal:g} s", at - killed <= goal)

    def restart_service(self, trainings: list[Training]) -> None:
        """(d) SIGKILL the service mid-training and start it again."""
        before = {t.name: len(t.epochs) for t in trainings}
        log(f"(d) SIGKILL of the service; trainings running: {', '.join(before) or 'none'}")
        self.service.kill()
        time.sleep(self.args.down)
        took = self.service.start()
        self.record("d", "service down (kill, wait, restart until it answers), s", self.args.down + took)
        jobs = self.service.jobs()
        self.record("d", "jobs in the status right after the restart", ", ".join(
            f"{n} (lease {j.lease_remaining:.1f} s left)" for n, j in jobs.items()) or "none",
            ", ".join(before), set(before) <= set(jobs))
        # A job left in its grace period would show up to 2 leases left; a renewed one at most one lease.
        renewed = wait_for(lambda: all(n in (js := self.service.jobs()) and js[n].lease_remaining <= self.args.lease
                                       for n in before), 3 * self.args.lease, 0.2)
        self.record("d", "leases renewed by their owners after the restart", "yes" if renewed else "no",
                    "yes", renewed)
        for t in trainings:
            wait_for(lambda t=t: len(t.epochs) > before[t.name] or not t.running(), 120)
            self.record("d", f"{t.name}: epochs after the restart", len(t.epochs) - before[t.name], "> 0",
                        len(t.epochs) > before[t.name])

    # --- e: set-up latency ---------------------------------------------------------------------

    def setup_latency(self) -> None:
        """examples/setup_latency.py (init_process_group, then one allreduce), with gloo beside "ina"."""
        for hosts, backend in ((A, "gloo"), (A, "ina"), (ALL, "gloo"), (ALL, "ina")):
            first, inits = [], []
            for i in range(self.args.rounds):
                self.port += 1
                t = Training(f"setup{len(hosts)}-{backend}-{i}-{secrets.token_hex(2)}", hosts).start(
                    self.net, backend, self.port, ["--backend", backend], self.service if backend == "ina" else None,
                    self.token_file, quiet=True, script=SETUP)
                t.wait(self.args.train_timeout)
                if t.errors or len(t.setups) != len(hosts):
                    self.record("e", f"{len(hosts)} ranks, round {i + 1}", f"failed: {'; '.join(t.errors)[-600:]}",
                                met=False)
                    continue
                last_in = max(s["entered"] for s in t.setups)
                inits.append(max(s["entered"] + s["init_process_group_seconds"] for s in t.setups) - last_in)
                first.append(max(s["entered"] + s["first_allreduce_seconds"] for s in t.setups) - last_in)
                log(f"  {len(hosts)} ranks, {backend}, round {i + 1}: init_process_group {inits[-1]:.3f} s, "
                    f"first allreduce {first[-1]:.3f} s after the last rank entered")
            if first:
                self.record("e", f"{len(hosts)} ranks, {backend}: last rank in init_process_group to its return, "
                            f"median s", statistics.median(inits))
                self.record("e", f"{len(hosts)} ranks, {backend}: last rank in init_process_group to the first "
                            f"allreduce, median s (of {len(first)}: {', '.join(f'{x:.2f}' for x in first)})",
                            statistics.median(first), "< 1 s" if backend == "ina" else "",
                            statistics.median(first) < 1.0 if backend == "ina" else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default=",".join(PARTS), help="which parts, comma-separated (default: all)")
    ap.add_argument("--epochs", type=int, default=12, help="epochs of each training of parts a-d")
    ap.add_argument("--rounds", type=int, default=5, help="part e: trainings per size")
    ap.add_argument("--lease", type=float, default=6.0, help="the service's --lease-seconds")
    ap.add_argument("--pool-size", type=int, default=1024, help="the service's --pool-size (a job's ask)")
    ap.add_argument("--down", type=float, default=2.0, help="part d: seconds the service stays dead")
    ap.add_argument("--worker-timeout", type=float, default=30.0, help="train_ddp.py --timeout")
    ap.add_argument("--train-timeout", type=float, default=600.0, help="seconds a training may take")
    ap.add_argument("--run-dir", type=Path, default=Path(tempfile.gettempdir()) / "ina-bench-service")
    args = ap.parse_args(argv)
    parts = "".join(p for p in args.part.replace(",", "") if p in PARTS)
    if os.geteuid() != 0:
        print("bench_service: Mininet needs root", file=sys.stderr)
        return 1
    from mininet.log import setLogLevel

    setLogLevel("warning")
    args.run_dir.mkdir(parents=True, exist_ok=True)
    token_file = args.run_dir / "token"
    token_file.write_text(secrets.token_hex(16) + "\n")
    token_file.chmod(0o600)
    started = time.monotonic()
    log(f"starting {TOPOLOGY.name} with a management network")
    with InaNetwork(TOPOLOGY, args.run_dir, target="builtin", management=True) as net:
        log(f"network up in {time.monotonic() - started:.0f} s; service on {net.management_address}:{SERVICE_PORT}")
        (net.run_dir / "controller-state.json").unlink(missing_ok=True)
        service = Service(net, args, token_file)
        bench = Bench(net, service, token_file, args)
        try:
            log(f"service up in {service.start():.1f} s (it pushes the pipeline and routes)")
            if set(parts) & set("abcd"):
                bench.scenario(parts)
            if "e" in parts:
                bench.setup_latency()
        finally:
            service.stop()
    write_rows(CSV, bench.rows, ["part", "figure", "value", "goal", "met"], digits=None)
    print(f"\nissue 34 in Mininet ({time.monotonic() - started:.0f} s; {CSV.relative_to(ROOT)}):")
    print("\n".join(f"  {line}" for line in bench.verdicts))
    return 0 if all(r["met"] != "NOT MET" for r in bench.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
