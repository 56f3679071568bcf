"""Device memory for the pure-Python runtime: one `DeviceAllocator` per device type, as the native
runtime's `DeviceAllocatorRegistry` (`executorch/runtime/core/device_allocator.h`).

A program whose delegates run on a device plans the delegates' side of the host/device copies in
arenas of that device (the plan's `non_const_buffer_device`). Loading such a method takes those
arenas from the device's allocator, and the `et_copy` kernels move bytes with its copy functions; a
method naming a device no allocator is registered for fails to load, naming it.
"""

from __future__ import annotations

import threading
from typing import Optional

import torch

from executorch.exir.schema import DeviceType
from executorch.runtime._errors import ExecuTorchError

__all__ = ["DeviceAllocator", "DeviceType", "get_device_allocator", "register_device_allocator"]


class DeviceAllocator:
    """Memory of one device type; subclass and set `device_type`.

    `allocate` returns a writable buffer (any object with the buffer protocol) the runtime places
    the arena's tensors in; the copies get flat uint8 tensors over the bytes to move."""

    device_type: DeviceType = DeviceType.CPU

    def allocate(self, nbytes: int, index: int):
        raise NotImplementedError

    def deallocate(self, buffer, index: int) -> None:
        """Release a buffer `allocate` returned (called when the method that holds it goes)."""

    def copy_host_to_device(self, dst: torch.Tensor, src: torch.Tensor, index: int) -> None:
        raise NotImplementedError

    def copy_device_to_host(self, dst: torch.Tensor, src: torch.Tensor, index: int) -> None:
        raise NotImplementedError


_lock = threading.Lock()
_registry: dict[DeviceType, DeviceAllocator] = {}


def register_device_allocator(allocator: DeviceAllocator) -> None:
    """Make `allocator` serve its `device_type`; a type registers once (again with the same object is a no-op)."""
    kind = getattr(allocator, "device_type", None)
    if not isinstance(kind, DeviceType) or kind == DeviceType.CPU:
        raise ExecuTorchError(
            f"a device allocator's device_type must be a non-CPU executorch.exir.schema.DeviceType, not {kind!r}")
    for method in ("allocate", "copy_host_to_device", "copy_device_to_host"):
        if not callable(getattr(allocator, method, None)):
            raise ExecuTorchError(f"device allocator {allocator!r} has no {method}(); subclass DeviceAllocator")
    with _lock:
        known = _registry.get(kind)
        if known is not None and known is not allocator:
            raise ExecuTorchError(f"a device allocator for {kind.name} is already registered; register one per type")
        _registry[kind] = allocator


def get_device_allocator(device_type: DeviceType) -> Optional[DeviceAllocator]:
    with _lock:
        return _registry.get(device_type)


def device_name(device: tuple) -> str:
    return f"{DeviceType(device[0]).name.lower()}:{device[1]}"


def require_allocator(device: tuple, what: str) -> DeviceAllocator:
    """The allocator of `device`, or an error saying `what` needs it and how to provide it."""
    allocator = get_device_allocator(DeviceType(device[0]))
    if allocator is None:
        raise ExecuTorchError(
            f"{what} lives on {device_name(device)}, and no device allocator for {DeviceType(device[0]).name} is "
            "registered with the Python runtime; register the device backend's allocator with "
            "executorch.runtime.device.register_device_allocator before loading")
    return allocator
