"""Cutting one tagged partition out of a program: its own edge program, and a call in its place."""

from __future__ import annotations

import collections
import operator

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, SymIntArgument, TensorArgument,
)
from torch.utils._pytree import tree_flatten

from executorch.exir.delegate import executorch_call_delegate, get_lowered_module_name
from executorch.exir.error import ExportError

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
# Size arithmetic and runtime assertions, placed as soon as their inputs are (before any
# data-dependent op), as torch.fx's legalize_graph places them.
_ASSERTION_ARITHMETIC = frozenset({
    operator.add, operator.mul, operator.sub, operator.floordiv, operator.truediv, operator.mod, operator.le,
    operator.lt, operator.ge, operator.gt, operator.eq, operator.ne, torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten.sym_constrain_range_for_size.default, torch.ops.aten._assert_async.msg,
    torch.ops.aten.scalar_tensor.default, torch.ops.aten._assert_scalar.default})


def tagged_nodes(gm: fx.GraphModule, tag: str) -> list[fx.Node]:
    """The partition's compute nodes in graph order, with the getitems that unpack them. A delegate call an
    earlier partitioner left keeps its tag, which a later partitioner may reuse: it is never part of a new one."""
    part = [n for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("delegation_tag") == tag
            and n.target is not executorch_call_delegate]
    members = set(part)
    for n in list(part):
        for u in n.users:
            if u.target is operator.getitem and u not in members:
                members.add(u)
    return [n for n in gm.graph.nodes if n in members]


class Partition:
    """The nodes of one tag and how they connect to the rest of the program."""

    def __init__(self, ep: ExportedProgram, tag: str, method: str, gm: fx.GraphModule = None) -> None:
        # `gm` is the program's graph or one of its control-flow branches; a branch's
        # placeholders are its operands, so only the top graph has constants to move.
        self.ep, self.tag, self.method = ep, tag, method
        self.gm = gm if gm is not None else ep.graph_module
        self.nodes = tagged_nodes(self.gm, tag)
        members = set(self.nodes)
        specs = ({s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
                 if self.gm is ep.graph_module else {})
        # A buffer the program updates stays with the program (its state between calls): the
        # partition takes it as an input and returns the new contents, which the program writes back.
        mutated = set(ep.graph_signature.buffers_to_mutate.values()) if self.gm is ep.graph_module else set()
        # Constants the partition reads become its own, as upstream's lowering does: one also read
        # outside it is copied in (the program keeps its own), unless it is marked meta["no_copy"];
        # then the partition takes it as an input. A backend sees its weights as constants either way.
        self.constants: list[tuple[fx.Node, InputSpec]] = []
        self.moved: list[tuple[fx.Node, InputSpec]] = []  # constants left to no one else (set by replace_with)
        self.inputs: list[fx.Node] = []
        for n in self.nodes:
            for a in n.all_input_nodes:
                if a in members or a in self.inputs or any(a is m for m, _ in self.constants):
                    continue
                spec = specs.get(a.name) if a.op == "placeholder" else None
                if (spec is not None and spec.kind in _CONSTANT_KINDS and spec.target not in mutated
                        and (all(u in members for u in a.users) or not a.meta.get("no_copy", False))):
                    self.constants.append((a, spec))
                else:
                    self.inputs.append(a)
        # As upstream's lowering orders them: parameters, then buffers, then other constants, each in
        # the program's order (a vendor pass that keeps the first of equal constants names it so).
        position = {n: i for i, n in enumerate(self.gm.graph.nodes) if n.op == "placeholder"}
        rank = {InputKind.PARAMETER: 0, InputKind.BUFFER: 1}
        self.constants.sort(key=lambda c: (rank.get(c[1].kind, 2), position[c[0]]))
        self.outputs = [n for n in self.nodes if any(u not in members for u in n.users)]
        for n in self.outputs:
            if isinstance(n.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat)):
                raise ExportError(
                    f"method '{method}': partition {tag!r} returns the symbolic {type(n.meta['val']).__name__} "
                    f"'{n.name}', which a delegate call cannot return; tag the nodes that use '{n.name}' too, or "
                    "leave the node that makes it out of the partition"
                )
            if isinstance(n.meta.get("val"), (tuple, list)):
                raise ExportError(
                    f"method '{method}': partition {tag!r} returns the multi-output node '{n.name}' whole; tag the "
                    "getitem nodes that unpack it together with it"
                )

    def exported_program(self) -> ExportedProgram:
        """The partition as an edge program of its own: the constants it reads are its parameters."""
        ep = self.ep
        graph = fx.Graph()
        env: dict[fx.Node, fx.Node] = {}
        input_specs = []
        for node, spec in self.constants:
            env[node] = graph.placeholder(node.name)
            env[node].meta = dict(node.meta)
            input_specs.append(InputSpec(spec.kind, TensorArgument(env[node].name), spec.target, spec.persistent))
        for node in self.inputs:
            env[node] = graph.placeholder(node.name)
            env[node].meta = dict(node.meta)
            arg = (SymIntArgument(env[node].name) if isinstance(node.meta.get("val"), torch.SymInt)
                   else TensorArgument(env[node].name))
            input_specs.append(InputSpec(InputKind.USER_INPUT, arg, None))
        for node in self.nodes:
            env[node] = graph.node_copy(node, lambda a: env[a])
        graph.output(tuple(env[n] for n in self.outputs))
        output_specs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(env[n].name), None) for n in self.outputs]
        gm = fx.GraphModule(self.gm, graph)
        targets = {spec.target for _, spec in self.constants}
        state_dict = {k: v for k, v in ep.state_dict.items() if k in targets}
        constants = {k: v for k, v in ep.constants.items() if k in targets}
        _, in_spec = tree_flatten((tuple(n.meta.get("val") for n in self.inputs), {}))
        _, out_spec = tree_flatten(tuple(n.meta.get("val") for n in self.outputs))
        call_graph = [ModuleCallEntry("", ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec,
                                                              out_spec=out_spec))]
        return ExportedProgram(
            root=gm, graph=gm.graph, graph_signature=ExportGraphSignature(input_specs, output_specs),
            state_dict=state_dict, range_constraints=ep.range_constraints, module_call_graph=call_graph,
            constants=constants, verifiers=[ep.verifier],
        )

    def replace_with(self, lowered) -> None:
        """Put `lowered` (called through executorch_call_delegate) where the partition was."""
        gm = self.gm
        graph = gm.graph
        name = get_lowered_module_name(gm, lowered)
        with graph.inserting_after(self.nodes[-1]):
            attr = graph.get_attr(name)
        with graph.inserting_after(attr):
            call = graph.call_function(executorch_call_delegate, (attr, *self.inputs))
        call.meta["val"] = tuple(n.meta.get("val") for n in self.outputs)
        call.meta["delegation_tag"] = self.tag
        last = call
        members = set(self.nodes)
        for i, out in enumerate(self.outputs):
            with graph.inserting_after(last):
                item = graph.call_function(operator.getitem, (call, i))
            item.meta = dict(out.meta)
            item.meta.pop("delegation_tag", None)
            out.replace_all_uses_with(item, delete_user_cb=lambda u: u not in members)
            last = item
        for n in reversed(self.nodes):
            graph.erase_node(n)
        self.moved = [(n, spec) for n, spec in self.constants if not n.users]
        for n, _ in self.moved:
            graph.erase_node(n)
        _legalize(graph, self.method, self.tag)
        gm.recompile()


def _legalize(graph: fx.Graph, method: str, tag: str) -> None:
    """Reorder so each node follows its inputs, in the order ExecuTorch's lowering leaves a graph after
    it fuses a partition (torch.fx's `legalize_graph`: breadth first from the nodes with no inputs, each
    node's users in the order they were added, runtime-assertion arithmetic first), so that the nodes
    left outside a delegate are emitted, and their operators listed, as the published exporter does. A
    cycle means the partition was not convex (a node outside it both uses and feeds it)."""
    nodes = list(graph.nodes)
    pending = {n: 0 for n in nodes}
    for n in nodes:
        for u in n.users:
            pending[u] += 1
    ready = collections.deque(n for n in nodes if pending[n] == 0)
    order = []
    while ready:
        n = ready.popleft()
        order.append(n)
        for u in n.users:
            pending[u] -= 1
            if pending[u] == 0:
                if u.op == "call_function" and u.target in _ASSERTION_ARITHMETIC:
                    ready.appendleft(u)
                else:
                    ready.append(u)
    if len(order) != len(nodes):
        stuck = next(n for n in nodes if pending[n] > 0 and n.target is not executorch_call_delegate)
        raise ExportError(
            f"method '{method}': partition {tag!r} is not convex: node '{stuck.name}' outside it both uses its "
            "results and feeds it; tag that node too or split the partition in two"
        )
    order.sort(key=lambda n: n.op == "output")  # stable: only a node no output depends on moves before it
    if order == nodes:
        return
    prev = order[0]
    for n in order[1:]:
        prev.append(n)
        prev = n
