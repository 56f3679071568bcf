"""The C++ SDK (tools/cmake/sdk): its installed layout, exported symbols, CMake package, and the
example app and vendor backend built against it alone, matching eager on exported programs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge

HERE = Path(__file__).parent
REPO = HERE.parent
from conftest import load_zoo  # noqa: E402

BUILD = REPO / "cmake-out"
COMPONENTS = ("sdk_runtime", "sdk_kernels", "sdk_module", "sdk_data_loader")


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


def _check(cmd, **kwargs) -> str:
    proc = _run(cmd, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def sdk_prefix(tmp_path_factory) -> Path:
    """The SDK to test: ET_SDK_PREFIX (an installed wheel's, set by CI), else cmake-out/ installed to a temp dir."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed to build against the SDK")
    given = os.environ.get("ET_SDK_PREFIX")
    if given:
        return Path(given)
    if not (BUILD / "tools" / "cmake" / "sdk" / "lib" / "libexecutorch.so").is_file():
        pytest.skip("no SDK built in cmake-out/: run tools/run_tests.sh (it builds one)")
    prefix = tmp_path_factory.mktemp("sdk")
    for component in COMPONENTS:
        _check(["cmake", "--install", BUILD, "--prefix", prefix, "--component", component, "--strip"])
    return prefix


def _configure_and_build(source: Path, build: Path, prefix: Path, *extra: str) -> None:
    _check(["cmake", "-S", source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_PREFIX_PATH={prefix}", *extra])
    _check(["cmake", "--build", build, "-j2"])


@pytest.fixture(scope="module")
def run_pte(sdk_prefix, tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("example_build")
    _configure_and_build(REPO / "examples" / "cpp", build, sdk_prefix)
    return build / "run_pte"


def _run_app(app: Path, pte: Path, inputs, tmp_path: Path) -> list[torch.Tensor]:
    args = [app, pte]
    for i, x in enumerate(inputs):
        path = tmp_path / f"in{i}.bin"
        path.write_bytes(bytes(x.contiguous().untyped_storage()))
        args += ["--input", path]
    out = _check(args + ["--out", tmp_path / "out"])
    results = []
    for j, line in enumerate(re.findall(r"^output (\d+): float32 \[([0-9, ]*)\]", out, re.M)):
        shape = [int(s) for s in line[1].split(", ")] if line[1] else []
        data = bytearray((tmp_path / f"out{j}.bin").read_bytes())
        results.append(torch.frombuffer(data, dtype=torch.float32).reshape(shape))
    return results


def _write(pte: bytes, path: Path) -> Path:
    path.write_bytes(pte)
    return path


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x, y):
        return self.fc(torch.relu(self.conv(x)).flatten(1)) * y, x.sum()


def _small():
    torch.manual_seed(1)
    return SmallNet().eval(), (torch.randn(2, 3, 8, 8), torch.randn(2, 5))


def _export(model, inputs) -> bytes:
    return to_edge(torch.export.export(model, inputs)).to_executorch().buffer


def test_layout_headers_and_package_files(sdk_prefix):
    lib = sdk_prefix / "lib"
    for name in ("libexecutorch.so", "libportable_kernels.so", "libextension_module.so",
                 "libextension_data_loader.so", "libexecutorch.a",
                 "libexecutorch_core.a", "libexecutor_backend.a", "libportable_kernels.a", "libkernels_cpu.a",
                 "libxnnpack_backend.a",
                 "cmake/executorch/executorch-config.cmake", "cmake/executorch/executorch-config-version.cmake"):
        assert (lib / name).is_file(), name
    for name in ("executorch-config.cmake", "executorch-config-version.cmake"):
        assert (sdk_prefix / "share" / "cmake" / name).is_file(), name
    include = sdk_prefix / "include" / "executorch"
    for header in ("runtime/executor/program.h", "runtime/executor/method.h", "runtime/kernel/operator_registry.h",
                   "runtime/backend/interface.h", "extension/module/module.h", "extension/tensor/tensor.h",
                   "runtime/core/data_loader.h", "extension/data_loader/file_data_loader.h",
                   "extension/data_loader/mmap_data_loader.h", "extension/data_loader/buffer_data_loader.h"):
        assert (include / header).is_file(), header
    # Internal: it needs the generated FlatBuffers headers, which are not shipped.
    assert not (include / "runtime/executor/flatbuffer_util.h").exists()
    assert not list(include.rglob("*.cpp"))


def _dynamic_symbols(path: Path) -> list[str]:
    out = _check(["nm", "-D", "-C", "--defined-only", path])
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]


def test_libraries_export_only_the_public_api_and_find_each_other_relatively(sdk_prefix):
    lib = sdk_prefix / "lib"
    exported = _dynamic_symbols(lib / "libexecutorch.so")
    assert any(s.startswith("executorch::runtime::Program::load(") for s in exported)
    assert any(s.startswith("executorch::runtime::register_backend(") for s in exported)
    foreign = [s for s in exported if not re.match(r"(executorch::|et_pal_)", s)]
    assert not foreign, f"libexecutorch.so exports beyond the public API: {foreign[:10]}"
    assert not [s for s in _dynamic_symbols(lib / "libportable_kernels.so") if "::" in s]
    for name in ("libportable_kernels.so", "libextension_module.so"):
        dynamic = _check(["readelf", "-d", lib / name])
        assert re.search(r"\((?:RUNPATH|RPATH)\).*\[\$ORIGIN\]", dynamic), dynamic
        assert "libexecutorch.so" in dynamic


def test_example_app_matches_eager_and_the_gate_catches_a_wrong_answer(run_pte, tmp_path):
    model, inputs = _small()
    pte = _write(_export(model, inputs), tmp_path / "small.pte")
    got = _run_app(run_pte, pte, inputs, tmp_path)
    with torch.no_grad():
        want = list(model(*inputs))
    assert_outputs_close(got, want)
    with pytest.raises(AssertionError):
        assert_outputs_close([got[0] * 1.001, got[1]], want)


def test_data_loaders_read_the_same_program_and_refuse_a_truncated_one(run_pte, tmp_path):
    pte_info = run_pte.parent / "pte_info"
    model, inputs = _small()
    data = _export(model, inputs)
    pte = _write(data, tmp_path / "small.pte")
    listings = {}
    for loader in ("file", "mmap", "buffer"):
        out = _check([pte_info, pte, "--loader", loader])
        assert out.startswith(f"loader: {loader}\n")
        listings[loader] = out.split("\n", 1)[1]
    assert listings["file"] == "methods: 1\nmethod forward: 2 inputs, 2 outputs\n"
    assert listings["mmap"] == listings["file"] == listings["buffer"]
    cut = _write(data[: len(data) // 2], tmp_path / "cut.pte")
    for loader in ("file", "mmap", "buffer"):
        proc = _run([pte_info, cut, "--loader", loader])
        assert proc.returncode == 1 and "InvalidProgram" in proc.stderr, proc.stderr
    missing = _run([pte_info, tmp_path / "missing.pte", "--loader", "mmap"])
    assert missing.returncode == 1 and "cannot open" in missing.stderr


def test_example_app_runs_mobilenet_v2_from_our_exporter(run_pte, tmp_path):
    model, inputs = load_zoo().make_mobilenet_v2()
    pte = _write(_export(model, inputs), tmp_path / "mv2.pte")
    with torch.no_grad():
        want = [model(*inputs)]
    assert_outputs_close(_run_app(run_pte, pte, inputs, tmp_path), want)


def test_example_app_runs_mobilenet_v2_from_the_published_exporter(run_pte, reference_runtime, tmp_path):
    factory = f"{REPO / 'examples' / 'models' / 'mobilenet_v2.py'}:make_mobilenet_v2"
    pte = reference_runtime.export(factory, tmp_path / "mv2_ref.pte")
    model, inputs = load_zoo().make_mobilenet_v2()
    with torch.no_grad():
        want = [model(*inputs)]
    assert_outputs_close(_run_app(run_pte, pte, inputs, tmp_path), want)


def test_example_app_runs_a_published_xnnpack_file_on_the_sdk_xnnpack_backend(run_pte, tmp_path):
    fixtures = HERE / "fixtures" / "xnnpack"
    sys.path.insert(0, str(fixtures))
    import make_seeds

    inputs = make_seeds.inputs()
    with torch.no_grad():
        want = list(make_seeds.model()(*inputs))
    assert_outputs_close(_run_app(run_pte, fixtures / "ops_fp32.pte", inputs, tmp_path), want)


def test_the_static_archives_build_the_same_app(sdk_prefix, tmp_path):
    build = tmp_path / "static_build"
    _configure_and_build(REPO / "examples" / "cpp", build, sdk_prefix, "-DEXECUTORCH_EXAMPLE_STATIC=ON")
    assert "libexecutorch.so" not in _check(["readelf", "-d", build / "run_pte"])
    model, inputs = _small()
    pte = _write(_export(model, inputs), tmp_path / "small.pte")
    with torch.no_grad():
        assert_outputs_close(_run_app(build / "run_pte", pte, inputs, tmp_path), list(model(*inputs)))


CONSUMER = """cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(executorch REQUIRED COMPONENTS {components})
message(STATUS "vars: ${{EXECUTORCH_LIBRARIES}}|${{EXECUTORCH_CXX_STANDARD}}|${{EXECUTORCH_COMPILE_DEFINITIONS}}")
"""


def _configure_consumer(prefix: Path, tmp_path: Path, components: str) -> subprocess.CompletedProcess:
    src = tmp_path / "consumer"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(CONSUMER.format(components=components))
    return _run(["cmake", "-S", src, "-B", tmp_path / "consumer-build", "-G", "Ninja",
                 f"-DCMAKE_PREFIX_PATH={prefix}"])


def test_package_variables_and_a_missing_component_fails_configure_naming_it(sdk_prefix, tmp_path):
    ok = _configure_consumer(sdk_prefix, tmp_path, "kernels_portable")
    assert ok.returncode == 0, ok.stderr
    assert "vars: executorch::kernels_portable;executorch::runtime|17|ET_LOG_ENABLED=1" in ok.stdout
    bad = _configure_consumer(sdk_prefix, tmp_path, "runtime backend_nope")
    assert bad.returncode != 0
    assert "executorch has no component 'backend_nope'" in bad.stderr


def test_a_component_whose_library_is_gone_fails_configure_naming_it(sdk_prefix, tmp_path):
    prefix = tmp_path / "partial"
    shutil.copytree(sdk_prefix, prefix, symlinks=True)
    (prefix / "lib" / "libportable_kernels.so").unlink()
    proc = _configure_consumer(prefix, tmp_path, "runtime kernels_portable")
    assert proc.returncode != 0
    assert "executorch component 'kernels_portable' is not installed" in proc.stderr


def test_the_vendor_backend_builds_against_the_sdk_and_matches_eager(sdk_prefix, tmp_path):
    sys.path.insert(0, str(HERE / "vendor_npu"))
    from vendor_npu import native_check

    build = tmp_path / "vendor_build"
    _configure_and_build(HERE / "vendor_npu" / "cpp", build, sdk_prefix)
    inputs = native_check.export(tmp_path / "npu")
    _check([build / "vendor_npu_runner", tmp_path / "npu" / "npu.pte", *inputs, "--out", tmp_path / "npu" / "out"])
    got, want = native_check.read_outputs(tmp_path / "npu")
    assert_outputs_close(got, want)
    with pytest.raises(AssertionError):
        assert_outputs_close([got[0] * 1.001, *got[1:]], want)


API_CHECK = r"""
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cstdio>

using namespace executorch::extension;
using executorch::runtime::Error;

#define CHECK(c) do { if (!(c)) { std::printf("FAILED line %d: %s\n", __LINE__, #c); return 1; } } while (0)

int main(int argc, char** argv) {
  // Tensor helpers: shapes are checked, data is owned or borrowed as asked.
  CHECK(make_tensor_ptr({2, 3}, std::vector<float>(6, 1.f))->numel() == 6);
  CHECK(make_tensor_ptr({2, 3}, std::vector<float>(5, 1.f)) == nullptr);
  CHECK(make_tensor_ptr({1.f, 2.f, 3.f})->size(0) == 3);
  CHECK(make_tensor_ptr(int64_t(7))->const_data_ptr<int64_t>()[0] == 7);
  float blob[4] = {1, 2, 3, 4};
  CHECK(from_blob(blob, {2, 2})->const_data_ptr<float>() == blob);
  CHECK(from_blob(blob, {2, 2}, {1, 0}, {1, 2})->stride(0) == 1);
  CHECK(from_blob(blob, {2, 2}, {0, 0}, {}) == nullptr);
  bool freed = false;
  { auto t = from_blob(blob, {4}, {}, {}, executorch::runtime::ScalarType::Float,
                       executorch::runtime::TensorShapeDynamism::Static, [&](void*) { freed = true; }); }
  CHECK(freed);
  // Kernels registered by libportable_kernels.so when it loaded.
  CHECK(executorch::runtime::get_op_function("aten::add", "out") != nullptr);

  Module missing("/nonexistent/model.pte");
  CHECK(missing.load() == Error::AccessFailed && !missing.is_loaded());

  // argv[1]: a program computing x * 2 + 1 for x of shape [3].
  for (auto mode : {Module::LoadMode::File, Module::LoadMode::Mmap}) {
    Module module(argv[1], mode);
    auto names = module.method_names();
    CHECK(names.ok() && names->count("forward") == 1);
    CHECK(module.method_meta("forward")->num_inputs() == 1);
    auto out = module.forward(make_tensor_ptr({3}, std::vector<float>{1.f, 2.f, 3.f}));
    CHECK(out.ok() && out->size() == 1);
    const float* v = out->at(0).toTensor().const_data_ptr<float>();
    CHECK(v[0] == 3.f && v[1] == 5.f && v[2] == 7.f);
    CHECK(module.is_method_loaded("forward"));
    CHECK(!module.forward(make_tensor_ptr({4}, std::vector<float>(4, 0.f))).ok());
    CHECK(!module.execute("nope").ok());
  }
  std::printf("api ok\n");
  return argc > 1 ? 0 : 1;
}
"""

API_PROJECT = """cmake_minimum_required(VERSION 3.24)
project(api_check LANGUAGES CXX)
find_package(executorch REQUIRED COMPONENTS runtime kernels_portable extension_module)
add_executable(api_check api_check.cpp)
target_link_libraries(api_check PRIVATE ${EXECUTORCH_LIBRARIES})
"""


class TwiceSum(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1


def test_module_and_tensor_api_from_the_sdk(sdk_prefix, tmp_path):
    src = tmp_path / "api"
    src.mkdir()
    (src / "api_check.cpp").write_text(API_CHECK)
    (src / "CMakeLists.txt").write_text(API_PROJECT)
    _configure_and_build(src, tmp_path / "api-build", sdk_prefix)
    pte = _write(_export(TwiceSum(), (torch.ones(3),)), tmp_path / "twice.pte")
    assert "api ok" in _check([tmp_path / "api-build" / "api_check", pte])


def test_the_sdk_module_names_what_is_missing_without_an_sdk(tmp_path):
    # A copy of the module beside no SDK: the source tree and the minimal wheel are in this state.
    pkg = tmp_path / "executorch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(REPO / "sdk.py", pkg / "sdk.py")
    proc = _run([sys.executable, "-m", "executorch.sdk", "--cmake-prefix-path"], cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1 and not proc.stdout
    assert "no C++ SDK" in proc.stderr and "install the full" in proc.stderr
    (pkg / "lib" / "cmake" / "executorch").mkdir(parents=True)
    (pkg / "lib" / "cmake" / "executorch" / "executorch-config.cmake").write_text("")
    proc = _run([sys.executable, "-m", "executorch.sdk", "--cmake-prefix-path"], cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout.strip() == str(pkg)


def test_docs_style_app_links_through_executorch_libraries(sdk_prefix, tmp_path):
    # ExecuTorch's docs: find_package(executorch) with no components, ${EXECUTORCH_LIBRARIES}, Module and
    # from_blob, CMAKE_PREFIX_PATH at <executorch package>/share/cmake, run beside model.pte.
    docs_app = REPO / "examples" / "cpp" / "docs_app"
    build = tmp_path / "build"
    _configure_and_build(docs_app, build, sdk_prefix / "share" / "cmake")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _check([sys.executable, docs_app / "export.py"], cwd=run_dir)
    printed = _check([build / "app"], cwd=run_dir)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([[10.0, 20.0], [30.0, 40.0]])
    got = torch.tensor([float(v) for v in printed.split()]).reshape(2, 2)
    assert_outputs_close([got], [a + b])
    with pytest.raises(AssertionError):
        assert_outputs_close([got], [a + b + 1e-3])
