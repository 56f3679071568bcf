"""The rewrites: addmm/mm on a transposed weight to linear, batch norm folded into the convolution
before it, activations fused into their producer's output range, no-op copies and constant
subgraphs folded away."""

from __future__ import annotations

import operator

import torch
from torch import fx

import executorch.exir.dialects._ops  # noqa: F401,E402  (registers dim_order_ops, named below)
from executorch.backends.xnnpack.operators.op_elementwise import BINARY_WITH_MIN_MAX, CLAMPS, clamp_bounds

aten = torch.ops.aten


def new_constant(graph: fx.Graph, consts: dict, name: str, value: torch.Tensor) -> fx.Node:
    first = next(iter(graph.nodes))
    with graph.inserting_before(first):
        node = graph.placeholder(name)
    node.meta["val"] = value
    consts[node] = value
    return node


def _is_t(node, consts) -> bool:
    return (isinstance(node, fx.Node) and node.target == aten.permute_copy.default and list(node.args[1]) == [1, 0]
            and node.args[0] in consts)


def convert_to_linear(graph: fx.Graph, consts: dict) -> None:
    """addmm(b, x, w.T) and mm(x, w.T) read the weight as stored: linear(x, w, b)."""
    for node in list(graph.nodes):
        if node.target not in (aten.addmm.default, aten.mm.default) or not _is_t(node.args[-1], consts):
            continue
        weight = node.args[-1].args[0]
        args = (node.args[1], weight, node.args[0]) if node.target == aten.addmm.default else (node.args[0], weight)
        with graph.inserting_before(node):
            lin = graph.call_function(aten.linear.default, args)
        lin.meta = dict(node.meta)
        node.replace_all_uses_with(lin)
        graph.erase_node(node)
    graph.eliminate_dead_code()


def fuse_batch_norm(graph: fx.Graph, consts: dict) -> None:
    """conv -> batch norm (inference) becomes one conv with scaled weights and shifted bias."""
    for bn in list(graph.nodes):
        if bn.target != aten._native_batch_norm_legit_no_training.default:
            continue
        conv, gamma, beta, mean, var, _momentum, eps = bn.args
        w = consts[conv.args[1]]
        b = consts[conv.args[2]] if conv.args[2] is not None else torch.zeros(w.shape[0], dtype=w.dtype)
        one = torch.ones(w.shape[0], dtype=w.dtype)
        g = consts[gamma] if gamma is not None else one
        beta_t = consts[beta] if beta is not None else torch.zeros_like(one)
        scale = g * torch.rsqrt(consts[var] + eps)
        new_w = w * scale.reshape(-1, 1, 1, 1)
        new_b = (b - consts[mean]) * scale + beta_t
        args = list(conv.args)
        args[1] = new_constant(graph, consts, f"{conv.name}_bn_weight", new_w)
        args[2] = new_constant(graph, consts, f"{conv.name}_bn_bias", new_b)
        conv.args = tuple(args)
        conv.meta["val"] = bn.meta["val"][0]
        for user in list(bn.users):
            user.replace_all_uses_with(conv)
            graph.erase_node(user)
        graph.erase_node(bn)
    graph.eliminate_dead_code()


def remove_first_output_getitems(graph: fx.Graph, consts: dict) -> None:
    """max_pool2d_with_indices and native_layer_norm read only through getitem 0: the node stands
    for its first output, its value included (the checks that later read its users' arguments
    see a tensor, as for any other node)."""
    multi = (aten.max_pool2d_with_indices.default, aten.native_layer_norm.default)
    for node in list(graph.nodes):
        if node.target is operator.getitem and node.args[0].target in multi:
            source = node.args[0]
            node.replace_all_uses_with(source)
            graph.erase_node(node)
            if isinstance(source.meta.get("val"), (tuple, list)):
                source.meta["val"] = source.meta["val"][0]


def _same_quant(a: fx.Node, b: fx.Node) -> bool:
    """Both float, or both int8 with the same parameters (one value can stand for the other)."""
    pa, pb = a.meta.get("xnn_quant"), b.meta.get("xnn_quant")
    return (pa is None and pb is None) or (pa is not None and pb is not None and pa.key() == pb.key())


_NOOP_COPIES = (aten.clone.default, torch.ops.dim_order_ops._clone_dim_order.default,
                torch.ops.dim_order_ops._to_dim_order_copy.default)


def remove_noop_copies(graph: fx.Graph, consts: dict) -> None:
    """Contiguous same-dtype copies, and reshapes to the same shape, are their input (unless the
    partition returns them: an output needs its own value)."""
    for node in list(graph.nodes):
        same_shape = node.target == aten.view_copy.default and list(node.meta["val"].shape) == list(
            node.args[0].meta["val"].shape)
        if node.target not in _NOOP_COPIES and not same_shape:
            continue
        if any(u.op == "output" for u in node.users) or not _same_quant(node, node.args[0]):
            continue
        node.replace_all_uses_with(node.args[0])
        graph.erase_node(node)


def fold_constants(graph: fx.Graph, consts: dict) -> None:
    """An op whose inputs are all constants becomes a constant (e.g. a weight transposed for bmm)."""
    for node in list(graph.nodes):
        if node.op != "call_function" or not node.all_input_nodes:
            continue
        if not all(a in consts for a in node.all_input_nodes) or any(u.op == "output" for u in node.users):
            continue
        if any("xnn_quant" in a.meta for a in node.all_input_nodes):
            continue  # int8 constants stay as they are: their parameters live beside them
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: consts[a])
        value = node.target(*args, **kwargs)
        if not isinstance(value, torch.Tensor):
            continue
        const = new_constant(graph, consts, f"{node.name}_folded", value.contiguous())
        node.replace_all_uses_with(const)
        graph.erase_node(node)
    graph.eliminate_dead_code()


_FUSES_MIN_MAX = (aten.convolution.default, aten.linear.default, aten.addmm.default, aten.mm.default,
                  *BINARY_WITH_MIN_MAX)


def fuse_activations(graph: fx.Graph, consts: dict) -> None:
    """relu/hardtanh/clamp after an op that clamps its own output (conv, linear, add, ...) becomes
    that op's output range."""
    for act in list(graph.nodes):
        if act.target not in CLAMPS:
            continue
        src = act.args[0]
        if (not isinstance(src, fx.Node) or src.target not in _FUSES_MIN_MAX or len(src.users) != 1
                or src.meta["val"].dtype != torch.float32 or not _same_quant(src, act)):
            continue
        lo, hi = clamp_bounds(act)
        prev = src.meta.get("xnn_output_min_max")
        if prev is not None:
            lo, hi = max(lo, prev[0]), min(hi, prev[1])
        src.meta["xnn_output_min_max"] = (lo, hi)
        act.replace_all_uses_with(src)
        graph.erase_node(act)
