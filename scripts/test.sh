#!/usr/bin/env bash
# Create or refresh .venv with every dependency, lint, type-check, and run the whole test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"`, `scripts/test.sh -x` or
# `scripts/test.sh -n 0 tests/jobs` (one process instead of a worker per core).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" --all-packages --all-extras
echo "==> ruff check" >&2
.venv/bin/ruff check .
echo "==> ruff format --check" >&2
.venv/bin/ruff format --check .
"$(dirname "${BASH_SOURCE[0]}")/install-browser.sh"
echo "==> pytest" >&2
# A pytest-xdist worker per core (at most 4: beyond that the orchestrator deployments, which
# take turns on one worker, set the pace), a test module at a time each (tests/distribution.py).
exec .venv/bin/python -m pytest --numprocesses auto --maxprocesses 4 "$@"
