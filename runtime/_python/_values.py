"""Turns an ExecutionPlan's values into Python objects: tensors bound to arenas or constant data, scalars, lists."""

from __future__ import annotations

import mmap
import warnings
from dataclasses import dataclass
from typing import Optional, Union

import torch

from executorch.exir import schema
from executorch.exir.tensor import stride_from_dim_order
from executorch.runtime import _layout
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError


@dataclass(frozen=True)
class TensorSpec:
    """What the program says about one tensor value, kept for input checks and metadata."""

    dtype: torch.dtype
    code: int
    sizes: tuple[int, ...]  # the upper bound when dynamic
    dim_order: tuple[int, ...]
    dynamism: schema.TensorShapeDynamism
    planned: bool
    constant: bool
    nbytes: int
    device: tuple = (schema.DeviceType.CPU, 0)  # where its memory is: (DeviceType, index)


SHARED_ARENA = 2  # the memory id every method of a program shares: state such as a KV cache


class SharedArena:
    """Memory arena 2 of a program, one block for all its methods (sized to the largest claim), so
    methods exported with shared mutable buffers read and write one state, as in ExecuTorch."""

    def __init__(self, program: schema.Program) -> None:
        sizes = [p.non_const_buffer_sizes[SHARED_ARENA] for p in program.execution_plan
                 if len(p.non_const_buffer_sizes) > SHARED_ARENA]
        self.memory = _arena("(shared by all methods)", SHARED_ARENA, max(sizes, default=0))
        self.initialized: set[int] = set()  # offsets whose initial contents are already loaded


class PlanValues:
    """The runtime objects of one execution plan, indexed like `plan.values`."""

    def __init__(self, program: schema.Program, plan: schema.ExecutionPlan, external=None,
                 shared: Optional[SharedArena] = None) -> None:
        self._program = program
        self._external = external
        self._plan = plan
        self._shared = shared
        self.arena_devices = _arena_devices(plan)
        self.arenas = [shared.memory if i == SHARED_ARENA and shared is not None and i not in self.arena_devices
                       else _arena(plan.name, i, size, self.arena_devices.get(i))
                       for i, size in enumerate(plan.non_const_buffer_sizes)]
        self.objects: list[object] = [None] * len(plan.values)
        self.specs: dict[int, TensorSpec] = {}
        # Scalars and tensors first, so that lists can refer to any of them.
        for index, evalue in enumerate(plan.values):
            if not isinstance(evalue, schema.EValue) or not isinstance(evalue.val, schema.KERNEL_TYPES):
                raise InvalidProgramError(f"value {index} of method {plan.name!r} has no valid kind")
            self.objects[index] = self._leaf(index, evalue.val)
        for index, evalue in enumerate(plan.values):
            if isinstance(evalue.val, _LIST_TYPES):
                self.objects[index] = self.list_value(index)

    def kind(self, index: int) -> type:
        return type(self._plan.values[index].val)

    def list_value(self, index: int) -> list:
        """Materialize list value `index` from the current objects it refers to."""
        val = self._plan.values[index].val
        if isinstance(val, (schema.DoubleList, schema.BoolList)):
            return list(val.items)
        if isinstance(val, schema.IntList):
            return [self.objects[i] for i in self.list_refs(index)]
        return [None if i == -1 else self.objects[i] for i in self.list_refs(index)]

    def list_refs(self, index: int) -> list[int]:
        """The value indices a list refers to (-1 for an absent optional tensor), checked."""
        val = self._plan.values[index].val
        if isinstance(val, (schema.DoubleList, schema.BoolList)):
            return []
        allowed = {schema.IntList: (schema.Int,), schema.TensorList: (schema.Tensor,),
                   schema.OptionalTensorList: (schema.Tensor, schema.Null)}[type(val)]
        for ref in val.items:
            if isinstance(val, schema.OptionalTensorList) and ref == -1:
                continue
            if not 0 <= ref < len(self._plan.values) or not isinstance(self._plan.values[ref].val, allowed):
                raise InvalidProgramError(
                    f"{type(val).__name__} value {index} of method {self._plan.name!r} refers to "
                    f"value {ref}, which is not a {' or '.join(t.__name__ for t in allowed)}")
        return list(val.items)

    def _leaf(self, index: int, val: object) -> object:
        if isinstance(val, schema.Null):
            return None
        if isinstance(val, schema.Int):
            return int(val.int_val)
        if isinstance(val, schema.Bool):
            return bool(val.bool_val)
        if isinstance(val, schema.Double):
            return float(val.double_val)
        if isinstance(val, schema.String):
            return str(val.string_val)
        if isinstance(val, schema.Tensor):
            return self._tensor(index, val)
        return None  # a list, filled in once every leaf exists

    def _tensor(self, index: int, t: schema.Tensor) -> torch.Tensor:
        where = f"tensor value {index} of method {self._plan.name!r}"
        dtype = _layout.to_dtype(t.scalar_type)
        if dtype is None:
            if int(t.scalar_type) in schema.ScalarType._value2member_map_:
                raise ExecuTorchError(
                    f"{where} has dtype {_layout.dtype_name(t.scalar_type)}, which the Python runtime "
                    f"cannot hold; run this program on the native runtime")
            raise InvalidProgramError(f"{where} has unknown scalar type {t.scalar_type}")
        sizes = tuple(int(s) for s in t.sizes)
        if any(s < 0 for s in sizes):
            raise InvalidProgramError(f"{where} has a negative size in {list(sizes)}")
        dim_order = tuple(t.dim_order) if len(t.dim_order) or sizes else ()
        if not _layout.is_permutation(dim_order, len(sizes)):
            raise InvalidProgramError(
                f"{where} has dim_order {list(dim_order)}, not a permutation of its {len(sizes)} dims")
        nbytes = _layout.numel(sizes) * dtype.itemsize
        strides = stride_from_dim_order(sizes, dim_order)
        extra = t.extra_tensor_info
        external = extra is not None and extra.location == schema.TensorDataLocation.EXTERNAL
        planned = t.allocation_info is not None
        constant = not planned and (t.data_buffer_idx > 0 or external)
        device = (extra.device_type, extra.device_index) if extra is not None else (schema.DeviceType.CPU, 0)
        self.specs[index] = TensorSpec(dtype, int(t.scalar_type), sizes, dim_order,
                                       schema.TensorShapeDynamism(t.shape_dynamism), planned, constant, nbytes,
                                       device)
        if planned:
            storage = self._planned_storage(where, t.allocation_info, nbytes)
            if t.data_buffer_idx > 0 and self._first_load(t.allocation_info):
                storage.copy_(self._mutable_initial_data(where, t.data_buffer_idx, nbytes))
        elif external:
            storage = self._external_storage(where, extra.fully_qualified_name, t, nbytes)
            if storage.data_ptr() % dtype.itemsize:
                storage = storage.clone()
        elif constant:
            storage = self._constant_storage(where, t.data_buffer_idx, nbytes)
            if storage.data_ptr() % dtype.itemsize:
                # Read in place only when aligned for its element type (files align them).
                storage = storage.clone()
        elif t.shape_dynamism == schema.TensorShapeDynamism.DYNAMIC_UNBOUND:
            storage = torch.empty(nbytes, dtype=torch.uint8).untyped_storage()
        else:
            storage = _fixed_storage(_zeroed(nbytes, where))
        if dtype == torch.bool and (t.data_buffer_idx > 0 or external):
            _check_bool_bytes(where, storage)
        return torch.empty(0, dtype=dtype).set_(storage, 0, sizes, strides)

    def _first_load(self, alloc: schema.AllocationDetails) -> bool:
        """Whether this tensor's initial contents are still to load: shared state is loaded by the
        first method that holds it, so loading another method later does not reset it."""
        if alloc.memory_id != SHARED_ARENA or self._shared is None:
            return True
        if alloc.memory_offset in self._shared.initialized:
            return False
        self._shared.initialized.add(alloc.memory_offset)
        return True

    def _planned_storage(self, where: str, alloc: schema.AllocationDetails, nbytes: int) -> torch.UntypedStorage:
        mem_id, offset = alloc.memory_id, alloc.memory_offset
        if not 1 <= mem_id < len(self.arenas):
            raise InvalidProgramError(
                f"{where} is planned in memory arena {mem_id}, but the method has arenas 1..{len(self.arenas) - 1}")
        arena = self.arenas[mem_id]
        if offset + nbytes > len(arena):
            raise InvalidProgramError(
                f"{where} needs bytes {offset}..{offset + nbytes} of arena {mem_id}, which has {len(arena)}")
        # A storage of exactly this tensor's planned bytes: a kernel that tries to grow the
        # tensor past its plan fails instead of overwriting its neighbours.
        memory = arena.view if isinstance(arena, _DeviceArena) else memoryview(arena)
        return _fixed_storage(memory[offset:offset + nbytes])

    def _external_storage(self, where: str, key: Optional[str], t: schema.Tensor, nbytes: int) -> torch.UntypedStorage:
        if self._external is None:
            raise ExecuTorchError(
                f"{where} keeps its data in a .ptd file (key {key!r}); pass it: "
                "load_program(pte, data_path='model.ptd')")
        entry = self._external.get(key)
        if entry is None:
            raise ExecuTorchError(
                f"{where} needs tensor {key!r}, which the .ptd does not hold; pass the .ptd written with this .pte")
        layout = entry.tensor_layout
        if layout is not None:
            want = (int(t.scalar_type), list(t.sizes))
            got = (int(layout.scalar_type), list(layout.sizes))
            if want != got:
                raise ExecuTorchError(
                    f"tensor {key!r} in the .ptd is {_layout.dtype_name(got[0])} {got[1]} but the program needs "
                    f"{_layout.dtype_name(want[0])} {want[1]}; pass the .ptd written with this .pte")
        if len(entry.data) != nbytes:
            raise ExecuTorchError(
                f"tensor {key!r} in the .ptd holds {len(entry.data)} bytes but the program needs {nbytes}; "
                "pass the .ptd written with this .pte")
        return _fixed_storage(entry.data)

    def _constant_storage(self, where: str, buffer_idx: int, nbytes: int) -> torch.UntypedStorage:
        buffers = self._program.constant_buffer
        if buffer_idx >= len(buffers):
            raise InvalidProgramError(
                f"{where} refers to constant buffer {buffer_idx}, but the program has {len(buffers)}")
        data = memoryview(buffers[buffer_idx].storage).cast("B")
        if len(data) < nbytes:
            raise InvalidProgramError(
                f"{where} needs {nbytes} bytes but constant buffer {buffer_idx} holds {len(data)}")
        return _fixed_storage(data[:nbytes])

    def _mutable_initial_data(self, where: str, buffer_idx: int, nbytes: int) -> torch.UntypedStorage:
        segments = self._program.mutable_data_segments or []
        if not segments:
            raise InvalidProgramError(f"{where} has initial data {buffer_idx} "
                                      f"but the program has no mutable data segment")
        sub = segments[0]
        if not 0 <= sub.segment_index < len(self._program.segment_data) or buffer_idx >= len(sub.offsets):
            raise InvalidProgramError(f"{where} refers to mutable data {buffer_idx}, which the program does not hold")
        raw = memoryview(self._program.segment_data[sub.segment_index]).cast("B")
        start = sub.offsets[buffer_idx]
        if start + nbytes > len(raw):
            raise InvalidProgramError(f"{where} needs mutable data bytes {start}..{start + nbytes}, "
                                      f"past the segment's {len(raw)}")
        return _fixed_storage(raw[start:start + nbytes])


def _check_bool_bytes(where: str, storage: torch.UntypedStorage) -> None:
    """Refuses bool data from the file holding a byte other than 0/1 (torch reads bools as C++ bool)."""
    raw = torch.empty(0, dtype=torch.uint8).set_(storage)
    if raw.numel() and int(raw.max()) > 1:
        raise InvalidProgramError(f"{where} is a bool tensor holding byte {int(raw.max())}; bools must be 0 or 1")


_MAP_THRESHOLD = 1 << 16
_LIST_TYPES = (schema.IntList, schema.DoubleList, schema.BoolList, schema.TensorList, schema.OptionalTensorList)


def _arena(method: str, index: int, size: int, device: Optional[tuple] = None):
    if size < 0:
        raise InvalidProgramError(f"memory arena {index} of method {method!r} has negative size {size}")
    if device is not None:
        return _DeviceArena(method, index, size, device)
    # Arena 0 is reserved for constants and never allocated.
    return _zeroed(size if index > 0 else 0, f"memory arena {index} of method {method!r}")


class _DeviceArena:
    """A planned arena in a device's memory, from its registered allocator; given back when dropped."""

    def __init__(self, method: str, index: int, size: int, device: tuple) -> None:
        import weakref

        from executorch.runtime import device as devices

        allocator = devices.require_allocator(device, f"memory arena {index} of method {method!r}")
        memory = allocator.allocate(size, device[1])
        view = memoryview(memory).cast("B")
        if len(view) < size or view.readonly:
            raise ExecuTorchError(
                f"the {devices.device_name(device)} allocator returned {len(view)} "
                f"{'read-only ' if view.readonly else ''}bytes for memory arena {index} of method {method!r}, "
                f"which needs {size} writable bytes")
        self.view = view[:size]
        weakref.finalize(self, allocator.deallocate, memory, device[1])

    def __len__(self) -> int:
        return len(self.view)


def _arena_devices(plan: schema.ExecutionPlan) -> dict[int, tuple]:
    """Memory arena -> (DeviceType, index) for the arenas the plan puts on a device."""
    found: dict[int, tuple] = {}
    for entry in plan.non_const_buffer_device or ():
        if not 1 <= entry.buffer_idx < len(plan.non_const_buffer_sizes) or entry.buffer_idx in found:
            raise InvalidProgramError(
                f"method {plan.name!r} places memory arena {entry.buffer_idx} on a device, but its arenas are "
                f"1..{len(plan.non_const_buffer_sizes) - 1} (each listed once); the file is corrupt, re-export it")
        if entry.device_type != schema.DeviceType.CPU:
            found[entry.buffer_idx] = (entry.device_type, entry.device_index)
    return found


def _zeroed(nbytes: int, what: str) -> Union[bytearray, mmap.mmap]:
    """Zeroed writable memory; large blocks are mapped, so untouched pages cost nothing."""
    if nbytes < _MAP_THRESHOLD:
        return bytearray(nbytes)
    try:
        return mmap.mmap(-1, nbytes)
    except (OSError, OverflowError, ValueError, MemoryError) as exc:
        raise ExecuTorchError(f"{what} needs {nbytes} bytes, which cannot be allocated ({exc})") from None


def _fixed_storage(buf) -> torch.UntypedStorage:
    """A non-resizable storage over `buf`'s memory (zero-copy)."""
    if len(buf) == 0:
        return torch.UntypedStorage(0)
    with warnings.catch_warnings():
        # Constant data may be read-only; the runtime never writes to it.
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(buf, dtype=torch.uint8).untyped_storage()
