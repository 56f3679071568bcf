"""`FuseBatchNormPass`: upstream's whole-program form of batch-norm folding, which other backends import from
here (Vulkan's preprocess runs it on its partitions); XNNPACK's own preprocess folds with `fold.fuse_batch_norm`."""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, InputKind, InputSpec, TensorArgument
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

from executorch.backends.xnnpack.utils.utils import constant_targets, get_param_tensor, is_param_node
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.backends.xnnpack._passes.xnnpack_pass import XNNPACKPass
from executorch.exir.pass_base import PassResult

_edge = exir_ops.edge.aten
_BATCH_NORMS = (_edge.native_batch_norm.default, _edge._native_batch_norm_legit_no_training.default)


class FuseBatchNormPass(XNNPACKPass):
    """A convolution or linear whose one user is an inference batch norm (read only for its output) takes the
    norm into new weight and bias parameters (`<weight target>_fused_bn`, dots as underscores, placed before its
    old weight). The norm leaves the graph; the tensors it replaced stay in the signature, unused, as upstream's
    pass leaves them (so the partitions a backend builds from them are upstream's)."""

    @staticmethod
    def can_fuse(input_node: torch.fx.Node, bn: torch.fx.Node, program: ExportedProgram, why=None) -> bool:
        """Whether `bn` folds into `input_node`; `why(reason)`, if given, hears why not."""
        is_conv = input_node.target == _edge.convolution.default
        reason = None
        if input_node.op != "call_function" or not (is_conv or input_node.target == _edge.linear.default):
            reason = "Input node must be a convolution or linear op."
        elif any(u.target != operator.getitem or u.args[1] != 0 for u in bn.users):
            reason = "Batch norm users must only access the output tensor."
        elif not all(isinstance(n, torch.fx.Node) for n in (input_node.args[1], bn.args[1])):
            reason = "Input node weights must be parameters."
        elif not all(is_param_node(program, n) for n in (input_node.args[1], bn.args[1])):
            reason = "Node weights must be static."
        elif is_conv and getattr(getattr(input_node.args[0], "meta", {}).get("val"), "ndim", 0) not in (3, 4):
            reason = "Convolution input must be rank 3 or 4."
        if reason and why:
            why(reason)
        return reason is None

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        for node in list(graph.nodes):
            if node.target not in (_edge.convolution.default, _edge.linear.default) or len(node.users) != 1:
                continue
            bn = next(iter(node.users))
            if bn.target in _BATCH_NORMS and self.can_fuse(node, bn, self.exported_program):
                self._fuse(graph, node, bn)
        graph_module.recompile()
        return PassResult(super().call(graph_module).graph_module, True)

    def _fuse(self, graph: torch.fx.Graph, node: torch.fx.Node, bn: torch.fx.Node) -> None:
        ep, is_conv = self.exported_program, node.target == _edge.convolution.default
        has_bias = is_conv or len(node.args) == 3
        bias = node.args[2] if has_bias else None
        mean, var, eps = get_param_tensor(ep, bn.args[3]), get_param_tensor(ep, bn.args[4]), bn.args[-1]
        tensors = (get_param_tensor(ep, node.args[1]), get_param_tensor(ep, bias) if bias is not None else None,
                   mean, var, eps, get_param_tensor(ep, bn.args[1]), get_param_tensor(ep, bn.args[2]))
        weight, fused_bias = (fuse_conv_bn_weights(*tensors, node.args[6]) if is_conv
                              else fuse_linear_bn_weights(*tensors))
        targets = constant_targets(ep)
        weight_name = targets[node.args[1].name]
        bias_name = f"{targets[bias.name]}_fused_bn" if bias is not None else f"{weight_name}_bias_fused_bn"
        with graph.inserting_before(node.args[1]):
            new_weight = _add_parameter(ep, graph, f"{weight_name}_fused_bn".replace(".", "_"), weight)
            new_bias = _add_parameter(ep, graph, bias_name.replace(".", "_"), fused_bias)
        args = list(node.args)
        args[1] = new_weight
        if has_bias:
            args[2] = new_bias
        else:
            args.append(new_bias)
        node.args = tuple(args)
        for user in list(bn.users):
            user.replace_all_uses_with(node)
            graph.erase_node(user)
        graph.erase_node(bn)


def _add_parameter(ep: ExportedProgram, graph: torch.fx.Graph, name: str, data: torch.Tensor) -> torch.fx.Node:
    """A new parameter placeholder at the insertion point (before the user inputs), in the signature and
    state_dict under the name fx gives it."""
    node = graph.create_node("placeholder", name, name=name)
    node.target = node.name
    fake = next(n.meta["val"] for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)).fake_mode
    node.meta["val"] = fake.from_tensor(data, static_shapes=True)
    ep.state_dict[node.name] = torch.nn.Parameter(data, requires_grad=False)
    index = [n for n in graph.nodes if n.op == "placeholder"].index(node)
    specs = list(ep.graph_signature.input_specs)
    if any(s.kind == InputKind.USER_INPUT for s in specs[:index]):
        raise RuntimeError(f"cannot add parameter {name}: constant placeholders go before the user inputs")
    specs.insert(index, InputSpec(InputKind.PARAMETER, TensorArgument(node.name), node.name, None))
    ep._graph_signature = ExportGraphSignature(specs, ep.graph_signature.output_specs)
    return node

