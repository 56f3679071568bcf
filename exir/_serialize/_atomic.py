"""Writes a file from pieces in order, atomically when given a path: a failed write leaves none.

A path is written through a temporary file beside its target, named `.<name>.<8 hex>.tmp` (`<name>`
cut to 64 characters, so the temporary's name fits wherever the target's does), flushed to disk and
renamed over the target, and the directory is flushed so the rename survives a crash. A process
killed mid-write cannot remove its temporary: the next successful write of the same target removes
those of its temporaries that are over an hour old (younger ones may belong to a write in progress).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time

STALE_AFTER_S = 3600
_NAME_CHARS = 64


def write_chunks(f, chunks) -> None:
    """Write `chunks` (bytes-like, in order) to an open binary file, or to a path via a temporary
    file renamed into place once complete. Writing through a symlink writes the file it names; an
    existing file keeps its permission bits, a new one gets the mode `open()` would give it. An
    OSError names the target path, whichever file operation failed."""
    if not isinstance(f, (str, os.PathLike)):
        for c in chunks:
            f.write(c)
        return
    target = os.path.realpath(f)
    try:
        _write(target, chunks)
    except OSError as e:
        if e.errno is None:
            raise
        raise OSError(e.errno, e.strerror, target) from None
    _remove_stale(target)


def _write(target: str, chunks) -> None:
    directory, name = os.path.split(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = _create(directory, name)
    try:
        with os.fdopen(fd, "wb") as out:
            for c in chunks:
                out.write(c)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):  # the error to report is the one that stopped the write
            os.unlink(tmp)
        raise
    _sync_directory(directory)


def _create(directory: str, name: str) -> tuple:
    """A new temporary file beside the target. Created with os.open's 0o666 rather than mkstemp's
    0o600, so the umask (and a default ACL) gives it the mode `open()` would give the target."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name[:_NAME_CHARS]}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name after 100 tries", directory)


def _sync_directory(directory: str) -> None:
    # Windows cannot open a directory; some file systems refuse to fsync one. The file is already in
    # place either way, so this durability step is best effort and never turns a write into a failure.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale(target: str) -> None:
    """Remove this target's temporaries (or those of a name with the same first 64 characters) left
    over an hour ago by writes that were killed."""
    directory, name = os.path.split(target)
    pattern = re.compile(re.escape(f".{name[:_NAME_CHARS]}.") + r"[0-9a-f]{8}\.tmp")
    cutoff = time.time() - STALE_AFTER_S
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False) and \
                    entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:
            continue  # gone already, or not ours to remove: it stays
