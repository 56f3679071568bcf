#!/bin/sh
# Prints the size of the runtime libraries in a build tree: archive code+data, and the
# stripped bytes the whole runtime adds to a program linked with --gc-sections.
#   benchmarks/size_report.sh BUILD_DIR      (or: cmake --build BUILD_DIR --target size_report)
set -eu
build=${1:?usage: size_report.sh BUILD_DIR}
strip=${STRIP:-strip}
[ -n "$strip" ] || strip=strip
printf '%-28s %12s\n' "library" "text+data"
for lib in "$build"/libexecutorch_core.a "$build"/libexecutorch.a "$build"/kernels/portable/libportable_kernels_cpu.a; do
  [ -f "$lib" ] || continue
  bytes=$(size -t "$lib" | awk 'END { print $1 + $2 }')
  printf '%-28s %12s\n' "$(basename "$lib")" "$bytes"
done
for probe in size_probe size_probe_empty; do
  [ -f "$build/benchmarks/$probe" ] || { echo "($probe not built)"; exit 0; }
  cp "$build/benchmarks/$probe" "$build/benchmarks/$probe.stripped"
  "$strip" --strip-all "$build/benchmarks/$probe.stripped"
done
full=$(wc -c < "$build/benchmarks/size_probe.stripped")
empty=$(wc -c < "$build/benchmarks/size_probe_empty.stripped")
echo "runtime in a stripped --gc-sections program (load+method+execute, no kernels): $((full - empty)) bytes"
echo "  (size_probe $full bytes - empty program $empty bytes)"
