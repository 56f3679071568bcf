"""OpenVINO's backend from the published wheel, laid beside our package (issue 35): DimOrderOpsRevertPass, which its
preprocess runs, and its flow writing the published stack's program, whose payload runs on OpenVINO like the model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SHARED_TOOLS, published_env
from vendor_backends import openvino_backends  # noqa: F401 (fixture)

from executorch.exir import to_edge
from executorch.exir._serialize import read_program

ROOT = Path(__file__).resolve().parents[1]
EXPORT = Path(__file__).with_name("vendor_lower_export.py")
MODELS = ("conv_linear", "mv2")
INSTALL = ("python -m pip install --target ~/.cache/et-openvino-site -r requirements-openvino.txt; "
           "export ET_OPENVINO_PATH=~/.cache/et-openvino-site")


# --- the surface OpenVINO imports -----------------------------------------------------------------------------

class _Copies(torch.nn.Module):
    def forward(self, x):
        y = x.to(torch.float16).to(torch.float32)  # two _to_copy
        return y.clone(memory_format=torch.channels_last) * 2, x.clone()


def test_dim_order_ops_revert_pass_gives_back_memory_format_ops():
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    edge_ops = exir_ops.edge
    x = torch.randn(2, 3, 4, 5)
    gm = to_edge(torch.export.export(_Copies(), (x,))).exported_program().graph_module
    before = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert before.count(edge_ops.dim_order_ops._to_dim_order_copy.default) == 2
    assert before.count(edge_ops.dim_order_ops._clone_dim_order.default) == 2
    result = DimOrderOpsRevertPass()(gm)
    calls = [n for n in result.graph_module.graph.nodes if n.op == "call_function"]
    assert not any("dim_order_ops" in str(n.target) for n in calls)
    copies = [n for n in calls if n.target == edge_ops.aten._to_copy.default]
    clones = [n for n in calls if n.target == edge_ops.aten.clone.default]
    assert [n.kwargs["memory_format"] for n in copies] == [torch.contiguous_format] * 2
    assert {n.kwargs["dtype"] for n in copies} == {torch.float16, torch.float32}
    assert sorted(str(n.kwargs["memory_format"]) for n in clones) == ["torch.channels_last", "torch.contiguous_format"]
    assert not any("dim_order" in n.kwargs for n in calls)
    out = result.graph_module(x)
    expected = _Copies()(x)
    torch.testing.assert_close(out[0], expected[0])
    assert out[0].is_contiguous(memory_format=torch.channels_last)


def test_dim_order_ops_revert_pass_refuses_an_order_no_memory_format_has():
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    class Clone(torch.nn.Module):
        def forward(self, x):
            return x.clone() + 1

    gm = to_edge(torch.export.export(Clone(), (torch.randn(3, 4),))).exported_program().graph_module
    (clone,) = [n for n in gm.graph.nodes if n.target == exir_ops.edge.dim_order_ops._clone_dim_order.default]
    clone.kwargs = {**clone.kwargs, "dim_order": [1, 0]}  # a transposed order: torch has no memory format for it
    with pytest.raises(AssertionError, match=r"\[1, 0\]"):
        DimOrderOpsRevertPass()(gm)


# --- the published OpenVINO flow on this package ---------------------------------------------------------------

def _payloads(pte: Path) -> list[bytes]:
    program = read_program(pte.read_bytes())
    out = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            assert delegate.id == "OpenvinoBackend"
            where = delegate.processed
            out.append(bytes(program.segment_data[where.index] if where.location == 1
                             else program.backend_delegate_data[where.index].data))
    return out


def _tools_path() -> str:
    """The folder holding OpenVINO's tools for both sides (ET_OPENVINO_PATH), or '' when this Python has them."""
    path = os.environ.get("ET_OPENVINO_PATH", "")
    if path:
        if not (Path(path).expanduser() / "openvino").is_dir():
            pytest.skip(f"ET_OPENVINO_PATH={path} holds no openvino package: {INSTALL}")
        return str(Path(path).expanduser())
    try:
        import nncf  # noqa: F401
        import openvino  # noqa: F401
    except ImportError:
        pytest.skip(f"OpenVINO's tools (openvino<2026, nncf) are not installed here: {INSTALL}")
    return ""


class OpenVINOFlows:
    """The export script run once per session on each side, at the same time: on this package (the source tree, or
    the minimal wheel ET_MINIMAL_WHEEL names, installed apart) with OpenVINO's folder beside it, and on the
    published stack (ET_REFERENCE_PYTHON); OpenVINO's tools on both PYTHONPATHs."""

    def __init__(self, backends: Path, root: Path):
        self.tools = _tools_path()
        package = root / "pkg"
        wheel = os.environ.get("ET_MINIMAL_WHEEL")
        if wheel:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(package),
                            wheel], check=True)
        else:
            package.mkdir()
            (package / "executorch").symlink_to(ROOT)
        self.ours, self.theirs = root / "ours", root / "theirs"
        self.ours.mkdir()
        self.theirs.mkdir()
        tools = [self.tools] if self.tools else []
        pipes = {"cwd": root, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        # OpenVINO's package imports ExecuTorch's LLM export manager (LLMEdgeManager) for its LLM weight
        # compression; this package does not provide it, so our side runs with a stand-in module (the flow
        # itself never calls it). The published side runs unchanged.
        procs = [subprocess.Popen([os.environ["ET_REFERENCE_PYTHON"], str(EXPORT), str(self.theirs), "openvino",
                                   *MODELS],
                                  env={**published_env(), "PYTHONPATH": os.pathsep.join(tools)}, **pipes),
                 subprocess.Popen([sys.executable, str(EXPORT), str(self.ours), "openvino", *MODELS,
                                   "--vendor", str(backends), "--stub-llm-builder"],
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join([str(package), *tools])}, **pipes)]
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, err[-3000:]
        assert Path((self.ours / "executorch_from.txt").read_text()) == (package / "executorch").resolve()
        assert Path((self.theirs / "executorch_from.txt").read_text()) != ROOT

    def run(self, code: str, *args: str, python: str = sys.executable, env: dict | None = None) -> str:
        """Run `code` in a Python with OpenVINO's tools (they need numpy<2.4, so not in this process)."""
        base = dict(env if env is not None else os.environ)
        base["PYTHONPATH"] = os.pathsep.join([p for p in (self.tools, str(Path(__file__).parent)) if p])
        proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=600, env=base)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout


@pytest.fixture(scope="module")
def openvino_flows(openvino_backends, tmp_path_factory) -> OpenVINOFlows:  # noqa: F811  (pytest fixture)
    return OpenVINOFlows(openvino_backends, tmp_path_factory.mktemp("openvino"))


@pytest.mark.parametrize("model", MODELS)
def test_openvino_flow_writes_the_published_stacks_program(openvino_flows, model):
    ours, theirs = openvino_flows.ours / f"{model}.pte", openvino_flows.theirs / f"{model}.pte"
    payloads = _payloads(ours)
    assert len(payloads) == 1 and payloads == _payloads(theirs)  # the whole model in one OpenVINO delegate
    assert ours.read_bytes() == theirs.read_bytes()


# The payload is OpenVINO's export of the compiled model: imported by OpenVINO's runtime on this CPU, it computes
# the model. Compiled for the CPU's best precision (bf16 here), so imported with f32 inference to compare closely.
_RUN = """
import io, sys, torch, openvino
from test_vendor_openvino import _payloads
from pathlib import Path
pte, io_file, precision = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(payload,) = _payloads(pte)
config = {"INFERENCE_PRECISION_HINT": precision} if precision != "default" else {}
model = openvino.Core().import_model(io.BytesIO(payload), "CPU", config)
data = torch.load(io_file)
out = torch.from_numpy(model([t.numpy() for t in data["inputs"]])[model.outputs[0]])
ref = data["outputs"]
print(float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)))
print(model.get_property("INFERENCE_PRECISION_HINT"))
"""


@pytest.mark.parametrize("model", MODELS)
def test_the_payload_runs_on_openvino_like_the_model(openvino_flows, model):
    pte, io_file = openvino_flows.ours / f"{model}.pte", openvino_flows.ours / f"{model}.io.pt"
    error, precision = openvino_flows.run(_RUN, str(pte), str(io_file), "f32").splitlines()
    assert float(error) < 1e-4 and precision == "<Type: 'float32'>", (error, precision)
    # The gate sees a wrong result: the same check against other outputs fails.
    data = torch.load(io_file)
    wrong = openvino_flows.ours / f"{model}.wrong.pt"
    torch.save({"inputs": data["inputs"], "outputs": data["outputs"] * 1.01}, wrong)
    assert float(openvino_flows.run(_RUN, str(pte), str(wrong), "f32").splitlines()[0]) > 1e-3


def test_the_published_runtime_runs_our_program_with_openvino(openvino_flows, tmp_path):
    """The published pybindings hold OpenvinoBackend, which loads OpenVINO's C library at run time."""
    if not openvino_flows.tools:
        pytest.skip("needs the OpenVINO folder (ET_OPENVINO_PATH) for the published runtime's library path")
    data = torch.load(openvino_flows.ours / "conv_linear.io.pt")
    torch.save(list(data["inputs"]), tmp_path / "in.pt")
    env = {**published_env(), "PYTHONPATH": openvino_flows.tools,
           "LD_LIBRARY_PATH": str(Path(openvino_flows.tools) / "openvino" / "libs")}
    proc = subprocess.run([os.environ["ET_REFERENCE_PYTHON"], str(SHARED_TOOLS / "run_pte.py"),
                           str(openvino_flows.ours / "conv_linear.pte"), "--inputs", str(tmp_path / "in.pt"),
                           "--outputs", str(tmp_path / "out.pt")], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (out,) = torch.load(tmp_path / "out.pt")
    ref = data["outputs"]
    # OpenVINO runs it in the CPU's best precision (bf16 here): within bf16's error, not f32's.
    assert float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)) < 2e-2
