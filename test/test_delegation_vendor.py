"""A vendor-style backend (test/vendor_npu), built only on the public delegation API: its
partitioner and preprocess, its Python backend, and its C++ backend as a library of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize import read_program

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "vendor_npu"))
from conftest import project_runtimes  # noqa: E402
from test_delegation import assert_close_rel  # noqa: E402
from vendor_npu import models, python_backend  # noqa: E402
from vendor_npu.partitioner import VendorNpuPartitioner  # noqa: E402
from vendor_npu.preprocess import VendorNpuBackend  # noqa: E402, F401  (the backend must be loaded)

python_backend.register()
REPO = HERE.parent


def _export(factory):
    model, inputs = factory()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[VendorNpuPartitioner()])
    return model, inputs, edge, edge.to_executorch().buffer


def test_the_vendor_partitioner_claims_its_ops_and_keeps_linear_whole():
    _, _, edge, pte = _export(models.mixed)
    top = {n.target.__name__ for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert "aten.relu.default" in top and "aten.convolution.default" not in top
    inside = {n.target.__name__ for i in range(2)
              for n in getattr(edge.exported_program().graph_module, f"lowered_module_{i}").original_module.graph.nodes
              if n.op == "call_function"}
    assert {"aten.linear.default", "aten.convolution.default", "aten.add.Tensor", "aten.mul.Tensor"} <= inside
    program = read_program(pte)
    assert [d.id for d in program.execution_plan[0].delegates] == ["VendorNpuBackend"] * 2
    # conv weight and bias, linear weight and bias, the scale: all named data, none left as constants
    assert len(program.named_data) == 5
    assert all(len(b.storage) == 0 for b in program.constant_buffer)


def test_the_vendor_python_backend_matches_eager():
    runtime = project_runtimes()["python"]
    for factory in (models.mixed, models.all_on_npu):
        model, inputs, _, pte = _export(factory)
        got = runtime.load_program(pte).load_method("forward").execute(list(inputs))
        with torch.no_grad():
            want = model(*inputs)
        assert_close_rel(got, list(want) if isinstance(want, tuple) else [want])


@pytest.fixture(scope="module")
def vendor_runner(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed to build the vendor's C++ backend")
    build = tmp_path_factory.mktemp("vendor_npu_build")
    for cmd in (["cmake", "-S", str(HERE / "vendor_npu" / "cpp"), "-B", str(build), "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release", f"-DEXECUTORCH_SOURCE_DIR={REPO}",
                 f"-DPython3_EXECUTABLE={sys.executable}"],
                ["cmake", "--build", str(build), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return build / "vendor_npu_runner"


def _run_native(runner: Path, pte: bytes, inputs, n_out: int, tmp_path: Path) -> list:
    (tmp_path / "m.pte").write_bytes(pte)
    args = [str(runner), str(tmp_path / "m.pte")]
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(bytes(x.clone().untyped_storage()))
        args.append(str(tmp_path / f"in{i}.bin"))
    proc = subprocess.run(args + ["--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [torch.frombuffer(bytearray((tmp_path / f"out{j}.bin").read_bytes()), dtype=torch.float32)
            for j in range(n_out)]


def test_the_vendor_cpp_backend_runs_the_file_on_the_native_runtime(vendor_runner, tmp_path):
    model, inputs, _, pte = _export(models.all_on_npu)
    with torch.no_grad():
        want = list(model(*inputs))
    got = _run_native(vendor_runner, pte, inputs, len(want), tmp_path)
    assert_close_rel([g.reshape(w.shape) for g, w in zip(got, want)], want)
    with pytest.raises(AssertionError):
        assert_close_rel([got[0].reshape(want[0].shape) * 1.001, got[1].reshape(want[1].shape)], want)


READ_NAMED_DATA = '''
import json, sys
from executorch.exir._serialize._program import deserialize_pte_binary
pte = deserialize_pte_binary(open(sys.argv[1], "rb").read())
named = pte.named_data
print(json.dumps({
    "delegates": [d.id for d in pte.program.execution_plan[0].delegates],
    "named": {k: len(named.buffers[e.buffer_index]) for k, e in named.pte_data.items()},
}))
'''


def test_the_published_reader_decodes_the_named_data(tmp_path):
    import json
    import os

    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    _, _, _, pte = _export(models.mixed)
    (tmp_path / "m.pte").write_bytes(pte)
    (tmp_path / "read.py").write_text(READ_NAMED_DATA)
    proc = subprocess.run([python, str(tmp_path / "read.py"), str(tmp_path / "m.pte")], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    program = read_program(pte)
    ours = {n.key: len(program.segment_data[n.segment_index]) for n in program.named_data}
    assert theirs == {"delegates": ["VendorNpuBackend"] * 2, "named": ours}
    assert sorted(ours.values()) == sorted([4 * 3 * 3 * 3 * 4, 4 * 4, 5 * 144 * 4, 5 * 4, 5 * 4])


def test_two_backends_in_one_program():
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    model, inputs = models.mixed()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[VendorNpuPartitioner(), ExecutorBackendPartitioner()])
    pte = edge.to_executorch().buffer
    ids = [d.id for d in read_program(pte).execution_plan[0].delegates]
    assert sorted(set(ids)) == ["ExecutorBackend", "VendorNpuBackend"]
    got = project_runtimes()["python"].load_program(pte).load_method("forward").execute(list(inputs))
    with torch.no_grad():
        assert_close_rel(got, [model(*inputs)])
