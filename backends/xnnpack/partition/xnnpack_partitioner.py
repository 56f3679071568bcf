"""`XnnpackPartitioner`: tags the nodes the per-op configs claim, grouped into convex partitions."""

from __future__ import annotations

import logging
from typing import Callable, List, Optional, Sequence, Type, Union

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType, XNNPartitionerConfig
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.exir.passes.quant_fusion_pass import embedding_width
from executorch.backends.xnnpack.utils.utils import is_param_node
from executorch.exir.dialects.edge._ops import torch_targets
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.error import ExportError

logger = logging.getLogger(__name__)

BACKEND_ID = "XnnpackBackend"


def _precisions(arg) -> Optional[List[ConfigPrecisionType]]:
    if arg is None:
        return None
    items = [arg] if isinstance(arg, ConfigPrecisionType) else list(arg)
    for p in items:
        if not isinstance(p, ConfigPrecisionType):
            raise ExportError(f"XnnpackPartitioner: config_precisions holds {p!r}; pass ConfigPrecisionType members "
                              "(FP32, STATIC_QUANT, DYNAMIC_QUANT)")
    return items


_SIZED = (torch.ops.aten.view_copy.default, torch.ops.aten.expand_copy.default)


class _Claimed(OperatorSupportBase):
    def __init__(self, nodes: set) -> None:
        self.nodes = nodes

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node in self.nodes


def _embedding_table(node: torch.fx.Node) -> bool:
    # A torchao dequantize the quantized-embedding fusion of to_executorch (do_quant_fusion_and_const_prop) can
    # pack, whose every user looks rows up in it (`embedding` of its result), stays whole for that fusion, which
    # stores the table as narrow integers; decomposed, it would be folded to a float table.
    return (qu.qd_name(node) in qu.DEQUANTIZE_AFFINE and bool(node.users) and embedding_width(node) is not None
            and all(getattr(u.target, "__name__", "") == "embedding.default" and u.args[0] is node
                    for u in node.users))


class XnnpackPartitioner(Partitioner):
    """Claims what XNNPACK runs (see `partition.config`); `configs` narrows the op list,
    `config_precisions` the precisions, `per_op_mode` gives every claimed op its own delegate."""

    def __init__(self, configs: Optional[Sequence[Type[XNNPartitionerConfig]]] = None,
                 config_precisions: Optional[Union[ConfigPrecisionType, List[ConfigPrecisionType]]] = None,
                 per_op_mode: bool = False, verbose: bool = False, **kwargs) -> None:
        super().__init__()
        if verbose:
            logger.setLevel(logging.DEBUG)
        precisions = _precisions(config_precisions)
        self.configs: List[XNNPartitionerConfig] = []
        for cls in configs or ALL_PARTITIONER_CONFIGS:
            if not (isinstance(cls, type) and issubclass(cls, XNNPartitionerConfig)):
                raise ExportError(f"XnnpackPartitioner: config {cls!r} is not an XNNPartitionerConfig class; pass "
                                  "classes from executorch.backends.xnnpack.partition.config")
            if cls not in ALL_PARTITIONER_CONFIGS:
                raise ExportError(f"XnnpackPartitioner: config {cls.__name__} is not one this backend lowers; "
                                  "pick from executorch.backends.xnnpack.partition.config.ALL_PARTITIONER_CONFIGS")
            config = cls(**kwargs)
            config.set_enabled_precision_types(precisions)
            self.configs.append(config)
        self.per_op_mode = per_op_mode
        self.delegation_spec = DelegationSpec(BACKEND_ID, [])
        self._by_target: dict[str, List[XNNPartitionerConfig]] = {}
        for config in self.configs:
            self._by_target.setdefault(config.target_name, []).append(config)

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Ops XNNPACK takes whole (linear, hardswish, max_pool2d), kept only where a config claims them."""
        present = {n.target for n in ep.graph.nodes if n.op == "call_function"}
        keep = {}
        for config in self.configs:
            op = config.get_original_aten()
            # Only ops the program has: keeping an op whole sends to_edge down a slower path.
            if op is not None and op in present:
                keep.setdefault(op, []).append(config)

        def claimed(node: torch.fx.Node) -> bool:
            return (any(c.check_constraints(node, ep) for c in keep.get(node.target, ()))
                    or _embedding_table(node))

        if any(qu.qd_name(n) in qu.QUANTIZE_AFFINE + qu.DEQUANTIZE_AFFINE for n in ep.graph.nodes):
            # torchao's quantized weights are tensor subclasses: to_edge retraces the whole graph to unwrap
            # them, and that retrace keeps an op whole everywhere or nowhere, so keep only ops claimed
            # wherever they occur; a quantized linear needs its affine q/dq ops kept too (all or none).
            everywhere = {op for op in keep if all(claimed(n) for n in ep.graph.nodes
                                                   if n.op == "call_function" and n.target == op)}
            together = {op for op in keep if op == torch.ops.aten.linear.default
                        or getattr(op, "namespace", None) == "torchao"}
            if not together <= everywhere:
                everywhere -= together
            keep = {op: cs for op, cs in keep.items() if op in everywhere}
        return list(keep), claimed

    def _groups(self, ep: ExportedProgram) -> list[list[torch.fx.Node]]:
        groups = []
        for node in ep.graph.nodes:
            if node.op != "call_function":
                continue
            for config in self._by_target.get(getattr(node.target, "__name__", ""), ()):
                got = config.get_partition(node, ep)
                if got:
                    groups.append([n for n in got if n.op == "call_function"])
                    break
        return groups

    def _drop_symbolic_sizes(self, ep: ExportedProgram) -> None:
        """A view or expand naming sizes by symbols (`x.view(1, s, 4, 16)`) reads SymInts, which no delegate
        takes: where a config then claims it, they become -1 (the same op), their unused sym_size nodes go."""
        for node in list(ep.graph.nodes):
            sizes = node.args[1] if node.target in _SIZED else ()
            syms = [d for d in sizes if isinstance(d, torch.fx.Node)]
            if not syms or -1 in sizes or (len(syms) > 1 and node.target == _SIZED[0]):
                continue  # a view infers one size at most
            old = node.args
            node.args = (old[0], [-1 if d in syms else d for d in sizes], *old[2:])
            if not any(c.check_constraints(node, ep) for c in self._by_target.get(node.target.__name__, ())):
                node.args = old
                continue
            for n in dict.fromkeys(syms):
                if n.op == "call_function" and not n.users:
                    ep.graph.erase_node(n)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        # The configs name torch operators; the edge graph's nodes get their edge ops back after.
        with torch_targets(exported_program.graph_module):
            return self._partition(exported_program)

    def _partition(self, exported_program: ExportedProgram) -> PartitionResult:
        ep = exported_program
        self._drop_symbolic_sizes(ep)
        groups = self._groups(ep)
        if self.per_op_mode:
            parts, seen = [], set()
            for g in groups:
                if not seen.intersection(g):
                    parts.append(g)
                    seen.update(g)
        else:
            claimed = {n for g in groups for n in g}
            proposer = CapabilityBasedPartitioner(ep.graph_module, _Claimed(claimed), allows_single_node_partition=True)
            parts = [list(p.nodes) for p in proposer.propose_partitions()]
        tags = {}
        for nodes in parts:
            if not self._worth_delegating(ep, nodes):
                continue
            tag = f"xnnpack_{len(tags)}"
            for n in nodes:
                n.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        return PartitionResult(tagged_exported_program=ep, partition_tags=tags)

    @staticmethod
    def _worth_delegating(ep: ExportedProgram, nodes: list) -> bool:
        """A partition reading only constants is folded by nobody and runs fine on portable kernels;
        one of bare getitems has nothing to compute."""
        members = set(nodes)
        reads_data = any(a not in members and not is_param_node(ep, a) for n in nodes for a in n.all_input_nodes)
        computes = any(n.target.__name__ != "getitem" for n in nodes)
        return reads_data and computes


class XnnpackDynamicallyQuantizedPartitioner(XnnpackPartitioner):
    """XnnpackPartitioner pinned to dynamically quantized (QD8) ops."""

    def __init__(self, **kwargs) -> None:
        if "config_precisions" in kwargs:
            raise ExportError("XnnpackDynamicallyQuantizedPartitioner: config_precisions is fixed to DYNAMIC_QUANT; "
                              "drop the argument")
        super().__init__(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT, **kwargs)
