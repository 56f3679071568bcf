#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment and install the project into it.
#   bash tools/setup_venv.sh        -> .venv with the torch of requirements-torch.txt, dev tools, the project editable
# Env: VENV (default .venv), PYTHON (default python3), EXECUTORCH_BUILD_MINIMAL=1 for the
# export-only install (no C++ build), TORCH_INDEX_URL (the index torch comes from, e.g. PyTorch's
# CPU wheel index; unset, pip's own configuration decides, as for every other package).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
say() { echo "  setup: $*"; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
pip_quiet() { "$VENV/bin/python" -m pip install -q "$@" 2>&1 | grep -v '^WARNING: Location' || true; }
# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build.
TORCH_INDEX=()
[ -z "${TORCH_INDEX_URL:-}" ] || TORCH_INDEX=(--index-url "$TORCH_INDEX_URL")
say "$(grep -m1 '^torch==' "$ROOT/requirements-torch.txt")${TORCH_INDEX_URL:+ from $TORCH_INDEX_URL}"
pip_quiet -r "$ROOT/requirements-torch.txt" "${TORCH_INDEX[@]}"
say "dev tools (requirements-dev.txt, requirements-dev-nodeps.txt)"
pip_quiet -r "$ROOT/requirements-dev.txt"
pip_quiet --no-deps -r "$ROOT/requirements-dev-nodeps.txt"
say "this project, editable"
"$VENV/bin/python" -m pip install -q --no-build-isolation -e "$ROOT" 2>&1 | grep -v '^WARNING: Location' || true
# torch warns at import when NumPy is absent; nothing here needs NumPy.
"$VENV/bin/python" -c "import warnings; warnings.filterwarnings('ignore', 'Failed to initialize NumPy')
import executorch.exir, torch; print('  setup: ready, torch', torch.__version__)"
