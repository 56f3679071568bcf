"""What a `.pte` holds as XNNPACK sees it: delegate calls, portable kernel calls and payload node kinds."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
from executorch.exir._serialize._program import deserialize_pte_binary


@dataclass
class Structure:
    delegates: int = 0
    kernel_calls: Counter = field(default_factory=Counter)
    node_kinds: Counter = field(default_factory=Counter)
    named_keys: list = field(default_factory=list)


def structure(pte: Path, method: str = "forward") -> Structure:
    f = deserialize_pte_binary(Path(pte).read_bytes())
    program = f.program
    plan = next(p for p in program.execution_plan if p.name == method)
    out = Structure()
    ops = [o.name for o in plan.operators]
    for chain in plan.chains:
        for ins in chain.instructions:
            kind = type(ins.instr_args).__name__
            if kind == "KernelCall":
                out.kernel_calls[ops[ins.instr_args.op_index]] += 1
            elif kind == "DelegateCall":
                out.delegates += 1
    for d in plan.delegates:
        if d.id != "XnnpackBackend":
            continue
        loc = d.processed
        data = program.segment_data[loc.index] if loc.location == 1 else program.backend_delegate_data[loc.index].data
        graph = deserialize_xnnpack_binary(bytes(data)).graph
        out.node_kinds.update(type(n.xnode_union).__name__[3:] for n in graph.xnodes)
        out.named_keys += [c.named_key for c in graph.constant_data if c.named_key]
    return out
