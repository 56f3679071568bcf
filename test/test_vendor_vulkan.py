"""Vulkan's backend from the published wheel, laid beside our package (issue 35): the exir surface it imports, and
its flow writing the published stack's bytes."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Union

import flatbuffers
import pytest
import torch

from conftest import published_env
from vendor_backends import vulkan_backends  # noqa: F401 (fixture)

from executorch.exir import to_edge
from executorch.exir._serialize import read_program

ROOT = Path(__file__).resolve().parents[1]
EXPORT = Path(__file__).with_name("vendor_vulkan_export.py")
MODELS = ("conv_linear", "mv2")


# --- the surface Vulkan imports, checked without the published stack ----------------------------------------

@dataclasses.dataclass
class _Leaf:
    n: int


@dataclasses.dataclass
class _Word:
    text: str


class _Kind(enum.IntEnum):
    A = 0
    B = 7


@dataclasses.dataclass
class _Root:
    kind: _Kind
    items: List[int]
    value: "Union[_Leaf, _Word]"
    blob: bytes = b""


_SCHEMA = """
enum Kind : ubyte { A = 0, B = 7 }
table Leaf { n: int; }
table Word { text: string; }
union Value { Leaf, Word }
table Root { kind: Kind; items: [int]; value: Value; blob: [ubyte]; }
root_type Root;
"""


def test_dataclasses_go_through_flatc_and_back(tmp_path):
    from executorch.exir._serialize._dataclass import _DataclassEncoder, _json_to_dataclass
    from executorch.exir._serialize._flatbuffer import _flatc_compile, _flatc_decompile, _flatc_path

    try:
        _flatc_path()
    except Exception as e:  # noqa: BLE001
        pytest.skip(str(e))
    (tmp_path / "s.fbs").write_text(_SCHEMA)
    root = _Root(_Kind.B, [1, -2, 3], _Word("hi"), b"\x00\xff")
    text = json.dumps(root, cls=_DataclassEncoder)
    # Fields in declaration order, a union followed by its tag (as flatc reads it), bytes as numbers.
    assert text == '{"kind": 7, "items": [1, -2, 3], "value": {"text": "hi"}, "value_type": "_Word", "blob": [0, 255]}'
    (tmp_path / "d.json").write_text(text.replace('"_Word"', '"Word"'))
    _flatc_compile(str(tmp_path), str(tmp_path / "s.fbs"), str(tmp_path / "d.json"))
    binary = (tmp_path / "d.bin").read_bytes()
    (tmp_path / "d.json").unlink()
    _flatc_decompile(str(tmp_path), str(tmp_path / "s.fbs"), str(tmp_path / "d.bin"), ["--raw-binary"])
    decoded = json.loads((tmp_path / "d.json").read_text().replace('"Word"', '"_Word"'))
    assert _json_to_dataclass(decoded, _Root) == root
    assert len(binary) > 20


def test_delegate_mapping_builder_numbers_entries_or_takes_given_ones():
    from executorch.exir.backend.utils import DelegateMappingBuilder

    generated = DelegateMappingBuilder(generated_identifiers=True)
    assert generated.insert_delegate_mapping_entry(handles=[3, None, 1]) == 0
    assert generated.insert_delegate_mapping_entry(handles=2) == 1
    assert generated.get_delegate_mapping() == {0: (1, 3), 1: (2,)}
    with pytest.raises(ValueError, match="takes no identifier"):
        generated.insert_delegate_mapping_entry(handles=[4], identifier="x")
    given = DelegateMappingBuilder()
    assert given.insert_delegate_mapping_entry(handles=[5], identifier="conv") == "conv"
    for kwargs, message in (({"handles": [6]}, "takes an identifier"), ({"handles": [6], "identifier": "conv"},
                                                                        "already inserted"),
                            ({"handles": [None], "identifier": "y"}, "no debug handle")):
        with pytest.raises(ValueError, match=message):
            given.insert_delegate_mapping_entry(**kwargs)


def test_format_target_name_drops_the_namespace():
    from executorch.exir.backend.canonical_partitioners.config_partitioner import format_target_name

    assert format_target_name("aten.convolution.default") == "convolution.default"
    assert format_target_name("linear.default") == "linear.default"


def test_quantized_embeddings_dequantize_rows_or_groups_then_look_up():
    from executorch.exir.dialects._ops import ops as exir_ops

    # Vulkan names these at import time; looking the namespace up defines them.
    assert exir_ops.edge.quantized_decomposed.embedding_4bit.dtype is not None
    qd = torch.ops.quantized_decomposed
    torch.manual_seed(0)
    values = torch.randint(-8, 8, (5, 8), dtype=torch.int8)
    scales, zeros = torch.rand(5, 2) + 0.5, torch.randint(-2, 3, (5, 2)).float()
    indices = torch.tensor([[4, 0], [2, 2]])
    expected = ((values.float().view(5, 2, 4) - zeros[..., None]) * scales[..., None]).view(5, 8)[indices]
    torch.testing.assert_close(qd.embedding_byte(values, scales, zeros, -8, 7, indices), expected)
    nibbles = (values + 8).to(torch.uint8)
    packed = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]  # the first of two values in the high bits
    torch.testing.assert_close(qd.embedding_4bit(packed, scales, zeros, -8, 7, indices), expected)
    two = torch.randint(-2, 2, (5, 8), dtype=torch.int8)
    crumbs = (two + 2).to(torch.uint8).view(5, 2, 4)
    packed2 = crumbs[..., 0] | crumbs[..., 1] << 2 | crumbs[..., 2] << 4 | crumbs[..., 3] << 6
    row_scales = torch.rand(5) + 0.5
    half = qd.embedding_2bit.dtype(packed2, row_scales, None, -2, 1, indices, dtype=torch.float16)
    torch.testing.assert_close(half, (two.float() * row_scales[:, None]).half()[indices])
    out = torch.empty(0)
    qd.embedding_byte.out(values, scales, zeros, -8, 7, indices, out=out)
    torch.testing.assert_close(out, expected)


class _Adds(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x + 1.0) + 1.0


def test_identical_delegate_payloads_are_stored_once():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

    class SamePayload(BackendDetails):
        @staticmethod
        def preprocess(edge_program, compile_specs):
            return PreprocessResult(processed_bytes=b"one payload for every add")

    class EachAdd(Partitioner):
        def partition(self, ep):
            tags = {}
            for node in ep.graph.nodes:
                if node.op == "call_function" and "add" in str(node.target):
                    tag = node.meta["delegation_tag"] = f"add{len(tags)}"
                    tags[tag] = DelegationSpec("SamePayload", [])
            return PartitionResult(tagged_exported_program=ep, partition_tags=tags)

    edge = to_edge(torch.export.export(_Adds(), (torch.randn(3),)))
    for extract in (True, False):
        program = edge.to_backend(EachAdd()).to_executorch(
            ExecutorchBackendConfig(extract_delegate_segments=extract)).executorch_program
        first, second = program.execution_plan[0].delegates
        assert first.processed == second.processed
        assert len(program.backend_delegate_data) == (0 if extract else 1)


def test_a_partitions_own_specs_are_planned_as_upstream_plans_them():
    """What Vulkan's preprocess does: SpecPropPass, constants marked, then MemoryPlanningPass.run without a
    signature. The plan goes into the nodes' own specs (what the backend hung on them stays), constants stay
    out, and with greedy(allow_overlapping_allocations=False) tensors never live together share objects."""
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, MemoryPlanningPass, greedy
    from executorch.exir.passes import SpecPropPass
    from executorch.exir.tensor import TensorSpec

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            a = self.fc(x)
            b = a * 2.0
            c = b - 3.0
            return c * c + 1.0

    ep = to_edge(torch.export.export(Chain(), (torch.randn(4, 16),))).exported_program()
    gm = ep.graph_module
    spec_prop = SpecPropPass()
    spec_prop(gm)
    spec_prop.update_placeholder_tensor_specs(ep, gm)
    weight = next(n for n in gm.graph.nodes if n.name in ep.graph_signature.inputs_to_parameters)
    for n in gm.graph.nodes:
        if isinstance(n.meta.get("spec"), TensorSpec):
            n.meta["spec"].backend_note = n.name
    algo = MemoryPlanningAlgorithmSuite([functools.partial(greedy, allow_overlapping_allocations=False)])
    MemoryPlanningPass(memory_planning_algo=algo).run(gm)
    assert weight.meta["spec"].const and weight.meta["spec"].mem_id is None
    planned = [n.meta["spec"] for n in gm.graph.nodes
               if n.op != "output" and isinstance(n.meta.get("spec"), TensorSpec) and not n.meta["spec"].const]
    assert all(s.backend_note and s.mem_id == 1 and s.mem_offset is not None for s in planned)
    objects = {}
    for s in planned:
        objects.setdefault(s.mem_obj_id, []).append(s)
    assert len(objects) < len(planned)  # dead temporaries' objects are reused...
    for members in objects.values():  # ...by tensors never live with them
        for i, a in enumerate(members):
            assert all(a.lifetime[1] < b.lifetime[0] or b.lifetime[1] < a.lifetime[0] for b in members[i + 1:])
    assert gm.meta["non_const_buffer_sizes"][0] == 0 and gm.meta["non_const_buffer_sizes"][1] > 0


class _ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, bias=False)
        self.bn = torch.nn.BatchNorm2d(6)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_fuse_batch_norm_pass_folds_the_norm_into_the_convolution():
    from executorch.backends.xnnpack._passes import FuseBatchNormPass
    from executorch.exir.program._program import _transform

    torch.manual_seed(0)
    model = _ConvBN().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 3, 8, 8)
    ep = to_edge(torch.export.export(model, (x,))).exported_program()
    fused = _transform(ep, FuseBatchNormPass(ep))
    assert "batch_norm" not in fused.graph_module.code
    # The new parameters before the old weight; what they replace stays, unused, as upstream's pass leaves it.
    assert [s.target for s in fused.graph_signature.input_specs] == [
        "conv_weight_fused_bn", "conv_weight_bias_fused_bn", "conv.weight", "bn.weight", "bn.bias", "bn.running_mean",
        "bn.running_var", "bn.num_batches_tracked", None]
    conv = next(n for n in fused.graph.nodes if "convolution" in str(n.target))
    assert [a.name for a in conv.args[1:3]] == ["conv_weight_fused_bn", "conv_weight_bias_fused_bn"]
    torch.testing.assert_close(fused.module()(x), model(x), rtol=1e-4, atol=1e-5)


# --- the published Vulkan backend on this package -----------------------------------------------------------

def _payloads(pte: Path) -> list[bytes]:
    program = read_program(pte.read_bytes())
    out = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            assert delegate.id == "VulkanBackend"
            where = delegate.processed
            out.append(bytes(program.segment_data[where.index] if where.location == 1
                             else program.backend_delegate_data[where.index].data))
    return out


def _vulkan_operators(payload: bytes) -> list[str]:
    """The operator names of a Vulkan payload's chain, read by its layout: a 30-byte `VH00` header (after 4 bytes
    of padding) locating a FlatBuffer (identifier `VK00`, root table VkGraph) and the constant bytes after it."""
    assert payload[4:8] == b"VH00" and int.from_bytes(payload[8:10], "little") == 30, payload[:32]
    fb_offset, fb_size, bytes_offset, bytes_size = (int.from_bytes(payload[a:b], "little")
                                                    for a, b in ((10, 14), (14, 18), (18, 22), (22, 30)))
    assert fb_offset + fb_size <= bytes_offset and bytes_offset + bytes_size <= len(payload)
    graph = payload[fb_offset:fb_offset + fb_size]
    assert graph[4:8] == b"VK00"
    root = flatbuffers.table.Table(bytearray(graph), flatbuffers.encode.Get(flatbuffers.packer.uoffset, graph, 0))
    chain = root.Offset(6)  # VkGraph field 1: chain, a vector of OperatorCall tables
    names = []
    for i in range(root.VectorLen(chain)):
        call = flatbuffers.table.Table(root.Bytes, root.Indirect(root.Vector(chain) + 4 * i))
        names.append(call.String(call.Offset(6) + call.Pos).decode())  # OperatorCall field 1: name
    return names


class VulkanFlows:
    """The export script run once per session on each side, at the same time: on this package (the source
    tree, or the minimal wheel ET_MINIMAL_WHEEL names, installed apart) with Vulkan's folders beside it, and on
    the published stack (ET_REFERENCE_PYTHON)."""

    def __init__(self, backends: Path, root: Path):
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
        procs = [subprocess.Popen([os.environ["ET_REFERENCE_PYTHON"], str(EXPORT), str(self.theirs), *MODELS],
                                  env=published_env(), **pipes),
                 subprocess.Popen([sys.executable, str(EXPORT), str(self.ours), *MODELS, "--vendor", str(backends)],
                                  env={**os.environ, "PYTHONPATH": str(package)}, **pipes)]
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, err[-3000:]
        # Each side ran its own package: ours the source tree or the installed minimal wheel.
        assert Path((self.ours / "executorch_from.txt").read_text()) == (package / "executorch").resolve()
        assert Path((self.theirs / "executorch_from.txt").read_text()) != ROOT


@pytest.fixture(scope="module")
def vulkan_flows(vulkan_backends, tmp_path_factory) -> VulkanFlows:  # noqa: F811  (pytest fixture)
    return VulkanFlows(vulkan_backends, tmp_path_factory.mktemp("vulkan"))


def test_vulkan_package_imports_beside_ours(vulkan_backends):  # noqa: F811  (pytest fixture)
    import executorch.backends.vulkan as vulkan
    import executorch.backends.xnnpack as xnnpack

    assert vulkan.__file__.startswith(str(vulkan_backends)) and {"VulkanPartitioner", "VulkanBackend"} <= set(
        dir(vulkan))
    assert not xnnpack.__file__.startswith(str(vulkan_backends))  # ours, which Vulkan's preprocess imports from


@pytest.mark.parametrize("model", MODELS)
def test_vulkan_flow_writes_the_published_stacks_program(vulkan_flows, model):
    ours, theirs = vulkan_flows.ours / f"{model}.pte", vulkan_flows.theirs / f"{model}.pte"
    payloads = _payloads(ours)
    assert [len(p) for p in payloads] == [len(p) for p in _payloads(theirs)]
    assert payloads == _payloads(theirs)
    # MobileNetV2 whole in one delegate (its batch norms folded into the convolutions); the small model's
    # convolution (with its norm and ReLU) and linear layer in one each, around the mean Vulkan leaves out.
    operators = [_vulkan_operators(p) for p in payloads]
    if model == "mv2":
        assert len(operators) == 1 and operators[0].count("et_vk.conv_with_clamp.default") == 35
    else:
        assert operators == [["et_vk.conv_with_clamp.default"], ["aten.linear.default"]]
    assert not any("batch_norm" in name for names in operators for name in names)
    # The weights travel as named data, keyed by their digest: the same keys and bytes, and the whole file.
    assert ours.read_bytes() == theirs.read_bytes()


def test_the_published_reader_decodes_our_payload_on_this_package(vulkan_flows):
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        VulkanDelegateHeader, extract_vk_flatbuffer, flatbuffer_to_vk_graph)

    payload = _payloads(vulkan_flows.ours / "conv_linear.pte")[0]
    try:
        graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(payload))  # our _flatc_decompile, _json_to_dataclass
    except Exception as e:  # noqa: BLE001
        if "flatc" in str(e):
            pytest.skip(str(e))
        raise
    assert [c.name for c in graph.chain] == _vulkan_operators(payload)
    assert len(graph.constants) == 2 and all(c.named_key for c in graph.constants)  # fused weight and bias
    assert VulkanDelegateHeader.from_bytes(payload[:30]).is_valid()
