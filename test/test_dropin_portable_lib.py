"""`executorch.extension.pybindings.portable_lib` called as ExecuTorch code calls it, over the native runtime."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.examples.models.mobilenet_v2 import make_mobilenet_v2
from executorch.exir import to_edge

from conftest import project_runtimes  # noqa: E402

NATIVE = project_runtimes().get("native")
needs_native = pytest.mark.skipif(NATIVE is None,
                                  reason="native runtime not built (cmake -DEXECUTORCH_BUILD_PYBIND=ON)")


@pytest.fixture(scope="module")
def mv2(tmp_path_factory):
    model, inputs = make_mobilenet_v2()
    pte = to_edge(torch.export.export(model, inputs)).to_executorch()
    path = tmp_path_factory.mktemp("mv2") / "mv2.pte"
    pte.save(str(path))
    return model, inputs, path


@needs_native
def test_load_for_executorch_runs_mobilenet_v2(mv2):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    model, inputs, path = mv2
    module = _load_for_executorch(str(path))
    assert module.method_names() == {"forward"}
    assert tuple(module.method_meta("forward").input_tensor_meta(0).sizes()) == (1, 3, 224, 224)
    with torch.no_grad():
        expected = model(*inputs)
    (out,) = module.forward(inputs)
    assert_outputs_close(out, expected)
    (again,) = module.run_method("forward", inputs)
    assert_outputs_close(again, expected)
    with pytest.raises(AssertionError):
        assert_outputs_close(-out, expected)


@needs_native
def test_load_from_buffer_and_load_program(mv2):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer, _load_program

    model, inputs, path = mv2
    with torch.no_grad():
        expected = model(*inputs)
    (out,) = _load_for_executorch_from_buffer(path.read_bytes())(inputs)
    assert_outputs_close(out, expected)
    program = _load_program(str(path))
    assert program.num_methods() == 1 and program.get_method_name(0) == "forward"
    (out,) = program.load_method("forward").call(inputs)
    assert_outputs_close(out, expected)


@needs_native
def test_unknown_method_and_bad_etdump_options_are_refused(mv2):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(str(mv2[2]))
    with pytest.raises(RuntimeError, match="no method 'decode'"):
        module.run_method("decode", [])
    assert not module.has_etdump()
    with pytest.raises(RuntimeError, match="enable_etdump=True"):
        module.write_etdump_result_to_file("never.etdp")
    with pytest.raises(ValueError, match="needs enable_etdump=True"):
        _load_for_executorch(str(mv2[2]), debug_buffer_size=1024)


def test_missing_native_extension_gives_a_clear_import_error(monkeypatch):
    # The package the import system consults: a test that re-imported it leaves a stale one as the
    # attribute `import a.b as c` would read.
    pybindings = importlib.import_module("executorch.extension.pybindings")
    monkeypatch.setitem(sys.modules, "executorch.extension.pybindings._portable_lib", None)
    monkeypatch.delattr(pybindings, "_portable_lib", raising=False)
    monkeypatch.delitem(sys.modules, "executorch.extension.pybindings.portable_lib", raising=False)
    with pytest.raises(ImportError, match="EXECUTORCH_BUILD_PYBIND=ON"):
        importlib.import_module("executorch.extension.pybindings.portable_lib")


class _Double(torch.nn.Module):
    def forward(self, x):
        return x + x


@needs_native
def test_one_input_method_takes_its_tensor_and_meta_prints_as_upstream():
    """A lone tensor is one input (as upstream's bindings take it), not a sequence of rows; MethodMeta and
    TensorInfo print as upstream's, dtypes by their C++ names."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    x = torch.ones(2, 2)
    module = _load_for_executorch_from_buffer(to_edge(torch.export.export(_Double(), (x,))).to_executorch().buffer)
    assert torch.equal(module(x)[0], x + x) and torch.equal(module.forward((x,))[0], x + x)
    info = "TensorInfo(sizes=[2, 2], dtype=Float, is_memory_planned=True, nbytes=16)"
    meta = module.method_meta("forward")
    assert str(meta.input_tensor_meta(0)) == info
    assert str(meta) == (f"MethodMeta(name='forward', num_inputs=1, input_tensor_meta=['{info}'], num_outputs=1, "
                         f"output_tensor_meta=['{info}'])")
