"""`make_alloc_node`: a `memory.alloc` node for an out argument, sized for the largest shape."""

from __future__ import annotations

from typing import Any

from torch import fx

from executorch.exir import memory
from executorch.exir.sym_util import eval_shape_upper_bound


def _spec(shape, dtype) -> tuple:
    return tuple(eval_shape_upper_bound(shape)), dtype


def make_alloc_node(graph_module: fx.GraphModule, val: Any, tensor_meta: Any) -> fx.Node:
    """A node allocating what `val` (a fake tensor, or a list/tuple of them) needs; where a value is
    None its `tensor_meta` (TensorMetadata) gives shape and dtype instead. Appended to the graph:
    move it before its user."""
    if isinstance(val, (list, tuple)):
        metas = tensor_meta if isinstance(tensor_meta, (list, tuple)) else [None] * len(val)
        spec: Any = []
        for v, m in zip(val, metas):
            source = v if v is not None else m
            if source is None:
                raise ValueError("make_alloc_node: a result has neither a value nor TensorMetadata to size it by")
            spec.append(_spec(source.shape, source.dtype))
    else:
        source = val if val is not None else tensor_meta
        if source is None:
            raise ValueError("make_alloc_node: the result has neither a value nor TensorMetadata to size it by")
        spec = _spec(source.shape, source.dtype)
    node = graph_module.graph.call_function(memory.alloc, (spec,))
    node.meta["val"] = val
    node.meta["tensor_meta"] = tensor_meta
    return node
