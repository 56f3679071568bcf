"""Native load passes: constant dequantizes run once, convolutions on packed channels-last kernels."""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.extension.pybindings import portable_lib  # noqa: E402
from native_fn import load_logged  # noqa: E402

PASSES = re.compile(r"load passes: (\d+) dequantizes run at load, (\d+) convolutions packed "
                    r"\((\d+) ops folded\), (\d+) tensors channels-last, (\d+) int8 chains")


def _pte(model, inputs) -> bytes:
    return to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer


def _load(data: bytes, capfd):
    """The native forward method and what its load passes reported (zeros when they did nothing)."""
    method, log = load_logged(data, capfd)
    found = PASSES.findall(log)
    counts = tuple(int(n) for n in found[-1]) if found else (0, 0, 0, 0, 0)
    return method, dict(zip(("dequantized", "packed", "folded", "channels_last", "int8_chains"), counts))


def _assert_same_at_1_2_and_3_threads(method, x) -> None:
    """The method's output is the same bits at pool sizes 1, 2 and 3 (the `restore_pool_size` fixture puts it back)."""
    outs = []
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        outs.append(method.execute([x])[0])
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).abs().max() / max(ref.double().abs().max().item(), 1e-30))


class _Chain(torch.nn.Module):
    """Every conv shape the pass handles, through batch norm, ReLU6/ReLU/clamp, a residual add and a
    pooled head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 24, 3, stride=2, padding=1)
        self.expand = torch.nn.Conv2d(24, 48, 1, bias=False)
        self.depthwise = torch.nn.Conv2d(48, 48, 3, padding=1, groups=48)
        self.project = torch.nn.Conv2d(48, 24, 1)
        self.bn = torch.nn.BatchNorm2d(24)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)
        self.grouped = torch.nn.Conv2d(24, 36, 3, padding=2, dilation=2, groups=3)
        self.wide = torch.nn.Conv2d(36, 40, (5, 3), stride=(2, 1), padding=(2, 1))
        self.head = torch.nn.Linear(40, 10)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.stem(x))
        z = self.bn(self.project(torch.nn.functional.relu6(self.depthwise(torch.relu(self.expand(y))))))
        y = y + z
        y = torch.clamp(self.grouped(y), -1.0, 2.0)
        y = self.wide(y)
        return self.head(y.mean(dim=(2, 3)))


def test_conv_chain_runs_packed_channels_last_and_matches_eager(capfd):
    torch.manual_seed(0)
    model = _Chain().eval()
    x = torch.randn(2, 3, 37, 41)
    method, passes = _load(_pte(model, (x,)), capfd)
    # Six convolutions packed; the activations after stem, expand, depthwise and grouped and the
    # batch norm after project folded (the memory plan puts depthwise's ReLU6 and grouped's clamp
    # outputs over the convolution's input: those two write through temp memory); the tensors
    # between convolutions channels-last.
    assert passes["packed"] == 6 and passes["folded"] == 5 and passes["channels_last"] >= 6, passes
    out = method.execute([x])[0]
    with torch.no_grad():
        ref = model.double()(x.double())
    assert _rel_err(out, ref) <= 1e-5
    # The gate fails on a wrong answer: one output channel's weights off by 1% is far outside it.
    with torch.no_grad():
        model.wide.weight[0] *= 1.01
        wrong = model(x.double())
    assert _rel_err(out, wrong) > 1e-5


def test_packed_convolutions_are_bit_identical_for_1_2_and_3_threads(restore_pool_size, capfd):
    torch.manual_seed(1)
    model = _Chain().eval()
    x = torch.randn(3, 3, 64, 48)
    method, passes = _load(_pte(model, (x,)), capfd)
    assert passes["packed"] == 6
    _assert_same_at_1_2_and_3_threads(method, x)


class _ChannelsLastIn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _assert_two_packed_and_matches_eager(model, x, capfd) -> None:
    """The program's two convolutions run packed and its output matches eager in float64."""
    method, passes = _load(_pte(model, (x,)), capfd)
    assert passes["packed"] == 2
    out = method.execute([x])[0]
    with torch.no_grad():
        ref = model.double()(x.double())
    assert _rel_err(out, ref) <= 1e-5


def test_channels_last_program_runs_packed_on_its_own_tensors(capfd):
    torch.manual_seed(2)
    model = _ChannelsLastIn().eval().to(memory_format=torch.channels_last)
    x = torch.randn(1, 8, 19, 23).to(memory_format=torch.channels_last)
    _assert_two_packed_and_matches_eager(model, x, capfd)


def test_a_convolution_reading_its_own_weight_as_input_is_left_alone(capfd):
    class InputWeight(torch.nn.Module):
        def forward(self, x, w):
            return torch.nn.functional.conv2d(x, w, padding=1)

    x, w = torch.randn(1, 4, 9, 9), torch.randn(6, 4, 3, 3)
    method, passes = _load(_pte(InputWeight(), (x, w)), capfd)
    assert passes["packed"] == 0
    out = method.execute([x, w])[0]
    assert _rel_err(out, torch.nn.functional.conv2d(x.double(), w.double(), padding=1)) <= 1e-5


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                    reason="torchao is not installed (pip install torchao==0.18.0)")
def test_int8_weights_are_dequantized_once_at_load(capfd):
    from executorch.export import ExportRecipe, StageType, export
    from executorch.export._torch_threads import one_torch_thread
    from executorch.export.portable_recipes import PortableRecipeType

    class ConvLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 16, 3, padding=1)
            self.point = torch.nn.Conv2d(16, 8, 1)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            return self.fc(self.point(torch.relu(self.conv(x))).mean(dim=(2, 3)))

    torch.manual_seed(3)
    model = ConvLinear().eval()
    x = torch.randn(2, 4, 12, 12)
    g = torch.Generator().manual_seed(1)
    with one_torch_thread():
        session = export(model, [(x,)] + [(torch.randn(x.shape, generator=g),) for _ in range(3)],
                         ExportRecipe.get_recipe(PortableRecipeType.INT8))
        converted = session.get_stage_artifacts()[StageType.QUANTIZE].data["forward"]
        with torch.no_grad():
            ref = converted(x)
    plan = session.get_executorch_program().execution_plan[0]
    weights = sum(1 for c in plan.chains[0].instructions
                  if plan.operators[c.instr_args.op_index].name == "quantized_decomposed::dequantize_per_channel")
    assert weights == 3
    method, passes = _load(session.get_pte_buffer(), capfd)
    # Both convolutions run on int8 weights packed at load and the ReLU between them on int8 (three
    # chains), so only the linear's weight is dequantized at load; the int8 tensors between the
    # convolutions are channels-last.
    assert passes["int8_chains"] == 3 and passes["dequantized"] == 1 and passes["packed"] == 0, passes
    assert passes["channels_last"] >= 1, passes
    out = method.execute([x])[0]
    err = float((out - ref).abs().max() / (ref.max() - ref.min()))
    assert err <= 1e-2, f"native int8 differs from the converted module by {err:.3g} of its range"


class _ViewedOutput(torch.nn.Module):
    """The second convolution's output is read only through a flatten the memory plan aliases to
    it (no instruction): it must stay NCHW, and be written where the view reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(5, 12, 3, stride=2, padding=1)
        self.b = torch.nn.Conv2d(12, 7, 1)

    def forward(self, x):
        y = self.b(torch.relu(self.a(x)))
        return y.flatten(2).transpose(1, 2).contiguous() * 2


def test_a_view_the_memory_plan_aliases_keeps_its_tensors_layout(capfd):
    torch.manual_seed(4)
    model = _ViewedOutput().eval()
    x = torch.randn(2, 5, 21, 23)
    _assert_two_packed_and_matches_eager(model, x, capfd)


_needs_torchao = pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                                    reason="torchao is not installed (pip install torchao==0.18.0)")


def _int8_session(model, x, samples: int = 3):
    """`model` exported by the portable INT8 recipe (calibrated on x and `samples` random inputs),
    and the converted pt2e module's and the float model's outputs on x."""
    from executorch.export import ExportRecipe, StageType, export
    from executorch.export._torch_threads import one_torch_thread
    from executorch.export.portable_recipes import PortableRecipeType

    g = torch.Generator().manual_seed(1)
    with one_torch_thread():
        session = export(model, [(x,)] + [(torch.randn(x.shape, generator=g),) for _ in range(samples)],
                         ExportRecipe.get_recipe(PortableRecipeType.INT8))
        converted = session.get_stage_artifacts()[StageType.QUANTIZE].data["forward"]
        with torch.no_grad():
            return session.get_pte_buffer(), converted(x), model(x)


def _moved(a: torch.Tensor, ref: torch.Tensor) -> float:
    """How far `a` is from `ref`, relative to the reference's largest value."""
    return float((a - ref).abs().max() / ref.abs().max())


class _Int8Blocks(torch.nn.Module):
    """MobileNetV2's and ResNet's int8 chains: stem conv + ReLU6, expand / depthwise / project with a
    residual add, a grouped strided conv + clamp, a ReLU after an add, and a pooled head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.expand = torch.nn.Conv2d(16, 48, 1)
        self.depthwise = torch.nn.Conv2d(48, 48, 3, padding=1, groups=48)
        self.project = torch.nn.Conv2d(48, 16, 1)
        self.grouped = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=4, bias=False)
        self.wide = torch.nn.Conv2d(32, 32, (5, 3), padding=(2, 1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.stem(x))
        y = y + self.project(torch.nn.functional.relu6(self.depthwise(torch.nn.functional.relu6(self.expand(y)))))
        y = torch.clamp(self.grouped(y), -2.0, 3.0)
        y = torch.relu(self.wide(y) + y)
        return self.head(y.mean(dim=(2, 3)))


@_needs_torchao
def test_int8_chains_run_int8_kernels_within_quantization_noise_of_the_converted_module(capfd):
    torch.manual_seed(5)
    model = _Int8Blocks().eval()
    x = torch.randn(2, 3, 40, 36)
    pte, converted, eager = _int8_session(model, x)
    method, passes = _load(pte, capfd)
    # Six convolutions on int8 weights packed at load (no float convolution left, no conv weight
    # dequantized at load: only the linear's), both adds and the activations in int8.
    assert passes["packed"] == 0 and passes["dequantized"] == 1, passes
    assert passes["int8_chains"] >= 8, passes
    out = method.execute([x])[0]
    # The QS8 convolution requantizes its exact int32 sum once where the converted module rounds a
    # float convolution: quantization noise, no further from the converted module than the float
    # model is (the rule the XNNPACK int8 tests use).
    bound = 1.5 * _moved(eager, converted)
    assert _moved(out, converted) <= bound, (_moved(out, converted), bound)
    # The gate fails on a wrong answer: the converted module's output for another input.
    with torch.no_grad():
        other = _int8_session(model, torch.randn(x.shape))[1]
    assert _moved(out, other) > bound


@_needs_torchao
def test_int8_chains_are_bit_identical_for_1_2_and_3_threads(restore_pool_size, capfd):
    torch.manual_seed(6)
    model = _Int8Blocks().eval()
    x = torch.randn(3, 3, 64, 48)
    method, passes = _load(_int8_session(model, x)[0], capfd)
    assert passes["int8_chains"] >= 8
    _assert_same_at_1_2_and_3_threads(method, x)


class _Int8Elementwise(torch.nn.Module):
    """Only activations and adds between quantize and dequantize: no convolution."""

    def forward(self, x):
        a = torch.nn.functional.hardtanh(x, -1.0, 1.5)
        b = torch.relu(x * 1.0)
        c = a + b
        return torch.nn.functional.relu6(c) + torch.clamp(c, -0.5, 0.5)


@_needs_torchao
def test_int8_activations_and_adds_are_bit_identical_to_the_converted_module(capfd):
    # They run the float path's own arithmetic (dequantize, op, quantize) fused into one pass.
    torch.manual_seed(7)
    x = torch.randn(2, 8, 13, 11) * 2
    pte, converted, _ = _int8_session(_Int8Elementwise().eval(), x)
    method, passes = _load(pte, capfd)
    # Two chains: add -> q, and dq -> hardtanh -> q reading the add's int8 result though the clamp
    # reads the same dequantize (which stays for it).
    assert passes["int8_chains"] == 2, passes
    assert torch.equal(method.execute([x])[0], converted)


class _ViewThenConv(torch.nn.Module):
    """`view` (exported as a view_copy the memory plan aliases to its source: no instruction) feeding
    a packed convolution; `source` computes what the view shows (the program input when absent)."""

    def __init__(self, view, in_channels: int, kernel: int = 1, source: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.view = view
        self.source = source
        self.conv = torch.nn.Conv2d(in_channels, 4, kernel, padding=kernel // 2)

    def forward(self, x):
        return self.conv(self.view(x if self.source is None else self.source(x)))


_VIEWS_BEFORE_CONV = {
    # A view of the program input (written by the caller, in its own layout).
    "unsqueeze(-1)": (lambda: _ViewThenConv(lambda x: x.unsqueeze(-1), 7), (3, 7, 3)),
    "reshape": (lambda: _ViewThenConv(lambda x: x.reshape(3, 7, 3, 1), 7), (3, 7, 3)),
    "unsqueeze(0)": (lambda: _ViewThenConv(lambda x: x.unsqueeze(0), 7), (7, 3, 1)),
    "unsqueeze(-1) then relu": (lambda: _ViewThenConv(lambda x: torch.relu(x.unsqueeze(-1)), 7), (3, 7, 3)),
    "unflatten, 3x3": (lambda: _ViewThenConv(lambda x: x.unflatten(1, (6, 5)), 6, 3), (2, 30, 9)),
    # A view of another convolution's output (written by an instruction, in that tensor's layout).
    "conv -> view -> conv": (lambda: _ViewThenConv(lambda y: y.view(2, 4, 6, 3), 4, 3, torch.nn.Conv2d(7, 8, 1)),
                             (1, 7, 6, 3)),
    "conv -> view -> relu -> conv": (
        lambda: _ViewThenConv(lambda y: torch.relu(y.reshape(1, 4, 12, 3)), 4, 1, torch.nn.Conv2d(7, 4, 3, padding=1)),
        (1, 7, 6, 6)),
}


@pytest.mark.parametrize("name", list(_VIEWS_BEFORE_CONV))
def test_a_view_feeding_a_packed_convolution_keeps_the_layout_its_memory_was_written_in(name, capfd):
    # The view's memory holds its source's NCHW bytes: making the view channels-last would make the
    # convolution read them as NHWC (the native engine was off by up to 2.3 here, the Python one right).
    from conftest import project_runtimes

    make, shape = _VIEWS_BEFORE_CONV[name]
    torch.manual_seed(8)
    model = make().eval()
    x = torch.randn(*shape)
    pte = _pte(model, (x,))
    method, passes = _load(pte, capfd)
    assert passes["packed"] >= 1, passes
    out = method.execute([x])[0]
    with torch.no_grad():
        ref = model.double()(x.double())
    assert _rel_err(out, ref) <= 1e-5, (name, _rel_err(out, ref))
    python = project_runtimes()["python"].load_program(pte).load_method("forward").execute([x])[0]
    assert _rel_err(python, ref) <= 1e-5


class _Int8ViewThenConvs(torch.nn.Module):
    """An int8 program whose input reaches its convolutions through a view: the quantize after the
    view (layout-free, so a candidate for channels-last) must not relabel the view it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(6, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x.unflatten(1, (6, 5)))))


@_needs_torchao
def test_an_int8_program_with_a_view_before_its_convolutions_matches_the_converted_module(capfd):
    torch.manual_seed(9)
    model = _Int8ViewThenConvs().eval()
    x = torch.randn(2, 30, 9)
    pte, converted, _ = _int8_session(model, x)
    method, passes = _load(pte, capfd)
    assert passes["int8_chains"] >= 1 and passes["channels_last"] >= 1, passes
    # The native engine was off by the converted module's whole range here.
    assert _moved(method.execute([x])[0], converted) <= 1e-3
