"""The per-op configs XNNPACK claims by (named as ExecuTorch names them), and `ALL_PARTITIONER_CONFIGS`.

Each config is one row: the op overload it claims, the precisions it takes and, where XNNPACK
is narrower than the op, a check. What no row claims stays on the portable kernels.
"""

from __future__ import annotations

import operator
from typing import Callable, List, Optional, Type

import torch
from torch.export import ExportedProgram

from executorch.backends.xnnpack.partition.config.xnnpack_config import (
    ConfigPrecisionType, XNNPartitionerConfig, _static_shapes,
)
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.backends.xnnpack.utils.utils import is_param_node
from executorch.exir.tensor import shape_upper_bound

FP32 = [ConfigPrecisionType.FP32]
FP32_QS8 = [ConfigPrecisionType.FP32, ConfigPrecisionType.STATIC_QUANT]
GEMM = [ConfigPrecisionType.FP32, ConfigPrecisionType.STATIC_QUANT, ConfigPrecisionType.DYNAMIC_QUANT]

Check = Callable[[torch.fx.Node, ExportedProgram], bool]


def _config(name: str, target: str, precisions: list, check: Optional[Check] = None,
            keep: Optional[torch._ops.OpOverload] = None, deps: Optional[Callable] = None,
            gemm: Optional[tuple] = None, qcheck: Optional[Callable] = None,
            dynamic_axis: Optional[Callable] = None) -> Type[XNNPartitionerConfig]:
    """A config class for one op: `check` narrows what it claims in floating point and `qcheck`
    quantized, `keep` is an op kept whole through to_edge for it, `deps(node, ep)` lists nodes claimed
    with it (None: the node is not taken), `gemm` its (activation, weight, bias) argument indices,
    `dynamic_axis(node)` its weight's output-channel dim in a dynamically quantized form (None: none)."""

    def check_constraints(self, node, ep):
        if self.quantized_deps(node, ep) is not None:
            return True
        return self.check_common_constraints(node, ep) and (check is None or check(node, ep))

    def get_node_and_deps(self, node, ep):
        if deps is None:
            return [node]
        more = deps(node, ep)
        return [] if more is None else [node, *more]

    body = {"target_name": target, "__doc__": f"Claims `{target}` for XNNPACK.",
            "supported_precision_types": lambda self: list(precisions),
            "check_constraints": check_constraints, "get_node_and_deps": get_node_and_deps,
            "get_original_aten": lambda self: keep, "gemm_args": gemm}
    if qcheck is not None:
        body["check_quantized"] = lambda self, node: qcheck(node)
    if dynamic_axis is not None:
        body["dynamic_weight_axis"] = lambda self, node: dynamic_axis(node)
    return type(name, (XNNPartitionerConfig,), body)


# Checks ------------------------------------------------------------------------------------------


def _arg(node: torch.fx.Node, i: int, name: str, default):
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _rank(node) -> int:
    return node.meta["val"].dim()


def _alpha_one(node, ep) -> bool:
    return node.kwargs.get("alpha", 1) == 1


def _own_constant(node, ep) -> bool:
    """A constant only this node reads: it moves into the node's partition whatever the partitioning
    (XNNPACK needs convolution filters and folded batch norm statistics at build time)."""
    return node is None or (is_param_node(ep, node) and len(node.users) == 1)


def _conv(node, ep) -> bool:
    """2-D convolutions on constant filters; a transposed one in float32 only (XNNPACK refuses a
    half-precision deconvolution at init)."""
    weight = node.args[1]
    if node.args[6] and node.meta["val"].dtype != torch.float32:
        return False
    return (weight.meta["val"].dim() == 4 and _own_constant(weight, ep) and _own_constant(node.args[2], ep)
            and _static_shapes(node))


def _gemm(node, ep) -> bool:
    """addmm/mm: the weight is a constant (or a transpose of one), the batch operand 2-D."""
    mat2 = node.args[-1]
    if mat2.target == torch.ops.aten.permute_copy.default and list(mat2.args[1]) == [1, 0]:
        mat2 = mat2.args[0]
    if not is_param_node(ep, mat2):
        return False
    if node.target == torch.ops.aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return False
        bias = node.args[0]
        return is_param_node(ep, bias) and bias.meta["val"].dim() == 1
    return True


def _linear(node, ep) -> bool:
    weight = node.args[1]
    bias = _arg(node, 2, "bias", None)
    return is_param_node(ep, weight) and (bias is None or is_param_node(ep, bias))


def _batch_norm_deps(node, ep):
    """A batch norm is folded into the convolution before it, so it is taken only after one that
    it alone reads, and only when its statistics are constants and only its output is used."""
    conv = node.args[0]
    if conv.op != "call_function" or conv.target != torch.ops.aten.convolution.default or len(conv.users) != 1:
        return None
    if not _conv(conv, ep) or conv.args[6]:
        return None
    if not all(_own_constant(a, ep) for a in node.args[1:5]):
        return None
    users = list(node.users)
    if not all(u.target is operator.getitem and u.args[1] == 0 for u in users):
        return None
    return [a for a in node.args[1:5] if a is not None] + users


def _first_output_only(node, ep):
    users = list(node.users)
    if not all(u.target is operator.getitem and u.args[1] == 0 for u in users):
        return None
    return users


def _layer_norm_deps(node, ep):
    """Layer norm over the last dim, written as XNNPACK arithmetic; only its output may be used."""
    if len(node.args[1]) != 1:
        return None
    return _first_output_only(node, ep)


def _pool_args(node):
    k = list(node.args[1])
    stride = list(_arg(node, 2, "stride", []) or k)
    pad = list(_arg(node, 3, "padding", [0, 0]))
    k, stride, pad = [v * 2 if len(v) == 1 else v for v in (k, stride, pad)]
    return k, stride, pad


def _max_pool(node, ep) -> bool:
    if _rank(node.args[0]) != 4 or not _static_shapes(node):
        return False
    k, stride, _ = _pool_args(node)
    ceil_mode = _arg(node, 5, "ceil_mode", False)
    return not ceil_mode and stride[0] <= k[0] and stride[1] <= k[1]


def _avg_pool(node, ep) -> bool:
    if _rank(node.args[0]) != 4 or not _static_shapes(node):
        return False
    k, _, pad = _pool_args(node)
    ceil_mode = _arg(node, 4, "ceil_mode", False)
    count_include_pad = _arg(node, 5, "count_include_pad", True)
    divisor = _arg(node, 6, "divisor_override", None)
    return not ceil_mode and not (count_include_pad and any(pad)) and divisor in (None, k[0] * k[1])


def _mean_dims(node):
    rank = _rank(node.args[0])
    return sorted(d % rank for d in node.args[1]), rank


def _mean(node, ep) -> bool:
    """Mean over H and W of a static 4-D value, or over the last dim of any value."""
    if node.kwargs.get("dtype") is not None:
        return False
    dims, rank = _mean_dims(node)
    hw = rank == 4 and dims == [2, 3]
    return (hw or dims == [rank - 1]) and _static_shapes(node, leading=not hw) and _reshape(node, ep)


def _softmax(node, ep) -> bool:
    return node.args[1] % _rank(node.args[0]) == _rank(node.args[0]) - 1 and not node.args[2]


def _square(node, ep) -> bool:
    return node.args[1] == 2


def _gelu(node, ep) -> bool:
    return node.kwargs.get("approximate", "none") == "none" and node.meta["val"].dtype == torch.float32


def _slice(node, ep) -> bool:
    return _arg(node, 4, "step", 1) == 1 and _static_shapes(node)


def _cat(node, ep) -> bool:
    """Two or more inputs whose upper bounds add up to the output's along the axis and equal it elsewhere."""
    out, *parts = [[shape_upper_bound(d) for d in n.meta["val"].shape] for n in [node, *node.args[0]]]
    axis = _arg(node, 1, "dim", 0) % len(out)
    return len(parts) > 1 and sum(p.pop(axis) for p in parts) == out.pop(axis) and all(p == out for p in parts)


def _same_shape(node, ep) -> bool:
    """An expand keeping the shape (the same sizes or symbols, never equal by example values): a copy."""
    return str(node.meta["val"].shape) == str(node.args[0].meta["val"].shape)


def _reshape(node, ep) -> bool:
    """At most one dynamic dim in the result (XNNPACK infers one)."""
    return sum(not isinstance(d, int) for d in node.meta["val"].shape) <= 1


def _pad(node, ep) -> bool:
    return all(p >= 0 for p in node.args[1])


def _same_layout_copy(node, ep) -> bool:
    """Clones and dim-order copies that neither change dtype nor the contiguous layout."""
    order = node.kwargs.get("dim_order")
    if order is not None and list(order) != list(range(len(order))):
        return False
    return node.kwargs.get("dtype") in (None, node.args[0].meta["val"].dtype)


def _q_conv(node) -> bool:
    """2-D convolutions; a transposed one only ungrouped with per-output-channel (dim 1) scales."""
    w = node.args[1]
    if w.meta["val"].dim() != 4:
        return False
    if node.args[6] and qu.qd_name(w) in qu.DEQUANTIZE_PER_CHANNEL:
        return node.args[8] == 1 and w.args[3] == 1
    return True


def _qd_conv(node) -> Optional[int]:
    """XNNPACK's dynamically quantized convolutions are 2-D and not depthwise (as the published partitioner
    claims them), on static shapes; the weight is quantized along its output channels (dim 1 of a
    transposed one's, which is ungrouped)."""
    w = node.args[1]
    transposed, groups = node.args[6], node.args[8]
    if w.meta["val"].dim() != 4 or not _static_shapes(node):
        return None
    if transposed and groups != 1:
        return None
    if not transposed and groups > 1 and w.meta["val"].shape[1] == 1:
        return None  # depthwise
    return 1 if transposed else 0


def _q_linear(node) -> bool:
    """Per-channel weights are scaled along the output dim."""
    w = node.args[1]
    return qu.qd_name(w) not in qu.DEQUANTIZE_PER_CHANNEL or w.args[3] == 0


def _q_mean(node) -> bool:
    """Only the mean over H and W (a global average pool) has a quantized form."""
    dims, rank = _mean_dims(node)
    return rank == 4 and dims == [2, 3] and node.kwargs.get("dtype") is None


def _q_pass(check: Check):
    return lambda node: check(node, None)


def _q_dq_int8(node, ep) -> bool:
    """A per-tensor float32 <-> int8 q/dq with constant parameters (a Convert where no int8 op takes it)."""
    if not qu.int8_static(node) or qu.qd_name(node) not in qu.QUANTIZE_PER_TENSOR + qu.DEQUANTIZE_PER_TENSOR:
        return False
    if any(isinstance(a, torch.fx.Node) for a in node.args[1:]):
        return False
    x = node.args[0]
    if isinstance(x, torch.fx.Node) and x.op == "placeholder" and is_param_node(ep, x):
        return False  # a quantized constant: the op reading it takes it as its weight
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and all(isinstance(d, int) and d > 0 for d in val.shape)


class _QuantDequantConfig(XNNPartitionerConfig):
    def supported_precision_types(self):
        return [ConfigPrecisionType.STATIC_QUANT]

    def check_constraints(self, node, ep):
        return ConfigPrecisionType.STATIC_QUANT in self.enabled_precision_types and _q_dq_int8(node, ep)

    def quantized_deps(self, node, ep):
        return None


class QuantizedPerTensorConfig(_QuantDequantConfig):
    """Claims `quantize_per_tensor` to int8: a Convert from float32."""

    target_name = "quantize_per_tensor.default"


class DeQuantizedPerTensorConfig(_QuantDequantConfig):
    """Claims `dequantize_per_tensor` from int8: a Convert to float32."""

    target_name = "dequantize_per_tensor.default"


class _AffineConfig(XNNPartitionerConfig):
    """torchao's affine q/dq ops: kept whole where a QD8 linear claims them as its dependencies."""

    def supported_precision_types(self):
        return [ConfigPrecisionType.DYNAMIC_QUANT]

    def get_original_aten(self):
        packet = getattr(torch.ops.torchao, self.target_name.split(".")[0], None)  # None until torchao is imported
        return None if packet is None else packet.default

    def check_constraints(self, node, ep):
        if ConfigPrecisionType.DYNAMIC_QUANT not in self.enabled_precision_types:
            return False
        linear = LinearConfig()
        linear.set_enabled_precision_types([ConfigPrecisionType.DYNAMIC_QUANT])
        seen, todo = set(), [node]
        for _ in range(4):  # choose_qparams -> getitem -> q -> dq -> linear
            todo = [u for n in todo for u in n.users if u not in seen]
            seen.update(todo)
            for user in todo:
                if getattr(user.target, "__name__", "") == "linear.default" and node in (
                        linear.quantized_deps(user, ep) or ()):
                    return True
        return False

    def quantized_deps(self, node, ep):
        return None

    def get_partition(self, node, ep):
        return []


class ChooseQParamsAffineConfig(_AffineConfig):
    target_name = "choose_qparams_affine.default"


class QuantizeAffineConfig(_AffineConfig):
    target_name = "quantize_affine.default"


class DeQuantizeAffineConfig(_AffineConfig):
    target_name = "dequantize_affine.default"


# The table ---------------------------------------------------------------------------------------

aten = torch.ops.aten

AbsConfig = _config("AbsConfig", "abs.default", FP32)
AddConfig = _config("AddConfig", "add.Tensor", FP32_QS8, _alpha_one, qcheck=_q_pass(_alpha_one))
AddScalarConfig = _config("AddScalarConfig", "add.Scalar", FP32, _alpha_one)
AddmmConfig = _config("AddmmConfig", "addmm.default", GEMM, _gemm)
AvgPoolingConfig = _config("AvgPoolingConfig", "avg_pool2d.default", FP32, _avg_pool)
BatchNormConfig = _config("BatchNormConfig", "_native_batch_norm_legit_no_training.default", FP32,
                          deps=_batch_norm_deps)
BMMConfig = _config("BMMConfig", "bmm.default", FP32)
CatConfig = _config("CatConfig", "cat.default", FP32_QS8, _cat, qcheck=_q_pass(_cat))
CeilConfig = _config("CeilConfig", "ceil.default", FP32)
ClampConfig = _config("ClampConfig", "clamp.default", FP32_QS8)
CloneConfig = _config("CloneConfig", "clone.default", FP32_QS8, _same_layout_copy,
                      qcheck=_q_pass(_same_layout_copy))
CloneDimOrderConfig = _config("CloneDimOrderConfig", "_clone_dim_order.default", FP32_QS8, _same_layout_copy,
                              qcheck=_q_pass(_same_layout_copy))
ConstantPadConfig = _config("ConstantPadConfig", "constant_pad_nd.default", FP32, _pad)
ConvolutionConfig = _config("ConvolutionConfig", "convolution.default", GEMM, _conv, gemm=(0, 1, 2), qcheck=_q_conv,
                            dynamic_axis=_qd_conv)
CosConfig = _config("CosConfig", "cos.default", FP32)
DivConfig = _config("DivConfig", "div.Tensor", FP32)
ExpandCopyConfig = _config("ExpandCopyConfig", "expand_copy.default", FP32, _same_shape)
ExpConfig = _config("ExpConfig", "exp.default", FP32)
FloorConfig = _config("FloorConfig", "floor.default", FP32)
GeluConfig = _config("GeluConfig", "gelu.default", FP32, _gelu)
HardswishConfig = _config("HardswishConfig", "hardswish.default", FP32, keep=aten.hardswish.default)
LayerNormConfig = _config("LayerNormConfig", "native_layer_norm.default", FP32, deps=_layer_norm_deps)
HardtanhConfig = _config("HardtanhConfig", "hardtanh.default", FP32_QS8)
LeakyReLUConfig = _config("LeakyReLUConfig", "leaky_relu.default", FP32)
LinearConfig = _config("LinearConfig", "linear.default", GEMM, _linear, keep=aten.linear.default, gemm=(0, 1, 2),
                       qcheck=_q_linear)
LogConfig = _config("LogConfig", "log.default", FP32)
MaximumConfig = _config("MaximumConfig", "maximum.default", FP32)
MaxPool2dConfig = _config("MaxPool2dConfig", "max_pool2d.default", FP32_QS8, _max_pool, keep=aten.max_pool2d.default,
                          qcheck=_q_pass(_max_pool))
MaxPool2dWithIndicesConfig = _config("MaxPool2dWithIndicesConfig", "max_pool2d_with_indices.default", FP32_QS8,
                                     _max_pool, deps=_first_output_only, qcheck=_q_pass(_max_pool))
MeanDimConfig = _config("MeanDimConfig", "mean.dim", FP32_QS8, _mean, qcheck=_q_mean)
MinimumConfig = _config("MinimumConfig", "minimum.default", FP32)
MMConfig = _config("MMConfig", "mm.default", GEMM, _gemm)
MulConfig = _config("MulConfig", "mul.Tensor", FP32_QS8)
MulScalarConfig = _config("MulScalarConfig", "mul.Scalar", FP32)
NegConfig = _config("NegConfig", "neg.default", FP32)
PermuteConfig = _config("PermuteConfig", "permute_copy.default", FP32_QS8)
PowConfig = _config("PowConfig", "pow.Tensor_Scalar", FP32, _square)
ReciprocalSquareRootConfig = _config("ReciprocalSquareRootConfig", "rsqrt.default", FP32)
ReLUConfig = _config("ReLUConfig", "relu.default", FP32_QS8)
SelectCopyConfig = _config("SelectCopyConfig", "select_copy.int", FP32_QS8,
                           lambda node, ep: _static_shapes(node))
SigmoidConfig = _config("SigmoidConfig", "sigmoid.default", FP32)
SinConfig = _config("SinConfig", "sin.default", FP32)
SliceCopyConfig = _config("SliceCopyConfig", "slice_copy.Tensor", FP32_QS8, _slice, qcheck=_q_pass(_slice))
SoftmaxConfig = _config("SoftmaxConfig", "_softmax.default", FP32, _softmax)
SquareRootConfig = _config("SquareRootConfig", "sqrt.default", FP32)
SqueezeCopyConfig = _config("SqueezeCopyConfig", "squeeze_copy.dims", FP32_QS8, _reshape)
SubConfig = _config("SubConfig", "sub.Tensor", FP32_QS8, _alpha_one, qcheck=_q_pass(_alpha_one))
TanhConfig = _config("TanhConfig", "tanh.default", FP32)
ToDimOrderCopyConfig = _config("ToDimOrderCopyConfig", "_to_dim_order_copy.default", FP32_QS8, _same_layout_copy,
                               qcheck=_q_pass(_same_layout_copy))
UnsqueezeCopyConfig = _config("UnsqueezeCopyConfig", "unsqueeze_copy.default", FP32_QS8, _reshape)
ViewCopyConfig = _config("ViewCopyConfig", "view_copy.default", FP32_QS8, _reshape)

ALL_PARTITIONER_CONFIGS: List[Type[XNNPartitionerConfig]] = [
    AbsConfig, AddConfig, AddScalarConfig, AddmmConfig, AvgPoolingConfig, BatchNormConfig, BMMConfig, CatConfig,
    CeilConfig, ChooseQParamsAffineConfig, ClampConfig, CloneConfig, CloneDimOrderConfig, ConstantPadConfig,
    ConvolutionConfig, CosConfig,
    DeQuantizeAffineConfig, DeQuantizedPerTensorConfig, DivConfig, ExpandCopyConfig, ExpConfig, FloorConfig,
    GeluConfig, HardswishConfig, HardtanhConfig, LayerNormConfig, LeakyReLUConfig,
    LinearConfig,
    LogConfig, MaximumConfig, MaxPool2dConfig, MaxPool2dWithIndicesConfig, MeanDimConfig, MinimumConfig, MMConfig,
    MulConfig, MulScalarConfig, NegConfig, PermuteConfig, PowConfig, QuantizeAffineConfig, QuantizedPerTensorConfig,
    ReciprocalSquareRootConfig, ReLUConfig,
    SelectCopyConfig, SigmoidConfig, SinConfig, SliceCopyConfig, SoftmaxConfig, SquareRootConfig, SqueezeCopyConfig,
    SubConfig,
    TanhConfig, ToDimOrderCopyConfig, UnsqueezeCopyConfig, ViewCopyConfig,
]



def _int8_configs() -> dict:
    if not _INT8_CONFIGS:
        for cls in ALL_PARTITIONER_CONFIGS:
            config = cls()
            if ConfigPrecisionType.STATIC_QUANT in config.supported_precision_types() and not isinstance(
                    config, _QuantDequantConfig):
                _INT8_CONFIGS[cls.target_name] = config
    return _INT8_CONFIGS


_INT8_CONFIGS: dict = {}


def computes_in_int8(node: torch.fx.Node) -> bool:
    """Whether XNNPACK has an int8 form of `node`'s op with its arguments (preprocess asks the
    same rows the partitioner claimed the node by)."""
    config = _int8_configs().get(getattr(node.target, "__name__", ""))
    return config is not None and config.check_quantized(node)


__all__ = ["ALL_PARTITIONER_CONFIGS", "computes_in_int8", "ConfigPrecisionType", "XNNPartitionerConfig"] + [
    c.__name__ for c in ALL_PARTITIONER_CONFIGS]
