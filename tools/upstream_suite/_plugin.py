"""The pytest side of the upstream-suite harness: placeholders for missing names, upstream's test helpers, results.

The harness copies this file into its temporary directory as `upstream_suite_plugin` and runs pytest with
`-p upstream_suite_plugin`; the rewritten upstream files import it by that name. It imports nothing of
`executorch`, so loading it changes nothing about the package under test.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

SUPPORT_ENV = "UPSTREAM_SUITE_SUPPORT"
RESULTS_ENV = "UPSTREAM_SUITE_RESULTS"


class MissingNameError(Exception):
    """A test reached a name of upstream's that this package does not provide."""


# Names whose placeholders were used by the running test (reset per test).
_used: list[str] = []


class Missing:
    """Stands for a name this package lacks: binding it, reading attributes off it, subclassing it and naming it
    in annotations work (so the file collects); calling, iterating, comparing or testing it raises
    MissingNameError naming it, failing just the test that uses it."""

    __slots__ = ("_name", "_reason")

    def __init__(self, name: str, reason: str) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_reason", reason)

    def _fail(self, use: str):
        _used.append(self._name)
        raise MissingNameError(f"{self._name} is not provided by this package ({self._reason}); the test {use} it")

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}", self._reason)

    def __setattr__(self, attr, value):
        self._fail("assigns an attribute of")

    def __getitem__(self, key):
        return Missing(f"{self._name}[...]", self._reason)

    def __call__(self, *args, **kwargs):
        self._fail("calls")

    def __iter__(self):
        self._fail("iterates")

    def __bool__(self):
        self._fail("tests the truth of")

    def __eq__(self, other):
        self._fail("compares")

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __instancecheck__(self, obj):
        self._fail("checks an instance against")

    def __enter__(self):
        self._fail("enters")

    def __exit__(self, *exc):
        return False

    def __mro_entries__(self, bases):
        missing = self

        class _MissingBase:
            def __init__(self, *args, **kwargs):
                missing._fail("instantiates a subclass of")

        _MissingBase.__qualname__ = _MissingBase.__name__ = self._name.rsplit(".", 1)[-1]
        return (_MissingBase,)

    def __repr__(self) -> str:
        return f"<missing {self._name}>"


def missing(module: str, names: tuple, reason: str):
    """Placeholders for `names` of `module` (a tuple, in order, for unpacking)."""
    return tuple(Missing(f"{module}.{name}", reason) for name in names)


def missing_module(module: str, reason: str) -> Missing:
    """A placeholder for a whole module, hung on its nearest importable parent so `import a.b.c` then binds `a`."""
    parts = module.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:cut])
        try:
            owner = importlib.import_module(parent)
        except Exception:
            continue
        placeholder = Missing(".".join(parts[: cut + 1]), reason)
        setattr(owner, parts[cut], placeholder)
        return Missing(module, reason)
    return Missing(module, reason)


class _SupportFinder(importlib.abc.MetaPathFinder):
    """Serves upstream's test-helper modules (copied under SUPPORT_ENV) that the package under test lacks; sits
    last on sys.meta_path, so a module the package provides is always the package's."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("executorch."):
            return None
        base = self.root.joinpath(*fullname.split("."))
        if base.with_suffix(".py").is_file():
            return importlib.util.spec_from_file_location(fullname, base.with_suffix(".py"))
        if base.is_dir():
            init = base / "__init__.py"
            if init.is_file():
                return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(base)])
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(base)]
            return spec
        return None


def install_support_finder() -> None:
    root = os.environ.get(SUPPORT_ENV)
    if root and not any(isinstance(f, _SupportFinder) for f in sys.meta_path):
        sys.meta_path.append(_SupportFinder(Path(root)))


def probe(request: str, answer: str) -> None:
    """For each import statement in `request` (JSON), which of its names this package lacks, and why."""
    install_support_finder()
    out = []
    for item in json.loads(Path(request).read_text()):
        module, names = item["module"], item["names"]
        try:
            mod = importlib.import_module(module)
        except Exception as e:  # any failure makes every name of the statement missing
            out.append({"module_error": _one_line(e), "missing": {}})
            continue
        absent = {}
        for name in names:
            if hasattr(mod, name):
                continue
            try:
                importlib.import_module(f"{module}.{name}")
            except Exception as e:
                absent[name] = _one_line(e) if not isinstance(e, ModuleNotFoundError) or e.name != f"{module}.{name}" \
                    else f"no name {name} in {module}"
        out.append({"module_error": None, "missing": absent})
    Path(answer).write_text(json.dumps(out))


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
    return text[:300]


# --- pytest hooks ------------------------------------------------------------------------------------------

_results: dict = {}
_collect_errors: list = []

_IMPORT_MISS = re.compile(r"cannot import name '([\w.]+)' from '(executorch[\w.]*)'")
_NO_MODULE = re.compile(r"No module named '(executorch[\w.]*)'")
_NO_ATTR = re.compile(r"module '(executorch[\w.]*)' has no attribute '(\w+)'")


def _cause(excinfo, used: list) -> dict:
    """Why a test failed: a missing name (a placeholder used, or an import of upstream's that failed inside the
    test), an option this package refuses, or behaviour."""
    exc = excinfo.value
    chain = []
    while exc is not None and len(chain) < 8:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for e in chain:
        text = str(e)
        if isinstance(e, MissingNameError):
            return {"kind": "missing name", "what": text.split(" is not provided")[0]}
        if isinstance(e, ImportError):
            m = _IMPORT_MISS.search(text)
            if m:
                return {"kind": "missing name", "what": f"{m.group(2)}.{m.group(1)}"}
            m = _NO_MODULE.search(text)
            if m:
                return {"kind": "missing name", "what": m.group(1)}
        if isinstance(e, AttributeError):
            m = _NO_ATTR.search(text)
            if m:
                return {"kind": "missing name", "what": f"{m.group(1)}.{m.group(2)}"}
    if used:
        return {"kind": "missing name", "what": used[0]}
    first = chain[0]
    message = _one_line(first)
    if not isinstance(first, AssertionError) and re.search(r"is not supported|is refused|not provided", message):
        return {"kind": "option refused", "what": message}
    return {"kind": "behaviour", "what": message}


def pytest_configure(config):
    install_support_finder()


def pytest_runtest_setup(item):
    _used.clear()


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed and call.excinfo is not None:
            cause = _cause(call.excinfo, list(_used))
            report.user_properties.append(("upstream_suite_cause", json.dumps(cause)))
except ImportError:  # the probe runs without pytest
    pass


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append({"nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "cause": None})
    if report.when == "call" and hasattr(report, "wasxfail"):
        entry["outcome"] = "xfailed" if report.skipped else "passed"
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
    elif report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        for key, value in report.user_properties:
            if key == "upstream_suite_cause":
                entry["cause"] = json.loads(value)
        if entry["cause"] is None:
            entry["cause"] = {"kind": "behaviour", "what": str(report.longrepr).strip().splitlines()[-1][:300]}


def pytest_sessionfinish(session):
    path = os.environ.get(RESULTS_ENV)
    if path and not hasattr(session.config, "workerinput"):
        Path(path).write_text(json.dumps({"tests": _results, "collect_errors": _collect_errors}))
