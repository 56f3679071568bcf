"""Memory planning: place every non-constant tensor in an arena, reusing space across lifetimes.

A buffer is a run of bytes live over an inclusive range of instruction steps. Two buffers may
share bytes only if their ranges don't overlap. Offsets are aligned; the arena size is the
largest end offset. Planners are plain functions `list[Buffer] -> arena size` that fill in
`Buffer.offset`. Buffers on a device (a delegate's side of a host/device copy) never share an
arena with host buffers: `plan_by_device` plans each device's buffers in arenas of their own.
"""

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Optional

import torch
from torch import fx

from executorch.exir._serialize._alignment import is_power_of_two
from executorch.exir.error import ExportError
from executorch.exir.tensor import ALIGNMENT as DEFAULT_ALIGNMENT


@dataclass
class Buffer:
    """Storage for one tensor, or for a tensor and the views that alias it."""

    size: int  # bytes, upper bound for dynamically shaped tensors
    first: int  # first step at which it is live
    last: int  # last step at which it is live
    offset: Optional[int] = None
    device: tuple = (0, 0)  # (schema.DeviceType, index) of the memory it lives in; (0, 0) is the host
    memory_id: int = 1  # the arena `plan_by_device` placed it in

    def overlaps(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


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


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _naive_buffers(buffers: list[Buffer], alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Every buffer gets its own bytes, one after another: no reuse."""
    end = 0
    for b in buffers:
        b.offset = end
        end = _align(end + b.size, alignment)
    return end


def _greedy_buffers(buffers: list[Buffer], alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Greedy by size: largest first, each at the lowest aligned offset where it fits between
    the buffers already placed whose lifetimes overlap it."""
    placed: list[Buffer] = []
    arena = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.first)):
        busy = sorted((p.offset, p.offset + p.size) for p in placed if p.overlaps(b) and p.size)
        offset = 0
        for start, end in busy:
            if offset + b.size <= start:
                break
            offset = max(offset, _align(end, alignment))
        b.offset = offset
        placed.append(b)
        arena = max(arena, _align(offset + b.size, alignment))
    return arena


# The planners `MemoryPlanningPass(memory_planning_algo=NAME)` names: `(buffers, alignment) -> arena size`.
PLANNERS: dict[str, Callable[[list[Buffer], int], int]] = {"greedy": _greedy_buffers, "naive": _naive_buffers}

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
            raise ExportError(f"MemoryPlanningPass.alloc_graph_input must be True or False, not {self.alloc_graph_input!r}")
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
        return _spec_planner(algo, graph_module, graph_signature) if _takes_specs(algo) else algo


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
            offset = _align(self.size, self.alignment)
            self.places[name] = (offset, nbytes, kind)
            self.size = _align(offset + nbytes, self.alignment)
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


# --- upstream's planner protocol: `(alignment, specs, graph_module, graph_signature, extra_padding)` ---

@dataclass
class SpecAllocResult:
    """Where an algorithm places one TensorSpec: its arena, its storage object and its byte offset."""

    mem_id: int
    mem_obj_id: int
    mem_offset: int


@dataclass
class MemoryAlgoResult:
    """One algorithm's plan: each TensorSpec's placement, and each arena's size (index 0, constants, is 0)."""

    spec_dict: dict
    bufsizes: list


def _disjoint_objects(buffers: list[Buffer], alignment: int) -> int:
    """Largest first, each buffer whole in a storage object only buffers never live with it share;
    the objects one after another (greedy without overlapping allocations)."""
    objects: list[tuple[int, list[Buffer]]] = []
    for b in sorted(buffers, key=lambda b: (-b.size, b.first)):
        home = next((o for o in objects if not any(b.overlaps(x) for x in o[1])), None)
        if home is None:
            objects.append(home := (b.size, []))
        home[1].append(b)
    end = 0
    for size, members in objects:
        for b in members:
            b.offset = end
        end = _align(end + size, alignment)
    return end


def _plan_specs(planner: Callable[[list[Buffer], int], int], alignment: int, specs, graph_module,
                extra_padding: int) -> MemoryAlgoResult:
    """Run a buffer planner over TensorSpecs, arena by arena (a spec's preset `mem_id`, else 1), each
    arena starting past the bytes `graph_module.input_mem_buffer_sizes` reserves in it; the specs
    themselves are left as they are (but realigned), as upstream's algorithms leave them."""
    reserved = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
    groups: dict[int, list] = {}
    for spec in specs:
        if None in tuple(spec.lifetime):
            raise ExportError(f"memory planning: {spec} has no lifetime; set spec.lifetime = [first, last] "
                              "(the steps of its first and last use) before planning")
        spec.realign(alignment)
        groups.setdefault(1 if spec.mem_id is None else spec.mem_id, []).append(spec)
    result = MemoryAlgoResult({}, [0, 0])
    for mem_id, group in sorted(groups.items()):
        base = reserved[mem_id] if mem_id < len(reserved) else 0
        buffers = [Buffer(spec.nbytes(), *spec.lifetime) for spec in group]
        size = planner(buffers, alignment)
        objects = sorted({b.offset for b in buffers})  # one storage object per start offset
        for spec, b in zip(group, buffers):
            result.spec_dict[spec] = SpecAllocResult(mem_id, objects.index(b.offset), base + b.offset)
        result.bufsizes += [0] * (mem_id + 1 - len(result.bufsizes))
        result.bufsizes[mem_id] = base + size + extra_padding
    return result


def greedy(alignment, specs=None, graph_module=None, graph_signature=None, extra_padding: int = 0, *,
           allow_overlapping_allocations: bool = True):
    """Greedy by size: largest first, each at the lowest aligned offset where it fits beside the
    tensors live with it; with allow_overlapping_allocations=False each tensor instead takes a whole
    storage object, shared only with tensors never live with it. Returns a `MemoryAlgoResult` and
    leaves the specs unplaced (`MemoryPlanningAlgorithmSuite` writes the best plan into them).
    `greedy(buffers, alignment)`, this package's older form, places `Buffer`s and returns the arena size."""
    planner = _greedy_buffers if allow_overlapping_allocations else _disjoint_objects
    if isinstance(alignment, list):
        return planner(alignment, DEFAULT_ALIGNMENT if specs is None else specs)
    return _plan_specs(planner, alignment, specs, graph_module, extra_padding)


def naive(alignment, specs=None, graph_module=None, graph_signature=None, extra_padding: int = 0):
    """Every tensor its own bytes, one after another: no reuse. Forms as `greedy`'s."""
    if isinstance(alignment, list):
        return _naive_buffers(alignment, DEFAULT_ALIGNMENT if specs is None else specs)
    return _plan_specs(_naive_buffers, alignment, specs, graph_module, extra_padding)


def _algo_name(algo) -> str:
    return getattr(getattr(algo, "func", algo), "__name__", repr(algo))


class MemoryPlanningAlgorithmSuite:
    """Runs each algorithm of `algo_list` (default: greedy), keeps the plan with the smallest arenas,
    writes it into the specs (`mem_id`, `mem_obj_id`, `mem_offset`) and returns its arena sizes."""

    def __init__(self, algo_list: Optional[list] = None) -> None:
        self.algo_list = list(algo_list or [greedy])

    def __call__(self, alignment, specs=None, graph_module=None, graph_signature=None,
                 extra_padding: int = 0):
        if isinstance(alignment, list):  # the older form: (buffers, alignment) -> arena size
            return self._plan_buffers(alignment, DEFAULT_ALIGNMENT if specs is None else specs)
        specs = list(specs)
        results = {_algo_name(a): a(alignment, specs, graph_module, graph_signature, extra_padding)
                   for a in self.algo_list}
        if len({len(r.bufsizes) for r in results.values()}) != 1:
            raise ExportError(f"MemoryPlanningAlgorithmSuite: the algorithms {sorted(results)} planned different "
                              "numbers of arenas; every algorithm must plan the same memory ids")
        best = min(results.values(), key=lambda r: sum(r.bufsizes))
        for spec, placed in best.spec_dict.items():
            spec.mem_id, spec.mem_obj_id, spec.mem_offset = placed.mem_id, placed.mem_obj_id, placed.mem_offset
        return list(best.bufsizes)

    def _plan_buffers(self, buffers: list[Buffer], alignment: int) -> int:
        best = None
        for algo in self.algo_list:
            size = algo(buffers, alignment)
            if best is None or size < best[0]:
                best = (size, [b.offset for b in buffers])
        for b, offset in zip(buffers, best[1]):
            b.offset = offset
        return best[0]


def _takes_specs(algo) -> bool:
    """Whether `algo` follows upstream's protocol rather than this package's `(buffers, alignment)`;
    ExportError when it can be called neither way."""
    if isinstance(algo, MemoryPlanningAlgorithmSuite) or getattr(algo, "func", algo) in (greedy, naive):
        return True
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


def _spec_planner(algo, graph_module, graph_signature) -> Callable[[list[Buffer], int], int]:
    """A buffer planner running an upstream-style algorithm: one uint8 TensorSpec per buffer (its bytes,
    its lifetime), the algorithm's plan read back from the specs (or from its `MemoryAlgoResult`)."""
    def plan(buffers: list[Buffer], alignment: int) -> int:
        from executorch.exir.tensor import TensorSpec

        specs = []
        for b in buffers:
            spec = TensorSpec(torch.uint8, [b.size])
            spec.lifetime = [b.first, b.last]
            specs.append(spec)
        sizes = algo(alignment, specs, graph_module, graph_signature, 0)
        if isinstance(sizes, MemoryAlgoResult):  # a bare algorithm, not a suite: take its placements
            for spec, placed in sizes.spec_dict.items():
                spec.mem_id, spec.mem_obj_id, spec.mem_offset = placed.mem_id, placed.mem_obj_id, placed.mem_offset
            sizes = sizes.bufsizes
        for spec, b in zip(specs, buffers):
            if spec.mem_id != 1 or spec.mem_offset is None:
                raise ExportError(
                    f"memory_planning_algo {_algo_name(algo)} placed a tensor in memory id {spec.mem_id} at offset "
                    f"{spec.mem_offset}; this exporter plans one arena (memory id 1) per device")
            b.offset = spec.mem_offset
        return max([sizes[1] if len(sizes) > 1 else 0] + [b.offset + b.size for b in buffers])
    return plan


def __getattr__(name: str):
    # The plan checker's code ships with the full wheel only (tools/packaging/components.py).
    if name == "Verifier":
        from executorch.exir._plan_checks import Verifier

        return Verifier
    raise AttributeError(f"module 'executorch.exir.memory_planning' has no attribute {name!r}")
