"""Core ML's backend from the published wheel, laid beside our package (issue 35): the exir surface it imports, and
its flow writing the published stack's payloads, compared as Core ML packages (their identifiers are random)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import published_env
from vendor_backends import coreml_backends  # noqa: F401 (fixture)

from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir._serialize import read_program

ROOT = Path(__file__).resolve().parents[1]
EXPORT = Path(__file__).with_name("vendor_lower_export.py")
MODELS = ("conv_linear", "mv2")
COREMLTOOLS = "coremltools==9.0"  # as the published wheel requires it (Linux x86_64, Python < 3.14)


# --- the surface Core ML imports, and what its payload shows of to_edge -------------------------------------

def test_dim_order_utils_map_dim_orders_and_memory_formats():
    from executorch.exir.dim_order_utils import (get_dim_order, get_memory_format, is_channel_last_dim_order,
                                                 is_contiguous_dim_order)

    assert get_memory_format(None) == torch.preserve_format
    assert get_memory_format([0, 1, 2]) == torch.contiguous_format and get_memory_format([]) == torch.contiguous_format
    assert get_memory_format([0, 2, 3, 1]) == torch.channels_last
    for order in ([1, 0], [0, 2, 3, 4, 1]):
        with pytest.raises(AssertionError, match=re.escape(str(order))):
            get_memory_format(order)
    assert get_dim_order(None, 4) is None and get_dim_order(torch.preserve_format, 4) is None
    assert get_dim_order(torch.contiguous_format, 3) == [0, 1, 2]
    assert get_dim_order(torch.channels_last, 4) == [0, 2, 3, 1]
    with pytest.raises(AssertionError):
        get_dim_order(torch.channels_last, 5)
    x = torch.randn(2, 3, 4, 5)
    assert is_contiguous_dim_order(x) and not is_channel_last_dim_order(x)
    y = x.to(memory_format=torch.channels_last)
    assert is_channel_last_dim_order(y) and not is_contiguous_dim_order(y)
    assert not is_channel_last_dim_order(torch.randn(2, 3))


class _ConvBNLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).relu_().mean(dim=(2, 3)))


def test_a_partitioner_keeps_whole_only_ops_of_the_functional_graph():
    """The published stack asks a partitioner which ops to keep whole on the functional program
    (run_decompositions({})): batch_norm and in-place ops are not in it, so asking for them keeps nothing."""
    from executorch.exir.backend.partitioner import Partitioner, PartitionResult

    aten = torch.ops.aten
    seen = []

    class KeepAll(Partitioner):
        def ops_to_not_decompose(self, ep):
            return [n.target for n in ep.graph.nodes if n.op == "call_function"], None

        def partition(self, ep):
            seen.extend(str(getattr(n.target, "_op", n.target)) for n in ep.graph.nodes if n.op == "call_function")
            return PartitionResult(tagged_exported_program=ep, partition_tags={})

    ep = torch.export.export(_ConvBNLinear().eval(), (torch.randn(1, 3, 6, 6),))
    assert {aten.batch_norm.default, aten.relu_.default} <= {n.target for n in ep.graph.nodes}
    to_edge_transform_and_lower(ep, partitioner=[KeepAll()])
    assert "aten.conv2d.default" in seen and "aten.linear.default" in seen  # kept whole, as asked
    assert "aten._native_batch_norm_legit_no_training.default" in seen and "aten.relu.default" in seen
    assert "aten.batch_norm.default" not in seen and "aten.relu_.default" not in seen


def test_a_decompositions_pieces_share_a_debug_handle():
    edge = to_edge(torch.export.export(_ConvBNLinear().eval(), (torch.randn(1, 3, 6, 6),))).exported_program()
    handles = [(n.name, n.meta["debug_handle"]) for n in edge.graph.nodes if n.op == "call_function"]
    # As the published to_edge numbers them: one per node of the exported program, in order.
    assert handles == [("aten_convolution_default", 1), ("aten__native_batch_norm_legit_no_training_default", 2),
                       ("getitem", 2), ("aten_relu_default", 3), ("aten_mean_dim", 4),
                       ("aten_permute_copy_default", 5), ("aten_addmm_default", 5)]


# --- the payload: a Core ML package folder, flattened -------------------------------------------------------

def _payloads(pte: Path) -> list[bytes]:
    program = read_program(pte.read_bytes())
    out = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            assert delegate.id == "CoreMLBackend"
            where = delegate.processed
            out.append(bytes(program.segment_data[where.index] if where.location == 1
                             else program.backend_delegate_data[where.index].data))
    return out


def _files(payload: bytes) -> dict[str, bytes]:
    """The files of a flattened Core ML payload, by path: the files' bytes one after the other, then a JSON index
    written backwards ({"nodes": [...]}: a file's data region, a folder's children by node index)."""
    index, length = json.JSONDecoder().raw_decode(payload[::-1].decode("utf-8", "replace"))
    nodes = index["nodes"]
    data = payload[:len(payload) - length]
    children = {i for node in nodes for i in node["children"].values()}
    (root,) = [i for i in range(len(nodes)) if i not in children]
    out = {}

    def walk(i: int, prefix: str) -> None:
        node = nodes[i]
        path = prefix + node["name"]
        if node["kind"] == 1:
            for child in node["children"].values():
                walk(child, path + "/")
        else:
            region = node["dataRegion"]
            assert region["offset"] + region["size"] <= len(data)
            out[path] = data[region["offset"]:region["offset"] + region["size"]]

    walk(root, "")
    return out


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_MODEL = "lowered_module/model.mlpackage/Data/com.apple.CoreML/model.mlmodel"


def _normalized(files: dict[str, bytes]) -> dict:
    """What a Core ML payload holds, without what is random in it: the package's identifier (a UUID4 in
    metadata.json), the manifest's item identifiers (UUID4s), and the byte order of the model specification's
    protobuf maps (compared decoded, with the day it was converted)."""
    from coremltools.proto import Model_pb2

    out = dict(files)
    metadata = json.loads(out.pop("lowered_module/metadata.json"))
    assert re.fullmatch("executorch_" + _UUID, metadata.pop("identifier"))
    out["metadata"] = metadata
    manifest = json.loads(out.pop("lowered_module/model.mlpackage/Manifest.json"))
    items = manifest.pop("itemInfoEntries")
    assert all(re.fullmatch(_UUID, key) for key in items)
    root = items[manifest.pop("rootModelIdentifier")]
    out["manifest"] = (manifest, root, sorted(items.values(), key=lambda item: item["path"]))
    spec = Model_pb2.Model()
    spec.ParseFromString(out.pop(_MODEL))
    del spec.description.metadata.userDefined["com.github.apple.coremltools.conversion_date"]
    out["spec"] = spec
    return out


def test_the_payload_reader_finds_what_the_published_extension_unflattens(coreml_backends, tmp_path):  # noqa: F811
    """Our reader of the flattened folder agrees with Core ML's own (its compiled extension, in its folder)."""
    try:
        from executorch.backends.apple.coreml import executorchcoreml
    except ImportError as e:
        pytest.skip(f"Core ML's compiled extension does not load in this Python: {e}")
    folder = tmp_path / "payload"
    folder.mkdir()
    (folder / "a.json").write_bytes(b'{"x": 1}')
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "w.bin").write_bytes(bytes(range(256)) * 3)
    (folder / "sub" / "deeper" / "z").write_bytes(b"z")  # (the extension crashes on an empty file)
    payload = executorchcoreml.flatten_directory_contents(str(folder))
    assert _files(payload) == {f"payload/{p.relative_to(folder).as_posix()}": p.read_bytes()
                               for p in folder.rglob("*") if p.is_file()}
    back = tmp_path / "back"
    back.mkdir()
    assert executorchcoreml.unflatten_directory_contents(payload, str(back))
    assert {p.relative_to(back).as_posix(): p.read_bytes() for p in back.rglob("*") if p.is_file()} == _files(payload)


class CoreMLFlows:
    """The export script run once per session on each side, at the same time: on this package (the source
    tree, or the minimal wheel ET_MINIMAL_WHEEL names, installed apart) with Core ML's folder beside it, and on
    the published stack (ET_REFERENCE_PYTHON, with coremltools)."""

    def __init__(self, backends: Path, root: Path):
        reference = os.environ["ET_REFERENCE_PYTHON"]
        probe = subprocess.run([reference, "-c", "import coremltools; print(coremltools.__version__)"],
                               capture_output=True, text=True, env=published_env(), timeout=300)
        if probe.returncode != 0 or probe.stdout.split()[-1:] != ["9.0"]:
            pytest.skip(f"the reference environment lacks {COREMLTOOLS}, which the published wheel requires on Linux "
                        f"x86_64: {reference} -m pip install {COREMLTOOLS}")
        package = root / "pkg"
        wheel = os.environ.get("ET_MINIMAL_WHEEL")
        if wheel:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(package),
                            wheel], check=True)
        else:
            package.mkdir()
            (package / "executorch").symlink_to(ROOT)
        self.ours, self.theirs = root / "ours", root / "theirs"
        self.ours.mkdir()
        self.theirs.mkdir()
        pipes = {"cwd": root, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        procs = [subprocess.Popen([reference, str(EXPORT), str(self.theirs), "coreml", *MODELS],
                                  env=published_env(), **pipes),
                 subprocess.Popen([sys.executable, str(EXPORT), str(self.ours), "coreml", *MODELS,
                                   "--vendor", str(backends)],
                                  env={**os.environ, "PYTHONPATH": str(package)}, **pipes)]
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, err[-3000:]
        assert Path((self.ours / "executorch_from.txt").read_text()) == (package / "executorch").resolve()
        assert Path((self.theirs / "executorch_from.txt").read_text()) != ROOT


@pytest.fixture(scope="module")
def coreml_flows(coreml_backends, tmp_path_factory) -> CoreMLFlows:  # noqa: F811  (pytest fixture)
    if importlib.util.find_spec("coremltools") is None:
        pytest.skip(f"Core ML's converter is not installed here: pip install {COREMLTOOLS}")
    return CoreMLFlows(coreml_backends, tmp_path_factory.mktemp("coreml"))


def test_coreml_package_imports_beside_ours(coreml_backends):  # noqa: F811  (pytest fixture)
    if importlib.util.find_spec("coremltools") is None:
        pytest.skip(f"Core ML's converter is not installed here: pip install {COREMLTOOLS}")
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    assert sys.modules[CoreMLPartitioner.__module__].__file__.startswith(str(coreml_backends))


def _differences(files: dict[str, bytes], published: dict[str, bytes]) -> list[str]:
    """What differs between two payloads' contents once the random parts are set aside: the weights, the debug
    handles of each MIL operation and the delegate mapping byte for byte, the rest decoded."""
    if sorted(files) != sorted(published):
        return sorted(set(files) ^ set(published))
    a, b = _normalized(files), _normalized(published)
    return sorted(k for k in a if a[k] != b[k])


@pytest.mark.parametrize("model", MODELS)
def test_coreml_flow_writes_the_published_stacks_program(coreml_flows, model):
    ours, theirs = coreml_flows.ours / f"{model}.pte", coreml_flows.theirs / f"{model}.pte"
    (mine,), (published,) = _payloads(ours), _payloads(theirs)  # the whole model in one Core ML delegate
    assert _differences(_files(mine), _files(published)) == []
    assert len(mine) == len(published)
    # The rest of the program (the instructions calling the delegate, the other segments): identical.
    a, b = read_program(ours.read_bytes()), read_program(theirs.read_bytes())
    assert [bytes(s) for s in a.segment_data if bytes(s) != mine] == [bytes(s) for s in b.segment_data
                                                                     if bytes(s) != published]
    a.segment_data, b.segment_data = [], []
    assert a == b


def test_the_comparison_sees_a_changed_weight_handle_or_operation_and_not_a_new_identifier(coreml_flows):
    from coremltools.proto import Model_pb2

    files = _files(_payloads(coreml_flows.ours / "conv_linear.pte")[0])
    weights = "lowered_module/model.mlpackage/Data/com.apple.CoreML/weights/weight.bin"
    changed = dict(files, **{weights: files[weights][:-1] + bytes([files[weights][-1] ^ 1])})
    assert _differences(changed, files) == [weights]
    debug = json.loads(files["lowered_module/debug_info.json"])
    symbol = sorted(debug["debugSymbolToHandles"])[0]  # a MIL operation's debug handles, one more
    debug["debugSymbolToHandles"][symbol] = [h + 1 for h in debug["debugSymbolToHandles"][symbol]]
    moved = dict(files, **{"lowered_module/debug_info.json": json.dumps(debug).encode()})
    assert _differences(moved, files) == ["lowered_module/debug_info.json"]
    spec = Model_pb2.Model()
    spec.ParseFromString(files[_MODEL])
    block = spec.mlProgram.functions["main"].block_specializations
    operation = block[next(iter(block))].operations[-1]
    operation.type = "identity" if operation.type != "identity" else "cast"
    assert _differences(dict(files, **{_MODEL: spec.SerializeToString()}), files) == ["spec"]
    # What is random from one export to the next is not a difference: another package identifier.
    metadata = json.loads(files["lowered_module/metadata.json"])
    metadata["identifier"] = "executorch_00000000-0000-4000-8000-000000000000"
    renamed = dict(files, **{"lowered_module/metadata.json": json.dumps(metadata).encode()})
    assert renamed != files and _differences(renamed, files) == []
