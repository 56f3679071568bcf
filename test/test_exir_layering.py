"""The package is layered: exir imports neither the runtime, the CLI nor the zoo, and every import points down,
with no cycle."""

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
    probe = _PROBE.replace("import executorch.exir._serialize",
                           "import executorch.exir._serialize\nimport executorch.cli.export\nimport executorch.runtime")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert "executorch.cli.export" in proc.stdout and "executorch.runtime" in proc.stdout


# The build backend (tools/packaging) runs from the source tree before the package is installed, and
# the zoo (examples/models) is loaded by path; neither is imported as `executorch.*`.
_NOT_PACKAGE_CODE = ("tools/packaging/", "examples/", "docs/")


def test_the_package_uses_absolute_executorch_imports_only():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    relative = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("test/", "build/") + _NOT_PACKAGE_CODE) or not _in_package_dirs(rel):
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        relative += [f"{rel}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, f"relative imports (use `from executorch.<module> import ...`): {relative}"


# ---- the import graph: every import points down the layers, and none closes a cycle ----------------
# Layers, lowest first: the top-level folders, in this order. A module belongs to the layer of its longest
# matching entry: "a.b" covers a.b and everything under it, "=a.b" only a.b itself (a package's __init__), "*"
# one name part. A module may import from its own layer or a lower one. exir (IR, passes, memory planning,
# emission, serialization, the backend API) is the bottom; the runtime owns its registries and imports nothing
# above it (what sits above registers through entry points, runtime/_plugins.py); extension (.ptd, LLM ops,
# upstream's portable_lib API) builds on both; devtools, then export (recipes, sessions); backends at the top,
# since each plugs into every layer below (exir's backend API, export's recipes and quantizers, the runtime's
# registries); the command line and scripts last (export_llm, a command at upstream's extension path, with them).
# One module is placed by hand: the compiled extension lives in
# extension/pybindings (upstream's path) but is the runtime's native engine.
LAYERS = [
    ("exir", ["executorch.exir", "executorch.version"]),
    ("runtime", ["executorch.runtime", "executorch.extension.pybindings._portable_lib"]),
    ("extension", ["executorch.extension", "executorch.kernels"]),
    ("devtools", ["executorch.devtools"]),
    ("export", ["executorch.export"]),
    ("backends", ["executorch.backends"]),
    ("entry points", ["=executorch", "executorch.cli", "executorch.benchmarks", "executorch.tools", "executorch.sdk",
                      "executorch._launch", "executorch.*.__main__",
                      # ExecuTorch's LLM export command (python -m ...export_llm) drives the Llama example
                      "executorch.extension.llm.export.export_llm"]),
]
# Modules built from C++ (no .py file): imported like the others, they sit where the table puts them.
_COMPILED = {"executorch.extension.pybindings._portable_lib"}


def _in_package_dirs(rel: str) -> bool:
    """Only folders that can be Python packages hold package code: build trees and venvs
    (cmake-out, build-setuptools, .venv) cannot, whatever a local build left in them."""
    return all(part.isidentifier() for part in rel.split("/")[:-1])


def _package_modules(root) -> dict:
    """executorch module name -> source path, for the package's own code (not tests, not the zoo)."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        if (rel.startswith(("test/", "setup.py", "build/") + _NOT_PACKAGE_CODE)
                or "test" in parts[:-1] or not _in_package_dirs(rel)):
            continue
        name = ".".join(["executorch", *parts])[:-3]
        mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _imports(path, name: str, mods: dict) -> dict:
    """The package modules `path` imports (at any depth: functions too) -> the first line importing each."""
    import ast

    known = set(mods) | _COMPILED

    def owner(dotted: str) -> str:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted

    def walk(node):
        # Imports under `if TYPE_CHECKING:` never run; everything else does, at module level or in a function.
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in walk(child))
            return
        yield node
        for child in ast.iter_child_nodes(node):
            yield from walk(child)

    out: dict = {}
    for node in walk(ast.parse(path.read_text(), filename=str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [owner(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from pkg import sub` imports the submodule pkg.sub; `from mod import name` the module.
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else owner(node.module)
                       for a in node.names]
        for t in targets:
            if t.startswith("executorch") and t != name:
                out.setdefault(t, node.lineno)
    return out


def _layer_of(module: str) -> int:
    best, best_len = None, (-1, False)
    parts = module.split(".")
    for i, (_, patterns) in enumerate(LAYERS):
        for p in patterns:
            exact = p.startswith("=")
            pat = p.lstrip("=").split(".")
            if len(pat) > len(parts) or (exact and len(pat) != len(parts)):
                continue
            # the longest entry decides; between equally long ones, an exact entry ("=a.b") beats a prefix
            if all(q in ("*", part) for q, part in zip(pat, parts)) and (len(pat), exact) > best_len:
                best, best_len = i, (len(pat), exact)
    return best


def _import_graph():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    mods = _package_modules(root)
    return mods, {m: _imports(p, m, mods) for m, p in mods.items()}


def _cycles(graph: dict) -> list:
    """Each strongly connected group of two or more modules, as one cycle through it (a, b, ..., a)."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm, iterative (the graph is deep enough for Python's recursion limit)
        work = [(v, iter(graph.get(v, ())))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # walk inside the group from its first module back to it
        members, start = set(group), min(group)
        path, seen = [start], {start}
        while True:
            nxt = sorted(w for w in graph[path[-1]] if w in members)
            back = start if start in nxt else None
            if back:
                cycles.append(path + [start])
                break
            step = next((w for w in nxt if w not in seen), nxt[0])
            if step in seen:  # a loop not through start: report it from where it closes
                cycles.append(path[path.index(step):] + [step])
                break
            path.append(step)
            seen.add(step)
    return cycles


def test_every_package_module_has_a_layer():
    mods, _ = _import_graph()
    assert len(mods) > 100, "the walk found too few modules; is the source tree laid out as expected?"
    unplaced = sorted(m for m in mods if _layer_of(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS in this test): {unplaced}"


def test_imports_point_down_the_layers():
    mods, graph = _import_graph()
    upward = [f"{mods[a].relative_to(mods['executorch'].parent).as_posix()}:{line} {a} ({LAYERS[_layer_of(a)][0]}) "
              f"imports {b} ({LAYERS[_layer_of(b)][0]})"
              for a, deps in sorted(graph.items()) for b, line in sorted(deps.items())
              if _layer_of(b) is not None and _layer_of(a) is not None and _layer_of(b) > _layer_of(a)]
    assert not upward, "imports against the layering (move the code down, or the import up):\n" + "\n".join(upward)


def test_no_import_cycles():
    _, graph = _import_graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles (one shown per group of modules that import each other):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_the_checks_see_a_cycle_and_an_upward_import():
    # The walk must see function-level imports, and the checks must name what they find.
    import ast

    source = "def f():\n    from executorch.runtime import Runtime\n"
    found = [n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    assert found == ["executorch.runtime"]
    graph = {"executorch.exir.a": {"executorch.exir.b": 1}, "executorch.exir.b": {"executorch.exir.c": 1},
             "executorch.exir.c": {"executorch.exir.a": 1}, "executorch.exir.d": {}}
    assert _cycles(graph) == [["executorch.exir.a", "executorch.exir.b", "executorch.exir.c", "executorch.exir.a"]]
    assert _layer_of("executorch.exir.program._program") < _layer_of("executorch.runtime._python._method") \
        < _layer_of("executorch.extension.pybindings.portable_lib") < _layer_of("executorch.export.recipe") \
        < _layer_of("executorch.backends.xnnpack.runtime._backend") < _layer_of("executorch.cli.main")
    assert _layer_of("executorch.extension.pybindings._portable_lib") == _layer_of("executorch.runtime")
    assert _layer_of("executorch.exir.__main__") == _layer_of("executorch.cli")
