"""executorch.runtime's public API: loading from every source, methods, metadata, errors, backend choice."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.exir._serialize import serialize_pte_binary
from executorch.exir.error import SerializeError
from executorch.runtime import (
    ExecuTorchError, InvalidProgramError, Method, MethodNotFoundError, Program, ProgramFileError, Runtime, Verification,
)
from executorch.runtime import _backend

from conftest import project_runtimes  # noqa: E402
from runtime_programs import add_program  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def add_pte() -> bytes:
    return serialize_pte_binary(add_program())


def test_loads_from_every_source_kind(add_pte, tmp_path):
    path = tmp_path / "add.pte"
    path.write_bytes(add_pte)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    sources = [path, str(path), add_pte, bytearray(add_pte), memoryview(add_pte), io.BytesIO(add_pte)]
    for source in sources:
        program = Runtime.get().load_program(source, verification=Verification.Minimal)
        assert isinstance(program, Program)
        assert program.method_names == {"forward"}
        method = program.load_method("forward")
        assert isinstance(method, Method)
        (out,) = method.execute([x, y])
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_program_keeps_its_own_copy_of_a_mutable_buffer(add_pte):
    buf = bytearray(add_pte)
    program = Runtime.get().load_program(buf)
    buf[:] = bytes(len(buf))
    x = torch.ones(2, 3)
    assert torch.equal(program.load_method("forward").execute((x, x))[0], 2 * x)


def test_load_method_is_cached_and_outputs_are_fresh(add_pte):
    program = Runtime.get().load_program(add_pte)
    method = program.load_method("forward")
    assert program.load_method("forward") is method
    a = method.execute([torch.ones(2, 3), torch.ones(2, 3)])[0]
    b = method.execute([torch.zeros(2, 3), torch.zeros(2, 3)])[0]
    assert torch.equal(a, torch.full((2, 3), 2.0)) and torch.equal(b, torch.zeros(2, 3))


def test_unknown_method_names_the_known_ones(add_pte):
    program = Runtime.get().load_program(add_pte)
    with pytest.raises(MethodNotFoundError, match=r"no method 'backward'.*'forward'") as info:
        program.load_method("backward")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ExecuTorchError)
    with pytest.raises(MethodNotFoundError):
        program.metadata("backward")


def test_metadata(add_pte):
    program = Runtime.get().load_program(add_pte)
    meta = program.metadata("forward")
    assert meta == program.load_method("forward").metadata
    assert (meta.name(), meta.num_inputs(), meta.num_outputs()) == ("forward", 2, 1)
    info = meta.input_tensor_meta(1)
    assert (info.sizes(), info.dtype(), info.is_memory_planned(), info.nbytes()) == ((2, 3), 6, True, 24)
    assert meta.output_tensor_meta(0).sizes() == (2, 3)
    with pytest.raises(IndexError, match="out of range"):
        meta.input_tensor_meta(2)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([torch.randn(2, 3)], r"takes 2 inputs, got 1"),
        ([torch.randn(2, 3)] * 3, r"takes 2 inputs, got 3"),
        ([torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)],
         r"input 1 .* dtype torch.float32, got torch.float64"),
        ([torch.randn(2, 4), torch.randn(2, 3)], r"input 0 .* shape \[2, 3\], got \[2, 4\]"),
        ([torch.randn(2, 3), 3], r"input 1 .* must be a tensor .* got int"),
    ],
)
def test_bad_inputs_name_the_input(add_pte, inputs, message):
    method = Runtime.get().load_program(add_pte).load_method("forward")
    with pytest.raises(ExecuTorchError, match=message):
        method.execute(inputs)
    # A rejected call leaves the method usable.
    x = torch.randn(2, 3)
    assert torch.equal(method.execute([x, x])[0], x + x)


def test_execute_wants_a_sequence(add_pte):
    method = Runtime.get().load_program(add_pte).load_method("forward")
    with pytest.raises(TypeError, match="list or tuple"):
        method.execute(torch.randn(2, 3))


def test_input_that_requires_grad_is_accepted(add_pte):
    method = Runtime.get().load_program(add_pte).load_method("forward")
    x = torch.randn(2, 3, requires_grad=True)
    (out,) = method.execute([x, x])
    assert not out.requires_grad and torch.equal(out, (x + x).detach())


@pytest.mark.parametrize("data", [b"", b"\x00" * 7, b"not a pte file at all", b"\x10\x00\x00\x00ET12" + b"\xff" * 40])
def test_malformed_bytes_raise_serialize_error(data):
    with pytest.raises(SerializeError):
        Runtime.get().load_program(data)


def test_truncated_and_bit_flipped_files_raise_only_serialize_error(add_pte):
    """Every prefix and many single-byte corruptions: a SerializeError or a working program, nothing else."""
    x = torch.ones(2, 3)
    candidates = [add_pte[:n] for n in range(0, len(add_pte), 7)]
    candidates += [add_pte[:i] + bytes([add_pte[i] ^ 0xFF]) + add_pte[i + 1:] for i in range(0, len(add_pte), 3)]
    for data in candidates:
        try:
            method = Runtime.get().load_program(data).load_method("forward")
            method.execute([x, x])
        except (SerializeError, ExecuTorchError):
            pass


def test_wrong_source_types_are_rejected():
    with pytest.raises(TypeError, match="path, bytes"):
        Runtime.get().load_program(12)
    with pytest.raises(TypeError, match="binary mode"):
        Runtime.get().load_program(io.StringIO("text"))


def test_missing_file_is_a_clear_os_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.pte"):
        Runtime.get().load_program(tmp_path / "missing.pte")


@pytest.mark.parametrize("engine", sorted(project_runtimes()))
@pytest.mark.parametrize("option", ["program", "data_path"])
@pytest.mark.parametrize("case, builtin, says", [
    ("missing", FileNotFoundError, "does not exist"),
    ("directory", IsADirectoryError, "is a directory"),
])
def test_a_path_that_is_not_a_readable_file_is_the_runtimes_error(add_pte, tmp_path, engine, option, case, builtin,
                                                                    says):
    bad = tmp_path / ("weights.ptd" if option == "data_path" else "model.pte")
    if case == "directory":
        bad.mkdir()
    pte = tmp_path / "add.pte"
    pte.write_bytes(add_pte)
    args = (bad,) if option == "program" else (pte,)
    kwargs = {"data_path": bad} if option == "data_path" else {}
    with pytest.raises(ExecuTorchError) as info:
        project_runtimes()[engine].load_program(*args, **kwargs)
    e = info.value
    # Also the builtin error it was, so `except FileNotFoundError` written for it still catches it.
    assert isinstance(e, ProgramFileError) and isinstance(e, builtin) and e.filename == str(bad)
    message = str(e)
    assert message.startswith(f"{'data' if option == 'data_path' else 'program'} file {str(bad)!r} {says}; pass ")
    assert "\n" not in message and "Errno" not in message


@pytest.mark.parametrize("engine", sorted(project_runtimes()))
def test_an_empty_program_file_is_named(tmp_path, engine):
    (tmp_path / "empty.pte").write_bytes(b"")
    with pytest.raises(InvalidProgramError, match=r"program file '.*empty\.pte' is empty; "):
        project_runtimes()[engine].load_program(tmp_path / "empty.pte")


def test_runtime_is_a_singleton_naming_its_backend():
    assert Runtime.get() is Runtime.get()
    assert Runtime.get().backend in ("native", "python")


def test_backend_selection(monkeypatch):
    monkeypatch.setenv(_backend.ENV_VAR, "python")
    assert _backend.select_backend()[0] == "python"
    monkeypatch.setenv(_backend.ENV_VAR, " Python ")
    assert _backend.select_backend()[0] == "python"
    monkeypatch.setenv(_backend.ENV_VAR, "cuda")
    with pytest.raises(ExecuTorchError, match=r"'cuda' is not a runtime; use one of: native, python"):
        _backend.select_backend()


def test_forcing_native_without_it_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "executorch.runtime._native", None)  # import fails as if absent
    monkeypatch.setenv(_backend.ENV_VAR, "native")
    with pytest.raises(ExecuTorchError, match="install the full executorch wheel"):
        _backend.select_backend()
    monkeypatch.delenv(_backend.ENV_VAR)
    assert _backend.select_backend()[0] == "python"


def test_env_var_picks_python_in_a_fresh_process(add_pte, tmp_path):
    path = tmp_path / "add.pte"
    path.write_bytes(add_pte)
    code = ("import torch; from executorch.runtime import Runtime; r = Runtime.get(); "
            f"m = r.load_program({str(path)!r}).load_method('forward'); "
            "print(r.backend, m.execute([torch.ones(2, 3), torch.ones(2, 3)])[0].sum().item())")
    env = dict(os.environ, EXECUTORCH_RUNTIME="python")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["python", "12.0"]


def test_unsupported_load_options_are_refused(add_pte):
    with pytest.raises(ValueError, match="needs enable_etdump=True"):
        Runtime.get().load_program(add_pte, debug_buffer_size=4096)
    with pytest.raises(ExecuTorchError, match="records no ETDump"):
        Runtime.get().load_program(add_pte).write_etdump_result_to_file("never.etdp")
    with pytest.raises(ExecuTorchError, match="data file 'weights.ptd' does not exist"):
        Runtime.get().load_program(add_pte, data_path="weights.ptd")


def _with_a_dangling_reference() -> bytes:
    from executorch.exir import schema as s

    program = add_program()
    program.named_data = [s.NamedData(key="weights", segment_index=3)]
    return serialize_pte_binary(program)


def test_python_engine_honours_verification():
    from executorch.runtime import _python

    bad = _with_a_dangling_reference()
    with pytest.raises(SerializeError, match=r"named_data\[0\] \('weights'\) refers to segment 3"):
        _python.load_program(bad, Verification.InternalConsistency)
    # Minimal trusts the file: the program-wide reference check is skipped, and the method that
    # never reads the named data runs.
    x = torch.randn(2, 3)
    method = _python.load_program(bad, Verification.Minimal).load_method("forward")
    torch.testing.assert_close(method.execute([x, x])[0], 2 * x, rtol=0, atol=0)


def test_native_engine_passes_verification_to_the_loader(add_pte, monkeypatch):
    pytest.importorskip("executorch.extension.pybindings._portable_lib", reason="native runtime not built")
    from executorch.runtime import _native

    asked = []
    real = _native._lib.Program
    monkeypatch.setattr(_native._lib, "Program",
                        lambda data, verify, *rest: asked.append(verify) or real(data, verify, *rest))
    for verification in (Verification.Minimal, Verification.InternalConsistency):
        program = _native.load_program(add_pte, verification)
        assert program.load_method("forward").execute([torch.ones(2, 3), torch.ones(2, 3)])[0].sum() == 12
    assert asked == [False, True]


def test_hand_built_program_with_a_second_method_is_listed():
    first, second = add_program(), add_program()
    second.execution_plan[0].name = "other"
    first.execution_plan.append(second.execution_plan[0])
    program = Runtime.get().load_program(serialize_pte_binary(first))
    assert program.method_names == {"forward", "other"}
    x = torch.ones(2, 3)
    assert torch.equal(program.load_method("other").execute([x, x])[0], 2 * x)


def test_registries_answer_like_upstream():
    runtime = Runtime.get()
    assert isinstance(runtime.backend_registry.registered_backend_names, list)
    assert runtime.backend_registry.is_available("NoSuchBackend") is False
    names = runtime.operator_registry.operator_names
    assert "aten::add.out" in names and "dim_order_ops::_clone_dim_order.out" in names


@pytest.mark.parametrize("missing", ["executorch.extension.pybindings._portable_lib", "executorch.extension.pybindings",
                                     "executorch.runtime._native"])
def test_a_wheel_without_the_native_parts_falls_back_to_python(monkeypatch, missing):
    monkeypatch.delenv(_backend.ENV_VAR, raising=False)
    for name in list(sys.modules):
        if name.startswith(("executorch.runtime._native", "executorch.extension.pybindings")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)
    assert _backend.select_backend()[0] == "python"


def test_a_broken_dependency_of_the_adapter_is_not_hidden(monkeypatch):
    real_import = _backend.importlib.import_module

    def import_module(name):
        if name == "executorch.runtime._native":  # present, but something it needs is broken
            raise ImportError("libfoo.so: cannot open shared object file", name="some_dependency")
        return real_import(name)

    monkeypatch.delenv(_backend.ENV_VAR, raising=False)
    monkeypatch.setattr(_backend.importlib, "import_module", import_module)
    with pytest.raises(ImportError, match="libfoo.so"):
        _backend.select_backend()
