"""Memory planning: place every non-constant tensor in an arena, reusing space across lifetimes.

A buffer (`executorch.exir._arena.Buffer`) is a run of bytes live over an inclusive range of
instruction steps. Two buffers may share bytes only if their ranges don't overlap. Offsets are
aligned; the arena size is the largest end offset. Planners are plain functions `list[Buffer] ->
arena size` that fill in `Buffer.offset`; upstream's spec-based `greedy`, `naive` and
`MemoryPlanningAlgorithmSuite` (full wheel, `executorch.exir._spec_planners`) are run through an
adapter. Buffers on a device (a delegate's side of a host/device copy) never share an arena with
host buffers: `plan_by_device` plans each device's buffers in arenas of their own.
"""

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Optional

from torch import fx

from executorch.exir._arena import Buffer, greedy_buffers, naive_buffers
from executorch.exir._serialize._alignment import aligned, is_power_of_two
from executorch.exir.error import ExportError
from executorch.exir.tensor import ALIGNMENT as DEFAULT_ALIGNMENT


class Lifetime(NamedTuple):
    """The inclusive range of steps over which a node's value must stay in memory."""

    first: int
    last: int


def lifetimes(gm: fx.GraphModule | fx.Graph) -> dict[fx.Node, Lifetime]:
    """Each node's lifetime in steps, a step being the node's position in the graph: from the node
    (from step 0 for graph inputs) to its last user, where a `getitem` user counts as its own
    users and the graph's output as one step past the last node. Nodes of control-flow branches
    are not in the graph, so they get none: they live at the step of the node that runs them."""
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


def extend_lifetimes(graph: fx.Graph, buffer_of: Callable[[fx.Node], Optional[Buffer]], state: list[Buffer],
                     moved: list[tuple[Buffer, Buffer]]) -> None:
    """Final lifetimes: a node's buffer as long as its node lives, mutable state for the whole call, a
    buffer moved into another (a cond's result) as long as that one."""
    nodes = list(graph.nodes)
    for node, life in lifetimes(graph).items():
        buf = buffer_of(node)
        if buf is not None:
            buf.first = min(buf.first, life.first)
            buf.last = max(buf.last, life.last)
    for buf in state:
        buf.first, buf.last = 0, len(nodes)
    for src, dst in moved:
        src.last = max(src.last, dst.last)


# The planners `MemoryPlanningPass(memory_planning_algo=NAME)` names: `(buffers, alignment) -> arena size`.
PLANNERS: dict[str, Callable[[list[Buffer], int], int]] = {"greedy": greedy_buffers, "naive": naive_buffers}

HOST = (0, 0)


def plan_by_device(buffers: list[Buffer], planner: Callable[[list[Buffer], int], int], alignment: int,
                   by_device: bool = True) -> list[tuple[int, tuple]]:
    """Plan the buffers of each device in an arena of its own, numbered from 1: the host's first, then
    the devices by (type, index), as ExecuTorch numbers them. Sets each buffer's `memory_id` and
    `offset`; returns each arena's (size, device). With `by_device=False` all share one host arena."""
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


def verify(buffers: list[Buffer]) -> None:
    """Raise AssertionError if two buffers live at once share a byte (a planner bug)."""
    by_offset = sorted((b for b in buffers if b.size), key=lambda b: b.offset)
    for i, a in enumerate(by_offset):
        for b in by_offset[i + 1:]:
            if b.offset >= a.offset + a.size:
                break
            if a.overlaps(b):
                raise AssertionError(f"memory plan overlap: {a} and {b}")


@dataclass
class MemoryPlanningPass:
    """How to plan a method's memory: the algorithm ("greedy" or "naive"; an upstream-style callable
    such as `MemoryPlanningAlgorithmSuite(algo_list=[greedy, naive])`; or a callable
    `(buffers, alignment) -> arena size`), the alignment of every tensor, and whether graph
    inputs get planned memory (with alloc_graph_input=False the runtime reads the caller's input
    memory in place). Outputs and mutable buffers always get planned memory. With
    share_mutable_buffers=True every method so planned keeps its mutable buffers in memory arena 2,
    one place per buffer name across methods, so the methods read and write one state (e.g. a
    prefill and a decode method sharing a KV cache); the runtimes share arena 2 among a program's
    methods."""

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
        if self.alloc_graph_output is not True:
            raise ExportError(
                f"MemoryPlanningPass.alloc_graph_output={self.alloc_graph_output!r} is not supported: the runtimes "
                "cannot bind caller memory to outputs, so outputs always get planned memory; pass "
                "alloc_graph_output=True"
            )
        if not isinstance(self.alloc_graph_input, bool):
            raise ExportError(f"MemoryPlanningPass.alloc_graph_input must be True or False, "
                              f"not {self.alloc_graph_input!r}")
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
        from executorch.exir._spec_planners import buffer_planner  # full wheel, as the algorithms are

        return buffer_planner(algo, graph_module, graph_signature)


def plan_method(method: str, buffers: list[Buffer], plan: "MemoryPlanningPass", by_device: bool,
                shares_state: bool, ep=None) -> list[tuple[int, tuple]]:
    """Each arena's (size, device) for one method (`ep` its program), the host's first; a method
    sharing state (arena 2) has an arena 1, even an empty one."""
    planner = plan.planner(*((ep.graph_module, ep.graph_signature) if ep is not None else ()))
    arenas = plan_by_device(buffers, planner, plan.alignment, by_device)
    if shares_state and any(device != HOST for _, device in arenas):
        raise ExportError(
            f"method '{method}' has values on a device and shares its mutable buffers with other methods; "
            "both need memory arena 2, so export it with MemoryPlanningPass(share_mutable_buffers=False) or "
            "ExecutorchBackendConfig(enable_non_cpu_memory_planning=False)")
    if not arenas and shares_state:
        arenas = [(0, HOST)]
    return arenas


SHARED_STATE_ARENA = 2  # the memory id of mutable buffers shared across methods, as in ExecuTorch


class SharedState:
    """Mutable buffers shared by a program's methods: one place in arena 2 per buffer name, the same
    in every method; state lives for the program, so no two buffers share bytes."""

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


def filter_nodes(inputs) -> Iterable[fx.Node]:
    """The fx nodes in `inputs`, at any depth."""
    from torch.utils import _pytree as pytree

    return (x for x in pytree.tree_leaves(inputs) if isinstance(x, fx.Node))


def _algo_name(algo) -> str:
    return getattr(getattr(algo, "func", algo), "__name__", repr(algo))


def _takes_specs(algo) -> bool:
    """Whether `algo` follows upstream's protocol `(alignment, specs, graph_module, graph_signature,
    extra_padding)` (greedy, naive, a MemoryPlanningAlgorithmSuite, a partial of one) rather than this
    package's `(buffers, alignment)`; ExportError when it can be called neither way."""
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


# Upstream's spec-based planners ship with the full wheel only (tools/packaging/components.py).
_SPEC_PLANNERS = ("MemoryAlgoResult", "MemoryPlanningAlgorithmSuite", "SpecAllocResult", "greedy", "naive")


def __getattr__(name: str):
    # The plan checker's code ships with the full wheel only (tools/packaging/components.py).
    if name == "Verifier":
        from executorch.exir._plan_checks import Verifier

        return Verifier
    if name in _SPEC_PLANNERS:
        from executorch.exir import _spec_planners

        return getattr(_spec_planners, name)
    raise AttributeError(f"module 'executorch.exir.memory_planning' has no attribute {name!r}")
