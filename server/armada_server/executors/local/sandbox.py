"""A pod's sandbox: the directory standing in for the filesystems Kubernetes would give it.

    <root>/<pod name>/<run id>/
        work/                      default working directory; relative workingDirs go here
        tmp/                       TMPDIR
        logs/<container>.log       timestamped output (logs.py)
        termination/<container>    each container's termination-message file
        state/<container>.*        what each container's shim records (shim.py): its claim,
                                   the command's pid, how it ended
        lease.pb                   the lease, so that a restarted executor can adopt the run
        started                    when the pod started (wall-clock seconds), for deadlines
        final.json                 the pod's outcome, once it has ended
        reported                   the outcome reached the server: nothing left to adopt

The location depends only on the pod name and run id, so logs stay readable after the pod has
finished, and after the server restarts, until the caller removes the sandbox.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def check_component(kind: str, value: str) -> None:
    """Refuse names that could escape the sandbox root or be unusable as file names."""
    if not _COMPONENT.match(value):
        raise ValueError(
            f"{kind} {value!r} is not usable as a file name (letters, digits, "
            "'.', '_' and '-', not starting with a punctuation mark)"
        )


@dataclass(frozen=True)
class Sandbox:
    """Paths inside one run's sandbox."""

    path: Path

    @classmethod
    def locate(cls, root: Path | str, pod_name: str, run_id: str) -> Sandbox:
        check_component("pod name", pod_name)
        check_component("run id", run_id)
        return cls(Path(root).absolute() / pod_name / run_id)

    @property
    def work_dir(self) -> Path:
        return self.path / "work"

    @property
    def tmp_dir(self) -> Path:
        return self.path / "tmp"

    def log_path(self, container: str) -> Path:
        return self.path / "logs" / f"{container}.log"

    def message_path(self, container: str) -> Path:
        return self.path / "termination" / container

    def state_path(self, container: str) -> Path:
        """The stem of a container's state files (`<stem>.claim`, `.pid`, `.exit`, ...)."""
        return self.path / "state" / container

    @property
    def lease_path(self) -> Path:
        return self.path / "lease.pb"

    @property
    def started_path(self) -> Path:
        return self.path / "started"

    @property
    def final_path(self) -> Path:
        return self.path / "final.json"

    @property
    def reported_path(self) -> Path:
        return self.path / "reported"

    def create(self, containers: Iterable[str], *, resume: bool = False) -> None:
        """Make the directories and an empty, writable termination-message file per container.

        A sandbox left by an earlier start of the same run is reused: messages start empty
        again (unless `resume`: an adopted pod's containers may have written theirs), logs
        are appended to.
        """
        if not resume:  # a new start: what an earlier one recorded no longer applies
            shutil.rmtree(self.path / "state", ignore_errors=True)
            for path in (self.final_path, self.reported_path):
                path.unlink(missing_ok=True)
        for directory in (
            self.work_dir,
            self.tmp_dir,
            self.path / "logs",
            self.path / "termination",
            self.path / "state",
        ):
            directory.mkdir(parents=True, exist_ok=True)
        for name in containers:
            path = self.message_path(name)
            if not (resume and path.exists()):
                path.write_bytes(b"")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
