"""torch's decomposer on just the nodes the direct rewrites leave, one call per distinct signature.

`ExportedProgram.run_decompositions` costs seconds on a ResNet-sized graph because it retraces
every node, although the direct rewrites cover almost all of them. Here the nodes they leave are
grouped by signature (operator, constant arguments, and each tensor argument's shape, strides,
dtype and kind); one call per group goes into a small program that torch's own
`run_decompositions` lowers, and the group's result is copied in place of each of its nodes. The
cost follows the number of distinct calls, not the size of the graph, and the result is the graph
the whole-graph run gives (test/test_exir_decompose_equivalence.py holds the two side by side).
"""

from __future__ import annotations

import operator
import warnings
from typing import Callable, Iterable, Optional

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.utils import _pytree as pytree

from executorch.exir.passes._graph import fake_mode_of, made_from, val

# The metadata run_decompositions carries from a node to the nodes it decomposes into.
_NODE_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn", "custom")


def _static(v) -> bool:
    # The storage offset too: a narrow/slice at a symbolic start has static sizes and strides but
    # not a static offset, and a symbolic value can neither key a signature nor be laid out alone.
    return isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in (*v.shape, *v.stride(), v.storage_offset()))


def _tensor_args(node: fx.Node) -> list[fx.Node]:
    """The node's distinct tensor arguments, in order of first use."""
    return list(dict.fromkeys(a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)))


def _signature(node: fx.Node, lifted: dict) -> Optional[tuple]:
    """What decides the node's decomposition; None when it cannot be decomposed alone (mutation,
    symbolic shapes, a tuple result read other than by index)."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload) or op._schema.is_mutable:
        return None
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    position = {a: i for i, a in enumerate(_tensor_args(node))}
    parts = []
    for a in flat:
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            if not _static(v):
                return None
            kind = lifted[a].kind if a in lifted else InputKind.USER_INPUT
            parts.append((position[a], tuple(v.shape), v.stride(), v.storage_offset(), v.dtype, v.requires_grad, kind))
        elif isinstance(a, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
            return None
        else:
            parts.append((type(a).__name__, repr(a)))
    out = node.meta.get("val")
    if isinstance(out, (list, tuple)):
        if not all(_static(v) for v in out) or any(u.target is not operator.getitem for u in node.users):
            return None
    elif not _static(out):
        return None
    return op, str(spec), tuple(parts)


def _fresh_like(v: torch.Tensor, fake_mode) -> torch.Tensor:
    """A tensor of `v`'s layout over storage of its own: graph values that are views of one
    another must not become aliased inputs of the small program (torch would merge them)."""
    with fake_mode, torch.no_grad():
        span = v.storage_offset() + 1 + sum((d - 1) * s for d, s in zip(v.shape, v.stride()))
        base = torch.empty(span if v.numel() else v.storage_offset(), dtype=v.dtype, device=v.device)
        return base.as_strided(v.shape, v.stride(), v.storage_offset())


def _small_program(ep: ExportedProgram, groups: list[fx.Node], lifted: dict, fake_mode):
    """The program holding one call per group (its first node), over placeholders of its own,
    lifted ones (parameters, buffers, constants) first as a program orders them; and per group,
    its placeholders and the indices of its outputs."""
    g = fx.Graph()
    holders: dict[fx.Node, fx.Node] = {}
    for node in groups:  # lifted inputs: one placeholder per graph input, shared by the groups
        for a in _tensor_args(node):
            if a in lifted and a not in holders:
                holders[a] = g.placeholder(a.name)
                holders[a].meta["val"] = a.meta["val"]
    specs = [InputSpec(lifted[a].kind, TensorArgument(p.name), lifted[a].target, lifted[a].persistent)
             for a, p in holders.items()]
    per_group, outputs = [], []
    for node in groups:
        env = {}
        for a in _tensor_args(node):
            if a in lifted:
                env[a] = holders[a]
            else:
                env[a] = g.placeholder(f"in_{len(specs)}")
                env[a].meta["val"] = _fresh_like(a.meta["val"], fake_mode)
                specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(env[a].name), None))
        per_group.append([env[a] for a in _tensor_args(node)])
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
        call = g.call_function(node.target, args, kwargs)
        call.meta = {k: v for k, v in node.meta.items() if k in (*_NODE_META, "val")}
        out = node.meta["val"]
        first = len(outputs)
        if isinstance(out, (list, tuple)):
            for i, v in enumerate(out):
                outputs.append(g.call_function(operator.getitem, (call, i)))
                outputs[-1].meta["val"] = v
        else:
            outputs.append(call)
        per_group[-1] = (per_group[-1], list(range(first, len(outputs))))
    # Placeholders must precede every call: move the user inputs made between calls up front.
    first_call = next(n for n in g.nodes if n.op != "placeholder")
    for p in [n for n in g.nodes if n.op == "placeholder"]:
        first_call.prepend(p)
    g.output(tuple(outputs))
    gm = fx.GraphModule(torch.nn.Module(), g)
    n_user = sum(s.kind == InputKind.USER_INPUT for s in specs)
    program = ExportedProgram(
        root=gm, graph=g,
        graph_signature=ExportGraphSignature(
            specs, [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(o.name), None) for o in outputs]),
        state_dict={s.target: ep.state_dict[s.target] for s in specs if s.target in ep.state_dict},
        constants={s.target: ep.constants[s.target] for s in specs if s.target in ep.constants},
        range_constraints={}, example_inputs=None,
        module_call_graph=[ModuleCallEntry("", ModuleCallSignature(
            [], [], pytree.tree_flatten((tuple(range(n_user)), {}))[1],
            pytree.tree_flatten(tuple(range(len(outputs))))[1]))],
    )
    return program, per_group


class NodeDecomposer:
    """Decomposes single nodes of `ep`'s graph with torch's decomposer under the table `table()`
    gives, one small-program run per batch of distinct signatures, each remembered."""

    def __init__(self, ep: ExportedProgram, table: Callable[[], object], skip: Iterable = ()):
        self.ep = ep
        self._table = table
        self._skip = set(skip)
        names = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        self._lifted = {names[s.arg.name]: s for s in ep.graph_signature.input_specs
                        if s.kind != InputKind.USER_INPUT and getattr(s.arg, "name", None) in names}
        self._fake_mode = fake_mode_of(ep.graph)
        self._done: dict[tuple, Optional[tuple]] = {}
        self.runs = 0

    def _key(self, node: fx.Node) -> Optional[tuple]:
        if node.target in self._skip:
            return None
        return _signature(node, self._lifted)

    def prefetch(self, nodes: Iterable[fx.Node]) -> None:
        """Decompose the distinct signatures among `nodes` in one run, ahead of their use."""
        firsts = {}
        for node in nodes:
            key = self._key(node)
            if key is not None and key not in self._done:
                firsts.setdefault(key, node)
        if firsts:
            self._run(firsts)

    def __call__(self, node: fx.Node):
        """What stands for the node's value once its decomposition is spliced in before it (a
        node, or a list for a tuple result); the node itself when torch keeps it whole; None when
        torch's decomposer cannot take it alone."""
        key = self._key(node)
        if key is None:
            return None
        if key not in self._done:
            self._run({key: node})
        found = self._done[key]
        if found is None:
            return None
        holders, body, ends = found
        if len(body) == 1 and body[0].target is node.target:
            return node  # torch keeps it whole (an op with no decomposition)
        mapped = _splice(self.ep.graph, node, holders, body, ends, self._fake_mode)
        return mapped if isinstance(node.meta["val"], (list, tuple)) else mapped[0]

    def _run(self, firsts: dict) -> None:
        self.runs += 1
        small, per_group = _small_program(self.ep, list(firsts.values()), self._lifted, self._fake_mode)
        with warnings.catch_warnings():
            # torch 2.13 deep-copies its own tree specs here and warns about its own deprecated
            # LeafSpec check; nothing the caller can act on.
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            decomposed = small.run_decompositions(self._table())
        holders = [n for n in decomposed.graph.nodes if n.op == "placeholder"]
        if len(holders) != len(small.graph_signature.input_specs):
            # The decomposition made constants of its own, which only the whole graph can hold.
            self._done.update(dict.fromkeys(firsts))
            return
        renamed = dict(zip((n for n in small.graph.nodes if n.op == "placeholder"), holders))
        results = next(n for n in reversed(decomposed.graph.nodes) if n.op == "output").args[0]
        order = {n: i for i, n in enumerate(decomposed.graph.nodes)}
        for key, (inputs, outs) in zip(firsts, per_group):
            ends = [results[i] for i in outs]
            self._done[key] = ([renamed[p] for p in inputs], _ancestors(ends, order), ends)


def _ancestors(ends: list, order: dict) -> list[fx.Node]:
    """The computing nodes the results depend on, in graph order."""
    seen: set[fx.Node] = set()
    stack = [e for e in ends if isinstance(e, fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen or n.op == "placeholder":
            continue
        seen.add(n)
        stack += n.all_input_nodes
    return sorted(seen, key=order.__getitem__)


def _splice(g: fx.Graph, node: fx.Node, holders: list[fx.Node], body: list[fx.Node], ends: list, fake_mode) -> list:
    """Copy `body` in before `node` over the node's own arguments; returns what stands for each
    of `ends` there. Values are computed anew in the graph's fake mode, as inference leaves them."""
    env = dict(zip(holders, _tensor_args(node)))
    with g.inserting_before(node):
        for n in body:
            new = g.create_node(n.op, n.target, *fx.node.map_arg((n.args, n.kwargs), env.__getitem__), name=n.name)
            new.meta = {k: v for k, v in n.meta.items() if k not in (*_NODE_META, "val", "from_node")}
            new.meta.update({k: node.meta[k] for k in _NODE_META if k in node.meta})
            new.meta["from_node"] = node.meta.get("from_node") or made_from(node)
            if n.target is operator.getitem:
                new.meta["val"] = val(new.args[0])[new.args[1]]
            else:
                with fake_mode, torch.no_grad():
                    new.meta["val"] = n.target(*val(new.args), **val(new.kwargs))
            env[n] = new
    return [env[e] if isinstance(e, fx.Node) else e for e in ends]


def as_inference(gm: fx.GraphModule) -> None:
    """Computed values as torch's inference retrace leaves them: not requiring grad (only the
    parameters' placeholders do)."""
    for node in gm.graph.nodes:
        v = node.meta.get("val")
        if node.op != "placeholder" and isinstance(v, torch.Tensor) and v.requires_grad:
            node.meta["val"] = v.detach()
        elif node.op != "placeholder" and isinstance(v, (list, tuple)) and any(
                isinstance(t, torch.Tensor) and t.requires_grad for t in v):
            node.meta["val"] = type(v)(t.detach() if isinstance(t, torch.Tensor) else t for t in v)
