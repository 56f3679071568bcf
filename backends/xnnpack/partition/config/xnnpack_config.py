"""`ConfigPrecisionType` and `XNNPartitionerConfig`: one config says whether XNNPACK takes one op's node."""

from __future__ import annotations

from enum import Enum
from typing import Iterable, List, Optional

import torch
from torch.export import ExportedProgram

from executorch.exir.error import ExportError


class ConfigPrecisionType(Enum):
    FP32 = 1
    STATIC_QUANT = 2
    DYNAMIC_QUANT = 3


_FLOAT_DTYPES = (torch.float32, torch.float16)


def _tensor_ok(val) -> bool:
    """A value XNNPACK can hold: a float32/float16 tensor of static, non-empty shape."""
    if not isinstance(val, torch.Tensor) or val.dtype not in _FLOAT_DTYPES:
        return False
    return all(isinstance(d, int) and d > 0 for d in val.shape)


class XNNPartitionerConfig:
    """Subclasses name `target_name` (the op overload's `name.overload`), the precisions they take,
    and may add `check_constraints`; `get_node_and_deps` returns the nodes claimed together."""

    target_name: str = ""

    def __init__(self, **kwargs) -> None:
        for key in kwargs:
            # Options the published configs take that this implementation does not honour.
            raise ExportError(f"XNNPACK partitioner config {type(self).__name__}: option {key!r} is not supported; "
                              "drop it (supported options: configs, config_precisions, per_op_mode, verbose)")
        self.enabled_precision_types: List[ConfigPrecisionType] = list(self.supported_precision_types())

    def supported_precision_types(self) -> List[ConfigPrecisionType]:
        return [ConfigPrecisionType.FP32]

    def set_enabled_precision_types(self, precisions: Optional[Iterable[ConfigPrecisionType]]) -> None:
        """Keep only the wanted precisions this config supports (None: all it supports)."""
        if precisions:
            self.enabled_precision_types = [p for p in precisions if p in self.supported_precision_types()]

    def check_common_constraints(self, node: torch.fx.Node, ep: ExportedProgram) -> bool:
        """Enabled for fp32, and every tensor in and out is a static float tensor of one dtype."""
        if ConfigPrecisionType.FP32 not in self.enabled_precision_types:
            return False
        vals = [a.meta.get("val") for a in node.all_input_nodes]
        out = node.meta.get("val")
        # A multi-output op (batch norm, max pool with indices) is taken for its first output only.
        vals.append(out[0] if isinstance(out, (tuple, list)) else out)
        tensors = [v for v in vals if v is not None]
        if not tensors or not all(_tensor_ok(v) for v in tensors):
            return False
        return len({v.dtype for v in tensors}) == 1

    def check_constraints(self, node: torch.fx.Node, ep: ExportedProgram) -> bool:
        return self.check_common_constraints(node, ep)

    def get_node_and_deps(self, node: torch.fx.Node, ep: ExportedProgram) -> List[torch.fx.Node]:
        return [node]

    def get_partition(self, node: torch.fx.Node, ep: ExportedProgram) -> List[torch.fx.Node]:
        """The nodes claimed with `node` ([] when it is not taken)."""
        if not self.check_constraints(node, ep):
            return []
        return self.get_node_and_deps(node, ep)

    def get_original_aten(self) -> Optional[torch._ops.OpOverload]:
        """An op kept whole through `to_edge` so this config can claim it (None: the edge op itself)."""
        return None
