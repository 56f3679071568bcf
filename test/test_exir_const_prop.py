"""`constant_prop_pass` and `quant_fusion_and_const_prop_pass` (`do_quant_fusion_and_const_prop=True`): what they
fold and fuse, that both runtimes compute the same before and after, and that the published passes agree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, ExportError, to_edge, to_edge_transform_and_lower
from executorch.exir._serialize import read_program
from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.passes.constant_prop_pass import constant_prop_pass
from executorch.exir.passes.quant_fusion_pass import quant_fusion_and_const_prop_pass
from torch.export.graph_signature import InputKind

import const_prop_models as models  # noqa: E402
from conftest import project_runtimes  # noqa: E402

import executorch.kernels.quantized  # noqa: E402,F401  (the q/dq out variants the quantized programs call)

RUNTIMES = project_runtimes()
FUSE = ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)
aten = torch.ops.aten


def _edge(factory):
    model, inputs = factory()
    return to_edge(torch.export.export(model, inputs)), model, inputs


def _ops(ep) -> list[str]:
    return models.describe_program(ep)["ops"]


def _run(pte: bytes, inputs) -> dict:
    return {name: rt.load_program(pte).load_method("forward").execute(list(inputs)) for name, rt in RUNTIMES.items()}


def _same_on_every_runtime(edge, inputs, exact: bool = False) -> None:
    """The program with the option computes what it computes without it, on every runtime here."""
    plain, fused = _run(edge.to_executorch().buffer, inputs), _run(edge.to_executorch(FUSE).buffer, inputs)
    for name in RUNTIMES:
        if exact:
            assert all(torch.equal(a, b) for a, b in zip(fused[name], plain[name])), name
        else:
            assert_outputs_close(fused[name], plain[name])


def test_a_constant_subgraph_becomes_one_constant():
    edge, model, inputs = _edge(models.constant_branch)
    ep = edge.exported_program()
    before = _ops(ep)
    folded = constant_prop_pass(to_edge(torch.export.export(model, inputs)).exported_program())
    # permute, mul, add and relu over the weight and the buffer are gone; mm, mul and add on x stay.
    assert sorted(before) != sorted(_ops(folded))
    assert _ops(folded) == ["aten.add.Tensor", "aten.mm.default", "aten.mul.Tensor"]
    specs = [(s.kind, s.target) for s in folded.graph_signature.input_specs]
    assert specs == [(InputKind.CONSTANT_TENSOR, "scale"), (InputKind.CONSTANT_TENSOR, "_prop_tensor_constant1"),
                     (InputKind.USER_INPUT, None)]
    # The weight and buffer only fed the folded ops: they leave the program.
    assert dict(folded.state_dict) == {}
    want = torch.relu(model.weight.detach().t() * 2.0 + model.offset)
    assert torch.equal(folded.constants["_prop_tensor_constant1"], want)


def test_folding_changes_no_result_on_either_runtime():
    for factory in (models.constant_branch, models.skips, models.constant_output):
        edge, _, inputs = _edge(factory)
        _same_on_every_runtime(edge, inputs)


def test_written_buffers_full_random_draws_and_user_inputs_stay():
    edge, _, _ = _edge(models.skips)
    ep = quant_fusion_and_const_prop_pass(edge.exported_program())
    ops = _ops(ep)
    assert "aten.full.default" in ops  # never folded: it would store the filled tensor in the file
    assert ops.count("aten.mul.Tensor") == 1  # x * 2; base * 3 folded
    kinds = {s.target: s.kind for s in ep.graph_signature.input_specs}
    assert kinds["count"] == InputKind.BUFFER  # written by the method: not a constant
    assert kinds["_prop_tensor_constant0"] == InputKind.CONSTANT_TENSOR
    assert torch.equal(ep.constants["_prop_tensor_constant0"], torch.arange(4.0) * 3.0)
    drawn = quant_fusion_and_const_prop_pass(_edge(models.random_draw)[0].exported_program())
    assert _ops(drawn) == ["aten.add.Tensor", "aten.mul.Tensor", "aten.rand.default"] and not drawn.constants


def test_a_constant_returned_as_output_is_copied():
    edge, model, inputs = _edge(models.constant_output)
    pm = edge.to_executorch(FUSE)
    ep = pm.exported_program()
    assert _ops(ep) == ["aten.add.Tensor", "aten.clone.default"]
    assert "table" not in ep.state_dict
    for name, out in _run(pm.buffer, inputs).items():
        assert_outputs_close(out, list(model(*inputs)))


def test_the_edge_program_is_left_as_it_was():
    edge, _, _ = _edge(models.constant_branch)
    before = _ops(edge.exported_program())
    state = set(edge.exported_program().state_dict)
    edge.to_executorch(FUSE)
    assert _ops(edge.exported_program()) == before and set(edge.exported_program().state_dict) == state


def test_the_option_is_a_bool():
    with pytest.raises(ExportError, match="do_quant_fusion_and_const_prop"):
        ExecutorchBackendConfig(do_quant_fusion_and_const_prop="yes")


class _DelegatedAndConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.w = torch.nn.Parameter(torch.randn(8, 8, generator=g))
        self.b = torch.nn.Parameter(torch.randn(8, generator=g))

    def forward(self, x):
        return torch.tanh(x @ self.w) + torch.exp(self.b * 2.0)


def test_after_delegation_the_delegate_keeps_its_constants():
    model, inputs = _DelegatedAndConstant().eval(), (torch.randn(3, 8),)
    part = ExecutorBackendPartitioner([aten.mm.default, aten.tanh.default])
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[part])
    plain, fused = edge.to_executorch(), edge.to_executorch(FUSE)
    ep = fused.exported_program()
    assert "executorch_call_delegate" in _ops(ep)
    assert _ops(ep).count("aten.exp.default") == 0 and "b" not in ep.state_dict
    assert [s.target for s in ep.graph_signature.input_specs if s.kind == InputKind.CONSTANT_TENSOR] == \
        ["_prop_tensor_constant0"]
    # The delegate's payload (holding w) is byte for byte the one lowered without the option.
    payload = [read_program(pm.buffer) for pm in (plain, fused)]
    segments = [[bytes(p.segment_data[d.processed.index]) for d in p.execution_plan[0].delegates] for p in payload]
    assert segments[0] == segments[1] and len(segments[0]) == 1
    for name, out in _run(fused.buffer, inputs).items():
        assert_outputs_close(out, [model(*inputs)])
    _same_on_every_runtime(edge, inputs)


def _int8_cat_inputs(ep) -> list:
    cats = [n for n in ep.graph.nodes if aten_op(n.target) is aten.cat.default]
    return [[str(p.meta["val"].dtype) for p in c.args[0]] for c in cats]


def test_quantized_cat_runs_on_the_integer_values():
    edge, model, inputs = _edge(models.quantized_cat)
    assert _int8_cat_inputs(edge.exported_program()) == [["torch.float32"] * 2] * 2
    pm = edge.to_executorch(FUSE)
    ep = pm.exported_program()
    # The cat with one set of parameters now reads the int8 values; the one with mixed parameters does not.
    assert sorted(_int8_cat_inputs(ep)) == [["torch.float32"] * 2, ["torch.int8"] * 2]
    fused_cat = next(n for n in ep.graph.nodes
                     if aten_op(n.target) is aten.cat.default and n.meta["val"].dtype == torch.int8)
    assert ([aten_op(u.target) for u in fused_cat.users]
            == [torch.ops.quantized_decomposed.dequantize_per_tensor.default])
    q = str(torch.ops.quantized_decomposed.quantize_per_tensor.default)
    assert _ops(ep).count(q) == _ops(edge.exported_program()).count(q) - 1
    # Exact: re-quantizing a dequantized value with its own parameters gives it back.
    _same_on_every_runtime(edge, inputs, exact=True)
    with torch.no_grad():
        want = list(model(*inputs))
    for name, out in _run(pm.buffer, inputs).items():
        assert all(torch.equal(a, b) for a, b in zip(out, want)), name


def test_quantized_slice_fuses_over_uint8_only_as_published():
    edge, model, inputs = _edge(models.quantized_slice)
    ep = edge.to_executorch(FUSE).exported_program()
    slices = [n for n in ep.graph.nodes if aten_op(n.target) is aten.slice_copy.Tensor]
    assert sorted(str(n.meta["val"].dtype) for n in slices) == ["torch.float32", "torch.uint8"]
    _same_on_every_runtime(edge, inputs, exact=True)


def _without_scalar_buffers(described: dict) -> dict:
    # The published to_edge turns scalar operands into lifted buffers (`_lifted_tensor_constantN`);
    # ours keeps them as scalars. Everything else the passes touch must agree.
    lifted = "_lifted_tensor_constant"
    return {"ops": described["ops"],
            "inputs": [s for s in described["inputs"] if not (s[1] or "").startswith(lifted)],
            "state_dict": [k for k in described["state_dict"] if not k.startswith(lifted)]}


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory) -> Path:
    """Every program of const_prop_models through the published to_edge and quant_fusion_and_const_prop_pass,
    in one process: NAME.pt2 (the exported program), NAME.json and NAME.constants.pt (its result)."""
    root = tmp_path_factory.mktemp("published_const_prop")
    for name, factory in models.FACTORIES.items():
        model, inputs = factory()
        torch.export.save(torch.export.export(model, inputs), root / f"{name}.pt2")
    script = Path(__file__).with_name("reference_const_prop.py")
    done = subprocess.run([reference_runtime.python, str(script), "quant_fusion",
                           *(str(root / f"{n}.pt2") for n in models.FACTORIES)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.mark.parametrize("name", sorted(models.FACTORIES))
def test_the_published_passes_fold_and_fuse_the_same(name, published):
    ours_ep = quant_fusion_and_const_prop_pass(to_edge(torch.export.load(published / f"{name}.pt2")).exported_program())
    ref = json.loads((published / f"{name}.json").read_text())
    assert _without_scalar_buffers(models.describe_program(ours_ep)) == _without_scalar_buffers(ref)
    ref_constants = torch.load(published / f"{name}.constants.pt")
    ours = {k: v for k, v in ours_ep.constants.items() if k.startswith("_prop_tensor_constant")}
    assert sorted(ours) == sorted(ref_constants)
    for k, v in ref_constants.items():
        assert_outputs_close(ours[k], v)


def test_quant_fusion_pass_alone_from_the_config_passes():
    from executorch.exir.passes.quant_fusion_pass import QuantFusionPass

    edge, _, inputs = _edge(models.quantized_cat)
    pm = edge.to_executorch(ExecutorchBackendConfig(passes=[QuantFusionPass()]))
    assert sorted(_int8_cat_inputs(pm.exported_program())) == [["torch.float32"] * 2, ["torch.int8"] * 2]
    plain = _run(edge.to_executorch().buffer, inputs)
    for name, out in _run(pm.buffer, inputs).items():
        assert all(torch.equal(a, b) for a, b in zip(out, plain[name])), name
    with pytest.raises(ValueError, match="_fix_node_meta_val"):
        QuantFusionPass(_fix_node_meta_val=False)
