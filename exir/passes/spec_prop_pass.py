"""`SpecPropPass`: give every graph value a `TensorSpec` in `node.meta["spec"]`, as ExecuTorch's memory
planners read them."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.utils import _pytree as pytree

from executorch.exir.tensor import TensorSpec


def _spec(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorSpec.from_tensor(value)
    if isinstance(value, (int, float, bool)):
        return value
    return None


class SpecPropPass(PassBase):
    """Sets `node.meta["spec"]` from `node.meta["val"]` on every node of the graph and of its
    control-flow subgraphs: a `TensorSpec` per tensor (tuples of them for several outputs), the
    value for a Python scalar; a `getitem` shares its source's spec object, the output node
    lists the specs of what it returns."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        for gm in graph_module.modules():
            if not isinstance(gm, fx.GraphModule):
                continue
            for node in gm.graph.nodes:
                if node.op == "call_function" and node.target is operator.getitem:
                    source = node.args[0].meta.get("spec")
                    if isinstance(source, (tuple, list)):
                        node.meta["spec"] = source[node.args[1]]
                        continue
                if node.op == "output":
                    node.meta["spec"] = pytree.tree_map(
                        lambda a: a.meta.get("spec") if isinstance(a, fx.Node) else _spec(a), node.args[0])
                    continue
                if "val" in node.meta:
                    node.meta["spec"] = pytree.tree_map(_spec, node.meta["val"])
        return PassResult(graph_module, True)

    def update_placeholder_tensor_specs(self, exported_program: ExportedProgram, graph_module: fx.GraphModule) -> None:
        """Mark the specs of the placeholders that are constants (parameters, buffers no one mutates, lifted
        tensors) `const`, so planners leave them out; run after `call`."""
        sig = exported_program.graph_signature
        mutated = set(sig.buffers_to_mutate.values())
        constant = set(sig.inputs_to_parameters) | set(sig.inputs_to_lifted_tensor_constants)
        constant |= {name for name, target in sig.inputs_to_buffers.items() if target not in mutated}
        for node in graph_module.graph.nodes:
            if node.op != "placeholder":
                continue
            if "spec" not in node.meta:
                raise RuntimeError(f"placeholder {node.name} has no meta['spec']: run SpecPropPass on the graph first")
            if node.target in constant:
                node.meta["spec"].const = True
