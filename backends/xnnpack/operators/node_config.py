"""`XNNPartitionerConfig`: whether XNNPACK takes one op's node; `claim` makes one for a family file's op."""

from __future__ import annotations

import operator
import sys
from enum import Enum
from typing import Callable, Iterable, List, Optional, Type

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.backends.xnnpack.utils.utils import is_param_node
from executorch.exir.error import ExportError
from executorch.exir.tensor import shape_upper_bound


class ConfigPrecisionType(Enum):
    FP32 = 1
    STATIC_QUANT = 2
    DYNAMIC_QUANT = 3


FP32 = [ConfigPrecisionType.FP32]
FP32_QS8 = [ConfigPrecisionType.FP32, ConfigPrecisionType.STATIC_QUANT]
GEMM = [ConfigPrecisionType.FP32, ConfigPrecisionType.STATIC_QUANT, ConfigPrecisionType.DYNAMIC_QUANT]

Check = Callable[[torch.fx.Node, ExportedProgram], bool]

_FLOAT_DTYPES = (torch.float32, torch.float16)


def _dim_ok(d, dynamic: bool) -> bool:
    """A positive int, or with `dynamic` a backed symbol with an upper bound."""
    if isinstance(d, int):
        return d > 0
    return dynamic and not free_unbacked_symbols(d) and (shape_upper_bound(d) or 0) > 0


def _tensor_ok(val) -> bool:
    """A value XNNPACK can hold: a non-empty float32/float16 tensor (dynamic dims bounded)."""
    if not isinstance(val, torch.Tensor) or val.dtype not in _FLOAT_DTYPES:
        return False
    return all(_dim_ok(d, True) for d in val.shape)


def static_shapes(node: torch.fx.Node, leading: bool = False) -> bool:
    """`node`'s output and tensor inputs have static, non-empty shapes; with `leading`, dims but the last
    may be symbolic with an upper bound."""
    vals = [a.meta.get("val") for a in node.all_input_nodes] + [node.meta.get("val")]
    vals = [v[0] if isinstance(v, (tuple, list)) else v for v in vals]
    return all(not isinstance(v, torch.Tensor) or all(_dim_ok(d, leading and i < v.dim() - 1)
                                                      for i, d in enumerate(v.shape)) for v in vals)


def _constant_like(ep: ExportedProgram, node) -> bool:
    """A constant, or part of a tensor-subclass one (torchao's weights; after to_edge unwraps them the
    keep filter sees new placeholders with the old program: any placeholder but a user input)."""
    if is_param_node(ep, node):
        return True
    if node.op == "placeholder":
        return node.name not in set(ep.graph_signature.user_inputs)
    return (node.op == "call_function"
            and getattr(node.target, "__name__", "") == "access_subclass_inner_tensor.default"
            and is_param_node(ep, node.args[0]))


def _dynamic_weight(w, ep: ExportedProgram, axis: int = 0) -> bool:
    """Constant int8 weights per output channel (dim `axis`), or torchao's int8/int4 per channel or int4
    per group of a multiple of 32 input channels (2-D weights only)."""
    name = qu.qd_name(w)
    if name in qu.DEQUANTIZE_PER_CHANNEL:
        return qu.int8_static(w) and w.args[3] == axis and all(_constant_like(ep, a) for a in w.all_input_nodes)
    if name not in qu.DEQUANTIZE_AFFINE or len(w.args) < 7 or w.meta["val"].dim() != 2:
        return False
    _qdata, block, _scale, _zp, dtype, qmin, qmax = w.args[:7]
    k = w.meta["val"].shape[1]
    if dtype != torch.int8 or (qmin, qmax) not in (qu.INT4_RANGE, qu.INT8_RANGE, (-127, 127)):
        return False
    if (len(block) != 2 or block[0] != 1
            or not (block[1] == k or (block[1] % 32 == 0 and (qmin, qmax) == qu.INT4_RANGE))):
        return False  # XNNPACK's blockwise weights are int4 only
    return all(_constant_like(ep, a) for a in w.all_input_nodes)


class XNNPartitionerConfig:
    """Subclasses name `target_name` (the op overload's `name.overload`), the precisions they take,
    and may add `check_constraints`; `get_node_and_deps` returns the nodes claimed together."""

    target_name: str = ""
    # (activation, weight, bias) argument indices of a GEMM (convolution, linear); None for other ops.
    gemm_args: Optional[tuple] = None

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
        """Enabled for fp32, and every tensor in and out is a float tensor of one dtype (dynamic dims bounded)."""
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
        return self.quantized_deps(node, ep) is not None or self.check_common_constraints(node, ep)

    def check_quantized(self, node: torch.fx.Node) -> bool:
        """Op-specific limits of the quantized form (beyond the dq -> op -> q pattern)."""
        return True

    def dynamic_weight_axis(self, node: torch.fx.Node) -> Optional[int]:
        """The output-channel dim of the weight of a dynamically quantized (QD8) form of `node`; None
        when XNNPACK has no such form. Linear layers only, unless a config says otherwise."""
        return 0 if getattr(node.target, "__name__", "") == "linear.default" else None

    def quantized_deps(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[List[torch.fx.Node]]:
        """What a quantized `node` is claimed with (QS8: dq inputs, weight dq and constants, bias,
        activation, q; QD8: see _dynamic_deps); None when it is no enabled quantized pattern."""
        dynamic = self._dynamic_deps(node, ep)
        if dynamic is not None or ConfigPrecisionType.STATIC_QUANT not in self.enabled_precision_types:
            return dynamic if dynamic is not None and static_shapes(node, leading=True) else None
        if not static_shapes(node):
            return None
        q = qu.output_quant(node)
        if q is None or not qu.int8_static(q) or not self.check_quantized(node):
            return None
        deps = []
        cur = node
        while cur is not q:
            cur = next(iter(cur.users))
            deps.append(cur)
        act, weight, bias = self.gemm_args or (None, None, None)
        for i, arg in enumerate(node.args):
            for a in arg if isinstance(arg, (list, tuple)) else [arg]:
                if not isinstance(a, torch.fx.Node):
                    continue
                if i == bias:
                    if not (is_param_node(ep, a) and a.meta["val"].dim() == 1):
                        return None
                    deps.append(a)
                elif qu.is_dequant(a) and qu.int8_static(a):
                    consts = a.all_input_nodes[1:]
                    if i == weight or is_param_node(ep, a.args[0]):
                        if not is_param_node(ep, a.args[0]) or not all(is_param_node(ep, c) for c in consts):
                            return None
                        deps += [a.args[0], *consts]
                    elif consts or qu.qd_name(a) not in qu.DEQUANTIZE_PER_TENSOR:
                        return None  # activations are quantized per tensor with constant parameters
                    deps.append(a)
                else:
                    return None
        return deps

    def _dynamic_deps(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[List[torch.fx.Node]]:
        """QD8 linear or convolution: choose_qparams -> q -> dq activations, the weight's dq and constants,
        the bias."""
        if ConfigPrecisionType.DYNAMIC_QUANT not in self.enabled_precision_types or self.gemm_args is None:
            return None
        axis = self.dynamic_weight_axis(node)
        if axis is None:
            return None
        act, weight, bias = self.gemm_args
        chain = qu.dynamic_activation(node.args[act])
        w = node.args[weight]
        if chain is None or not _dynamic_weight(w, ep, axis):
            return None
        if not qu.only_read_by(chain[1], node.target.__name__):
            # Layers of another kind read the same run-time quantization (which each takes in its own
            # form): the chain stays out, on the portable kernels.
            return None
        deps = chain + [w, *[a for a in w.all_input_nodes]]
        b = node.args[bias] if len(node.args) > bias else None
        if b is not None:
            if not (is_param_node(ep, b) and b.meta["val"].dim() == 1):
                return None
            deps.append(b)
        return deps

    def get_partition(self, node: torch.fx.Node, ep: ExportedProgram) -> List[torch.fx.Node]:
        """The nodes claimed with `node` ([] when it is not taken)."""
        deps = self.quantized_deps(node, ep)
        if deps is not None:
            return [node, *deps]
        if not self.check_constraints(node, ep):
            return []
        return self.get_node_and_deps(node, ep)

    def get_node_and_deps(self, node: torch.fx.Node, ep: ExportedProgram) -> List[torch.fx.Node]:
        return [node]

    def get_original_aten(self) -> Optional[torch._ops.OpOverload]:
        """An op kept whole through `to_edge` so this config can claim it (None: the edge op itself)."""
        return None


def claim(name: str, op: torch._ops.OpOverload, precisions: list = FP32, check: Optional[Check] = None, *,
          keep: bool = False, deps: Optional[Callable] = None, gemm: Optional[tuple] = None,
          qcheck: Optional[Callable] = None, dynamic_axis: Optional[Callable] = None) -> Type[XNNPartitionerConfig]:
    """The config class `name` claiming `op`: `check` narrows what it takes in floating point and `qcheck(node)`
    quantized, `keep` keeps `op` whole through to_edge, `deps(node, ep)` lists nodes claimed with it (None: not
    taken), `gemm` gives its (activation, weight, bias) argument indices, `dynamic_axis(node)` its weight's
    output-channel dim in a dynamically quantized form (None: none)."""

    def check_constraints(self, node, ep):
        if self.quantized_deps(node, ep) is not None:
            return True
        return self.check_common_constraints(node, ep) and (check is None or check(node, ep))

    def get_node_and_deps(self, node, ep):
        if deps is None:
            return [node]
        more = deps(node, ep)
        return [] if more is None else [node, *more]

    body = {"target_name": op.__name__, "__doc__": f"Claims `{op.__name__}` for XNNPACK.",
            "supported_precision_types": lambda self: list(precisions),
            "check_constraints": check_constraints, "get_node_and_deps": get_node_and_deps,
            "get_original_aten": lambda self: op if keep else None, "gemm_args": gemm,
            "__module__": sys._getframe(1).f_globals["__name__"]}  # the family file, as namedtuple does
    if qcheck is not None:
        body["check_quantized"] = lambda self, node: qcheck(node)
    if dynamic_axis is not None:
        body["dynamic_weight_axis"] = lambda self, node: dynamic_axis(node)
    return type(name, (XNNPartitionerConfig,), body)


def q_pass(check: Check) -> Callable:
    """`check` as a `qcheck`: the same limit on the int8 form."""
    return lambda node: check(node, None)


def arg(node: torch.fx.Node, i: int, name: str, default):
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def first_output_only(node, ep) -> Optional[list]:
    """The getitems reading `node`'s first output, or None when another output is read too."""
    users = list(node.users)
    if not all(u.target is operator.getitem and u.args[1] == 0 for u in users):
        return None
    return users


def one_dynamic_dim(node, ep) -> bool:
    """At most one dynamic dim in the result (XNNPACK infers one)."""
    return sum(not isinstance(d, int) for d in node.meta["val"].shape) <= 1
