#!/usr/bin/env bash
# Create or refresh .venv with every dependency, lint, type-check, and run the whole test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"` or `scripts/test.sh -x`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" --all-packages --all-extras
echo "==> ruff check" >&2
.venv/bin/ruff check .
echo "==> ruff format --check" >&2
.venv/bin/ruff format --check .
"$(dirname "${BASH_SOURCE[0]}")/install-browser.sh"
echo "==> pytest" >&2
exec .venv/bin/python -m pytest "$@"
