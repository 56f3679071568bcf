"""The native C++ runtime through executorch.runtime: results, errors, malformed files."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.devtools.compare import assert_outputs_close
from executorch.runtime import _native  # noqa: E402
from executorch.runtime._backend import Verification  # noqa: E402
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NATIVE = FIXTURES / "native"
MALFORMED = sorted((FIXTURES / "malformed").glob("*.pte"))


def _models():
    spec = importlib.util.spec_from_file_location("native_fixture_models", NATIVE / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(path: Path, inputs, method: str = "forward") -> list:
    program = _native.load_program(path.read_bytes(), Verification.InternalConsistency)
    return program.load_method(method).execute(list(inputs))


@pytest.mark.parametrize("name", ["add", "affine", "cond", "channels_last"])
def test_fixture_matches_eager(name):
    model, inputs = getattr(_models(), f"make_{name}")()
    got = _run(NATIVE / f"{name}.pte", inputs)
    assert_outputs_close(got, model(*inputs))


def test_channels_last_input_and_output_keep_their_values():
    model, (x,) = _models().make_channels_last()
    assert_outputs_close(_run(NATIVE / "channels_last.pte", [x]), [model(x)])
    assert_outputs_close(_run(NATIVE / "channels_last.pte", [x.contiguous()]), [model(x)])


def test_public_api_uses_native(monkeypatch):
    from executorch.runtime import Runtime

    monkeypatch.delenv("EXECUTORCH_RUNTIME", raising=False)
    model, inputs = _models().make_affine()
    runtime = Runtime.get()
    assert runtime.backend == "native"
    method = runtime.load_program(NATIVE / "affine.pte").load_method("forward")
    assert_outputs_close(method.execute(inputs), model(*inputs))


def test_cond_takes_the_false_branch():
    model, (_, x) = _models().make_cond()
    got = _run(NATIVE / "cond.pte", [torch.tensor(False), x])
    assert_outputs_close(got, [x * x])


def test_outputs_are_fresh_tensors():
    program = _native.load_program((NATIVE / "add.pte").read_bytes(), Verification.InternalConsistency)
    method = program.load_method("forward")
    first = method.execute([torch.ones(2, 3), torch.ones(2, 3)])[0]
    method.execute([torch.zeros(2, 3), torch.zeros(2, 3)])
    assert torch.equal(first, torch.full((2, 3), 2.0))


def test_meta_describes_inputs_and_outputs():
    program = _native.load_program((NATIVE / "add.pte").read_bytes(), Verification.InternalConsistency)
    meta = program.method_meta("forward")
    assert meta.num_inputs() == 2 and meta.num_outputs() == 1
    info = meta.input_tensor_meta(0)
    assert info.sizes() == (2, 3) and info.dtype() == 6 and info.nbytes() == 24
    assert info.is_memory_planned()


def test_bad_input_raises_naming_the_input():
    program = _native.load_program((NATIVE / "add.pte").read_bytes(), Verification.InternalConsistency)
    method = program.load_method("forward")
    with pytest.raises(ExecuTorchError, match="input 0"):
        method.execute([torch.ones(3, 2), torch.ones(2, 3)])
    with pytest.raises(ExecuTorchError, match="dtype"):
        method.execute([torch.ones(2, 3, dtype=torch.float64), torch.ones(2, 3)])


def test_missing_operator_is_named():
    data = bytearray((NATIVE / "add.pte").read_bytes())
    at = data.find(b"aten::add")
    data[at + 6:at + 9] = b"qdd"
    program = _native.load_program(bytes(data), Verification.InternalConsistency)
    with pytest.raises(ExecuTorchError, match=r"aten::qdd\.out.*OperatorMissing"):
        program.load_method("forward")


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_malformed_file_is_an_error(path):
    with pytest.raises(ExecuTorchError):
        program = _native.load_program(path.read_bytes(), Verification.InternalConsistency)
        for name in program.method_names:
            method = program.load_method(name)
            inputs = []
            for i in range(method.meta().num_inputs()):
                info = method.meta()._inputs[i]
                inputs.append(torch.ones(info.sizes()) if info is not None else 1)
            method.execute(inputs)


def test_invalid_program_error_kind():
    with pytest.raises(InvalidProgramError, match="InvalidProgram"):
        _native.load_program(bytes(100), Verification.InternalConsistency)


def test_random_and_truncated_files_are_errors():
    rng = random.Random(0)
    whole = (NATIVE / "affine.pte").read_bytes()
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(200))) for _ in range(200)]
    samples += [whole[:n] for n in range(0, len(whole), 7)]
    for data in samples:
        with pytest.raises(ExecuTorchError):
            _native.load_program(data, Verification.InternalConsistency).load_method("forward")


def test_backend_is_native_by_default(monkeypatch):
    from executorch.runtime._backend import select_backend

    monkeypatch.delenv("EXECUTORCH_RUNTIME", raising=False)
    assert select_backend()[0] == "native"


_ZOO = ["mobilenet_v2", "resnet18", "transformer_encoder", "multi_io"]


@pytest.mark.parametrize("name", _ZOO)
def test_reference_exported_model_matches_eager(name, reference_runtime, tmp_path):

    from conftest import load_zoo, zoo_factory_spec

    MODELS = load_zoo().MODELS
    pte = reference_runtime.export(zoo_factory_spec(name), tmp_path / f"{name}.pte")
    model, inputs = MODELS[name]()
    got = _run(pte, inputs)
    with torch.no_grad():
        assert_outputs_close(got, model(*inputs))


def test_bounded_dynamic_batch_resizes_within_bounds():

    from executorch.exir import to_edge_transform_and_lower

    import runtime_models

    model, inputs = runtime_models.FACTORIES["dynamic_mlp"]()
    shapes = runtime_models.DYNAMIC_SHAPES["dynamic_mlp"]()
    pte = to_edge_transform_and_lower(torch.export.export(model, inputs, dynamic_shapes=shapes)).to_executorch()
    method = _native.load_program(bytes(pte.buffer), Verification.InternalConsistency).load_method("forward")
    features = inputs[0].shape[1]
    for batch in (1, 7, 10, 3):
        x = torch.randn(batch, features, generator=torch.Generator().manual_seed(batch))
        got = method.execute([x])[0]
        with torch.no_grad():
            assert_outputs_close([got], [model(x)])
    with pytest.raises(ExecuTorchError, match="input 0"):
        method.execute([torch.randn(11, features)])


@pytest.mark.parametrize("backend", ["native", "python"])
def test_endless_loop_in_a_malformed_program_is_an_error_not_a_hang(backend):

    from conftest import project_runtimes
    from runtime_programs import PlanBuilder

    from executorch.exir._serialize import serialize_pte_binary

    b = PlanBuilder()
    x = b.tensor([2], 0)
    b.inputs, b.outputs = [x], [x]
    b.jump_false(b.bool_(False), 0)  # jumps to itself, forever
    data = serialize_pte_binary(b.program())
    runtime = project_runtimes()[backend]
    with pytest.raises(ExecuTorchError):
        runtime.load_program(data).load_method("forward").execute([torch.ones(2)])


def _add_one_program() -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x + 1

    ep = torch.export.export(AddOne(), (torch.zeros(4, 3),))
    return to_edge_transform_and_lower(ep).to_executorch().buffer


# Tensors whose memory does not read as their values in row-major order: lazily negated or
# conjugated views (the bit says "negate on read"), strides, an offset into storage, a broadcast.
_VIEWS = {
    "neg_view": lambda: torch.arange(12.0).reshape(4, 3)._neg_view(),
    "conj_imag": lambda: (torch.arange(12.0).reshape(4, 3) * (1 + 1j)).conj().imag,
    "conj_imag_dense": lambda: (torch.arange(12.0).reshape(4, 3) * (1 + 1j)).conj().imag.contiguous(),
    "transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "storage_offset": lambda: torch.arange(15.0).reshape(5, 3)[1:],
    "expanded": lambda: torch.arange(3.0).expand(4, 3),
    "channels_last_2d": lambda: torch.arange(12.0).reshape(4, 3, 1, 1).to(memory_format=torch.channels_last)
    .reshape(4, 3),
}


@pytest.mark.parametrize("backend", ["native", "python"])
@pytest.mark.parametrize("case", sorted(_VIEWS))
def test_inputs_are_read_by_value_whatever_their_layout(backend, case):
    from conftest import project_runtimes

    x = _VIEWS[case]()
    method = project_runtimes()[backend].load_program(_add_one_program()).load_method("forward")
    (got,) = method.execute([x])
    assert torch.equal(got, x + 1), (case, got, x + 1)
    assert not got.is_neg() and not got.is_conj()


def test_the_issue_example_conj_imag_is_negative():
    from conftest import project_runtimes
    from executorch.exir import to_edge_transform_and_lower

    class Times1(torch.nn.Module):
        def forward(self, x):
            return x * 1

    pte = to_edge_transform_and_lower(torch.export.export(Times1(), (torch.zeros(1),))).to_executorch().buffer
    x = torch.tensor([3 + 5j]).conj().imag  # -5.0, stored as 5.0 with the negative bit set
    for name, runtime in project_runtimes().items():
        assert runtime.load_program(pte).load_method("forward").execute([x])[0].item() == -5.0, name


@pytest.mark.parametrize("backend", ["native", "python"])
def test_a_sparse_input_is_refused_naming_its_layout(backend):
    from conftest import project_runtimes

    method = project_runtimes()[backend].load_program(_add_one_program()).load_method("forward")
    with pytest.raises(ExecuTorchError, match=r"input 0 .*sparse_coo.*to_dense"):
        method.execute([torch.ones(4, 3).to_sparse()])


def test_empty_bytes_are_named_an_empty_program():
    with pytest.raises(InvalidProgramError, match=r"empty \(0 bytes\); not a \.pte"):
        _native.load_program(b"", Verification.InternalConsistency)
