"""worker/tp: tensor-parallel GPT on gloo, TP = 2, 3 and 4, each degree's ranks run once.

Each rank (tests/tp_rank.py) runs every check and reports; these tests read the reports:
(1) Domino's schedule gives sync's outputs and gradients, and both the single-process model's,
over an uneven batch; also through a comm that fills a tensor with NaN until its allreduce is
waited, so a read before the wait shows. (2) The trace of a Domino step: each allreduce starts
before the computation it hides behind and is waited after it, forward and backward. (3) Bad
set-ups are refused with a clear error on every rank.
"""

import os
import sys

import pytest

pytest.importorskip("torch")

from tests.conftest import free_port, free_ports  # noqa: E402
from tests.loopback_net import LoopbackNet  # noqa: E402
from tests.rank_procs import json_lines, run_ranks  # noqa: E402

DEGREES = (2, 3, 4)
TOLERANCE = 1e-6  # relative to each tensor's largest element: float32 summed in another order
MICRO_BATCHES = (1, 2, 3, 5)  # of a batch of 5


@pytest.fixture(scope="module")
def reports() -> dict[int, list[dict]]:
    """Every rank's report, by TP degree; all degrees' ranks run at once."""
    commands, ports = [], dict(zip(DEGREES, free_ports(len(DEGREES))))
    for p in DEGREES:
        commands += [[sys.executable, "-m", "tests.tp_rank", str(r), str(p), str(ports[p])] for r in range(p)]
    results = run_ranks(commands, [dict(os.environ)] * len(commands), timeout=120)
    assert all(code == 0 for code, _, _ in results), [err[-2000:] for code, _, err in results if code]
    by_degree: dict[int, list[dict]] = {p: [] for p in DEGREES}
    for _, stdout, _ in results:
        (report,) = json_lines(stdout)
        by_degree[report["world"]].append(report)
    return by_degree


@pytest.mark.parametrize("comm", ["gloo", "poisoned"])
@pytest.mark.parametrize("degree", DEGREES)
def test_domino_equals_sync_and_the_single_process_model(reports, degree, comm):
    for report in reports[degree]:
        errors = report[comm]
        assert errors.pop("left in flight") == 0
        assert set(errors) == {"sync vs reference"} | {f"domino m={m} vs {w}" for m in MICRO_BATCHES
                                                       for w in ("sync", "reference")}
        assert all(e <= TOLERANCE for e in errors.values()), (report["rank"], errors)


def _events(trace: list) -> list[tuple[str, tuple]]:
    return [(event, tuple(key)) for event, key in trace]


def _between(events: list[tuple[str, tuple]], kind: str, key: tuple, what: str) -> set[tuple]:
    """Keys of the ``what`` events after ``key``'s start and before its wait."""
    start, wait = events.index(("start", (kind, *key))), events.index(("wait", (kind, *key)))
    assert start < wait
    return {k[1:] for e, k in events[start + 1:wait] if e == what}


@pytest.mark.parametrize("degree", DEGREES)
def test_allreduces_run_behind_the_other_micro_batches_computation(reports, degree):
    for report in reports[degree]:
        for m, trace in report["traces"].items():
            events, m = _events(trace), int(m)
            units = [(n, i) for n in range(4) for i in range(m)]  # 2 layers × (attention, MLP)
            first_backward = next(j for j, (e, _) in enumerate(events) if e == "row-backward")
            forward = [(e, k) for e, k in events[:first_backward] if e in ("start", "wait")]
            assert sorted(forward) == sorted([(e, ("reduce", *u)) for u in units for e in ("start", "wait")])
            for k, unit in enumerate(units):
                # forward: started after its row GEMM, waited after the next m-1 units' column GEMMs
                assert _between(events, "reduce", unit, "column") == set(units[k + 1:k + m])
                # backward: the input gradient's allreduce starts before the weight-gradient GEMM,
                # and is waited after it and after the previous unit's row GEMM backward
                assert _between(events, "dgrad", unit, "wgrad") == {unit}
                assert _between(events, "dgrad", unit, "row-backward") == set(units[max(k - 1, 0):k])


@pytest.mark.parametrize("degree", DEGREES)
def test_bad_set_ups_are_refused_on_every_rank(reports, degree):
    expected = {
        "hidden": f"the hidden size 49 is not divisible by the TP degree {degree}",
        "heads": f"the head count 1 is not divisible by the TP degree {degree}",
        "mlp": f"the mlp width 193 is not divisible by the TP degree {degree}",
        "disagree": "the ranks disagree on the layout: mlp ",
        "micro_batches 0": "micro_batches must be 1..batch (5), not 0",
        "micro_batches > batch": "micro_batches must be 1..batch (5), not 6",
        "schedule": "schedule must be one of ('sync', 'domino'), not 'bogus'",
    }
    assert len(reports[degree]) == degree
    for report in reports[degree]:
        said = report["refused"]
        assert set(said) == set(expected)
        for case, words in expected.items():
            assert said[case] is not None and words in said[case], (case, said[case])
        assert report["no comm shape"] == [5, 6, 48]


def test_tp_groups_through_the_switches_equal_the_reference(tmp_path):
    """World 4 on gloo, two TP groups of 2 made with ``new_group(backend="ina")``, each a job of its own on
    the switch (ina.p4 on the built-in target, loopback): every schedule against the single-process model
    within the float tolerance (the switches' sums err by at most N * 2**(b - 31) of a chunk's largest
    value, worker/quantize.py: far below float32's own rounding)."""
    with LoopbackNet(4, tmp_path) as net:
        specs = []
        for g, members in enumerate((["h1", "h2"], ["h3", "h4"])):
            specs.append(tmp_path / f"tp{g}.json")
            net.controller.create_job(f"tp{g}", members, 32, mode="ina").save(specs[-1])
        port = free_port()
        # INA_RANK is each rank's in the world, not in its group: the group's join must not check it
        envs = [dict(os.environ, INA_TP_SPECS=",".join(map(str, specs)), INA_RANK=str(r)) for r in range(4)]
        results = run_ranks([[sys.executable, "-m", "tests.tp_rank", str(r), "4", str(port), "ina"] for r in range(4)],
                            envs, timeout=120)
    assert all(code == 0 for code, _, _ in results), [err[-2000:] for code, _, err in results if code]
    for _, stdout, _ in results:
        (report,) = json_lines(stdout)
        assert report["job"] == f"tp{report['rank'] // 2}"
        errors = report["ina"]
        assert errors.pop("left in flight") == 0
        assert len(errors) == 1 + 2 * len(MICRO_BATCHES)
        assert all(e <= TOLERANCE for e in errors.values()), (report["rank"], errors)
        assert report["packets"] >= 8 + 8 * sum(MICRO_BATCHES)  # a packet at least for each of the 96 allreduces
