"""Memory plan checks: `Verifier` for a graph's `TensorSpec`s (upstream's `executorch.exir.memory_planning.Verifier`),
`verify` for buffers, and `filter_nodes`; `executorch.exir.memory_planning` serves them."""

from __future__ import annotations

from typing import Iterable

from torch import fx
from torch.utils import _pytree as pytree

from executorch.exir._arena import Buffer
from executorch.exir.tensor import TensorSpec, is_alias, user_outputs


def verify(buffers: list[Buffer]) -> None:
    """Raise AssertionError if two buffers live at once share a byte (a planner bug)."""
    by_offset = sorted((b for b in buffers if b.size), key=lambda b: b.offset)
    for i, a in enumerate(by_offset):
        for b in by_offset[i + 1:]:
            if b.offset >= a.offset + a.size:
                break
            if a.overlaps(b):
                raise AssertionError(f"memory plan overlap: {a} and {b}")


def filter_nodes(inputs) -> Iterable[fx.Node]:
    """The fx nodes in `inputs`, at any depth."""
    return (x for x in pytree.tree_leaves(inputs) if isinstance(x, fx.Node))


class Verifier:
    """Checks the memory plan held in a graph's `node.meta["spec"]` (`mem_id`, `mem_offset`,
    `lifetime`, as ExecuTorch's planners leave them): no two tensors live at once share bytes, and
    graph inputs / outputs are planned or not as `alloc_graph_input` / `alloc_graph_output` say.
    A view the plan keeps in its base's storage is its base's bytes, as upstream's memory views are."""

    def __init__(self, graph_module: fx.GraphModule, alloc_graph_input: bool, alloc_graph_output: bool,
                 alloc_mutable_buffers: bool = True, graph_signature=None) -> None:
        self.graph_module = graph_module
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.alloc_mutable_buffers = alloc_mutable_buffers
        self.graph_signature = graph_signature

    def _specs(self, nodes) -> list:
        seen, out = set(), []
        for node in nodes:
            if is_alias(node):
                continue
            for spec in pytree.tree_leaves(node.meta.get("spec")):
                if isinstance(spec, TensorSpec) and id(spec) not in seen and not spec.const:
                    seen.add(id(spec))
                    out.append(spec)
        return out

    def verify_storage_reuse(self, allow_lifetime_and_storage_overlap: bool = False) -> int:
        """The number of planned tensor pairs that share bytes; AssertionError when two of them are
        live at once (unless `allow_lifetime_and_storage_overlap`)."""
        specs = [s for s in self._specs(self.graph_module.graph.nodes) if s.mem_id is not None]
        reuse = 0
        for i, a in enumerate(specs):
            for b in specs[i + 1:]:
                if a.mem_id != b.mem_id or not a.nbytes() or not b.nbytes():
                    continue
                if (a.mem_offset >= b.mem_offset + b.allocated_memory
                        or b.mem_offset >= a.mem_offset + a.allocated_memory):
                    continue
                live_together = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
                if live_together and not allow_lifetime_and_storage_overlap:
                    raise AssertionError(f"memory plan overlap: {a} (offset {a.mem_offset}, lifetime {a.lifetime}) "
                                         f"and {b} (offset {b.mem_offset}, lifetime {b.lifetime}) share bytes")
                reuse += 1
        return reuse

    def verify_graph_input_output(self) -> None:
        """AssertionError when a graph input or output is planned against `alloc_graph_input` /
        `alloc_graph_output`."""
        # Write-backs of mutated state are not outputs; an input returned as is takes the caller's memory when
        # either flag says so, so it is not checked when they differ.
        nodes = list(self.graph_module.graph.nodes)
        user = set(self.graph_signature.user_inputs) if self.graph_signature is not None else None
        inputs = self._specs(n for n in nodes if n.op == "placeholder" and (user is None or n.name in user))
        returned = (user_outputs(self.graph_module, self.graph_signature)
                    if nodes and nodes[-1].op == "output" else [])
        outputs = self._specs(returned)
        if self.alloc_graph_input != self.alloc_graph_output:
            both = {id(s) for s in inputs} & {id(s) for s in outputs}
            inputs, outputs = ([s for s in specs if id(s) not in both] for specs in (inputs, outputs))
        for what, specs, wanted in (("input", inputs, self.alloc_graph_input),
                                    ("output", outputs, self.alloc_graph_output)):
            for spec in specs:
                if (spec.mem_id is not None) != wanted:
                    raise AssertionError(f"graph {what} {spec} is {'' if spec.mem_id is not None else 'not '}planned, "
                                         f"but alloc_graph_{what}={wanted}")


def _do_user_inputs_exist(graph_signature) -> bool:
    """Whether a method has a user input the plan must check: one that is not a Python scalar or string (a
    method without a signature, or whose user inputs are all such constants, has none)."""
    if graph_signature is None:
        return False
    from torch.export.graph_signature import ConstantArgument, InputKind

    return any(not isinstance(spec.arg, ConstantArgument) or not isinstance(spec.arg.value, (int, float, bool, str))
               for spec in graph_signature.input_specs if spec.kind == InputKind.USER_INPUT)
