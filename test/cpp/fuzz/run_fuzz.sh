#!/bin/sh
# Fuzzes program loading and execution for a bounded time, seeded with the small
# fixture programs, and saves any crasher as a regression file in test/fixtures/malformed/.
#   test/cpp/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]
# BUILD_DIR is configured with clang and -DEXECUTORCH_BUILD_FUZZERS=ON if it does not exist.
set -eu
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${2:-$root/cmake-out/fuzz}
python=${PYTHON:-python3}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython3_EXECUTABLE="$(command -v "$python")" -DEXECUTORCH_BUILD_FUZZERS=ON >/dev/null
fi
cmake --build "$build" --target fuzz_program -j 2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/crashes"
cp "$root"/test/fixtures/native/*.pte "$work/corpus/"
printf '"ET12"\n"eh00"\n' > "$work/dict"

status=0
"$build/test/cpp/fuzz/fuzz_program" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict="$work/dict" -artifact_prefix="$work/crashes/" -print_final_stats=1 "$work/corpus" \
  2>"$work/log" || status=$?
grep -E "stat::number_of_executed_units|cov:" "$work/log" | tail -2

found=0
for f in "$work"/crashes/*; do
  [ -f "$f" ] || continue
  name="fuzz-$(sha1sum "$f" | cut -c1-12).pte"
  cp "$f" "$root/test/fixtures/malformed/$name"
  echo "saved crasher test/fixtures/malformed/$name"
  found=$((found + 1))
done
if [ "$found" -gt 0 ] || [ "$status" -ne 0 ]; then
  tail -40 "$work/log"
  exit 1
fi
echo "no crashes in ${seconds}s"
