"""Train a small tensor-parallel GPT (worker/tp) with Megatron's blocking allreduces and with Domino's
hidden ones, and measure how much of the communication Domino hides, beside the model's prediction.

A torchrun script (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment); TP = world.
Every rank builds the same full weights and the same data from ``--seed`` and keeps its shards.
On top of the stack sits a loss that is not tensor-parallel: the mean squared error to a fixed
random target of the stack's own shape (the stack's output is whole on every rank, so every rank
computes the same loss). Each schedule trains its own copy of the same initial weights with Adam.

Per step, for each schedule in turn: the real step (``TorchComm`` on the default group: gloo, or the
switches with ``--backend ina`` and INA_JOB_SPEC), then the same step with ``NoComm`` (the step's
compute alone, on a copy of its own), each after a barrier; medians over the steps after ``--warmup``.
With both schedules: the hidden share ``(T_sync - T_domino) / (T_sync - T_no_comm)`` (T_no_comm of the
Domino schedule: Domino's "optimal") and the speed-up ``T_sync / T_domino``; sync and domino must
give the same losses (within 1%), which is checked.

The prediction (``worker/tp/step_model.py``): at start-up one ``NoComm`` step of each schedule is
recorded (each allreduce's start and wait), and every allreduce size in those steps is timed as a
blocking ``dist.all_reduce`` on the real group (median of ``--calibrate`` calls); ``predict`` walks
the recorded step with those times ("calibrated"); again with each call's CPU (the process's CPU
time per blocking call) taken from the compute it runs behind, for ranks with no core to spare
("calibrated_cpu"); and with ``--backend ina`` also with the job's own model (``JobSpec.model``:
``CallModel.choose(elements, float32).seconds``).

    torchrun --nproc-per-node 2 examples/train_tp.py --schedule both --hidden 256 --seq 64 --batch 8
    INA_JOB_SPEC=RUN/jobs/tp.json torchrun --nproc-per-node 2 examples/train_tp.py --backend ina

Rank 0 prints one JSON line per step and one summary line (also written to ``--json FILE``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - as PyTorch writes it

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repository's packages

from worker.tp import GPT, FullGPT, GPTShape, NoComm, TorchComm  # noqa: E402
from worker.tp.step_model import Event, Recorder, StepPrediction, predict  # noqa: E402

SCHEDULES = {"sync": ["sync"], "domino": ["domino"], "both": ["sync", "domino"]}


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), default="both")
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--backend", choices=["gloo", "ina"], default="gloo")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--mlp", type=int, default=0, help="MLP width (0: 4 x hidden)")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1, help="steps left out of the medians")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (leave a core for gloo/the worker)")
    ap.add_argument("--calibrate", type=int, default=20, help="blocking allreduces timed per size")
    ap.add_argument("--timeout", type=float, default=10.0, help="the ina worker's timeout per call, seconds")
    ap.add_argument("--json", help="rank 0 writes the summary here")
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")
    if not 1 <= args.micro_batches <= args.batch:
        ap.error(f"--micro-batches must be 1..--batch ({args.batch}), not {args.micro_batches}")
    return args


class Trainer:
    """One schedule's model, optimizer and data: ``step()`` is forward, MSE loss, backward, Adam."""

    def __init__(self, full: FullGPT, comm: object, schedule: str, micro_batches: int, lr: float,
                 data: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.model = GPT.from_full(full, comm)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.schedule, self.micro_batches = schedule, micro_batches
        self.x, self.target = data

    def step(self) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(self.model(self.x, schedule=self.schedule, micro_batches=self.micro_batches), self.target)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def timed(step: Callable[[], float]) -> tuple[float, float, float, float]:
    """(start, seconds, loss, this process's CPU seconds in every thread: torch's, gloo's, the worker's) of
    one step, the ranks lined up first."""
    dist.barrier()
    started, cpu = time.perf_counter(), time.process_time()
    loss = step()
    return started, time.perf_counter() - started, loss, time.process_time() - cpu


def step_timeline(trainer: Trainer, origin: float, seconds: float) -> dict:
    """The step just taken (begun at ``origin``), for a plot: its allreduces (times from its start), each with the
    Domino key it reduced (``reduce``/``dgrad``, sublayer, micro-batch; none in the sync schedule)."""
    recorder: Recorder = trainer.model.comm
    calls = recorder.calls()
    keys = [list(key) for event, key in trainer.model.handles.trace if event == "start"]
    rows = []
    for i, c in enumerate(calls):
        rows.append({"elements": c.elements, "start": c.start - origin,
                     "done": None if c.done is None else c.done - origin,
                     "wait_called": c.wait_called - origin, "wait_returned": c.wait_returned - origin,
                     "key": keys[i] if len(keys) == len(calls) else None})
    return {"seconds": seconds, "calls": rows}


def record(trainer: Trainer) -> tuple[Recorder, float, float]:
    """One NoComm step of ``trainer`` (its comm a ``Recorder``) after one warm-up: events, start, end."""
    recorder: Recorder = trainer.model.comm
    trainer.step()
    recorder.clear()
    started = time.perf_counter()
    trainer.step()
    return recorder, started, time.perf_counter()


def calibrate(sizes: set[int], repeats: int) -> dict[int, tuple[float, float]]:
    """Per element count, a blocking float32 ``dist.all_reduce`` on the real group: its median seconds,
    and the CPU this process spends on it (all threads: gloo's, or the ina worker's), per call."""
    out = {}
    for n in sorted(sizes):
        tensor, times, cpu = torch.ones(n), [], 0.0
        for i in range(repeats + 2):
            dist.barrier()
            started, cpu_started = time.perf_counter(), time.process_time()
            dist.all_reduce(tensor)
            if i >= 2:  # two warm-ups
                times.append(time.perf_counter() - started)
                cpu += time.process_time() - cpu_started
        out[n] = (statistics.median(times), cpu / repeats)
    return out


def job_model_seconds() -> Callable[[int], float] | None:
    """The ina job's own per-call time (``CallModel.choose``), if the group is the switches' and has a model."""
    worker = getattr(dist.group.WORLD, "worker", None)
    model = worker.spec.model if worker is not None else None
    if model is None:
        return None
    mode = worker.spec.mode
    return lambda n: model.choose(n, np.float32, mode=mode).seconds


def stretched(recorder: Recorder, started: float, ended: float, seconds: float) -> tuple[list[Event], float]:
    """The recorded step's events, from 0, its compute scaled to last ``seconds`` (the median NoComm
    step: one recorded step alone is as noisy as the shared cores)."""
    k = seconds / (ended - started)
    return [dataclasses.replace(e, t=(e.t - started) * k) for e in recorder.events], seconds


def prediction(p: StepPrediction, measured: float) -> dict:
    return {"T_step": p.seconds, "compute": p.compute, "comm": p.comm, "exposed": p.exposed, "contention": p.contention,
            "hidden": p.hidden, "ratio_to_measured": p.seconds / measured}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    if args.backend == "ina":
        from worker.torch_backend import InaOptions

        dist.init_process_group("ina", pg_options=InaOptions(timeout=args.timeout))
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shape = GPTShape(args.layers, args.hidden, args.heads, args.mlp or 4 * args.hidden)
    torch.manual_seed(args.seed)  # the same full weights and data on every rank
    full = FullGPT(shape)
    data = (torch.randn(args.batch, args.seq, args.hidden), torch.randn(args.batch, args.seq, args.hidden))
    schedules = SCHEDULES[args.schedule]

    def trainer(schedule: str, comm: object) -> Trainer:
        return Trainer(copy.deepcopy(full), comm, schedule, args.micro_batches, args.lr, data)

    recorded = {s: record(trainer(s, Recorder(NoComm(world, rank)))) for s in schedules}
    sizes = {e.elements for r, _, _ in recorded.values() for e in r.events if e.kind == "start"}
    calibration = calibrate(sizes, args.calibrate)
    real = {s: trainer(s, Recorder(TorchComm())) for s in schedules}
    for t in real.values():
        t.model.handles.trace = []  # Domino's keys (layer part, micro-batch) of each call, for the timeline
    alone = {s: trainer(s, NoComm(world, rank)) for s in schedules}
    times: dict[str, list[float]] = {s: [] for s in schedules}
    no_comm: dict[str, list[float]] = {s: [] for s in schedules}
    no_comm_cpu: dict[str, list[float]] = {s: [] for s in schedules}
    losses: dict[str, list[float]] = {s: [] for s in schedules}
    cpu_seconds: dict[str, list[float]] = {s: [] for s in schedules}
    timeline: dict[str, dict] = {}
    for step in range(args.steps):
        for s in schedules:
            real[s].model.comm.clear()
            real[s].model.handles.trace.clear()
            started, seconds, loss, cpu = timed(real[s].step)
            timeline[s] = step_timeline(real[s], started, seconds)
            times[s].append(seconds)
            losses[s].append(loss)
            cpu_seconds[s].append(cpu)
            _, seconds, _, cpu = timed(alone[s].step)
            no_comm[s].append(seconds)
            no_comm_cpu[s].append(cpu)
        if rank == 0:
            print(json.dumps({"step": step, **{f"loss_{s}": losses[s][-1] for s in schedules},
                              **{f"T_{s}": times[s][-1] for s in schedules}}), flush=True)
    summary = summarize(args, world, schedules, (times, no_comm, cpu_seconds, no_comm_cpu), losses, recorded,
                        calibration)
    summary["timeline"] = timeline
    if rank == 0:
        print(json.dumps({k: v for k, v in summary.items() if k != "timeline"}), flush=True)
        print(side_by_side(summary), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=1))
    dist.destroy_process_group()
    check_losses(losses)
    return 0


def summarize(args: argparse.Namespace, world: int, schedules: list[str], medians: tuple[dict, dict, dict, dict],
              losses: dict, recorded: dict, calibration: dict[int, tuple[float, float]]) -> dict:
    """Medians after warm-up, the hidden share and speed-up, and each schedule's predictions beside them."""
    times, no_comm, cpu_seconds, no_comm_cpu = medians
    model_seconds = job_model_seconds()
    out: dict = {"config": {k: v for k, v in vars(args).items() if k != "json"}, "world": world,
                 "calibration_seconds": {str(n): t for n, (t, _) in calibration.items()},
                 "calibration_cpu_seconds": {str(n): c for n, (_, c) in calibration.items()}, "schedules": {}}
    for s in schedules:
        measured = statistics.median(times[s][args.warmup:])
        alone = statistics.median(no_comm[s][args.warmup:])
        events, ended = stretched(*recorded[s], alone)
        started = 0.0
        seconds, cpu = (lambda n: calibration[n][0]), (lambda n: calibration[n][1])
        walks = {"calibrated": (seconds, None), "calibrated_cpu": (seconds, cpu)}
        if model_seconds is not None:
            walks["job_model"] = (model_seconds, None)
        out["schedules"][s] = {
            "T_step": measured, "T_no_comm": alone,
            "cpu_per_step": statistics.median(cpu_seconds[s][args.warmup:]),
            "cpu_no_comm": statistics.median(no_comm_cpu[s][args.warmup:]), "losses": losses[s],
            "calls": sum(e.kind == "start" for e in events),
            "calls_cpu": sum(cpu(e.elements) for e in events if e.kind == "start"),
            "predicted": {name: prediction(predict(events, ended, walk, queued=True, start=started,
                                                   call_cpu=taken), measured)
                          for name, (walk, taken) in walks.items()}}
    if len(schedules) == 2:
        sync, domino = out["schedules"]["sync"], out["schedules"]["domino"]
        out["hidden_share"] = (sync["T_step"] - domino["T_step"]) / (sync["T_step"] - domino["T_no_comm"])
        out["speedup"] = sync["T_step"] / domino["T_step"]
        out["predicted_hidden_share"] = {
            name: (sync["predicted"][name]["T_step"] - domino["predicted"][name]["T_step"])
            / (sync["predicted"][name]["T_step"] - domino["predicted"][name]["compute"])
            for name in sync["predicted"]}
    return out


def side_by_side(summary: dict) -> str:
    """The measured medians and each prediction beside them, as text."""
    lines = []
    for s, r in summary["schedules"].items():
        lines.append(f"{s:6s} T_step {r['T_step'] * 1e3:8.2f} ms  T_no_comm {r['T_no_comm'] * 1e3:8.2f} ms  "
                     f"CPU {r['cpu_per_step'] * 1e3:8.2f} ms  {r['calls']} allreduces")
        for name, p in r["predicted"].items():
            lines.append(f"       predicted ({name}) {p['T_step'] * 1e3:8.2f} ms  = {p['ratio_to_measured']:.2f} x "
                         f"measured (compute {p['compute'] * 1e3:.2f}, comm {p['comm'] * 1e3:.2f}, "
                         f"exposed {p['exposed'] * 1e3:.2f} ms)")
    if "hidden_share" in summary:
        predicted = ", ".join(f"{k} {v:.2f}" for k, v in summary["predicted_hidden_share"].items())
        lines.append(f"hidden share {summary['hidden_share']:.2f} (predicted: {predicted}), "
                     f"speed-up T_sync/T_domino {summary['speedup']:.2f}")
    return "\n".join(lines)


def check_losses(losses: dict[str, list[float]]) -> None:
    """Sync and domino start from the same weights and see the same data: the same losses, within 1%."""
    if len(losses) == 2:
        for step, (a, b) in enumerate(zip(losses["sync"], losses["domino"])):
            if abs(a - b) > 0.01 * abs(a):
                raise SystemExit(f"step {step}: sync loss {a} and domino loss {b} differ by more than 1%")


if __name__ == "__main__":
    sys.exit(main())
