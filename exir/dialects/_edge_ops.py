"""The edge op table: which operators an edge graph may hold, and how the runtime runs each.

This is the one home of these facts. The edge check (`is_edge_op`), the decomposer
(`is_final`), the emitter (`prim_op_name`, `out_variant`) and the runtimes' agreement tests all
read it; nothing else keeps its own list.

How to add an op:
- a core-ATen op: nothing to add here. Torch tags it `core`, so it is an edge op, and the emitter
  finds its `.out` overload by schema; give the runtimes a kernel for that `.out` overload
  (kernels/portable/functions.yaml for the native runtime).
- size arithmetic on symbolic ints (`operator.*`, `aten.sym_*`): add the Python target and the name
  of the prim kernel to `SYM_OPS`, and give both runtimes that prim kernel (the Python runtime's
  `SCALAR_KERNELS`, the native prim ops in functions.yaml); test/test_edge_op_table.py checks both.
- an op outside `aten` (a `torch.library` custom op): define a functional overload and an `.out`
  overload with the same arguments plus `Tensor(a!) out`; register a kernel for the `.out`
  overload with each runtime that is to run it. Nothing to add here.
- a view op: add it with its functional `*_copy` twin to `VIEW_TO_COPY`.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Optional

import torch
from torch import fx

from executorch.exir.dialects.edge._ops import EdgeOpOverload, aten_op, find_out_variant, retarget, wrap_op
from executorch.exir.error import ExportError

aten = torch.ops.aten

# Size arithmetic on symbolic ints the graph may hold, and the runtime prim kernel evaluating each.
SYM_OPS: dict[object, str] = {
    aten.sym_size.int: "aten::sym_size.int",
    aten.sym_stride.int: "aten::sym_stride.int",
    aten.sym_numel.default: "aten::sym_numel",
    operator.add: "executorch_prim::add.Scalar",
    operator.sub: "executorch_prim::sub.Scalar",
    operator.mul: "executorch_prim::mul.Scalar",
    operator.floordiv: "executorch_prim::floordiv.Scalar",
    operator.truediv: "executorch_prim::truediv.Scalar",
    operator.mod: "executorch_prim::mod.Scalar",
    operator.eq: "executorch_prim::eq.Scalar",
    operator.gt: "executorch_prim::gt.Scalar",
    operator.lt: "executorch_prim::lt.Scalar",
    operator.ge: "executorch_prim::ge.Scalar",
    operator.le: "executorch_prim::le.Scalar",
    operator.neg: "executorch_prim::neg.Scalar",
    torch.sym_float: "executorch_prim::sym_float.Scalar",
    torch.sym_int: "executorch_prim::sym_int.Scalar",
    torch.sym_max: "executorch_prim::sym_max.Scalar",
    torch.sym_min: "executorch_prim::sym_min.Scalar",
    torch.sym_not: "executorch_prim::sym_not.Scalar",
    torch.sym_ite: "executorch_prim::sym_ite.Scalar",
    math.ceil: "executorch_prim::ceil.Scalar",
    math.trunc: "executorch_prim::trunc.Scalar",
    builtins.round: "executorch_prim::round.Scalar",
    aten._local_scalar_dense.default: "aten::_local_scalar_dense",  # `.item()`
}

# View ops and the functional copies the edge dialect replaces them with (a view of a planned
# tensor cannot be expressed in a program; a copy can).
VIEW_TO_COPY: dict[object, object] = {
    aten.view.default: aten.view_copy.default,
    aten.permute.default: aten.permute_copy.default,
    aten.expand.default: aten.expand_copy.default,
    aten.unsqueeze.default: aten.unsqueeze_copy.default,
    aten.squeeze.dim: aten.squeeze_copy.dim,
    aten.squeeze.dims: aten.squeeze_copy.dims,
    aten.squeeze.default: aten.squeeze_copy.default,
    aten.slice.Tensor: aten.slice_copy.Tensor,
    aten.select.int: aten.select_copy.int,
    aten.alias.default: aten.alias_copy.default,
    aten.t.default: aten.t_copy.default,
    aten.transpose.int: aten.transpose_copy.int,
    aten.split.Tensor: aten.split_copy.Tensor,
    aten.split_with_sizes.default: aten.split_with_sizes_copy.default,
    aten.unbind.int: aten.unbind_copy.int,
    aten.diagonal.default: aten.diagonal_copy.default,
    aten.unfold.default: aten.unfold_copy.default,
    aten._unsafe_view.default: aten.view_copy.default,
    aten.as_strided.default: aten.as_strided_copy.default,
}

# Copies the emitter turns into aliases of their input's bytes instead of kernel calls: view_copy
# always (the bytes of a contiguous tensor in another shape)...
ALIAS_VIEW_COPIES = frozenset({aten.view_copy.default})
# ...and these when input and output are contiguous (an expand only to the same shape), since they
# keep every element in row-major order (attention heads go through several per layer).
SAME_ORDER_COPIES = frozenset({aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy.default,
                               aten.unsqueeze_copy.default, aten.expand_copy.default})

# The core-ATen view ops torch's decomposition produces; the edge pass turns them into copies.
CORE_VIEWS = frozenset({aten.view.default, aten.permute.default, aten.expand.default, aten.unsqueeze.default,
                        aten.squeeze.dim, aten.squeeze.dims, aten.slice.Tensor, aten.select.int,
                        aten.alias.default})

# Ops that check at trace time and compute nothing at run time; to_edge drops them.
TRACE_ASSERTS = frozenset({aten._assert_tensor_metadata.default, aten._assert_scalar.default,
                           aten.sym_constrain_range_for_size.default})

# Namespaces whose ops belong to torch itself: only the core-tagged ones are edge ops.
_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim"})

# Control flow the emitter lowers to jumps (torch.cond, torch.map, torch.scan), as ExecuTorch does.
CONTROL_FLOW = frozenset({torch.ops.higher_order.cond, torch.ops.higher_order.map_impl, torch.ops.higher_order.scan})

# torch's functional wrappers of a mutating op; to_executorch puts the op back, writing in place.
_AUTO_FUNCTIONALIZED = frozenset({torch.ops.higher_order.auto_functionalized,
                                  torch.ops.higher_order.auto_functionalized_v2})


def prim_op_name(target) -> Optional[str]:
    """The runtime prim kernel evaluating a symbolic op, or None for ordinary ops."""
    target = aten_op(target)
    try:
        return SYM_OPS.get(target)
    except TypeError:  # unhashable targets are no sym ops
        return None


def _is_call_delegate(target) -> bool:
    return getattr(target, "__name__", None) == "executorch_call_delegate"


def is_custom_op(target) -> bool:
    """A `torch.library` operator outside torch's own namespaces (and not `dim_order_ops`)."""
    target = aten_op(target)
    return (isinstance(target, torch._ops.OpOverload) and target.namespace not in _TORCH_NAMESPACES
            and target.namespace != "dim_order_ops")


def _is_core_functional(target) -> bool:
    """A core-ATen (or view_copy) op that writes none of its inputs, or a dim-order copy."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target.namespace == "dim_order_ops":
        return True
    if _is_symbolic(target) or (torch.Tag.core not in target.tags and torch.Tag.view_copy not in target.tags):
        return False
    return not target._schema.is_mutable


def _is_symbolic(target) -> bool:
    """Size arithmetic: Python operators on sizes, and the `aten.sym_*` ops (some tagged core),
    which are edge ops only through SYM_OPS."""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace == "aten" and target._schema.name.startswith("aten::sym_")
    return getattr(target, "__module__", None) in ("_operator", "operator", "torch", "builtins", "math")


def is_final(target) -> bool:
    """Whether the decomposer leaves `target` as it is: an edge op, a core view the edge pass turns
    into a copy, or a trace-time assert the decomposer drops. Control flow, delegate calls and
    custom ops that write their inputs are not final: torch's decomposer functionalizes the graph."""
    target = aten_op(target)
    return (target is operator.getitem or target in CORE_VIEWS or target in TRACE_ASSERTS
            or prim_op_name(target) is not None or _is_core_functional(target)
            or (is_custom_op(target) and not target._schema.is_mutable and find_out_variant(target) is not None))


def functionalized_op(node: fx.Node) -> Optional[torch._ops.OpOverload]:
    """The mutating custom op an `auto_functionalized(_v2)` node wraps (torch's functional form of a
    call that writes its inputs, e.g. `llama::update_cache`), or None for any other node."""
    if node.op != "call_function" or node.target not in _AUTO_FUNCTIONALIZED:
        return None
    return node.args[0] if isinstance(node.args[0], torch._ops.OpOverload) else None


def is_edge_op(target) -> bool:
    """Whether an edge graph may hold `target` (a torch operator or its edge op)."""
    target = aten_op(target)
    if target is operator.getitem or prim_op_name(target) is not None:
        return True
    if target in CONTROL_FLOW or _is_call_delegate(target):
        return True
    if target in _AUTO_FUNCTIONALIZED:
        return True  # what it wraps is checked by check_edge_ops: `functionalized_op`
    if is_custom_op(target):
        return not target._schema.is_mutable and find_out_variant(target) is not None
    return _is_core_functional(target)


def why_not_edge_op(target) -> str:
    """Why `is_edge_op(target)` is False, and what to do about it, for the edge check's message."""
    target = aten_op(target)
    if target is torch.ops.higher_order.while_loop:
        return ("(torch.while_loop) has a data-dependent trip count, which ExecuTorch's exporter does not lower "
                "(the published one refuses it too); loop over a tensor's rows with torch.scan or torch.map, "
                "or run the loop in Python around the method")
    if isinstance(target, torch._ops.OpOverload) and is_custom_op(target):
        if target._schema.is_mutable:
            return ("writes its inputs; define a functional overload and an .out overload "
                    "(Tensor(a!) out) for it with torch.library")
        return ("has no out variant, so no ExecuTorch kernel can run it; define an .out overload with the "
                "same arguments plus Tensor(a!) out with torch.library, and register a kernel for it")
    if _is_symbolic(target) and prim_op_name(target) is None:
        return ("is size arithmetic with no ExecuTorch prim kernel (supported: "
                f"{', '.join(sorted(_sym_op_name(t) for t in SYM_OPS))}); compute that size another way")
    return ("is not in the supported edge op set (core ATen); rewrite that code with core ATen ops, or pass "
            "EdgeCompileConfig(_check_ir_validity=False) to skip this check at your own risk")


def _sym_op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    module = getattr(target, "__module__", None) or "builtins"
    return f"{'operator' if module == '_operator' else module}.{target.__name__}"


def out_variant(op, node: fx.Node, method: str) -> torch._ops.OpOverload:
    """The out-variant overload the runtime runs for `op`; ExportError naming the node if none."""
    from executorch.exir.passes._graph import source_line

    op = aten_op(op)
    found = find_out_variant(op) if isinstance(op, torch._ops.OpOverload) else None
    if found is None:
        where = source_line(node)
        if isinstance(op, torch._ops.OpOverload):
            name = f"{op._schema.name}.{op._overloadname}"
        else:
            name = _sym_op_name(op) if callable(op) and hasattr(op, "__name__") else str(op)
        raise ExportError(
            f"method '{method}': operator {name} (node '{node.name}'{', from ' + where if where else ''}) has no "
            "out variant, so no ExecuTorch kernel can run it; rewrite that code with other ops"
        )
    return found


def writes_first_argument(op) -> bool:
    """An in-place op (`index_put_`, `add_`): its first argument written, no out argument."""
    args = getattr(getattr(op, "_schema", None), "arguments", None)
    alias = args[0].alias_info if args else None
    return alias is not None and alias.is_write and not any(a.is_out for a in args)


# Left as torch operators in edge graphs, as ExecuTorch leaves them: size arithmetic (the runtime's
# prim ops) and the trace-time checks the exporter drops.
def _stays_torch(op) -> bool:
    return op in SYM_OPS or op in TRACE_ASSERTS or op is torch.ops.aten.scalar_tensor.default


def edge_op(target):
    """`target` as an edge graph holds it: a torch operator overload becomes its `EdgeOpOverload`."""
    if isinstance(target, torch._ops.OpOverload) and not _stays_torch(target):
        return wrap_op(target)
    return target


def to_edge_targets(gm: fx.GraphModule, recompile: bool = True) -> bool:
    """Every torch operator target of `gm` (and its submodules) as its edge op, in place."""
    return retarget(gm, edge_op, recompile)


def name_nodes_as_edge_ops(gm: fx.GraphModule, recompile: bool = True) -> None:
    """Each edge-op node named after its op, as ExecuTorch's edge graphs name them (`aten_add_tensor`,
    `aten_add_tensor_1`, ...): backends derive names from node names (Arm's TOSA tensor names), so the
    same graph gives the same payload bytes. The caller syncs the graph signature's output names."""
    from torch.fx.graph import _snake_case

    for mod in gm.modules():
        if not isinstance(mod, fx.GraphModule):
            continue
        nodes = [n for n in mod.graph.nodes if n.op == "call_function" and isinstance(n.target, EdgeOpOverload)]
        for node in nodes:  # free the names first, so numbering follows graph order from _1
            node._rename(f"__edge_renaming_{node.name}")
        for node in nodes:
            node._rename(_snake_case(node.target.__name__.replace(".", "_")))
        if recompile:
            mod.recompile()
