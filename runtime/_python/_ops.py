"""Resolves a program's operators to callables and binds each KernelCall's arguments once, at load."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from executorch.exir import schema
from executorch.runtime import _layout, _plugins
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._python import _kernels


class Dynamic:
    """An argument whose object is only known when the instruction runs (written by an earlier one)."""

    __slots__ = ("get",)

    def __init__(self, get: Callable[[], object]) -> None:
        self.get = get


Step = Callable[[], object]


@dataclass(frozen=True)
class Resolved:
    """One operator, ready to bind: `bind(args, store, specs)` returns the instruction's step.

    `stores` says whether the operator hands back a result for its last argument (a scalar
    written there, or a tensor copied into it) rather than writing its out tensors in place.
    `writes` lists the argument positions whose tensor memory the operator writes.
    """

    name: str
    bind: Callable[[list, Callable[[object], None], list], Step]
    stores: bool
    writes: tuple[int, ...]


def qualified_name(op: schema.Operator) -> str:
    return f"{op.name}.{op.overload}" if op.overload else op.name


def resolve(op: schema.Operator) -> Resolved:
    """Find the implementation of `op`, or raise naming it."""
    name = qualified_name(op)
    # The kernel tables name default overloads without a suffix, as ExecuTorch registers them.
    key = op.name if op.overload in ("", "default") else name
    if key in _kernels.SCALAR_KERNELS:
        return Resolved(name, functools.partial(_bind_scalar, name, _kernels.SCALAR_KERNELS[key]), True, ())
    if key in _kernels.DEVICE_COPIES:
        to_device = _kernels.DEVICE_COPIES[key]
        return Resolved(name, functools.partial(_bind_device_copy, name, to_device), False, (1, 2))
    if key in _kernels.TENSOR_KERNELS:
        fn, count, writes = _kernels.TENSOR_KERNELS[key]
        return Resolved(name, functools.partial(_bind_tensor_kernel, name, fn, count), False, writes)
    overload = _torch_overload(op)
    if overload is None:
        raise ExecuTorchError(
            f"operator {name} is not available in the Python runtime (torch {torch.__version__} has "
            f"no such op and it is not an ExecuTorch primitive); run the program on the native runtime "
            f"or export it without this op")
    sch = overload._schema
    stores = bool(sch.returns) and not any(a.is_out for a in sch.arguments)
    writes = [i for i, a in enumerate(sch.arguments) if a.alias_info is not None and a.alias_info.is_write]
    if stores:
        writes.append(len(sch.arguments))
    return Resolved(name, functools.partial(_bind_torch, name, overload), stores, tuple(writes))


def _torch_overload(op: schema.Operator) -> Optional[torch._ops.OpOverload]:
    namespace, sep, base = op.name.partition("::")
    overload = op.overload or "default"
    if namespace == "quantized_decomposed":
        # pt2e's q/dq out variants exist only once ExecuTorch defines them.
        from executorch.exir.dialects import _quantized_ops  # noqa: F401
    if not sep or any(not part.isidentifier() or part.startswith("__") for part in (namespace, base, overload)):
        return None
    # An operator library (ExecuTorch's LLM ops: "llama") defines its ops in torch when imported; an installed
    # package declares which namespace it defines, and programs name the ops only.
    _plugins.load(_plugins.OPERATOR_LIBRARIES, namespace)
    try:
        found = getattr(getattr(getattr(torch.ops, namespace), base), overload)
    except (AttributeError, RuntimeError):
        return None
    return found if isinstance(found, torch._ops.OpOverload) else None


def _check_count(name: str, args: list, expected: Sequence[int]) -> None:
    if len(args) not in expected:
        want = " or ".join(str(n) for n in expected)
        raise InvalidProgramError(f"a call to {name} passes {len(args)} arguments; the operator takes {want}")


def _freeze(values: Sequence) -> Optional[tuple]:
    """The values as a tuple when none is Dynamic, else None."""
    return None if any(isinstance(v, Dynamic) for v in values) else tuple(values)


def _getters(values: Sequence) -> list[Callable[[], object]]:
    return [v.get if isinstance(v, Dynamic) else (lambda v=v: v) for v in values]


def _bind_scalar(name: str, fn: Callable, args: list, store: Callable[[object], None], _specs: list) -> Step:
    if not args:
        raise InvalidProgramError(f"a call to {name} passes no arguments; it needs at least its result")
    inputs = args[:-1]
    frozen = _freeze(inputs)
    if frozen is not None:
        return lambda: store(fn(*frozen))
    getters = _getters(inputs)
    return lambda: store(fn(*[g() for g in getters]))


def _bind_tensor_kernel(name: str, fn: Callable, count: int, args: list, store, _specs: list) -> Step:
    _check_count(name, args, (count,))
    frozen = _freeze(args)
    if frozen is not None:
        return functools.partial(fn, *frozen)
    getters = _getters(args)
    return lambda: fn(*[g() for g in getters])


def _bind_device_copy(name: str, to_device: bool, args: list, _store, specs: list) -> Step:
    """`_h2d_copy.out(self, out)` / `_d2h_copy.out`: the bytes of `self` into `out` through the
    allocator of the device on the far side, checked at load: one side on the host, the other on a
    device, the same dtype and layout."""
    from executorch.runtime import device as devices

    _check_count(name, args, (3,))
    src, out = specs[0], specs[1]
    host = schema.DeviceType.CPU
    if src is None or out is None or specs[2] is not out:
        raise InvalidProgramError(f"a call to {name} does not pass tensors `self, out, out`")
    far, near = (out, src) if to_device else (src, out)
    if near.device[0] != host or far.device[0] == host:
        raise InvalidProgramError(
            f"a call to {name} copies {devices.device_name(src.device)} to {devices.device_name(out.device)}; it "
            f"copies {'host to device' if to_device else 'device to host'}; the file is corrupt, re-export it")
    if src.dtype != out.dtype or src.dim_order != out.dim_order:
        raise InvalidProgramError(f"a call to {name} copies between tensors of different dtypes or layouts")
    allocator = devices.require_allocator(far.device, f"a tensor {name} copies")
    move = allocator.copy_host_to_device if to_device else allocator.copy_device_to_host
    index = far.device[1]
    getters = _getters(args[:2])

    def step() -> None:
        s, o = getters[0](), getters[1]()
        _kernels.resize(o, s.shape)
        move(_bytes(o), _bytes(s), index)
    return step


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a dense tensor, as a flat uint8 tensor over its memory."""
    nbytes = t.numel() * t.element_size()
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage(), t.storage_offset() * t.element_size(), (nbytes,))


def _converter(arg: torch.Argument) -> Optional[Callable[[object], object]]:
    """How a program value becomes the argument torch expects (enums are ints in programs)."""
    kind = str(arg.real_type).removeprefix("Optional[").removesuffix("]")
    convert = {"ScalarType": _dtype_arg, "MemoryFormat": _layout.memory_format,
               "Layout": lambda code: torch.strided if code == 0 else _unsupported_layout(code),
               "Device": torch.device}.get(kind)
    if convert is None:
        return None
    return lambda v: v if v is None or not isinstance(v, (int, str)) or isinstance(v, bool) else convert(v)


def _dtype_arg(code: int) -> torch.dtype:
    dtype = _layout.to_dtype(code)
    if dtype is None:
        raise ExecuTorchError(f"dtype argument {_layout.dtype_name(code)} is not supported by the Python runtime")
    return dtype


def _unsupported_layout(code: int):
    raise ExecuTorchError(f"layout {code} is not supported by the Python runtime (only strided)")


def _bind_torch(name: str, overload: torch._ops.OpOverload, args: list, store, specs: list) -> Step:
    """Bind a torch operator: program args are the schema's arguments, then one result slot."""
    sch = overload._schema
    n = len(sch.arguments)
    _check_count(name, args, (n + 1,) if sch.returns else (n, n + 1))
    converted = []
    for arg, value in zip(sch.arguments, args):
        convert = _converter(arg)
        if convert is not None:
            value = Dynamic(lambda v=value, c=convert: c(v.get())) if isinstance(value, Dynamic) else convert(value)
        converted.append(value)
    n_pos = sum(1 for a in sch.arguments if not a.kwarg_only)
    keywords = [a.name for a in sch.arguments[n_pos:]]
    is_out = any(a.is_out for a in sch.arguments)
    # A dynamically shaped out tensor starts each call empty, so torch resizes it to the
    # result's shape (within its planned storage) without warning about a shape change;
    # not one the call also reads, which would lose its shape before it is read.
    read = {id(t) for a, v in zip(sch.arguments, converted) if not a.is_out
            for t in (v if isinstance(v, (list, tuple)) else (v,)) if isinstance(t, torch.Tensor)}
    reset = [t for a, t, spec in zip(sch.arguments, converted, specs)
             if a.is_out and isinstance(t, torch.Tensor) and id(t) not in read and spec is not None
             and spec.dynamism != schema.TensorShapeDynamism.STATIC]

    frozen = _freeze(converted)
    if frozen is not None:
        call: Step = functools.partial(overload, *frozen[:n_pos], **dict(zip(keywords, frozen[n_pos:])))
    else:
        getters = _getters(converted)
        pos_g, kw_g = getters[:n_pos], list(zip(keywords, getters[n_pos:]))
        call = lambda: overload(*[g() for g in pos_g], **{k: g() for k, g in kw_g})  # noqa: E731
    if reset:
        inner = call

        def call() -> object:
            for t in reset:
                t.resize_(0)
            return inner()
    if is_out or len(args) == n:
        return call
    return lambda: store(call())
