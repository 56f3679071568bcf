"""XnnpackBackend on the pure-Python engine: the published exporter's XNNPACK files for the zoo (fp32,
int8, 8da4w) against eager or the quantized reference, hand-made graphs against torch, and malformed
payloads refused with an ExecuTorchError at load."""

from __future__ import annotations

import dataclasses
import random
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import (
    deserialize_xnnpack_binary, serialize_xnnpack_binary)
from executorch.devtools.compare import TOLERANCES, assert_outputs_close, compare_outputs
from executorch.exir._serialize._program import read_program, serialize_pte_binary
from executorch.runtime import ExecuTorchError

from conftest import load_zoo, project_runtimes, zoo_factory_spec  # noqa: E402
from xnnpack_graphs import D, FP32, GraphBuilder, delegate_program  # noqa: E402

PY = project_runtimes()["python"]
ZOO = sorted(load_zoo().MODELS)
INVALID = xs.XNN_INVALID_VALUE_ID


def _run(pte, inputs: list) -> list:
    return PY.load_program(pte).load_method("forward").execute(list(inputs))


def _eager(name: str):
    model, inputs = load_zoo().MODELS[name]()
    with torch.no_grad():
        return model, inputs, model(*inputs)


def _delegates(pte: bytes) -> list[str]:
    return [d.id for plan in read_program(pte).execution_plan for d in plan.delegates]


# ---- the published exporter's files --------------------------------------------------------------


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory):
    root = tmp_path_factory.mktemp("published-xnnpack")

    def get(name: str, *flags: str) -> Path:
        out = root / f"{name}{''.join(f.replace('--', '_') for f in flags)}.pte"
        if not out.exists():
            reference_runtime.export(zoo_factory_spec(name), out, *flags)
        return out
    return get


@pytest.mark.parametrize("name", ZOO)
def test_published_fp32_xnnpack_files_match_eager(published, name):
    pte = published(name, "--xnnpack").read_bytes()
    assert "XnnpackBackend" in _delegates(pte)
    _, inputs, expected = _eager(name)
    assert_outputs_close(_run(pte, inputs), expected)


def _moved(eager: list, reference: list) -> float:
    """How far quantization itself moves the outputs, relative to the reference's largest value."""
    return max(float((e - r).abs().max() / r.abs().max()) for e, r in zip(eager, reference))


# Zoo models whose int8 graphs are integer from input to output (one XNNPACK delegate, no float op
# between quantized ones): XNNPACK's integer arithmetic (exact accumulators, float32 requantization,
# fixed-point adds) is reproduced, so their outputs are the published runtime's to float32 tolerance.
INTEGER_THROUGHOUT = {"mobilenet_v2", "resnet18", "resnet50", "multi_io"}


def _int8_atol(name: str, eager: list, converted: list) -> float:
    """Elsewhere float ops sit between quantized ones (softmax, GELU, the portable layer norm), and their
    last-bit differences put an activation on the other side of a rounding boundary now and then: what
    quantization itself moves the outputs. (Half of it, the export CLI's rule, held until ViT-Tiny's
    published file landed one logit a whole output step, 0.066, from the published runtime's.)"""
    return 1e-5 if name in INTEGER_THROUGHOUT else max(1e-5, _moved(eager, converted))


@pytest.mark.parametrize("name", ZOO)
def test_published_int8_xnnpack_files_match_the_published_runtime_and_the_converted_module(
        published, reference_runtime, tmp_path, name):
    path = published(name, "--xnnpack", "--int8")
    pte = path.read_bytes()
    assert "XnnpackBackend" in _delegates(pte)
    converted = tree_flatten(torch.load(path.with_suffix(".ref.pt")))[0]
    _, inputs, eager = _eager(name)
    eager = tree_flatten(eager)[0]
    got = tree_flatten(_run(pte, inputs))[0]
    theirs = tree_flatten(reference_runtime.run(path, inputs, tmp_path))[0]
    assert_outputs_close(got, theirs, atol=_int8_atol(name, eager, converted))
    # The converted pt2e module: no further off than the float model or the published runtime is
    # (XNNPACK's requantization is not pt2e's float arithmetic: on multi_io the published runtime
    # lands 7e-2 from the converted module, twice as far as the float model).
    tol = max(_moved(eager, converted), _moved(theirs, converted)) + _int8_atol(name, eager, converted)
    assert_outputs_close(got, converted, rtol=0.0, atol=tol)


@pytest.fixture(scope="module")
def published_8da4w(reference_runtime, tmp_path_factory):
    out = tmp_path_factory.mktemp("8da4w") / "llama_decoder_8da4w.pte"
    proc = subprocess.run([reference_runtime.python, str(Path(__file__).with_name("reference_export_8da4w.py")),
                           zoo_factory_spec("llama_decoder"), str(out)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"the published exporter failed on the 8da4w decoder: {proc.stderr[-2000:]}")
    return out


def test_published_8da4w_decoder_matches_the_published_runtime_and_quantized_eager(
        published_8da4w, reference_runtime, tmp_path):
    pte = published_8da4w.read_bytes()
    graphs = [deserialize_xnnpack_binary(read_program(pte).segment_data[d.processed.index]).graph
              for d in read_program(pte).execution_plan[0].delegates]
    kinds = {xs.tensor_value(v).datatype for g in graphs for v in g.xvalues}
    assert {D.xnn_datatype_qdint8, D.xnn_datatype_qbint4} <= kinds
    _, inputs, _ = _eager("llama_decoder")
    got = _run(pte, inputs)
    assert_outputs_close(got, reference_runtime.run(published_8da4w, inputs, tmp_path))
    # The quantized eager model keeps its block scales in float32; XNNPACK holds them in bfloat16.
    rtol, atol = TOLERANCES[torch.bfloat16]
    assert_outputs_close(got, torch.load(published_8da4w.with_suffix(".ref.pt")), rtol=rtol, atol=atol)


def _rewrite_payload(pte: bytes, mutate) -> bytes:
    """`pte` with its first XNNPACK payload's graph changed by `mutate(graph)`."""
    program = read_program(pte)
    d = next(d for d in program.execution_plan[0].delegates if d.id == "XnnpackBackend")
    payload = deserialize_xnnpack_binary(program.segment_data[d.processed.index])
    mutate(payload.graph)
    program.segment_data[d.processed.index] = serialize_xnnpack_binary(payload.graph, bytes(payload.constant_data))
    return serialize_pte_binary(program)


@pytest.mark.parametrize("name", ["multi_io", "transformer_encoder"])
def test_the_int8_gate_fails_on_a_scale_five_percent_off(published, reference_runtime, tmp_path, name):
    path = published(name, "--xnnpack", "--int8")
    _, inputs, eager = _eager(name)
    theirs = tree_flatten(reference_runtime.run(path, inputs, tmp_path))[0]
    atol = _int8_atol(name, tree_flatten(eager)[0], tree_flatten(torch.load(path.with_suffix(".ref.pt")))[0])

    def scale_first_per_tensor(graph):
        v = next(v.xvalue_union for v in graph.xvalues if isinstance(v.xvalue_union, xs.XNNQuantizedTensorValue)
                 and isinstance(v.xvalue_union.quant_params, xs.PerTensorQuant))
        v.quant_params.scale *= 1.05
    wrong = tree_flatten(_run(_rewrite_payload(path.read_bytes(), scale_first_per_tensor), inputs))[0]
    assert not compare_outputs(wrong, theirs, atol=atol).ok


def test_published_payloads_survive_random_corruption(published):
    pte = published("multi_io", "--xnnpack", "--int8").read_bytes()
    program = read_program(pte)
    d = program.execution_plan[0].delegates[0]
    payload = bytes(program.segment_data[d.processed.index])
    _, inputs, _ = _eager("multi_io")
    rng = random.Random(1)
    for _ in range(100):
        data = bytearray(payload)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        program.segment_data[d.processed.index] = bytes(data)
        try:
            _run(serialize_pte_binary(program), inputs)
        except ExecuTorchError:
            pass


@pytest.mark.parametrize("name", ZOO)
def test_our_exporters_xnnpack_files_match_eager(name):
    partitioner = pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner",
                                      reason="this tree has no XNNPACK partitioner yet")
    from executorch.exir import to_edge_transform_and_lower

    model, inputs, expected = _eager(name)
    ep = torch.export.export(model, inputs)
    pte = to_edge_transform_and_lower(ep, partitioner=[partitioner.XnnpackPartitioner()]).to_executorch().buffer
    assert "XnnpackBackend" in _delegates(pte)
    assert_outputs_close(_run(pte, inputs), expected)


# ---- hand-made graphs against torch ----------------------------------------------------------------


def _nhwc(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).contiguous()


def _run_graph(g: GraphBuilder, inputs: list[torch.Tensor], out_shapes: list, engine=None, **kw) -> list:
    pte = delegate_program(g.payload(), [(list(t.shape), t.dtype) for t in inputs],
                           [(shape, torch.float32) for shape in out_shapes], **kw)
    if engine is not None:
        return list(engine.load_program(pte).load_method("forward").execute(list(inputs)))
    return _run(pte, inputs)


@pytest.mark.parametrize("kind", ["conv", "depthwise", "transposed"])
def test_convolutions_in_nhwc_with_asymmetric_padding_groups_and_fused_clamp(kind):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 9, 10)
    pads = (1, 0, 2, 1)  # top, right, bottom, left
    stride, dil = (2, 3), (1, 2)
    g = GraphBuilder()
    xi = g.input([2, 9, 10, 4])
    if kind == "conv":
        w, b = torch.randn(6, 2, 3, 3), torch.randn(6)  # groups 2: 2 -> 3 channels each
        xw = g.const(w.permute(0, 2, 3, 1).contiguous())
        ref = F.conv2d(F.pad(x, (pads[3], pads[1], pads[0], pads[2])), w, b, stride, 0, dil, 2)
        node = xs.XNNConv2d
        gin, gout, groups, adj = 2, 3, 2, (0, 0)
    elif kind == "depthwise":
        w, b = torch.randn(8, 1, 3, 3), torch.randn(8)  # multiplier 2
        xw = g.const(w.permute(1, 2, 3, 0).contiguous())  # 1HWO
        ref = F.conv2d(F.pad(x, (pads[3], pads[1], pads[0], pads[2])), w, b, stride, 0, dil, 4)
        node = xs.XNNDepthwiseConv2d
        gin, gout, groups, adj = 1, 2, 4, (0, 0)
    else:
        w, b = torch.randn(4, 3, 3, 3), torch.randn(6)  # torch layout [in, out / groups, kh, kw], groups 2
        adj = (1, 2)
        full = F.conv_transpose2d(x, w, None, stride, 0, 0, 2, dil)
        h = (9 - 1) * stride[0] + dil[0] * 2 + 1 + adj[0] - pads[0] - pads[2]
        wd = (10 - 1) * stride[1] + dil[1] * 2 + 1 + adj[1] - pads[1] - pads[3]
        full = F.pad(full, (0, max(0, pads[3] + wd - full.shape[3]), 0, max(0, pads[0] + h - full.shape[2])))
        ref = full[:, :, pads[0]:pads[0] + h, pads[3]:pads[3] + wd] + b.reshape(1, -1, 1, 1)
        # XNNPACK's filter: OHWI per group
        ohwi = w.reshape(2, 2, 3, 3, 3).transpose(1, 2).reshape(6, 2, 3, 3).permute(0, 2, 3, 1).contiguous()
        xw = g.const(ohwi)
        node = xs.XNNConvTranspose2d
        gin, gout, groups = 2, 3, 2
    ref = ref.clamp(-0.5, 2.0)
    xb = g.const(b)
    y = g.output(list(_nhwc(ref).shape))
    g.node(node(pads[0], pads[1], pads[2], pads[3], 3, 3, *stride, *dil, gin, gout, groups, *adj, xi, xw, xb, y),
           mm=(-0.5, 2.0))
    # Every engine built here (the native backend compiles the same payload onto its own kernels).
    for engine in project_runtimes().values():
        (got,) = _run_graph(g, [_nhwc(x)], [list(_nhwc(ref).shape)], engine=engine)
        assert_outputs_close(got, _nhwc(ref))


def test_pooling_counts_only_real_pixels_and_max_pooling_pads_with_minus_infinity():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 7, 8)
    g = GraphBuilder()
    xi = g.input([1, 7, 8, 3])
    avg, mx, gap = g.output([1, 4, 5, 3]), g.output([1, 3, 3, 3]), g.output([1, 1, 1, 3])
    g.node(xs.XNNAvgPooling2d(1, 1, 1, 1, 3, 3, 2, 2, 0, 0, xi, avg, xs.XNN_FLAG_KEEP_DIMS))
    g.node(xs.XNNMaxPooling2d(1, 0, 1, 1, 3, 3, 2, 3, 2, 1, xi, mx), mm=(-1.0, 1.0))
    g.node(xs.XNNGlobalAvgPooling2d(xi, gap, xs.XNN_FLAG_KEEP_DIMS))
    got = _run_graph(g, [_nhwc(x)], [[1, 4, 5, 3], [1, 3, 3, 3], [1, 1, 1, 3]])
    want_avg = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    want_max = F.max_pool2d(F.pad(x, (1, 0, 1, 1), value=-torch.inf), 3, (2, 3), 0, (2, 1)).clamp(-1.0, 1.0)
    assert_outputs_close(got, [_nhwc(want_avg), _nhwc(want_max), _nhwc(x.mean((2, 3), keepdim=True))])


def test_max_pooling_over_channel_blocks_and_filters_of_many_taps():
    # 70 channels: a whole block of the kernel's channel loop and a tail; a 9x9 filter has more
    # taps than the kernel's tap list (its fallback loop); then ResNet's 3x3 stride-2 pool, clamped.
    torch.manual_seed(0)
    x = torch.randn(1, 70, 12, 13)
    g = GraphBuilder()
    xi = g.input([1, 12, 13, 70])
    small, big = g.output([1, 6, 7, 70]), g.output([1, 4, 5, 70])
    g.node(xs.XNNMaxPooling2d(1, 1, 1, 1, 3, 3, 2, 2, 1, 1, xi, small), mm=(-0.5, 1.0))
    g.node(xs.XNNMaxPooling2d(0, 0, 0, 0, 9, 9, 1, 1, 1, 1, xi, big))
    got = _run_graph(g, [_nhwc(x)], [[1, 6, 7, 70], [1, 4, 5, 70]])
    want = [F.max_pool2d(x, 3, 2, 1).clamp(-0.5, 1.0), F.max_pool2d(x, 9, 1)]
    for a, b in zip(got, want):
        assert torch.equal(a, _nhwc(b))


def test_fully_connected_with_transposed_weights_and_no_bias_and_batched_matmul():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 5), torch.randn(4, 5), torch.randn(4)
    m = torch.randn(2, 5, 6)
    g = GraphBuilder()
    xi, mi = g.input([2, 3, 5]), g.input([2, 5, 6])
    y1, y2, y3 = g.output([2, 3, 4]), g.output([2, 3, 4]), g.output([2, 3, 6])
    g.node(xs.XNNFullyConnected(xi, g.const(w), g.const(b), y1), mm=(-1.0, float("inf")))
    g.node(xs.XNNFullyConnected(xi, g.const(w.t().contiguous()), INVALID, y2, xs.XNN_FLAG_TRANSPOSE_WEIGHTS))
    g.node(xs.XNNBatchMatrixMultiply(xi, mi, y3))
    got = _run_graph(g, [x, m], [[2, 3, 4], [2, 3, 4], [2, 3, 6]])
    assert_outputs_close(got, [F.linear(x, w, b).clamp(min=-1.0), x @ w.t(), x @ m])


def test_data_movement_nodes():
    torch.manual_seed(0)
    x, z = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 2)
    g = GraphBuilder()
    xi, zi = g.input([2, 3, 4, 5]), g.input([2, 3, 4, 2])
    outs = [g.output(d) for d in ([2, 5, 3, 4], [6, 20], [2, 2, 2, 3], [3, 5, 4, 6], [2, 3, 4, 9], [2, 6, 8, 5])]
    g.node(xs.XNNStaticTranspose(4, [0, 3, 1, 2], xi, outs[0]))
    g.node(xs.XNNStaticReshape(2, [6, 0], xi, outs[1]))
    g.node(xs.XNNStaticSlice(4, [0, 1, 2, 1], [2, 2, 2, 3], xi, outs[2]))
    g.node(xs.XNNStaticConstantPad([1, 1, 0, 0], [0, 1, 0, 1], 0.5, xi, outs[3]))
    g.node(xs.XNNConcatenate3(3, xi, zi, zi, INVALID, outs[4]))
    g.node(xs.XNNStaticResizeBilinear2D(6, 8, xi, outs[5], xs.XNN_FLAG_ALIGN_CORNERS))
    got = _run_graph(g, [x, z], [[2, 5, 3, 4], [6, 20], [2, 2, 2, 3], [3, 5, 4, 6], [2, 3, 4, 9], [2, 6, 8, 5]])
    resized = F.interpolate(x.permute(0, 3, 1, 2), size=(6, 8), mode="bilinear", align_corners=True)
    assert_outputs_close(got, [x.permute(0, 3, 1, 2), x.reshape(6, 20), x[:, 1:3, 2:4, 1:4],
                               F.pad(x, (0, 1, 0, 0, 1, 1, 1, 0), value=0.5), torch.cat([x, z, z], 3),
                               resized.permute(0, 2, 3, 1)])


def test_transposes_with_a_short_last_dim_walk_the_input_in_order():
    # A last output dim under 16 beside a long input-contiguous dim takes the line-along-the-input
    # loops: NCHW -> NHWC with 3 channels (whole pixels per line), and that dim elsewhere.
    torch.manual_seed(0)
    x, y = torch.randn(2, 3, 18, 20), torch.randn(2, 3, 5, 17)
    g = GraphBuilder()
    xi, yi = g.input([2, 3, 18, 20]), g.input([2, 3, 5, 17])
    dims = ([2, 18, 20, 3], [2, 17, 3, 5], [2, 5, 17, 3], [20, 2, 18, 3])
    outs = [g.output(d) for d in dims]
    g.node(xs.XNNStaticTranspose(4, [0, 2, 3, 1], xi, outs[0]))
    g.node(xs.XNNStaticTranspose(4, [0, 3, 1, 2], yi, outs[1]))
    g.node(xs.XNNStaticTranspose(4, [0, 2, 3, 1], yi, outs[2]))
    g.node(xs.XNNStaticTranspose(4, [3, 0, 2, 1], xi, outs[3]))
    got = _run_graph(g, [x, y], [list(d) for d in dims])
    want = [x.permute(0, 2, 3, 1), y.permute(0, 3, 1, 2), y.permute(0, 2, 3, 1), x.permute(3, 0, 2, 1)]
    for a, b in zip(got, want):
        assert torch.equal(a, b.contiguous())


UNARY = {
    xs.XNNSigmoid: torch.sigmoid, xs.XNNFloor: torch.floor, xs.XNNCeiling: torch.ceil,
    xs.XNNSquareRoot: lambda t: torch.sqrt(t.abs()), xs.XNNReciprocalSquareRoot: lambda t: torch.rsqrt(t.abs()),
    xs.XNNHardswish: F.hardswish, xs.XNNNegate: torch.neg, xs.XNNSquare: torch.square, xs.XNNAbs: torch.abs,
    xs.XNNLog: lambda t: torch.log(t.abs()), xs.XNNGelu: F.gelu, xs.XNNTanh: torch.tanh, xs.XNNExp: torch.exp,
    xs.XNNSin: torch.sin, xs.XNNCos: torch.cos, xs.XNNCopy: lambda t: t, xs.XNNSoftmax: lambda t: t.softmax(-1),
}


@pytest.mark.parametrize("cls", list(UNARY), ids=lambda c: c.__name__[3:])
def test_unary_nodes(cls):
    torch.manual_seed(0)
    x = torch.randn(3, 7) * 3
    needs_positive = cls in (xs.XNNSquareRoot, xs.XNNReciprocalSquareRoot, xs.XNNLog)
    g = GraphBuilder()
    xi, y = g.input([3, 7]), g.output([3, 7])
    src = xi
    if needs_positive:
        src = g.internal([3, 7])
        g.node(xs.XNNAbs(xi, src))
    g.node(cls(src, y))
    assert_outputs_close(_run_graph(g, [x], [[3, 7]]), [UNARY[cls](x)])


def test_parameterised_elementwise_nodes_and_fused_bounds():
    torch.manual_seed(0)
    a, b, slope = torch.randn(2, 3, 4), torch.randn(3, 1), torch.randn(4)
    g = GraphBuilder()
    ai, bi = g.input([2, 3, 4]), g.input([3, 1])
    outs = [g.output([2, 3, 4]) for _ in range(9)]
    g.node(xs.XNNAdd(ai, bi, outs[0]), mm=(-0.5, 0.5))
    g.node(xs.XNNSubtract(ai, bi, outs[1]))
    g.node(xs.XNNMultiply(ai, bi, outs[2]), mm=(0.0, float("inf")))
    g.node(xs.XNNDiv(ai, bi, outs[3]))
    g.node(xs.XNNMinimum(ai, bi, outs[4]))
    g.node(xs.XNNMaximum(ai, bi, outs[5]))
    g.node(xs.XNNPReLU(ai, g.const(slope), outs[6]))
    g.node(xs.XNNLeakyReLU(0.25, ai, outs[7]))
    g.node(xs.XNNELU(1.5, ai, outs[8]))
    got = _run_graph(g, [a, b], [[2, 3, 4]] * 9)
    assert_outputs_close(got, [(a + b).clamp(-0.5, 0.5), a - b, (a * b).clamp(min=0.0), a / b,
                               torch.minimum(a, b), torch.maximum(a, b), torch.where(a >= 0, a, a * slope),
                               F.leaky_relu(a, 0.25), F.elu(a, 1.5)])


def test_dynamic_shapes_resize_outputs_and_infer_the_zero_dim():
    torch.manual_seed(0)
    w = torch.randn(4, 5)
    g = GraphBuilder()
    xi, y = g.input([8, 5]), g.output([2, 4, 4])
    h = g.internal([8, 4])
    g.node(xs.XNNFullyConnected(xi, g.const(w), INVALID, h))
    g.node(xs.XNNStaticReshape(3, [2, 0, 4], h, y))
    pte = delegate_program(g.payload(), [([8, 5], torch.float32)], [([2, 4, 4], torch.float32)], dynamic=True)
    method = PY.load_program(pte).load_method("forward")
    for rows in (8, 6, 2):
        x = torch.randn(rows, 5)
        (got,) = method.execute([x])
        assert got.shape == (2, rows // 2, 4)
        assert_outputs_close(got, (x @ w.t()).reshape(2, -1, 4))


def test_a_channels_last_argument_is_seen_in_memory_order():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 4, 5)
    g = GraphBuilder()
    xi, y = g.input([1, 4, 5, 3]), g.output([1, 4, 5, 3])  # NHWC: the argument's memory order
    g.node(xs.XNNMultiply(xi, g.const(torch.tensor([1.0, 10.0, 100.0])), y))
    pte = delegate_program(g.payload(), [([1, 3, 4, 5], torch.float32, [0, 2, 3, 1])],
                           [([1, 3, 4, 5], torch.float32, [0, 2, 3, 1])])
    (got,) = _run(pte, [x])
    assert_outputs_close(got, x * torch.tensor([1.0, 10.0, 100.0]).reshape(1, 3, 1, 1))


# ---- what the runtime refuses ----------------------------------------------------------------------


def _fc_graph() -> tuple[GraphBuilder, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    w, b = torch.randn(4, 5), torch.randn(4)
    g = GraphBuilder()
    xi, y = g.input([2, 5]), g.output([2, 4])
    h = g.internal([2, 4])
    g.node(xs.XNNFullyConnected(xi, g.const(w), g.const(b), h))
    g.node(xs.XNNTanh(h, y))
    return g, w, b


def _load(payload: bytes):
    pte = delegate_program(payload, [([2, 5], torch.float32)], [([2, 4], torch.float32)])
    return PY.load_program(pte).load_method("forward")


def test_the_fc_graph_runs():
    g, w, b = _fc_graph()
    x = torch.randn(2, 5)
    assert_outputs_close(_load(g.payload()).execute([x]), [torch.tanh(F.linear(x, w, b))])


def _mutated(mutate) -> bytes:
    g, *_ = _fc_graph()
    graph = g.graph()
    mutate(graph)
    return serialize_xnnpack_binary(graph, bytes(g.blob))


def _tv(graph, i):
    return xs.tensor_value(graph.xvalues[i])


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda g: setattr(g.xnodes[1].xnode_union, "input_id", 77), r"value id 77"),
    (lambda g: setattr(g.xnodes[0].xnode_union, "filter_id", 1), r"filter .* should|input channels|ends? in"),
    (lambda g: setattr(_tv(g, 3), "dims", [4, 6]), r"holds 80 bytes .* need 96"),
    (lambda g: setattr(_tv(g, 2), "num_dims", 3), r"declares 3 dims"),
    (lambda g: setattr(g.constant_data[1], "size", 10), r"holds 10 bytes"),
    (lambda g: setattr(g.constant_data[1], "offset", 1 << 40), r"runs past"),
    (lambda g: setattr(_tv(g, 2), "constant_buffer_idx", 9), r"constant index 9"),
    (lambda g: setattr(_tv(g, 0), "external_id", 5), r"external with id 5"),
    (lambda g: setattr(_tv(g, 1), "flags", 8), r"unknown flag bits"),
    (lambda g: setattr(_tv(g, 4), "id_out", 2), r"two values have id 2"),
    (lambda g: g.xnodes.reverse(), r"reads value 2 .* before any node writes it"),
    (lambda g: g.xnodes.pop(), r"never written"),
    (lambda g: setattr(g, "num_externs", 100000), r"num_externs"),
    (lambda g: setattr(g.xnodes[0], "output_min_max", xs.OutputMinMax(1.0, -1.0)), r"not a range"),
    (lambda g: setattr(_tv(g, 0), "datatype", D.xnn_datatype_qpint8), r"qpint8, which this runtime does not run"),
])
def test_inconsistent_graphs_are_refused_at_load(mutate, message):
    with pytest.raises(ExecuTorchError, match=message) as info:
        _load(_mutated(mutate))
    assert "\n" not in str(info.value) and "XnnpackBackend" in str(info.value)


def test_an_unsupported_datatype_combination_names_the_node_kind():
    g = GraphBuilder()
    q = xs.PerTensorQuant(0.1, 0)
    a, b = g.input([2, 3], D.xnn_datatype_qint8, q), g.input([3, 2], D.xnn_datatype_qint8, q)
    y = g.output([2, 2], D.xnn_datatype_qint8, q)
    g.node(xs.XNNBatchMatrixMultiply(a, b, y))
    pte = delegate_program(g.payload(), [([2, 3], torch.int8), ([3, 2], torch.int8)], [([2, 2], torch.int8)])
    with pytest.raises(ExecuTorchError, match=r"node kind BatchMatrixMultiply with xnn_datatype_qint8"):
        PY.load_program(pte).load_method("forward")


def _abs_payload() -> bytes:
    g = GraphBuilder()
    xi, y = g.input([2, 5]), g.output([2, 4])
    g.node(xs.XNNAbs(xi, y))
    return g.payload()


def test_an_unknown_node_tag_is_refused_naming_the_tag():
    payload = _abs_payload()
    abs_tag = xs.XNODE_UNION_TYPES.index(xs.XNNAbs) + 1
    for pos in [i for i, byte in enumerate(payload) if byte == abs_tag]:
        patched = payload[:pos] + bytes([200]) + payload[pos + 1:]
        try:
            deserialize_xnnpack_binary(patched)
        except Exception as e:  # noqa: BLE001
            if "union tag 200" in str(e):
                break
    else:
        pytest.fail("no byte of the payload is the node's union tag")
    with pytest.raises(ExecuTorchError, match=r"union tag 200"):
        _load(patched)


@pytest.mark.parametrize("cut", [0, 7, 31, 60, -9])
def test_truncated_payloads_are_refused(cut):
    payload = _fc_graph()[0].payload()
    with pytest.raises(ExecuTorchError, match="XnnpackBackend"):
        _load(payload[:cut] if cut >= 0 else payload[:len(payload) + cut])


def test_random_corruption_raises_only_executorch_errors():
    g, *_ = _fc_graph()
    payload = g.payload()
    rng = random.Random(0)
    refused = 0
    for _ in range(300):
        data = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            method = _load(bytes(data))
            method.execute([torch.randn(2, 5)])
        except ExecuTorchError:
            refused += 1
    assert refused > 100


def test_scaled_dot_product_attention():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 6)
    scale, mask = torch.full((8,), 0.3), torch.randn(4, 5)
    g = GraphBuilder()
    qi, ki, vi = g.input([2, 3, 4, 8]), g.input([2, 3, 5, 8]), g.input([2, 3, 5, 6])
    y = g.output([2, 3, 4, 6])
    g.node(xs.XNNScaledDotProductAttention(qi, ki, vi, g.const(scale), g.const(mask), y))
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    assert_outputs_close(_run_graph(g, [q, k, v], [[2, 3, 4, 6]]), [want])


def test_a_bare_xn00_flatbuffer_with_inline_constants_runs():
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import convert_to_flatbuffer

    torch.manual_seed(0)
    w = torch.randn(4, 5)
    g = GraphBuilder()
    xi, y = g.input([2, 5]), g.output([2, 4])
    wv = g._add([4, 5], FP32, 0, 1, None)
    g.node(xs.XNNFullyConnected(xi, wv, INVALID, y))
    graph = dataclasses.replace(g.graph(), constant_data=[],
                                constant_buffer=[xs.Buffer(b""), xs.Buffer(w.numpy().tobytes())])
    fb = bytearray(convert_to_flatbuffer(graph))
    fb[4:8] = b"XN00"
    x = torch.randn(2, 5)
    assert_outputs_close(_load(bytes(fb)).execute([x]), [x @ w.t()])


def _q(x: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    return torch.clamp(torch.round(x / scale) + zp, -128, 127)


def test_static_int8_fully_connected_is_within_one_step_of_float_arithmetic():
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 16), torch.randn(8, 16), torch.randn(8)
    sx, zx, sy, zy = 0.03, 3, 0.05, -2
    sw = w.abs().amax(1) / 127
    wq = torch.round(w / sw[:, None]).to(torch.int8)
    bq = torch.round(b / (sx * sw)).to(torch.int32)
    g = GraphBuilder()
    xi, y = g.input([3, 16]), g.output([3, 8])
    qx = g.internal([3, 16], D.xnn_datatype_qint8, xs.PerTensorQuant(sx, zx))
    qy = g.internal([3, 8], D.xnn_datatype_qint8, xs.PerTensorQuant(sy, zy))
    wv = g.const(wq, D.xnn_datatype_qcint8, xs.PerChannelQuant(sw.tolist(), 0))
    bv = g.const(bq, D.xnn_datatype_qcint32, xs.PerChannelQuant((sx * sw).tolist(), 0))
    g.node(xs.XNNConvert(xi, qx))
    g.node(xs.XNNFullyConnected(qx, wv, bv, qy), mm=(0.0, float("inf")))
    g.node(xs.XNNConvert(qy, y))
    (got,) = _run_graph(g, [x], [[3, 8]])
    xd = (_q(x, sx, zx) - zx) * sx
    want = (torch.clamp(_q(F.linear(xd, wq.float() * sw[:, None], bq.float() * sx * sw), sy, zy), zy, 127) - zy) * sy
    assert float((got - want).abs().max()) <= sy * 1.001


def test_dynamic_int8_fully_connected_with_4_bit_block_weights():
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 64), torch.randn(8, 64)
    blocks = w.reshape(8, 2, 32)
    scale = (blocks.abs().amax(-1) / 7).to(torch.bfloat16).float()
    wq = torch.clamp(torch.round(blocks / scale[..., None]), -8, 7).reshape(8, 64).to(torch.int8)
    packed = (wq + 8).to(torch.uint8).reshape(8, 32, 2)
    packed = (packed[..., 0] | (packed[..., 1] << 4)).contiguous()
    g = GraphBuilder()
    xi, y = g.input([2, 3, 64]), g.output([2, 3, 8])
    qx = g.internal([2, 3, 64], D.xnn_datatype_qdint8, xs.PerTokenDynamicQuant(1))
    sidx = g.data(scale.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
    wv = g.const(packed, D.xnn_datatype_qbint4, xs.PerChannelGroupQuant([], 0, 32, [], sidx, 16), dims=[8, 64])
    g.node(xs.XNNConvert(xi, qx))
    g.node(xs.XNNFullyConnected(qx, wv, INVALID, y))
    (got,) = _run_graph(g, [x], [[2, 3, 8]])
    wd = (wq.float().reshape(8, 2, 32) * scale[..., None]).reshape(8, 64)
    exact = x @ wd.t()
    # Per-token int8 activations: each row's error is within half a step times the weights' L1 norm.
    step = (x.amax(-1, keepdim=True).clamp(min=0) - x.amin(-1, keepdim=True).clamp(max=0)) / 255
    bound = step / 2 * wd.abs().sum(1) * 1.01
    assert bool(((got - exact).abs() <= bound).all())
    assert float((got - exact).abs().max()) > 0  # the activations really were quantized
