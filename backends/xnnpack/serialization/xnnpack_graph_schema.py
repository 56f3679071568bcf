"""The XNNPACK payload as Python dataclasses: one class per table of schema.fbs, fields in slot order.

These are the single in-memory model of a payload: the preprocess step builds them, the
serializer writes and reads them, the pure-Python runtime and `inspect` read them. Field types
carry the wire type: `int` is a uint32, `I32` an int32, `U64` a uint64, `float` a float32;
`List[...]` is a vector; a `Union` of tables is a FlatBuffer union whose member order (the
tuples at the bottom) is the format's tag order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, List, Optional, Union

I32 = Annotated[int, "int32"]
U64 = Annotated[int, "uint64"]

# An internal (non-external) value's external_id.
XNN_INVALID_VALUE_ID = 0xFFFFFFFF
# XNNTensorValue.flags bits.
XNN_VALUE_FLAG_EXTERNAL_INPUT = 0x1
XNN_VALUE_FLAG_EXTERNAL_OUTPUT = 0x2
# XNode flags bits (each node kind reads only its own).
XNN_FLAG_TRANSPOSE_WEIGHTS = 0x1  # FullyConnected: the filter is [in, out]
XNN_FLAG_TRANSPOSE_B = 0x1  # BatchMatrixMultiply: input2 is [..., N, K]
XNN_FLAG_TENSORFLOW_SAME_PADDING = 0x4  # Conv/pooling: padding chosen at run time (not written here)
XNN_FLAG_TENSORFLOW_LEGACY_MODE = 0x4  # ResizeBilinear2D: neither corner-aligned nor half-pixel
XNN_FLAG_ALIGN_CORNERS = 0x8  # ResizeBilinear2D
XNN_FLAG_KEEP_DIMS = 0x40  # GlobalAvgPooling2d (and pooling): keep the reduced dims as 1
# ConstantDataOffset.offset of a constant that lives in the program's named data.
NAMED_DATA_OFFSET = 0xFFFFFFFFFFFFFFFF


class XNNDatatype(IntEnum):
    xnn_datatype_invalid = 0
    xnn_datatype_fp32 = 1
    xnn_datatype_fp16 = 2
    xnn_datatype_qint8 = 3
    xnn_datatype_quint8 = 4
    xnn_datatype_qint32 = 5
    xnn_datatype_qcint8 = 6
    xnn_datatype_qcint32 = 7
    xnn_datatype_qcint4 = 8
    xnn_datatype_qdint8 = 9
    xnn_datatype_qbint4 = 10
    xnn_datatype_qpint8 = 11
    xnn_datatype_int32 = 12
    xnn_datatype_pfp32 = 13
    xnn_datatype_bf16 = 14


# Node shapes shared by many node kinds ---------------------------------------------------------


@dataclass
class XNNNode1x1:
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNNode2x1:
    input1_id: int
    input2_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNCat:
    """Concatenation of 2..5 inputs along `axis`; unused inputs are 0 (their slots stay empty)."""

    axis: int
    input1_id: int
    input2_id: int
    input3_id: int
    input4_id: int
    output_id: int
    flags: int = 0
    input5_id: int = 0


@dataclass
class XNNNodeConv:
    """Convolution over NHWC values; filters are OHWI (depthwise: 1HWO)."""

    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    kernel_height: int
    kernel_width: int
    subsampling_height: int
    subsampling_width: int
    dilation_height: int
    dilation_width: int
    group_input_channels: int
    group_output_channels: int
    groups: int
    adjustment_height: int
    adjustment_width: int
    input1_id: int
    filter_id: int
    bias_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNPooling2D:
    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    pooling_height: int
    pooling_width: int
    stride_height: int
    stride_width: int
    dilation_height: int
    dilation_width: int
    input_id: int
    output_id: int
    flags: int = 0


# Node kinds -------------------------------------------------------------------------------------


@dataclass
class XNNAdd(XNNNode2x1):
    pass


@dataclass
class XNNSubtract(XNNNode2x1):
    pass


@dataclass
class XNNMultiply(XNNNode2x1):
    pass


@dataclass
class XNNDiv(XNNNode2x1):
    pass


@dataclass
class XNNMinimum(XNNNode2x1):
    pass


@dataclass
class XNNMaximum(XNNNode2x1):
    pass


@dataclass
class XNNPReLU(XNNNode2x1):
    """input2 is the per-channel slope."""


@dataclass
class XNNBatchMatrixMultiply(XNNNode2x1):
    pass


@dataclass
class XNNSoftmax(XNNNode1x1):
    """Softmax over the last dim."""


@dataclass
class XNNSigmoid(XNNNode1x1):
    pass


@dataclass
class XNNClamp(XNNNode1x1):
    """Bounds come from the XNode's output_min_max."""


@dataclass
class XNNFloor(XNNNode1x1):
    pass


@dataclass
class XNNCeiling(XNNNode1x1):
    pass


@dataclass
class XNNConvert(XNNNode1x1):
    """Datatype conversion, e.g. fp32 -> qdint8 (dynamic quantization) or qint8 -> fp32."""


@dataclass
class XNNGlobalAvgPooling2d(XNNNode1x1):
    """Mean over H and W of an NHWC value."""


@dataclass
class XNNSquareRoot(XNNNode1x1):
    pass


@dataclass
class XNNReciprocalSquareRoot(XNNNode1x1):
    pass


@dataclass
class XNNHardswish(XNNNode1x1):
    pass


@dataclass
class XNNNegate(XNNNode1x1):
    pass


@dataclass
class XNNSquare(XNNNode1x1):
    pass


@dataclass
class XNNAbs(XNNNode1x1):
    pass


@dataclass
class XNNLog(XNNNode1x1):
    pass


@dataclass
class XNNGelu(XNNNode1x1):
    pass


@dataclass
class XNNTanh(XNNNode1x1):
    pass


@dataclass
class XNNExp(XNNNode1x1):
    pass


@dataclass
class XNNSin(XNNNode1x1):
    pass


@dataclass
class XNNCos(XNNNode1x1):
    pass


@dataclass
class XNNCopy(XNNNode1x1):
    pass


@dataclass
class XNNConv2d(XNNNodeConv):
    pass


@dataclass
class XNNDepthwiseConv2d(XNNNodeConv):
    pass


@dataclass
class XNNConvTranspose2d(XNNNodeConv):
    pass


@dataclass
class XNNAvgPooling2d(XNNPooling2D):
    pass


@dataclass
class XNNMaxPooling2d(XNNPooling2D):
    pass


@dataclass
class XNNConcatenate2(XNNCat):
    pass


@dataclass
class XNNConcatenate3(XNNCat):
    pass


@dataclass
class XNNConcatenate4(XNNCat):
    pass


@dataclass
class XNNConcatenate5(XNNCat):
    pass


@dataclass
class XNNFullyConnected:
    """output = input1 @ filter.T + bias; filter is [out, in] (bias_id 0: no bias)."""

    input1_id: int
    filter_id: int
    bias_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticTranspose:
    num_dims: int
    perm: List[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticResizeBilinear2D:
    new_height: int
    new_width: int
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticConstantPad:
    pre_paddings: List[int]
    post_paddings: List[int]
    padding_value: float
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticReshape:
    """new_shape may hold one 0: that dim is inferred from the element count."""

    num_dims: int
    new_shape: List[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticSlice:
    num_dims: int
    offsets: List[int]
    sizes: List[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNScaledDotProductAttention:
    query_id: int
    key_id: int
    value_id: int
    scale_id: int
    mask_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNArgMaxPooling2d:
    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    pooling_height: int
    pooling_width: int
    input_id: int
    output_value_id: int
    output_index_id: int
    flags: int = 0


@dataclass
class XNNLeakyReLU:
    negative_slope: float
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNELU:
    alpha: float
    input_id: int
    output_id: int
    flags: int = 0


# The node union's members in tag order (tag = index + 1): this order is the wire format.
XNODE_UNION_TYPES: tuple[type, ...] = (
    XNNAdd, XNNFullyConnected, XNNSoftmax, XNNSigmoid, XNNStaticTranspose, XNNClamp, XNNConv2d, XNNDiv,
    XNNStaticResizeBilinear2D, XNNStaticConstantPad, XNNAvgPooling2d, XNNMinimum, XNNDepthwiseConv2d,
    XNNMaxPooling2d, XNNMultiply, XNNSubtract, XNNFloor, XNNConvert, XNNGlobalAvgPooling2d, XNNStaticReshape,
    XNNArgMaxPooling2d, XNNSquareRoot, XNNCeiling, XNNHardswish, XNNLeakyReLU, XNNMaximum, XNNNegate, XNNSquare,
    XNNELU, XNNAbs, XNNPReLU, XNNConcatenate2, XNNConcatenate3, XNNConcatenate4, XNNStaticSlice,
    XNNScaledDotProductAttention, XNNBatchMatrixMultiply, XNNConcatenate5, XNNConvTranspose2d,
    XNNReciprocalSquareRoot, XNNLog, XNNGelu, XNNTanh, XNNExp, XNNSin, XNNCopy, XNNCos,
)
XNodeUnion = Union[XNODE_UNION_TYPES]  # type: ignore[valid-type]


# Values -----------------------------------------------------------------------------------------


@dataclass
class PerChannelQuant:
    """Scales inline (`scale`) or, with scale_buffer_idx > 0, fp32 in constant_data[scale_buffer_idx]."""

    scale: List[float]
    channel_dim: I32
    scale_buffer_idx: int = 0
    num_scales: int = 0


@dataclass
class PerTensorQuant:
    scale: float
    zero_point: I32


@dataclass
class PerTokenDynamicQuant:
    num_nonbatch_dims: I32


@dataclass
class PerChannelGroupQuant:
    """Blockwise scales: bf16 in constant_data[scale_buffer_idx], or fp32 inline in `scale`."""

    scale: List[float]
    channel_dim: I32
    group_size: I32 = 1
    scale_bf16: List[int] = field(default_factory=list)  # a deprecated slot; never written
    scale_buffer_idx: int = 0
    num_scales: int = 0


XNN_QUANT_PARAMS_TYPES: tuple[type, ...] = (PerChannelQuant, PerTensorQuant, PerTokenDynamicQuant,
                                            PerChannelGroupQuant)
XNNQuantParams = Union[XNN_QUANT_PARAMS_TYPES]  # type: ignore[valid-type]


@dataclass
class XNNTensorValue:
    datatype: XNNDatatype
    num_dims: int
    dims: List[int]
    constant_buffer_idx: int
    external_id: int
    flags: int
    id_out: int


@dataclass
class XNNQuantizedTensorValue:
    tensor_value: XNNTensorValue
    quant_params: XNNQuantParams


XVALUE_UNION_TYPES: tuple[type, ...] = (XNNTensorValue, XNNQuantizedTensorValue)
XValueUnion = Union[XVALUE_UNION_TYPES]  # type: ignore[valid-type]


@dataclass
class OutputMinMax:
    output_min: float
    output_max: float


@dataclass
class XNode:
    xnode_union: XNodeUnion
    debug_handle: int = 0
    output_min_max: Optional[OutputMinMax] = None


@dataclass
class XValue:
    xvalue_union: XValueUnion


@dataclass
class Buffer:
    """Inline constant bytes of an XN00 file (legacy; read, never written)."""

    storage: bytes


@dataclass
class ConstantDataOffset:
    """A constant at `offset` in the payload's constant region, or under `named_key` in named data."""

    offset: U64
    size: U64
    named_key: str = ""


@dataclass
class XNNGraph:
    version: str
    xnodes: List[XNode]
    xvalues: List[XValue]
    num_externs: int
    input_ids: List[int]
    output_ids: List[int]
    constant_buffer: List[Buffer] = field(default_factory=list)
    mem_buffer_sizes: List[int] = field(default_factory=list)
    constant_data: List[ConstantDataOffset] = field(default_factory=list)


def tensor_value(value: XValue) -> XNNTensorValue:
    """The plain tensor part of a value, quantized or not."""
    v = value.xvalue_union
    return v.tensor_value if isinstance(v, XNNQuantizedTensorValue) else v
