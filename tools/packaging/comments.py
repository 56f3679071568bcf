"""Remove the comments from Python source, and the docstrings of private definitions, keeping every line, so code
and line numbers stay the same."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize

# PEP 263's encoding declaration; it counts on line 1 or 2 only.
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def _kept(token: tokenize.TokenInfo) -> bool:
    # A shebang on line 1 and an encoding declaration on line 1 or 2 mean something to the system or to Python.
    row = token.start[0]
    return (row == 1 and token.string.startswith("#!")) or (row <= 2 and bool(_CODING.match(token.line)))


def strip_comments(source: bytes) -> bytes:
    """`source` without its comments: each comment's text and the whitespace before it go, each line stays (empty
    where it held only a comment) with its own line ending; `#` inside strings is not a comment. A shebang and an
    encoding declaration stay. Raises SyntaxError (or tokenize.TokenError) for source Python cannot tokenize."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    text = source.decode(encoding)
    # The lines as tokenize sees them (split after each "\n"), so its rows and columns index this list.
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    feed = iter(lines)
    for token in tokenize.generate_tokens(lambda: next(feed, "")):
        if token.type != tokenize.COMMENT or _kept(token):
            continue
        (row, start), (end_row, end) = token.start, token.end
        line = lines[row - 1]
        if end_row != row or line[start:end] != token.string:
            raise ValueError(f"line {row}: tokenize placed a comment where the line does not hold it")
        lines[row - 1] = line[:start].rstrip(" \t\f") + line[end:]
    return "".join(lines).encode(encoding)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_docstrings(tree: ast.AST) -> list[ast.Expr]:
    # The docstring statements of functions and classes named private (`_f`, not a dunder), where more statements
    # follow (the body stays non-empty) on later lines: no user reads them (help() lists public names), and in a
    # slim wheel they are comments in all but syntax.
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not _private(node.name):
            continue
        first = node.body[0]
        if (len(node.body) > 1 and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str) and node.body[1].lineno > first.end_lineno):
            found.append(first)
    return found


def strip_private_docstrings(source: bytes) -> bytes:
    """`source` without the docstrings of its private functions and classes (see _private_docstrings): the lines
    that held one stay, empty. A docstring sharing a line with other code stays."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    text = source.decode(encoding)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    for doc in _private_docstrings(ast.parse(source)):
        first, last = lines[doc.lineno - 1], lines[doc.end_lineno - 1]
        # Offsets are in UTF-8 bytes: compare the text around the docstring as bytes.
        if first.encode("utf-8")[:doc.col_offset].strip() or last.encode("utf-8")[doc.end_col_offset:].strip():
            continue
        for row in range(doc.lineno - 1, doc.end_lineno):
            lines[row] = lines[row][len(lines[row].rstrip("\r\n")):]
    return "".join(lines).encode(encoding)


def same_program(original: bytes, stripped: bytes, filename: str = "<source>") -> bool:
    """True when both sources parse to the same syntax tree, every node at the same line and column, but for the
    private docstrings `stripped` may lack (strip_private_docstrings)."""
    def dump(tree: ast.AST) -> str:
        return ast.dump(tree, include_attributes=True)

    before, after = ast.parse(original, filename), ast.parse(stripped, filename)
    if dump(before) == dump(after):
        return True
    kept = {(doc.lineno, doc.col_offset) for doc in _private_docstrings(after)}
    gone = {id(doc) for doc in _private_docstrings(before) if (doc.lineno, doc.col_offset) not in kept}
    for node in ast.walk(before):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node.body[0]) in gone:
            node.body = node.body[1:]
    return dump(before) == dump(after)


def strip_file(path: str) -> None:
    """Remove the comments and private docstrings from the Python file at `path` in place (a new file, so a link's
    target is untouched); raise naming the file if the result would not be the same program."""
    with open(path, "rb") as f:
        original = f.read()
    stripped = strip_private_docstrings(strip_comments(original))
    if not same_program(original, stripped, path):
        raise ValueError(f"{path}: removing its comments would change its code (a bug in "
                         "tools/packaging/comments.py): report it with this file")
    tmp = f"{path}.nocomments"
    with open(tmp, "wb") as f:
        f.write(stripped)
    os.replace(tmp, path)
