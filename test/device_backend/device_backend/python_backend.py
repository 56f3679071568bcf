"""TestDeviceBackend on the pure-Python runtime, with its "device": memory from an ordinary allocation
that only the device allocator's copies and the backend touch, so a program that hands the backend
host memory, or moves bytes without the copies, is caught."""

from __future__ import annotations

import ctypes

import torch

from executorch.exir.schema import DeviceType
from executorch.runtime import device, python_backend
from executorch.runtime._errors import ExecuTorchError

from device_backend.engine import parse_engine, run_engine
from device_backend.partitioner import BACKEND_ID
from device_backend.preprocess import parse_blob


class TestDeviceMemory(device.DeviceAllocator):
    """The "cuda" memory of the tests: blocks it hands out, and counts of what moved in and out."""

    __test__ = False  # not a pytest class
    device_type = DeviceType.CUDA

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[int, int]] = {}  # id(buffer) -> [start, end) address
        self.copies = {"h2d": 0, "d2h": 0}

    def allocate(self, nbytes: int, index: int):
        buf = bytearray(max(nbytes, 1))
        start = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
        self.blocks[id(buf)] = (start, start + len(buf))
        return buf

    def deallocate(self, buffer, index: int) -> None:
        self.blocks.pop(id(buffer), None)

    def owns(self, t: torch.Tensor) -> bool:
        start, nbytes = t.data_ptr(), t.numel() * t.element_size()
        return any(lo <= start and start + nbytes <= hi for lo, hi in self.blocks.values())

    def copy_host_to_device(self, dst, src, index: int) -> None:
        self._check(dst, src, "host_to_device")
        dst.copy_(src)
        self.copies["h2d"] += 1

    def copy_device_to_host(self, dst, src, index: int) -> None:
        self._check(src, dst, "device_to_host")
        dst.copy_(src)
        self.copies["d2h"] += 1

    def _check(self, on_device: torch.Tensor, on_host: torch.Tensor, what: str) -> None:
        if not self.owns(on_device) or self.owns(on_host):
            raise ExecuTorchError(f"copy_{what} was given the wrong memory (device side {self.owns(on_device)}, "
                                  f"host side {self.owns(on_host)})")


class TestDevicePythonBackend(python_backend.PythonBackend):
    __test__ = False  # not a pytest class

    def __init__(self, memory: TestDeviceMemory) -> None:
        self.memory = memory

    def init(self, processed, compile_specs, named_data):
        index, n_inputs, picks, engine = parse_blob(processed)
        specs = {s.key: bytes(s.value) for s in compile_specs}
        if specs.get("target_device") != f"cuda:{index}".encode():
            raise ExecuTorchError(f"TestDeviceBackend: compile specs name {specs.get('target_device')!r}, "
                                  f"the engine cuda:{index}")
        scale, shift = parse_engine(engine)
        return n_inputs, picks, scale, shift

    def execute(self, handle, args):
        n_inputs, picks, scale, shift = handle
        host = [i for i, t in enumerate(args) if not self.memory.owns(t)]
        if host:
            raise ExecuTorchError(f"TestDeviceBackend was handed host memory for arguments {host}")
        results = run_engine(list(args[:n_inputs]), scale, shift)
        for out, pick in zip(args[n_inputs:], picks):
            out.copy_(results[pick])


MEMORY = TestDeviceMemory()


def register() -> None:
    device.register_device_allocator(MEMORY)
    python_backend.register_backend(BACKEND_ID, TestDevicePythonBackend(MEMORY))
