"""Check a built wheel against what its mode promises; print what it holds and declares.

  python tools/packaging/inspect_wheel.py WHEEL [--minimal] [--requires NAME ...] [--max-kb N]
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools.packaging.components import EXECUTOR_BACKEND_AOT  # noqa: E402

COMPILED = (".so", ".pyd", ".dylib", ".a", ".o", ".obj", ".dll", ".lib", ".exe")
NATIVE_SOURCE = (".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cmake", ".yaml", "CMakeLists.txt")
NEVER_IN_MINIMAL = ("kernels", "backends", "examples", "test", "tests", "benchmarks", "tools", "bin")


def _listed_test_files() -> frozenset[str]:
    # The table's explicitly listed modules under a test package, with their parents' __init__.py.
    out = set()
    for module in EXECUTOR_BACKEND_AOT:
        parts = module.split(".")
        out.add("/".join(parts) + ".py")
        out.update("/".join(parts[:i]) + "/__init__.py" for i in range(1, len(parts)))
    return frozenset(out)


LISTED = _listed_test_files()
# The one backend the minimal wheel carries: XNNPACK's Python half (its table row), Python and schema only.
XNNPACK_PREFIX = "executorch/backends/xnnpack/"
# The adapter to the compiled runtime: only the wheel with the extension can import it.
NOT_IN_MINIMAL = ("executorch/runtime/_native.py",)
# The example-model registry and its small models (the table's example_models row): vendor scripts import it.
EXAMPLE_MODELS_PREFIX = "executorch/examples/models/"
# The Llama package's custom KV caches and attention (the llm row): optimum-executorch imports them.
LLAMA_PREFIX = "executorch/examples/models/llama/"
# The schemas of every format the minimal wheel writes and reads (.pte, XNNPACK payload, .ptd, .bpte).
SCHEMAS = ("executorch/schema/program.fbs", "executorch/schema/scalar_type.fbs",
           "executorch/backends/xnnpack/serialization/schema.fbs",
           "executorch/extension/flat_tensor/serialize/flat_tensor.fbs",
           "executorch/devtools/bundled_program/schema/bundled_program_schema.fbs")


def _metadata(zf: zipfile.ZipFile) -> tuple[str, dict, dict]:
    dist_info = next(n.split("/")[0] for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
    wheel = Parser().parsestr(zf.read(f"{dist_info}/WHEEL").decode())
    return dist_info, metadata, wheel


def problems(wheel_path: Path, minimal: bool, requires: list[str] | None, max_kb: float | None) -> list[str]:
    """Everything wrong with the wheel, as one line each (empty when it is as promised)."""
    out: list[str] = []
    with zipfile.ZipFile(wheel_path) as zf:
        files = [n for n in zf.namelist() if not n.endswith("/")]
        _, metadata, wheel = _metadata(zf)
    core = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    core = [r for r in core if r.marker is None or "extra" not in str(r.marker)]
    if (requires is not None
            and sorted(canonicalize_name(r.name) for r in core) != sorted(map(canonicalize_name, requires))):
        out.append(f"Requires-Dist is {[str(r) for r in core]}, expected exactly {requires}")
    if max_kb is not None and wheel_path.stat().st_size > max_kb * 1024:
        out.append(f"{wheel_path.name} is {wheel_path.stat().st_size / 1024:.1f} KB, over the {max_kb} KB budget")
    if not minimal:
        return out
    if wheel.get_all("Tag") != ["py3-none-any"] or not wheel_path.name.endswith("-py3-none-any.whl"):
        out.append(f"tag is {wheel.get_all('Tag')} ({wheel_path.name}), expected py3-none-any")
    for name in files:
        parts = name.split("/")
        if name.endswith(COMPILED):
            out.append(f"compiled file {name}")
        elif name.endswith(NATIVE_SOURCE):
            out.append(f"native source, header or kernel list {name}")
        elif name.endswith(NOT_IN_MINIMAL):
            out.append(f"{name} serves only the native runtime, which the minimal wheel lacks")
        elif name in LISTED:
            continue
        elif name.startswith(EXAMPLE_MODELS_PREFIX) and name.endswith(".py") and name.count("/") == 3:
            continue
        elif name.startswith(LLAMA_PREFIX) and name.endswith(".py") and not parts[-1].startswith("test_"):
            continue
        elif name.startswith(XNNPACK_PREFIX) and name.endswith((".py", ".fbs")) and not any(
                part in ("test", "tests") for part in parts[3:-1]) and not parts[-1].startswith("test_"):
            continue
        elif any(part in NEVER_IN_MINIMAL for part in parts[1:-1]) or parts[-1].startswith("test_"):
            out.append(f"kernel, backend, example, test or tool content {name}")
    for needed in ("executorch/__init__.py", "executorch/exir/__init__.py", "executorch/exir/_serialize/_program.py",
                   "executorch/devtools/bundled_program/serialize/__init__.py", *SCHEMAS, *sorted(LISTED)):
        if needed not in files:
            out.append(f"missing {needed}")
    return out


def summary(wheel_path: Path) -> str:
    """One line: name, size, file count and declared requirements."""
    with zipfile.ZipFile(wheel_path) as zf:
        count = sum(1 for n in zf.namelist() if not n.endswith("/"))
        unpacked = sum(i.file_size for i in zf.infolist())
        _, metadata, _ = _metadata(zf)
    requires = metadata.get_all("Requires-Dist") or []
    return (f"{wheel_path.name}: {wheel_path.stat().st_size / 1024:.1f} KB packed, {unpacked / 1024:.1f} KB unpacked, "
            f"{count} files, Requires-Dist: {', '.join(requires) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--minimal", action="store_true", help="check the minimal wheel's promises")
    parser.add_argument("--requires", nargs="*", help="exact set of core Requires-Dist names")
    parser.add_argument("--max-kb", type=float, help="size budget of the wheel file")
    args = parser.parse_args(argv)
    print(summary(args.wheel))
    found = problems(args.wheel, args.minimal, args.requires, args.max_kb)
    for problem in found:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
