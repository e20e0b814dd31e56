"""The controller's state file and its jobs' spec files: what survives a restart, read and written in one
place.  The state object is replaced when another process wrote the file (``reload``), so whoever needs it
asks the store each time rather than keeping it."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from controller import programs
from controller.job_plan import JobError
from controller.network import Network
from controller.pipeline import PipelineOptions
from controller.state import ControllerState, JobRecord
from worker.jobspec import JobSpec


class JobExists(JobError):
    """The name is taken by a live job."""


class NoSuchJob(JobError):
    """No live job has that name."""


def fastest(options: PipelineOptions, network: Network) -> PipelineOptions:
    """``options`` with the values per packet fixed: where unset, the most every switch's program takes."""
    if options.values is not None:
        return options
    most = min((programs.by_arch(access.arch).max_values for access in network.access.values()),
               default=programs.V1MODEL.max_values)
    return dataclasses.replace(options, values=most)


class StateStore:
    def __init__(self, network: Network, path: Path | None, options: PipelineOptions | None,
                 spec_dir: Path | None) -> None:
        """Load the state file at ``path`` (None: in memory only), or start one with ``options``; a file made
        with other options is refused (JobError).  ``spec_dir``: where jobs' specs go (default: ``jobs``
        beside the state file)."""
        self.path = path
        options = None if options is None else fastest(options, network)
        if path is not None and path.exists():
            self.state = ControllerState.load(path)
            if options is not None and options != self.state.options:
                raise JobError(f"{path} was made with {self.state.options}, not {options}")
        else:
            self.state = ControllerState(options or fastest(PipelineOptions(), network))
        self.spec_dir = spec_dir or (path.parent / "jobs" if path else None)
        self._mtime = path.stat().st_mtime_ns if path is not None and path.exists() else 0

    def save(self) -> None:
        if self.path is not None:
            self.state.save(self.path)
            self._mtime = self.path.stat().st_mtime_ns

    def reload(self, lock: threading.RLock) -> None:
        """Follow the file when another process (``ina-ctl job create/delete``) wrote it; the new state object
        replaces the old under ``lock``."""
        if self.path is None or not self.path.exists():
            return
        mtime = self.path.stat().st_mtime_ns
        if mtime != self._mtime:
            with lock:
                self.state, self._mtime = ControllerState.load(self.path), mtime

    def job(self, name: str) -> JobRecord:
        try:
            return self.state.jobs[name]
        except KeyError:
            raise NoSuchJob(f"no job named {name!r} (jobs: {sorted(self.state.jobs)})") from None

    def check_name(self, name: str) -> None:
        """A new job's name: JobError when it is not one, JobExists when a live job has it."""
        if not name or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
            raise JobError(f"job name {name!r}: use letters, digits, '-' and '_'")
        if name in self.state.jobs:
            raise JobExists(f"job {name} exists already")

    def save_spec(self, spec: JobSpec) -> None:
        if self.spec_dir is not None:
            spec.save(self.spec_dir / f"{spec.name}.json")

    def remove_spec(self, name: str) -> None:
        if self.spec_dir is not None:
            (self.spec_dir / f"{name}.json").unlink(missing_ok=True)
