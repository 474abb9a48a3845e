"""Termination messages: what a container leaves behind to explain how it ended.

Limits follow kubelet: at most 4 KiB of the message file; with FallbackToLogsOnError and an
empty file after a failure, the last 80 lines of the log, at most 2 KiB of them.
"""

from __future__ import annotations

from .logs import read_logs
from .plan import FALLBACK_TO_LOGS, ContainerPlan

MAX_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048


def termination_message(plan: ContainerPlan, exit_code: int) -> str:
    """The message the container wrote, or its log tail when its policy allows it."""
    try:
        with open(plan.message_path, "rb") as f:
            data = f.read(MAX_MESSAGE_BYTES)
    except OSError:
        data = b""
    if not data and exit_code != 0 and plan.message_policy == FALLBACK_TO_LOGS:
        lines = read_logs(plan.log_path, tail=FALLBACK_LOG_LINES)
        data = "\n".join(line.text for line in lines).encode()[-FALLBACK_LOG_BYTES:]
    return data.decode(errors="replace")
