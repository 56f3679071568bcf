"""Joins a file's pieces into one `bytes`, copying the large pieces on several threads."""

from __future__ import annotations

import ctypes
import os
import sys
import threading

# Below this many bytes a single `b"".join` is as fast. Above it the time goes into faulting in
# and zeroing the new object's pages, which the kernel does for each thread's pages in parallel.
PARALLEL_BYTES = 64 << 20
# Large pieces are copied in slices of at most this many bytes, so threads get even shares.
SLICE_BYTES = 8 << 20
_MAX_THREADS = 4

if sys.implementation.name == "cpython":
    # The C API's way to fill a new bytes object: allocate it uninitialised, write, hand it out.
    _new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
    _new_bytes.restype = ctypes.py_object
    _new_bytes.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    _bytes_data = ctypes.pythonapi.PyBytes_AsString
    _bytes_data.restype = ctypes.c_void_p
    _bytes_data.argtypes = [ctypes.py_object]
else:
    _new_bytes = None


def _threads() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cpus, _MAX_THREADS)


def join_bytes(pieces) -> bytes:
    """`b"".join(pieces)` for bytes-like pieces; a large result is filled by several threads.

    Writable pieces (tensor data from `tensor_bytes`) are copied with `ctypes.memmove`, which
    releases the GIL; read-only pieces (the FlatBuffer, headers, padding) are copied on the
    calling thread meanwhile."""
    pieces = [p if isinstance(p, (bytes, memoryview)) else memoryview(p) for p in pieces]
    total = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in pieces)
    threads = _threads()
    if total < PARALLEL_BYTES or threads < 2 or _new_bytes is None:
        return b"".join(pieces)
    out = _new_bytes(None, total)
    base = _bytes_data(out)
    dest = memoryview((ctypes.c_char * total).from_address(base)).cast("B")
    jobs: list[tuple[int, int, int]] = []
    local: list[tuple[int, object]] = []
    offset = 0
    for p in pieces:
        view = p if isinstance(p, memoryview) else memoryview(p)
        n = view.nbytes
        if n >= SLICE_BYTES and not view.readonly and view.c_contiguous:
            src = ctypes.addressof(ctypes.c_char.from_buffer(view.cast("B")))
            for start in range(0, n, SLICE_BYTES):
                jobs.append((base + offset + start, src + start, min(SLICE_BYTES, n - start)))
        elif n:
            local.append((offset, view))
        offset += n

    def copy(share):
        for dst, src, n in share:
            ctypes.memmove(dst, src, n)

    workers = [threading.Thread(target=copy, args=(jobs[i::threads],), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    for at, view in local:
        dest[at:at + view.nbytes] = view.cast("B")
    for w in workers:
        w.join()
    dest.release()
    return out
