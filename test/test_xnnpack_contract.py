"""What the XNNPACK payload writer must never emit, because ExecuTorch's XNNPACK runtime crashes on it.

The published runtime frees the data of every constant a convolution or fully connected node packs
(its filter and bias) once the weights are packed. A value id that such a node packs and another node
also reads therefore points at freed memory when that node runs: the published runtime segfaulted on
`LayerNorm(x + MultiheadAttention(x))` (the attention's zero output-projection bias and the norm's zero
bias were one deduplicated value) and on `l2(relu(l(x)) * l(x) + l.bias)` (one bias, two readers). The
writer now gives the other readers their own value over the same data.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch
from torch import nn

from executorch.backends.xnnpack import XnnpackPartitioner
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import read_program

from conftest import project_runtimes  # noqa: E402

PACKING = (xs.XNNFullyConnected, xs.XNNConv2d, xs.XNNDepthwiseConv2d, xs.XNNConvTranspose2d)


class AttentionNorm(nn.Module):
    """The smallest model of the hostile review's crash: two delegates, zero biases on both sides."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(x + self.attn(x, x, x, need_weights=False)[0])


class BiasTwice(nn.Module):
    """One parameter as a fully connected bias and as an add operand (the published exporter's own
    file for this model crashes the published runtime too)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x):
        y = self.l1(x)
        return self.l2(torch.relu(y) * y + self.l1.bias)


class ZeroBiasConvAdd(nn.Module):
    """A convolution's zero bias and an added zero parameter: equal content, one stored constant."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.shift = nn.Parameter(torch.zeros(8, 1, 1))
        with torch.no_grad():
            self.conv.bias.zero_()

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.shift


CASES = {
    "attention_norm": (AttentionNorm, (2, 32, 64)),
    "bias_twice": (BiasTwice, (2, 32, 64)),
    "zero_bias_conv_add": (ZeroBiasConvAdd, (1, 8, 6, 6)),
}


def _model(name):
    cls, shape = CASES[name]
    torch.manual_seed(0)
    return cls().eval(), (torch.randn(*shape),)


def _lower(model, inputs) -> bytes:
    ep = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _graphs(pte: bytes) -> list:
    program = read_program(pte)
    return [deserialize_xnnpack_binary(bytes(program.segment_data[d.processed.index])).graph
            for plan in program.execution_plan for d in plan.delegates]


def packed_values_read_elsewhere(graph) -> list[str]:
    """Each constant value a packing node packs that another node (or another operand) also reads."""
    packed = {}
    for i, n in enumerate(graph.xnodes):
        op = n.xnode_union
        if isinstance(op, PACKING):
            for f in ("filter_id", "bias_id"):
                vid = getattr(op, f)
                if vid != xs.XNN_INVALID_VALUE_ID and xs.tensor_value(graph.xvalues[vid]).constant_buffer_idx:
                    packed.setdefault(vid, f"{type(op).__name__} node {i} ({f})")
    problems = []
    for i, n in enumerate(graph.xnodes):
        op = n.xnode_union
        for f in dataclasses.fields(op):
            if not f.name.endswith("_id") or f.name.startswith("output"):
                continue
            if isinstance(op, PACKING) and f.name in ("filter_id", "bias_id"):
                continue
            vid = getattr(op, f.name)
            if vid in packed:
                problems.append(f"value {vid}, packed by {packed[vid]}, "
                                f"is also {type(op).__name__} node {i}'s {f.name}")
    return problems


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_packed_constant_is_read_by_another_node(name):
    model, inputs = _model(name)
    graphs = _graphs(_lower(model, inputs))
    assert graphs, "nothing was delegated"
    problems = [p for g in graphs for p in packed_values_read_elsewhere(g)]
    assert not problems, problems


def test_the_check_finds_a_shared_packed_value():
    """The gate itself: a payload where the fully connected bias is the add's operand fails it."""
    model, inputs = _model("bias_twice")
    (graph,) = _graphs(_lower(model, inputs))
    fc = next(n.xnode_union for n in graph.xnodes if isinstance(n.xnode_union, xs.XNNFullyConnected))
    add = next(n.xnode_union for n in graph.xnodes if isinstance(n.xnode_union, xs.XNNAdd))
    add.input2_id = fc.bias_id
    assert packed_values_read_elsewhere(graph)


def _runs_everywhere_like(pte: bytes, inputs, expected: list, path, reference_runtime) -> None:
    """The file at `path` runs on the published runtime (its own process) and on ours, like `expected`."""
    path.write_bytes(pte)
    assert_outputs_close(reference_runtime.run(path, inputs, path.parent), expected)
    for runtime in project_runtimes().values():
        got = runtime.load_program(pte).load_method("forward").execute(list(inputs))
        assert_outputs_close(list(got), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_every_runtime_like_eager(name, tmp_path, reference_runtime):
    """A crash of the published runtime fails here (its own process); every runtime matches eager."""
    model, inputs = _model(name)
    pte = _lower(model, inputs)
    with torch.no_grad():
        expected = [model(*inputs)]
    _runs_everywhere_like(pte, inputs, expected, tmp_path / f"{name}.pte", reference_runtime)


class HalfDeconv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.deconv(torch.softmax(x, -1))


def test_half_precision_deconvolution_stays_off_xnnpack(tmp_path, reference_runtime):
    """XNNPACK refuses a float16 deconvolution at init (the published runtime would not load the
    method): the partitioner leaves it to the portable kernels, and the file runs everywhere."""
    torch.manual_seed(0)
    model, inputs = HalfDeconv().eval().half(), (torch.randn(1, 8, 5, 8).half(),)
    pte = _lower(model, inputs)
    kinds = {type(n.xnode_union).__name__ for g in _graphs(pte) for n in g.xnodes}
    assert "XNNConvTranspose2d" not in kinds, kinds
    with torch.no_grad():
        expected = [model(*inputs)]
    path = tmp_path / "half_deconv.pte"
    path.write_bytes(pte)
    # The published portable kernel accumulates the deconvolution in half precision: a few ulps.
    assert_outputs_close(reference_runtime.run(path, inputs, tmp_path), expected, rtol=4e-3, atol=4e-3)


def test_python_engine_refuses_a_half_precision_deconvolution_by_name(monkeypatch):
    """A payload that holds one anyway (its convolution check switched off here) is refused by our
    Python engine as XNNPACK refuses it, naming the node kind."""
    from executorch.backends.xnnpack.partition.config import ConvolutionConfig

    monkeypatch.setattr(ConvolutionConfig, "check_constraints", lambda self, node, ep: True)
    torch.manual_seed(0)
    model, inputs = HalfDeconv().eval().half(), (torch.randn(1, 8, 5, 8).half(),)
    ep = torch.export.export(model, inputs)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    kinds = {type(n.xnode_union).__name__ for g in _graphs(pte) for n in g.xnodes}
    assert "XNNConvTranspose2d" in kinds
    runtime = project_runtimes()["python"]
    with pytest.raises(Exception, match="ConvTranspose2d on xnn_datatype_fp16 values"):
        runtime.load_program(pte).load_method("forward")


class PoolThenLinear(nn.Module):
    """A max pool (an NHWC op in the payload) whose output a dynamically quantized linear reads."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 8, bias=False)

    def forward(self, x):
        return self.linear(torch.nn.functional.max_pool2d(x, 3, 1, padding=1))


def _moves_qdint8(graph) -> list[str]:
    qd = xs.XNNDatatype.xnn_datatype_qdint8
    return [type(n.xnode_union).__name__ for n in graph.xnodes
            if isinstance(n.xnode_union, (xs.XNNStaticTranspose, xs.XNNStaticReshape))
            and xs.tensor_value(graph.xvalues[n.xnode_union.input_id]).datatype == qd]


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao is not installed")
def test_dynamic_quantization_converts_in_the_program_layout(tmp_path, reference_runtime):
    """XNNPACK moves no per-row quantized (qdint8) value through a transpose or reshape: the
    published runtime refuses to load such a method. The Convert happens in the layout the fully
    connected node reads, after the move back from NHWC."""
    from test_xnnpack_int8 import quantize

    torch.manual_seed(0)
    model, inputs = PoolThenLinear().eval(), (torch.randn(1, 8, 7, 4),)
    graph = quantize(model, inputs, is_dynamic=True)
    pte = _lower(graph, inputs)
    graphs = _graphs(pte)
    assert any(isinstance(n.xnode_union, xs.XNNConvert) for g in graphs for n in g.xnodes)
    assert not [k for g in graphs for k in _moves_qdint8(g)]
    with torch.no_grad():
        expected = [graph(*inputs)]
    path = tmp_path / "pool_linear_qd8.pte"
    path.write_bytes(pte)
    published = reference_runtime.run(path, inputs, tmp_path)
    for runtime in project_runtimes().values():
        got = runtime.load_program(pte).load_method("forward").execute(list(inputs))
        assert_outputs_close(list(got), published, rtol=1e-5, atol=1e-5)
    # Per-row against per-tensor activation quantization: within a few steps of the converted module.
    assert_outputs_close(published, expected, rtol=0.05, atol=0.05)



def test_a_fully_connected_bias_read_at_run_time_is_added_after(tmp_path, reference_runtime):
    """XNNPACK packs a fully connected node's bias at init: one the partition reads at run time (a
    convolution left on portable kernels shares it) crashed the published runtime and our native
    engine refused it. The writer adds such a bias after the product instead. The program is the
    differential tester's that found it (conv2d and linear sharing a bias)."""
    import random_programs as rp

    program = rp.make_program(201000830, "fp32")
    model, inputs = program.module, program.inputs
    pte = _lower(model, inputs)
    for g in _graphs(pte):
        for n in g.xnodes:
            op = n.xnode_union
            if isinstance(op, xs.XNNFullyConnected) and op.bias_id != xs.XNN_INVALID_VALUE_ID:
                assert xs.tensor_value(g.xvalues[op.bias_id]).constant_buffer_idx, "a bias read at run time"
    with torch.no_grad():
        expected = list(model(*inputs))
    _runs_everywhere_like(pte, inputs, expected, tmp_path / "bias_at_run_time.pte", reference_runtime)


def test_a_requantizing_copy_is_two_converts_and_every_runtime_refuses_one(monkeypatch, tmp_path, reference_runtime):
    """The published runtime's XNNPACK defines an int8 Copy (and a StaticConstantPad) only with the input's
    quantization equal to the output's. pt2e quantizes a clone between a
    permute and a multiply at other parameters (the differential tester's p300000998_int8, which the
    published runtime refused to load): the writer now leaves such an op float between two Converts, and
    a payload that holds one anyway (the writer's rule switched off here) is refused by every runtime."""
    import random_programs as rp

    from executorch.backends.xnnpack._passes import quant

    program = rp.make_program(300000998, "int8")
    pte, reference, _ = rp.lower(program)
    copies = [n.xnode_union for g in _graphs(pte) for n in g.xnodes if isinstance(n.xnode_union, xs.XNNCopy)]
    graph = _graphs(pte)[0]

    def quantization(vid):
        return getattr(graph.xvalues[vid].xvalue_union, "quant_params", None)

    assert all(quantization(c.input_id) == quantization(c.output_id) for c in copies), copies
    path = tmp_path / "fixed.pte"
    path.write_bytes(pte)
    reference_runtime.run(path, program.run_inputs, tmp_path)  # loads and runs

    monkeypatch.setattr(quant, "_SAME_PARAMS", set())
    bad, _, _ = rp.lower(program)
    graph = _graphs(bad)[0]
    assert any(quantization(n.xnode_union.input_id) != quantization(n.xnode_union.output_id)
               for n in graph.xnodes if isinstance(n.xnode_union, xs.XNNCopy))
    path = tmp_path / "requantizing_copy.pte"
    path.write_bytes(bad)
    with pytest.raises(AssertionError, match="Failed to load method"):
        reference_runtime.run(path, program.run_inputs, tmp_path)
    for name, runtime in project_runtimes().items():
        with pytest.raises(Exception, match="Copy.*equal quantization") as err:
            runtime.load_program(bad).load_method("forward")
        assert "scale" in str(err.value), (name, err.value)


class LookupTableChain(nn.Module):
    """The differential tester's p310000689_int8, reduced: ten elementwise nodes from the first int8
    add to the linear's input (converts included), which XNNPACK fuses into one lookup table."""

    def __init__(self) -> None:
        super().__init__()
        self.numerator = nn.Parameter(torch.full((1, 1), 1.5), requires_grad=False)
        self.linear = nn.Linear(8, 4)

    def forward(self, x):
        a = torch.log(torch.abs(x) + 0.5)
        return self.linear(torch.ceil(self.numerator / (torch.abs(a) + 0.5)))


def _lookup_table_chain() -> tuple:
    from test_xnnpack_int8 import quantize

    torch.manual_seed(0)
    inputs = (torch.randn(3, 8),)
    converted = quantize(LookupTableChain().eval(), inputs)
    with torch.no_grad():
        expected = [converted(*inputs)]
    return converted, inputs, expected


def _longest_chain(pte: bytes) -> int:
    from executorch.backends.xnnpack.operators.node_visitor import lut_chain_lengths

    return max((d for g in _graphs(pte) for d in lut_chain_lengths(g).values()), default=0)


def test_no_lookup_table_chain_reaches_ten_nodes(monkeypatch, tmp_path, reference_runtime):
    """The published runtime's XNNPACK builds a lookup-table chain in a ten-node scratch subgraph and
    crashes at load when a chain fills it. The writer cuts chains at nine with an identity transpose;
    with the cut switched off, the same program is a ten-node chain and the published runtime dies."""
    pytest.importorskip("torchao")
    from test_xnnpack_int8 import lower

    from executorch.backends.xnnpack.operators import node_visitor

    converted, inputs, expected = _lookup_table_chain()
    pte = lower(converted, inputs)
    assert _longest_chain(pte) <= node_visitor.LUT_CHAIN_LIMIT
    assert any(isinstance(n.xnode_union, xs.XNNStaticTranspose) for g in _graphs(pte) for n in g.xnodes)
    _runs_everywhere_like(pte, inputs, expected, tmp_path / "cut.pte", reference_runtime)

    monkeypatch.setattr(node_visitor, "break_lut_chains", lambda graph: None)
    uncut = lower(converted, inputs)
    assert _longest_chain(uncut) >= 10
    path = tmp_path / "uncut.pte"
    path.write_bytes(uncut)
    with pytest.raises(AssertionError, match="reference runtime failed"):
        reference_runtime.run(path, inputs, tmp_path)


def test_a_clamp_after_a_convolution_is_folded_into_it_as_xnnpack_folds_it(monkeypatch, tmp_path, reference_runtime):
    """XNNPACK merges a Clamp into the convolution that alone feeds it, which then writes the clamp's
    int8 value straight from its accumulator. pt2e quantizes such a clamp at its own range, so our
    engines, running the two nodes, rounded twice and landed one step off on a few values (the
    differential tester's p331002582_int8: depthwise convolution, clamp, convolution). The writer
    folds it, and all three runtimes agree; with the fold switched off, ours differ again."""
    pytest.importorskip("torchao")
    import random_programs as rp

    from executorch.backends.xnnpack.operators import node_visitor

    program = rp.make_program(*rp._program_name("p331002582_int8"))
    pte, _, _ = rp.lower(program)
    assert not [n for g in _graphs(pte) for n in g.xnodes if isinstance(n.xnode_union, xs.XNNClamp)]
    path = tmp_path / "folded.pte"
    path.write_bytes(pte)
    published = reference_runtime.run(path, program.run_inputs, tmp_path)
    for runtime in project_runtimes().values():
        got = runtime.load_program(pte).load_method("forward").execute(list(program.run_inputs))
        assert all(torch.equal(a, b) for a, b in zip(got, published))

    monkeypatch.setattr(node_visitor, "merge_clamps", lambda graph: None)
    unfolded, _, _ = rp.lower(program)
    assert [n for g in _graphs(unfolded) for n in g.xnodes if isinstance(n.xnode_union, xs.XNNClamp)]
    for runtime in project_runtimes().values():
        got = runtime.load_program(unfolded).load_method("forward").execute(list(program.run_inputs))
        assert not all(torch.equal(a, b) for a, b in zip(got, published))


class _MinOfKnownZeros(nn.Module):
    """min(c, c * y) with one [1, 1] constant c = 0: XNNPACK's constant propagation knows c * y is all
    zeros, so with c first its min-to-clamp rewrite keeps c as the clamped value (the differential
    tester's p331004272_fp32_dyn)."""

    def __init__(self):
        super().__init__()
        self.fc, self.low, self.high = nn.Linear(1, 33), nn.Linear(33, 2), nn.Linear(33, 2)
        self.register_buffer("c", torch.zeros(1, 1))

    def forward(self, x):
        zeros = self.c * self.fc(x)
        return self.low(torch.minimum(self.c, zeros)), self.high(torch.maximum(self.c, zeros))


def test_a_one_element_constant_is_the_second_operand_of_min_and_max(monkeypatch, tmp_path, reference_runtime):
    """Minimum and Maximum carry their one-element constant second, where XNNPACK's rewrite into a
    Clamp looks for it. With the constant first the published runtime fails at execute."""
    from executorch.backends.xnnpack.operators import node_visitor

    torch.manual_seed(0)
    model = _MinOfKnownZeros().eval()
    batch = torch.export.Dim("batch", min=1, max=8)

    def lower() -> bytes:
        ep = torch.export.export(model, (torch.randn(8, 1),), dynamic_shapes=({0: batch},))
        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer

    def constant_first(pte: bytes) -> list:
        return [n for g in _graphs(pte) for n in g.xnodes if isinstance(n.xnode_union, (xs.XNNMinimum, xs.XNNMaximum))
                and xs.tensor_value(g.xvalues[n.xnode_union.input1_id]).constant_buffer_idx]

    inputs = (torch.randn(3, 1),)
    pte = lower()
    assert len([n for g in _graphs(pte) for n in g.xnodes
                if isinstance(n.xnode_union, (xs.XNNMinimum, xs.XNNMaximum))]) == 2
    assert not constant_first(pte)
    _runs_everywhere_like(pte, inputs, list(model(*inputs)), tmp_path / "last.pte", reference_runtime)

    monkeypatch.setattr(node_visitor, "static_scalar_last", lambda graph: None)
    first = lower()
    assert len(constant_first(first)) == 2
    path = tmp_path / "first.pte"
    path.write_bytes(first)
    with pytest.raises(AssertionError, match="reference runtime failed"):
        reference_runtime.run(path, inputs, tmp_path)


class _ScalarAfterConvolution(nn.Module):
    """An int8 convolution, then `y - 0.012` with a Python number pt2e leaves float (the differential
    tester's p331004480_int8)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return (y - 0.012) * y


def _mixed_binaries(pte: bytes) -> list[str]:
    def dtype(g, vid):
        return xs.tensor_value(g.xvalues[vid]).datatype

    return [type(n.xnode_union).__name__ for g in _graphs(pte) for n in g.xnodes
            if isinstance(n.xnode_union, xs.XNNNode2x1) and not isinstance(n.xnode_union, xs.XNNPReLU)
            and len({dtype(g, n.xnode_union.input1_id), dtype(g, n.xnode_union.input2_id),
                     dtype(g, n.xnode_union.output_id)}) > 1]


def test_a_number_operand_keeps_an_int8_binary_op_float_and_every_runtime_refuses_a_mix(
        monkeypatch, tmp_path, reference_runtime):
    """A binary op with a Python number operand computes in float between two Converts, as the published
    exporter writes it; written on int8 beside a float constant, the published runtime refuses the file at
    load, and so do both our engines, naming the node and its datatypes."""
    pytest.importorskip("torchao")
    from test_xnnpack_int8 import lower, quantize

    from executorch.backends.xnnpack._passes import quant

    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 8, 8),)
    converted = quantize(_ScalarAfterConvolution().eval(), inputs)
    with torch.no_grad():
        expected = [converted(*inputs)]
    pte = lower(converted, inputs)
    assert not _mixed_binaries(pte)
    assert xs.XNNSubtract in {type(n.xnode_union) for g in _graphs(pte) for n in g.xnodes}
    _runs_everywhere_like(pte, inputs, expected, tmp_path / "float.pte", reference_runtime)

    monkeypatch.setattr(quant, "_BINARY", set())
    mixed = lower(converted, inputs)
    assert _mixed_binaries(mixed) == ["XNNSubtract"]
    path = tmp_path / "mixed.pte"
    path.write_bytes(mixed)
    with pytest.raises(AssertionError, match="reference runtime failed"):
        reference_runtime.run(path, inputs, tmp_path)
    for name, runtime in project_runtimes().items():
        with pytest.raises(Exception, match="mixes datatypes") as err:
            runtime.load_program(mixed).load_method("forward")
        assert "qint8" in str(err.value) and "fp32" in str(err.value), (name, err.value)
