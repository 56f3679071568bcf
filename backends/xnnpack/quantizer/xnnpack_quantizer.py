"""`XNNPACKQuantizer` and `get_symmetric_quantization_config`: int8 pt2e quantization as XNNPACK runs it.

Activations are int8 per tensor (asymmetric, histogram-calibrated; or per token at run time for a dynamic
config), weights int8 symmetric per tensor or per output channel. A config applies globally, to the
nodes of named submodules, of submodule types, or to one operator's patterns (most specific wins:
module name, then module type, then operator, then global).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from executorch.export._torchao import require_torchao

require_torchao("executorch.backends.xnnpack.quantizer")  # one line naming the install, not a bare ImportError

from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import (
    OperatorConfig,
    OperatorPatternType,
    QuantizationConfig,
    QuantizationSpec,
    Quantizer,
    get_module_name_filter,
)

from executorch.backends.xnnpack.quantizer.xnnpack_quantizer_utils import (
    CONV_TRANSPOSE_OPS,
    OP_TO_ANNOTATOR,
    convert_scalars_to_attrs,
    propagate_annotation,
)
from executorch.export.quantizer import SCALE_EPS

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]

aten = torch.ops.aten


@functools.lru_cache
def get_symmetric_quantization_config(
    is_per_channel: bool = False,
    is_qat: bool = False,
    is_dynamic: bool = False,
    act_qmin: int = -128,
    act_qmax: int = 127,
    weight_qmin: int = -127,
    weight_qmax: int = 127,
) -> QuantizationConfig:
    """int8 activations (per tensor, affine) and int8 symmetric weights (per channel on axis 0, or per
    tensor). Dynamic: activation parameters are computed at run time and outputs stay float. QAT: fake
    quantization with moving-average observers. Equal arguments give the same (cached) object."""
    act_extra: Dict[str, Any] = {"eps": SCALE_EPS}
    if is_qat and is_dynamic:
        act_ctr = FakeQuantize
        act_extra["observer"] = MovingAverageMinMaxObserver.with_args(averaging_constant=1)
    elif is_qat:
        act_ctr = FusedMovingAvgObsFakeQuantize
    else:
        act_ctr = PlaceholderObserver if is_dynamic else HistogramObserver
    act = QuantizationSpec(dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax, qscheme=torch.per_tensor_affine,
                           is_dynamic=is_dynamic, observer_or_fake_quant_ctr=act_ctr.with_args(**act_extra))

    weight_extra: Dict[str, Any] = {"eps": SCALE_EPS}
    if is_qat:
        weight_ctr = FusedMovingAvgObsFakeQuantize
        weight_extra["observer"] = (MovingAveragePerChannelMinMaxObserver if is_per_channel
                                    else MovingAverageMinMaxObserver)
    else:
        weight_ctr = PerChannelMinMaxObserver if is_per_channel else MinMaxObserver
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric, ch_axis=0,
        is_dynamic=False, observer_or_fake_quant_ctr=weight_ctr.with_args(**weight_extra))
    return QuantizationConfig(act, None if is_dynamic else act, weight, None, is_qat)


def _supported_config_and_operators() -> List[OperatorConfig]:
    """What `get_supported_operators` reports: the static configs and the module/function patterns they cover."""
    patterns: List[OperatorPatternType] = [
        [torch.nn.Conv2d, torch.nn.ReLU], [torch.nn.Conv2d, F.relu], [F.conv2d, torch.nn.ReLU], [F.conv2d, F.relu],
        [torch.nn.Linear], [F.linear],
        [torch.add],
        [torch.nn.AdaptiveAvgPool2d], [F.adaptive_avg_pool2d],
    ]
    groups = [patterns[:4], patterns[4:6], patterns[6:7], patterns[7:]]
    configs = [get_symmetric_quantization_config(is_per_channel=pc, is_qat=qat) for pc in (False, True)
               for qat in (False, True)]
    return [OperatorConfig(config, copy.deepcopy(group)) for config in configs for group in groups]


@dataclass
class QuantPattern:
    """An annotator of `OP_TO_ANNOTATOR` and the configs it serves: dynamic ones, QAT ones, or static."""

    name: str
    is_dynamic: bool
    is_qat: bool
    op_overloads: Set[Any]


_LINEAR = {aten.linear.default}
_CONV = {aten.conv2d.default, aten.conv1d.default, aten.convolution.default}


def _module_type_filter(module_type: Callable) -> Callable[[Node], bool]:
    """True for nodes traced inside a submodule of `module_type` (at any depth)."""
    wanted = f"{module_type.__module__}.{module_type.__qualname__}"

    def accepts(node: Node) -> bool:
        for _, t in node.meta.get("nn_module_stack", {}).values():
            if (f"{t.__module__}.{t.__qualname__}" if isinstance(t, type) else t) == wanted:
                return True
        return False

    return accepts


def _outside(module_types: List[Callable], module_names: List[str]) -> Callable[[Node], bool]:
    filters = [_module_type_filter(t) for t in module_types] + [get_module_name_filter(m) for m in module_names]
    return lambda node: not any(f(node) for f in filters)


class XNNPACKQuantizer(Quantizer):
    """pt2e quantizer for XNNPACK: `prepare_pt2e(captured, XNNPACKQuantizer().set_global(config))`."""

    supported_config_and_operators = _supported_config_and_operators()
    # Applied in this order: a node belongs to the first pattern that takes it (fused patterns first).
    SUPPORTED_PATTERNS = [
        QuantPattern("conv_bn_relu", False, True, _CONV),
        QuantPattern("conv_bn", False, True, _CONV),
        QuantPattern("conv_transpose_bn_relu", False, True, set(CONV_TRANSPOSE_OPS)),
        QuantPattern("conv_transpose_bn", False, True, set(CONV_TRANSPOSE_OPS)),
        QuantPattern("linear_relu", False, False, _LINEAR),
        QuantPattern("linear", True, False, _LINEAR),
        QuantPattern("conv", True, False, _CONV),
        QuantPattern("conv_transpose", True, False, set(CONV_TRANSPOSE_OPS)),
        QuantPattern("conv_relu", False, False, _CONV),
        QuantPattern("conv_transpose_relu", False, False, set(CONV_TRANSPOSE_OPS)),
        QuantPattern("adaptive_avg_pool2d", False, False, {aten.adaptive_avg_pool2d.default}),
        QuantPattern("add_relu", False, False, {aten.add.Tensor}),
        QuantPattern("add", False, False, {aten.add.Tensor}),
        QuantPattern("mul_relu", False, False, {aten.mul.Tensor}),
        QuantPattern("mul", False, False, {aten.mul.Tensor}),
        QuantPattern("cat", False, False, {aten.cat.default}),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.operator_type_config: Dict[Any, Optional[QuantizationConfig]] = {}
        self.module_type_config: Dict[Callable, Optional[QuantizationConfig]] = {}
        self.module_name_config: Dict[str, Optional[QuantizationConfig]] = {}
        self.filter_fn: Optional[Callable[[Node], bool]] = None

    @classmethod
    def get_supported_quantization_configs(cls) -> List[QuantizationConfig]:
        return list({config for config, _ in cls.supported_config_and_operators})

    @classmethod
    def get_supported_operator_for_quantization_config(
            cls, quantization_config: Optional[QuantizationConfig]) -> List[OperatorPatternType]:
        if quantization_config is None:
            return [ops for _, group in cls.supported_config_and_operators for ops in group]
        for config, group in cls.supported_config_and_operators:
            if config == quantization_config:
                return group
        return []

    @classmethod
    def get_supported_operators(cls) -> List[OperatorConfig]:
        return cls.supported_config_and_operators

    def set_global(self, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        self.global_config = quantization_config
        return self

    def set_operator_type(self, operator_type: Any, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        """The config for the patterns of one operator overload (e.g. `torch.ops.aten.linear.default`)."""
        self.operator_type_config[operator_type] = quantization_config
        return self

    def set_module_type(self, module_type: Callable, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        """The config for nodes inside submodules of this type (e.g. `torch.nn.Linear`)."""
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str,
                        quantization_config: Optional[QuantizationConfig]) -> "XNNPACKQuantizer":
        """The config for nodes inside the submodule of this qualified name (e.g. `"blocks.0.attn"`)."""
        if quantization_config is None:
            raise ValueError(f"set_module_name({module_name!r}, None): a None config is not supported; "
                             "give a QuantizationConfig, or leave the module out (set_filter_function)")
        self.module_name_config[module_name] = quantization_config
        return self

    def set_filter_function(self, filter_fn: Callable[[Node], bool]) -> "XNNPACKQuantizer":
        """Only nodes for which `filter_fn` returns True are quantized (with whichever config applies)."""
        self.filter_fn = filter_fn
        return self

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return convert_scalars_to_attrs(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        names, types = list(self.module_name_config), list(self.module_type_config)
        for name, config in self.module_name_config.items():
            self._annotate_patterns(model, config, get_module_name_filter(name))
        for module_type, config in self.module_type_config.items():
            self._annotate_patterns(model, config, _module_type_filter(module_type))
        for op, config in self.operator_type_config.items():
            self._annotate_patterns(model, config, _outside(types, names), op)
        self._annotate_patterns(model, self.global_config, _outside(types, names))
        propagate_annotation(model)
        return model

    def _annotate_patterns(self, model: GraphModule, config: Optional[QuantizationConfig],
                           filter_fn: Callable[[Node], bool], operator: Any = None) -> None:
        if config is None:
            return
        user_filter = self.filter_fn

        def accepts(node: Node) -> bool:
            return filter_fn(node) and (user_filter is None or user_filter(node))

        dynamic = config.input_activation is not None and config.input_activation.is_dynamic
        for pattern in self.SUPPORTED_PATTERNS:
            if operator is not None and operator not in pattern.op_overloads:
                continue
            # A dynamic config covers only the patterns that run with dynamic activations (and, for
            # QAT, the conv-batchnorm patterns); a static one covers every pattern.
            if not dynamic or pattern.is_dynamic or (config.is_qat and pattern.is_qat):
                OP_TO_ANNOTATOR[pattern.name](model, config, accepts)

    def validate(self, model: GraphModule) -> None:
        """Nothing to check: every pattern annotated here is one XNNPACK runs quantized."""
