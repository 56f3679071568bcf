"""`BackendWithCompilerDemo`: ExecuTorch's demo backend's ahead-of-time half; its payload is a text list of
the partition's ops."""

from __future__ import annotations

from typing import final

import torch
from torch.export import ExportedProgram

from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec

# The payload's format version; a runtime refuses a payload of another version.
VERSION = 0


def _supported() -> frozenset:
    aten = torch.ops.aten
    return frozenset({aten.sin.default, aten.mm.default, aten.add.Tensor, aten.linear.default,
                      aten.scaled_dot_product_attention.default, aten.upsample_nearest2d.vec})


def _op_name(op: torch._ops.OpOverload) -> str:
    return f"{op._schema.name.replace('::', '.')}.{op._overloadname}"


@final
class BackendWithCompilerDemo(BackendDetails):
    """Writes `<n>version:0#` and then, per op node, `op:demo::<op>, numel:<n>, dtype:<dtype>`
    followed by `<debug_handle><handle>#` (the format ExecuTorch's demo runtime backend parses);
    refuses any op outside its small set (sin, mm, add, linear, sdpa, nearest upsampling)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        supported = _supported()
        entries, handles = [], {}
        for node in edge_program.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            if node.op != "call_function" or aten_op(node.target) not in supported:
                raise RuntimeError(
                    f"BackendWithCompilerDemo cannot run node '{node.name}' ({node.op} {node.target}); it takes only "
                    f"{sorted(_op_name(op) for op in supported)}: partition only those ops for it")
            val = node.meta["val"]
            handle = node.meta.get("debug_handle", -1)
            entries.append(f"op:demo::{_op_name(aten_op(node.target))}, numel:{val.numel()}, dtype:{val.dtype}"
                           f"<debug_handle>{handle}#")
            handles[handle] = (handle,)
        payload = f"{len(entries)}version:{VERSION}#" + "".join(entries)
        return PreprocessResult(processed_bytes=payload.encode("utf-8"), debug_handle_map=handles)
