"""`XnnGraphBuilder`: the XNNGraph under construction, its values, constants and NCHW/NHWC copies.

XNNPACK's convolutions and pools read NHWC; a program's tensors are NCHW. Each fx value may
exist in both layouts: the builder records the layout an op produced and inserts a transpose
the first time a consumer asks for the other one, so a chain of NHWC ops pays for one
transpose in and one out (a value whose moved dims are all 1 is reshaped, not transposed).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from typing import Callable, Optional

import torch

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import CONSTANT_TENSOR_ALIGNMENT
from executorch.backends.xnnpack.utils.quant_utils import QParams
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir._tensor_data import tensor_bytes
from executorch.exir.error import ExportError
from executorch.exir.tensor import shape_upper_bound

NCHW, NHWC = "nchw", "nhwc"
PERM_NCHW_TO_NHWC = [0, 2, 3, 1]
PERM_NHWC_TO_NCHW = [0, 3, 1, 2]
DEFAULT_DEBUG_HANDLE = 65535
INVALID = xs.XNN_INVALID_VALUE_ID

_DTYPES = {torch.float32: xs.XNNDatatype.xnn_datatype_fp32, torch.float16: xs.XNNDatatype.xnn_datatype_fp16}

# op overload -> visitor(builder, node); filled by the op_* modules through `register`.
VISITORS: dict = {}


def register(*ops) -> Callable:
    def deco(fn):
        for op in ops:
            VISITORS[op] = fn
        return fn

    return deco


def node_val(node: torch.fx.Node):
    val = node.meta["val"]
    return val[0] if isinstance(val, (tuple, list)) else val


def shape(node: torch.fx.Node) -> list[int]:
    """`node`'s dims, a symbolic one at its upper bound (XNNPACK resizes the value to each call's inputs)."""
    dims = [shape_upper_bound(d) for d in node_val(node).shape]
    if None in dims:
        raise ExportError(f"XNNPACK: value '{node.name}' has an unbounded dimension; give each dynamic "
                          "dimension a maximum, e.g. torch.export.Dim('n', max=1024)")
    return dims


def new_shape(node: torch.fx.Node) -> list[int]:
    """`node`'s dims as a reshape's new shape: a symbolic one (one at most, see ViewCopyConfig) as 0, inferred."""
    return [d if isinstance(d, int) else 0 for d in node_val(node).shape] or [1]


def to_layout(dims: list, layout: str) -> list:
    return [dims[i] for i in PERM_NCHW_TO_NHWC] if layout == NHWC else list(dims)


class XnnGraphBuilder:
    """Builds one partition's XNNGraph; `consts` maps constant placeholders to their tensors."""

    def __init__(self, graph: torch.fx.Graph, consts: dict, store: NamedDataStore) -> None:
        self.fx_graph = graph
        self.consts = consts
        self.store = store
        self.graph = xs.XNNGraph(version="0", xnodes=[], xvalues=[], num_externs=0, input_ids=[], output_ids=[],
                                 constant_data=[xs.ConstantDataOffset(0, 0)])
        self.values: dict[torch.fx.Node, dict[str, int]] = {}
        self.native: dict[torch.fx.Node, str] = {}
        self._const_idx: dict[str, int] = {}
        self._const_vals: dict[tuple, int] = {}
        inputs = [n for n in graph.nodes if n.op == "placeholder" and n not in consts]
        out = next(n for n in graph.nodes if n.op == "output")
        outputs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
        self.outputs = outputs
        self._out_ext = {n: len(inputs) + i for i, n in enumerate(outputs)}
        self.graph.num_externs = len(inputs) + len(outputs)
        for i, n in enumerate(inputs):
            vid = self._define(shape(n), *self.value_type(n), external_id=i, flags=xs.XNN_VALUE_FLAG_EXTERNAL_INPUT)
            self.graph.input_ids.append(vid)
            self.values[n] = {NCHW: vid}
            self.native[n] = NCHW

    # Values ---------------------------------------------------------------------------------

    @staticmethod
    def dtype(node_or_tensor) -> xs.XNNDatatype:
        t = node_or_tensor if isinstance(node_or_tensor, torch.Tensor) else node_val(node_or_tensor)
        try:
            return _DTYPES[t.dtype]
        except KeyError:
            raise ExportError(f"XNNPACK: a {t.dtype} value reached the payload writer; the partitioner takes only "
                              "float32 and float16 tensors") from None

    def value_type(self, node: torch.fx.Node) -> tuple:
        """(datatype, quantization parameters or None) of `node`'s value: int8 where a quantize
        node's parameters were absorbed into it (`meta["xnn_quant"]`), else its float dtype."""
        params = node.meta.get("xnn_quant")
        if params is None:
            return self.dtype(node), None
        return self.quant_type(params)

    def quant_type(self, params, channel_dim: Optional[int] = None) -> tuple:
        """(datatype, schema quantization) for `QParams`; per-channel scales go to constant data
        (`channel_dim` overrides the channel dim, for filters stored in another layout)."""
        if params.dynamic:
            return xs.XNNDatatype.xnn_datatype_qdint8, xs.PerTokenDynamicQuant(num_nonbatch_dims=params.nonbatch_dims)
        if params.group_size:
            # Blockwise int4: the scales as bfloat16, [out, in / group_size].
            scale = params.scale.to(torch.bfloat16).contiguous()
            quant = xs.PerChannelGroupQuant(scale=[], channel_dim=0, group_size=params.group_size,
                                            scale_buffer_idx=self._data(scale), num_scales=scale.numel())
            return xs.XNNDatatype.xnn_datatype_qbint4, quant
        if params.per_channel and params.int4:
            scale = params.scale.to(torch.float32).contiguous()
            quant = xs.PerChannelQuant(scale=[], channel_dim=params.axis if channel_dim is None else channel_dim,
                                       scale_buffer_idx=self._data(scale), num_scales=scale.numel())
            return xs.XNNDatatype.xnn_datatype_qcint4, quant
        if params.per_channel:
            scale = params.scale.to(torch.float32).contiguous()
            kind = (xs.XNNDatatype.xnn_datatype_qcint32 if params.dtype == torch.int32
                    else xs.XNNDatatype.xnn_datatype_qcint8)
            quant = xs.PerChannelQuant(scale=[], channel_dim=params.axis if channel_dim is None else channel_dim,
                                       scale_buffer_idx=self._data(scale), num_scales=scale.numel())
            return kind, quant
        kind = xs.XNNDatatype.xnn_datatype_qint32 if params.dtype == torch.int32 else xs.XNNDatatype.xnn_datatype_qint8
        return kind, xs.PerTensorQuant(scale=float(params.scale), zero_point=int(params.zero_point))

    def _define(self, dims, datatype, quant=None, *, external_id=INVALID, flags=0, constant_idx=0) -> int:
        vid = len(self.graph.xvalues)
        dims = [int(d) for d in dims] or [1]
        tv = xs.XNNTensorValue(datatype=datatype, num_dims=len(dims), dims=dims, constant_buffer_idx=constant_idx,
                               external_id=external_id, flags=flags, id_out=vid)
        self.graph.xvalues.append(xs.XValue(tv if quant is None else xs.XNNQuantizedTensorValue(tv, quant)))
        return vid

    def output(self, node: torch.fx.Node, layout: str = NCHW, dims: Optional[list] = None) -> int:
        """A new value for `node`'s result in `layout` (an external output when the partition returns
        it in NCHW)."""
        dims = to_layout(shape(node), layout) if dims is None else dims
        ext = self._out_ext.get(node) if layout == NCHW else None
        if ext is not None and NCHW in self.values.get(node, {}):
            ext = None
        if ext is None:
            vid = self._define(dims, *self.value_type(node))
        else:
            vid = self._define(dims, *self.value_type(node), external_id=ext, flags=xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT)
            self.graph.output_ids.append(vid)
        self.values.setdefault(node, {})[layout] = vid
        self.native.setdefault(node, layout)
        return vid

    def alias(self, node: torch.fx.Node, source: torch.fx.Node) -> None:
        """`node` is `source` (a no-op): share its values."""
        self.values[node] = self.values[source]
        self.native[node] = self.native[source]

    def layout(self, node) -> Optional[str]:
        """The layout `node` was produced in (None for constants and non-tensors)."""
        return self.native.get(node) if isinstance(node, torch.fx.Node) else None

    def tensor(self, node: torch.fx.Node, layout: str = NCHW) -> int:
        """The id of `node`'s value in `layout`, transposing (once) from the other layout if needed."""
        have = self.values.get(node)
        if have and layout in have:
            return have[layout]
        if node in self.consts:
            t = self.consts[node]
            params = node.meta.get("xnn_quant")
            channel_dim = None
            if layout == NHWC:
                t = t.permute(PERM_NCHW_TO_NHWC)
                if params is not None and params.per_channel:
                    channel_dim = PERM_NCHW_TO_NHWC.index(params.axis)
            vid = self.constant(t) if params is None else self.quantized_constant(t, params, channel_dim)
            self.values.setdefault(node, {})[layout] = vid
            return vid
        if not have:
            raise ExportError(f"XNNPACK: value '{node.name}' is used before it is defined; this is a bug in the "
                              "payload writer, please report it")
        src_layout = next(iter(have))
        dims = shape(node)
        perm = PERM_NCHW_TO_NHWC if layout == NHWC else PERM_NHWC_TO_NCHW
        src = have[src_layout]
        out = self.output(node, layout)
        moved = [dims[1], dims[2], dims[3]]
        if sum(d != 1 for d in moved) <= 1:
            # The channel and spatial dims that swap places are all 1 but one: the bytes do not move.
            self.add(xs.XNNStaticReshape(num_dims=4, new_shape=to_layout(dims, layout), input_id=src, output_id=out))
        else:
            self.add(xs.XNNStaticTranspose(num_dims=4, perm=perm, input_id=src, output_id=out))
        return out

    # Constants ------------------------------------------------------------------------------

    def _data(self, t: torch.Tensor) -> int:
        """The constant-data index of `t`'s bytes (stored once per content, as named data)."""
        data = tensor_bytes(t.detach().contiguous())
        if len(data) == 0:
            raise ExportError("XNNPACK: an empty constant reached the payload writer; the partitioner should not "
                              "have taken its node")
        key = hashlib.sha256(data).hexdigest()
        idx = self._const_idx.get(key)
        if idx is None:
            idx = self._const_idx[key] = len(self.graph.constant_data)
            self.graph.constant_data.append(xs.ConstantDataOffset(offset=xs.NAMED_DATA_OFFSET, size=len(data),
                                                                 named_key=key))
            self.store.add_named_data(key, data, alignment=CONSTANT_TENSOR_ALIGNMENT)
        return idx

    def constant(self, t: torch.Tensor, datatype=None, quant=None, dims=None) -> int:
        """A constant value holding `t`'s elements; `datatype`/`quant` for quantized integers, `dims`
        when the bytes are packed (int4)."""
        t = t.detach().contiguous()
        if t.dtype not in _DTYPES and datatype is None:
            t = t.to(torch.float32)
        idx = self._data(t)
        datatype = datatype or self.dtype(t)
        dims = list(t.shape) if dims is None else list(dims)
        vkey = (idx, tuple(dims), datatype, repr(quant))
        vid = self._const_vals.get(vkey)
        if vid is None:
            vid = self._const_vals[vkey] = self._define(dims, datatype, quant, constant_idx=idx)
        return vid

    def quantized_constant(self, t: torch.Tensor, params, channel_dim: Optional[int] = None) -> int:
        """An int8 (or, packed two to a byte, int4) constant with its quantization."""
        datatype, quant = self.quant_type(params, channel_dim)
        if not params.int4:
            return self.constant(t, datatype, quant)
        if t.dim() != 2 or t.shape[1] % 2:
            raise ExportError(f"XNNPACK: an int4 weight of shape {list(t.shape)} reached the payload writer; "
                              "int4 weights are 2-D with an even number of input channels")
        # XNNPACK's int4 weights: zero point 8, two values a byte along the input channels, the
        # even-indexed one in the low nibble.
        u = (t.to(torch.int16) + 8).to(torch.uint8).reshape(-1)
        packed = (u[1::2] << 4 | u[::2]).reshape(t.shape[0], t.shape[1] // 2)
        return self.constant(packed, datatype, quant, dims=t.shape)

    def bias(self, bias: Optional[torch.fx.Node], x: torch.fx.Node, weight: torch.fx.Node) -> int:
        """A GEMM's bias: float as given, or int32 at (input scale x weight scale) when the input and
        the weight are int8, as XNNPACK adds it to the integer accumulators."""
        if bias is None:
            return INVALID
        xp, wp = x.meta.get("xnn_quant"), weight.meta.get("xnn_quant")
        if xp is None or wp is None or xp.dynamic:
            return self.tensor(bias)
        scale = wp.scale * float(xp.scale)
        lo, hi = -(2 ** 31), 2 ** 31 - 1
        q = torch.round(self.consts[bias].to(torch.float32) / scale).clamp(lo, hi).to(torch.int32)
        zero = torch.zeros_like(scale, dtype=torch.int32) if wp.per_channel else 0
        params = QParams(scale, zero, lo, hi, torch.int32, axis=0 if wp.per_channel else None)
        return self.constant(q, *self.quant_type(params))

    def scalar(self, value, like: torch.fx.Node) -> int:
        return self.constant(torch.tensor([value], dtype=node_val(like).dtype))

    def operand(self, arg, like: torch.fx.Node, layout: str = NCHW) -> int:
        """A node's value, or a Python number as a one-element constant."""
        if isinstance(arg, torch.fx.Node):
            return self.tensor(arg, layout)
        return self.scalar(arg, like)

    # Nodes ----------------------------------------------------------------------------------

    def add(self, union, node: Optional[torch.fx.Node] = None, min_max: Optional[tuple] = None) -> None:
        handle = node.meta.get("debug_handle", DEFAULT_DEBUG_HANDLE) if node is not None else DEFAULT_DEBUG_HANDLE
        if min_max is None and node is not None:
            min_max = node.meta.get("xnn_output_min_max")
        mm = None if min_max is None else xs.OutputMinMax(float(min_max[0]), float(min_max[1]))
        self.graph.xnodes.append(xs.XNode(xnode_union=union, debug_handle=handle, output_min_max=mm))

    def finish(self) -> xs.XNNGraph:
        """Give every partition output an external NCHW value (copying when it has none of its own)."""
        for node in self.outputs:
            have = self.values.get(node, {})
            vid = have.get(NCHW)
            if vid is not None and xs.tensor_value(self.graph.xvalues[vid]).external_id != INVALID:
                continue
            src = self.tensor(node, NCHW)
            if xs.tensor_value(self.graph.xvalues[src]).external_id != INVALID and src in self.graph.output_ids:
                continue
            out = self._define(shape(node), *self.value_type(node), external_id=self._out_ext[node],
                               flags=xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT)
            self.graph.output_ids.append(out)
            self.add(xs.XNNCopy(input_id=src, output_id=out))
        self._isolate_packed_operands()
        merge_clamps(self.graph)
        static_scalar_last(self.graph)
        break_lut_chains(self.graph)
        return self.graph

    def _isolate_packed_operands(self) -> None:
        """Give every other reader of a packed constant a value of its own over the same data.

        ExecuTorch's XNNPACK runtime frees the data of a constant that a convolution or fully
        connected node packs (its filter or bias) once the weights are packed; another node that
        reads the same value id (an add of the same bias, say, or a constant deduplicated by
        content) then reads freed memory, and the published runtime crashes at execute. A second
        value over the same constant data is loaded on its own and stays alive."""
        packed = {getattr(n.xnode_union, f) for n in self.graph.xnodes if type(n.xnode_union) in _PACKING
                  for f in ("filter_id", "bias_id")} - {INVALID}
        packed = {v for v in packed if xs.tensor_value(self.graph.xvalues[v]).constant_buffer_idx}
        if not packed:
            return
        copies: dict[int, int] = {}
        for n in self.graph.xnodes:
            op = n.xnode_union
            for name in _operand_fields(op):
                vid = getattr(op, name)
                if vid not in packed or (type(op) in _PACKING and name in ("filter_id", "bias_id")):
                    continue
                if vid not in copies:
                    copies[vid] = len(self.graph.xvalues)
                    self.graph.xvalues.append(copy.deepcopy(self.graph.xvalues[vid]))
                    xs.tensor_value(self.graph.xvalues[-1]).id_out = copies[vid]
                setattr(op, name, copies[vid])


# Nodes whose filter and bias XNNPACK packs at init (the runtime then frees their unpacked data).
_PACKING = (xs.XNNFullyConnected, xs.XNNConv2d, xs.XNNDepthwiseConv2d, xs.XNNConvTranspose2d)


def _operand_fields(op) -> list[str]:
    """The names of `op`'s fields that read a value (a concatenation's unused inputs, 0, excluded)."""
    names = [f.name for f in dataclasses.fields(op) if f.name.endswith("_id") and not f.name.startswith("output")]
    if isinstance(op, xs.XNNCat):
        names = [n for n in names if n in ("input1_id", "input2_id") or getattr(op, n)]
    return names


def merge_clamps(graph: xs.XNNGraph) -> None:
    """Fold a Clamp into the convolution or fully connected node that alone feeds it, as XNNPACK's
    runtime does when it optimises the graph: the node then writes the clamp's value directly, bounds
    merged. With int8 values whose quantization differs (pt2e quantizes a clamp at its own range) that
    is one rounding from the accumulator, not two: folding here makes every engine compute what
    XNNPACK computes."""
    consumers: dict[int, int] = {}
    for node in graph.xnodes:
        for name in _operand_fields(node.xnode_union):
            vid = getattr(node.xnode_union, name)
            consumers[vid] = consumers.get(vid, 0) + 1
    producer = {n.xnode_union.output_id: n for n in graph.xnodes if isinstance(n.xnode_union, _PACKING)}
    outputs = set(graph.output_ids)
    kept = []
    for node in graph.xnodes:
        op = node.xnode_union
        source = producer.get(op.input_id) if isinstance(op, xs.XNNClamp) else None
        if source is None or consumers.get(op.input_id) != 1 or op.input_id in outputs:
            kept.append(node)
            continue
        lo, hi = _bounds(node.output_min_max)
        plo, phi = _bounds(source.output_min_max)
        source.output_min_max = xs.OutputMinMax(min(max(plo, lo), hi), min(max(phi, lo), hi))
        source.xnode_union.output_id = op.output_id
    graph.xnodes[:] = kept


def static_scalar_last(graph: xs.XNNGraph) -> None:
    """Put a one-element constant second in every Minimum and Maximum node.

    XNNPACK rewrites `min(x, c)` and `max(x, c)` with a one-element constant c into a Clamp of x. It
    takes the second operand as c and swaps only when the second is not "known": a value its constant
    propagation has proven all zeros or all ones (x * 0, say) counts as known too. So `min(c, x * 0)`
    becomes a Clamp of c written to x's shape, and the published runtime fails at execute
    ("Propagating input shapes failed"). Minimum and maximum are symmetric: with the constant second
    XNNPACK clamps the right value whatever it knows."""
    for node in graph.xnodes:
        op = node.xnode_union
        if isinstance(op, (xs.XNNMinimum, xs.XNNMaximum)) and _is_static_scalar(graph, op.input1_id) \
                and not _is_static_scalar(graph, op.input2_id):
            op.input1_id, op.input2_id = op.input2_id, op.input1_id


def _is_static_scalar(graph: xs.XNNGraph, vid: int) -> bool:
    value = xs.tensor_value(graph.xvalues[vid])
    return bool(value.constant_buffer_idx) and math.prod(value.dims) == 1


def _bounds(mm: Optional[xs.OutputMinMax]) -> tuple[float, float]:
    return (-math.inf, math.inf) if mm is None else (mm.output_min, mm.output_max)


# XNNPACK fuses a chain of elementwise nodes that starts at an 8-bit value (a binary node with a
# one-element constant operand counts as unary) into one lookup table. It evaluates the chain in a
# scratch subgraph that holds ten nodes; the XNNPACK of the published 1.5 runtime then reserves room
# for one more node in that scratch subgraph, reallocating stack memory, so a chain of ten crashes the
# process at load. Later XNNPACK checks the node type first. The payload keeps every chain to nine.
LUT_CHAIN_LIMIT = 9
_NOT_ELEMENTWISE = (xs.XNNSoftmax, xs.XNNGlobalAvgPooling2d, xs.XNNBatchMatrixMultiply)
_EIGHT_BIT = (xs.XNNDatatype.xnn_datatype_qint8, xs.XNNDatatype.xnn_datatype_quint8)


def _elementwise_inputs(graph: xs.XNNGraph, op) -> Optional[list[int]]:
    """The non-constant inputs of an elementwise node (None for any other node). Generous on purpose:
    a node counted here that XNNPACK would not fuse only makes the chains counted longer."""
    if isinstance(op, xs.XNNNode1x1) or isinstance(op, (xs.XNNLeakyReLU, xs.XNNELU)):
        ids = [op.input_id]
    elif isinstance(op, xs.XNNNode2x1):
        ids = [op.input1_id, op.input2_id]
    else:
        return None
    if isinstance(op, _NOT_ELEMENTWISE):
        return None
    return [v for v in ids if not xs.tensor_value(graph.xvalues[v]).constant_buffer_idx]


def lut_chain_lengths(graph: xs.XNNGraph) -> dict[int, int]:
    """Each elementwise node's index -> the length of the chain XNNPACK could fuse into a lookup
    table that ends at it (1 where a chain starts, at an 8-bit input; nodes outside chains absent)."""
    consumers: dict[int, set[int]] = {}
    for i, node in enumerate(graph.xnodes):
        for name in _operand_fields(node.xnode_union):
            consumers.setdefault(getattr(node.xnode_union, name), set()).add(i)
    outputs = set(graph.output_ids)
    produced: dict[int, int] = {}
    depth: dict[int, int] = {}
    for i, node in enumerate(graph.xnodes):
        op = node.xnode_union
        inputs = _elementwise_inputs(graph, op)
        if inputs is not None:
            d = 0
            for v in inputs:
                p = produced.get(v)
                if p in depth and consumers.get(v) == {i} and v not in outputs:
                    d = max(d, depth[p] + 1)
                elif xs.tensor_value(graph.xvalues[v]).datatype in _EIGHT_BIT:
                    d = max(d, 1)
            if d:
                depth[i] = d
        if hasattr(op, "output_id"):
            produced[op.output_id] = i
    return depth


def break_lut_chains(graph: xs.XNNGraph) -> None:
    """Cut every lookup-table chain longer than `LUT_CHAIN_LIMIT` with an identity transpose (not
    elementwise, so XNNPACK's chain stops there; it copies the value, for any shape)."""
    while True:
        depth = lut_chain_lengths(graph)
        at = next((i for i, d in depth.items() if d > LUT_CHAIN_LIMIT), None)
        if at is None:
            return
        op = graph.xnodes[at].xnode_union
        producers = {getattr(n.xnode_union, "output_id", None): j for j, n in enumerate(graph.xnodes)}
        cuts: dict[int, int] = {}
        for name in _operand_fields(op):
            vid = getattr(op, name)
            if vid in cuts:
                setattr(op, name, cuts[vid])
                continue
            if depth.get(producers.get(vid), 0) < LUT_CHAIN_LIMIT:
                continue
            cut = cuts[vid] = len(graph.xvalues)
            value = copy.deepcopy(graph.xvalues[vid])
            tv = xs.tensor_value(value)
            tv.id_out, tv.external_id, tv.flags = cut, INVALID, 0
            graph.xvalues.append(value)
            graph.xnodes.insert(at, xs.XNode(xnode_union=xs.XNNStaticTranspose(
                num_dims=tv.num_dims, perm=list(range(tv.num_dims)), input_id=vid, output_id=cut),
                debug_handle=DEFAULT_DEBUG_HANDLE, output_min_max=None))
            at += 1
            setattr(op, name, cut)


def numel(dims) -> int:
    return math.prod(dims)
