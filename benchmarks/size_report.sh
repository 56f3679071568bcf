#!/bin/sh
# Prints the size of the runtime libraries in a build tree: archive code+data, and the
# stripped bytes the whole runtime adds to a program linked with --gc-sections; then, when
# executor_runner is built, its stripped size and what each registered kernel adds to it.
#   benchmarks/size_report.sh BUILD_DIR      (or: cmake --build BUILD_DIR --target size_report)
set -eu
build=${1:?usage: size_report.sh BUILD_DIR}
strip=${STRIP:-strip}
[ -n "$strip" ] || strip=strip
printf '%-28s %12s\n' "library" "text+data"
for lib in "$build"/libexecutorch_core.a "$build"/libexecutorch.a "$build"/kernels/cpu/libkernels_cpu.a; do
  [ -f "$lib" ] || continue
  bytes=$(size -t "$lib" | awk 'END { print $1 + $2 }')
  printf '%-28s %12s\n' "$(basename "$lib")" "$bytes"
done
objs=$(find "$build/kernels/portable/CMakeFiles/portable_kernels.dir" -name '*.o' 2>/dev/null | sort)
if [ -n "$objs" ]; then
  # portable_kernels is an OBJECT library: its size is that of its objects, one per source.
  # shellcheck disable=SC2086
  printf '%-28s %12s\n' "portable_kernels (objects)" "$(size -t $objs | awk 'END { print $1 + $2 }')"
fi
runner="$build/examples/executor_runner/executor_runner"
regs="$build/kernels/portable/portable_kernels/portable_registrations"
if [ -f "$runner" ] && [ -d "$regs" ]; then
  cp "$runner" "$runner.stripped"
  "$strip" --strip-all "$runner.stripped"
  echo "executor_runner, stripped: $(wc -c < "$runner.stripped") bytes, $(cat "$regs"/*.inc | grep -c '^ET_REGISTER_KERNEL') registered kernels"
  echo "per registered kernel: code named after it in executor_runner (the kernel and the"
  echo "templates/lambdas it instantiates; shared helpers are counted once, in no kernel):"
  printf '  %-48s %-28s %8s\n' "operator" "kernel" "bytes"
  nm -C -S "$runner" | awk '$3 ~ /^[tTwW]$/' > "$runner.syms"
  sed -n 's/^ET_REGISTER_KERNEL("\([^"]*\)", \([^<)]*\).*/\1 \2/p' "$regs"/*.inc | sort |
    while read -r op kernel; do
      bytes=0
      for hex in $(grep -F "::$kernel(executorch::runtime::KernelRuntimeContext&" "$runner.syms" | cut -d' ' -f2); do
        bytes=$((bytes + 0x$hex))
      done
      printf '  %-48s %-28s %8s\n' "$op" "$kernel" "$bytes"
    done
  rm -f "$runner.syms"
fi
for probe in size_probe size_probe_empty; do
  [ -f "$build/benchmarks/$probe" ] || { echo "($probe not built)"; exit 0; }
  cp "$build/benchmarks/$probe" "$build/benchmarks/$probe.stripped"
  "$strip" --strip-all "$build/benchmarks/$probe.stripped"
done
full=$(wc -c < "$build/benchmarks/size_probe.stripped")
empty=$(wc -c < "$build/benchmarks/size_probe_empty.stripped")
echo "runtime in a stripped --gc-sections program (load+method+execute, no kernels): $((full - empty)) bytes"
echo "  (size_probe $full bytes - empty program $empty bytes)"
sdk="$build/tools/cmake/sdk/lib"
if [ -d "$sdk" ]; then
  # The C++ SDK's shared libraries keep the whole public API (nothing is collected away), so they
  # are larger than the probe above, which keeps only what one program calls.
  echo "C++ SDK shared libraries, stripped:"
  for lib in "$sdk"/*.so; do
    cp "$lib" "$lib.stripped"
    "$strip" --strip-all "$lib.stripped"
    printf '  %-26s %8s bytes\n' "$(basename "$lib")" "$(wc -c < "$lib.stripped")"
    rm -f "$lib.stripped"
  done
fi
