"""`ExportPass`: a graph pass that rebuilds the graph node by node through overridable hooks;
`ExportedProgramPassBase`, a pass over a whole program."""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch import fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.utils import _pytree as pytree

from executorch.exir.dialects._edge_ops import _is_call_delegate
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.error import ExportError

_OPERATORS = (torch._ops.OpOverload, EdgeOpOverload)

# Node metadata a pass hook may read but not set through NodeMetadata: the tracer derives them.
PROTECTED_KEYS: set[str] = {"val", "stack_trace", "nn_module_stack", "debug_handle", "tensor_meta"}

__all__ = ["PROTECTED_KEYS", "EdgeOpOverload", "ExportPass", "ExportPassBaseError", "ExportedProgramPassBase",
           "ExportedProgramPassResult", "NodeMetadata", "PassResult", "ProxyValue"]


class ExportPassBaseError(RuntimeError):
    """A pass found its input or its output not as it needs them."""


@dataclass(frozen=True)
class ExportedProgramPassResult:
    exported_program: Any  # torch.export.ExportedProgram
    modified: bool


class ExportedProgramPassBase(ABC):
    """A pass over a whole ExportedProgram (graph, signature, constants): `call` does the work and returns an
    ExportedProgramPassResult; `requires` and `ensures` may check the program before and after."""

    def __call__(self, exported_program) -> ExportedProgramPassResult:
        self.requires(exported_program)
        result = self.call(exported_program)
        self.ensures(result.exported_program)
        return result

    @abstractmethod
    def call(self, exported_program) -> ExportedProgramPassResult:
        """The pass itself."""

    def requires(self, exported_program) -> None:  # noqa: B027 (optional hook)
        """Raise ExportPassBaseError if the program lacks what `call` needs."""

    def ensures(self, exported_program) -> None:  # noqa: B027 (optional hook)
        """Raise ExportPassBaseError if `call` left the program wrong."""


class NodeMetadata:
    """A node's `meta` dict as a pass hook sees it; copied onto the node the hook creates."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def copy(self) -> "NodeMetadata":
        return NodeMetadata(self.data)


class ProxyValue:
    """A value of the graph being built: its example value (`data`) and the node producing it."""

    def __init__(self, data: Any, node: fx.Node) -> None:
        self.data = data
        self.node = node

    @property
    def proxy(self) -> fx.Node:
        return self.node

    def to_tensor(self) -> torch.Tensor:
        if not isinstance(self.data, torch.Tensor):
            raise ExportError(f"value of node {self.node.name!r} is {type(self.data).__name__}, not a tensor")
        return self.data

    def is_tensor(self) -> bool:
        return isinstance(self.data, torch.Tensor)

    def __repr__(self) -> str:
        return f"ProxyValue({self.node.name})"


def _same_layout(new: Any, old: Any) -> bool:
    if isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
        return len(new) == len(old) and all(_same_layout(a, b) for a, b in zip(new, old))
    if isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor):
        # A real tensor a graph rewrite recorded (Arm's scalar `full` nodes) is replaced by the fake one.
        return isinstance(new, FakeTensor) == isinstance(old, FakeTensor) and (
            new.shape, new.dtype, new.stride(), new.storage_offset()) == (
            old.shape, old.dtype, old.stride(), old.storage_offset())
    return False


def _attribute(module: torch.nn.Module, target: str) -> Any:
    for part in target.split("."):
        module = getattr(module, part)
    return module


def _data_of(tree: Any) -> Any:
    return pytree.tree_map_only(ProxyValue, lambda v: v.data, tree)


class ExportPass(PassBase):
    """Rebuild a graph module, calling `placeholder`, `call_operator`, `call_getitem` and `output`
    for each node; the defaults copy the node. Override `call_operator(op, args, kwargs, meta)` to
    replace an operator: call `super().call_operator(new_op, new_args, kwargs, meta)` to emit one.
    Example values are recomputed from the arguments' example values, so a replacement with a
    different result shape or dtype gets correct metadata."""

    def __init__(self) -> None:
        super().__init__()
        self._graph: Optional[fx.Graph] = None
        self._module: Optional[fx.GraphModule] = None
        self._source: Optional[fx.Node] = None
        self._fake_mode = None

    # Hooks ------------------------------------------------------------------------------------

    def placeholder(self, name: str, arg: Any, meta: NodeMetadata) -> ProxyValue:
        node = self._graph.placeholder(name)
        node.meta.update(meta.data)
        return ProxyValue(arg, node)

    def call_operator(self, op, args: tuple, kwargs: dict, meta: NodeMetadata) -> ProxyValue:
        """An operator overload, or a higher-order op called with keywords (`auto_functionalized_v2`)."""
        return self._emit(op, args, kwargs, meta)

    def call_sym(self, target, args: tuple, meta: NodeMetadata) -> ProxyValue:
        return self._emit(target, args, {}, meta)

    def call_size_operator(self, tensor: ProxyValue, dim: int, meta: NodeMetadata, *,
                           edge_dialect: bool = False) -> Union[ProxyValue, int]:
        """`tensor.size(dim)` as a graph argument: an int for a static dim, a new `sym_size.int` node (the
        edge op with `edge_dialect`) for a symbolic one, since a node cannot take a SymInt as an argument."""
        size = tensor.data.shape[dim]
        if not isinstance(size, torch.SymInt):
            return int(size)
        if edge_dialect:
            from executorch.exir.dialects._ops import ops as exir_ops

            op = exir_ops.edge.aten.sym_size.int
        else:
            op = torch.ops.aten.sym_size.int
        return self.call_operator(op, (tensor, dim), {}, meta)

    def call_size_operator_all(self, tensor: ProxyValue, meta: NodeMetadata, *,
                               edge_dialect: bool = False) -> list[Union[ProxyValue, int]]:
        """Every dim of `tensor` as `call_size_operator` gives it."""
        return [self.call_size_operator(tensor, d, meta, edge_dialect=edge_dialect)
                for d in range(len(tensor.data.shape))]

    def call_getitem(self, value: ProxyValue, key: int, meta: NodeMetadata) -> ProxyValue:
        return self._emit(operator.getitem, (value, key), {}, meta)

    def output(self, results: list, meta: NodeMetadata) -> ProxyValue:
        node = self._graph.output(self._arg_nodes(results))
        node.meta.update(meta.data)
        return ProxyValue(None, node)

    # Driver -----------------------------------------------------------------------------------

    def _emit(self, target, args: tuple, kwargs: dict, meta: NodeMetadata) -> ProxyValue:
        # Named in the order the rebuilt graph creates them (`aten_add_tensor`, `aten_add_tensor_1`), as
        # ExecuTorch's retracing names them; the program's signature follows the outputs by position.
        # A torch operator is named after its packet (`conv2d`), an edge op after itself (`aten_add_tensor`).
        name = (self._graph._target_to_str(target.overloadpacket.__name__)
                if isinstance(target, torch._ops.OpOverload) else None)
        node = self._graph.create_node("call_function", target, self._arg_nodes(tuple(args)),
                                       self._arg_nodes(dict(kwargs)), name=name)
        node.meta.update(meta.data)
        value = self._evaluate(target, args, kwargs, meta)
        source, self._source = self._source, None
        if source is not None and source.target == target and _same_layout(value, source.meta.get("val")):
            value = source.meta["val"]  # an unchanged node keeps its value as export recorded it
        node.meta["val"] = value
        return ProxyValue(value, node)

    def _evaluate(self, target, args, kwargs, meta: NodeMetadata) -> Any:
        # Re-run the operator on the example (fake) values so a replaced op gets its own metadata.
        data_args, data_kwargs = _data_of(tuple(args)), _data_of(dict(kwargs))
        if target is operator.getitem:
            return data_args[0][data_args[1]]
        if _is_call_delegate(target) and "val" in meta:
            return meta["val"]  # a lowered partition's results do not change with the graph around it
        fake = next((t.fake_mode for t in pytree.tree_leaves((data_args, data_kwargs))
                     if hasattr(t, "fake_mode")), None) or self._fake_mode
        if fake is None:
            return meta.data.get("val")
        # Without autograd, as export recorded values: parameters require grad, inference results do not.
        # A module attribute arrives as the real tensor (as a hook sees it); the fake mode takes it in.
        allowed, fake.allow_non_fake_inputs = fake.allow_non_fake_inputs, True
        try:
            with fake, torch.no_grad():
                return target(*data_args, **data_kwargs)
        finally:
            fake.allow_non_fake_inputs = allowed

    def _arg_nodes(self, tree: Any) -> Any:
        """`tree` with each ProxyValue as its node and each tensor attribute as a new `get_attr` node
        placed here, where it is used: `_param_constantN` (a new name each use) for a parameter,
        `_tensor_constantN` (one name a tensor) otherwise, as ExecuTorch's retracing places them."""
        def node_of(v: Any) -> Any:
            if isinstance(v, ProxyValue):
                return v.node
            if isinstance(v, torch.nn.Parameter):
                name = f"_param_constant{self._n_params}"
                self._n_params += 1
            elif isinstance(v, torch.Tensor):
                name = self._tensor_names.get(id(v))
                if name is None:
                    name = self._tensor_names[id(v)] = f"_tensor_constant{len(self._tensor_names)}"
            else:
                return v
            self._attrs[name] = v
            node = self._graph.get_attr(name)
            node.meta["val"] = self._attr_vals.get(id(v), v)
            return node

        return pytree.tree_map(node_of, tree, is_leaf=lambda v: isinstance(v, ProxyValue))

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        from executorch.exir.passes._graph import fake_mode_of

        self._graph = fx.Graph()
        self._graph.set_codegen(graph_module.graph._codegen)  # a pytree-flattened module keeps its signature
        self._module = graph_module
        self._attrs: dict[str, Any] = {}
        self._attr_vals: dict[int, Any] = {}
        self._tensor_names: dict[int, str] = {}
        self._n_params = 0
        # An op with no tensor arguments (a shape constant) still runs under the graph's fake mode.
        self._fake_mode = fake_mode_of(graph_module.graph)
        env: dict[fx.Node, ProxyValue] = {}

        def arg(a: Any) -> Any:
            return fx.node.map_arg(a, lambda n: env[n])

        for node in graph_module.graph.nodes:
            meta = NodeMetadata(node.meta)
            self._source = node if node.op == "call_function" else None
            if node.op == "placeholder":
                env[node] = self.placeholder(node.name, node.meta.get("val"), meta)
            elif node.op == "get_attr":
                value = _attribute(graph_module, node.target)
                if isinstance(value, torch.Tensor):
                    # Handed to the hooks as itself; it enters the new graph where an operator uses it.
                    if "val" in node.meta:
                        self._attr_vals[id(value)] = node.meta["val"]
                    env[node] = value
                    continue
                new = self._graph.get_attr(node.target)
                new.meta.update(node.meta)
                self._attrs[node.target] = value
                env[node] = ProxyValue(node.meta.get("val", value), new)
            elif node.op == "call_function" and node.target is operator.getitem:
                env[node] = self.call_getitem(env[node.args[0]], node.args[1], meta)
            elif node.op == "call_function" and not isinstance(node.target, _OPERATORS) and not node.kwargs:
                env[node] = self.call_sym(node.target, arg(node.args), meta)
            elif node.op == "call_function":
                env[node] = self.call_operator(node.target, arg(node.args), arg(dict(node.kwargs)), meta)
            elif node.op == "output":
                self.output(arg(node.args[0]), meta)
            else:
                raise ExportError(
                    f"ExportPass cannot rebuild node {node.name!r} ({node.op}); flatten submodules and "
                    "control flow before running it"
                )
        # The new module holds what the new graph reads: the attributes it uses, by their new names.
        new_gm = fx.GraphModule(self._attrs, self._graph)
        new_gm.meta.update(graph_module.meta)
        self._graph = self._module = None
        return PassResult(new_gm, True)
