"""The per-op configs XNNPACK claims by, under ExecuTorch's names, in `ALL_PARTITIONER_CONFIGS`.

Each is defined beside the visitor writing its op, in its family's `operators/op_*.py`.
"""

from __future__ import annotations

import functools
from typing import List, Type

import torch

from executorch.backends.xnnpack.operators.node_config import FP32, FP32_QS8, GEMM, Check  # noqa: F401  (names it had)
from executorch.backends.xnnpack.operators.op_conv import BatchNormConfig, ConvolutionConfig
from executorch.backends.xnnpack.operators.op_elementwise import (
    AbsConfig, AddConfig, AddScalarConfig, CeilConfig, ClampConfig, CosConfig, DeQuantizedPerTensorConfig, DivConfig,
    ExpConfig, FloorConfig, GeluConfig, HardswishConfig, HardtanhConfig, LeakyReLUConfig, LogConfig, MaximumConfig,
    MinimumConfig, MulConfig, MulScalarConfig, NegConfig, PowConfig, QuantizedPerTensorConfig,
    ReciprocalSquareRootConfig, ReLUConfig, SigmoidConfig, SinConfig, SoftmaxConfig, SquareRootConfig, SubConfig,
    TanhConfig,
)
from executorch.backends.xnnpack.operators.op_gemm import (
    AddmmConfig, BMMConfig, ChooseQParamsAffineConfig, DeQuantizeAffineConfig, LinearConfig, MMConfig,
    QuantizeAffineConfig,
)
from executorch.backends.xnnpack.operators.op_pool import (
    AvgPoolingConfig, LayerNormConfig, MaxPool2dConfig, MaxPool2dWithIndicesConfig, MeanDimConfig,
)
from executorch.backends.xnnpack.operators.op_shape import (
    CatConfig, CloneConfig, CloneDimOrderConfig, ConstantPadConfig, ExpandCopyConfig, PermuteConfig, SelectCopyConfig,
    SliceCopyConfig, SqueezeCopyConfig, ToDimOrderCopyConfig, UnsqueezeCopyConfig, ViewCopyConfig,
)
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType, XNNPartitionerConfig

# A new config joins the imports above and this list (kept in the order it has always had).
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


@functools.lru_cache(maxsize=None)
def _int8_configs() -> dict:
    # The q/dq configs are XNNPACK Converts, not ops with an int8 form.
    configs = [c() for c in ALL_PARTITIONER_CONFIGS if c not in (QuantizedPerTensorConfig, DeQuantizedPerTensorConfig)]
    return {c.target_name: c for c in configs if ConfigPrecisionType.STATIC_QUANT in c.supported_precision_types()}


def computes_in_int8(node: torch.fx.Node) -> bool:
    """Whether XNNPACK has an int8 form of `node`'s op with its arguments (preprocess asks the
    same rows the partitioner claimed the node by)."""
    config = _int8_configs().get(getattr(node.target, "__name__", ""))
    return config is not None and config.check_quantized(node)


__all__ = ["ALL_PARTITIONER_CONFIGS", "computes_in_int8", "ConfigPrecisionType", "XNNPartitionerConfig"] + [
    c.__name__ for c in ALL_PARTITIONER_CONFIGS]
