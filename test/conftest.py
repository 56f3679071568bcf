"""Shared test fixtures: the published reference runtime, when ET_REFERENCE_PYTHON names it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest
import torch


def published_env() -> dict:
    """The environment for a published-runtime process: without PYTHONPATH, which may point at this
    project (that Python would then import our package and compare us with ourselves)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


REPO = Path(__file__).resolve().parents[1]
SHARED_TOOLS = REPO.parent / "shared" / "tools" / "reference-runtime"


class ReferenceRuntime:
    """Runs `.pte` files on the published ExecuTorch runtime, in its own process."""

    def __init__(self, python: str, tools: Path, export_dir: Path):
        self.python = python
        self.tools = tools
        # Published exports already made in this test run, by factory file (path, mtime, size) and
        # name: several test modules compare the same zoo models, and each export costs a process
        # start. The folder is shared by the run's worker processes.
        self._export_dir = export_dir
        export_dir.mkdir(parents=True, exist_ok=True)
        self._server: Optional[subprocess.Popen] = None
        self._server_log = None

    def run(self, pte: Path, inputs, tmp_path: Path, method: str = "forward") -> list:
        """`pte`'s outputs on the published runtime. One server process per test worker runs the
        files (test/reference_server.py), and results are kept for the run by file, inputs and
        method: several test modules run the same published zoo files on the same inputs."""
        inp, out = tmp_path / "ref_in.pt", tmp_path / "ref_out.pt"
        torch.save(list(inputs), inp)
        digest = hashlib.sha256()
        for part in (Path(pte).read_bytes(), inp.read_bytes(), method.encode()):
            digest.update(hashlib.sha256(part).digest())
        kept = self._export_dir / "runs" / f"{digest.hexdigest()[:32]}.pt"
        if not kept.is_file():
            self._serve(Path(pte), inp, out, method)
            kept.parent.mkdir(exist_ok=True)
            tmp = kept.with_suffix(f".{os.getpid()}.part")
            shutil.copyfile(out, tmp)
            os.replace(tmp, kept)
        return torch.load(kept)

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.stdin.close()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
        self._server = None

    def _serve(self, pte: Path, inp: Path, out: Path, method: str) -> None:
        import json
        import select
        import tempfile

        if self._server is None or self._server.poll() is not None:
            self._server_log = tempfile.TemporaryFile()
            self._server = subprocess.Popen(
                [self.python, str(Path(__file__).with_name("reference_server.py"))], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._server_log, text=True, env=published_env())
        server = self._server
        server.stdin.write(json.dumps({"pte": str(pte), "inputs": str(inp), "outputs": str(out),
                                       "method": method}) + "\n")
        server.stdin.flush()
        while True:
            ready, _, _ = select.select([server.stdout], [], [], 600)
            line = server.stdout.readline() if ready else None
            if not line:  # the runtime crashed on this file (or hung): report it, start afresh next time
                if line is None:
                    server.kill()
                server.wait()
                self._server_log.seek(0)
                err = self._server_log.read().decode(errors="replace")
                self._server = None
                raise AssertionError(f"reference runtime failed on {pte} (exit {server.returncode}): {err[-2000:]}")
            if line.startswith("@@reply "):
                reply = json.loads(line[len("@@reply "):])
                if not reply["ok"]:
                    raise AssertionError(f"reference runtime failed on {pte}: {reply['error'][-2000:]}")
                return

    def run_batch(self, root: Path, names: list[str]) -> dict[str, str]:
        """Run root/NAME.pte on root/NAME.in.pt for each name in one process (restarting after a
        file that makes the runtime abort). Outputs go to root/NAME.out.pt; returns the failures
        as name -> reason."""
        runner = Path(__file__).with_name("reference_runner.py")
        failures: dict[str, str] = {}
        todo = list(names)
        while todo:
            proc = subprocess.run([self.python, str(runner), str(root), *todo], capture_output=True, text=True,
                                  timeout=1800, env=published_env())
            ran = proc.stdout.split()
            if proc.returncode == 0:
                break
            if not ran:
                raise AssertionError(f"reference runner failed to start: {proc.stderr[-2000:]}")
            failures[ran[-1]] = (f"runtime aborted: "
                                 f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
            todo = todo[todo.index(ran[-1]) + 1:]
        for name in names:
            err = root / f"{name}.err.txt"
            if err.exists():
                failures[name] = err.read_text()
        return failures

    def export(self, factory: str, out: Path, *flags: str, script: Optional[Path] = None) -> Path:
        """`out` written by the published exporter from `FILE.py:FACTORY`; `flags` go to
        export_pte.py (`--xnnpack`, `--int8`; with --int8 the converted pt2e module's outputs are
        saved beside `out` as OUT.ref.pt), or `script` (taking FACTORY OUT) writes it instead."""
        path, _, name = factory.rpartition(":")
        stat = Path(path).stat()
        tool = script or self.tools / "export_pte.py"
        key = f"{Path(path).resolve()}|{stat.st_mtime_ns}|{stat.st_size}|{name}|{' '.join(flags)}|{tool}"
        made = self._export_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.pte"
        # One worker exports a factory while the others wait for its file.
        with open(made.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not made.is_file():
                # One torch thread, as calibration here runs (executorch.export._torch_threads): observed ranges,
                # hence int8 scales, depend on the summation order.
                proc = subprocess.run(
                    [self.python, str(tool), factory, str(out), *flags],
                    capture_output=True, text=True, timeout=1800, env={**published_env(), "OMP_NUM_THREADS": "1"},
                )
                if proc.returncode != 0:
                    raise AssertionError(f"reference exporter failed on {factory}: {proc.stderr[-2000:]}")
                # The cache keeps its own copy: a test may damage its file on purpose.
                tmp = made.with_suffix(".part")
                shutil.copyfile(out, tmp)
                os.replace(tmp, made)
                if out.with_suffix(".ref.pt").is_file():
                    shutil.copyfile(out.with_suffix(".ref.pt"), made.with_suffix(".ref.pt"))
                return out
        shutil.copyfile(made, out)
        if made.with_suffix(".ref.pt").is_file():
            shutil.copyfile(made.with_suffix(".ref.pt"), out.with_suffix(".ref.pt"))
        return out


def pytest_configure(config) -> None:
    # With one test worker per core, each worker's torch gets its share of the cores: more threads
    # than cores make torch's thread team wait on itself.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(scope="session")
def reference_runtime(tmp_path_factory):
    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    if not Path(python).exists():
        pytest.fail(f"ET_REFERENCE_PYTHON={python} does not exist")
    # pytest-xdist workers each get a folder inside the run's; the run's is shared by all of them
    # (pytest keeps the last few runs' folders and removes older ones).
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent
    runtime = ReferenceRuntime(python, SHARED_TOOLS, run_dir / "published-exports")
    yield runtime
    runtime.close()


@pytest.fixture
def restore_pool_size():
    """Puts the native thread pool back to its size after a test that resizes it."""
    from executorch.extension.pybindings import portable_lib

    before = portable_lib._threadpool_get_thread_count()
    yield
    portable_lib._unsafe_reset_threadpool(before)


def project_runtimes() -> dict:
    """The project's runtimes available here, by name: always the Python interpreter, and the
    native runtime when its extension is built."""
    import importlib

    from executorch.runtime import Runtime
    from executorch.runtime._backend import _MODULES

    found = {"python": Runtime("python", importlib.import_module(_MODULES["python"]))}
    try:
        found["native"] = Runtime("native", importlib.import_module(_MODULES["native"]))
    except ImportError:
        pass
    return found


def load_zoo():
    """The model zoo (examples/models), loaded by path: it is not part of any installed wheel."""
    import importlib.util
    import sys

    if "executorch_test_zoo" in sys.modules:
        return sys.modules["executorch_test_zoo"]
    models = REPO / "examples" / "models"
    spec = importlib.util.spec_from_file_location("executorch_test_zoo", models / "__init__.py",
                                                  submodule_search_locations=[str(models)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["executorch_test_zoo"] = module
    spec.loader.exec_module(module)
    return module


def zoo_factory_spec(name: str) -> str:
    """`FILE.py:FACTORY` of a zoo model, for tools that load it by path (resnet.py holds two)."""
    import inspect

    factory = load_zoo().MODELS[name]
    return f"{inspect.getsourcefile(factory)}:{factory.__name__}"
