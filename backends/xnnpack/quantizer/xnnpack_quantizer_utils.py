"""The pattern annotators of `XNNPACKQuantizer`: one function per operator pattern, by name in `OP_TO_ANNOTATOR`.

Each annotator walks the graph, picks the nodes of its pattern that no earlier annotator took and that
the filter accepts, and writes the pattern's quantization specs on them: input edges get the input
activation spec (weights and biases theirs), the pattern's last node the output spec. Ops that only
move or clamp values (`propagate_annotation`) then share the quantization parameters of their input.
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node
from torch.fx.passes.utils.matcher_with_name_node_map_utils import SubgraphMatcherWithNameNodeMap

from executorch.export._torchao import require_torchao

require_torchao("executorch.backends.xnnpack.quantizer")  # one line naming the install, not a bare ImportError

from torchao.quantization.pt2e import WrapperModule
from torchao.quantization.pt2e.quantizer import (
    OperatorConfig,
    OperatorPatternType,
    QuantizationAnnotation,
    QuantizationConfig,
    QuantizationSpec,
    SharedQuantizationSpec,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY
from torchao.quantization.pt2e.utils import _get_aten_graph_module_for_pattern, get_new_attr_name_with_prefix

from executorch.export.quantizer import is_float_tensor

__all__ = [
    "OP_TO_ANNOTATOR", "OperatorConfig", "OperatorPatternType", "QuantizationConfig", "QuantizationSpec",
    "get_bias_qspec", "get_input_act_qspec", "get_output_act_qspec", "get_weight_qspec", "propagate_annotation",
]

aten = torch.ops.aten
Filter = Optional[Callable[[Node], bool]]
Annotator = Callable[[GraphModule, Optional[QuantizationConfig], Filter], List[List[Node]]]
OP_TO_ANNOTATOR: Dict[str, Annotator] = {}

CONV_OPS = frozenset({aten.conv1d.default, aten.conv1d.padding, aten.conv2d.default, aten.conv2d.padding,
                      aten.conv3d.default, aten.conv3d.padding})
CONV_TRANSPOSE_OPS = frozenset({aten.conv_transpose1d, aten.conv_transpose1d.default, aten.conv_transpose2d,
                                aten.conv_transpose2d.input, aten.conv_transpose3d, aten.conv_transpose3d.input})
_RELU = frozenset({aten.relu.default, aten.relu_.default})
_ADD = frozenset({aten.add.Tensor, aten.add_.Tensor})
_MUL = frozenset({aten.mul.Tensor, aten.mul_.Tensor})
# torch.histc, behind HistogramObserver, handles values up to this magnitude.
_HISTC_LIMIT = 3.4028235e15
# Ops whose output has its input's quantization parameters: they move, select or clamp values.
_SHARES_INPUT_QPARAMS = frozenset({
    aten.relu.default, aten.hardtanh.default, aten.hardtanh_.default, aten.max_pool2d.default,
    aten.mean.default, aten.mean.dim, aten.permute.default, aten.permute_copy.default, aten.transpose.int,
    aten.squeeze.dim, aten.squeeze_copy.dim, aten.adaptive_avg_pool2d.default, aten.view_copy.default,
    aten.view.default, aten.reshape.default, aten.slice.Tensor, aten.slice_copy.Tensor,
    aten.flatten.using_ints,
    aten.dropout.default, aten.dropout_.default,  # identity in eval, how a quantized model runs
})


def register_annotator(name: str) -> Callable[[Annotator], Annotator]:
    def register(annotator: Annotator) -> Annotator:
        OP_TO_ANNOTATOR[name] = annotator
        return annotator
    return register


def _is_call(node, targets) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def _is_annotated(nodes: List[Node]) -> bool:
    return any(Q_ANNOTATION_KEY in n.meta and n.meta[Q_ANNOTATION_KEY]._annotated for n in nodes)


def _mark_annotated(nodes: List[Node]) -> None:
    for n in nodes:
        n.meta.setdefault(Q_ANNOTATION_KEY, QuantizationAnnotation())._annotated = True


def _accepted(filter_fn: Filter, nodes: List[Node]) -> bool:
    return filter_fn is None or all(filter_fn(n) for n in nodes)


def _annotate(node: Node, inputs: dict, output=None) -> None:
    node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output,
                                                         _annotated=True)


def _sole_user(node: Node) -> Optional[Node]:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _conv_groups(conv: Node, transposed: bool) -> int:
    """groups is not an argument of the captured call: it follows from the weight's shape."""
    weight = conv.args[1].meta["val"].shape
    if transposed:  # weight (C_in, C_out/groups, ...), output (N, C_out, ...)
        return conv.meta["val"].shape[1] // weight[1]
    return conv.args[0].meta["val"].shape[1] // weight[1]  # weight (C_out, C_in/groups, ...)


def _weight_spec(config: Optional[QuantizationConfig], transposed: bool) -> Optional[QuantizationSpec]:
    spec = get_weight_qspec(config)
    if transposed and spec is not None:
        # A transposed conv's weight is (C_in, C_out/groups, ...): its output channels are axis 1.
        spec = QuantizationSpec(dtype=spec.dtype, quant_min=spec.quant_min, quant_max=spec.quant_max,
                                qscheme=spec.qscheme, ch_axis=1, is_dynamic=spec.is_dynamic,
                                observer_or_fake_quant_ctr=spec.observer_or_fake_quant_ctr)
    return spec


def _weighted_inputs(op: Node, config: Optional[QuantizationConfig], transposed: bool = False) -> tuple:
    """(input -> spec map, partition) of a linear or conv call: activation, weight and bias if any."""
    inputs = {op.args[0]: get_input_act_qspec(config), op.args[1]: _weight_spec(config, transposed)}
    partition = [op, op.args[1]]
    bias = op.args[2] if len(op.args) > 2 else None
    if isinstance(bias, Node):
        inputs[bias] = get_bias_qspec(config)
        partition.append(bias)
    return inputs, partition


@register_annotator("linear")
def _annotate_linear(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter = None):
    done = []
    for node in gm.graph.nodes:
        if not _is_call(node, {aten.linear.default}) or not _accepted(filter_fn, [node]) or _is_annotated([node]):
            continue
        inputs, partition = _weighted_inputs(node, config)
        _annotate(node, inputs, get_output_act_qspec(config))
        _mark_annotated(partition)
        done.append(partition)
    return done


def _annotate_with_relu(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter,
                        is_op: Callable[[Node], bool], inputs_of: Callable) -> List[List[Node]]:
    """op -> relu, the op's result used only by the relu: the op's inputs quantized, the relu's output."""
    done = []
    for relu in gm.graph.nodes:
        op = relu.args[0] if _is_call(relu, _RELU) else None
        if not isinstance(op, Node) or not is_op(op) or len(op.users) > 1:
            continue
        found = inputs_of(op)
        if found is None:
            continue
        inputs, partition = found
        partition = [relu] + partition
        if _is_annotated(partition) or not _accepted(filter_fn, partition):
            continue
        _annotate(op, inputs)
        _annotate(relu, {}, get_output_act_qspec(config))
        _mark_annotated(partition)
        done.append(partition)
    return done


@register_annotator("linear_relu")
def _annotate_linear_relu(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter = None):
    return _annotate_with_relu(gm, config, filter_fn, lambda n: _is_call(n, {aten.linear.default}),
                               lambda op: _weighted_inputs(op, config))


def _annotate_conv(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter, transposed: bool):
    done = []
    ops = CONV_TRANSPOSE_OPS if transposed else CONV_OPS
    dynamic = bool(config and config.input_activation and config.input_activation.is_dynamic)
    for conv in gm.graph.nodes:
        if not _is_call(conv, ops):
            continue
        if _is_call(_sole_user(conv), _RELU):
            continue  # left whole to the conv_relu pattern
        if transposed and _conv_groups(conv, transposed) != 1:
            continue
        if dynamic:
            # Dynamically quantized convolutions: 2-D ones only, and not depthwise (one input channel per group).
            shape = getattr(conv.args[1].meta.get("val"), "shape", None)
            if shape is not None and (len(shape) != 4 or (not transposed and shape[1] == 1)):
                continue
        inputs, partition = _weighted_inputs(conv, config, transposed)
        if _is_annotated(partition) or not _accepted(filter_fn, partition):
            continue
        _annotate(conv, inputs, get_output_act_qspec(config))
        _mark_annotated(partition)
        done.append(partition)
    return done


def _annotate_conv_relu(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter, transposed: bool):
    ops = CONV_TRANSPOSE_OPS if transposed else CONV_OPS

    def inputs_of(conv: Node):
        if transposed and _conv_groups(conv, transposed) != 1:
            return None
        return _weighted_inputs(conv, config, transposed)

    return _annotate_with_relu(gm, config, filter_fn, lambda n: _is_call(n, ops), inputs_of)


register_annotator("conv")(lambda gm, config, filter_fn=None: _annotate_conv(gm, config, filter_fn, False))
register_annotator("conv_transpose")(lambda gm, config, filter_fn=None: _annotate_conv(gm, config, filter_fn, True))
register_annotator("conv_relu")(lambda gm, config, filter_fn=None: _annotate_conv_relu(gm, config, filter_fn, False))
register_annotator("conv_transpose_relu")(
    lambda gm, config, filter_fn=None: _annotate_conv_relu(gm, config, filter_fn, True))


def _conv_bn_matches(gm: GraphModule, has_relu: bool, transposed: bool) -> list:
    """Matches of conv -> batch_norm (training) [-> relu] in a QAT graph, by subgraph pattern."""
    def pattern(conv_fn, relu_in_place: bool):
        def conv_bn(x, weight, bias, bn_weight, bn_bias, bn_mean, bn_var):
            conv = conv_fn(x, weight, bias)
            out = F.batch_norm(conv, bn_mean, bn_var, bn_weight, bn_bias, training=True)
            if has_relu:
                out = F.relu_(out) if relu_in_place else F.relu(out)
            return out, {"input": x, "conv": conv, "weight": weight, "bias": bias, "output": out}
        return WrapperModule(conv_bn)

    def example(dims: int) -> tuple:
        return ((torch.randn(1, 1, *[3] * dims), torch.randn(1, 1, *[1] * dims))
                + tuple(torch.randn(1) for _ in range(5)))

    if not any(_is_training_batch_norm(n) for n in gm.graph.nodes):
        return []  # post-training graphs (no training batch norm) have nothing to match
    gm.graph.eliminate_dead_code()  # batch_norm's unused outputs would keep the pattern from matching
    gm.recompile()
    fns = (F.conv_transpose1d, F.conv_transpose2d) if transposed else (F.conv1d, F.conv2d)
    on_cuda = [True, False] if torch.cuda.is_available() else [False]
    matches = []
    for (dims, fn), cuda, in_place in itertools.product(enumerate(fns, 1), on_cuda,
                                                         [True, False] if has_relu else [False]):
        key = (fn, dims, cuda, in_place, has_relu)
        matcher = _CONV_BN_MATCHERS.get(key)
        if matcher is None:
            # Each pattern is a torch.export of its own (half a second): made once per process. The matcher
            # is what is kept, not the pattern graph: making a matcher rewrites its graph's outputs in place,
            # so a second matcher on the same graph would refuse it.
            graph = _get_aten_graph_module_for_pattern(pattern(fn, in_place), example(dims), cuda)
            graph.graph.eliminate_dead_code()
            graph.recompile()
            matcher = _CONV_BN_MATCHERS[key] = SubgraphMatcherWithNameNodeMap(graph, ignore_literals=True)
        matches.extend(matcher.match(gm.graph))
    return matches


_CONV_BN_MATCHERS: dict = {}


def _is_training_batch_norm(node: Node) -> bool:
    """A batch norm computing its own statistics: eval exports keep aten.batch_norm too, with training=False."""
    if node.op != "call_function" or "batch_norm" not in getattr(node.target, "__name__", ""):
        return False
    names = [a.name for a in getattr(getattr(node.target, "_schema", None), "arguments", [])]
    if "training" not in names:
        return False  # _native_batch_norm_legit_no_training and the like
    at = names.index("training")
    return bool(node.args[at] if at < len(node.args) else node.kwargs.get("training", False))


def _annotate_conv_bn(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter, has_relu: bool,
                      transposed: bool = False):
    """QAT only: post-training prepare folds batch norms into their convs before annotating."""
    done = []
    for match in _conv_bn_matches(gm, has_relu, transposed):
        names = match.name_node_map
        conv, weight, bias = names["conv"], names["weight"], names.get("bias")
        bias = bias if isinstance(bias, Node) else None
        partition = [conv, weight] + ([bias] if bias is not None else [])
        if _is_annotated(partition) or not _accepted(filter_fn, partition):
            continue
        inputs = {names["input"]: get_input_act_qspec(config), weight: get_weight_qspec(config)}
        if bias is not None:
            inputs[bias] = get_bias_qspec(config)
        _annotate(conv, inputs)
        _annotate(names["output"], {}, get_output_act_qspec(config))
        _mark_annotated(partition)
        done.append(partition)
    return done


for _relu, _transposed in itertools.product((False, True), (False, True)):
    register_annotator("conv" + ("_transpose" if _transposed else "") + "_bn" + ("_relu" if _relu else ""))(
        lambda gm, config, filter_fn=None, r=_relu, t=_transposed: _annotate_conv_bn(gm, config, filter_fn, r, t))


@register_annotator("adaptive_avg_pool2d")
def _annotate_adaptive_avg_pool2d(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter = None):
    """The pool's output shares its input's parameters; its input is quantized unless its producer
    already has an output spec, which it then shares."""
    done = []
    for pool in gm.graph.nodes:
        if not _is_call(pool, {aten.adaptive_avg_pool2d.default}) or _is_annotated([pool]):
            continue
        if not _accepted(filter_fn, [pool]):
            continue
        source = pool.args[0]
        ann = source.meta.get(Q_ANNOTATION_KEY)
        has_output_spec = ann is not None and ann._annotated and ann.output_qspec is not None
        _annotate(pool, {source: SharedQuantizationSpec(source) if has_output_spec else get_input_act_qspec(config)},
                  SharedQuantizationSpec((source, pool)))
        done.append([pool, source])
    return done


def _is_large_scalar(node: Node, gm: GraphModule) -> bool:
    if node.op != "get_attr":
        return False
    owner, _, name = node.target.rpartition(".")
    value = getattr(gm.get_submodule(owner), name)
    return value.numel() == 1 and abs(value.item()) > _HISTC_LIMIT


def _binary_inputs(op: Node, gm: GraphModule, config: Optional[QuantizationConfig]):
    """Both float tensor operands quantized; None (skip the op) for an int operand or a huge scalar."""
    inputs = {}
    for arg in op.args[:2]:
        if isinstance(arg, Node):
            if _is_large_scalar(arg, gm) or not is_float_tensor(arg):
                return None
            inputs[arg] = get_input_act_qspec(config)
    return inputs, [op] + list(inputs)


def _annotate_binary(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter, ops) -> list:
    done = []
    for op in gm.graph.nodes:
        if not _is_call(op, ops) or _is_annotated([op]) or not _accepted(filter_fn, [op]):
            continue
        found = _binary_inputs(op, gm, config)
        if found is None:
            continue
        _annotate(op, found[0], get_output_act_qspec(config))
        done.append(found[1])
    return done


def _annotate_binary_relu(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter, ops) -> list:
    done = []
    for relu in gm.graph.nodes:
        op = relu.args[0] if _is_call(relu, _RELU) else None
        if not _is_call(op, ops) or len(op.users) > 1:
            continue
        if _is_annotated([relu, op]) or not _accepted(filter_fn, [relu, op]):
            continue
        found = _binary_inputs(op, gm, config)
        if found is None:
            continue
        _annotate(op, found[0])
        _annotate(relu, {}, get_output_act_qspec(config))
        done.append([relu] + found[1])
    return done


register_annotator("add")(lambda gm, config, filter_fn=None: _annotate_binary(gm, config, filter_fn, _ADD))
register_annotator("mul")(lambda gm, config, filter_fn=None: _annotate_binary(gm, config, filter_fn, _MUL))
register_annotator("add_relu")(lambda gm, config, filter_fn=None: _annotate_binary_relu(gm, config, filter_fn, _ADD))
register_annotator("mul_relu")(lambda gm, config, filter_fn=None: _annotate_binary_relu(gm, config, filter_fn, _MUL))


def _traces_to_output_spec(node: Node) -> bool:
    """Whether `node`, or what it reads through parameter-sharing ops, already has an output spec."""
    seen = set()
    while isinstance(node, Node) and node not in seen:
        seen.add(node)
        ann = node.meta.get(Q_ANNOTATION_KEY)
        if ann is not None and ann._annotated and ann.output_qspec is not None:
            return True
        if not _is_call(node, _SHARES_INPUT_QPARAMS):
            return False
        node = node.args[0]
    return False


@register_annotator("cat")
def _annotate_cat(gm: GraphModule, config: Optional[QuantizationConfig], filter_fn: Filter = None):
    """All inputs and the output share one set of parameters, observed at the first input that already
    has quantized values upstream (else the first input)."""
    done = []
    for cat in gm.graph.nodes:
        if not _is_call(cat, {aten.cat.default}) or _is_annotated([cat]) or not _accepted(filter_fn, [cat]):
            continue
        inputs = cat.args[0]
        source = next((i for i in inputs if isinstance(i, Node) and _traces_to_output_spec(i)), inputs[0])
        shared = SharedQuantizationSpec((source, cat))
        specs = {source: get_input_act_qspec(config)} if isinstance(source, Node) else {}
        for i in inputs:
            specs.setdefault(i, shared)
        _annotate(cat, specs, shared)
        done.append(cat.all_input_nodes)
    return done


def propagate_annotation(model: GraphModule) -> None:
    """Give each parameter-sharing op that follows an annotated output its input's parameters."""
    for node in model.graph.nodes:
        if not _is_call(node, _SHARES_INPUT_QPARAMS) or not isinstance(node.args[0], Node):
            continue
        source = node.args[0]
        ann = source.meta.get(Q_ANNOTATION_KEY)
        if not ann or not ann.output_qspec or _is_annotated([node]):
            continue
        shared = SharedQuantizationSpec(source)
        _annotate(node, {source: shared}, shared)


def convert_scalars_to_attrs(model: GraphModule) -> GraphModule:
    """Scalar operands of add/mul become 0-d float buffers, so they can be observed and quantized."""
    for node in model.graph.nodes:
        if not _is_call(node, {aten.add.Tensor, aten.mul.Tensor}):
            continue
        args = []
        for arg in node.args:
            if not isinstance(arg, Node):
                value = torch.tensor(float(arg))
                name = get_new_attr_name_with_prefix("_tensor_constant_")(model)
                model.register_buffer(name, value)
                with model.graph.inserting_before(node):
                    arg_node = model.graph.create_node("get_attr", name, (), {})
                arg_node.meta["val"] = node.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
                arg = arg_node
            args.append(arg)
        node.args = tuple(args)
    model.recompile()
    return model
