"""Train a small CNN or a wide MLP on scikit-learn's digits with PyTorch DDP; gradients summed by the switches or gloo.

A torchrun-style script: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment.
Three ways to sum the gradients:

- ``--comm ina-hook`` (or ``ina``): a gloo process group, and every DDP gradient bucket through
  the switches with one line, ``ddp.register_comm_hook(InaHookState(), ina_hook)``;
- ``--comm ina-backend``: ``init_process_group("ina")`` and nothing else: DDP's own allreduce
  goes through the switches, its other collectives through the backend's gloo group;
- ``--comm gloo``: DDP's own allreduce over gloo.

The two INA ways need INA_JOB_SPEC, the job file the controller wrote for these ranks
(``ina-ctl job create ... --export`` prints the line).  ``--plain`` trains without DDP: after
each backward the loop calls ``dist.all_reduce`` on every gradient (async, then waits), the way
custom training loops do.

    torchrun --nproc-per-node 4 examples/train_ddp.py --comm gloo
    torchrun --nproc-per-node 4 examples/train_ddp.py --comm gloo --model mlp --epochs 3 --batch-size 32 \
        --lr 5e-4 --bucket-cap-mb 4
    INA_JOB_SPEC=RUN/jobs/train.json torchrun --nproc-per-node 4 examples/train_ddp.py --comm ina-backend

(``make train`` runs all three in Mininet, one rank per host, through the P4 switch, with each
model.)  Rank 0 prints one JSON line per epoch: loss, train and test accuracy, seconds per step.  With
``--timeline FILE`` every rank records, per step, when backward started and each bucket's
ready / started / finished times (the backend's calls, for ``ina-backend``), and writes them
with the share of communication hidden behind backward; a failed allreduce prints
``{"error": ...}`` and exits 1.

Two models (``--model``):

- ``cnn`` (the default): 28,426 parameters (114 KB of gradient per step) and much arithmetic per
  parameter, on the images upsampled to 32x32: the step is computation;
- ``mlp``: 64 -> 1152 -> 1152 -> 1152 -> 10, 2,742,922 parameters (10.97 MB of float32 gradient
  per step) and little arithmetic per parameter, on the 8x8 images as 64 features: on slow links
  the step is communication (``mininet_train.py --config comm-bound``).

The data: 1,797 8x8 digit images that scikit-learn ships (no download), split 80/20 with a
fixed seed; each rank trains on its own shard of every epoch's shuffle.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations as real types.

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - as PyTorch writes it
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repository's packages

from worker.torch_ddp import BucketTimes, InaHookState, Timeline, hidden_share, ina_hook  # noqa: E402

if TYPE_CHECKING:
    from worker.torch_node import NodeReducer
    from worker.torch_tensors import TensorWorker

COMMS = {"ina": "ina-hook", "ina-hook": "ina-hook", "ina-backend": "ina-backend", "gloo": "gloo"}


def digits(seed: int, flat: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train and test images, normalised, and their labels: (N, 1, 32, 32) upsampled, or (N, 64) if ``flat``."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.from_numpy(data.images.astype(np.float32) / 16.0).unsqueeze(1)
    if flat:
        images = images.flatten(1)
    else:
        images = F.interpolate(images, size=(32, 32), mode="bilinear", align_corners=False)
    labels = torch.from_numpy(data.target.astype(np.int64))
    images = (images - images.mean()) / images.std()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(order))
    return images[order[:cut]], labels[order[:cut]], images[order[cut:]], labels[order[cut:]]


class SmallCNN(nn.Module):
    """Few parameters (28,426: 114 KB of float32) and much arithmetic per parameter (convolutions on
    32x32 maps), so that backward has work to hide the buckets' allreduces behind."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class WideMLP(nn.Module):
    """Many parameters (2,742,922 at width 1152: 10.97 MB of float32) and little arithmetic per parameter
    (a batch of 32 takes tens of ms forward and backward on one core): on slow links the step is
    communication."""

    def __init__(self, width: int = 1152, hidden: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
        for _ in range(hidden - 1):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.layers = nn.Sequential(*layers, nn.Linear(width, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


MODELS = {"cnn": SmallCNN, "mlp": WideMLP}


def gloo_hook(timeline: Timeline):
    """DDP's own allreduce (average over the process group), timed like ina_hook: for the same figures."""

    def hook(_: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer = bucket.buffer()
        record = BucketTimes(timeline.step, bucket.index(), buffer.numel(), time.perf_counter())
        timeline.buckets.append(record)
        record.started = time.perf_counter()
        fut = dist.all_reduce(buffer.div_(dist.get_world_size()), async_op=True).get_future()

        def done(f: torch.futures.Future) -> torch.Tensor:
            record.finished = time.perf_counter()
            return f.value()[0]

        return fut.then(done)

    return hook


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(images).argmax(1) == labels).float().mean().item()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    setup_wall, setup_started = time.time(), time.perf_counter()  # INA_CONTROLLER: init_process_group asks for a job
    start_process_group(args)
    initialised = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    train_x, train_y, test_x, test_y = digits(args.seed, flat=args.model == "mlp")
    net = MODELS[args.model]()
    parameters = sum(p.numel() for p in net.parameters())
    timeline = Timeline()
    failure = Failure(args.comm)
    model, step_gradients = wrap(net, args, world, timeline, failure)
    calls = dist.group.WORLD.tensors if args.comm == "ina-backend" else None  # the backend's calls, timed
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    steps = 0
    cpu_per_step: list[float] = []  # this process's CPU time (every thread: torch, the worker, gloo) per step
    try:
        for epoch in range(1, args.epochs + 1):
            started = time.perf_counter()
            order = torch.randperm(len(train_y), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
            mine = order[rank::world]
            batches = len(mine) // args.batch_size
            losses, training = [], 0.0
            for b in range(batches):
                step_started, cpu_started = time.perf_counter(), time.process_time()
                index = mine[b * args.batch_size:(b + 1) * args.batch_size]
                loss = train_step(model, optimizer, train_x[index], train_y[index], args, timeline, calls,
                                  step_gradients)
                training += time.perf_counter() - step_started
                cpu_per_step.append(time.process_time() - cpu_started)
                losses.append(loss.item())
                steps += 1
                if steps == 1 and args.print_setup:
                    print_setup(rank, setup_wall, setup_started, initialised, timeline)
                if steps == args.exit_after_steps:
                    os._exit(3)  # a killed worker: no goodbye to anyone
            mean_loss = torch.tensor([float(np.mean(losses))])
            dist.all_reduce(mean_loss)
            if rank == 0:
                print(json.dumps({"comm": args.comm, "plain": args.plain, "model": args.model,
                                  "parameters": parameters, "epoch": epoch,
                                  "loss": mean_loss.item() / world,
                                  "train_accuracy": accuracy(net, train_x, train_y),
                                  "test_accuracy": accuracy(net, test_x, test_y),
                                  "seconds": time.perf_counter() - started,
                                  "seconds_per_step": training / batches,  # evaluation left out
                                  "steps": batches}), flush=True)
            dist.barrier()  # the next epoch starts together: no rank's first bucket waits out rank 0's evaluation
    except RuntimeError:  # DDP raises the hook's or backend's failure from backward(), as its text
        error = failure.error()
        if error is None:
            raise
        print(json.dumps({"rank": rank, "error": f"{type(error).__name__}: {error}"}), flush=True)
        os._exit(1)  # the process group's peers may be dead too: do not wait for them
    if args.timeline:
        write_timeline(args.timeline, timeline, args, rank, cpu_per_step[1:])
    dist.destroy_process_group()
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, ``--comm`` resolved to its full name (ina: ina-hook)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comm", choices=list(COMMS), default="ina-hook", help="ina is ina-hook")
    ap.add_argument("--plain", action="store_true", help="no DDP: dist.all_reduce on every gradient after backward")
    ap.add_argument("--model", choices=list(MODELS), default="cnn",
                    help="cnn: 28,426 parameters, computation-bound; mlp: 2,742,922 (10.97 MB per step)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=128, help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    ap.add_argument("--bucket-cap-mb", type=float, default=0.025,
                    help="DDP's bucket size (MiB): small, so that buckets become ready during backward")
    ap.add_argument("--bucket-view", action="store_true", help="gradient_as_bucket_view=True")
    ap.add_argument("--timeout", type=float, default=10.0, help="the INA worker's timeout (s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeline", help="write this rank's bucket timeline (JSON) here ({rank}: the rank's number, "
                                       "for torchrun --nproc-per-node)")
    ap.add_argument("--print-setup", action="store_true",
                    help="every rank prints a JSON line after its first step: when it called init_process_group "
                         "(wall clock), and the seconds from then to its return and to the first allreduce's start")
    ap.add_argument("--exit-after-steps", type=int, default=0, help="(tests) this rank dies after N steps")
    args = ap.parse_args(argv)
    args.comm = COMMS[args.comm]
    if args.plain and args.comm == "ina-hook":
        ap.error("--plain calls dist.all_reduce: use it with --comm ina-backend or gloo")
    return args


def start_process_group(args: argparse.Namespace) -> None:
    """The "ina" backend for ``--comm ina-backend`` (it asks the controller for a job if INA_CONTROLLER is set),
    else gloo."""
    if args.comm == "ina-backend":
        from worker.torch_backend import InaOptions

        dist.init_process_group("ina", pg_options=InaOptions(timeout=args.timeout))
    else:
        dist.init_process_group("gloo")


def wrap(net: nn.Module, args: argparse.Namespace, world: int, timeline: Timeline,
         failure: "Failure") -> tuple[nn.Module, Callable[[], None] | None]:
    """The model as trained (DDP with the hook, or the bare net for ``--plain``) and what sums the gradients
    after backward (``--plain`` only; DDP sums them during backward)."""
    if args.plain:
        return net, lambda: average_gradients(net, world)
    model = DistributedDataParallel(net, bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=args.bucket_view)
    if args.comm == "ina-hook":
        failure.hook = InaHookState(timeline=timeline, timeout=args.timeout)
        model.register_comm_hook(failure.hook, ina_hook)
    elif args.comm == "gloo":
        model.register_comm_hook(None, gloo_hook(timeline))
    return model, None


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               args: argparse.Namespace, timeline: Timeline, calls: "TensorWorker | NodeReducer | None",
               step_gradients: Callable[[], None] | None) -> torch.Tensor:
    """One batch: forward, backward (the gradients summed), the optimizer's step; the loss."""
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=not args.bucket_view)
    timeline.start_backward()
    if calls is not None:
        calls.timings = []
    loss.backward()  # DDP: buckets go out as they fill; waits for them all at the end
    if step_gradients is not None:
        step_gradients()
    if calls is not None:
        timeline.buckets += [BucketTimes(timeline.step, i, **t) for i, t in enumerate(calls.timings)]
        calls.timings = None
    optimizer.step()
    return loss

class Failure:
    """Where the worker's own error is kept when an allreduce failed: DDP and Work.wait() raise only its text."""

    def __init__(self, comm: str) -> None:
        self.comm = comm
        self.hook: InaHookState | None = None

    def error(self) -> BaseException | None:
        if self.hook is not None:
            return self.hook.failure
        if self.comm == "ina-backend":
            return dist.group.WORLD.failure
        return None


def print_setup(rank: int, setup_wall: float, setup_started: float, initialised: float, timeline: Timeline) -> None:
    """How long a job takes to start: init_process_group alone, and until the first allreduce began (the
    first step's data, forward and backward up to its first bucket included); from the timeline, so the
    first step is timed as any other.  Every rank, with the wall clock: init_process_group waits for the
    last rank to arrive, so a launcher takes the set-up from the latest ``entered``."""
    started = [b.started for b in timeline.buckets if b.started == b.started] or \
        [b.ready for b in timeline.buckets]  # NaN != NaN: a bucket whose start was not recorded
    first = min(started) - setup_started if started else None
    print(json.dumps({"setup": {"rank": rank, "entered": setup_wall,
                                "init_process_group_seconds": initialised - setup_started,
                                "first_allreduce_seconds": first}}), flush=True)


def average_gradients(model: nn.Module, world: int) -> None:
    """What a plain training loop does instead of DDP: every gradient's sum, all in flight at once."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    works = [dist.all_reduce(g, async_op=True) for g in grads]
    for g, work in zip(grads, works):
        work.wait()
        g.div_(world)


def write_timeline(path: str, timeline: Timeline, args: argparse.Namespace, rank: int,
                   cpu_per_step: list[float]) -> None:
    steps = sorted({b.step for b in timeline.buckets})
    shares = [hidden_share(timeline, s) for s in steps[1:]]  # the first step builds DDP's buckets
    Path(path.replace("{rank}", str(rank))).write_text(json.dumps({
        "comm": args.comm, "plain": args.plain, "model": args.model, "rank": rank,
        "bucket_cap_mb": args.bucket_cap_mb,
        "backward_started": {str(s): t for s, t in timeline.backward_started.items()},
        "buckets": [vars(b) for b in timeline.buckets],
        "comm_seconds": [s[0] for s in shares], "hidden_share": [s[1] for s in shares],
        "cpu_seconds_per_step": cpu_per_step}))


if __name__ == "__main__":
    sys.exit(main())
