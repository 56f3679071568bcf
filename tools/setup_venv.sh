#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment and install the project into it.
#   bash tools/setup_venv.sh        -> .venv with torch 2.13.0 (CPU), dev tools, the project editable
# Env: VENV (default .venv), PYTHON (default python3), EXECUTORCH_BUILD_MINIMAL=1 for the
# export-only install (no C++ build).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip_quiet() { "$VENV/bin/python" -m pip install -q "$@" 2>&1 | grep -v '^WARNING: Location' || true; }
# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build.
pip_quiet torch==2.13.0
pip_quiet -r "$ROOT/requirements-dev.txt"
"$VENV/bin/python" -m pip install -q --no-build-isolation -e "$ROOT" 2>&1 | grep -v '^WARNING: Location' || true
"$VENV/bin/python" -c "import executorch.exir, torch; print('ready:', torch.__version__)"
