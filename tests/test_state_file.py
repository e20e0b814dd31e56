"""A state file the controller cannot read (cut short by a full disk, edited by hand, not JSON at all) gives one
error that names the file and what is wrong, from the loader and from `ina-ctl`, never a bare JSON message or
a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.entries import Allocation
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.plan import Tree
from controller.state import ControllerState, JobRecord, StateError, TreeRecord
from controller.topology import Topology, single
from worker.jobspec import Rail


def saved_state(path: Path) -> bytes:
    """A state with one job, saved as the controller saves it; its bytes."""
    state = ControllerState(PipelineOptions(values=64))
    state.jobs["train"] = JobRecord("train", ["h1", "h2"], 16,
                                    [TreeRecord(3, Tree("s1", ()), 100.0, 1.0, {"s1": Allocation(0, 0, 1)})])
    state.next_epoch["s1"] = 2
    state.save(path)
    return path.read_bytes()


def test_every_truncation_names_the_file(tmp_path):
    path = tmp_path / "controller-state.json"
    whole = saved_state(path)
    assert ControllerState.load(path).jobs["train"].trees[0].job_id == 3
    for cut in range(len(whole.rstrip())):
        path.write_bytes(whole[:cut])
        with pytest.raises(StateError) as e:
            ControllerState.load(path)
        assert str(e.value).startswith(f"{path}: not a controller state file"), (cut, e.value)
        assert "move it away" in str(e.value)
    path.write_bytes(b"")
    with pytest.raises(StateError, match="it is empty"):
        ControllerState.load(path)
    path.write_bytes(whole[:1])
    with pytest.raises(StateError, match=r": line 1 column 2 \(it ends there: truncated\?\)"):
        ControllerState.load(path)


@pytest.mark.parametrize("text, why", [
    (b"[1, 2]", "a JSON list, not an object"),
    (b"null", "a JSON NoneType, not an object"),
    (b"{\"format\": \"\xff\"}", "byte 12 is not UTF-8"),
    (b'{"format": 3, "jobs": {}}', "no 'options' where one was expected"),
    (b'{"format": 3, "options": {"values": 64, "colour": 1}, "jobs": {}, "next_epoch": {}}', "colour"),
    (b'{"format": 3, "options": {}, "jobs": {}, "next_epoch": {}} trailing', "Extra data: line 1 column 60"),
    (b'{"format": 99, "options": {}, "jobs": {}, "next_epoch": {}}', "state format 99 is newer"),
])
def test_a_file_that_is_not_our_state_names_itself(tmp_path, text, why):
    path = tmp_path / "state.json"
    path.write_bytes(text)
    with pytest.raises(StateError) as e:
        ControllerState.load(path)
    assert str(e.value).startswith(f"{path}: ") and why in str(e.value), e.value


def test_ina_ctl_exits_with_the_files_name(tmp_path):
    """`job list` (reads) and `watch` (runs for ever once started) both stop at once, one line each."""
    net = tmp_path / "net.json"
    Network(Topology.from_dict(single(2)), {"s1": SwitchAccess("127.0.0.1:9", 1, "builtin")}).save(net)
    state = tmp_path / "controller-state.json"
    whole = saved_state(state)
    state.write_bytes(whole[:len(whole) // 2])
    for command in (["job", "list"], ["watch"], ["job", "create", "x", "--hosts", "h1"]):
        run = subprocess.run([sys.executable, "-m", "controller.cli", "--net", str(net), *command],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 1, (command, run.stderr)
        lines = [x for x in run.stderr.splitlines() if not x.split(" ", 2)[-1].startswith("ina.")]  # log lines
        assert lines == [f"ina-ctl: {state}: not a controller state file: " + lines[0].split(": ", 3)[3]], lines
        assert "truncated?" in run.stderr and "Traceback" not in run.stderr
    assert json.loads(whole)["jobs"]["train"]["pool_size"] == 16  # the loader never rewrote the file
    assert state.read_bytes() == whole[:len(whole) // 2]


def test_a_rail_jobs_record_keeps_its_rail_and_a_plain_ones_file_is_as_before(tmp_path):
    """A rail set's job (issue 44) saves its rail, and loads it back; a plain job's record has no "rail" (so a
    file without one, an older controller's, loads as a plain job); a rail edited wrong names the job and field."""
    path = tmp_path / "controller-state.json"
    whole = json.loads(saved_state(path))
    assert "rail" not in whole["jobs"]["train"] and ControllerState.load(path).jobs["train"].rail is None
    state = ControllerState.load(path)
    state.jobs["train"].rail = Rail("big", 1, 2)
    state.save(path)
    assert json.loads(path.read_text())["jobs"]["train"]["rail"] == {"set": "big", "index": 1, "count": 2}
    assert ControllerState.load(path).jobs["train"].rail == Rail("big", 1, 2)
    edited = json.loads(path.read_text())
    edited["jobs"]["train"]["rail"]["index"] = 2
    path.write_text(json.dumps(edited))
    with pytest.raises(StateError, match=r": job train: rail.index must be an integer in 0..1, not 2; restore it"):
        ControllerState.load(path)
