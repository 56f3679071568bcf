"""Zero-copy byte views over tensor memory, so constant data reaches the file without copies."""

from __future__ import annotations

import ctypes
import sys

import torch


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of a CPU tensor's elements in dense (contiguous) order, without copying when
    the tensor is already dense. The view keeps `t` alive only through the caller: hold `t`."""
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return memoryview(b"")
    raw = (ctypes.c_char * nbytes).from_address(t.data_ptr())
    view = memoryview(raw).cast("B")
    # Tie the tensor's lifetime to the view's buffer so the memory can't be freed under it.
    raw._owner = t  # type: ignore[attr-defined]
    return view


_libc = ctypes.cdll.msvcrt if sys.platform == "win32" else ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def same_bytes(a: memoryview, b: memoryview) -> bool:
    """Whether two views from `tensor_bytes` hold the same bytes. memcmp stops at the first
    difference, so telling distinct weights apart costs almost nothing, where hashing every
    constant cost a full pass over the model's weights."""
    if len(a) != len(b):
        return False
    if not len(a):
        return True
    return _memcmp(ctypes.addressof(ctypes.c_char.from_buffer(a)),
                   ctypes.addressof(ctypes.c_char.from_buffer(b)), len(a)) == 0
