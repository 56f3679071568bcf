"""`XNNPACKQuantizer`: the quantize/dequantize placements and parameters of converted pt2e graphs, checked
by structure here and, with ET_REFERENCE_PYTHON set, against the published quantizer's graphs exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("torchao", reason="torchao is not installed (pip install torchao==0.18.0)")

import xnnpack_quantize_describe as qd  # noqa: E402
from conftest import REPO  # noqa: E402

from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer, get_symmetric_quantization_config)
from executorch.devtools.compare import compare_outputs  # noqa: E402

MODELS = str(Path(__file__).with_name("xnnpack_quant_models.py"))
ZOO = REPO / "examples" / "models"
# Jobs compared with the published quantizer: FILE.py:FACTORY@SETUP (setups in xnnpack_quantize_describe.py).
JOBS = [
    f"{MODELS}:make_pattern_mix@static_pc", f"{MODELS}:make_pattern_mix@static_pt",
    f"{MODELS}:make_pattern_mix@dynamic_pc",
    f"{MODELS}:make_linear_stack@static_pc", f"{MODELS}:make_linear_stack@dynamic_pc",
    f"{MODELS}:make_linear_stack@dynamic_pt", f"{MODELS}:make_linear_stack@fc2_only",
    f"{MODELS}:make_linear_stack@linear_op_static_pt", f"{MODELS}:make_pattern_mix@linear_type_dynamic",
    f"{ZOO}/mobilenet_v2.py:make_mobilenet_v2@static_pc", f"{ZOO}/resnet.py:make_resnet18@static_pc",
    f"{ZOO}/transformer_encoder.py:make_transformer_encoder@static_pc",
    f"{ZOO}/transformer_encoder.py:make_transformer_encoder@dynamic_pc",
]
Q = "quantized_decomposed"


def _ops(described: list) -> list:
    return [d["op"] for d in described]


def _same(a, b) -> bool:
    """Exact equality through nested lists/dicts; tensors equal in dtype, shape and every value."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _first_difference(ours: list, theirs: list) -> str:
    if len(ours) != len(theirs):
        return (f"{len(ours)} quantize/dequantize calls here, {len(theirs)} in the published graph: "
                f"{_ops(ours)} vs {_ops(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if not _same(a, b):
            return f"call {i}: {a['op']} reading {a['reads']!s:.80} vs {b['op']} reading {b['reads']!s:.80}"
    return ""


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory) -> Path:
    """The published quantizer's description of every job, made in one process of its environment."""
    out = tmp_path_factory.mktemp("published_quantizer")
    script = Path(qd.__file__)
    # Run from the output folder so the published environment cannot import this checkout.
    proc = subprocess.run([reference_runtime.python, str(script), str(out), *JOBS], capture_output=True, text=True,
                          timeout=1800, cwd=out)
    if proc.returncode != 0:
        raise AssertionError(f"published quantizer failed: {proc.stderr[-3000:]}")
    return out


@pytest.mark.parametrize("job", JOBS, ids=[j.rpartition(":")[2] for j in JOBS])
def test_same_graph_as_published_quantizer(published, job):
    ours = qd.run(job)
    theirs = torch.load(published / f"{qd.job_name(job)}.pt", weights_only=False)
    assert ours["qdq"], "the converted graph holds no quantize/dequantize call"
    diff = _first_difference(ours["qdq"], theirs["qdq"])
    assert not diff, diff
    # The same graph on the same torch gives the same numbers, bit for bit.
    assert _same(ours["outputs"], theirs["outputs"]), compare_outputs(ours["outputs"], theirs["outputs"])


def test_difference_check_catches_another_config():
    # The gate's own check: per-tensor and per-channel weights must not compare equal.
    pc = qd.run(f"{MODELS}:make_linear_stack@static_pc")["qdq"]
    pt = qd.run(f"{MODELS}:make_linear_stack@static_pt")["qdq"]
    assert _first_difference(pc, pt)
    assert not _first_difference(pc, pc)


def test_static_per_channel_linear_stack():
    described = qd.run(f"{MODELS}:make_linear_stack@static_pc")["qdq"]
    weights = [d for d in described if d["op"].endswith("dequantize_per_channel.default")]
    assert len(weights) == 3
    for w in weights:
        scales, zero_points, axis, qmin, qmax, dtype = w["params"]
        assert w["reads"].dtype == torch.int8 and axis == 0 and (qmin, qmax) == (-127, 127)
        assert torch.all(zero_points == 0) and scales.shape == (w["reads"].shape[0],)
    acts = [d for d in described if d["op"].endswith("quantize_per_tensor.default")
            and not d["op"].endswith("dequantize_per_tensor.default")]
    assert all(d["params"][2:4] == [-128, 127] for d in acts)
    # fc1 -> relu is one pattern: relu's output is quantized, the linear's is not.
    assert not any(d["users"] == ["aten.relu.default"] for d in described)
    # Activations: the input, after relu, after fc2, after fc3; each quantized once.
    assert len(acts) == 4


def test_dynamic_config_quantizes_linear_inputs_at_run_time():
    described = qd.run(f"{MODELS}:make_linear_stack@dynamic_pc")["qdq"]
    ops = _ops(described)
    assert ops.count(f"{Q}.choose_qparams.tensor") == 3
    assert ops.count(f"{Q}.quantize_per_tensor.tensor") == 3
    # Only linear inputs are quantized (the graph's output stays float), each right before its linear.
    dequantized = [d for d in described if d["op"] == f"{Q}.dequantize_per_tensor.tensor"]
    assert len(dequantized) == 3 and all(d["users"] == ["aten.linear.default"] for d in dequantized)


def test_converted_model_stays_close_to_eager():
    model, inputs = qd.load_factory(f"{MODELS}:make_pattern_mix")()
    with torch.no_grad():
        eager = model(*inputs)
    for setup in ("static_pc", "static_pt", "dynamic_pc"):
        got = qd.run(f"{MODELS}:make_pattern_mix@{setup}")["outputs"]
        # int8 through ~10 quantized layers: a few steps of 1/255 of each range, well under 10%.
        result = compare_outputs(got, eager, rtol=0.0, atol=0.1)
        assert result.ok, f"{setup}: {result}"
        assert not torch.equal(got, eager), f"{setup}: nothing was quantized"


def test_module_name_scopes_the_config():
    described = qd.run(f"{MODELS}:make_linear_stack@fc2_only")["qdq"]
    weights = [d for d in described if "per_channel" in d["op"]]
    assert len(weights) == 1 and weights[0]["reads"].shape == (32, 32)


def test_operator_type_config():
    described = qd.run(f"{MODELS}:make_linear_stack@linear_op_static_pt")["qdq"]
    weights = [d for d in described if d["op"].endswith("dequantize_per_tensor.default") and
               isinstance(d["reads"], torch.Tensor) and d["reads"].dim() == 2]
    assert len(weights) == 3 and not any("per_channel" in d["op"] for d in described)


def test_config_is_cached_and_shaped_as_published():
    a = get_symmetric_quantization_config(is_per_channel=True)
    assert a is get_symmetric_quantization_config(is_per_channel=True)
    assert a.weight.qscheme == torch.per_channel_symmetric and a.weight.ch_axis == 0
    assert (a.weight.quant_min, a.weight.quant_max) == (-127, 127)
    assert a.input_activation.qscheme == torch.per_tensor_affine and a.output_activation is a.input_activation
    d = get_symmetric_quantization_config(is_dynamic=True, act_qmin=-100, act_qmax=100)
    assert d.input_activation.is_dynamic and d.output_activation is None and d.input_activation.quant_min == -100
    qat = get_symmetric_quantization_config(is_qat=True)
    assert qat.is_qat


def test_none_module_config_is_refused():
    with pytest.raises(ValueError, match="set_module_name\\('fc1', None\\)"):
        XNNPACKQuantizer().set_module_name("fc1", None)


def test_qat_conv_bn_pattern():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    x = torch.randn(2, 3, 8, 8)
    captured = torch.export.export(model, (x,)).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = prepare_qat_pt2e(captured, quantizer)
    prepared(x)
    ops = _ops(qd.describe(convert_pt2e(prepared)))
    # input, weight (per channel) and the relu's output: the batch norm sits inside the pattern.
    assert ops.count(f"{Q}.dequantize_per_channel.default") == 1
    assert ops.count(f"{Q}.quantize_per_tensor.default") == 2


def test_conv_bn_patterns_serve_every_prepare_of_a_process():
    # The conv-batch-norm matchers are made once per process; a second prepare used to find its pattern
    # graph rewritten by the first ("Expecting the pattern graph to return a tuple").
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e

    x = torch.randn(2, 3, 8, 8)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    for _ in range(2):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
        prepared = prepare_qat_pt2e(torch.export.export(model, (x,)).module(), quantizer)
        convs = [n for n in prepared.graph.nodes if n.target == torch.ops.aten.conv2d.default]
        assert convs and all("quantization_annotation" in n.meta for n in convs)


def test_eval_batch_norm_is_not_a_training_one():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer_utils import _is_training_batch_norm

    def norms(model):
        gm = torch.export.export(model, (torch.randn(1, 4, 5, 5),)).module()
        return [_is_training_batch_norm(n) for n in gm.graph.nodes if "batch_norm" in str(n.target)]

    assert norms(torch.nn.BatchNorm2d(4).eval()) == [False]
    assert norms(torch.nn.BatchNorm2d(4).train()) == [True]


def test_missing_torchao_is_named_with_its_install():
    code = ("import sys; sys.modules['torchao'] = None\n"
            "import executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: executorch.backends.xnnpack.quantizer needs the torchao package, which is not "
        "installed; pip install torchao==0.18.0")
