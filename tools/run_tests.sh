#!/usr/bin/env bash
# Set up .venv (tools/setup_venv.sh), build the native runtime when a C++ compiler is present,
# and run the whole test suite; extra args go to pytest.
# The native build lives in cmake-out/ (git-ignored) and is incremental between runs; its Python
# module is linked into extension/pybindings/, where the editable install imports it.
# Set ET_REFERENCE_PYTHON (see ../shared/tools/reference-runtime) to also check every export
# against the published ExecuTorch runtime. ET_NATIVE_BUILD=0 skips the native build.
# Test files are spread over one worker process per core (pytest-xdist, each file whole in one
# worker); ET_TEST_WORKERS=N sets the count, 1 runs everything in this process, and an explicit
# pytest -n wins.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
bash "$ROOT/tools/setup_venv.sh"
cd "$ROOT"

skipped=()
cxx=${CXX:-c++}
if [ "${ET_NATIVE_BUILD:-1}" = 0 ]; then
  skipped+=("native runtime tests: ET_NATIVE_BUILD=0")
elif ! command -v "$cxx" >/dev/null 2>&1; then
  skipped+=("native runtime tests: no C++ compiler ($cxx); install g++ or clang")
else
  build=$ROOT/cmake-out
  # cmake, ninja and flatc come from the dev venv.
  export PATH="$VENV/bin:$PATH"
  if [ ! -f "$build/build.ninja" ]; then
    echo "run_tests: building the native runtime in cmake-out/ (first run takes a few minutes)"
    mkdir -p "$build"
    cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$VENV/bin/python" \
      -DEXECUTORCH_BUILD_PYBIND=ON -DEXECUTORCH_BUILD_TESTS=ON -DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON \
      >"$build/configure.log" 2>&1 || { tail -30 "$build/configure.log"; exit 1; }
  fi
  nice cmake --build "$build" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >"$build/build.log" 2>&1 \
    || { tail -40 "$build/build.log"; exit 1; }
  module=$(find "$build/extension/pybindings" -maxdepth 1 -name '_portable_lib*.so' | head -1)
  [ -n "$module" ] || { echo "run_tests: the build made no _portable_lib module" >&2; exit 1; }
  ln -sf "$module" "$ROOT/extension/pybindings/$(basename "$module")"
fi
if [ -z "${ET_REFERENCE_PYTHON:-}" ]; then
  skipped+=("published-runtime checks: ET_REFERENCE_PYTHON is not set (see ../shared/tools/reference-runtime/README.md)")
fi
for s in "${skipped[@]+"${skipped[@]}"}"; do echo "run_tests: skipping $s"; done
workers=${ET_TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}
parallel=()
case " $* " in
  *" -n "*|*" -n="*|*" --numprocesses"*|*" -p no:xdist "*) ;;
  *) if [ "$workers" -gt 1 ]; then parallel=(-n "$workers" --dist loadfile); fi ;;
esac
exec "$VENV/bin/python" -m pytest "${parallel[@]+"${parallel[@]}"}" "$@"
