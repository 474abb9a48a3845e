"""What the benchmark scripts share: progress output, the machine's description, percentiles."""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import grpc

# The line armada-server prints once it accepts calls.
LISTENING = re.compile(r"listening on (\S+):(\d+)")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on, recorded beside them."""
    cpu = platform.processor()
    memory = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) // 1024} MiB"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "grpcio": grpc.__version__,
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]
