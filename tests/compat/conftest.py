"""A throwaway environment holding the official `armada-client`, shared by the session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

OFFICIAL_CLIENT = "armada-client>=0.5.1,<0.6"
OFFICIAL_SIDE = Path(__file__).with_name("official_side.py")


def _make_env(where: Path) -> Path:
    """Create a virtual environment with the official client; uv when available (fast)."""
    python = where / "bin" / "python"
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(where)], check=True)
        subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(python), OFFICIAL_CLIENT], check=True
        )
    else:
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", OFFICIAL_CLIENT], check=True)
    return python


@pytest.fixture(scope="session")
def official_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_env(tmp_path_factory.mktemp("official-client") / "venv")


@pytest.fixture(scope="session")
def official(official_python: Path) -> Callable[[dict[str, Any]], Any]:
    """Run one request through the official client's side and return its JSON answer."""

    def call(request: dict[str, Any]) -> Any:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = subprocess.run(
            [str(official_python), str(OFFICIAL_SIDE)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"official side failed:\n{done.stderr}")
        return json.loads(done.stdout)

    return call
