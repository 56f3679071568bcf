#!/usr/bin/env bash
# Smoke test of the minimal wheel: build it two ways, check what it holds and declares, install it
# in a clean venv (dependencies resolved by pip), export MobileNetV2 with it, run the result, and
# check the .pte bytes match an export from the source tree.
#
# Runs as written: it makes its own venvs (a builder with pip, build and packaging; a clean one for
# the wheel) from PYTHON (default python3).
# Env: TORCH_SPEC (default: the pin in requirements-torch.txt), TORCH_INDEX_URL (the index torch comes from; unset, pip's
# configuration decides), ET_REFERENCE_PYTHON (also run on the published runtime), ET_FULL_WHEEL (a
# full wheel whose export must give the same bytes), KEEP_WORK=1 (keep the scratch dir).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-$(grep -m1 '^torch==' "$ROOT/requirements-torch.txt")}
MODEL="$ROOT/examples/models/mobilenet_v2.py:make_mobilenet_v2"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/minimal-wheel.XXXXXX")
[[ "${KEEP_WORK:-}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT

step() { printf '\n== %s (at %ss)\n' "$*" "$SECONDS"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
export EXECUTORCH_BUILD_MINIMAL=1
unset EXECUTORCH_MINIMAL_WITH_FLATC

TORCH_INDEX=()
[[ -z "${TORCH_INDEX_URL:-}" ]] || TORCH_INDEX=(--index-url "$TORCH_INDEX_URL")

step "builder venv (pip, build, packaging)"
"$PYTHON" -m venv "$WORK/builder"
BPY="$WORK/builder/bin/python"
"$BPY" -m pip install -q --upgrade pip build packaging || fail "cannot install the builder's tools"

# Builds run from $WORK with -P (no current directory on sys.path): a build/ folder that
# `pip install .` leaves in the checkout would otherwise shadow the `build` package.
step "build: pip wheel . --no-deps"
(cd "$WORK" && "$BPY" -P -m pip wheel "$ROOT" --no-deps -q -w "$WORK/pip") || fail "pip wheel failed"
step "build: python -m build --wheel"
(cd "$WORK" && "$BPY" -P -m build --wheel -o "$WORK/pypa-build" "$ROOT" >"$WORK/build.log" 2>&1) \
  || { tail -40 "$WORK/build.log"; fail "python -m build failed"; }
WHEEL=$(ls "$WORK"/pip/executorch-*.whl)
cmp "$WHEEL" "$WORK"/pypa-build/executorch-*.whl || fail "pip wheel and python -m build gave different bytes"
echo "both builds: $(basename "$WHEEL"), byte-identical"

step "inspect: tag, contents, Requires-Dist"
"$BPY" "$ROOT/tools/packaging/inspect_wheel.py" "$WHEEL" --minimal --requires flatbuffers --max-kb 360 \
  || fail "the minimal wheel breaks its promises (see above)"

step "install in a clean venv (with $TORCH_SPEC first, then the wheel with its dependencies)"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "$TORCH_SPEC" "${TORCH_INDEX[@]}"
"$VPY" -m pip list --format=freeze | sort >"$WORK/before.txt"
"$VPY" -m pip install -q "$WHEEL"
"$VPY" -m pip list --format=freeze | sort >"$WORK/after.txt"
"$VPY" -m pip check
ADDED=$(comm -13 "$WORK/before.txt" "$WORK/after.txt" | cut -d= -f1 | tr 'A-Z_' 'a-z-' | sort | xargs)
echo "installing the wheel added: $ADDED"
[[ "$ADDED" == "executorch flatbuffers" ]] || fail "expected the wheel to add only executorch and flatbuffers"
(cd "$WORK" && "$VPY" -c "import executorch.exir") || fail "the installed wheel does not import"
(cd "$WORK" && "$VPY" -c "from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner") \
  || fail "the installed wheel has no ExecutorBackendPartitioner at the published module path"

step "export MobileNetV2 with the installed wheel"
(cd "$WORK" && "$VPY" -m executorch.exir export "$MODEL" -o "$WORK/wheel.pte") || fail "export with the wheel failed"
ls -l "$WORK/wheel.pte"

step "run it on the project's runtime (installed wheel)"
(cd "$WORK" && "$VPY" "$ROOT/tools/packaging/run_check.py" "$MODEL" "$WORK/wheel.pte") || fail "project runtime"
if [[ -n "${ET_REFERENCE_PYTHON:-}" ]]; then
  step "run it on the published runtime"
  (cd "$WORK" && "$ET_REFERENCE_PYTHON" "$ROOT/tools/packaging/run_check.py" "$MODEL" "$WORK/wheel.pte") \
    || fail "published runtime"
fi

step "same bytes as an export from the source tree"
mkdir -p "$WORK/src-shim" && ln -s "$ROOT" "$WORK/src-shim/executorch"
FROM=$(cd "$WORK" && PYTHONPATH="$WORK/src-shim" "$VPY" -c "import executorch; print(executorch.__file__)")
[[ "$FROM" == "$WORK/src-shim/"* ]] || fail "the source-tree export would import executorch from $FROM"
(cd "$WORK" && PYTHONPATH="$WORK/src-shim" "$VPY" -m executorch.exir export "$MODEL" -o "$WORK/source.pte") \
  || fail "export from the source tree failed"
cmp "$WORK/wheel.pte" "$WORK/source.pte" || fail "the wheel and the source tree wrote different .pte bytes"
echo "wheel.pte == source.pte ($(wc -c <"$WORK/wheel.pte") bytes)"
step "the oldest flatbuffers the wheel declares writes the same bytes"
# pip installed the newest flatbuffers above; the declared floor (Requires-Dist flatbuffers>=X.Y) is
# the other end of the range vendors may pin.
FLOOR=$("$VPY" -c "from importlib.metadata import requires; import re; print(next(re.search(r'>=\s*([0-9.]+)', r).group(1) for r in requires('executorch') if r.startswith('flatbuffers')))")
NEWEST=$("$VPY" -c "from importlib.metadata import version; print(version('flatbuffers'))")
"$VPY" -m pip install -q "flatbuffers~=$FLOOR.0" || fail "cannot install flatbuffers~=$FLOOR.0"
OLDEST=$("$VPY" -c "from importlib.metadata import version; print(version('flatbuffers'))")
# The bytes are compared with wheel.pte, which was verified above.
(cd "$WORK" && "$VPY" -m executorch.exir export "$MODEL" -o "$WORK/oldest-flatbuffers.pte" --no-verify) \
  || fail "export with flatbuffers $OLDEST failed"
cmp "$WORK/wheel.pte" "$WORK/oldest-flatbuffers.pte" \
  || fail "flatbuffers $OLDEST and $NEWEST wrote different .pte bytes"
echo "flatbuffers $OLDEST (the declared floor) == flatbuffers $NEWEST"
"$VPY" -m pip install -q "flatbuffers==$NEWEST"

if [[ -n "${ET_FULL_WHEEL:-}" ]]; then
  step "same bytes as an export from the full wheel"
  "$PYTHON" -m venv "$WORK/full"
  "$WORK/full/bin/python" -m pip install -q "$TORCH_SPEC" "${TORCH_INDEX[@]}"
  "$WORK/full/bin/python" -m pip install -q "$ET_FULL_WHEEL"
  # Verification is the runtime's job, checked next; this step compares the writers.
  (cd "$WORK" && "$WORK/full/bin/python" -m executorch.exir export "$MODEL" -o "$WORK/full.pte" --no-verify) \
    || fail "export with the full wheel failed"
  cmp "$WORK/wheel.pte" "$WORK/full.pte" || fail "the minimal and full wheels wrote different .pte bytes"
  echo "wheel.pte == full.pte"
  step "run it on the full wheel's runtime"
  (cd "$WORK" && "$WORK/full/bin/python" "$ROOT/tools/packaging/run_check.py" "$MODEL" "$WORK/wheel.pte") \
    || fail "the full wheel's runtime"
fi

step "minimal wheel: OK"
