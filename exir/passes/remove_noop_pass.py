"""Dequantize -> quantize pairs that give back their input, in ATen and edge graphs (names as ExecuTorch's
`exir.passes.remove_noop_pass`, whose helpers vendor transforms import)."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)
from torch import fx

from executorch.exir.dialects._ops import ops as exir_ops

__all__ = ["_DEQUANT_OPS", "_QUANT_OPS", "eliminate_dq_q"]

_qd = torch.ops.quantized_decomposed
_DEQUANT_OPS: tuple = (_qd.dequantize_per_tensor.default, _qd.dequantize_per_channel.default,
                       exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
                       exir_ops.edge.quantized_decomposed.dequantize_per_channel.default)
_QUANT_OPS: tuple = (_qd.quantize_per_tensor.default, _qd.quantize_per_channel.default,
                     exir_ops.edge.quantized_decomposed.quantize_per_tensor.default,
                     exir_ops.edge.quantized_decomposed.quantize_per_channel.default)


def eliminate_dq_q(graph_module: fx.GraphModule, dequant_nodes: list) -> None:
    """For each dequantize node, a quantize user with the same parameters gives back the dequantize's
    input: its users read that input instead (the nodes left without users are the caller's to drop)."""
    for dq in dequant_nodes:
        if dq.target not in _DEQUANT_OPS:
            raise ValueError(f"node '{dq.name}' ({dq.target}) is not a dequantize")
        for user in list(dq.users):
            if user.target in _QUANT_OPS and list(user.args[1:]) == list(dq.args[1:]):
                user.replace_all_uses_with(dq.args[0])
