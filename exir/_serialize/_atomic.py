"""Writes a file from pieces in order, atomically when given a path: a failed write leaves none."""

from __future__ import annotations

import os


def write_chunks(f, chunks) -> None:
    """Write `chunks` (bytes-like, in order) to an open binary file, or to a path via a temporary
    file renamed into place once complete."""
    if not isinstance(f, (str, os.PathLike)):
        for c in chunks:
            f.write(c)
        return
    path = os.fspath(f)
    tmp = f"{path}.{os.getpid()}.partial"
    try:
        with open(tmp, "xb") as out:
            for c in chunks:
                out.write(c)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
