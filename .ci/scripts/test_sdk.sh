#!/usr/bin/env bash
# The full wheel's C++ SDK, used as a C++ developer and a backend vendor would, with no source
# tree on any include or link path:
#   - examples/cpp configured with the README's commands against the installed wheel, run on
#     MobileNetV2 from our exporter and from the published one (test/test_sdk.py, which also
#     checks the layout, exported symbols, RPATHs, static linking and component errors);
#   - examples/cpp/docs_app built exactly as ExecuTorch's C++ docs write it (find_package(executorch)
#     with no components, ${EXECUTORCH_LIBRARIES}, CMAKE_PREFIX_PATH at executorch/share/cmake);
#   - the vendor backend (test/vendor_npu) exporting through the MINIMAL wheel in a clean venv,
#     its C++ backend built with find_package(executorch), run natively and compared with eager.
# Usage: test_sdk.sh FULL_PYTHON SDIST
#   FULL_PYTHON: python of a venv holding the full wheel, torch and pytest
#   SDIST: the executorch sdist the minimal wheel is built from
# Env: PYTHON (makes venvs; has cmake and ninja beside it), TORCH_SPEC (default: the pin in requirements-torch.txt),
# ET_REFERENCE_PYTHON (also the published exporter's MobileNetV2).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FULL_PY=${1:?usage: test_sdk.sh FULL_PYTHON SDIST}
SDIST=${2:?usage: test_sdk.sh FULL_PYTHON SDIST}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-$(grep -m1 '^torch==' "$ROOT/requirements-torch.txt")}
PATH="$(dirname "$PYTHON"):$PATH"  # cmake and ninja
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sdk-ci.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== %s (at %ss)\n' "$*" "$SECONDS"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "SDK prefix of the installed full wheel"
PREFIX=$(cd "$WORK" && "$FULL_PY" -m executorch.sdk --cmake-prefix-path) || fail "python -m executorch.sdk"
echo "$PREFIX"

step "examples/cpp with the README's commands, run on a delegated program (ExecutorBackend)"
cmake -S "$ROOT/examples/cpp" -B "$WORK/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/example-configure.log" || { cat "$WORK/example-configure.log"; fail "configure"; }
cmake --build "$WORK/example" >/dev/null || fail "build"
"$WORK/example/run_pte" "$ROOT/test/fixtures/native/delegate_executor.pte" | tee "$WORK/run.txt" || fail "run_pte"
grep -q "output 0: float32 \[2, 3\]" "$WORK/run.txt" || fail "run_pte printed no [2, 3] output"

step "examples/cpp/docs_app exactly as ExecuTorch's docs build it (find_package(executorch), \${EXECUTORCH_LIBRARIES}, Module + from_blob)"
mkdir -p "$WORK/docs_app"
cp "$ROOT/examples/cpp/docs_app/CMakeLists.txt" "$ROOT/examples/cpp/docs_app/main.cpp" "$ROOT/examples/cpp/docs_app/export.py" "$WORK/docs_app/"
(cd "$WORK/docs_app" && "$FULL_PY" export.py) || fail "docs_app: export.py"
(cd "$WORK/docs_app" \
  && cmake -S . -B build -DCMAKE_PREFIX_PATH="$("$FULL_PY" -c 'import executorch, pathlib; print(pathlib.Path(executorch.__path__[0]) / "share" / "cmake")')" \
     >configure.log \
  && cmake --build build >build.log) || { cat "$WORK/docs_app/configure.log" "$WORK/docs_app/build.log" 2>/dev/null; fail "docs_app: configure/build"; }
(cd "$WORK/docs_app" && ./build/app) | tee "$WORK/docs_app/out.txt" || fail "docs_app: run"
[[ "$(xargs <"$WORK/docs_app/out.txt")" == "11 22 33 44" ]] || fail "docs_app printed $(cat "$WORK/docs_app/out.txt"), expected 11 22 33 44"

step "SDK tests against the installed wheel (MobileNetV2 matched to eager, both exporters)"
cd "$ROOT"
ET_SDK_PREFIX="$PREFIX" "$FULL_PY" -m pytest -q -p no:cacheprovider test/test_sdk.py

step "vendor backend: export through the minimal wheel (clean venv), run on the SDK natively"
EXECUTORCH_BUILD_MINIMAL=1 "$PYTHON" -m pip wheel "$SDIST" --no-deps -q -w "$WORK/minimal" || fail "minimal wheel from the sdist"
"$PYTHON" -m venv "$WORK/minvenv"
MPY="$WORK/minvenv/bin/python"
"$MPY" -m pip install -q "$TORCH_SPEC" 2>&1 | grep -v '^WARNING: Location' || true
"$MPY" -m pip install -q "$WORK"/minimal/executorch-*.whl 2>&1 | grep -v '^WARNING: Location' || true
if "$MPY" -c "import executorch.extension.pybindings._portable_lib" 2>/dev/null; then
  fail "the minimal venv has a native runtime; it must export with the pure-Python wheel only"
fi
IN=$(cd "$WORK" && PYTHONPATH="$ROOT/test/vendor_npu" "$MPY" -m vendor_npu.native_check export "$WORK/npu") \
  || fail "vendor export through the minimal wheel"
cmake -S "$ROOT/test/vendor_npu/cpp" -B "$WORK/vendor" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/vendor-configure.log" || { cat "$WORK/vendor-configure.log"; fail "vendor configure"; }
cmake --build "$WORK/vendor" >/dev/null || fail "vendor build"
# shellcheck disable=SC2086
"$WORK/vendor/vendor_npu_runner" "$WORK/npu/npu.pte" $IN --out "$WORK/npu/out" || fail "vendor runner"
(cd "$WORK" && PYTHONPATH="$ROOT/test/vendor_npu" "$MPY" -m vendor_npu.native_check compare "$WORK/npu") \
  || fail "the vendor backend's native outputs differ from eager"

step "SDK: OK"
