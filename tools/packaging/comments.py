"""Remove the comments from Python source, keeping every line, so code and line numbers stay the same."""

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


def same_program(original: bytes, stripped: bytes, filename: str = "<source>") -> bool:
    """True when both sources parse to the same syntax tree, every node at the same line and column."""
    def dump(source: bytes) -> str:
        return ast.dump(ast.parse(source, filename), include_attributes=True)

    return dump(original) == dump(stripped)


def strip_file(path: str) -> None:
    """Remove the comments from the Python file at `path` in place (a new file, so a link's target is untouched);
    raise naming the file if the result would not be the same program."""
    with open(path, "rb") as f:
        original = f.read()
    stripped = strip_comments(original)
    if not same_program(original, stripped, path):
        raise ValueError(f"{path}: removing its comments would change its code (a bug in "
                         "tools/packaging/comments.py): report it with this file")
    tmp = f"{path}.nocomments"
    with open(tmp, "wb") as f:
        f.write(stripped)
    os.replace(tmp, path)
