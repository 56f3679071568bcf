#!/usr/bin/env bash
# The main job from a fresh clone: set up .venv, export MobileNetV2 to mv2.pte, run it on
# executorch.runtime against eager PyTorch, print the file's summary and a last OK or FAIL line.
#   bash tools/quickstart.sh [OUT.pte]      (env: VENV, TORCH_INDEX_URL as for tools/setup_venv.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${VENV:-$ROOT/.venv}/bin/python
OUT=${1:-mv2.pte}
echo "[1/2] setting up ${VENV:-.venv} ($(grep -m1 '^torch==' "$ROOT/requirements-torch.txt"), dev tools, this project; a minute or two the first time)"
bash "$ROOT/tools/setup_venv.sh"
echo "[2/2] exporting MobileNetV2 to $OUT, then running it on executorch.runtime against eager PyTorch"
"$PY" -m executorch.exir export "$ROOT/examples/models/mobilenet_v2.py:make_mobilenet_v2" -o "$OUT"
