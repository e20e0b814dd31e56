"""`make train`: examples/train_ddp.py on 4 Mininet hosts, gradients through the P4 switch two ways, and gloo.

Starts bmv2-env/topologies/single-4.json (the built-in target, or simple_switch_grpc when it
is installed), lets the controller push ina.p4 (V = 256) and create a job for h1..h4, and
trains the same model on the same data three times, one rank per host:
``--comm ina-hook`` (a gloo process group, and the DDP hook sends every bucket through the
switch), ``--comm ina-backend`` (``init_process_group("ina")``, no hook: DDP's own allreduce
goes through the switch) and ``--comm gloo`` (DDP's own TCP allreduce through the same switch,
forwarded as plain IPv4).  Shows each epoch as it ends, then the runs' final figures side by
side, the share of communication hidden behind backward (from the ranks' timelines), and
writes two plots, into ``--out`` and bench/results/ (not tracked: a run leaves the repository
as it was; ``--publish`` also copies them to docs/figures/, which the READMEs show):

    bench/results/train-loss.png       loss and test accuracy per epoch, every run
    bench/results/train-timeline.png   a few steps of rank 0: backward, and each bucket's allreduce

``--rounds N`` trains N times with each, the order rotating (hook, backend, gloo, backend,
gloo, hook, ...), and reports medians over all rounds: on a shared machine one run varies by
about 10%.

    python examples/mininet_train.py [--epochs 20] [--rounds 1] [--target auto|builtin|bmv2] [--out DIR]
                                     [--publish]
"""

import argparse
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

from bench import figures  # noqa: E402
from controller.controller import Controller  # noqa: E402
from controller.pipeline import PipelineOptions  # noqa: E402

TOPOLOGY = ROOT / "bmv2-env" / "topologies" / "single-4.json"
HOSTS = ["h1", "h2", "h3", "h4"]


def train(net: InaNetwork, comm: str, spec: Path | None, args: argparse.Namespace, out: Path,
          port: int) -> tuple[list[dict], list[dict]]:
    """One training run, a rank per host; rank 0's epochs (shown as they come) and every rank's timeline."""
    master = str(net.network.topology.hosts[HOSTS[0]].ip.ip)
    procs = []
    for rank, host in enumerate(HOSTS):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(len(HOSTS)), MASTER_ADDR=master,
                   MASTER_PORT=str(port), PYTHONPATH=str(ROOT),
                   GLOO_SOCKET_IFNAME=f"{host}-eth0")  # else gloo takes the host name's address, 127.0.0.1
        if spec is not None:
            env["INA_JOB_SPEC"] = str(spec)
        command = [sys.executable, str(ROOT / "examples" / "train_ddp.py"), "--comm", comm, "--epochs",
                   str(args.epochs), "--timeline", str(out / f"{comm}-rank{rank}.json"), "--seed", str(args.seed),
                   "--batch-size", str(args.batch_size), "--lr", str(args.lr)]
        procs.append(net.host(host).popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    epochs = []
    try:
        for line in procs[0].stdout:  # rank 0 reports each epoch
            if line.startswith("{"):
                record = json.loads(line)
                if "error" in record:
                    raise RuntimeError(f"{comm}: rank 0: {record['error']}")
                epochs.append(record)
                print(f"  [{comm:>4}] epoch {record['epoch']:>2}/{args.epochs}: loss {record['loss']:.4f}, "
                      f"test accuracy {record['test_accuracy']:.1%}, {record['seconds_per_step'] * 1e3:.0f} ms "
                      f"per step", flush=True)
        for rank, p in enumerate(procs):
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"{comm}: rank {rank} exited with {p.returncode}: {err.strip()[-1500:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return epochs, [json.loads((out / f"{comm}-rank{r}.json").read_text()) for r in range(len(HOSTS))]


def summary(comm: str, rounds: list[list[dict]], timelines: list[dict]) -> dict:
    """Medians over the rounds' epochs after the first, and over every rank's steps."""
    hidden = [h for t in timelines for h in t["hidden_share"]]
    comm_s = [c for t in timelines for c in t["comm_seconds"]]
    last = rounds[-1][-1]
    steps = [e["seconds_per_step"] for epochs in rounds for e in (epochs[1:] or epochs)]
    return {"comm": comm, "loss": last["loss"], "test_accuracy": last["test_accuracy"],
            "seconds_per_step": statistics.median(steps), "rounds": len(rounds),
            "comm_ms_per_step": 1e3 * statistics.median(comm_s), "hidden_share": statistics.median(hidden),
            "cpu_ms_per_step": 1e3 * statistics.median(c for t in timelines for c in t["cpu_seconds_per_step"]),
            "buckets": len({(b["index"], b["values"]) for b in timelines[0]["buckets"] if b["step"] > 1}),
            "bucket_cap_mb": timelines[0]["bucket_cap_mb"]}


def plot_loss(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss, acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    styles = ({"marker": "o"}, {"marker": "s", "linestyle": ":"}, {"marker": "x", "linestyle": "--"})
    for (comm, epochs), style in zip(runs.items(), styles):
        x = [e["epoch"] for e in epochs]
        loss.plot(x, [e["loss"] for e in epochs], label=comm, **style)
        acc.plot(x, [100 * e["test_accuracy"] for e in epochs], label=comm, **style)
    loss.set(xlabel="epoch", ylabel="training loss (mean over ranks)", yscale="log")
    acc.set(xlabel="epoch", ylabel="test accuracy (%)")
    for ax in (loss, acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("DDP on digits, 4 workers in Mininet: gradients through the P4 switch (hook, backend) or gloo",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_timeline(timelines: dict[str, dict], path: Path, steps: int = 4) -> None:
    """Rank 0's last few steps: backward's computation, and each bucket from ready to allreduced."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(timelines), 1, figsize=(11, 2.2 * len(timelines)), squeeze=False)
    for ax, (comm, t) in zip(axes[:, 0], timelines.items()):
        shown = sorted(int(s) for s in t["backward_started"])[-steps:]
        offset, ticks = 0.0, []  # steps side by side, each from its own start of backward (no epoch gaps)
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
            offset += 1e3 * max(end, max(b["finished"] for b in mine) - origin) + 60
        ax.set_xticks([x for x, _ in ticks], [f"{label}\n0 ms" for _, label in ticks], fontsize=7)
        buckets = 1 + max(b["index"] for b in t["buckets"])
        ax.set_yticks(range(buckets + 1), ["backward"] + [f"bucket {i}" for i in range(buckets)])
        share = statistics.median(t["hidden_share"])
        ax.set_title(f"{comm}: rank 0, steps {shown[0]}-{shown[-1]}; median {share:.0%} of communication "
                     f"hidden behind backward", fontsize=9)
        ax.set_xlabel("ms from each step's start of backward (steps side by side)")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make train", description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1, help="trainings with each, the order alternating")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=128, help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--target", default="auto", choices=["auto", "builtin", "bmv2"])
    ap.add_argument("--switch-nice", type=int, default=-10,
                    help="the switch processes' nice value: on a shared machine, the emulated switch keeps its CPU")
    ap.add_argument("--out", type=Path, help="where the runs' files go (default: a new temporary folder)")
    ap.add_argument("--publish", action="store_true", help="also copy the plots to docs/figures/ (tracked)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("make train starts a Mininet network: run it as root", file=sys.stderr)
        return 1
    out = args.out or Path(tempfile.mkdtemp(prefix="ina-train-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "controller-state.json").unlink(missing_ok=True)  # a run of its own: its network is new
    total = 2 + 3 * args.rounds
    print(f"[1/{total}] starting {TOPOLOGY.name}: 4 hosts on one P4 switch (files in {out})", flush=True)
    with InaNetwork(TOPOLOGY, out / "net", target=args.target) as net:
        for switch in net.switches:  # a switch is a device of its own: it must not wait for the trainers' CPU
            for thread in Path(f"/proc/{switch.process.pid}/task").iterdir():
                os.setpriority(os.PRIO_PROCESS, int(thread.name), args.switch_nice)
        with Controller(net.network, out / "controller-state.json", PipelineOptions(values=256)) as controller:
            controller.setup()
            controller.create_job("train", HOSTS, pool_size=64)
            target = net.network.access["s1"].target
            print(f"[2/{total}] switch s1 ({target}): ina.p4, job 'train' for {', '.join(HOSTS)}", flush=True)
            comms = ("ina-hook", "ina-backend", "gloo")
            runs: dict[str, list[list[dict]]] = {comm: [] for comm in comms}
            timelines: dict[str, list[dict]] = {comm: [] for comm in comms}
            order = [comms[(r + i) % 3] for r in range(args.rounds) for i in range(3)]
            jobs = 0
            for n, comm in enumerate(order):
                print(f"[{3 + n}/{total}] training with --comm {comm}, {args.epochs} epochs", flush=True)
                started = time.monotonic()
                spec = None
                if comm != "gloo":  # a job is one session of its workers: a new one for each training
                    job = "train" if not jobs else f"train{jobs}"
                    if jobs:
                        controller.create_job(job, HOSTS, pool_size=64)
                    jobs += 1
                    spec = controller.spec_dir / f"{job}.json"
                epochs, ranks = train(net, comm, spec, args, out, 29500 + n)
                runs[comm].append(epochs)
                timelines[comm] += ranks
                print(f"      {time.monotonic() - started:.0f} s", flush=True)
    table = [summary(comm, runs[comm], timelines[comm]) for comm in runs]
    (out / "summary.json").write_text(json.dumps({"summary": table, "epochs": runs}, indent=1))
    print(f"\n{'':<24}" + "".join(f"{r['comm']:>12}" for r in table))
    for key, label, fmt in (("loss", "final training loss", "{:.4f}"), ("test_accuracy", "final test accuracy",
                                                                        "{:.1%}"),
                            ("seconds_per_step", "time per step (ms)", "{:.0f}"),
                            ("comm_ms_per_step", "communication per step (ms)", "{:.0f}"),
                            ("cpu_ms_per_step", "CPU per step and rank (ms)", "{:.0f}"),
                            ("hidden_share", "hidden behind backward", "{:.0%}")):
        scale = 1e3 if key == "seconds_per_step" else 1
        print(f"{label:<28}" + "".join(f"{fmt.format(r[key] * scale):>12}" for r in table))
    print(f"(DDP buckets: {table[0]['buckets']} of at most {table[0]['bucket_cap_mb']} MiB; medians over steps "
          f"after the first and over ranks, {args.rounds} training(s) with each)")
    plot_loss({comm: rounds[0] for comm, rounds in runs.items()}, out / "train-loss.png")
    plot_timeline({comm: timelines[comm][0] for comm in runs}, out / "train-timeline.png")
    figures.RESULTS.mkdir(parents=True, exist_ok=True)
    for name in ("train-loss.png", "train-timeline.png"):
        if out.resolve() != figures.RESULTS.resolve():
            shutil.copy(out / name, figures.RESULTS / name)
        if args.publish:
            figures.publish(figures.RESULTS / name)
    print(f"plots: {figures.RESULTS / 'train-loss.png'}, {figures.RESULTS / 'train-timeline.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
