"""`one_torch_thread()`: run torch single-threaded while it computes a quantized program's reference."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch picks its convolution algorithm by its thread count: with more than one thread a 1x1
    convolution goes through oneDNN, with one through its gemm, and the two sum in different
    orders. In a quantized model an activation on a rounding boundary then lands one step apart and
    the steps compound (MobileNetV2's int8 outputs move 1.4e-2 of their range), so references are
    taken single-threaded, which does not depend on how many cores the machine has."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
