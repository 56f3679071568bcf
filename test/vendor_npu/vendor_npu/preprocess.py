"""VendorNpuBackend.preprocess: a partition becomes a vendor payload; weights become named data."""

from __future__ import annotations

import ctypes
import hashlib

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.dialects._ops import ops as exir_ops
from vendor_npu import payload as P

edge = exir_ops.edge.aten  # the edge program a backend gets calls edge ops


def _ints(v, n: int) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


class VendorNpuBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        store = NamedDataStore()
        out = P.Payload()
        slot_of: dict[torch.fx.Node, int] = {}
        specs = {s.arg.name: s for s in edge_program.graph_signature.input_specs if hasattr(s.arg, "name")}

        def new_slot(kind: int, node: torch.fx.Node, key: str = "") -> int:
            out.slots.append(P.Slot(kind, list(node.meta["val"].shape), key))
            slot_of[node] = len(out.slots) - 1
            return slot_of[node]

        for node in edge_program.graph.nodes:
            if node.op != "placeholder":
                continue
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                out.inputs.append(new_slot(P.INPUT, node))
                continue
            data = (edge_program.state_dict.get(spec.target) if spec.target in edge_program.state_dict
                    else edge_program.constants[spec.target])
            t = data.detach().to(torch.float32).contiguous()
            raw = ctypes.string_at(t.data_ptr(), t.numel() * 4)
            key = "vendor_npu." + hashlib.sha256(raw).hexdigest()[:24]
            store.add_named_data(key, raw, alignment=16)
            new_slot(P.CONSTANT, node, key)
        output_node = next(n for n in edge_program.graph.nodes if n.op == "output")
        results = set(output_node.args[0])
        for node in edge_program.graph.nodes:
            if node.op != "call_function":
                continue
            args = [slot_of[a] if isinstance(a, torch.fx.Node) else P.NONE for a in node.args[:3]]
            args += [P.NONE] * (3 - len(args))
            o = new_slot(P.OUTPUT if node in results else P.TEMP, node)
            if node.target is edge.add.Tensor:
                out.ops.append(P.Op(P.ADD, o, args[0], args[1]))
            elif node.target is edge.mul.Tensor:
                out.ops.append(P.Op(P.MUL, o, args[0], args[1]))
            elif node.target is edge.linear.default:
                out.ops.append(P.Op(P.LINEAR, o, args[0], args[1], args[2]))
            elif node.target is edge.convolution.default:
                stride, padding, dilation = (_ints(node.args[i], 2) for i in (3, 4, 5))
                out.ops.append(P.Op(P.CONV2D, o, args[0], args[1], args[2],
                                    [*stride, *padding, *dilation, int(node.args[8])]))
            else:
                raise ValueError(f"node '{node.name}' ({node.target}) is not an op this NPU runs")
        out.outputs = [slot_of[n] for n in output_node.args[0]]
        return PreprocessResult(processed_bytes=out.encode(), data_store_output=store.get_named_data_store_output())
