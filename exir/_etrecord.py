"""The ETRecord zip, upstream's layout: a marker entry, the exported and edge programs (serialized as
`executorch.exir.serde.serialize` writes them), the instruction -> debug handle and delegate maps as
JSON, and optional representative inputs and reference outputs (`torch.save`)."""

from __future__ import annotations

import io
import json
import os
import zipfile
from enum import Enum
from typing import Optional, Union

import torch
from torch.export import ExportedProgram

from executorch.exir.error import SerializeError
from executorch.exir.passes._graph import _copy_program


class ETRecordReservedFileNames(str, Enum):
    ETRECORD_IDENTIFIER = "ETRECORD_V0"
    EXPORTED_PROGRAM = "exported_program"
    EXPORT_GRAPH_ID = "export_graph_id"
    EDGE_DIALECT_EXPORTED_PROGRAM = "edge_dialect_exported_program"
    ET_DIALECT_GRAPH_MODULE = "et_dialect_graph_module"
    DEBUG_HANDLE_MAP_NAME = "debug_handle_map"
    DELEGATE_MAP_NAME = "delegate_map"
    INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME = "instruction_id_to_num_outs_map"
    REFERENCE_OUTPUTS = "reference_outputs"
    REPRESENTATIVE_INPUTS = "representative_inputs"

    def __str__(self) -> str:
        return self.value


_N = ETRecordReservedFileNames


class ETRecordError(ValueError):
    """An ETRecord that cannot be read or written."""


class ETRecord:
    """The ahead-of-time half of a profile: get it from `ExecutorchProgramManager.get_etrecord()`
    (export with `generate_etrecord=True`), or read one with `parse_etrecord`."""

    def __init__(self, exported_program: Optional[ExportedProgram] = None, export_graph_id: Optional[int] = None,
                 edge_dialect_program: Optional[Union[ExportedProgram, dict]] = None,
                 graph_map: Optional[dict] = None, _debug_handle_map: Optional[dict] = None,
                 _delegate_map: Optional[dict] = None, _instruction_id_to_num_outs_map: Optional[dict] = None,
                 _reference_outputs: Optional[dict] = None, _representative_inputs: Optional[list] = None):
        self.exported_program = exported_program
        self.export_graph_id = export_graph_id
        self.edge_dialect_program = edge_dialect_program
        self.graph_map = graph_map
        self._debug_handle_map = _debug_handle_map
        self._delegate_map = _delegate_map
        self._instruction_id_to_num_outs_map = _instruction_id_to_num_outs_map
        self._reference_outputs = _reference_outputs
        self._representative_inputs = _representative_inputs

    def update_representative_inputs(self, representative_inputs) -> None:
        """Inputs the Inspector runs the exported program on (`calculate_numeric_gap`): a list of
        input tuples, or a BundledProgram (its first forward test case)."""
        if hasattr(representative_inputs, "method_test_suites"):
            for suite in representative_inputs.method_test_suites:
                if suite.method_name == "forward" and suite.test_cases:
                    self._representative_inputs = list(suite.test_cases[0].inputs)
                    return
            raise ETRecordError("the bundled program has no forward test case to take representative inputs from")
        self._representative_inputs = list(representative_inputs)

    def update_reference_outputs(self, reference_outputs) -> None:
        """Expected outputs: {method: [outputs per run]}, a list (for "forward"), or a BundledProgram."""
        if hasattr(reference_outputs, "method_test_suites"):
            self._reference_outputs = {s.method_name: [list(c.expected_outputs) for c in s.test_cases]
                                       for s in reference_outputs.method_test_suites}
        elif isinstance(reference_outputs, list):
            self._reference_outputs = {"forward": reference_outputs}
        else:
            self._reference_outputs = dict(reference_outputs)

    def save(self, path: Union[str, os.PathLike, io.IOBase]) -> None:
        """Write the zip (atomically when `path` is a path: a failed save leaves no file)."""
        from executorch.exir._serialize._atomic import write_chunks

        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            z.writestr(str(_N.ETRECORD_IDENTIFIER), "")
            if self.exported_program is not None:
                _write_program(z, str(_N.EXPORTED_PROGRAM), self.exported_program)
            edge = self.edge_dialect_program
            for method, ep in ({"forward": edge} if isinstance(edge, ExportedProgram) else (edge or {})).items():
                _write_program(z, f"{_N.EDGE_DIALECT_EXPORTED_PROGRAM}/{method}", ep)
            for name, ep in (self.graph_map or {}).items():
                _write_program(z, name, ep)
            for name, value in ((_N.DEBUG_HANDLE_MAP_NAME, self._debug_handle_map),
                                (_N.DELEGATE_MAP_NAME, self._delegate_map),
                                (_N.INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME, self._instruction_id_to_num_outs_map)):
                if value is not None:
                    z.writestr(str(name), json.dumps(value))
            for name, value in ((_N.REFERENCE_OUTPUTS, self._reference_outputs),
                                (_N.REPRESENTATIVE_INPUTS, self._representative_inputs)):
                if value is not None:
                    data = io.BytesIO()
                    torch.save(value, data)
                    z.writestr(str(name), data.getvalue())
            if self.export_graph_id is not None:
                z.writestr(str(_N.EXPORT_GRAPH_ID), json.dumps(self.export_graph_id))
        write_chunks(path, [buf.getvalue()])


def _write_program(z: zipfile.ZipFile, base: str, ep: ExportedProgram) -> None:
    from executorch.exir.serde.serialize import serialize

    art = serialize(ep)
    z.writestr(base, art.exported_program)
    z.writestr(f"{base}_state_dict", art.state_dict)
    z.writestr(f"{base}_constants", art.constants)
    z.writestr(f"{base}_example_inputs", art.example_inputs)


def _read_program(z: zipfile.ZipFile, base: str) -> ExportedProgram:
    from executorch.exir.serde.serialize import SerializedArtifact, deserialize

    return deserialize(SerializedArtifact(z.read(base), z.read(f"{base}_state_dict"), z.read(f"{base}_constants"),
                                          z.read(f"{base}_example_inputs")), base)


def _jsonable(handles: dict) -> dict:
    return {method: {str(k): v for k, v in m.items()} for method, m in handles.items()}


class ETRecordBuilder:
    """What `generate_etrecord=True` keeps while the managers lower: the exported programs, the
    edge programs as `to_edge` made them (before transforms and delegation, as the published
    stack records them: a delegate's events name handles of nodes it took from that graph), then
    the executorch maps."""

    def __init__(self, exported: dict) -> None:
        self.exported = exported
        self.edge: Optional[dict] = None

    def record_edge(self, edge_programs: dict) -> None:
        # A snapshot: later passes and partitioners change the graphs.
        self.edge = {name: _copy_program(p) for name, p in edge_programs.items()}

    def _exported(self) -> tuple:
        ep = self.exported.get("forward") or next(iter(self.exported.values()))
        return ep, id(ep.graph)

    def _edge(self, edge_programs: dict) -> dict:
        return dict(self.edge) if self.edge is not None else {n: _copy_program(p) for n, p in edge_programs.items()}

    def for_edge(self, edge_programs: dict) -> ETRecord:
        ep, graph_id = self._exported()
        return ETRecord(ep, graph_id, self._edge(edge_programs))

    def for_executorch(self, edge_programs: dict, manager) -> ETRecord:
        ep, graph_id = self._exported()
        return ETRecord(ep, graph_id, self._edge(edge_programs), None, _jsonable(manager.debug_handle_map),
                        _jsonable(manager.delegate_map), {m: {} for m in manager.methods})


def generate_etrecord(et_record, edge_dialect_program, executorch_program, exported_program=None,
                      extra_recorded_export_modules: Optional[dict] = None) -> None:
    """Write an ETRecord from the managers of one export (`to_edge` result, `to_executorch` result
    or its BundledProgram) to `et_record`."""
    manager = executorch_program
    if hasattr(executorch_program, "method_test_suites"):  # a BundledProgram: the manager it wraps
        manager = getattr(executorch_program, "executorch_program", None)
    if not hasattr(manager, "debug_handle_map") or not hasattr(manager, "delegate_map"):
        raise ETRecordError(
            f"generate_etrecord takes the ExecutorchProgramManager that to_executorch() returned, not "
            f"{type(executorch_program).__name__}")
    edges = {name: edge_dialect_program.exported_program(name) for name in edge_dialect_program.methods}
    if isinstance(exported_program, dict):
        exported = exported_program
    elif exported_program is not None:
        exported = {"forward": exported_program}
    else:
        exported = None
    if exported is not None:
        record = ETRecordBuilder(exported).for_executorch(edges, manager)
    else:
        record = ETRecord(None, None, dict(edges), None, _jsonable(manager.debug_handle_map),
                          _jsonable(manager.delegate_map), {m: {} for m in manager.methods})
    if extra_recorded_export_modules:
        record.graph_map = {}
        for name, module in extra_recorded_export_modules.items():
            if any(str(r) in name for r in _N):
                raise ETRecordError(f"module name {name!r} uses a reserved ETRecord entry name; rename it")
            if isinstance(module, ExportedProgram):
                record.graph_map[f"{name}/forward"] = module
            else:
                for method in module.methods:
                    record.graph_map[f"{name}/{method}"] = module.exported_program(method)
    record.save(et_record)


def parse_etrecord(etrecord_path: Union[str, os.PathLike]) -> ETRecord:
    """Read an ETRecord (ours or the published writer's); a file that is not one raises ETRecordError."""
    try:
        z = zipfile.ZipFile(etrecord_path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ETRecordError(f"{os.fspath(etrecord_path)!r} is not an ETRecord ({e}); pass the file "
                            "ETRecord.save / generate_etrecord wrote") from None
    with z:
        names = set(z.namelist())
        if str(_N.ETRECORD_IDENTIFIER) not in names:
            raise ETRecordError(f"{os.fspath(etrecord_path)!r} has no {_N.ETRECORD_IDENTIFIER} entry, so it is not an "
                                "ETRecord; pass the file ETRecord.save / generate_etrecord wrote")
        try:
            return _read_entries(z)
        except SerializeError as e:
            raise ETRecordError(f"{os.fspath(etrecord_path)!r}: {e}") from None


def _read_entries(z: zipfile.ZipFile) -> ETRecord:
    """The record in the zip's entries; its torch.save parts load as tensors and containers only
    (`load_tensors`), so reading runs no code from the file."""
    names = set(z.namelist())
    record = ETRecord()
    edge_prefix = f"{_N.EDGE_DIALECT_EXPORTED_PROGRAM}/"
    suffixes = ("_state_dict", "_constants", "_example_inputs")
    edges, graph_map = {}, {}
    for name in sorted(names):
        if name in (str(_N.DEBUG_HANDLE_MAP_NAME), str(_N.DELEGATE_MAP_NAME),
                    str(_N.INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME)):
            value = json.loads(z.read(name))
            attr = {str(_N.DEBUG_HANDLE_MAP_NAME): "_debug_handle_map", str(_N.DELEGATE_MAP_NAME): "_delegate_map",
                    str(_N.INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME): "_instruction_id_to_num_outs_map"}[name]
            setattr(record, attr, value)
        elif name in (str(_N.REFERENCE_OUTPUTS), str(_N.REPRESENTATIVE_INPUTS)):
            from executorch.exir.serde.serialize import load_tensors

            value = load_tensors(z.read(name), f"entry {name!r}", dict if name == str(_N.REFERENCE_OUTPUTS) else list)
            setattr(record, "_reference_outputs" if name == str(_N.REFERENCE_OUTPUTS) else "_representative_inputs",
                    value)
        elif name == str(_N.EXPORT_GRAPH_ID):
            record.export_graph_id = json.loads(z.read(name))
        elif name == str(_N.EXPORTED_PROGRAM):
            record.exported_program = _read_program(z, name)
        elif name == str(_N.EDGE_DIALECT_EXPORTED_PROGRAM):
            edges["forward"] = _read_program(z, name)
        elif name.startswith(edge_prefix) and not name.endswith(suffixes):
            edges[name[len(edge_prefix):]] = _read_program(z, name)
        elif name != str(_N.ETRECORD_IDENTIFIER) and not name.endswith(suffixes) and f"{name}_state_dict" in names:
            graph_map[name] = _read_program(z, name)
    record.edge_dialect_program = edges.get("forward") if list(edges) == ["forward"] else edges
    record.graph_map = graph_map or None
    return record
