#!/usr/bin/env bash
# Wheel figures per build mode: build time (fresh clone, pip wheel with build isolation), wheel
# size, and install footprint beyond torch in a clean venv. The minimal build runs with a PATH
# that holds no compiler and no cmake, to show it needs neither.
#
#   bash benchmarks/bench_wheel.sh [minimal] [flatc] [full]     (default: minimal flatc)
#
# Env: PYTHON (default python3), TORCH_SPEC (default: the pin in requirements-torch.txt), ET_REFERENCE_PYTHON (also
# measure the published executorch install for comparison), KEEP_WORK=1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-$(grep -m1 '^torch==' "$ROOT/requirements-torch.txt")}
MODES=("$@"); [[ ${#MODES[@]} -gt 0 ]] || MODES=(minimal flatc)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-wheel.XXXXXX")
[[ "${KEEP_WORK:-}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT

now() { date +%s.%N; }
kb() { du -sk "$1" | cut -f1; }

# A PATH with git and nothing that compiles or configures.
mkdir -p "$WORK/bare-bin"
ln -s "$(command -v git)" "$WORK/bare-bin/git"
for tool in cc c++ gcc g++ clang clang++ cmake ninja; do
  if PATH="$WORK/bare-bin" command -v "$tool" >/dev/null; then echo "bare PATH still has $tool" >&2; exit 1; fi
done

"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "$TORCH_SPEC"
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
BASE_KB=$(kb "$SITE")
"$VPY" -m pip list --format=freeze | sort >"$WORK/base.txt"

declare -a ROWS
for mode in "${MODES[@]}"; do
  case "$mode" in
    minimal) env=(EXECUTORCH_BUILD_MINIMAL=1); path="$WORK/bare-bin" ;;
    flatc) env=(EXECUTORCH_BUILD_MINIMAL=1 EXECUTORCH_MINIMAL_WITH_FLATC=1); path="$PATH" ;;
    full) env=(EXECUTORCH_BUILD_MINIMAL=0); path="$PATH" ;;
    *) echo "unknown mode $mode (use minimal, flatc, full)" >&2; exit 2 ;;
  esac
  clone="$WORK/clone-$mode"
  git clone -q "$ROOT" "$clone"
  times=()
  for run in cold warm; do
    rm -rf "$WORK/out-$mode"
    start=$(now)
    if ! (cd "$clone" && env PATH="$path" "${env[@]}" "$PYTHON" -m pip wheel . --no-deps -q -w "$WORK/out-$mode" \
          >"$WORK/build-$mode.log" 2>&1); then
      echo "$mode: build failed (last lines below)"; tail -5 "$WORK/build-$mode.log"
      ROWS+=("$(printf '%-8s %s' "$mode" 'build failed')"); continue 2
    fi
    times+=("$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.2f", a - b }')")
  done
  wheel=$(ls "$WORK/out-$mode"/*.whl)
  size_kb=$(( $(stat -c %s "$wheel") / 1024 ))
  "$VPY" -m pip install -q "$wheel"
  added=$(comm -13 "$WORK/base.txt" <("$VPY" -m pip list --format=freeze | sort) | cut -d= -f1 | xargs)
  grown=$(( $(kb "$SITE") - BASE_KB ))
  own=$(kb "$SITE/executorch")
  "$VPY" -m pip uninstall -q -y $added
  ROWS+=("$(printf '%-8s %-48s %8s KB %7.2f s %7.2f s %8s KB %8s KB  %s' "$mode" "$(basename "$wheel")" \
            "$size_kb" "${times[0]}" "${times[1]}" "$grown" "$own" "$added")")
done

echo
echo "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0])'), $(nproc) CPUs, load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch baseline: $TORCH_SPEC ($((BASE_KB / 1024)) MB site-packages); build times include pip's isolated build env"
echo "minimal builds ran with PATH=$WORK/bare-bin (git only: no cc, c++, gcc, g++, clang, cmake, ninja)"
printf '%-8s %-48s %11s %9s %9s %11s %11s  %s\n' mode wheel size "cold" "warm" "installed" "executorch" \
  "added by pip install (installed = growth of site-packages beyond torch)"
printf '%s\n' "${ROWS[@]}"
if [[ -n "${ET_REFERENCE_PYTHON:-}" ]]; then
  ref=$("$ET_REFERENCE_PYTHON" -c 'import executorch; print(list(executorch.__path__)[0])')
  echo "published executorch install for comparison: $(( $(kb "$ref") / 1024 )) MB in $ref"
fi
