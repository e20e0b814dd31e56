"""`make train`: examples/train_ddp.py on 4 Mininet hosts, gradients through the P4 switch two ways, and gloo.

Starts bmv2-env/topologies/single-4.json (the built-in target, or simple_switch_grpc when it
is installed), lets the controller push ina.p4 (V = 256) and create a job for h1..h4, and
trains the same model on the same data three times, one rank per host:
``--comm ina-hook`` (a gloo process group, and the DDP hook sends every bucket through the
switch), ``--comm ina-backend`` (``init_process_group("ina")``, no hook: DDP's own allreduce
goes through the switch) and ``--comm gloo`` (DDP's own TCP allreduce through the same switch,
forwarded as plain IPv4).

It does so in two configurations (``--config``; both by default, each on a network of its own):

- ``compute-bound``: a CNN of 28,426 parameters (114 KB of gradient per step, DDP buckets of
  0.025 MiB), 128 images per rank and step, 20 epochs, links unshaped: the step is computation,
  and the three ways take about as long;
- ``comm-bound``: an MLP of 2,742,922 parameters (10.97 MB of gradient per step; DDP buckets of
  at most 4 MiB: 5.1, 5.1 and 0.3 MiB), 32 images per rank and step, 3 epochs (33 steps), every
  host link shaped to 50 Mbit/s each way (Mininet's TCLink, htb): the step is communication.
  The switch moves K bytes per worker each way, gloo's ring 2(N-1)/N K = 1.5 K: at 50 Mbit/s
  about 1.9 s against 2.9 s per step.

For each it shows every epoch as it ends, then the runs side by side (accuracy, time per step
and gloo's over it, communication per step, the share of it hidden behind backward, from the
ranks' timelines), adds them to bench/results/train.csv and writes two plots, into ``--out``
and bench/results/ (not tracked: a run leaves the repository as it was; ``--publish`` also
copies them to docs/figures/, which the READMEs show):

    bench/results/train-loss.png            compute-bound: loss and test accuracy per epoch, every way
    bench/results/train-timeline.png        compute-bound: a few steps of rank 0, backward and each bucket
    bench/results/train-comm-loss.png       the same two for comm-bound
    bench/results/train-comm-timeline.png

``--rounds N`` trains N times with each way, the order rotating (hook, backend, gloo, backend,
gloo, hook, ...), and reports medians over the trainings: on a shared machine one run varies
by about 10%.  ``--epochs``, ``--batch-size``, ``--lr``, ``--bucket-cap-mb`` and ``--bw``
replace the chosen configurations' values.

    python examples/mininet_train.py [--config all|compute-bound|comm-bound] [--rounds 1]
                                     [--target auto|builtin|bmv2] [--out DIR] [--publish]
"""

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
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bmv2env.network import InaNetwork  # noqa: E402

from bench.common import RESULTS, publish, save_figure, write_rows  # noqa: E402
from controller.controller import Controller  # noqa: E402
from controller.topology import Topology, rail_optimised  # noqa: E402

TOPOLOGY = ROOT / "bmv2-env" / "topologies" / "single-4.json"
HOSTS = ["h1", "h2", "h3", "h4"]
COMMS = ("ina-hook", "ina-backend", "gloo")
# Jobs are mode="ina": every byte through the switch (no hybrid share round a ring), whatever "auto" would pick.
CSV = "train.csv"


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of `make train`: the model, how it trains, the host links, where its plots go."""

    name: str
    model: str  # train_ddp.py --model
    epochs: int
    batch_size: int  # per rank and step
    lr: float
    bucket_cap_mb: float
    bw: float | None  # Mbit/s of every host link, each way (None: unshaped)
    plots: tuple[str, str]  # loss, timeline: names in bench/results/ (bench/common.py publishes them)


CONFIGS = {
    "compute-bound": Config("compute-bound", "cnn", 20, 128, 3e-3, 0.025, None,
                            ("train-loss.png", "train-timeline.png")),
    "comm-bound": Config("comm-bound", "mlp", 3, 32, 5e-4, 4.0, 50.0,
                         ("train-comm-loss.png", "train-comm-timeline.png")),
}


@dataclasses.dataclass(frozen=True)
class Nodes:
    """The training nodes: ``local`` ranks on each, and each node's NIC per rail (one NIC: every rail's)."""

    names: tuple[str, ...]
    local: int
    nics: dict[str, tuple[str, ...]]  # node -> its NIC per local rank

    @classmethod
    def of(cls, topology: Topology, local: int) -> "Nodes":
        machines = topology.nodes
        return cls(tuple(machines), local, {node: tuple(nics[i % len(nics)] for i in range(local))
                                            for node, nics in machines.items()})

    def rail(self, i: int) -> list[str]:
        return [self.nics[node][i] for node in self.names]


def topology(bw: float | None, local: int = 1, rails: bool = False) -> Topology:
    """single-4.json (4 nodes of one NIC), or with ``rails`` 4 nodes with a NIC per local rank, each rail on a
    leaf of its own under one spine; every host link shaped to ``bw`` Mbit/s when given."""
    if rails:
        return Topology.from_dict(rail_optimised(len(HOSTS), local, len(HOSTS), 1, host_bw=bw), where="rails")
    spec = json.loads(TOPOLOGY.read_text())
    if bw is not None:
        for link in spec["links"]:
            if len(link) == 3:
                link[2]["bw"] = bw
            else:
                link.append({"bw": bw})
    return Topology.from_dict(spec, where=TOPOLOGY.name)


def prioritise_switches(net: InaNetwork, nice: int) -> None:
    """Every switch thread at ``nice``: a switch is a device of its own, it must not wait for the trainers' CPU."""
    for switch in net.switches:
        for thread in Path(f"/proc/{switch.process.pid}/task").iterdir():
            os.setpriority(os.PRIO_PROCESS, int(thread.name), nice)


def train(net: InaNetwork, nodes: Nodes, comm: str, spec: str | None, config: Config, args: argparse.Namespace,
          out: Path, port: int) -> tuple[list[dict], list[dict], dict[str, float]]:
    """One training run, a rank per host (or torchrun with ``nodes.local`` ranks on each node); rank 0's epochs
    (shown as they come), every rank's timeline, and each node's bytes per step each way after the first epoch."""
    first = nodes.nics[nodes.names[0]][0]
    master = str(net.network.topology.hosts[first].ip.ip)
    world = len(nodes.names) * nodes.local
    procs = []
    for k, node in enumerate(nodes.names):
        env = dict(os.environ, MASTER_ADDR=master, MASTER_PORT=str(port), PYTHONPATH=str(ROOT),
                   GLOO_SOCKET_IFNAME=net.interface(nodes.nics[node][0]))  # else gloo takes 127.0.0.1
        for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "INA_JOB_SPEC"):
            env.pop(name, None)
        if spec is not None:
            env["INA_JOB_SPEC"] = spec
        script = [str(ROOT / "examples" / "train_ddp.py"), "--comm", comm, "--model", config.model,
                  "--epochs", str(config.epochs), "--batch-size", str(config.batch_size), "--lr", str(config.lr),
                  "--bucket-cap-mb", str(config.bucket_cap_mb), "--seed", str(args.seed),
                  "--timeline", str(out / f"{comm}-rank{{rank}}.json")]
        if nodes.local == 1:
            env.update(RANK=str(k), LOCAL_RANK="0", WORLD_SIZE=str(world))
            command = [sys.executable, *script]
        else:  # torchrun's static rendezvous: GROUP_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE for each rank
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(nodes.names)),
                       "--nproc-per-node", str(nodes.local), "--node-rank", str(k), "--master-addr", master,
                       "--master-port", str(port), "--max-restarts", "0", *script]
        procs.append(net.host(node).popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    epochs = []
    counted: list[dict[str, tuple[int, int]]] = []
    try:
        for line in procs[0].stdout:  # rank 0 reports each epoch
            if line.startswith("{"):
                record = json.loads(line)
                if "error" in record:
                    raise RuntimeError(f"{comm}: rank 0: {record['error']}")
                if "epoch" not in record:
                    continue
                epochs.append(record)
                if record["epoch"] in (1, config.epochs):
                    counted.append(node_bytes(net, nodes))
                print(f"  [{comm:>4}] epoch {record['epoch']:>2}/{config.epochs}: loss {record['loss']:.4f}, "
                      f"test accuracy {record['test_accuracy']:.1%}, {record['seconds_per_step'] * 1e3:.0f} ms "
                      f"per step", flush=True)
        finish(procs, f"{comm}: node", 120)
    finally:
        stop(procs)
    steps = sum(e["steps"] for e in epochs[1:])
    per_step = {"tx": float("nan"), "rx": float("nan")}
    if len(counted) == 2 and steps:
        for way, i in (("tx", 0), ("rx", 1)):
            per_step[way] = statistics.median((counted[1][n][i] - counted[0][n][i]) / steps for n in nodes.names)
    return epochs, [json.loads((out / f"{comm}-rank{r}.json").read_text()) for r in range(world)], per_step


def finish(procs: list[subprocess.Popen], what: str, timeout: float) -> None:
    """Wait for every process; the first that failed raises with the end of its stderr."""
    for k, p in enumerate(procs):
        _, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{what} {k} exited with {p.returncode}: {err.strip()[-1500:]}")


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill what is still running (after a failure), and reap all."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def node_bytes(net: InaNetwork, nodes: Nodes) -> dict[str, tuple[int, int]]:
    """Each node's bytes sent and received so far on its data links (its NICs' counters, /proc/net/dev in
    its namespace)."""
    found = {}
    for node in nodes.names:
        table = {}
        for line in net.run(node, "cat /proc/net/dev").splitlines()[2:]:
            name, _, numbers = line.partition(":")
            fields = numbers.split()
            table[name.strip()] = (int(fields[8]), int(fields[0]))  # tx bytes, rx bytes
        nics = {net.interface(nic) for nic in nodes.nics[node]}
        found[node] = (sum(table[i][0] for i in nics), sum(table[i][1] for i in nics))
    return found


def summary(comm: str, rounds: list[list[dict]], timelines: list[dict], per_step: list[dict[str, float]]) -> dict:
    """Medians over the trainings (each training's step: the median of its epochs after the first), and
    over every rank's steps after the first."""
    hidden = [h for t in timelines for h in t["hidden_share"]]
    comm_s = [c for t in timelines for c in t["comm_seconds"]]
    trainings = [statistics.median(e["seconds_per_step"] for e in (epochs[1:] or epochs)) for epochs in rounds]
    gradient = 4 * rounds[0][0]["parameters"]  # bytes: float32
    return {"comm": comm, "model": rounds[0][0]["model"], "parameters": rounds[0][0]["parameters"],
            "loss": statistics.median(epochs[-1]["loss"] for epochs in rounds),
            "test_accuracy": statistics.median(epochs[-1]["test_accuracy"] for epochs in rounds),
            "seconds_per_step": statistics.median(trainings), "seconds_per_step_trainings": trainings,
            "rounds": len(rounds),
            "comm_ms_per_step": 1e3 * statistics.median(comm_s), "hidden_share": statistics.median(hidden),
            "cpu_ms_per_step": 1e3 * statistics.median(c for t in timelines for c in t["cpu_seconds_per_step"]),
            "buckets": len({(b["index"], b["values"]) for b in timelines[0]["buckets"] if b["step"] > 1}),
            "bucket_cap_mb": timelines[0]["bucket_cap_mb"],
            **{f"node_{way}_per_gradient": statistics.median(b[way] for b in per_step) / gradient
               for way in ("tx", "rx")}}


def against_gloo(table: list[dict]) -> None:
    """Each summary's gloo step time over its own, and its accuracy minus gloo's (points), in place."""
    gloo = next(r for r in table if r["comm"] == "gloo")
    for r in table:
        r["speedup_over_gloo"] = gloo["seconds_per_step"] / r["seconds_per_step"]
        r["accuracy_vs_gloo_points"] = 100 * (r["test_accuracy"] - gloo["test_accuracy"])


def describe(config: Config, parameters: int, training: bool = True) -> str:
    """The configuration in one line (without how it trains if not ``training``)."""
    links = f"host links {config.bw:g} Mbit/s" if config.bw is not None else "links unshaped"
    how = f", {config.batch_size} images per rank and step, {config.epochs} epochs" if training else ""
    return (f"{config.name}: {config.model.upper()} of {parameters:,} parameters ({4 * parameters / 1e6:.2f} MB of "
            f"gradient per step){how}, {links}")


def print_table(config: Config, table: list[dict], rounds: int) -> None:
    print(f"\n{describe(config, table[0]['parameters'])}")
    print(f"{'':<28}" + "".join(f"{r['comm']:>12}" for r in table))
    for key, label, fmt, scale in (("loss", "final training loss", "{:.4f}", 1),
                                   ("test_accuracy", "final test accuracy", "{:.1%}", 1),
                                   ("seconds_per_step", "time per step (ms)", "{:.0f}", 1e3),
                                   ("speedup_over_gloo", "gloo's step / this step", "{:.2f}x", 1),
                                   ("comm_ms_per_step", "communication per step (ms)", "{:.0f}", 1),
                                   ("cpu_ms_per_step", "CPU per step and rank (ms)", "{:.0f}", 1),
                                   ("hidden_share", "hidden behind backward", "{:.0%}", 1),
                                   ("node_tx_per_gradient", "node sends / gradient", "{:.2f}", 1),
                                   ("node_rx_per_gradient", "node receives / gradient", "{:.2f}", 1)):
        print(f"{label:<28}" + "".join(f"{fmt.format(r[key] * scale):>12}" for r in table))
    print(f"(DDP buckets: {table[0]['buckets']} of at most {table[0]['bucket_cap_mb']} MiB; accuracy and loss: "
          f"median of the trainings' last epoch; time per step: median of the trainings, each the median of its "
          f"epochs after the first; communication, CPU, hidden: medians over steps after the first and over ranks; "
          f"{rounds} training(s) with each)")
    ina = [r for r in table if r["comm"] != "gloo"]
    print("INA against gloo: " + ", ".join(f"{r['comm']} {r['speedup_over_gloo']:.2f}x the speed per step, "
                                           f"accuracy {r['accuracy_vs_gloo_points']:+.1f} points" for r in ina))


def write_csv(path: Path, rows: list[dict], configs: dict[str, Config]) -> None:
    fields = ["config", "comm", "model", "parameters", "bw_mbit", "batch_size", "epochs", "rounds", "bucket_cap_mb",
              "buckets", "loss", "test_accuracy", "ms_per_step", "ms_per_step_trainings", "speedup_over_gloo",
              "accuracy_vs_gloo_points", "comm_ms_per_step", "cpu_ms_per_step", "hidden_share", "nodes",
              "ranks_per_node", "rails", "node_tx_per_gradient", "node_rx_per_gradient"]
    write_rows(path, [{**r, "bw_mbit": configs[r["config"]].bw or "", "batch_size": configs[r["config"]].batch_size,
                       "epochs": configs[r["config"]].epochs, "ms_per_step": round(1e3 * r["seconds_per_step"], 1),
                       "ms_per_step_trainings": " ".join(f"{1e3 * s:.0f}" for s in r["seconds_per_step_trainings"])}
                      for r in rows], fields, digits=None, extrasaction="ignore")


def plot_loss(runs: dict[str, list[dict]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (loss, acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    styles = ({"marker": "o"}, {"marker": "s", "linestyle": ":"}, {"marker": "x", "linestyle": "--"})
    for (comm, epochs), style in zip(runs.items(), styles):
        x = [e["epoch"] for e in epochs]
        loss.plot(x, [e["loss"] for e in epochs], label=comm, **style)
        acc.plot(x, [100 * e["test_accuracy"] for e in epochs], label=comm, **style)
    loss.set(xlabel="epoch", ylabel="training loss (mean over ranks)", yscale="log")
    acc.set(xlabel="epoch", ylabel="test accuracy (%)")
    for ax in (loss, acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def plot_timeline(timelines: dict[str, dict], path: Path, steps: int = 4) -> None:
    """Rank 0's last few steps: backward's computation, and each bucket from ready to allreduced."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(timelines), 1, figsize=(11, 2.2 * len(timelines)), squeeze=False)
    for ax, (comm, t) in zip(axes[:, 0], timelines.items()):
        shown = sorted(int(s) for s in t["backward_started"])[-steps:]
        offset, ticks = 0.0, []  # steps side by side, each from its own start of backward (no epoch gaps)
        gap = 0.0
        for s in shown:
            mine = [b for b in t["buckets"] if b["step"] == s]
            origin = t["backward_started"][str(s)]
            end = max(b["ready"] for b in mine) - origin
            first = s == shown[0]
            ticks.append((offset, f"step {s}"))
            ax.barh(0, 1e3 * end, left=offset, color="tab:gray", height=0.6,
                    label="backward (computing)" if first else None)
            for b in mine:
                y = 1 + b["index"]
                ax.barh(y, 1e3 * (b["started"] - b["ready"]), left=offset + 1e3 * (b["ready"] - origin),
                        color="tab:orange", height=0.6, alpha=0.5,
                        label="ready, waiting" if first and b["index"] == 0 else None)
                ax.barh(y, 1e3 * (b["finished"] - b["started"]), left=offset + 1e3 * (b["started"] - origin),
                        color="tab:blue", height=0.6, label="allreduce" if first and b["index"] == 0 else None)
            width = 1e3 * max(end, max(b["finished"] for b in mine) - origin)
            gap = gap or max(60.0, 0.05 * width)  # a visible gap between steps, at any scale
            offset += width + gap
        ax.set_xticks([x for x, _ in ticks], [f"{label}\n0 ms" for _, label in ticks], fontsize=7)
        buckets = 1 + max(b["index"] for b in t["buckets"])
        ax.set_yticks(range(buckets + 1), ["backward"] + [f"bucket {i}" for i in range(buckets)])
        share = statistics.median(t["hidden_share"])
        ax.set_title(f"{comm}: rank 0, steps {shown[0]}-{shown[-1]}; median {share:.0%} of communication "
                     f"hidden behind backward", fontsize=9)
        ax.set_xlabel("ms from each step's start of backward (steps side by side)")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save_figure(fig, path)


def run_config(config: Config, args: argparse.Namespace, out: Path, progress: Iterator[int], total: int,
               ports: Iterator[int]) -> list[dict]:
    """The three ways, ``args.rounds`` times each, on a network of their own; their summaries, plots written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "controller-state.json").unlink(missing_ok=True)  # a run of its own: its network is new
    links = f"host links shaped to {config.bw:g} Mbit/s" if config.bw is not None else "links unshaped"
    topo = topology(config.bw, args.nproc_per_node, args.rails)
    nodes = Nodes.of(topo, args.nproc_per_node)
    shape = (f"4 nodes of {nodes.local} ranks, a NIC per rank, each rail on its own leaf" if args.rails else
             f"4 nodes of {nodes.local} rank(s) on one P4 switch")
    print(f"[{next(progress)}/{total}] {config.name}: starting {shape}, {links} (files in {out})", flush=True)
    runs: dict[str, list[list[dict]]] = {comm: [] for comm in COMMS}
    timelines: dict[str, list[dict]] = {comm: [] for comm in COMMS}
    bytes_per_step: dict[str, list[dict[str, float]]] = {comm: [] for comm in COMMS}
    with InaNetwork(topo, out / "net", target=args.target) as net:
        prioritise_switches(net, args.switch_nice)
        with Controller(net.network, out / "controller-state.json") as controller:  # the defaults: V = 256, 64 slots

            def new_job(job: str) -> str:
                """The job's spec file ({rail} in it: a job per rail, one member per node)."""
                if nodes.local == 1:
                    controller.create_job(job, nodes.rail(0), mode="ina")
                    return str(controller.spec_dir / f"{job}.json")
                controller.create_rails(job, [nodes.rail(i) for i in range(nodes.local)], mode="ina")
                return str(controller.spec_dir / f"{job}-rail{{rail}}.json")

            controller.setup()
            spec = new_job("train")
            print(f"[{next(progress)}/{total}] switches ({net.network.access[next(iter(topo.switches))].target}): "
                  f"ina.p4, job 'train' for {', '.join(nodes.names)}"
                  f"{f' (a job per rail of {nodes.local})' if nodes.local > 1 else ''}", flush=True)
            order = [COMMS[(r + i) % 3] for r in range(args.rounds) for i in range(3)]
            jobs = 0
            for comm in order:
                print(f"[{next(progress)}/{total}] {config.name}: training with --comm {comm}, --model "
                      f"{config.model}, {config.epochs} epochs", flush=True)
                started = time.monotonic()
                given = None
                if comm != "gloo":  # a job is one session of its workers: a new one for each training
                    given = spec if not jobs else new_job(f"train{jobs}")
                    jobs += 1
                epochs, ranks, per_step = train(net, nodes, comm, given, config, args, out, next(ports))
                runs[comm].append(epochs)
                timelines[comm] += ranks
                bytes_per_step[comm].append(per_step)
                print(f"      {time.monotonic() - started:.0f} s", flush=True)
    table = [summary(comm, runs[comm], timelines[comm], bytes_per_step[comm]) for comm in runs]
    against_gloo(table)
    for r in table:
        r.update(config=config.name, nodes=len(nodes.names), ranks_per_node=nodes.local, rails=args.rails)
    (out / "summary.json").write_text(json.dumps({"config": dataclasses.asdict(config), "summary": table,
                                                  "epochs": runs}, indent=1))
    print_table(config, table, args.rounds)
    write_plots(config, table, runs, timelines, nodes.local, out, args.publish)
    return table


def write_plots(config: Config, table: list[dict], runs: dict[str, list[list[dict]]],
                timelines: dict[str, list[dict]], local: int, out: Path, to_docs: bool) -> None:
    """The configuration's two plots (the first training of each way) in bench/results/, a copy in ``out`` (the
    run's files); ``to_docs`` (--publish): also in docs/figures/."""
    title = (f"{describe(config, table[0]['parameters'], training=False)}\nDDP on digits, 4 nodes of "
             f"{local} rank(s) in Mininet: gradients through the P4 switches (hook, backend) or gloo")
    loss_png, timeline_png = (RESULTS / name for name in config.plots)
    plot_loss({comm: rounds[0] for comm, rounds in runs.items()}, loss_png, title)
    plot_timeline({comm: timelines[comm][0] for comm in runs}, timeline_png)
    for png in (loss_png, timeline_png):
        if out.resolve() != RESULTS.resolve():
            shutil.copy(png, out / png.name)
        publish(png, to_docs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make train", description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=["all", *CONFIGS], default="all",
                    help="compute-bound: small CNN, links unshaped; comm-bound: 10.97 MB of gradient per step on "
                         "50 Mbit/s links; all (default): both, one after the other")
    ap.add_argument("--rounds", type=int, default=1, help="trainings with each way, the order rotating")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, help="instead of the configuration's (compute-bound 20, comm-bound 3)")
    ap.add_argument("--batch-size", type=int, help="per rank, instead of the configuration's (128, 32)")
    ap.add_argument("--lr", type=float, help="Adam's, instead of the configuration's (3e-3, 5e-4)")
    ap.add_argument("--bucket-cap-mb", type=float, help="DDP's, instead of the configuration's (0.025, 4)")
    ap.add_argument("--bw", type=float, help="Mbit/s of every host link, instead of the configuration's "
                                             "(unshaped, 50)")
    ap.add_argument("--nproc-per-node", type=int, default=1,
                    help="ranks per node (torchrun's): above 1 each node reduces inside itself and sums through "
                         "a job per rail")
    ap.add_argument("--rails", action="store_true",
                    help="a NIC per local rank, each rail on a leaf of its own (rail-optimised); else one NIC per node")
    ap.add_argument("--target", default="auto", choices=["auto", "builtin", "bmv2"])
    ap.add_argument("--switch-nice", type=int, default=-10,
                    help="the switch processes' nice value: on a shared machine, the emulated switch keeps its CPU")
    ap.add_argument("--out", type=Path, help="where the runs' files go (default: a new temporary folder); "
                                             "a folder per configuration")
    ap.add_argument("--publish", action="store_true", help="also copy the plots to docs/figures/ (tracked)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not 1 <= args.nproc_per_node <= 8:
        ap.error("--nproc-per-node must be within 1..8")
    if os.geteuid() != 0:
        print("make train starts a Mininet network: run it as root", file=sys.stderr)
        return 1
    overrides = {field: getattr(args, field) for field in ("epochs", "batch_size", "lr", "bucket_cap_mb", "bw")
                 if getattr(args, field) is not None}
    configs = {name: dataclasses.replace(c, **overrides) for name, c in CONFIGS.items()
               if args.config in ("all", name)}
    out = args.out or Path(tempfile.mkdtemp(prefix="ina-train-"))
    total = len(configs) * (2 + 3 * args.rounds)
    progress, ports = itertools.count(1), itertools.count(29500)
    rows: list[dict] = []
    for config in configs.values():
        rows += run_config(config, args, out / config.name, progress, total, ports)
        write_csv(RESULTS / CSV, rows, configs)  # after each configuration: a failure keeps what was done
    print(f"table: {RESULTS / CSV}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
