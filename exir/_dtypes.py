"""The dtype table: every `.pte` ScalarType with its torch dtype, element size and who can hold it.

The one home of these facts: the edge check, the emitter, the serializer, both runtimes and the
CLI read this table. Torch dtypes are named, not imported, so readers of `.pte` files that need
no torch (the serializer, the CLI summary) do not load it. To add a dtype, add one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from executorch.exir.schema import ScalarType

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    """One row: `name` is the torch dtype's name (`torch.<name>`); `exportable` says programs may
    hold tensors of it; `runtime` says the Python runtime can hold them as torch tensors; `cpp_name` is
    the runtime's C++ name (`executorch::aten::ScalarType::Float`), which its bindings print."""

    scalar_type: ScalarType
    name: str
    itemsize: int
    exportable: bool
    runtime: bool
    cpp_name: str


_T = ScalarType
DTYPES: tuple[DType, ...] = (
    DType(_T.BYTE, "uint8", 1, True, True, "Byte"),
    DType(_T.CHAR, "int8", 1, True, True, "Char"),
    DType(_T.SHORT, "int16", 2, True, True, "Short"),
    DType(_T.INT, "int32", 4, True, True, "Int"),
    DType(_T.LONG, "int64", 8, True, True, "Long"),
    DType(_T.HALF, "float16", 2, True, True, "Half"),
    DType(_T.FLOAT, "float32", 4, True, True, "Float"),
    DType(_T.DOUBLE, "float64", 8, True, True, "Double"),
    DType(_T.BOOL, "bool", 1, True, True, "Bool"),
    DType(_T.QINT8, "qint8", 1, False, False, "QInt8"),
    DType(_T.QUINT8, "quint8", 1, False, False, "QUInt8"),
    DType(_T.QINT32, "qint32", 4, False, False, "QInt32"),
    DType(_T.BFLOAT16, "bfloat16", 2, True, True, "BFloat16"),
    DType(_T.QUINT4X2, "quint4x2", 1, False, False, "QUInt4x2"),
    DType(_T.QUINT2X4, "quint2x4", 1, False, False, "QUInt2x4"),
    DType(_T.BITS16, "bits16", 2, False, False, "Bits16"),
    DType(_T.FLOAT8E5M2, "float8_e5m2", 1, False, True, "Float8_e5m2"),
    DType(_T.FLOAT8E4M3FN, "float8_e4m3fn", 1, False, True, "Float8_e4m3fn"),
    DType(_T.FLOAT8E5M2FNUZ, "float8_e5m2fnuz", 1, False, True, "Float8_e5m2fnuz"),
    DType(_T.FLOAT8E4M3FNUZ, "float8_e4m3fnuz", 1, False, True, "Float8_e4m3fnuz"),
    DType(_T.UINT16, "uint16", 2, True, True, "UInt16"),
    DType(_T.UINT32, "uint32", 4, True, True, "UInt32"),
    DType(_T.UINT64, "uint64", 8, True, True, "UInt64"),
)
del _T

_BY_CODE: dict[int, DType] = {int(d.scalar_type): d for d in DTYPES}
_BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES}


def row(code: int) -> Optional[DType]:
    """The row of a ScalarType code, or None for a code the schema does not define."""
    return _BY_CODE.get(int(code))


def element_size(code: int) -> Optional[int]:
    """Bytes per element of a ScalarType code, or None for an unknown code."""
    d = _BY_CODE.get(int(code))
    return d.itemsize if d is not None else None


def dtype_name(code: int) -> str:
    """A readable name for a ScalarType code (`float32`), also for codes no row holds."""
    d = _BY_CODE.get(int(code))
    return d.name if d is not None else f"scalar type {int(code)}"


def cpp_dtype_name(code: int) -> str:
    """The C++ runtime's name for a ScalarType code (`Float`), as the bindings print it."""
    d = _BY_CODE.get(int(code))
    return d.cpp_name if d is not None else f"ScalarType({int(code)})"


def _row_of(dtype: "torch.dtype") -> Optional[DType]:
    return _BY_NAME.get(str(dtype).removeprefix("torch."))


def is_exportable(dtype: "torch.dtype") -> bool:
    """Whether a program may hold tensors of this torch dtype."""
    d = _row_of(dtype)
    return d is not None and d.exportable


def exportable_names() -> list[str]:
    """The names of the dtypes programs may hold, for error messages."""
    return sorted(d.name for d in DTYPES if d.exportable)


def scalar_type(dtype: "torch.dtype") -> ScalarType:
    """The ScalarType of a torch dtype programs may hold; KeyError for any other."""
    d = _row_of(dtype)
    if d is None or not d.exportable:
        raise KeyError(dtype)
    return d.scalar_type


def runtime_code(dtype: "torch.dtype") -> Optional[int]:
    """The ScalarType code of a torch dtype the Python runtime holds, or None."""
    d = _row_of(dtype)
    return int(d.scalar_type) if d is not None and d.runtime else None


_TORCH: dict[int, "torch.dtype"] = {}


def to_torch(code: int) -> Optional["torch.dtype"]:
    """The torch dtype the Python runtime uses for a ScalarType code, or None when it holds none."""
    if not _TORCH:
        import torch

        _TORCH.update({int(d.scalar_type): getattr(torch, d.name) for d in DTYPES if d.runtime})
    return _TORCH.get(int(code))
