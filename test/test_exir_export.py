"""End to end: every single-op case and zoo model exports to a `.pte` that runs like eager,
on the project's runtime and (when ET_REFERENCE_PYTHON is set) on the published runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.runtime import Runtime

from conftest import load_zoo, project_runtimes  # noqa: E402
from single_op_models import CASES  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


ZOO = load_zoo()


def _export(model, inputs, dynamic_shapes=None) -> bytes:
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    return to_edge_transform_and_lower(ep).to_executorch().buffer


def assert_matches_eager(outputs: list, expected) -> None:
    assert_outputs_close(outputs, expected)


@pytest.fixture(scope="module")
def exported_cases(tmp_path_factory) -> Path:
    """Every single-op case written once as NAME.pte with its inputs as NAME.in.pt."""
    root = tmp_path_factory.mktemp("single_ops")
    for case in CASES:
        model, inputs = case.factory()
        ds = case.dynamic_shapes() if case.dynamic_shapes else None
        (root / f"{case.name}.pte").write_bytes(_export(model, inputs, ds))
        torch.save(list(inputs), root / f"{case.name}.in.pt")
    return root


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_single_op_runs_on_python_runtime(case, exported_cases):
    model, inputs = case.factory()
    runtime = project_runtimes()["python"]
    method = runtime.load_program(exported_cases / f"{case.name}.pte").load_method("forward")
    assert_matches_eager(method.execute(list(inputs)), model(*inputs))
    if case.resized_inputs:
        resized = case.resized_inputs()
        assert_matches_eager(method.execute(list(resized)), model(*resized))


@pytest.fixture(scope="module")
def reference_results(exported_cases, reference_runtime) -> dict[str, str]:
    return reference_runtime.run_batch(exported_cases, [c.name for c in CASES])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_single_op_runs_on_published_runtime(case, exported_cases, reference_results):
    if case.reference_failure:
        pytest.skip(f"the published runtime cannot run this op: {case.reference_failure}")
    assert case.name not in reference_results, reference_results.get(case.name)
    model, inputs = case.factory()
    assert_matches_eager(torch.load(exported_cases / f"{case.name}.out.pt"), model(*inputs))


def _zoo_export(name: str):
    model, inputs = ZOO.MODELS[name]()
    ds = ZOO.DYNAMIC_SHAPES[name]() if name in ZOO.DYNAMIC_SHAPES else None
    return _export(model, inputs, ds), inputs, model(*inputs)


@pytest.mark.parametrize("runtime", ["python", "native"])
@pytest.mark.parametrize("name", sorted(ZOO.MODELS))
def test_zoo_model_runs_on_project_runtime(name, runtime):
    runtimes = project_runtimes()
    if runtime not in runtimes:
        pytest.skip(f"the {runtime} runtime is not built here (bash tools/run_tests.sh builds it)")
    data, inputs, expected = _zoo_export(name)
    method = runtimes[runtime].load_program(data).load_method("forward")
    assert_matches_eager(method.execute(list(inputs)), expected)


@pytest.mark.parametrize("name", sorted(ZOO.MODELS))
def test_zoo_model_runs_on_published_runtime(name, tmp_path, reference_runtime):
    data, inputs, expected = _zoo_export(name)
    pte = tmp_path / f"{name}.pte"
    pte.write_bytes(data)
    assert_matches_eager(reference_runtime.run(pte, inputs, tmp_path), expected)


def test_mobilenet_v2_size_matches_published_exporter():
    model, inputs = ZOO.MODELS["mobilenet_v2"]()
    size = len(_export(model, inputs))
    published = 13_995_880  # the published 1.5.1 exporter's file for this model and seed
    assert abs(size - published) <= published // 100, size


def test_reads_published_exporters_mobilenet_v2(tmp_path, reference_runtime):
    factory = tmp_path / "factory.py"
    factory.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('mv2', {str(REPO / 'examples/models/mobilenet_v2.py')!r})\n"
        "mv2 = importlib.util.module_from_spec(spec); spec.loader.exec_module(mv2)\n"
        "make = mv2.make_mobilenet_v2\n"
    )
    pte = reference_runtime.export(f"{factory}:make", tmp_path / "published.pte")
    from executorch.exir._serialize import read_program, serialize_pte_binary

    data = pte.read_bytes()
    program = read_program(data)
    assert [p.name for p in program.execution_plan] == ["forward"]
    assert serialize_pte_binary(program) == data
    model, inputs = ZOO.MODELS["mobilenet_v2"]()
    out = Runtime.get().load_program(data).load_method("forward").execute(list(inputs))
    assert_matches_eager(out, model(*inputs))


def test_multi_method_and_constant_methods():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x).relu()

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 3.0

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 4)
    programs = {"forward": torch.export.export(net, (x,)), "scale": torch.export.export(Scale(), (x,))}
    pte = to_edge(programs, constant_methods={"max_len": 128, "table": torch.arange(4.0)}).to_executorch()
    assert pte.methods == {"forward", "scale"}
    assert pte.config_methods == {"max_len", "table"}
    program = Runtime.get().load_program(pte.buffer)
    assert program.method_names == {"forward", "scale", "max_len", "table"}
    assert_outputs_close(program.load_method("forward").execute([x])[0], net(x))
    assert_outputs_close(program.load_method("scale").execute([x])[0], x * 3.0)
    assert program.load_method("max_len").execute([]) == [128]
    assert_outputs_close(program.load_method("table").execute([])[0], torch.arange(4.0))


def test_export_does_not_modify_the_users_program():
    model, inputs = ZOO.MODELS["multi_io"]()
    ep = torch.export.export(model, inputs)
    before = [str(n.target) for n in ep.graph.nodes]
    names = [s.arg.name for s in ep.graph_signature.output_specs]
    to_edge_transform_and_lower(ep).to_executorch().buffer
    assert [str(n.target) for n in ep.graph.nodes] == before
    assert [s.arg.name for s in ep.graph_signature.output_specs] == names


def test_emit_stacktrace_records_the_users_frames():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir._serialize import read_program

    class TwoOps(torch.nn.Module):
        def forward(self, x):
            y = torch.sigmoid(x)
            return y * 2.0

    ep = torch.export.export(TwoOps(), (torch.randn(3),))
    data = to_edge(ep).to_executorch(ExecutorchBackendConfig(emit_stacktrace=True)).buffer
    chain = read_program(data).execution_plan[0].chains[0]
    assert len(chain.stacktrace) == len(chain.instructions) == 2
    innermost = [frames.items[-1] for frames in chain.stacktrace]
    assert [f.context for f in innermost] == ["y = torch.sigmoid(x)", "return y * 2.0"]
    assert all(f.filename.endswith("test_exir_export.py") and f.name == "forward" for f in innermost)
    plain = to_edge(ep).to_executorch().buffer
    assert read_program(plain).execution_plan[0].chains[0].stacktrace is None


class _Cond(torch.nn.Module):
    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda a, b: (a + b).sin(), lambda a, b: (a - b) * 2, (x, y))


def _cond_inputs():
    torch.manual_seed(0)
    x, y = torch.randn(4), torch.randn(4)
    return [(x.abs() + 0.1, y), (-x.abs() - 0.1, y)]  # one input per branch


def test_cond_runs_both_branches_on_project_runtime():
    model = _Cond()
    data = _export(model, _cond_inputs()[0])
    method = project_runtimes()["python"].load_program(data).load_method("forward")
    for inputs in _cond_inputs():
        assert_matches_eager(method.execute(list(inputs)), model(*inputs))


def test_cond_runs_both_branches_on_published_runtime(tmp_path, reference_runtime):
    model = _Cond()
    pte = tmp_path / "cond.pte"
    pte.write_bytes(_export(model, _cond_inputs()[0]))
    for inputs in _cond_inputs():
        assert_matches_eager(reference_runtime.run(pte, inputs, tmp_path), model(*inputs))


class _Consts(torch.nn.Module):
    """Three same-size constants: a and b equal in content (distinct tensors), c equal to them
    except in one middle element, so neither size nor the last bytes tell c apart."""

    def __init__(self):
        super().__init__()
        base = torch.arange(4096, dtype=torch.float32)
        self.register_buffer("a", base.clone())
        self.register_buffer("b", base.clone())
        c = base.clone()
        c[2048] = -1.0
        self.register_buffer("c", c)

    def forward(self, x):
        return x + self.a + self.b * 2 + self.c * 3


def test_constants_stored_once_by_content():
    model = _Consts().eval()
    x = torch.randn(4096)
    program = to_edge_transform_and_lower(torch.export.export(model, (x,))).to_executorch()
    # The scalars 2 and 3 are constants too; count the 4096-element ones.
    storages = [bytes(b.storage) for b in program.executorch_program.constant_buffer if len(b.storage) == 4 * 4096]
    assert len(storages) == 2, "a and b hold the same bytes and must share one buffer; c differs"
    expected = {bytes(model.a.view(torch.uint8).tolist()), bytes(model.c.view(torch.uint8).tolist())}
    assert set(storages) == expected
    assert_matches_eager(Runtime.get().load_program(program.buffer).load_method("forward").execute([x]), model(x))


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.shift = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.lin(x) * self.scale + self.shift


class _Nested(torch.nn.Module):
    """Parameters and buffers on the root and in children, used in another order than registered, a
    batch norm and a lifted constant: where strict export, torch's decomposer and to_edge could differ."""

    def __init__(self):
        super().__init__()
        self.inner = _Inner()
        self.register_buffer("offset", torch.ones(3))
        self.gain = torch.nn.Parameter(torch.full((3,), 0.5))
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x, y):
        return self.bn(self.inner(x) + self.offset * self.gain + torch.tensor([1.0, 2.0, 3.0])) + y


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non_strict"])
@pytest.mark.parametrize("name", ["nested", "vit_tiny"])
def test_edge_program_inputs_are_in_the_order_torchs_decomposer_gives(name, strict):
    """ExecuTorch's to_edge runs torch's decomposer, which lists a program's parameters as the module's
    named_parameters() does and its buffers and constants as named_buffers() does; a strict export lists
    them as the code first uses them. Ours gives torch's order (the placeholders too), so constants, and
    the partitions a vendor backend receives, come in the order the published exporter gives them."""
    torch.manual_seed(0)
    model, inputs = ((_Nested().eval(), (torch.randn(2, 3), torch.randn(2, 3))) if name == "nested"
                     else ZOO.MODELS[name]())
    ep = torch.export.export(model, inputs, strict=strict)
    expected = [(s.kind, s.target or s.arg.name) for s in ep.run_decompositions({}).graph_signature.input_specs]
    edge = to_edge(ep).exported_program()
    assert [(s.kind, s.target or s.arg.name) for s in edge.graph_signature.input_specs] == expected
    assert [s.arg.name for s in edge.graph_signature.input_specs] == [n.name for n in edge.graph.nodes
                                                                      if n.op == "placeholder"]
    if strict and name == "vit_tiny":  # the case the reordering is for: strict order differs
        assert [s.target for s in ep.graph_signature.input_specs][:2] != [t for _, t in expected][:2]
    (out,) = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward").execute(list(inputs))
    assert_outputs_close([out], [model(*inputs)])
