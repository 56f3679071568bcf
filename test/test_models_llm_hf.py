"""HF transformers' static-cache export of tiny decoders: decoded token by token on every runtime, against eager."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import compare_outputs
from executorch.exir import to_edge

from conftest import project_runtimes  # noqa: E402

transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed (requirements-dev.txt pins it)")
import hf_tiny_models as hf  # noqa: E402

RTOL = 1e-4  # per element, relative to the eager logits (their largest |value| scales the absolute part)
ARCHS = hf.ARCHS
_calls = hf.calls


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    """Per architecture: our .pte, the ExportedProgram saved for the published exporter, and the
    eager logits of each decode step (computed after lowering, from the cache's start state)."""
    root = tmp_path_factory.mktemp("hf_llm")
    out = {}
    for name in ARCHS:
        wrapper = hf.make_wrapper(name)
        ep = hf.export(wrapper)
        torch.export.save(ep, root / f"{name}.pt2")
        with torch.no_grad():
            (root / f"{name}.pte").write_bytes(to_edge(ep).to_executorch().buffer)
        out[name] = hf.eager_steps(wrapper)
        torch.save(_calls(), root / f"{name}.calls.pt")
    return {"root": root, "eager": out}


def _decode(runtime, pte: Path) -> list:
    method = runtime.load_program(pte).load_method("forward")
    return [method.execute(inputs)[0] for _, inputs in _calls()]


def _check_steps(steps: list, eager: list, what: str) -> None:
    assert len(steps) == len(eager)
    for i, (got, want) in enumerate(zip(steps, eager)):
        result = compare_outputs(got, want, rtol=RTOL, atol=RTOL)
        assert result.ok, f"{what}, decode step {i}: {result}"


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("arch", ARCHS)
def test_hf_static_cache_decodes_like_eager(exported, arch, engine):
    runtimes = project_runtimes()
    if engine not in runtimes:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    steps = _decode(runtimes[engine], exported["root"] / f"{arch}.pte")
    _check_steps(steps, exported["eager"][arch], f"{arch} on the {engine} runtime")


def test_decode_check_fails_on_a_stale_cache(exported):
    # The gate's own check: the same program loaded afresh for every step (so its cache never
    # holds the earlier tokens) must not pass for the stateful decode.
    runtime = project_runtimes()["python"]
    pte = exported["root"] / "llama.pte"
    stale = [runtime.load_program(pte).load_method("forward").execute(inputs)[0] for _, inputs in _calls()]
    with pytest.raises(AssertionError, match="decode step 1"):
        _check_steps(stale, exported["eager"]["llama"], "stale cache")


@pytest.fixture(scope="module")
def published(exported, reference_runtime) -> Path:
    """One published-runtime process: our files decoded there, and the published exporter's files."""
    root = exported["root"]
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), *ARCHS], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"published runtime process failed: {proc.stderr[-2000:]}"
    return root


@pytest.mark.parametrize("arch", ARCHS)
def test_our_files_decode_on_the_published_runtime(exported, published, arch):
    err = published / f"{arch}.err.txt"
    assert not err.exists(), err.read_text()
    steps = [outs[0] for outs in torch.load(published / f"{arch}.out.pt")]
    _check_steps(steps, exported["eager"][arch], f"{arch} (our file) on the published runtime")


@pytest.mark.parametrize("arch", ARCHS)
def test_published_files_decode_here(exported, published, arch):
    err = published / f"{arch}.published.err.txt"
    assert not err.exists(), err.read_text()
    runtimes = project_runtimes()
    for engine, runtime in runtimes.items():
        steps = _decode(runtime, published / f"{arch}.published.pte")
        _check_steps(steps, exported["eager"][arch], f"{arch} (published exporter's file) on the {engine} runtime")
