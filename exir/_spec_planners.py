"""Upstream's planner protocol: `greedy`, `naive` and `MemoryPlanningAlgorithmSuite` over TensorSpecs with lifetimes,
and `buffer_planner`, which runs such an algorithm as `MemoryPlanningPass`'s planner."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from typing import Callable, Optional
from torch.utils import _pytree as pytree

from executorch.exir._arena import DEFAULT_ALIGNMENT, Buffer, greedy_buffers, naive_buffers
from executorch.exir._serialize._alignment import aligned
from executorch.exir.error import ExportError
from executorch.exir.tensor import TensorSpec

__all__ = ["MemoryAlgoResult", "MemoryPlanningAlgorithmSuite", "SpecAllocResult", "greedy", "naive", "plan_node_specs"]


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
    """Largest first (of equal sizes, the last given first, as upstream's order), each buffer whole in the
    first storage object whose buffers are never live with it, else a new one; the objects one after another
    (greedy without overlapping allocations)."""
    objects: list[tuple[int, list[Buffer]]] = []
    for b in sorted(reversed(buffers), key=lambda b: -b.size):
        home = next((o for o in objects if not any(b.overlaps(x) for x in o[1])), None)
        if home is None:
            objects.append(home := (b.size, []))
        home[1].append(b)
    end = 0
    for size, members in objects:
        for b in members:
            b.offset = end
        end = aligned(end + size, alignment)
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
    planner = greedy_buffers if allow_overlapping_allocations else _disjoint_objects
    if isinstance(alignment, list):
        return planner(alignment, DEFAULT_ALIGNMENT if specs is None else specs)
    return _plan_specs(planner, alignment, specs, graph_module, extra_padding)


def naive(alignment, specs=None, graph_module=None, graph_signature=None, extra_padding: int = 0):
    """Every tensor its own bytes, one after another: no reuse. Forms as `greedy`'s."""
    if isinstance(alignment, list):
        return naive_buffers(alignment, DEFAULT_ALIGNMENT if specs is None else specs)
    return _plan_specs(naive_buffers, alignment, specs, graph_module, extra_padding)


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
        results = [a(alignment, specs, graph_module, graph_signature, extra_padding) for a in self.algo_list]
        if len({len(r.bufsizes) for r in results}) != 1:
            raise ExportError("MemoryPlanningAlgorithmSuite: its algorithms planned different numbers of arenas "
                              f"({[r.bufsizes for r in results]}); every algorithm must plan the same memory ids")
        best = min(results, key=lambda r: sum(r.bufsizes))
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


def buffer_planner(algo, graph_module, graph_signature) -> Callable[[list[Buffer], int], int]:
    """A buffer planner running an upstream-style algorithm: one uint8 TensorSpec per buffer (its bytes,
    its lifetime), the algorithm's plan read back from the specs (or from its `MemoryAlgoResult`)."""
    name = getattr(getattr(algo, "func", algo), "__name__", repr(algo))

    def plan(buffers: list[Buffer], alignment: int) -> int:
        specs = []
        for b in buffers:
            spec = TensorSpec(torch.uint8, [b.size])
            spec.lifetime = [b.first, b.last]
            specs.append(spec)
        sizes = algo(alignment, specs, graph_module, graph_signature, 0)
        sizes = _placed(sizes)
        for spec, b in zip(specs, buffers):
            if spec.mem_id != 1 or spec.mem_offset is None:
                raise ExportError(
                    f"memory_planning_algo {name} placed a tensor in memory id {spec.mem_id} at offset "
                    f"{spec.mem_offset}; this exporter plans one arena (memory id 1) per device")
            b.offset = spec.mem_offset
        return max([sizes[1] if len(sizes) > 1 else 0] + [b.offset + b.size for b in buffers])
    return plan


def _placed(sizes):
    # A bare algorithm (not a suite) returns a MemoryAlgoResult: its placements go into the specs.
    if isinstance(sizes, MemoryAlgoResult):
        for spec, placed in sizes.spec_dict.items():
            spec.mem_id, spec.mem_obj_id, spec.mem_offset = placed.mem_id, placed.mem_obj_id, placed.mem_offset
        sizes = sizes.bufsizes
    return sizes


def _node_specs(node) -> list:
    spec = node.meta.get("spec")
    return [s for s in (spec if isinstance(spec, (list, tuple)) else [spec]) if isinstance(s, TensorSpec)]


def _is_out_variant(node) -> bool:
    target = getattr(node.target, "_op", node.target)
    return isinstance(target, torch._ops.OpOverload) and any(a.is_out for a in target._schema.arguments)


def plan_node_specs(graph_module, algo, alignment: int, alloc_graph_input: bool = True,
                    alloc_graph_output: bool = True):
    """Plan the TensorSpecs a graph's nodes already carry (SpecPropPass's), as a backend plans its partition with
    `MemoryPlanningPass.run(graph_module)`: each spec lives from the first to the last node that makes or reads it
    (a graph input from step 0); the specs not `const` (nor of out-variant nodes), in node order, go to `algo`,
    which writes the plan into them; the arena sizes go to `graph_module.meta["non_const_buffer_sizes"]`."""
    nodes = list(graph_module.graph.nodes)
    for step, node in enumerate(nodes):
        used = [node] + [a for a in pytree.tree_flatten((node.args, node.kwargs))[0]
                         if isinstance(a, torch.fx.Node)]
        for spec in (s for n in used for s in _node_specs(n)):
            first, last = spec.lifetime
            first = 0 if node.op == "placeholder" else (step if first is None or first > step else first)
            spec.lifetime = [first, step if last is None or last < step else last]
    specs, seen = [], set()
    returned = set() if alloc_graph_output else {
        id(s) for a in pytree.tree_leaves(graph_module.graph.output_node().args) if isinstance(a, torch.fx.Node)
        for s in _node_specs(a)}
    for node in nodes:
        if node.op == "get_attr" or _is_out_variant(node) or (node.op == "placeholder" and not alloc_graph_input):
            continue
        for spec in _node_specs(node):
            if not spec.const and id(spec) not in seen and id(spec) not in returned:
                seen.add(id(spec))
                specs.append(spec)
    sizes = algo(alignment, specs, graph_module, None, 0)
    sizes = _placed(sizes)
    graph_module.meta["non_const_buffer_sizes"] = list(sizes)
