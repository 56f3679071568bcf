"""XnnpackPartitioner + XnnpackBackend.preprocess: every zoo model lowered, run on the published
runtime (real XNNPACK) against eager, and its structure set against the published exporter's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from conftest import zoo_factory_spec  # noqa: E402
from xnnpack_structure import structure  # noqa: E402

from executorch.backends.xnnpack import XnnpackPartitioner  # noqa: E402
from executorch.backends.xnnpack.partition.config import (  # noqa: E402
    ALL_PARTITIONER_CONFIGS, ConvolutionConfig, LinearConfig,
)
from executorch.devtools.compare import assert_outputs_close  # noqa: E402
from executorch.examples.models import MODELS  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir.error import ExportError  # noqa: E402

def _factories() -> dict:
    """The zoo, plus the KV-cache Llama of the LLM example (one method, static cache in buffers)."""
    from executorch.examples.models.llama_kv_cache import make_llama_kv_cache

    return {**MODELS, "llama_kv_cache": make_llama_kv_cache}


FACTORIES = _factories()
ZOO = sorted(FACTORIES)
# The ops that carry a model's arithmetic: ours must take at least as many as the published exporter.
CNNS = ("mobilenet_v2", "resnet18", "resnet50")
COMPUTE_KINDS = ("Conv2d", "DepthwiseConv2d", "ConvTranspose2d", "FullyConnected", "BatchMatrixMultiply")


def _lower(model: nn.Module, inputs: tuple, path: Path, **kwargs) -> Path:
    ep = torch.export.export(model, inputs)
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(**kwargs)]).to_executorch()
    path.write_bytes(program.buffer)
    return path


def _eager(model, inputs) -> list:
    with torch.no_grad():
        return tree_flatten(model(*inputs))[0]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, reference_runtime) -> dict:
    """Each zoo model lowered with XnnpackPartitioner and run on the published runtime in one batch."""
    root = tmp_path_factory.mktemp("xnn_zoo")
    eager = {}
    for name in ZOO:
        model, inputs = FACTORIES[name]()
        _lower(model, inputs, root / f"{name}.pte")
        torch.save(list(inputs), root / f"{name}.in.pt")
        eager[name] = _eager(model, inputs)
    failures = reference_runtime.run_batch(root, ZOO)
    return {"root": root, "eager": eager, "failures": failures}


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_runs_on_published_xnnpack_like_eager(zoo, name):
    assert name not in zoo["failures"], zoo["failures"].get(name)
    actual = torch.load(zoo["root"] / f"{name}.out.pt")
    assert_outputs_close(actual, zoo["eager"][name])


# The published exporter's script cannot export the KV-cache Llama (an in-place cache write on a
# parameter-like leaf under autograd), so the structure comparison covers the zoo proper.
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_structure_at_least_as_good_as_published(zoo, reference_runtime, tmp_path, name):
    ref = structure(reference_runtime.export(zoo_factory_spec(name), tmp_path / "ref.pte", "--xnnpack"))
    ours = structure(zoo["root"] / f"{name}.pte")
    assert ours.delegates <= ref.delegates, (ours.delegates, ref.delegates)
    assert sum(ours.kernel_calls.values()) <= sum(ref.kernel_calls.values()), (ours.kernel_calls, ref.kernel_calls)
    for kind in COMPUTE_KINDS:
        assert ours.node_kinds[kind] >= ref.node_kinds[kind], (kind, ours.node_kinds, ref.node_kinds)
    if name in CNNS:
        # Layout changes: no more NCHW<->NHWC transposes than the published exporter writes (the
        # transformers' transposes are the model's own permutes, which ours claims more of).
        assert ours.node_kinds["StaticTranspose"] <= ref.node_kinds["StaticTranspose"], (ours.node_kinds,
                                                                                         ref.node_kinds)


def test_mobilenet_v2_is_one_delegate_with_no_kernel_calls(zoo):
    s = structure(zoo["root"] / "mobilenet_v2.pte")
    assert s.delegates == 1 and not s.kernel_calls, s
    # Batch norm folded and ReLU6 fused: only the convolutions, adds, pool, reshape and linear remain.
    assert s.node_kinds["Conv2d"] == 35 and s.node_kinds["DepthwiseConv2d"] == 17, s.node_kinds
    assert s.node_kinds["Clamp"] == 0 and s.node_kinds["StaticTranspose"] == 1, s.node_kinds


class _TiedLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(32, 32))

    def forward(self, x):
        return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, self.w)), self.w)


def test_weight_used_twice_is_stored_once(tmp_path, reference_runtime):
    torch.manual_seed(0)
    model, inputs = _TiedLinears().eval(), (torch.randn(4, 32),)
    pte = _lower(model, inputs, tmp_path / "tied.pte")
    s = structure(pte)
    assert s.node_kinds["FullyConnected"] == 2, s.node_kinds
    assert len(s.named_keys) == 1, s.named_keys
    from executorch.exir._serialize._program import deserialize_pte_binary

    named = deserialize_pte_binary(pte.read_bytes()).named_data
    assert [len(b) for b in named.buffers] == [32 * 32 * 4]
    assert_outputs_close(reference_runtime.run(pte, inputs, tmp_path), _eager(model, inputs))


class _Unsupported(nn.Module):
    """cumsum has no XNNPACK form: the convolutions around it are delegated, it is not."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.b(torch.cumsum(torch.relu(self.a(x)), dim=2))


def test_unsupported_op_stays_on_portable_kernels(tmp_path, reference_runtime):
    torch.manual_seed(0)
    model, inputs = _Unsupported().eval(), (torch.randn(1, 3, 16, 16),)
    pte = _lower(model, inputs, tmp_path / "mixed.pte")
    s = structure(pte)
    assert s.delegates == 2 and s.kernel_calls == {"aten::cumsum": 1}, s
    assert_outputs_close(reference_runtime.run(pte, inputs, tmp_path), _eager(model, inputs))


def test_per_op_mode_gives_each_op_its_own_delegate(tmp_path, reference_runtime):
    torch.manual_seed(0)
    model, inputs = _TiedLinears().eval(), (torch.randn(4, 32),)
    pte = _lower(model, inputs, tmp_path / "per_op.pte", per_op_mode=True)
    assert structure(pte).delegates == 3  # linear, relu, linear
    assert_outputs_close(reference_runtime.run(pte, inputs, tmp_path), _eager(model, inputs))


def test_configs_narrow_what_is_claimed(tmp_path):
    torch.manual_seed(0)
    model, inputs = _Unsupported().eval(), (torch.randn(1, 3, 16, 16),)
    s = structure(_lower(model, inputs, tmp_path / "conv_only.pte", configs=[ConvolutionConfig]))
    assert s.delegates == 2 and s.kernel_calls == {"aten::relu": 1, "aten::cumsum": 1}, s


@pytest.mark.parametrize(("kwargs", "names"), [
    ({"config_precisions": ["fp32"]}, "'fp32'"),
    ({"configs": [int]}, "int"),
    ({"force_non_static_weights_for_f32_linear": True}, "force_non_static_weights_for_f32_linear"),
])
def test_unimplemented_options_are_refused_by_name(kwargs, names):
    with pytest.raises(ExportError, match=names):
        XnnpackPartitioner(**kwargs)


def test_every_config_is_exported_by_name():
    import executorch.backends.xnnpack.partition.config as cfg

    assert len({c.target_name for c in ALL_PARTITIONER_CONFIGS}) == len(ALL_PARTITIONER_CONFIGS)
    assert all(getattr(cfg, c.__name__) is c for c in ALL_PARTITIONER_CONFIGS)


class _HalfNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(torch.sigmoid(self.fc(torch.relu(self.conv(x)).mean([2, 3]))))


def test_float16_model_runs_in_xnnpack_in_float16(tmp_path, reference_runtime):
    torch.manual_seed(0)
    model, inputs = _HalfNet().eval().half(), (torch.randn(2, 3, 8, 8).half(),)
    pte = _lower(model, inputs, tmp_path / "half.pte")
    s = structure(pte)
    assert s.delegates == 1 and not s.kernel_calls, s
    (actual,) = reference_runtime.run(pte, inputs, tmp_path)
    assert actual.dtype == torch.float16
    # XNNPACK's fp16 kernels round every intermediate to half precision where torch's CPU kernels
    # keep float32 inside an op: measured 5e-3 apart after conv, mean, linear and layer norm, a few
    # half-precision ulps (9.8e-4 each); a wrong graph is off by order 1.
    assert_outputs_close([actual], _eager(model, inputs), rtol=1e-2, atol=1e-2)


class _DynamicLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 8, bias=False)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        return self.out(torch.relu(self.proj(x)))


def test_linears_over_a_dynamic_length_lower_and_run_at_every_length(tmp_path):
    # One delegate over the dynamic length: the payload holds the upper bound, each call its own length.
    from conftest import project_runtimes

    torch.manual_seed(0)
    model, x = _DynamicLinears().eval(), torch.randn(2, 5, 16)
    ep = torch.export.export(model, (x,), dynamic_shapes=({1: torch.export.Dim("t", min=1, max=12)},))
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    (tmp_path / "m.pte").write_bytes(pte)
    s = structure(tmp_path / "m.pte")
    assert s.delegates == 1 and not s.kernel_calls and s.node_kinds["FullyConnected"] == 2, s
    for name, rt in project_runtimes().items():
        method = rt.load_program(pte).load_method("forward")
        for t in (1, 5, 12):
            inputs = (torch.randn(2, t, 16),)
            assert_outputs_close(method.execute(list(inputs)), _eager(model, inputs))


# Dynamic shapes: the zoo's models with a dynamic dimension (examples.models.DYNAMIC_SHAPES) and the
# KV-cache Llama's prefill (its prompt length a dimension), lowered here and by the published exporter
# with the same dynamic shapes, then run over calls of several token counts.
HERE = Path(__file__).parent


def _dynamic_examples() -> dict:
    """name -> (factory, dynamic-shapes factory, calls of several token counts)."""
    from executorch.examples.models import DYNAMIC_SHAPES
    from executorch.examples.models.llama_kv_cache import make_llama_kv_cache, make_llama_kv_cache_dynamic_shapes

    seqs = [(torch.randn(2, t, 64),) for t in (1, 7, 33, 128)]  # the encoder's batch of 2, width 64, up to 128
    # A 4-token prompt, three single-token decode steps, then a 3-token chunk, all through one cache.
    tokens = [[1, 7, 42, 3], [5], [9], [11], [2, 8, 13]]
    starts = [sum(map(len, tokens[:i])) for i in range(len(tokens))]
    steps = [(torch.tensor([t]), torch.arange(p, p + len(t))) for t, p in zip(tokens, starts)]
    calls = {"transformer_encoder": seqs, "llama_kv_cache": steps}
    examples = {name: (FACTORIES[name], dims, calls[name]) for name, dims in DYNAMIC_SHAPES.items()}
    examples["llama_kv_cache"] = (make_llama_kv_cache, make_llama_kv_cache_dynamic_shapes, steps)
    return examples


DYNAMIC = _dynamic_examples()


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> dict:
    """Each dynamic example lowered here (NAME.pte), and eager's outputs for its calls in order (the
    KV-cache Llama's cache carries over from call to call, in eager as in the program)."""
    root = tmp_path_factory.mktemp("xnn_dynamic")
    want = {}
    for name, (factory, dims, calls) in DYNAMIC.items():
        model, inputs = factory()
        ep = torch.export.export(model, inputs, dynamic_shapes=dims())
        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
        (root / f"{name}.pte").write_bytes(program.buffer)
        model, _ = factory()  # the export ran the model: start eager from a fresh cache
        want[name] = [_eager(model, call) for call in calls]
    return {"root": root, "want": want}


def _factory_spec(factory) -> str:
    import inspect

    return f"{inspect.getsourcefile(factory)}:{factory.__name__}"


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_structure_at_least_as_good_as_published(dynamic, reference_runtime, tmp_path, name):
    ref = structure(reference_runtime.export(_factory_spec(DYNAMIC[name][0]), tmp_path / "ref.pte",
                                             script=HERE / "reference_lower_xnnpack_pt2.py"))
    ours = structure(dynamic["root"] / f"{name}.pte")
    assert ours.delegates <= ref.delegates, (ours.delegates, ref.delegates)
    assert sum(ours.kernel_calls.values()) <= sum(ref.kernel_calls.values()), (ours.kernel_calls, ref.kernel_calls)
    for kind in COMPUTE_KINDS:
        assert ours.node_kinds[kind] >= ref.node_kinds[kind], (kind, ours.node_kinds, ref.node_kinds)
    # Every linear layer is a fully connected node over the dynamic token count.
    model, inputs = DYNAMIC[name][0]()
    assert ours.node_kinds["FullyConnected"] >= sum(isinstance(m, nn.Linear) for m in model.modules())
    # The gate fails on a worse lowering: linears alone leave more kernel calls than the published file.
    ep = torch.export.export(model, inputs, dynamic_shapes=DYNAMIC[name][1]())
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(configs=[LinearConfig])])
    (tmp_path / "linears.pte").write_bytes(program.to_executorch().buffer)
    assert sum(structure(tmp_path / "linears.pte").kernel_calls.values()) > sum(ref.kernel_calls.values())


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_model_on_our_engines_like_eager(dynamic, name, engine):
    from conftest import project_runtimes

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program((dynamic["root"] / f"{name}.pte").read_bytes()).load_method("forward")
    for call, want in zip(DYNAMIC[name][2], dynamic["want"][name]):
        assert_outputs_close(method.execute(list(call)), want)


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_model_on_published_runtime_like_eager(dynamic, reference_runtime, tmp_path, name):
    import shutil
    import subprocess

    shutil.copyfile(dynamic["root"] / f"{name}.pte", tmp_path / "m.pte")
    torch.save([("forward", list(call)) for call in DYNAMIC[name][2]], tmp_path / "m.calls.pt")
    done = subprocess.run([reference_runtime.python, str(HERE / "reference_stateful.py"), str(tmp_path), "m"],
                          capture_output=True, text=True, timeout=1200)
    err = tmp_path / "m.err.txt"
    assert done.returncode == 0 and not err.exists(), (done.stderr[-2000:], err.exists() and err.read_text())
    for got, want in zip(torch.load(tmp_path / "m.out.pt"), dynamic["want"][name]):
        assert_outputs_close(got, want)


class _DynamicViews(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        heads = y.view(x.shape[0], x.shape[1], 2, 4)  # two dynamic dims: XNNPACK infers one at most
        flat = y.reshape(-1, 8)  # one dynamic dim (b * t): a reshape with 0 in XNNPACK
        return heads * 2, flat + 1, y[:, 1:]  # a slice over a dynamic dim stays on portable kernels


def test_dynamic_ops_xnnpack_cannot_take_stay_on_portable_kernels(tmp_path, reference_runtime):
    from conftest import project_runtimes

    torch.manual_seed(0)
    model = _DynamicViews()
    b, t = torch.export.Dim("b", min=1, max=4), torch.export.Dim("t", min=3, max=10)
    ep = torch.export.export(model, (torch.randn(2, 5, 8),), dynamic_shapes=({0: b, 1: t},))
    pte = tmp_path / "m.pte"
    pte.write_bytes(to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    s = structure(pte)
    # The view over symbolic sizes is a memory view of its input (remove_view_copy, the default), as published.
    assert s.kernel_calls["executorch_prim::et_view"] >= 1 and s.kernel_calls["aten::slice_copy"] == 1, s
    assert s.node_kinds["StaticReshape"] == 1 and s.node_kinds["Clamp"] == 1, s
    for bs, ts in [(1, 3), (3, 7), (4, 10)]:
        inputs = (torch.randn(bs, ts, 8),)
        for runtime in project_runtimes().values():
            assert_outputs_close(runtime.load_program(pte.read_bytes()).load_method("forward").execute(list(inputs)),
                                 _eager(model, inputs))
        assert_outputs_close(reference_runtime.run(pte, inputs, tmp_path), _eager(model, inputs))
