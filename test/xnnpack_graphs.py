"""Hand-made XNNPACK payloads wrapped in one-delegate programs, for the XnnpackBackend runtime tests."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import serialize_xnnpack_binary
from executorch.exir import schema as s
from executorch.exir._serialize import serialize_pte_binary

from runtime_programs import PlanBuilder

D = xs.XNNDatatype
FP32 = D.xnn_datatype_fp32


class GraphBuilder:
    """Values, nodes and a constant region; external ids are given in the order inputs, then outputs."""

    def __init__(self) -> None:
        self.values: list[xs.XValue] = []
        self.nodes: list[xs.XNode] = []
        self.constants = [xs.ConstantDataOffset(0, 0)]
        self.blob = bytearray()
        self.externs = 0

    def _add(self, dims, dtype, flags, const_idx, quant) -> int:
        vid = len(self.values)
        ext = xs.XNN_INVALID_VALUE_ID
        if flags:
            ext, self.externs = self.externs, self.externs + 1
        tv = xs.XNNTensorValue(dtype, len(dims), list(dims), const_idx, ext, flags, vid)
        self.values.append(xs.XValue(tv if quant is None else xs.XNNQuantizedTensorValue(tv, quant)))
        return vid

    def input(self, dims: Sequence[int], dtype=FP32, quant=None) -> int:
        return self._add(dims, dtype, xs.XNN_VALUE_FLAG_EXTERNAL_INPUT, 0, quant)

    def output(self, dims: Sequence[int], dtype=FP32, quant=None) -> int:
        return self._add(dims, dtype, xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT, 0, quant)

    def internal(self, dims: Sequence[int], dtype=FP32, quant=None) -> int:
        return self._add(dims, dtype, 0, 0, quant)

    def data(self, raw: bytes) -> int:
        """Bytes in the constant region; returns their constant_data index."""
        self.blob.extend(bytes(-len(self.blob) % 16))
        self.constants.append(xs.ConstantDataOffset(len(self.blob), len(raw)))
        self.blob.extend(raw)
        return len(self.constants) - 1

    def const(self, t: torch.Tensor, dtype=FP32, quant=None, dims: Optional[Sequence[int]] = None) -> int:
        raw = bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return self._add(list(t.shape) if dims is None else dims, dtype, 0, self.data(raw), quant)

    def node(self, n, mm: Optional[tuple[float, float]] = None) -> None:
        self.nodes.append(xs.XNode(n, len(self.nodes), None if mm is None else xs.OutputMinMax(*mm)))

    def graph(self) -> xs.XNNGraph:
        ins = [i for i, v in enumerate(self.values) if xs.tensor_value(v).flags & 1]
        outs = [i for i, v in enumerate(self.values) if xs.tensor_value(v).flags & 2]
        return xs.XNNGraph("0", self.nodes, self.values, self.externs, ins, outs, constant_data=self.constants)

    def payload(self) -> bytes:
        return serialize_xnnpack_binary(self.graph(), bytes(self.blob))


def delegate_program(payload: bytes, inputs: Sequence[tuple], outputs: Sequence[tuple],
                     dynamic: bool = False) -> bytes:
    """A .pte whose forward is one DelegateCall to XnnpackBackend. Each input/output is (sizes, dtype)
    or (sizes, dtype, dim_order); sizes are upper bounds when `dynamic`."""
    b = PlanBuilder(arena_size=0)
    dynamism = s.TensorShapeDynamism.DYNAMIC_BOUND if dynamic else s.TensorShapeDynamism.STATIC
    offset, ids = 0, []
    for spec in list(inputs) + list(outputs):
        sizes, dtype = spec[0], spec[1]
        order = spec[2] if len(spec) > 2 else None
        ids.append(b.tensor(sizes, offset, dtype, dynamism=dynamism, dim_order=order))
        offset += -(-math.prod(sizes) * dtype.itemsize // 16) * 16
    b.arena_size = max(offset, 16)
    b.inputs, b.outputs = ids[:len(inputs)], ids[len(inputs):]
    b.instructions.append(s.Instruction(s.DelegateCall(0, ids)))
    program = b.program()
    program.execution_plan[0].delegates = [
        s.BackendDelegate("XnnpackBackend", s.BackendDelegateDataReference(s.DataLocation.INLINE, 0), [])]
    program.backend_delegate_data = [s.BackendDelegateInlineData(payload)]
    return serialize_pte_binary(program)
