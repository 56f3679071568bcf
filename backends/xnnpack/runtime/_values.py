"""The payload's values, checked once: ids, dims, datatypes, quantization and constants as torch tensors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

import torch

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNPayload
from executorch.exir.error import SerializeError
from executorch.runtime._errors import InvalidProgramError

D = xs.XNNDatatype
# XNNPACK's limit on a value's rank.
MAX_DIMS = 6
# The published runtime refuses more externals than this (a corrupt count would size its tables).
MAX_EXTERNALS = 4096

# Element storage of each datatype this runtime runs; 4-bit constants are unpacked to int8.
STORAGE: dict[D, torch.dtype] = {
    D.xnn_datatype_fp32: torch.float32, D.xnn_datatype_fp16: torch.float16, D.xnn_datatype_bf16: torch.bfloat16,
    D.xnn_datatype_qint8: torch.int8, D.xnn_datatype_quint8: torch.uint8, D.xnn_datatype_qint32: torch.int32,
    D.xnn_datatype_qcint8: torch.int8, D.xnn_datatype_qcint32: torch.int32, D.xnn_datatype_qcint4: torch.int8,
    D.xnn_datatype_qbint4: torch.int8, D.xnn_datatype_qdint8: torch.int8, D.xnn_datatype_int32: torch.int32,
}
FLOATS = (D.xnn_datatype_fp32, D.xnn_datatype_fp16, D.xnn_datatype_bf16)
# Quantized datatypes whose values one scale and zero point describe.
PER_TENSOR = (D.xnn_datatype_qint8, D.xnn_datatype_quint8, D.xnn_datatype_qint32)
PER_CHANNEL = (D.xnn_datatype_qcint8, D.xnn_datatype_qcint32, D.xnn_datatype_qcint4)
FOUR_BIT = (D.xnn_datatype_qcint4, D.xnn_datatype_qbint4)
# Integer range of each quantized datatype.
QRANGE = {D.xnn_datatype_qint8: (-128, 127), D.xnn_datatype_quint8: (0, 255), D.xnn_datatype_qdint8: (-128, 127),
          D.xnn_datatype_qint32: (-2**31, 2**31 - 1), D.xnn_datatype_qcint8: (-128, 127),
          D.xnn_datatype_qcint32: (-2**31, 2**31 - 1), D.xnn_datatype_qcint4: (-8, 7), D.xnn_datatype_qbint4: (-8, 7)}


def bad(msg: str) -> InvalidProgramError:
    return InvalidProgramError(f"XnnpackBackend: malformed payload: {msg}; re-export the model")


@dataclass
class Value:
    """One XNNPACK value: its shape (upper bounds), datatype, quantization and constant data."""

    id: int
    slot: int  # its index in the execution environment
    dtype: D
    dims: tuple[int, ...]
    external_id: Optional[int]
    is_input: bool
    is_output: bool
    scale: Optional[torch.Tensor] = None  # float32: () per tensor, (C,) per channel, (O, blocks) per block
    zero_point: int = 0
    channel_dim: int = 0
    group_size: int = 0
    num_nonbatch_dims: int = 0
    const: Optional[torch.Tensor] = None  # constant data, in STORAGE[dtype], shaped `dims`

    @property
    def quantized(self) -> bool:
        return self.dtype not in FLOATS and self.dtype is not D.xnn_datatype_int32

    @property
    def qrange(self) -> tuple[int, int]:
        return QRANGE[self.dtype]

    def describe(self) -> str:
        return f"value {self.id} ({self.dtype.name}, dims {list(self.dims)})"


def _bf16_to_f32(raw: torch.Tensor) -> torch.Tensor:
    return (raw.to(torch.int32) << 16).view(torch.float32)


def _f32_to_bf16_as_xnnpack(scales: torch.Tensor) -> torch.Tensor:
    # XNNPACK's own fp32 -> bf16 step for inline block scales: scale up by 1+2^-8, then truncate.
    adjusted = (scales.to(torch.float32) * torch.tensor(1.00389105, dtype=torch.float32)).view(torch.int32)
    return (adjusted & ~0xFFFF).view(torch.float32)


def _unpack_int4(raw: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Two values a byte along the last dim (low nibble first), each row padded to whole bytes, zero point 8."""
    rows, n = math.prod(dims[:-1]), dims[-1]
    b = raw.reshape(rows, (n + 1) // 2)
    out = torch.stack(((b & 0xF), (b >> 4)), dim=-1).reshape(rows, -1)[:, :n]
    return (out.to(torch.int16) - 8).to(torch.int8).reshape(dims)


class ValueTable:
    """Every value of a graph by id, validated, with constants loaded as tensors."""

    def __init__(self, payload: XNNPayload, named_data: Mapping[str, memoryview]):
        self._payload, self._named = payload, dict(named_data)
        g = payload.graph
        if g.num_externs > MAX_EXTERNALS:
            raise bad(f"num_externs is {g.num_externs}, more than the {MAX_EXTERNALS} XNNPACK allows")
        self.values: list[Value] = []
        self.by_id: dict[int, Value] = {}
        for i, xv in enumerate(g.xvalues):
            v = self._value(i, xv)
            if v.id in self.by_id:
                raise bad(f"two values have id {v.id}")
            self.by_id[v.id] = v
            self.values.append(v)
        self.inputs = sorted((v for v in self.values if v.is_input), key=lambda v: v.external_id)
        self.outputs = sorted((v for v in self.values if v.is_output), key=lambda v: v.external_id)
        ext = [v.external_id for v in self.inputs + self.outputs]
        if len(set(ext)) != len(ext):
            raise bad(f"external ids {ext} repeat")

    def get(self, vid: int, what: str) -> Value:
        v = self.by_id.get(vid)
        if v is None:
            raise bad(f"{what} refers to value id {vid}, which the graph does not define")
        return v

    # ---- one value

    def _value(self, slot: int, xv: xs.XValue) -> Value:
        u = xv.xvalue_union
        if u is None:
            raise bad(f"value {slot} has no tensor")
        tv = xs.tensor_value(xv)
        if tv is None:
            raise bad(f"quantized value {slot} has no tensor_value")
        where = f"value {tv.id_out}"
        if tv.flags & ~(xs.XNN_VALUE_FLAG_EXTERNAL_INPUT | xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT):
            raise bad(f"{where} has unknown flag bits {tv.flags:#x}")
        if tv.datatype not in STORAGE:
            raise InvalidProgramError(
                f"XnnpackBackend: {where} has datatype {tv.datatype.name}, which this runtime does not run "
                f"(it runs {', '.join(d.name for d in STORAGE)}); lower without it or run on the native runtime")
        dims = tuple(tv.dims)
        if tv.num_dims != len(dims) or len(dims) > MAX_DIMS:
            raise bad(f"{where} declares {tv.num_dims} dims and lists {len(dims)} (at most {MAX_DIMS})")
        if any(d > 2**31 - 1 for d in dims):
            raise bad(f"{where} has a dim beyond int32: {list(dims)}")
        external = tv.flags != 0
        if external and not 0 <= tv.external_id < self._payload.graph.num_externs:
            raise bad(f"{where} is external with id {tv.external_id}, outside 0..{self._payload.graph.num_externs - 1}")
        v = Value(tv.id_out, slot, tv.datatype, dims, tv.external_id if external else None,
                  bool(tv.flags & xs.XNN_VALUE_FLAG_EXTERNAL_INPUT), bool(tv.flags & xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT))
        if isinstance(u, xs.XNNQuantizedTensorValue):
            self._quant(v, u.quant_params, where)
        elif v.quantized:
            raise bad(f"{where} is {v.dtype.name} but carries no quantization parameters")
        if tv.constant_buffer_idx:
            if external:
                raise bad(f"{where} is both external and constant")
            if v.dtype is D.xnn_datatype_qdint8:
                raise bad(f"{where} is dynamically quantized and constant")
            v.const = self._constant(tv.constant_buffer_idx, v, where)
        return v

    def _bytes(self, idx: int, where: str) -> memoryview:
        try:
            return self._payload.constant(idx, self._named)
        except SerializeError as e:
            raise bad(f"{where}: {str(e).removeprefix('XNNPACK payload: ')}") from None

    def _constant(self, idx: int, v: Value, where: str) -> torch.Tensor:
        data = self._bytes(idx, where)
        if v.dtype in FOUR_BIT:
            if not v.dims:
                raise bad(f"{where}: a 4-bit constant needs at least one dim")
            need = math.prod(v.dims[:-1]) * ((v.dims[-1] + 1) // 2)
        else:
            need = math.prod(v.dims) * STORAGE[v.dtype].itemsize
        if len(data) != need:
            raise bad(f"{where} holds {len(data)} bytes of constant data; its dims and datatype need {need}")
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if need else torch.empty(0, dtype=torch.uint8)
        if v.dtype in FOUR_BIT:
            return _unpack_int4(raw, v.dims)
        return raw.view(STORAGE[v.dtype]).reshape(v.dims)

    def _scales(self, buffer_idx: int, inline: list, count: int, bf16: bool, where: str) -> torch.Tensor:
        if buffer_idx:
            data = self._bytes(buffer_idx, where)
            width = 2 if bf16 else 4
            if len(data) != count * width:
                raise bad(f"{where}: its scale buffer holds {len(data)} bytes for {count} scales")
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if count else torch.empty(0, dtype=torch.uint8)
            return _bf16_to_f32(raw.view(torch.int16)) if bf16 else raw.view(torch.float32).clone()
        if len(inline) != count:
            raise bad(f"{where} has {len(inline)} inline scales, needs {count}")
        scales = torch.tensor(inline, dtype=torch.float32)
        return _f32_to_bf16_as_xnnpack(scales) if bf16 else scales

    def _quant(self, v: Value, qp, where: str) -> None:
        if isinstance(qp, xs.PerTensorQuant):
            if v.dtype not in PER_TENSOR:
                raise bad(f"{where} is {v.dtype.name} with per-tensor quantization")
            if not (math.isfinite(qp.scale) and qp.scale > 0):
                raise bad(f"{where} has scale {qp.scale}")
            lo, hi = QRANGE[v.dtype]
            if v.dtype is not D.xnn_datatype_qint32 and not lo <= qp.zero_point <= hi:
                raise bad(f"{where} has zero point {qp.zero_point} outside {lo}..{hi}")
            v.scale, v.zero_point = torch.tensor(qp.scale, dtype=torch.float32), qp.zero_point
        elif isinstance(qp, xs.PerChannelQuant):
            if v.dtype not in PER_CHANNEL:
                raise bad(f"{where} is {v.dtype.name} with per-channel quantization")
            if not 0 <= qp.channel_dim < len(v.dims):
                raise bad(f"{where} has channel_dim {qp.channel_dim} for {len(v.dims)} dims")
            v.channel_dim = qp.channel_dim
            v.scale = self._scales(qp.scale_buffer_idx, qp.scale, v.dims[qp.channel_dim], False, where)
        elif isinstance(qp, xs.PerChannelGroupQuant):
            if v.dtype is not D.xnn_datatype_qbint4:
                raise bad(f"{where} is {v.dtype.name} with blockwise quantization (only qbint4 has it)")
            if len(v.dims) != 2 or qp.channel_dim != 0:
                raise bad(f"{where}: blockwise quantization needs a 2-dim [out, in] value and channel_dim 0")
            out_ch, in_ch = v.dims
            if qp.group_size <= 0 or in_ch % qp.group_size:
                raise bad(f"{where} has group size {qp.group_size} for {in_ch} input channels")
            count = out_ch * (in_ch // qp.group_size)
            if qp.scale_buffer_idx and qp.num_scales != count:
                raise bad(f"{where} declares {qp.num_scales} scales, needs {count}")
            v.group_size = qp.group_size
            v.scale = self._scales(qp.scale_buffer_idx, qp.scale, count, True, where).reshape(out_ch, -1)
        elif isinstance(qp, xs.PerTokenDynamicQuant):
            if v.dtype is not D.xnn_datatype_qdint8:
                raise bad(f"{where} is {v.dtype.name} with per-token dynamic quantization")
            if not 0 < qp.num_nonbatch_dims <= len(v.dims):
                raise bad(f"{where} has num_nonbatch_dims {qp.num_nonbatch_dims} for {len(v.dims)} dims")
            v.num_nonbatch_dims = qp.num_nonbatch_dims
        else:
            raise bad(f"{where} has no quantization parameters")
        if v.scale is not None and v.scale.numel() and not bool(torch.isfinite(v.scale).all()):
            raise bad(f"{where} has a non-finite scale")
        if v.dtype in FOUR_BIT and not isinstance(qp, (xs.PerChannelQuant, xs.PerChannelGroupQuant)):
            raise bad(f"{where} is 4-bit without per-channel or blockwise scales")
