#!/usr/bin/env bash
# Set up .venv (tools/setup_venv.sh) and run the whole test suite; extra args go to pytest.
# Set ET_REFERENCE_PYTHON (see ../shared/tools/reference-runtime) to also check every export
# against the published ExecuTorch runtime.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/tools/setup_venv.sh"
cd "$ROOT"
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest "$@"
