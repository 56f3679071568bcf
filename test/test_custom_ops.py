"""A `torch.library` custom operator with an out variant goes through to_edge and to_executorch and
runs on both engines: the Python runtime runs the `.out` overload registered with torch, the native
runtime a kernel a separate library registers through the public operator registry."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import EdgeCompileConfig, ExportError, to_edge
from executorch.exir._serialize import read_program
from executorch.exir.dialects._ops import ops as exir_ops

HERE = Path(__file__).parent
from conftest import project_runtimes  # noqa: E402

_LIB = torch.library.Library("et_test", "DEF")
_LIB.define("scale_add(Tensor x, Tensor y, float alpha) -> Tensor")
_LIB.define("scale_add.out(Tensor x, Tensor y, float alpha, *, Tensor(a!) out) -> Tensor(a!)")
_LIB.define("no_out(Tensor x) -> Tensor")


def _scale_add(x, y, alpha):
    return x * alpha + y


def _scale_add_out(x, y, alpha, *, out):
    return out.copy_(x * alpha + y)


_LIB.impl("scale_add", _scale_add, "CompositeExplicitAutograd")
_LIB.impl("scale_add.out", _scale_add_out, "CompositeExplicitAutograd")
_LIB.impl("no_out", lambda x: x.clone(), "CompositeExplicitAutograd")
torch.library.register_fake("et_test::scale_add", lambda x, y, alpha: torch.empty_like(x), lib=_LIB)
torch.library.register_fake("et_test::no_out", lambda x: torch.empty_like(x), lib=_LIB)


class ScaleAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.et_test.scale_add(x, y, 2.5)


class Mixed(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.et_test.scale_add(torch.relu(x), y * 2.0, -0.5) + 1.0


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)


def _pte(model) -> bytes:
    return to_edge(torch.export.export(model, _inputs())).to_executorch().buffer


def test_the_custom_op_stays_whole_and_its_out_variant_is_emitted():
    edge = to_edge(torch.export.export(Mixed(), _inputs()))
    targets = {n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.et_test.scale_add.default in targets
    ops = {(o.name, o.overload) for o in read_program(edge.to_executorch().buffer).execution_plan[0].operators}
    assert ("et_test::scale_add", "out") in ops


@pytest.mark.parametrize("model", [ScaleAdd, Mixed])
def test_the_python_runtime_runs_the_out_overload_registered_with_torch(model):
    x, y = _inputs()
    got = project_runtimes()["python"].load_program(_pte(model())).load_method("forward").execute([x, y])
    want = [model()(x, y)]
    assert_outputs_close(got, want)
    with pytest.raises(AssertionError):
        assert_outputs_close([got[0] * 1.001], want)


def test_a_custom_op_without_an_out_variant_is_refused_at_to_edge_naming_it():
    class NoOut(torch.nn.Module):
        def forward(self, x):
            return torch.ops.et_test.no_out(x)

    with pytest.raises(ExportError, match=r"et_test::no_out\.default .*has no out variant.*\.out overload"):
        to_edge(torch.export.export(NoOut(), (torch.randn(2),)))


@pytest.fixture(scope="module")
def custom_op_runner(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed to build the custom kernel library")
    build = tmp_path_factory.mktemp("custom_ops_build")
    for cmd in (["cmake", "-S", str(HERE / "custom_ops"), "-B", str(build), "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release", f"-DEXECUTORCH_SOURCE_DIR={HERE.parent}",
                 f"-DPython3_EXECUTABLE={sys.executable}"],
                ["cmake", "--build", str(build), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return build / "custom_op_runner"


def _run_native(runner: Path, pte: bytes, inputs, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "m.pte").write_bytes(pte)
    args = [str(runner), str(tmp_path / "m.pte")]
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(bytes(x.contiguous().untyped_storage()))
        args.append(str(tmp_path / f"in{i}.bin"))
    return subprocess.run(args + ["--out", str(tmp_path / "out")], capture_output=True, text=True)


def test_the_native_runtime_runs_a_kernel_registered_by_a_separate_library(custom_op_runner, tmp_path):
    x, y = _inputs()
    proc = _run_native(custom_op_runner, _pte(ScaleAdd()), [x, y], tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = torch.frombuffer(bytearray((tmp_path / "out0.bin").read_bytes()), dtype=torch.float32).reshape(3, 5)
    want = [ScaleAdd()(x, y)]
    assert_outputs_close([got], want)
    with pytest.raises(AssertionError):
        assert_outputs_close([got * 1.001], want)


def test_without_the_kernel_library_the_native_runtime_refuses_the_program(custom_op_runner, tmp_path):
    # The same runner runs a program naming an operator no library registered: a load error, no crash.
    pte = bytearray(_pte(ScaleAdd()))
    at = pte.find(b"et_test::scale_add")
    pte[at:at + len(b"et_test::scale_add")] = b"et_test::scale_xyz"
    proc = _run_native(custom_op_runner, bytes(pte), list(_inputs()), tmp_path)
    assert proc.returncode == 1 and "cannot load method" in proc.stderr


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(5, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_preserve_ops_keeps_an_op_with_a_kernel_whole_and_it_runs():
    x = torch.randn(3, 5)
    model = Linear().eval()
    config = EdgeCompileConfig(preserve_ops=[torch.ops.aten.linear.default])
    edge = to_edge(torch.export.export(model, (x,)), compile_config=config)
    targets = {n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.aten.linear.default in targets and exir_ops.edge.aten.addmm.default not in targets
    pte = edge.to_executorch().buffer
    assert ("aten::linear", "out") in {(o.name, o.overload) for o in read_program(pte).execution_plan[0].operators}
    got = project_runtimes()["python"].load_program(pte).load_method("forward").execute([x])
    assert_outputs_close(got, [model(x)])
    # without preserve_ops the same model decomposes
    plain = to_edge(torch.export.export(model, (x,))).exported_program()
    assert exir_ops.edge.aten.linear.default not in {n.target for n in plain.graph.nodes}


@pytest.mark.parametrize("op, why", [
    (torch.ops.aten.scaled_dot_product_attention.default, "has no out variant"),
    (torch.ops.aten.relu_.default, "writes its inputs"),
    ("aten::linear", "not an operator overload"),
])
def test_preserve_ops_refuses_an_op_no_kernel_can_run_whole(op, why):
    ep = torch.export.export(Linear(), (torch.randn(3, 5),))
    with pytest.raises(ExportError, match=f"preserve_ops.*{why}") as err:
        to_edge(ep, compile_config=EdgeCompileConfig(preserve_ops=[op]))
    assert "\n" not in str(err.value)
