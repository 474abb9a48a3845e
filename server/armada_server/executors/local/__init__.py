"""The local executor's pod runtime: one pod as local processes on a virtual node.

`LocalPodRunner.start` runs a pod's containers as process groups in a per-run sandbox and
returns a `PodHandle`, which reports pending, running and a final `PodStatus` (succeeded,
failed or killed, with per-container results) and can be terminated gracefully. Logs are read
back with `read_logs`; `ignored_fields` names what a pod spec asks for that is not honoured.
Stdlib and asyncio only: no root, no cgroups, no container images.
"""

from .logs import LogLine, format_timestamp, read_logs
from .plan import UnrunnablePod
from .pod import PodHandle
from .runner import LocalPodRunner
from .status import PodPhase, PodStatus
from .support import ignored_fields

__all__ = [
    "LocalPodRunner",
    "LogLine",
    "PodHandle",
    "PodPhase",
    "PodStatus",
    "UnrunnablePod",
    "format_timestamp",
    "ignored_fields",
    "read_logs",
]
