"""TestDeviceBackend.preprocess: packs the partition's engine into a blob, as Torch-TensorRT's
TensorRTBackend packs its engine with the binding metadata.

Blob: b"TDB1", u8 device index, u8 number of inputs, u8 number of outputs, u8 zero, then per output the
engine output it is (u8 each), then the engine bytes.
"""

from __future__ import annotations

import operator
import struct

import torch
from torch.export import ExportedProgram

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec

from device_backend.partitioner import is_engine

MAGIC = b"TDB1"


def _engine_bytes(ep: ExportedProgram, node: torch.fx.Node) -> bytes:
    slot = node.args[1]
    target = next(s.target for s in ep.graph_signature.input_specs if getattr(s.arg, "name", None) == slot.name)
    data = ep.state_dict[target] if target in ep.state_dict else ep.constants[target]
    return data.contiguous().numpy().tobytes()


def _device_index(device: str) -> int:
    _, _, index = device.partition(":")
    return int(index or 0)


class TestDeviceBackend(BackendDetails):
    __test__ = False  # not a pytest class

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        engines = [n for n in edge_program.graph.nodes if is_engine(n)]
        if len(engines) != 1:
            raise RuntimeError(f"TestDeviceBackend expects one engine node per partition, found {len(engines)}")
        node = engines[0]
        results = next(n for n in edge_program.graph.nodes if n.op == "output").args[0]
        picks = [r.args[1] for r in results]
        if not all(r.target is operator.getitem and r.args[0] is node for r in results):
            raise RuntimeError("TestDeviceBackend: every partition output must be an output of its engine")
        header = MAGIC + struct.pack("<BBBB", _device_index(str(node.args[2])), len(node.args[0]), len(picks), 0)
        return PreprocessResult(processed_bytes=header + bytes(picks) + _engine_bytes(edge_program, node))


def parse_blob(blob: bytes) -> tuple[int, int, list[int], bytes]:
    """(device index, number of inputs, the engine output of each delegate output, engine bytes)."""
    blob = bytes(blob)
    if blob[:4] != MAGIC or len(blob) < 8:
        raise ValueError("TestDeviceBackend: the payload has no TDB1 header")
    index, n_inputs, n_outputs, _ = struct.unpack_from("<BBBB", blob, 4)
    if len(blob) < 8 + n_outputs:
        raise ValueError("TestDeviceBackend: the payload ends inside its output list")
    return index, n_inputs, list(blob[8:8 + n_outputs]), blob[8 + n_outputs:]
