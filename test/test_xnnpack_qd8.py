"""Dynamically quantized lowering to XNNPACK (QD8): pt2e's dynamic int8 linear layers and torchao's 8da4w
decoder lowered with our XnnpackPartitioner, run on the published runtime and on both of ours, against
the published exporter's files for the same models and the quantized modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_flatten

from conftest import load_zoo, project_runtimes, zoo_factory_spec  # noqa: E402
from test_xnnpack_int8 import lower, quantize  # noqa: E402
from xnnpack_structure import structure  # noqa: E402

from executorch.backends.xnnpack import XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner  # noqa: E402
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs  # noqa: E402
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary  # noqa: E402
from executorch.devtools.compare import TOLERANCES, assert_outputs_close, compare_outputs  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir._serialize._program import read_program  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                                reason="torchao is not installed (pip install torchao==0.18.0)")

D = xs.XNNDatatype
ENGINES = project_runtimes()
HERE = Path(__file__).parent
LINEAR_STACK = f"{HERE / 'xnnpack_quant_models.py'}:make_linear_stack"
CONV_STACK = f"{HERE / 'xnnpack_quant_models.py'}:make_conv_stack"


def _flat(x) -> list:
    return tree_flatten(x)[0]


def _datatypes(pte: bytes) -> set:
    program = read_program(pte)
    graphs = [deserialize_xnnpack_binary(program.segment_data[d.processed.index]).graph
              for d in program.execution_plan[0].delegates]
    return {xs.tensor_value(v).datatype for g in graphs for v in g.xvalues}


def _load(spec: str):
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("qd8_factory", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)()


def _quantize_8da4w(model):
    """torchao's 8da4w as optimum's --qlinear 8da4w and the published script apply it: int8 per-row
    dynamic activations, int4 weights in groups of 32 (linear layers with whole groups)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
              filter_fn=lambda m, _fqn: isinstance(m, torch.nn.Linear) and m.in_features % 32 == 0)
    return model


@pytest.fixture(scope="module")
def cases(tmp_path_factory, reference_runtime) -> dict:
    """The dynamic int8 linear and convolution stacks and the 8da4w decoder, lowered here (NAME.pte) and by
    the published exporter (NAME_pub.pte), all run on the published runtime in one batch."""
    root = tmp_path_factory.mktemp("xnn_qd8")
    data = {}
    for name, factory in (("linear_stack", LINEAR_STACK), ("conv_stack", CONV_STACK)):
        model, inputs = _load(factory)
        graph = quantize(model, inputs, is_dynamic=True)
        with torch.no_grad():
            data[name] = {"inputs": inputs, "eager": _flat(model(*inputs)), "reference": _flat(graph(*inputs))}
        (root / f"{name}.pte").write_bytes(lower(graph, inputs))
        reference_runtime.export(factory, root / f"{name}_pub.pte", script=HERE / "reference_export_qd8.py")

    model, inputs = load_zoo().MODELS["llama_decoder"]()
    with torch.no_grad():
        eager = _flat(model(*inputs))
        model = _quantize_8da4w(model)
        data["llama_decoder"] = {"inputs": inputs, "eager": eager, "reference": _flat(model(*inputs))}
    ep = torch.export.export(model, inputs)
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    (root / "llama_decoder.pte").write_bytes(program.buffer)
    reference_runtime.export(zoo_factory_spec("llama_decoder"), root / "llama_decoder_pub.pte",
                             script=HERE / "reference_export_8da4w.py")
    names = [s for n in data for s in (n, f"{n}_pub")]
    for name in names:
        torch.save(list(data[name.removesuffix("_pub")]["inputs"]), root / f"{name}.in.pt")
    return {"root": root, "data": data, "failures": reference_runtime.run_batch(root, names)}


def _published_run(cases, stem: str) -> list:
    assert stem not in cases["failures"], cases["failures"][stem]
    return _flat(torch.load(cases["root"] / f"{stem}.out.pt"))


CASES = ["linear_stack", "conv_stack", "llama_decoder"]
# What each case's payload must hold: qdint8 activations and its weights' datatype.
WEIGHTS = {"linear_stack": D.xnn_datatype_qcint8, "conv_stack": D.xnn_datatype_qcint8,
           "llama_decoder": D.xnn_datatype_qbint4}


@pytest.mark.parametrize("name", CASES)
def test_qd8_on_published_runtime_is_the_published_exporters_result(cases, name):
    d = cases["data"][name]
    ours, theirs = _published_run(cases, name), _published_run(cases, f"{name}_pub")
    # Same weights, same per-row quantization at run time, same XNNPACK kernels: float32 tolerance.
    assert_outputs_close(ours, theirs)
    # The quantized module computes per-tensor (pt2e) or float32-scaled (torchao) where XNNPACK quantizes
    # per row with bfloat16 block scales: no further off than the published file, or bfloat16 tolerance.
    rtol, atol = TOLERANCES[torch.bfloat16]
    tol = max(compare_outputs(theirs, d["reference"], rtol=0.0, atol=0.0).max_rel_err, atol)
    assert_outputs_close(ours, d["reference"], rtol=rtol, atol=tol)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("name", CASES)
def test_qd8_on_our_engines(cases, name, engine):
    d = cases["data"][name]
    pte = (cases["root"] / f"{name}.pte").read_bytes()
    got = _flat(ENGINES[engine].load_program(pte).load_method("forward").execute(list(d["inputs"])))
    assert_outputs_close(got, _published_run(cases, name))


@pytest.mark.parametrize("name", CASES)
def test_qd8_structure_at_least_as_good_as_published(cases, name):
    ours = structure(cases["root"] / f"{name}.pte")
    ref = structure(cases["root"] / f"{name}_pub.pte")
    assert ours.delegates <= ref.delegates, (ours.delegates, ref.delegates)
    assert sum(ours.kernel_calls.values()) <= sum(ref.kernel_calls.values()), (ours.kernel_calls, ref.kernel_calls)
    for kind in ("FullyConnected", "Conv2d", "ConvTranspose2d"):
        assert ours.node_kinds[kind] >= ref.node_kinds[kind], (kind, ours.node_kinds, ref.node_kinds)
    kinds = _datatypes((cases["root"] / f"{name}.pte").read_bytes())
    assert {D.xnn_datatype_qdint8, WEIGHTS[name]} <= kinds, kinds


def test_the_qd8_gate_fails_on_float_weights(cases):
    """The float model is further from the quantized module than the tolerance the reference check
    allows: the gate sees a lowering that dropped the quantization."""
    d = cases["data"]["llama_decoder"]
    rtol, atol = TOLERANCES[torch.bfloat16]
    tol = max(compare_outputs(_published_run(cases, "llama_decoder_pub"), d["reference"], rtol=0.0,
                              atol=0.0).max_rel_err, atol)
    assert not compare_outputs(d["eager"], d["reference"], rtol=rtol, atol=tol).ok


def test_dynamically_quantized_partitioner_takes_only_the_qd8_linears():
    model, inputs = _load(LINEAR_STACK)
    graph = quantize(model, inputs, is_dynamic=True)
    ep = torch.export.export(graph, inputs)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackDynamicallyQuantizedPartitioner()]).to_executorch().buffer
    s = structure_of(pte)
    assert s.node_kinds["FullyConnected"] == 3 and s.node_kinds["Convert"] == 3, s.node_kinds
    assert D.xnn_datatype_qdint8 in _datatypes(pte)
    with torch.no_grad():
        want = [graph(*inputs)]
    got = ENGINES["python"].load_program(pte).load_method("forward").execute(list(inputs))
    rtol, atol = TOLERANCES[torch.bfloat16]
    assert_outputs_close(got, want, rtol=rtol, atol=max(atol, 2 * compare_outputs(_flat(model(*inputs)), want,
                                                                                  rtol=0.0, atol=0.0).max_rel_err))


def structure_of(pte: bytes):
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(pte)
        f.flush()
        return structure(Path(f.name))


# Dynamic token counts: the linears still lower to QD8, their values at the upper bound -------------

LENGTHS = (1, 5, 12)


def _quantize_pt2e_dynamic(model, inputs, dims):
    """`quantize(..., is_dynamic=True)` on a graph captured with `dims` dynamic (a static capture bakes the
    sizes in)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)

    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    graph = prepare_pt2e(torch.export.export(model, inputs, dynamic_shapes=dims).module(),
                         XNNPACKQuantizer().set_global(config))
    graph(*inputs)
    return convert_pt2e(graph)


@pytest.fixture(scope="module", params=["pt2e", "8da4w"])
def dynamic_case(request, tmp_path_factory) -> dict:
    """LINEAR_STACK quantized per row at run time (pt2e's dynamic int8 or torchao's 8da4w) and exported with
    a dynamic token count up to 12, the quantized module's outputs at each of LENGTHS."""
    model, inputs = _load(LINEAR_STACK)
    dims = ({1: torch.export.Dim("t", min=1, max=max(LENGTHS))},)
    if request.param == "pt2e":
        graph = _quantize_pt2e_dynamic(model, inputs, dims)
    else:
        # Every linear quantized (a float one over a dynamic length would stay out of XNNPACK, and torchao's
        # retrace keeps linear whole everywhere or nowhere): fc1's 16 inputs make no group of 32, so per row.
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerAxis

        quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerAxis(0)),
                  filter_fn=lambda m, fqn: fqn == "fc1")
        graph = _quantize_8da4w(model)
    ep = torch.export.export(graph, inputs, dynamic_shapes=dims)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    torch.manual_seed(1)
    calls = [[torch.randn(2, n, 16)] for n in LENGTHS]
    with torch.no_grad():
        want = [_flat(graph(*c)) for c in calls]
        moved = max(compare_outputs(_flat(_load(LINEAR_STACK)[0](*c)), w, rtol=0.0, atol=0.0).max_rel_err
                    for c, w in zip(calls, want))
    root = tmp_path_factory.mktemp(f"qd8_dynamic_{request.param}")
    return {"scheme": request.param, "pte": pte, "calls": calls, "want": want, "moved": moved, "root": root}


def test_qd8_over_a_dynamic_length_lowers_at_the_upper_bound(dynamic_case):
    s = structure_of(dynamic_case["pte"])
    linears = 3
    assert s.node_kinds["FullyConnected"] == linears and s.node_kinds["Convert"] == linears, s.node_kinds
    assert not any("linear" in k or "mm" in k for k in s.kernel_calls), s.kernel_calls
    program = read_program(dynamic_case["pte"])
    graphs = [deserialize_xnnpack_binary(program.segment_data[d.processed.index]).graph
              for d in program.execution_plan[0].delegates]
    qd8 = [xs.tensor_value(v) for g in graphs for v in g.xvalues
           if xs.tensor_value(v).datatype == D.xnn_datatype_qdint8]
    assert len(qd8) == linears and all(v.dims[:2] == [2, max(LENGTHS)] for v in qd8), [v.dims for v in qd8]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_qd8_over_a_dynamic_length_on_our_engines(dynamic_case, engine):
    method = ENGINES[engine].load_program(dynamic_case["pte"]).load_method("forward")
    rtol, atol = TOLERANCES[torch.bfloat16]
    for call, want in zip(dynamic_case["calls"], dynamic_case["want"]):
        got = _flat(method.execute(list(call)))
        assert got[0].shape == want[0].shape
        assert_outputs_close(got, want, rtol=rtol, atol=max(atol, 2 * dynamic_case["moved"]))


def test_qd8_over_a_dynamic_length_on_published_runtime(dynamic_case, reference_runtime):
    """The published XNNPACK runs our file at every length; our engines give its outputs to float32 tolerance."""
    root, names = dynamic_case["root"], [f"len{n}" for n in LENGTHS]
    for name, call in zip(names, dynamic_case["calls"]):
        (root / f"{name}.pte").write_bytes(dynamic_case["pte"])
        torch.save(call, root / f"{name}.in.pt")
    failures = reference_runtime.run_batch(root, names)
    assert not failures, failures
    for name, call in zip(names, dynamic_case["calls"]):
        published = _flat(torch.load(root / f"{name}.out.pt"))
        for rt in ENGINES.values():
            assert_outputs_close(_flat(rt.load_program(dynamic_case["pte"]).load_method("forward").execute(call)),
                                 published)


def test_qd8_convolutions_read_their_image_quantized_per_image(cases):
    # The published exporter's form: float NHWC -> Convert to qdint8 with one scale per image (3 trailing
    # dims) -> Conv2d / ConvTranspose2d on int8 filters; the depthwise convolution stays float. (XNNPACK
    # runs the pointwise one as a fully connected layer, on its input quantized per pixel instead: the
    # engines' results against the published runtime's check that.)
    program = read_program((cases["root"] / "conv_stack.pte").read_bytes())
    graph = deserialize_xnnpack_binary(
        program.segment_data[program.execution_plan[0].delegates[0].processed.index]).graph
    qd8 = [v.xvalue_union for v in graph.xvalues if xs.tensor_value(v).datatype == D.xnn_datatype_qdint8]
    assert [v.quant_params.num_nonbatch_dims for v in qd8] == [3, 3, 3]
    readers = [type(n.xnode_union).__name__ for n in graph.xnodes if getattr(n.xnode_union, "input1_id", None)
               in {i for i, v in enumerate(graph.xvalues) if xs.tensor_value(v).datatype == D.xnn_datatype_qdint8}]
    assert readers == ["XNNConv2d", "XNNConv2d", "XNNConvTranspose2d"], readers


def test_a_dynamically_quantized_program_left_to_portable_kernels_runs(cases):
    """Without a partitioner the choose_qparams -> quantize -> dequantize chains run on the portable kernels
    (choose_qparams.Tensor_out, as the published quantized kernels name it), on both engines as in the
    converted module."""
    for name in ("linear_stack", "conv_stack"):
        model, inputs = _load(LINEAR_STACK if name == "linear_stack" else CONV_STACK)
        graph = quantize(model, inputs, is_dynamic=True)
        pte = to_edge_transform_and_lower(torch.export.export(graph, inputs)).to_executorch().buffer
        ops = {f"{o.name}.{o.overload}" for o in read_program(pte).execution_plan[0].operators}
        assert "quantized_decomposed::choose_qparams.Tensor_out" in ops, ops
        with torch.no_grad():
            want = _flat(graph(*inputs))
        for engine in ENGINES.values():
            assert_outputs_close(_flat(engine.load_program(pte).load_method("forward").execute(list(inputs))), want)


class _ChooseQParams(torch.nn.Module):
    def forward(self, x):
        return torch.ops.quantized_decomposed.choose_qparams.tensor(x, -128, 127, torch.finfo(torch.float32).eps,
                                                                    torch.int8)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_choose_qparams_is_torchs_reference_bit_for_bit(engine):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e  # noqa: F401  (defines quantized_decomposed)

    x = torch.randn(3, 7)
    pte = to_edge_transform_and_lower(torch.export.export(_ChooseQParams(), (x,))).to_executorch().buffer
    method = ENGINES[engine].load_program(pte).load_method("forward")
    for t in (x, x.abs() + 1, -x.abs() - 0.5, torch.zeros(3, 7), torch.full((3, 7), 1e-9), x * 1e6,
              torch.tensor([[-0.3] * 6 + [0.7]] * 3)):
        got, want = method.execute([t]), _ChooseQParams()(t)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and torch.equal(g.reshape(w.shape), w), (t, got, want)


class _SharedInput(torch.nn.Module):
    """One input into two convolutions and a linear layer: pt2e quantizes it once for all three."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.fc = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 1), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.a(x), self.b(x), self.fc(x)


def test_a_run_time_quantization_read_per_row_and_per_image_stays_out():
    # XNNPACK takes a qdint8 value per row into a fully connected layer and per image into a convolution,
    # never both: the shared chain runs on the portable kernels and the layers read its float values.
    # (The published exporter fails here: "Weight and Input should both be quantized".)
    torch.manual_seed(0)
    model, inputs = _SharedInput().eval(), (torch.randn(2, 3, 8, 8),)
    graph = quantize(model, inputs, is_dynamic=True)
    pte = lower(graph, inputs)
    assert D.xnn_datatype_qdint8 not in _datatypes(pte)
    with torch.no_grad():
        want = _flat(graph(*inputs))
    for engine in ENGINES.values():
        assert_outputs_close(_flat(engine.load_program(pte).load_method("forward").execute(list(inputs))), want)


def test_qd8_convert_rounds_as_xnnpack_on_a_boundary(cases):
    # Integer-valued images put x * (255 / range) on .5 exactly: the native engine's Convert to qdint8
    # must round there as XNNPACK does (x * inv, not x / scale) and as the Python engine models it.
    # Seen by the differential tester: a program with floor() before a dynamically quantized
    # convolution, one step apart from the published runtime on 3 of 448 values.
    if len(ENGINES) < 2:
        pytest.skip("needs both engines (the native build)")
    torch.manual_seed(3)
    pte = (cases["root"] / "conv_stack.pte").read_bytes()
    # Ranges where float32 255 / range and 1 / (range / 255) differ, each attained in both images.
    for lo, hi in ((-9, 0), (-11, 5), (-10, 7)):
        x = torch.randint(lo, hi + 1, (2, 3, 10, 9)).float()
        x[:, 0, 0, 0], x[:, 0, 0, 1] = lo, hi
        native, python = (_flat(ENGINES[e].load_program(pte).load_method("forward").execute([x]))
                          for e in ("native", "python"))
        assert_outputs_close(native, python, rtol=1e-5, atol=1e-5)
