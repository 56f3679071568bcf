#!/usr/bin/env bash
# The main job from a fresh clone: set up .venv, export MobileNetV2 to mv2.pte, verify it by
# running it against eager PyTorch, and print the file's summary.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/tools/setup_venv.sh"
PY=${VENV:-$ROOT/.venv}/bin/python
OUT=${1:-mv2.pte}
"$PY" -m executorch.exir export "$ROOT/examples/models/mobilenet_v2.py:make_mobilenet_v2" -o "$OUT"
"$PY" -m executorch.exir inspect "$OUT"
