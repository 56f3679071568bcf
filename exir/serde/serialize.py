"""`serialize(ep) -> SerializedArtifact` and `deserialize(artifact) -> ExportedProgram` for edge programs.

torch.export's serializer with what the published ExecuTorch layout adds: operators named as edge
ops (`executorch.exir.dialects.edge.ops.aten.add.Tensor`), each node's `debug_handle` and
`from_node` in its metadata, and the program written at the
export-schema version that layout uses (5.4: fields torch added later are left out), so the
published ETRecord reader and ours read the same files. A delegate call is written as that layout
writes it: target `torch.ops.higher_order.executorch_call_delegate`, its lowered module as a JSON
string argument (backend id, payload, compile specs, named data, and its own edge program, nested the
same way), then `delegate_arg_<i>` per input.

Reading never runs code from the file: every `torch.save` part (state dicts, constants, example
inputs, a delegate's own) is loaded with `weights_only=True` here, and anything that load refuses
is a SerializeError naming the part. (torch's deserializer, handed those bytes, would retry a
refused load with full unpickling.)
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import io
import json
import pickle
import re
from typing import Any

import torch
from torch._export.serde import schema as ts
from torch._export.serde import serialize as tser
from torch._export.serde.serialize import SerializedArtifact

from executorch.exir.dialects.edge._ops import torch_targets
from executorch.exir.error import SerializeError

__all__ = ["SerializedArtifact", "deserialize", "load_tensors", "serialize"]

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


CALL_DELEGATE = "torch.ops.higher_order.executorch_call_delegate"  # a higher-order op's qualified name
# torch's serializer knows only registered operators, so while it runs each delegate call stands in
# as one of these (inputs as one Tensor[]; a tuple or a single tensor out), rewritten afterwards.
_STUB_NS = "executorch_etrecord"
_STUBS = {"call_delegate": "call_delegate(Tensor[] args) -> Tensor[]",
          "call_delegate_single": "call_delegate_single(Tensor[] args) -> Tensor"}
_stub_library = None


def _call_delegate():
    from executorch.exir.delegate import executorch_call_delegate

    return executorch_call_delegate


def _stub(name: str):
    global _stub_library
    if _stub_library is None:
        _stub_library = torch.library.Library(_STUB_NS, "FRAGMENT")
        for schema in _STUBS.values():
            _stub_library.define(schema)
    return getattr(getattr(torch.ops, _STUB_NS), name).default


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _plain(obj: Any) -> Any:
    """A dataclass (named data, tensor layouts) as JSON values: enums by value, bytes in base64."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return _b64(obj)
    return obj


def _lowered_module_json(lowered) -> str:
    """The lowered module as the layout's LoweredBackendModule JSON."""
    inner = _serialize_program(lowered.original_module)
    named = lowered.named_data_store_output
    return json.dumps({
        "backend_id": lowered.backend_id,
        "processed_bytes": _b64(lowered.processed_bytes),
        "compile_specs": [{"key": cs.key, "value": _b64(cs.value)} for cs in lowered.compile_specs],
        "original_module": _layout_dict(inner.exported_program),
        "original_state_dict": _b64(inner.state_dict),
        "original_constants": _b64(inner.constants),
        "named_data_store": json.dumps(_plain(named)) if named else None,
    })


def _torch_serialize(exported_program: torch.export.ExportedProgram):
    """torch's serialization, each delegate call standing in as a stub op; returns the artifact and,
    in graph order, each call's (fx node, lowered module attribute name, lowered module JSON)."""
    graph = exported_program.graph_module.graph
    calls = [n for n in graph.nodes if n.target is _call_delegate()]
    saved = [(n, n.target, n.args) for n in calls]
    delegates = []
    for n in calls:
        holder = n.args[0]
        if holder.op != "get_attr" or any(not isinstance(a, torch.fx.Node) for a in n.args[1:]):
            raise NotImplementedError(f"delegate call {n.name} takes non-tensor arguments, which the ETRecord "
                                      "layout cannot store; lower without a partitioner to record it")
        lowered = getattr(exported_program.graph_module, holder.target)
        delegates.append((n, holder.target, _lowered_module_json(lowered)))
    try:
        for n in calls:
            single = isinstance(n.meta.get("val"), torch.Tensor)
            n.target = _stub("call_delegate_single" if single else "call_delegate")
            n.args = (list(n.args[1:]),)
        with torch_targets(exported_program.graph_module):  # torch's serializer knows torch operators
            artifact = tser.ExportedProgramSerializer().serialize(exported_program)
    finally:
        for n, target, args in saved:
            n.target, n.args = target, args
    return artifact, delegates


def _write_delegate_call(node, holder: str, lowered_json: str, fx_node) -> None:
    """A stub node rewritten as the layout's delegate call."""
    args = node.inputs[0].arg.value  # the stub's one Tensor[] argument
    node.target = CALL_DELEGATE
    node.inputs = [ts.NamedArgument(name=holder, arg=ts.Argument.create(as_string=lowered_json))] + [
        ts.NamedArgument(name=f"delegate_arg_{i}", arg=ts.Argument.create(as_tensor=a)) for i, a in enumerate(args)]
    out = node.outputs
    values = fx_node.meta.get("val")
    if len(out) == 1 and out[0].type == "as_tensors" and isinstance(values, (list, tuple)) and len(values) > 1:
        node.outputs = [ts.Argument.create(as_tensor=t) for t in out[0].value]


def _serialize_program(exported_program: torch.export.ExportedProgram):
    """torch's serialization, then the layout's additions node by node (torch's serializer
    classes are final, so the additions are made on its output rather than by subclassing)."""
    graph = exported_program.graph_module.graph
    artifact, delegates = _torch_serialize(exported_program)
    by_name = {n.name: n for n in graph.nodes}
    stubs = iter(delegates)
    for node in artifact.exported_program.graph_module.graph.nodes:
        if node.target.startswith(f"torch.ops.{_STUB_NS}."):
            fx_node, holder, lowered_json = next(stubs)
            _write_delegate_call(node, holder, lowered_json, fx_node)
            if "debug_handle" in fx_node.meta:
                node.metadata["debug_handle"] = str(fx_node.meta["debug_handle"])
            continue
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


def _refusal(e: pickle.UnpicklingError) -> str:
    """The reason in torch's several-paragraph weights_only message (`Unsupported global: ...`)."""
    found = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\n|$)", str(e))
    return found.group(1).strip() if found else str(e).strip().splitlines()[0]


def load_tensors(data, part: str, container: type):
    """One `torch.save` part (a `container`) as tensors and plain containers, never objects; torch's
    deserializer takes the loaded value as it is. Empty bytes are an empty part, as torch writes them."""
    if data is None:
        return None
    if len(data) == 0:
        return container()
    try:
        value = torch.load(io.BytesIO(bytes(data)), weights_only=True)
    except pickle.UnpicklingError as e:
        raise SerializeError(f"{part} holds a pickled object that weights_only loading refuses ({_refusal(e)}); "
                             "ETRecords are loaded without running code, so re-generate it (generate_etrecord or "
                             "ETRecord.save) from an export you trust") from None
    except Exception as e:  # torch.load raises RuntimeError, EOFError, ... for bytes that are not a torch.save
        first = (str(e).strip().splitlines() or [""])[0]
        raise SerializeError(f"{part} is not torch.save data ({type(e).__name__}: {first}); the ETRecord is "
                             "corrupt, re-generate it (generate_etrecord or ETRecord.save)") from None
    if not isinstance(value, container):
        raise SerializeError(f"{part} holds a {type(value).__name__}, not the {container.__name__} torch.save "
                             "wrote there; the ETRecord is corrupt, re-generate it (generate_etrecord or "
                             "ETRecord.save)")
    return value


def _from_layout_dict(program: dict, state_dict: dict, constants: dict, example_inputs, where: str):
    """The program of one layout dict; `where` names it in errors (the entry, or a delegate in it)."""
    import executorch.exir.dialects._ops  # noqa: F401  (registers dim_order_ops, which edge graphs use)

    program = json.loads(json.dumps(program))  # a private copy to edit
    program.pop("dialect", None)
    # The published writer names its EDGE verifier, which torch does not register: read as plain.
    if "verifiers" in program:
        program["verifiers"] = [v for v in program["verifiers"] if v != "EDGE"]
    program["schema_version"] = {"major": ts.SCHEMA_VERSION[0], "minor": ts.SCHEMA_VERSION[1]}
    handles = {}
    delegates = []  # per delegate call, in graph order: (holder name, lowered module JSON, debug handle)
    for node in program["graph_module"]["graph"]["nodes"]:
        if node["target"].startswith(EDGE_PREFIX):
            node["target"] = "torch.ops." + node["target"][len(EDGE_PREFIX):]
        if node["target"] == CALL_DELEGATE:
            handle = (node.get("metadata") or {}).get("debug_handle")
            delegates.append((node["inputs"][0]["name"], node["inputs"][0]["arg"]["as_string"],
                              int(handle) if handle else None))
            _read_delegate_call(node)
            continue
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
    if delegates:
        _restore_delegate_calls(ep, delegates, where)
    return ep


def _read_delegate_call(node: dict) -> None:
    """The layout's delegate call (JSON) as a stub call torch's deserializer can read."""
    args = [a["arg"]["as_tensor"] for a in node["inputs"][1:]]
    outputs = node["outputs"]
    single = len(outputs) == 1 and "as_tensor" in outputs[0]
    node["target"] = f"torch.ops.{_STUB_NS}.{'call_delegate_single' if single else 'call_delegate'}.default"
    node["inputs"] = [{"name": "args", "arg": {"as_tensors": args}, "kind": 1}]
    if len(outputs) > 1:
        node["outputs"] = [{"as_tensors": [o["as_tensor"] for o in outputs]}]
    _stub("call_delegate")  # registers the stubs


def _lowered_module(data: dict, where: str):
    from executorch.exir._serialize._named_data_store import DataEntry, NamedDataStoreOutput
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    parts = {key: load_tensors(base64.b64decode(data[key]), f"the {key} of {where}", dict)
             for key in ("original_state_dict", "original_constants")}
    original = _from_layout_dict(data["original_module"], parts["original_state_dict"],
                                 parts["original_constants"], None, where)
    named = None
    if data.get("named_data_store"):
        raw = json.loads(data["named_data_store"])
        entries = lambda d: {k: DataEntry(**v) for k, v in d.items()}  # noqa: E731
        named = NamedDataStoreOutput([base64.b64decode(b) for b in raw.get("buffers", [])],
                                     entries(raw.get("pte_data", {})),
                                     {f: entries(d) for f, d in raw.get("external_data", {}).items()})
    specs = [CompileSpec(cs["key"], base64.b64decode(cs["value"])) for cs in data["compile_specs"]]
    return LoweredBackendModule(original, data["backend_id"], base64.b64decode(data["processed_bytes"]), specs,
                                named)


def _restore_delegate_calls(ep, delegates: list, where: str) -> None:
    """Each stub call back to `executorch_call_delegate(lowered_module, *args)`."""
    gm = ep.graph_module
    stubs = [n for n in gm.graph.nodes if str(n.target).startswith(f"{_STUB_NS}.")]
    for node, (holder, lowered_json, handle) in zip(stubs, delegates):
        gm.add_submodule(holder, _lowered_module(json.loads(lowered_json), f"delegate {holder!r} in {where}"))
        with gm.graph.inserting_before(node):
            attr = gm.graph.get_attr(holder)
        node.target = _call_delegate()
        node.args = (attr, *node.args[0])
        if handle is not None:
            node.meta["debug_handle"] = handle
    gm.recompile()


def deserialize(artifact: SerializedArtifact, entry: str = "program") -> torch.export.ExportedProgram:
    """The edge program an ETRecord stored (ours or the published writer's) in `entry` and the
    `<entry>_state_dict`, `_constants` and `_example_inputs` entries beside it, which errors name."""
    program = json.loads(bytes(artifact.exported_program).decode("utf-8"))
    state_dict, constants, example_inputs = (
        load_tensors(getattr(artifact, part), f"entry '{entry}_{part}'", container)
        for part, container in (("state_dict", dict), ("constants", dict), ("example_inputs", tuple)))
    return _from_layout_dict(program, state_dict, constants, example_inputs or None, f"entry {entry!r}")
