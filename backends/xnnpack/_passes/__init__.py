"""Graph rewrites preprocess runs on a partition before writing it, in this order (`XNNPACK_PASSES`).

Each pass is `fn(graph, consts) -> None`: it edits the partition's fx graph in place, and `consts`
(constant placeholder -> tensor) gains the constants it makes. `FuseBatchNormPass` is upstream's whole-program
pass, which other backends (Vulkan's) import from here.
"""

from __future__ import annotations

from executorch.backends.xnnpack._passes.fold import (
    convert_to_linear, fold_constants, fuse_activations, fuse_batch_norm, remove_first_output_getitems,
    remove_noop_copies,
)
from executorch.backends.xnnpack._passes.quant import absorb_quant

XNNPACK_PASSES = [
    remove_first_output_getitems,
    absorb_quant,
    convert_to_linear,
    fuse_batch_norm,
    remove_noop_copies,
    fold_constants,
    fuse_activations,
]

__all__ = ["XNNPACK_PASSES", "FuseBatchNormPass"]


def __getattr__(name: str):
    if name == "FuseBatchNormPass":
        from executorch.backends.xnnpack._passes.fuse_batch_norm import FuseBatchNormPass

        return FuseBatchNormPass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
