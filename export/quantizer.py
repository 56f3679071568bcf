"""`Int8Quantizer`: the default static int8 pt2e quantizer of the portable recipes (torchao interface).

Weights of conv and linear are int8, symmetric, one scale per output channel; activations around
conv, linear and add are int8, affine, one scale per tensor, from min/max over the calibration
samples. Values a method returns stay float, so its outputs carry no extra rounding step.
"""

from __future__ import annotations

import operator

import torch
from torch import fx
from torchao.quantization.pt2e import MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer

aten = torch.ops.aten

_WEIGHTED = {aten.conv1d.default, aten.conv2d.default, aten.linear.default}
_ADD = {aten.add.Tensor, aten.add_.Tensor, operator.add}
SCALE_EPS = 2 ** -12  # smallest scale: keeps an all-zero tensor from dividing by zero


def _activation() -> QuantizationSpec:
    return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                            observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=SCALE_EPS))


def _weight() -> QuantizationSpec:
    return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
                            ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=SCALE_EPS))


class Int8Quantizer(Quantizer):
    """Annotates conv/linear (int8 input, per-channel int8 weight, int8 output) and tensor adds."""

    def __init__(self, quantize_outputs: bool = False) -> None:
        super().__init__()
        if not isinstance(quantize_outputs, bool):
            raise TypeError(f"Int8Quantizer(quantize_outputs=...) takes True or False, got {quantize_outputs!r}")
        self.quantize_outputs = quantize_outputs

    def _output_spec(self, node: fx.Node):
        returned = any(user.op == "output" for user in node.users)
        return _activation() if self.quantize_outputs or not returned else None

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or "quantization_annotation" in node.meta:
                continue
            if node.target in _WEIGHTED and is_float_tensor(node.args[0]) and is_float_tensor(node.args[1]):
                qspecs = {node.args[0]: _activation(), node.args[1]: _weight()}
            elif node.target in _ADD and all(is_float_tensor(a) for a in node.args[:2]):
                qspecs = {node.args[0]: _activation(), node.args[1]: _activation()}
            else:
                continue
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map=qspecs, output_qspec=self._output_spec(node), _annotated=True)
        return model

    def validate(self, model: fx.GraphModule) -> None:
        """Nothing to check: every annotation this quantizer makes is one the runtime kernels run."""


def is_float_tensor(arg) -> bool:
    """Whether a graph argument is a float32 tensor node (what the int8 observers can observe)."""
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32
