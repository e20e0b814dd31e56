"""`make train-tp`: examples/train_tp.py on 4 Mininet hosts, tensor parallel over them (TP = 4, a rank per host).

Starts bmv2-env/topologies/single-4.json (the built-in target, or simple_switch_grpc when it is
installed), lets the controller push ina.p4 and trains the same small GPT stack through the switch
(``--backend ina``, a new job of h1..h4 for each training, mode "ina") and through gloo (TCP through the
same switch, forwarded as plain IPv4). Each training runs both schedules, Megatron's blocking one
("sync") and Domino's, each beside the same step without communication (T_no_comm), as
examples/train_tp.py says.

Two configurations (``--config``; both by default, each on a network of its own):

- ``shaped``: every host link shaped to ``--bw`` Mbit/s each way (htb, bmv2-env/links.py), so that the
  allreduces are a large share of a synchronous step through gloo (about half, at the default 150);
- ``unshaped``: the same model on unshaped links: where little hides, Domino should cost little.

``--rounds`` trainings with each backend (the order alternating), medians over them. It prints each
configuration's table (per backend: T_sync, T_domino, T_no_comm, the hidden share
(T_sync - T_domino) / (T_sync - T_no_comm), the speed-up, the share of communication in a sync step,
the CPU of a rank, of the switch and of the machine, the CPU bound of a step, and the one model's
predictions beside them), Domino through the switches against sync through gloo,
whether the losses agree (within 1%), and writes bench/results/train-tp.csv and a timeline plot of one
step of each (bench/results/train-tp-timeline.png; ``--publish`` copies it to docs/figures/).

    python examples/mininet_train_tp.py [--config all|shaped|unshaped] [--rounds 3] [--bw 150]
                                        [--target auto|builtin|bmv2] [--out DIR] [--publish]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bmv2env.network import InaNetwork  # noqa: E402
from mininet_train import (  # noqa: E402  (examples/, beside this file)
    Nodes,
    finish,
    prioritise_switches,
    stop,
    topology,
)

from bench.common import RESULTS, publish, save_figure, write_rows  # noqa: E402
from controller.controller import Controller  # noqa: E402

BACKENDS = ("ina", "gloo")
CSV = "train-tp.csv"
PLOT = "train-tp-timeline.png"


@dataclasses.dataclass(frozen=True)
class TPConfig:
    """One configuration: the host links, and the model and step train_tp.py runs."""

    name: str
    bw: float | None  # Mbit/s of every host link, each way (None: unshaped)
    layers: int = 2
    hidden: int = 1024
    heads: int = 16
    mlp: int = 16384  # a wide MLP: more compute per byte of activations, as in a real model's larger hidden size
    seq: int = 32
    batch: int = 8
    micro_batches: int = 2  # DeepSpeed's; with m an allreduce hides behind about (2m - 3) / 2 units of compute
    steps: int = 8

    @property
    def links(self) -> str:
        return f"host links {self.bw:g} Mbit/s" if self.bw is not None else "links unshaped"

    def train_tp_args(self) -> list[str]:
        return ["--layers", str(self.layers), "--hidden", str(self.hidden), "--heads", str(self.heads),
                "--mlp", str(self.mlp), "--seq", str(self.seq), "--batch", str(self.batch),
                "--micro-batches", str(self.micro_batches), "--steps", str(self.steps)]


CONFIGS = {"shaped": TPConfig("shaped", 150.0), "unshaped": TPConfig("unshaped", None)}


def run_training(net: InaNetwork, nodes: Nodes, backend: str, spec: str | None, config: TPConfig,
                 args: argparse.Namespace, result: Path, port: int) -> dict:
    """One training, a rank per host; rank 0's summary (train_tp.py's ``--json``)."""
    master = str(net.network.topology.hosts[nodes.nics[nodes.names[0]][0]].ip.ip)
    procs = []
    for rank, node in enumerate(nodes.names):
        env = dict(os.environ, MASTER_ADDR=master, MASTER_PORT=str(port), PYTHONPATH=str(ROOT), RANK=str(rank),
                   LOCAL_RANK="0", WORLD_SIZE=str(len(nodes.names)),
                   GLOO_SOCKET_IFNAME=net.interface(nodes.nics[node][0]))  # else gloo takes 127.0.0.1
        for name in ("LOCAL_WORLD_SIZE", "GROUP_RANK", "INA_JOB_SPEC"):
            env.pop(name, None)
        if spec is not None:
            env["INA_JOB_SPEC"] = spec
        command = [sys.executable, str(ROOT / "examples" / "train_tp.py"), "--backend", backend,
                   "--seed", str(args.seed), "--json", str(result), *config.train_tp_args()]
        procs.append(net.host(node).popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    switch_cpu: list[float] = []  # the switches' CPU seconds at each step's end
    machine: list[tuple[int, int]] = []  # the machine's (busy, all) CPU ticks then
    try:
        for line in procs[0].stdout:  # rank 0: a line per step, then the summary
            if line.startswith('{"step"'):
                switch_cpu.append(switches_cpu(net))
                machine.append(machine_ticks())
                step = json.loads(line)
                print(f"    [{backend:>4}] step {step['step'] + 1}/{config.steps}: sync {step['T_sync'] * 1e3:.0f} ms, "
                      f"domino {step['T_domino'] * 1e3:.0f} ms, loss {step['loss_sync']:.4f}", flush=True)
        finish(procs, f"{backend}: rank", args.timeout)
    finally:
        stop(procs)
    out = json.loads(result.read_text())
    pairs = [b - a for a, b in zip(switch_cpu, switch_cpu[1:])]  # each a sync and a domino step (and their NoComm)
    out["switch_cpu_per_step"] = statistics.median(pairs) / 2 if pairs else float("nan")
    busy = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(machine, machine[1:]) if b[1] > a[1]]
    out["machine_busy"] = statistics.median(busy) if busy else float("nan")
    return out


def machine_ticks() -> tuple[int, int]:
    """Every core's (busy, all) ticks so far (/proc/stat's first line; idle and iowait are not busy)."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def switches_cpu(net: InaNetwork) -> float:
    """The switch processes' CPU seconds so far, every thread (/proc/PID/stat's utime and stime)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for switch in net.switches:
        fields = Path(f"/proc/{switch.process.pid}/stat").read_text().rpartition(")")[2].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat(5)
    return total


def summary(backend: str, runs: list[dict]) -> dict:
    """Medians over the trainings; each training's figures are medians over its steps (train_tp.py)."""
    def med(get) -> float:
        return statistics.median(get(r) for r in runs)

    sync, domino = (lambda r: r["schedules"]["sync"]), (lambda r: r["schedules"]["domino"])
    walks = list(runs[0]["schedules"]["sync"]["predicted"])
    row = {"backend": backend, "rounds": len(runs),
           "T_sync": med(lambda r: sync(r)["T_step"]), "T_domino": med(lambda r: domino(r)["T_step"]),
           "T_no_comm_sync": med(lambda r: sync(r)["T_no_comm"]),
           "T_no_comm_domino": med(lambda r: domino(r)["T_no_comm"]),
           "hidden_share": med(lambda r: r["hidden_share"]), "speedup": med(lambda r: r["speedup"]),
           "hidden_share_runs": [r["hidden_share"] for r in runs],
           "comm_share_sync": med(lambda r: 1 - sync(r)["T_no_comm"] / sync(r)["T_step"]),
           "cpu_sync": med(lambda r: sync(r)["cpu_per_step"]), "cpu_domino": med(lambda r: domino(r)["cpu_per_step"]),
           "switch_cpu": med(lambda r: r["switch_cpu_per_step"]),
           "machine_busy": med(lambda r: r["machine_busy"]),
           "losses_sync": runs[0]["schedules"]["sync"]["losses"],
           "losses_domino": runs[0]["schedules"]["domino"]["losses"]}
    for s, get in (("sync", sync), ("domino", domino)):  # no step is shorter than all the CPU it needs over the cores
        row[f"cpu_bound_{s}"] = (runs[0]["world"] * row[f"cpu_{s}"] + row["switch_cpu"]) / os.cpu_count()
        row[f"predicted_shared_cpu_{s}"] = med(lambda r, g=get: shared_cpu(r, g(r)))
        row[f"ratio_shared_cpu_{s}"] = med(lambda r, g=get: shared_cpu(r, g(r)) / g(r)["T_step"])
    for walk in walks:
        for s, get in (("sync", sync), ("domino", domino)):
            row[f"predicted_{walk}_{s}"] = med(lambda r, g=get, w=walk: g(r)["predicted"][w]["T_step"])
            row[f"ratio_{walk}_{s}"] = med(lambda r, g=get, w=walk: g(r)["predicted"][w]["ratio_to_measured"])
    return row


def shared_cpu(run: dict, schedule: dict) -> float:
    """The one model's step where every rank and the switch share this machine's cores: the walk with the
    calls' CPU taken from the compute (train_tp.py's calibrated_cpu), or, if longer, the CPU the step needs
    spread over the cores: each rank's compute (its NoComm step's CPU) and calls (calibrated CPU per call),
    and the switch's CPU per step, measured over the training (it forwards the same bytes in either schedule)."""
    demand = run["world"] * (schedule["cpu_no_comm"] + schedule["calls_cpu"]) + run["switch_cpu_per_step"]
    return max(schedule["predicted"]["calibrated_cpu"]["T_step"], demand / os.cpu_count())


def losses_agree(rows: list[dict]) -> float:
    """The largest relative difference between any two loss curves (backends and schedules) at any step."""
    curves = [r[k] for r in rows for k in ("losses_sync", "losses_domino")]
    return max(abs(a - b) / abs(b) for c in curves for d in curves for a, b in zip(c, d))


def print_table(config: TPConfig, rows: list[dict]) -> None:
    print(f"\n{config.name}: TP = 4 (a rank per host), {config.layers} layers, hidden {config.hidden}, "
          f"seq {config.seq}, batch {config.batch}, {config.micro_batches} micro-batches, {config.links}")
    print(f"{'':<44}" + "".join(f"{r['backend']:>12}" for r in rows))
    lines = [("T_sync (ms)", "T_sync", "{:.1f}", 1e3), ("T_domino (ms)", "T_domino", "{:.1f}", 1e3),
             ("T_no_comm sync (ms)", "T_no_comm_sync", "{:.1f}", 1e3),
             ("T_no_comm domino (ms)", "T_no_comm_domino", "{:.1f}", 1e3),
             ("communication share of sync", "comm_share_sync", "{:.0%}", 1),
             ("hidden share", "hidden_share", "{:.2f}", 1), ("speed-up T_sync/T_domino", "speedup", "{:.2f}x", 1),
             ("CPU per sync step (ms)", "cpu_sync", "{:.0f}", 1e3),
             ("CPU per domino step (ms)", "cpu_domino", "{:.0f}", 1e3),
             ("switch CPU per step (ms)", "switch_cpu", "{:.0f}", 1e3),
             ("machine's CPU busy during the steps", "machine_busy", "{:.0%}", 1),
             (f"CPU bound sync: all CPU / {os.cpu_count()} (ms)", "cpu_bound_sync", "{:.0f}", 1e3),
             (f"CPU bound domino: all CPU / {os.cpu_count()} (ms)", "cpu_bound_domino", "{:.0f}", 1e3)]
    walks = sorted({k[len("ratio_"):-len("_sync")] for r in rows for k in r if k.startswith("ratio_")
                    and k.endswith("_sync")})
    for walk in walks:
        for s in ("sync", "domino"):
            lines.append((f"predicted {walk} {s} / measured", f"ratio_{walk}_{s}", "{:.2f}", 1))
    for label, key, fmt, scale in lines:
        print(f"{label:<44}" + "".join(f"{fmt.format(r[key] * scale) if key in r else '-':>12}" for r in rows))
    print("(medians over the trainings, each the median of its steps after the first; hidden share per training: "
          + "; ".join(f"{r['backend']} " + ", ".join(f"{h:.2f}" for h in r["hidden_share_runs"]) for r in rows) + ")")
    by = {r["backend"]: r for r in rows}
    if "ina" in by and "gloo" in by:
        print(f"Domino through the switches against sync through gloo: "
              f"{by['gloo']['T_sync'] / by['ina']['T_domino']:.2f}x the speed per step; loss curves agree within "
              f"{losses_agree(rows):.2e} (relative)")


def plot_timelines(runs: dict[str, dict], path: Path, title: str) -> None:
    """One step of each backend and schedule: the training thread (computing, or waiting for an
    allreduce) and each micro-batch's allreduces from their start to their end on the network."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(b, s) for b in runs for s in ("sync", "domino")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.9 * len(panels)), squeeze=False)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
    for ax, (backend, schedule) in zip(axes[:, 0], panels):
        step = runs[backend]["timeline"][schedule]
        calls = step["calls"]
        slices = sorted({c["key"][2] for c in calls if c["key"]}) or [None]
        ax.barh(0, 1e3 * step["seconds"], left=0, color="tab:gray", height=0.6, label="computing")
        for k, c in enumerate(calls):
            ax.barh(0, 1e3 * (c["wait_returned"] - c["wait_called"]), left=1e3 * c["wait_called"], color="tab:red",
                    height=0.6)
            y = 1 + (slices.index(c["key"][2]) if c["key"] else 0)
            end = c["done"] if c["done"] is not None else c["wait_returned"]
            backward = c["key"][0] == "dgrad" if c["key"] else k >= len(calls) // 2  # sync: g's, then f's
            ax.barh(y, 1e3 * (end - c["start"]), left=1e3 * c["start"], height=0.6, edgecolor="black", linewidth=0.3,
                    color=colours[(y - 1) % len(colours)], alpha=0.55 if backward else 0.95)
        ax.barh(0, 0, color="tab:red", label="waiting for an allreduce")
        names = ["training thread"] + [f"allreduce, micro-batch {i}" if i is not None else "allreduce, whole batch"
                                       for i in slices]
        ax.set_yticks(range(len(names)), names, fontsize=7)
        share = runs[backend]["schedules"][schedule]
        ax.set_title(f"{backend}, {schedule}: step of {1e3 * step['seconds']:.0f} ms (median "
                     f"{1e3 * share['T_step']:.0f} ms; without communication {1e3 * share['T_no_comm']:.0f} ms)",
                     fontsize=8)
        ax.set_xlim(0, 1e3 * max(step["seconds"] for b in runs for step in runs[b]["timeline"].values()))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[-1, 0].set_xlabel("ms from the step's start (allreduces: forward dark, backward light)")
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path)


def run_config(config: TPConfig, args: argparse.Namespace, out: Path, ports: itertools.count) -> list[dict]:
    """``args.rounds`` trainings with each backend on a network of their own; their summaries, the plot."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "controller-state.json").unlink(missing_ok=True)  # a network of its own
    topo = topology(config.bw)
    nodes = Nodes.of(topo, 1)
    print(f"{config.name}: starting 4 hosts on one P4 switch, {config.links} (files in {out})", flush=True)
    runs: dict[str, list[dict]] = {b: [] for b in BACKENDS}
    with InaNetwork(topo, out / "net", target=args.target) as net:
        prioritise_switches(net, args.switch_nice)
        with Controller(net.network, out / "controller-state.json") as controller:
            controller.setup()
            order = [BACKENDS[(r + i) % 2] for r in range(args.rounds) for i in range(2)]
            for n, backend in enumerate(order):
                spec = None
                if backend == "ina":  # a job is one session of its workers: a new one for each training
                    controller.create_job(f"tp{n}", nodes.rail(0), mode="ina")
                    spec = str(controller.spec_dir / f"tp{n}.json")
                print(f"  [{n + 1}/{len(order)}] {config.name}: train_tp.py --backend {backend}", flush=True)
                started = time.monotonic()
                runs[backend].append(run_training(net, nodes, backend, spec, config, args, out / f"{backend}-{n}.json",
                                                  next(ports)))
                print(f"    {time.monotonic() - started:.0f} s", flush=True)
    rows = [dict(summary(b, runs[b]), config=config.name, bw_mbit=config.bw or "") for b in BACKENDS]
    (out / "summary.json").write_text(json.dumps({"config": dataclasses.asdict(config), "summary": rows,
                                                  "runs": runs}, indent=1))
    print_table(config, rows)
    if config.bw is not None or args.config == "unshaped":  # the plot: the shaped links' steps, where Domino matters
        plot_timelines({b: runs[b][-1] for b in BACKENDS}, RESULTS / PLOT,
                       f"TP = 4 in Mininet, {config.links}: one step of each (rank 0), the switches (ina) and gloo")
        if out.resolve() != RESULTS.resolve():
            shutil.copy(RESULTS / PLOT, out / PLOT)
        publish(RESULTS / PLOT, args.publish)
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    fields = ["config", "bw_mbit", "backend", "rounds", "T_sync", "T_domino", "T_no_comm_sync", "T_no_comm_domino",
              "comm_share_sync", "hidden_share", "speedup", "cpu_sync", "cpu_domino", "switch_cpu", "machine_busy",
              "cpu_bound_sync", "cpu_bound_domino"]
    fields += sorted({k for r in rows for k in r if k.startswith(("predicted_", "ratio_"))})
    write_rows(path, rows, fields, digits=None, extrasaction="ignore")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make train-tp", description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=["all", *CONFIGS], default="all")
    ap.add_argument("--rounds", type=int, default=3, help="trainings with each backend, the order alternating")
    ap.add_argument("--bw", type=float, help=f"Mbit/s of the shaped configuration's host links "
                                             f"(default {CONFIGS['shaped'].bw:g})")
    ap.add_argument("--micro-batches", type=int, help=f"Domino's (default {CONFIGS['shaped'].micro_batches})")
    ap.add_argument("--steps", type=int, help=f"steps per training (default {CONFIGS['shaped'].steps})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", default="auto", choices=["auto", "builtin", "bmv2"])
    ap.add_argument("--switch-nice", type=int, default=-10,
                    help="the switch processes' nice value: on a shared machine, the emulated switch keeps its CPU")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a training may take")
    ap.add_argument("--out", type=Path, help="where the runs' files go (default: a new temporary folder)")
    ap.add_argument("--publish", action="store_true", help="also copy the plot to docs/figures/ (tracked)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if os.geteuid() != 0:
        print("make train-tp starts a Mininet network: run it as root", file=sys.stderr)
        return 1
    configs = {name: c for name, c in CONFIGS.items() if args.config in ("all", name)}
    if args.bw is not None and "shaped" in configs:
        configs["shaped"] = dataclasses.replace(configs["shaped"], bw=args.bw)
    for field in ("steps", "micro_batches"):
        if getattr(args, field) is not None:
            configs = {name: dataclasses.replace(c, **{field: getattr(args, field)}) for name, c in configs.items()}
    out = args.out or Path(tempfile.mkdtemp(prefix="ina-train-tp-"))
    ports = itertools.count(29600)
    rows: list[dict] = []
    for config in configs.values():
        rows += run_config(config, args, out / config.name, ports)
        write_csv(RESULTS / CSV, rows)  # after each configuration: a failure keeps what was done
    print(f"table: {RESULTS / CSV}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
