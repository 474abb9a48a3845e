"""A pod's sandbox: the directory standing in for the filesystems Kubernetes would give it.

    <root>/<pod name>/<run id>/
        work/                      default working directory; relative workingDirs go here
        tmp/                       TMPDIR
        logs/<container>.log       timestamped output (logs.py)
        termination/<container>    each container's termination-message file

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
        raise ValueError(f"{kind} {value!r} is not usable as a file name (letters, digits, "
                         "'.', '_' and '-', not starting with a punctuation mark)")


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

    def create(self, containers: Iterable[str]) -> None:
        """Make the directories and an empty, writable termination-message file per container.

        A sandbox left by an earlier start of the same run is reused: messages start empty
        again, logs are appended to.
        """
        for directory in (self.work_dir, self.tmp_dir, self.path / "logs",
                          self.path / "termination"):
            directory.mkdir(parents=True, exist_ok=True)
        for name in containers:
            self.message_path(name).write_bytes(b"")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
