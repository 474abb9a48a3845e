# Create or refresh the project's virtual environment at .venv from uv.lock.
# Sourced by the other scripts: `source scripts/env.sh [uv sync options]`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
  || { echo "error: Python 3.11 or newer is required (set PYTHON=...)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $("$PYTHON" --version)" >&2
  "$PYTHON" -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
  echo "==> installing uv into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check 'uv>=0.9,<1'
fi
echo "==> syncing .venv with uv.lock" >&2
export UV_PYTHON_DOWNLOADS=never
# Bytecode compiled once here: otherwise every process the server, its executors and the
# tests start compiles its imports again wherever bytecode is not written (read-only trees,
# PYTHONDONTWRITEBYTECODE), seconds per process for the orchestrators.
.venv/bin/uv sync --locked --python .venv/bin/python --compile-bytecode "$@"
.venv/bin/python -m compileall -q -j 0 armada_core server integrations
