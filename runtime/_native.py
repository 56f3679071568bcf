"""The native runtime backend: adapts the `_portable_lib` C++ module to the backend protocol.

Tensors cross as raw memory: an input's values, as a contiguous CPU tensor with no pending
negation or conjugation, are passed as (address, bytes, dtype, sizes), and each output is
copied into a fresh `torch.empty` tensor, so neither numpy nor libtorch is involved on the C++ side.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Optional, Sequence, Union

import torch

from executorch.extension.pybindings import _portable_lib as _lib
from executorch.runtime import _layout
from executorch.runtime._backend import Verification
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._meta import MethodMeta, TensorInfo

__all__ = ["NativeMethod", "NativeProgram", "load_program"]

_INVALID_PROGRAM = 0x23
THREADS_ENV = "EXECUTORCH_NUM_THREADS"

if not _lib._threadpool_env_ok():
    raise ExecuTorchError(
        f"{THREADS_ENV}={os.environ.get(THREADS_ENV)!r} is not a thread count; set it to an integer "
        f"from 1 to 256 (the native kernels' threads), or unset it to use every available CPU")


def _error(exc: "_lib.NativeError") -> ExecuTorchError:
    code, name, message = exc.args
    kind = InvalidProgramError if code == _INVALID_PROGRAM else ExecuTorchError
    return kind(f"{message} [{name}]")


def _tensor_info(entry: tuple) -> Optional[TensorInfo]:
    if entry[0] != "Tensor":
        return None
    _, dtype, sizes, _order, dynamism, planned = entry
    torch_dtype = _layout.to_dtype(dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size() if torch_dtype is not None else 0
    return TensorInfo(tuple(sizes), dtype, planned, math.prod(sizes) * itemsize, dynamism)


def _meta(raw: tuple) -> MethodMeta:
    name, inputs, outputs = raw[0], raw[1], raw[2]
    return MethodMeta.make(name, [_tensor_info(e) for e in inputs], [_tensor_info(e) for e in outputs])


def _is_identity(order: Sequence[int]) -> bool:
    return all(d == i for i, d in enumerate(order))


class NativeMethod:
    """A method loaded in the C++ runtime, with its own planned memory."""

    def __init__(self, method: "_lib.Method") -> None:
        self._method = method
        raw = method.meta()
        self._meta = _meta(raw)
        self._orders = [e[3] if e[0] == "Tensor" else None for e in raw[1]]
        # Inputs, run and outputs share the method's memory: one caller at a time.
        self._lock = threading.Lock()

    def meta(self) -> MethodMeta:
        return self._meta

    def execute(self, inputs: list) -> list:
        with self._lock:
            return self._execute_locked(inputs)

    def _execute_locked(self, inputs: list) -> list:
        keep = []  # inputs without planned memory are read in place during execute()
        try:
            for index, value in enumerate(inputs):
                if isinstance(value, torch.Tensor):
                    keep.append(self._set_tensor(index, value))
                else:
                    self._method.set_input_scalar(index, value)
            self._method.execute()
            return [self._output(i) for i in range(self._method.outputs_size())]
        except _lib.NativeError as exc:
            raise _error(exc) from None

    def _set_tensor(self, index: int, value: torch.Tensor) -> torch.Tensor:
        code = _layout.dtype_code(value.dtype)
        if code is None:
            raise ExecuTorchError(f"input {index}: dtype {value.dtype} has no ExecuTorch scalar type")
        data = value.detach().cpu()
        if data.is_neg() or data.is_conj():
            # A lazy negation or conjugation: the memory holds the values before it; apply it.
            data = data.resolve_conj().resolve_neg()
        order = self._orders[index]
        if order and not _is_identity(order):
            data = data.permute(order)  # the runtime expects memory in the input's dim order
        data = data.contiguous()
        self._method.set_input_tensor(index, data.data_ptr(), data.numel() * data.element_size(), code,
                                      list(value.shape))
        return data

    def _output(self, index: int) -> Union[torch.Tensor, int, float, bool, str, None]:
        entry = self._method.output(index)
        if entry[0] != "Tensor":
            if entry[0] in ("Int", "Double", "Bool", "None", "String"):
                return entry[1]
            raise ExecuTorchError(f"output {index} is a {entry[0]}, which the native runtime cannot return yet")
        _, code, sizes, order, nbytes = entry
        dtype = _layout.to_dtype(code)
        if dtype is None:
            raise ExecuTorchError(f"output {index} has {_layout.dtype_name(code)} elements, which torch cannot hold")
        physical = [sizes[d] for d in order] if order else list(sizes)
        out = torch.empty(physical, dtype=dtype)
        self._method.copy_output(index, out.data_ptr(), nbytes)
        if order and not _is_identity(order):
            out = out.permute([list(order).index(d) for d in range(len(order))])
        return out


class NativeProgram:
    """A program held by the C++ runtime (which keeps its own aligned copy of the bytes)."""

    def __init__(self, program: "_lib.Program") -> None:
        self._program = program
        self._names = list(program.method_names())

    @property
    def method_names(self) -> Sequence[str]:
        return self._names

    def method_meta(self, name: str) -> MethodMeta:
        try:
            return _meta(self._program.method_meta(name))
        except _lib.NativeError as exc:
            raise _error(exc) from None

    def load_method(self, name: str) -> NativeMethod:
        try:
            return NativeMethod(self._program.load_method(name))
        except _lib.NativeError as exc:
            raise _error(exc) from None

    def has_etdump(self) -> bool:
        return self._program.has_etdump()

    def etdump_result(self) -> tuple[bytes, bytes]:
        """The ETDump and the debug buffer the C++ ETDumpGen recorded since load."""
        return self._program.etdump_data(), self._program.debug_buffer()


def load_program(data: Union[bytes, memoryview],
                 verification: Verification = Verification.InternalConsistency,
                 external_data: Optional[Union[bytes, memoryview]] = None,
                 etdump_debug_buffer_size: Optional[int] = None) -> NativeProgram:
    """Load `.pte` bytes into the C++ runtime; malformed files raise InvalidProgramError.

    `verification` InternalConsistency (the default) runs the FlatBuffer verifier over the program
    table; Minimal skips it and checks only the header and root offset, for trusted files (a
    malformed one can then crash the process, as in ExecuTorch). With `etdump_debug_buffer_size`
    (0 or more) a C++ ETDumpGen records the loads and runs.
    """
    etdump = -1 if etdump_debug_buffer_size is None else etdump_debug_buffer_size
    verify = verification is not Verification.Minimal
    try:
        return NativeProgram(_lib.Program(data, verify, external_data, etdump))
    except _lib.NativeError as exc:
        raise _error(exc) from None


def operator_names() -> set[str]:
    """Operators the native runtime has kernels for ("aten::add.out", ...)."""
    return set(_lib.registered_kernels())


def registered_backend_names() -> list[str]:
    """The delegate backends linked into the native runtime."""
    return sorted(_lib.registered_backends())
