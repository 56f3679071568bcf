"""Memory planning, the step before emission: where each tensor a method computes lives, recorded in its graph."""

# A buffer (`executorch.exir._arena.Buffer`) is a run of bytes live over an inclusive range of instruction steps;
# two buffers may share bytes only if their ranges don't overlap. Offsets are aligned; an arena's size is its
# largest end offset. Planners are plain functions `(buffers, alignment) -> arena size` that fill in
# `Buffer.offset`; upstream's spec-based `greedy`, `naive` and `MemoryPlanningAlgorithmSuite`
# (`executorch.exir._spec_planners`) run through an adapter. Buffers on a device (a delegate's side of a
# host/device copy) never share an arena with host buffers: `plan_by_device` gives each device arenas of its own.
# `MemoryPlanningPass.run` records the plan in each value's `TensorSpec` (`node.meta["spec"]`: `mem_id`,
# `mem_offset`, `mem_obj_id` naming its storage, which a view shares with its base, and `lifetime`) and the arenas
# in `graph_module.meta` ("non_const_buffer_sizes", and "non_const_buffer_device" for a device's); the emitter
# reads both.

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
from torch import fx
from torch.export.graph_signature import InputKind
from torch.fx.passes.infra.pass_base import PassResult

from executorch.exir._arena import Buffer, greedy_buffers, naive_buffers
from executorch.exir._serialize._alignment import aligned, is_power_of_two
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.dialects._edge_ops import (ALIAS_VIEW_COPIES, SAME_ORDER_COPIES, prim_op_name,
                                                writes_first_argument)
from executorch.exir.dialects.edge._ops import torch_targets
from executorch.exir.error import ExportError
from executorch.exir.passes._graph import source_line
from executorch.exir.passes.propagate_device_pass import CPU, device_of
from executorch.exir.passes.write_back import mutated_placeholders
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import ALIGNMENT as DEFAULT_ALIGNMENT, TensorSpec, shape_upper_bound, user_outputs


class Lifetime(NamedTuple):
    """The inclusive range of steps over which a node's value must stay in memory."""

    first: int
    last: int


def lifetimes(gm: fx.GraphModule | fx.Graph) -> dict[fx.Node, Lifetime]:
    """Each node's lifetime in steps (positions in the graph): from the node to its last user."""
    # Graph inputs live from step 0, a `getitem` user counts as its own users and the graph's output as one step
    # past the last node. Nodes of control-flow branches are not in the graph, so they get none: they live at the
    # step of the node that runs them.
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    nodes = list(graph.nodes)
    step = {n: i for i, n in enumerate(nodes)}
    end = len(nodes)
    last: dict[fx.Node, int] = {}
    for node in reversed(nodes):  # users come after their inputs, so every user is known first
        at = step[node]
        for u in node.users:
            if u.op == "output":
                at = end
                break
            at = max(at, last[u] if u.target is operator.getitem else step[u])
        last[node] = at
    return {n: Lifetime(0 if n.op == "placeholder" else step[n], last[n]) for n in nodes}


# The planners `MemoryPlanningPass(memory_planning_algo=NAME)` names: `(buffers, alignment) -> arena size`.
PLANNERS: dict[str, Callable[[list[Buffer], int], int]] = {"greedy": greedy_buffers, "naive": naive_buffers}

HOST = (0, 0)


def plan_by_device(buffers: list[Buffer], planner: Callable[[list[Buffer], int], int], alignment: int,
                   by_device: bool = True) -> list[tuple[int, tuple]]:
    """Plan each device's buffers in an arena of its own; each arena's (size, device)."""
    # Arenas are numbered from 1: the host's first, then the devices by (type, index), as ExecuTorch numbers them.
    # Sets each buffer's `memory_id` and `offset`. With `by_device=False` all share one host arena.
    groups: dict[tuple, list[Buffer]] = {}
    for b in buffers:
        groups.setdefault(tuple(b.device) if by_device else HOST, []).append(b)
    arenas: list[tuple[int, tuple]] = []
    for device in sorted(groups, key=lambda d: (d != HOST, int(d[0]), d[1])):
        size = planner(groups[device], alignment)
        arenas.append((size, device))
        for b in groups[device]:
            b.memory_id = len(arenas)
    return arenas


def tensor_spec(t: torch.Tensor, node: fx.Node, method: str) -> TensorSpec:
    """`t` as a program holds it: dynamic sizes at their upper bounds, the dim order of its strides."""
    sizes = []
    for s in t.shape:
        upper = shape_upper_bound(s)
        if upper is None:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': node '{node.name}'{' (' + where + ')' if where else ''} has a dimension "
                f"{s.node.expr} with no upper bound; .pte programs plan memory for the largest shape, so give each "
                "dynamic dimension a maximum, e.g. torch.export.Dim('n', max=1024)"
            )
        sizes.append(upper)
    spec = TensorSpec(t.dtype, sizes, requires_grad=bool(t.requires_grad))
    if all(isinstance(s, int) for s in t.shape):
        spec.stride = strides = tuple(t.stride())
        spec.dim_order = tuple(sorted(range(t.dim()), key=lambda d: (-strides[d], d)))
    else:  # contiguous, as the TensorSpec of its upper bounds says
        spec.shape_dynamism = TensorShapeDynamism.DYNAMIC_BOUND
    return spec


@dataclass
class MemoryPlanningPass:
    """How to plan a method's memory, and the step that plans it (`run`, or called on a graph module)."""

    # The algorithm: "greedy" or "naive", an upstream-style callable such as
    # `MemoryPlanningAlgorithmSuite(algo_list=[greedy, naive])`, or a callable `(buffers, alignment) -> arena size`.
    # With alloc_graph_input=False the runtime reads the caller's input memory in place; with
    # alloc_graph_output=False the method's outputs (and an input returned as is) get no planned memory: the
    # caller binds memory to them (`Method::set_output_data_ptr`; the hosts and bindings do it themselves).
    # Mutable buffers always get planned memory. With share_mutable_buffers=True every method so planned keeps its
    # mutable buffers in memory arena 2, one place per buffer name across methods, so the methods read and write one
    # state (a prefill and a decode method sharing a KV cache); the runtimes share arena 2 among a program's methods.
    memory_planning_algo: object = "greedy"
    alignment: int = DEFAULT_ALIGNMENT
    alloc_graph_input: bool = True
    alloc_graph_output: bool = True
    alloc_mutable_buffers: bool = True
    share_mutable_buffers: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.share_mutable_buffers, bool):
            raise ExportError(
                f"MemoryPlanningPass.share_mutable_buffers must be True or False, not {self.share_mutable_buffers!r}")
        for option in ("alloc_graph_input", "alloc_graph_output"):
            if not isinstance(getattr(self, option), bool):
                raise ExportError(f"MemoryPlanningPass.{option} must be True or False, not {getattr(self, option)!r}")
        if self.alloc_mutable_buffers is not True:
            raise ExportError(
                f"MemoryPlanningPass.alloc_mutable_buffers={self.alloc_mutable_buffers!r} is not supported: mutable "
                "buffers always get planned memory here; pass alloc_mutable_buffers=True"
            )
        if self.memory_planning_algo is None:  # upstream's default, a suite of greedy alone: the same plan
            self.memory_planning_algo = "greedy"
        algo = self.memory_planning_algo
        if isinstance(algo, str) and algo not in PLANNERS:
            raise ExportError(
                f"memory_planning_algo={algo!r} is not a planner; use one of {sorted(PLANNERS)} or a callable"
            )
        if not (isinstance(algo, str) or callable(algo)):
            raise ExportError(f"memory_planning_algo must be a planner name or a callable, not {type(algo).__name__}")
        if callable(algo):
            _takes_specs(algo)
        if not is_power_of_two(self.alignment):
            raise ExportError(f"alignment={self.alignment!r} must be a positive power of two, e.g. 16")

    def planner(self, graph_module=None, graph_signature=None) -> Callable[[list[Buffer], int], int]:
        """The buffer planner to run; an upstream-style algorithm is given this graph and signature."""
        algo = self.memory_planning_algo
        if isinstance(algo, str):
            return PLANNERS[algo]
        if not _takes_specs(algo):
            return algo
        from executorch.exir._spec_planners import buffer_planner

        return buffer_planner(algo, graph_module, graph_signature)

    def __call__(self, graph_module: fx.GraphModule) -> PassResult:
        return self.run(graph_module)

    def run(self, graph_module: fx.GraphModule, graph_signature=None, *, method: str = "forward",
            shared: Optional[SharedState] = None, by_device: bool = True, views: bool = True) -> PassResult:
        """Plan one method's graph and record the plan in its specs and `graph_module.meta`. Without a
        signature, a graph whose nodes carry TensorSpecs (a backend's partition after SpecPropPass) has
        those very specs planned, as upstream plans them (`_spec_planners.plan_node_specs`). With `views`
        (`ExecutorchBackendConfig.remove_view_copy`), a view the runtime can read in place is kept in its
        base's storage; without, every view copy gets storage of its own."""
        if graph_signature is None and any(isinstance(n.meta.get("spec"), (TensorSpec, tuple, list))
                                           for n in graph_module.graph.nodes):
            from executorch.exir import _spec_planners as sp

            algo = self.memory_planning_algo
            if isinstance(algo, str) or not _takes_specs(algo):
                buffers = PLANNERS[algo] if isinstance(algo, str) else algo
                algo = lambda a, specs, gm, sig, pad: sp._plan_specs(buffers, a, specs, gm, pad)  # noqa: E731
            sp.plan_node_specs(graph_module, algo, self.alignment, self.alloc_graph_input, self.alloc_graph_output)
            return PassResult(graph_module, True)
        # Without a signature every placeholder is an input. `shared` is the program's arena 2 when methods share
        # state (by default this method's own); by_device=False puts every value in the host's arena.
        own = self.share_mutable_buffers and shared is None
        shared = SharedState(self.alignment) if own else shared
        nodes = list(graph_module.graph.nodes)
        outputs = None if self.alloc_graph_output else user_outputs(graph_module, graph_signature)
        unviewed: set[fx.Node] = set(outputs or ())
        while True:
            walk = _Walk(method, self.alloc_graph_input, shared if self.share_mutable_buffers else None, views,
                         unviewed)
            with torch_targets(graph_module):  # the graph as the emitter sees it
                walk.placeholders(nodes, graph_signature)
                walk.graph(graph_module, None)
            if outputs is None:
                break
            # The caller's memory holds an output and whatever shares its storage (an in-place op's argument, an
            # input returned as is); a view of that storage would have none, so it becomes a copy instead.
            lost = walk.leave_unplanned(outputs)
            if not lost:
                break
            unviewed |= lost
        for node, life in lifetimes(graph_module).items():
            buf = walk.storage.get(node)
            if isinstance(buf, Buffer):
                buf.first, buf.last = min(buf.first, life.first), max(buf.last, life.last)
        for buf in walk.state:  # mutable state lives for the whole call
            buf.first, buf.last = 0, len(nodes)
        for src, dst in walk.moved:  # a cond's result, moved into its output, lives as long as that
            src.last = max(src.last, dst.last)
        arenas = plan_by_device([b for b in walk.buffers if id(b) not in walk.in_shared],
                                self.planner(graph_module, graph_signature), self.alignment, by_device)
        if walk.shared is not None and any(device != HOST for _, device in arenas):
            raise ExportError(
                f"method '{method}' has values on a device and shares its mutable buffers with other methods; "
                "both need memory arena 2, so export it with MemoryPlanningPass(share_mutable_buffers=False) or "
                "ExecutorchBackendConfig(enable_non_cpu_memory_planning=False)")
        if not arenas and walk.shared is not None:  # a method sharing state (arena 2) has an arena 1
            arenas = [(0, HOST)]
        ids = {id(b): i for i, b in enumerate(walk.buffers)}
        for spec, buf in walk.placed:
            at = walk.in_shared.get(id(buf))
            spec.mem_id, spec.mem_offset = (buf.memory_id, buf.offset) if at is None else (SHARED_STATE_ARENA, at)
            spec.mem_obj_id, spec.lifetime = ids[id(buf)], [buf.first, buf.last]
        sizes = [0] + [size for size, _ in arenas]
        graph_module.meta["non_const_buffer_sizes"] = sizes + [shared.size] if own else sizes
        graph_module.meta["non_const_buffer_device"] = [(i, d) for i, (_, d) in enumerate(arenas, 1) if d != HOST]
        return PassResult(graph_module, True)


def plan_program(programs: dict, config) -> None:
    """Plan each method of `programs` (name -> ExportedProgram) with its pass in `config`, before emission."""
    shared = SharedState(max(config.memory_planning_pass_for(n).alignment for n in programs))
    sharing = []
    for name, ep in programs.items():
        plan = config.memory_planning_pass_for(name)
        plan.run(ep.graph_module, ep.graph_signature, method=name, shared=shared,
                 by_device=config.enable_non_cpu_memory_planning, views=config.remove_view_copy)
        if plan.share_mutable_buffers:
            sharing.append(ep.graph_module.meta["non_const_buffer_sizes"])
    for sizes in sharing:  # every method sharing state declares all of arena 2
        sizes.append(shared.size)


SHARED_STATE_ARENA = 2  # the memory id of mutable buffers shared across methods, as in ExecuTorch


class SharedState:
    """Mutable buffers shared by a program's methods: one place in arena 2 per buffer name."""

    # The same place in every method; state lives for the program, so no two buffers share bytes.

    def __init__(self, alignment: int = DEFAULT_ALIGNMENT) -> None:
        self.alignment = alignment
        self.places: dict[str, tuple[int, int, tuple]] = {}  # name -> (offset, bytes, (dtype, sizes))
        self.size = 0

    def place(self, name: str, nbytes: int, kind: tuple, method: str) -> int:
        """The offset of buffer `name` (`kind` its dtype and sizes); the first method to ask places it."""
        known = self.places.get(name)
        if known is None:
            offset = aligned(self.size, self.alignment)
            self.places[name] = (offset, nbytes, kind)
            self.size = aligned(offset + nbytes, self.alignment)
            return offset
        if known[2] != kind:
            raise ExportError(
                f"method '{method}' holds mutable buffer {name!r} as {kind}, another method as {known[2]}; a shared "
                "buffer must have one dtype and shape in every method (export each method from the same module)")
        return known[0]



class _Walk:
    """One method's tensor values and the buffers holding them, in the order the emitter makes them."""
    # A view the runtime can read in place shares its base's buffer (unless it is in `unviewed`); an in-place
    # op's or a copy_'s result is its first argument; a control-flow body's values live at the step of the node
    # that runs it.
    def __init__(self, method: str, alloc_inputs: bool, shared: Optional[SharedState], views: bool = True,
                 unviewed: frozenset | set = frozenset()) -> None:
        self.method, self.alloc_inputs, self.shared, self.views = method, alloc_inputs, shared, views
        self.unviewed = unviewed
        self.viewing = []  # (view node, the buffer it shares)
        self.storage = {}  # node -> its Buffer, a list of them (several results), or None
        self.buffers = []  # in the order their values are emitted
        self.placed = []  # (spec, buffer it is in)
        self.state = []  # the mutable buffers'
        self.written = []  # what a write-back copy_ changes: never viewed in place
        self.moved = []  # (branch result, cond output)
        self.in_shared = {}  # id(buffer) -> its offset in arena 2

    def put(self, node: fx.Node, storage, spec) -> None:
        self.storage[node] = storage
        node.meta["spec"] = spec

    def borrow(self, node: fx.Node, src) -> None:
        is_node = isinstance(src, fx.Node)
        self.put(node, self.storage.get(src) if is_node else None, src.meta.get("spec") if is_node else None)

    def fresh(self, t, node: fx.Node, step: int, planned: bool = True) -> tuple:
        if not isinstance(t, torch.Tensor):
            return None, None
        spec = tensor_spec(t, node, self.method)
        if not planned:
            return None, spec
        buf = Buffer(spec.nbytes(), step, step, device=tuple(device_of(node)))
        self.buffers.append(buf)
        self.placed.append((spec, buf))
        return buf, spec

    def results(self, node: fx.Node, step: int) -> None:
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            made = [self.fresh(v, node, step) for v in val]
            self.put(node, [b for b, _ in made], tuple(s for _, s in made))
        else:
            self.put(node, *self.fresh(val, node, step))

    def placeholders(self, nodes: list[fx.Node], signature) -> None:
        kinds = {s.arg.name: s for s in signature.input_specs if hasattr(s.arg, "name")} if signature else {}
        mutated = mutated_placeholders(signature) if signature else {}
        inputs = []
        for step, node in enumerate(nodes):
            if node.op != "placeholder":
                continue
            spec = kinds.get(node.name)
            if spec is None or spec.kind == InputKind.USER_INPUT:
                inputs.append((step, node))
            elif spec.kind == InputKind.BUFFER and node.name in mutated:
                buf, value = self.fresh(node.meta["val"], node, step)
                self.put(node, buf, value)
                self.state.append(buf)
                if self.shared is not None:
                    kind = (str(value.dtype), tuple(value.shape))
                    self.in_shared[id(buf)] = self.shared.place(spec.target, buf.size, kind, self.method)
            else:
                self.put(node, None, None)  # a constant
        for step, node in inputs:  # unplanned, an input is the caller's memory, bound at run time
            self.put(node, *self.fresh(node.meta.get("val"), node, step, self.alloc_inputs))
        self.written = [self.storage[n] for n in nodes if n.name in mutated and isinstance(self.storage.get(n), Buffer)]

    def graph(self, gm: fx.GraphModule, step: Optional[int]) -> None:
        # each call at its own step (a method's graph) or all at `step` (a body's)
        for i, node in enumerate(gm.graph.nodes):
            if node.op == "call_function":
                self.call(gm, node, i if step is None else step)

    def call(self, gm: fx.GraphModule, node: fx.Node, step: int) -> None:
        target, val, args = node.target, node.meta.get("val"), node.args
        base = args[0] if args else None
        if target is operator.getitem:
            storage, spec = self.storage.get(base), base.meta.get("spec")
            self.put(node, storage[args[1]] if isinstance(storage, list) else None,
                     spec[args[1]] if isinstance(spec, tuple) else None)
        elif target is torch.ops.higher_order.cond:
            self.results(node, step)
            for ref in args[1:3]:
                branch = getattr(gm, ref.target)
                for ph, operand in zip(_placeholders(branch), args[3]):
                    self.borrow(ph, operand)
                self.graph(branch, step)
                for src, dst in zip(branch.graph.output_node().args[0], self.storage[node]):
                    if isinstance(self.storage.get(src), Buffer):
                        self.moved.append((self.storage[src], dst))
        elif target in (torch.ops.higher_order.map_impl, torch.ops.higher_order.scan):
            (body, xs, extra), carries = (args, 0) if target is torch.ops.higher_order.map_impl else (
                (args[0], args[2], args[3]), len(args[1]))
            body = getattr(gm, body.target)
            self.results(node, step)
            phs = _placeholders(body)
            for k, ph in enumerate(phs[:carries]):
                self.put(ph, self.storage[node][k], node.meta["spec"][k])
            rows = phs[carries:carries + len(xs)]
            for ph in rows:  # the row of each scanned tensor the body reads
                self.put(ph, *self.fresh(ph.meta["val"], ph, step))
            for ph, a in zip(phs[carries + len(rows):], extra):
                self.borrow(ph, a)
            self.graph(body, step)
        elif target is executorch_call_delegate:
            self.results(node, step)
        elif target is torch.ops.aten.copy_.default:
            self.borrow(node, base)
        elif prim_op_name(target) is not None:
            self.put(node, None, None)
        elif isinstance(target, torch._ops.OpOverload) and target.namespace == "aten" and writes_first_argument(target):
            self.borrow(node, base if args else node.kwargs.get(target._schema.arguments[0].name))
        elif self._views(node, base):
            buf = self.storage[base]
            spec = tensor_spec(val, node, self.method)
            self.placed.append((spec, buf))
            self.viewing.append((node, buf))
            self.put(node, buf, spec)
        else:
            self.results(node, step)

    def leave_unplanned(self, outputs: list[fx.Node]) -> set[fx.Node]:
        """Take the buffers holding `outputs` out of the plan (mutable state stays planned); the views that
        shared one of them, which must be walked again as copies."""
        held = [self.storage.get(n) for n in outputs]
        gone = {id(b) for b in held if isinstance(b, Buffer) and not any(b is s for s in self.state)}
        self.buffers = [b for b in self.buffers if id(b) not in gone]
        self.placed = [(spec, b) for spec, b in self.placed if id(b) not in gone]
        return {n for n, b in self.viewing if id(b) in gone}

    def _views(self, node: fx.Node, base) -> bool:
        # A view on the host, never of what a write-back changes: static, or a view_copy over symbolic sizes
        # (the emitter gives that one an et_view instruction, which sets its sizes at run time).
        target, val = node.target, node.meta.get("val")
        if (not self.views or target not in ALIAS_VIEW_COPIES and target not in SAME_ORDER_COPIES
                or not isinstance(base, fx.Node) or node in self.unviewed):
            return False
        buf, base_val = self.storage.get(base), base.meta.get("val")
        # a same-order copy is a view when both are contiguous in one dtype (and an expand expands nothing)
        if target not in ALIAS_VIEW_COPIES and not (
                isinstance(base_val, torch.Tensor) and isinstance(val, torch.Tensor) and base_val.dtype == val.dtype
                and base_val.is_contiguous() and val.is_contiguous()
                and (target is not torch.ops.aten.expand_copy.default or val.shape == base_val.shape)):
            return False
        return (isinstance(buf, Buffer) and device_of(base) == CPU == device_of(node)
                and not any(buf is b for b in self.written)
                and (target in ALIAS_VIEW_COPIES or all(isinstance(s, int) for s in (*val.shape, *base_val.shape))))

def _placeholders(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _algo_name(algo) -> str:
    return getattr(getattr(algo, "func", algo), "__name__", repr(algo))


def _takes_specs(algo) -> bool:
    """Whether `algo` takes upstream's planner arguments rather than `(buffers, alignment)`."""
    # Upstream's: (alignment, specs, graph_module, graph_signature, extra_padding), as greedy, naive, a
    # MemoryPlanningAlgorithmSuite or a partial of one take them. ExportError when it can be called neither way.
    try:
        signature = inspect.signature(algo)
    except (TypeError, ValueError):
        return False  # no signature to read (a builtin): called the older way
    for args, upstream in (((0, [], None, None, 0), True), (([], 0), False)):
        try:
            signature.bind(*args)
            return upstream
        except TypeError:
            pass
    raise ExportError(
        f"memory_planning_algo {_algo_name(algo)}{signature} takes neither upstream's planner arguments "
        "(alignment, specs, graph_module, graph_signature, extra_padding) nor (buffers, alignment)")


# Upstream's spec-based planners, loaded on first use (vendor backends plan their partitions with them).
_SPEC_PLANNERS = ("MemoryAlgoResult", "MemoryPlanningAlgorithmSuite", "SpecAllocResult", "greedy", "naive")


def __getattr__(name: str):
    # The plan checkers' code ships with the full wheel only (tools/packaging/components.py).
    if name in ("Verifier", "filter_nodes", "verify", "_do_user_inputs_exist"):
        from executorch.exir import _plan_checks

        return getattr(_plan_checks, name)
    if name in _SPEC_PLANNERS:
        from executorch.exir import _spec_planners

        return getattr(_spec_planners, name)
    raise AttributeError(f"module 'executorch.exir.memory_planning' has no attribute {name!r}")
