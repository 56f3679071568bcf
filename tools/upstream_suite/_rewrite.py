"""Finds an upstream file's imports of `executorch` and rewrites the module-level ones that fail into placeholders.

Only module-level statements are rewritten: an import that fails inside a test already fails just that test.
A rewritten statement keeps its first line and pads the lines it spanned, so tracebacks keep upstream's line
numbers.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class ImportStmt:
    """One module-level `import executorch...` or `from executorch... import ...` statement."""

    lineno: int
    end_lineno: int
    module: str
    names: tuple  # ((name, asname), ...); empty for `import module`
    asname: str | None = None  # `import module as asname`

    @property
    def is_from(self) -> bool:
        return bool(self.names)


def _ours(module: str | None) -> bool:
    return module is not None and (module == "executorch" or module.startswith("executorch."))


def module_level_imports(source: str) -> list[ImportStmt]:
    """The statements a failing import would stop collection at: the module body's and its `if` blocks'
    (a `try` around an import is upstream's own handling of its absence, and stays as written)."""
    found = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
                if any(a.name == "*" for a in node.names):
                    continue
                found.append(ImportStmt(node.lineno, node.end_lineno, node.module,
                                        tuple((a.name, a.asname) for a in node.names)))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _ours(alias.name):
                        found.append(ImportStmt(node.lineno, node.end_lineno, alias.name, (), alias.asname))
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(source).body)
    return found


def imported_modules(source: str) -> set[str]:
    """Every `executorch` module an upstream file may import, at any depth, with each `from m import n`'s
    `m.n` too (n may be a submodule)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if _ours(a.name))
    return out


def _replacement(stmt: ImportStmt, answer: dict) -> str | None:
    """The one line that replaces `stmt` given the probe's answer, or None when it imports as written."""
    head = "import upstream_suite_plugin as _upstream_suite; "
    error = answer["module_error"]
    if not stmt.is_from:
        if error is None:
            return None
        call = f"_upstream_suite.missing_module({stmt.module!r}, {error!r})"
        if stmt.asname:
            return f"{head}{stmt.asname} = {call}"
        return f"{head}{call}; import {stmt.module.split('.')[0]}"
    absent = {name: (error or answer["missing"][name]) for name, _ in stmt.names
              if error is not None or name in answer["missing"]}
    if not absent:
        return None
    present = [(n, a) for n, a in stmt.names if n not in absent]
    parts = []
    if present:
        listed = ", ".join(f"{n} as {a}" if a else n for n, a in present)
        parts.append(f"from {stmt.module} import {listed}")
    missing = [(n, a) for n, a in stmt.names if n in absent]
    targets = "".join(f"{a or n}, " for n, a in missing)
    reasons = sorted(set(absent.values()))
    parts.append(f"({targets}) = _upstream_suite.missing({stmt.module!r}, "
                 f"{tuple(n for n, _ in missing)!r}, {'; '.join(reasons)!r})")
    return head + "; ".join(parts)


def rewrite(source: str, stmts: list[ImportStmt], answers: list[dict]) -> str:
    """`source` with each failing statement replaced by its placeholder line; unchanged when none fails."""
    lines = source.splitlines(keepends=True)
    for stmt, answer in zip(stmts, answers):
        new = _replacement(stmt, answer)
        if new is None:
            continue
        first = lines[stmt.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        lines[stmt.lineno - 1] = indent + new + "\n"
        for i in range(stmt.lineno, stmt.end_lineno):
            lines[i] = "\n"
    return "".join(lines)


def probe_request(stmts: list[ImportStmt]) -> str:
    return json.dumps([{"module": s.module, "names": [n for n, _ in s.names]} for s in stmts])
