"""`serialize(ep) -> SerializedArtifact` and `deserialize(artifact) -> ExportedProgram` for edge programs.

torch.export's serializer with what the published ExecuTorch layout adds: operators named as edge
ops (`executorch.exir.dialects.edge.ops.aten.add.Tensor`), each node's `debug_handle` and
`from_node` in its metadata, and the program written at the
export-schema version that layout uses (5.4: fields torch added later are left out), so the
published ETRecord reader and ours read the same files.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch._export.serde import schema as ts
from torch._export.serde import serialize as tser
from torch._export.serde.serialize import SerializedArtifact

__all__ = ["SerializedArtifact", "deserialize", "serialize"]

EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
LAYOUT_VERSION = {"major": 5, "minor": 4}
# Export-schema fields newer than the layout's version, by dataclass: written without them.
_NEWER_FIELDS = {
    "ExportedProgram": ("guards_code", "torch_version"),
    "Graph": ("sym_float_values",),
    "GraphModule": ("metadata", "treespec_namedtuple_fields"),
    "ModuleCallSignature": ("forward_arg_names",),
    "NamedArgument": ("kind",),
    "Node": ("is_hop_single_tensor_return",),
}


def _call_delegate():
    from executorch.exir.delegate import executorch_call_delegate

    return executorch_call_delegate


def _serialize_program(exported_program: torch.export.ExportedProgram):
    """torch's serialization, then the layout's additions node by node (torch's serializer
    classes are final, so the additions are made on its output rather than by subclassing)."""
    graph = exported_program.graph_module.graph
    if any(n.target is _call_delegate() for n in graph.nodes):
        raise NotImplementedError(
            "this program has delegated partitions, which this ETRecord writer cannot store yet; generate the "
            "ETRecord from the program lowered without a partitioner")
    artifact = tser.ExportedProgramSerializer().serialize(exported_program)
    by_name = {n.name: n for n in graph.nodes}
    for node in artifact.exported_program.graph_module.graph.nodes:
        if node.target.startswith("torch.ops."):
            node.target = EDGE_PREFIX + node.target[len("torch.ops."):]
        source = _source_node(node, by_name)
        if source is None:
            continue
        if "debug_handle" in source.meta:
            node.metadata["debug_handle"] = str(source.meta["debug_handle"])
        sources = source.meta.get("from_node")
        if sources:
            node.metadata["from_node"] = json.dumps([x.to_dict() for x in sources if hasattr(x, "to_dict")])
    return artifact


def _source_node(node, by_name: dict):
    """The fx node a serialized node came from: named after its (first) output."""
    for out in node.outputs:
        value = out.value
        name = getattr(value, "name", None) or getattr(value, "as_name", None)
        if isinstance(value, list) and value:
            name = getattr(value[0], "name", None)
        if name in by_name:
            return by_name[name]
    return None


def _layout_dict(program: ts.ExportedProgram) -> dict:
    """The program as the layout's JSON: newer fields dropped, its schema version, the dialect."""
    def strip(obj: Any) -> Any:
        if hasattr(obj, "__dataclass_fields__"):
            drop = _NEWER_FIELDS.get(type(obj).__name__, ())
            if isinstance(obj, ts._Union):
                return {obj.type: strip(obj.value)}
            return {k: strip(getattr(obj, k)) for k in obj.__dataclass_fields__ if k not in drop}
        if isinstance(obj, (list, tuple)):
            return [strip(x) for x in obj]
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items()}
        if hasattr(obj, "value") and isinstance(obj, __import__("enum").Enum):
            return obj.value
        return obj

    out = strip(program)
    out["schema_version"] = dict(LAYOUT_VERSION)
    out["dialect"] = "EDGE"
    return out


def serialize(exported_program: torch.export.ExportedProgram) -> SerializedArtifact:
    """The edge program as the ETRecord stores it: JSON bytes, state dict, constants, example inputs."""
    artifact = _serialize_program(exported_program)
    program = json.dumps(_layout_dict(artifact.exported_program)).encode("utf-8")
    return SerializedArtifact(program, artifact.state_dict, artifact.constants, artifact.example_inputs)


# ---- reading ---------------------------------------------------------------------------------


def _from_layout_dict(program: dict, state_dict: bytes, constants: bytes, example_inputs):
    import executorch.exir.dialects._ops  # noqa: F401  (registers dim_order_ops, which edge graphs use)

    program = json.loads(json.dumps(program))  # a private copy to edit
    program.pop("dialect", None)
    # The published writer names its EDGE verifier, which torch does not register: read as plain.
    if "verifiers" in program:
        program["verifiers"] = [v for v in program["verifiers"] if v != "EDGE"]
    program["schema_version"] = {"major": ts.SCHEMA_VERSION[0], "minor": ts.SCHEMA_VERSION[1]}
    handles = {}
    for node in program["graph_module"]["graph"]["nodes"]:
        if node["target"].startswith(EDGE_PREFIX):
            node["target"] = "torch.ops." + node["target"][len(EDGE_PREFIX):]
        if node["target"] == "executorch.exir.delegate.executorch_call_delegate":
            raise NotImplementedError(
                "this ETRecord holds a delegated program, which this reader cannot rebuild yet; record the "
                "program lowered without a partitioner")
        handle = (node.get("metadata") or {}).get("debug_handle")
        if handle:
            for out in node["outputs"]:
                name = (out.get("as_tensor") or {}).get("name")
                if name:
                    handles[name] = int(handle)
    serialized = tser._dict_to_dataclass(ts.ExportedProgram, program)
    ep = tser.ExportedProgramDeserializer().deserialize(serialized, state_dict, constants, example_inputs)
    for node in ep.graph.nodes:
        if node.name in handles:
            node.meta["debug_handle"] = handles[node.name]
    return ep


def deserialize(artifact: SerializedArtifact) -> torch.export.ExportedProgram:
    """The edge program an ETRecord stored (ours or the published writer's)."""
    program = json.loads(bytes(artifact.exported_program).decode("utf-8"))
    return _from_layout_dict(program, artifact.state_dict, artifact.constants, artifact.example_inputs)
