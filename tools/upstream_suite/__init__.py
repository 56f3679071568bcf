"""Runs upstream ExecuTorch's own tests for the modules this package provides against this package.

    python -m tools.upstream_suite [--site-packages DIR] [--failures] [--workers N] [--files GLOB ...]

The tests are taken at run time from the published wheel's site-packages (DIR, or found by running
ET_REFERENCE_PYTHON), copied into a temporary directory and run with pytest on this interpreter, so they
exercise the `executorch` this interpreter imports. Nothing of upstream's enters the repository.

The file set is what issue 36 names, "export, emit, memory-planning, serialization and pybindings":

- export:          export/tests/test_*.py (`executorch.export`: recipes, sessions, stages)
- emit:            exir/emit/test/test_emit.py
- memory planning: exir/tests/test_memory_planning.py (`executorch.exir.memory_planning`; the separate
                   `exir.banked_memory_planning` module and its test file are not part of it)
- serialization:   exir/_serialize/test/test_*.py
- pybindings:      extension/pybindings/test/test_*.py, and runtime/test/test_runtime*.py, whose
                   `executorch.runtime` is upstream's Python front end over the same bindings

A missing name fails only the tests that use it: a module-level `from executorch.m import a, b` whose `b`
this package lacks (or whose module fails to import) is rewritten, on its own lines, into the import of `a`
and a placeholder for `b` that raises MissingNameError, naming it, when a test calls, iterates, compares or
instantiates it. An import inside a test needs no rewriting: it fails that test alone. Files that need no
rewriting run as upstream wrote them and count as verbatim.

Upstream's test helpers (modules in its `test`/`tests` folders that are not test files themselves, such as
pybindings' make_test.py or exir/tests/models.py) are part of its test suite, not of the API under test: each
one the chosen files import is copied beside them and served under its upstream name when this package does
not provide that module (when it does, as for exir/backend/test/demos, this package's is used). Their own
missing imports get placeholders the same way. Anything else upstream-only (other packages' internals,
example models, compiled test-only operators) is a missing name like any other.

A test passes when pytest says it passed; skipped tests count in the total and not as passed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tools.upstream_suite._rewrite import imported_modules, module_level_imports, probe_request, rewrite

FILES = (
    "export/tests/test_*.py",
    "exir/emit/test/test_emit.py",
    "exir/tests/test_memory_planning.py",
    "exir/_serialize/test/test_*.py",
    "extension/pybindings/test/test_*.py",
    "runtime/test/test_runtime*.py",
)

_PLUGIN = Path(__file__).with_name("_plugin.py")
_PROBE_ROUNDS = 5


@dataclass
class FileRow:
    file: str
    verbatim: bool
    counts: Counter = field(default_factory=Counter)

    @property
    def tests(self) -> int:
        return sum(self.counts.values())


@dataclass
class Report:
    rows: list
    tests: dict  # nodeid -> {"outcome", "cause"}
    collect_errors: list
    support: list  # upstream helper modules served from the wheel

    @property
    def total(self) -> int:
        return sum(r.tests for r in self.rows)

    @property
    def passed(self) -> int:
        return sum(r.counts["passed"] for r in self.rows)

    @property
    def verbatim_passed(self) -> int:
        return sum(r.counts["passed"] for r in self.rows if r.verbatim)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def failures(self) -> dict:
        """(kind, what) -> failing test ids, most common first."""
        groups: dict = {}
        for nodeid, entry in sorted(self.tests.items()):
            if entry["outcome"] in ("failed", "error"):
                cause = entry["cause"] or {"kind": "behaviour", "what": "?"}
                groups.setdefault((cause["kind"], cause["what"]), []).append(nodeid)
        return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def find_site_packages(path: str | None = None) -> Path:
    """The published wheel's site-packages: `path`, or the one ET_REFERENCE_PYTHON imports executorch from."""
    if path:
        site = Path(path)
    else:
        python = os.environ.get("ET_REFERENCE_PYTHON")
        if not python:
            raise SystemExit("upstream_suite: name the published wheel's site-packages (--site-packages DIR) or set "
                             "ET_REFERENCE_PYTHON to the Python that has it installed")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run([python, "-c", "import executorch; print(list(executorch.__path__)[0])"],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"upstream_suite: {python} cannot import executorch:\n{out.stderr[-2000:]}")
        site = Path(out.stdout.strip()).parent
    if not (site / "executorch").is_dir():
        raise SystemExit(f"upstream_suite: {site} has no executorch/ folder: is it the published wheel's "
                         "site-packages?")
    return site


def _is_helper(rel: Path) -> bool:
    return bool({"test", "tests"} & set(rel.parts[:-1])) and not rel.name.startswith("test_")


def _upstream_file(site: Path, module: str) -> Path | None:
    base = site.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _collect(site: Path, patterns) -> tuple[list[Path], list[Path]]:
    """The chosen test files, and the helper modules they reach (transitively), as paths under site."""
    root = site / "executorch"
    tests = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    if not tests:
        raise SystemExit(f"upstream_suite: no test file under {root} matches {list(patterns)}")
    helpers: set[Path] = set()
    todo = list(tests)
    while todo:
        for module in imported_modules(todo.pop().read_text()):
            path = _upstream_file(site, module)
            if path is not None and path not in helpers and _is_helper(path.relative_to(site)):
                helpers.add(path)
                todo.append(path)
    return tests, sorted(helpers)


def _env(work: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "harness"), env.get("PYTHONPATH")]))
    env["UPSTREAM_SUITE_SUPPORT"] = str(work / "support")
    return env


def _prepare(site: Path, work: Path, tests: list[Path], helpers: list[Path], python: str) -> dict:
    """Copies the files into `work`, rewriting failing module-level imports until the set of rewrites stops
    changing (a helper's own rewrite can make a test file's import of it succeed). Returns rel -> verbatim."""
    (work / "harness").mkdir(parents=True)
    shutil.copyfile(_PLUGIN, work / "harness" / "upstream_suite_plugin.py")
    files = {**{p: work / "tests" / p.relative_to(site / "executorch") for p in tests},
             **{p: work / "support" / p.relative_to(site) for p in helpers}}
    sources = {p: p.read_text() for p in files}
    stmts = {p: module_level_imports(src) for p, src in sources.items()}
    flat = [(p, s) for p in files for s in stmts[p]]
    (work / "probe").mkdir()
    (work / "probe" / "request.json").write_text(probe_request([s for _, s in flat]))
    for dest in files.values():
        dest.parent.mkdir(parents=True, exist_ok=True)
    written: dict = {}
    for _ in range(_PROBE_ROUNDS):
        for p, dest in files.items():
            dest.write_text(written.get(p, sources[p]))
        out = subprocess.run([python, "-c", "import sys, upstream_suite_plugin as p; p.probe(sys.argv[1], sys.argv[2])",
                              str(work / "probe" / "request.json"), str(work / "probe" / "answer.json")],
                             capture_output=True, text=True, env=_env(work), cwd=work)
        if out.returncode:
            raise SystemExit(f"upstream_suite: the import probe failed:\n{out.stderr[-3000:]}")
        answers = json.loads((work / "probe" / "answer.json").read_text())
        by_file: dict = {}
        for (p, _), answer in zip(flat, answers):
            by_file.setdefault(p, []).append(answer)
        new = {p: rewrite(sources[p], stmts[p], by_file.get(p, [])) for p in files}
        new = {p: text for p, text in new.items() if text != sources[p]}
        if new == written:
            break
        written = new
    else:
        raise SystemExit("upstream_suite: the import rewrites did not settle")
    return {p.relative_to(site / "executorch").as_posix(): p not in written for p in tests}


def run(site: Path, patterns=FILES, python: str = sys.executable, workers: int = 1, keep: Path | None = None,
        pytest_args=()) -> Report:
    """Copies, rewrites and runs the upstream test files matching `patterns` under `site`; returns the report."""
    tests, helpers = _collect(site, patterns)
    work = Path(tempfile.mkdtemp(prefix="upstream_suite_")) if keep is None else keep
    try:
        verbatim = _prepare(site, work, tests, helpers, python)
        (work / "tests" / "pytest.ini").write_text("[pytest]\n")
        results = work / "results.json"
        env = _env(work)
        env["UPSTREAM_SUITE_RESULTS"] = str(results)
        # -P: the working folder stays off sys.path; the copies import by path (importlib mode)
        cmd = [python, "-P", "-m", "pytest", "-p", "upstream_suite_plugin", "-p", "no:cacheprovider",
               "--rootdir", str(work / "tests"), "-c", str(work / "tests" / "pytest.ini"), "--import-mode=importlib",
               "-q", "--no-header", "-rN", "--tb=no", *pytest_args]
        if workers > 1:
            cmd += ["-n", str(workers), "--dist", "loadfile"]
        cmd += [str(work / "tests" / rel) for rel in verbatim]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        if not results.is_file():
            raise SystemExit(f"upstream_suite: pytest wrote no results (exit {proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        data = json.loads(results.read_text())
        rows = {rel: FileRow(rel, ok) for rel, ok in verbatim.items()}
        for nodeid, entry in data["tests"].items():
            rows[nodeid.split("::")[0]].counts[entry["outcome"]] += 1
        return Report(list(rows.values()), data["tests"], data["collect_errors"],
                      [h.relative_to(site).as_posix() for h in helpers])
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def format_table(report: Report) -> str:
    head = ("file", "tests", "passed", "failed", "errors", "skipped", "verbatim")
    rows = [(r.file, r.tests, r.counts["passed"], r.counts["failed"], r.counts["error"],
             r.counts["skipped"] + r.counts["xfailed"], "yes" if r.verbatim else "no") for r in report.rows]
    total = ("total", report.total, report.passed, sum(r[3] for r in rows), sum(r[4] for r in rows),
             sum(r[5] for r in rows), f"{sum(r.verbatim for r in report.rows)}/{len(rows)}")
    width = [max(len(str(x[i])) for x in [head, *rows, total]) for i in range(len(head))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, width)))

    out = [line(head), line(["-" * w for w in width]), *map(line, rows), line(["-" * w for w in width]), line(total)]
    out.append(f"passed {report.passed} of {report.total} ({report.fraction:.1%}); "
               f"{report.verbatim_passed} of them in verbatim files")
    for err in report.collect_errors:
        out.append(f"COLLECTION ERROR {err['nodeid']}: {err['message'].strip().splitlines()[-1]}")
    return "\n".join(out)


def format_failures(report: Report) -> str:
    out = []
    by_kind = Counter()
    groups = report.failures()
    for (kind, _), ids in groups.items():
        by_kind[kind] += len(ids)
    out.append("failures by cause: " + ", ".join(f"{k} {n}" for k, n in by_kind.most_common()))
    for (kind, what), ids in groups.items():
        out.append(f"\n[{len(ids)}] {kind}: {what}")
        out.extend(f"    {i}" for i in ids)
    return "\n".join(out)
