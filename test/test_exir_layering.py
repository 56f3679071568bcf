"""exir is a library: importing it (and its lowering machinery) pulls in neither the runtime, the CLI nor the zoo."""

import subprocess
import sys

_PROBE = """
import sys
import executorch.exir
from executorch.exir import to_edge_transform_and_lower
import executorch.exir.program, executorch.exir.emit, executorch.exir.passes, executorch.exir.memory_planning
import executorch.exir._serialize
bad = sorted(m for m in sys.modules if m.split(".")[:2] in (["executorch", "runtime"], ["executorch", "examples"],
                                                             ["executorch", "cli"]))
print(",".join(bad))
"""


def test_exir_imports_no_runtime_cli_or_examples():
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=True)
    assert proc.stdout.strip() == "", f"importing executorch.exir imported {proc.stdout.strip()}"


def test_the_probe_sees_such_an_import():
    # The check above would pass vacuously if the module list were wrong; importing the CLI shows it is not.
    probe = _PROBE.replace("import executorch.exir._serialize", "import executorch.exir._serialize\nimport executorch.cli.export\nimport executorch.runtime")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert "executorch.cli.export" in proc.stdout and "executorch.runtime" in proc.stdout


# The build backend (tools/packaging) runs from the source tree before the package is installed, and
# the zoo (examples/models) is loaded by path; neither is imported as `executorch.*`.
_NOT_PACKAGE_CODE = ("tools/packaging/", "examples/")


def test_the_package_uses_absolute_executorch_imports_only():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    relative = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("test/", ".venv/", "cmake-out/", "build/") + _NOT_PACKAGE_CODE) or "/." in "/" + rel:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        relative += [f"{rel}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, f"relative imports (use `from executorch.<module> import ...`): {relative}"
