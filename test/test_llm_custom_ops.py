"""ExecuTorch's LLM custom ops: `llama::custom_sdpa` / `llama::update_cache` in eager torch and torch.export,
and a KV-cache decoder written by the published exporter decoding on both runtimes, token by token, as eager."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import executorch.extension.llm.custom_ops  # noqa: F401  (registers the ops)
from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.runtime import ExecuTorchError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import project_runtimes  # noqa: E402
from llm_custom_ops_models import MAX_SEQ, make_cached_decoder  # noqa: E402

MODELS_FILE = Path(__file__).with_name("llm_custom_ops_models.py")
TOKENS = [3, 17, 5, 9, 30, 2, 11, 8]


def _reference_attention(q, k_cache, v_cache, start, mask=None, causal=True):
    """Plain SDPA over the cache prefix, key/value heads repeated for grouped queries."""
    seq, length = q.shape[1], start + q.shape[1]
    groups = q.shape[2] // k_cache.shape[2]
    k = k_cache[:, :length].transpose(1, 2).repeat_interleave(groups, 1).float()
    v = v_cache[:, :length].transpose(1, 2).repeat_interleave(groups, 1).float()
    if causal:
        mask = torch.ones(seq, length, dtype=torch.bool).tril(start)
    return F.scaled_dot_product_attention(q.transpose(1, 2).float(), k, v, attn_mask=mask).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_custom_sdpa_attends_over_the_cache_prefix(dtype):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, 8, dtype=dtype)
    k_cache, v_cache = torch.randn(2, 10, 2, 8, dtype=dtype), torch.randn(2, 10, 2, 8, dtype=dtype)
    out = torch.ops.llama.custom_sdpa(q, k_cache, v_cache, 4, None, 0.0, True)
    assert out.dtype == dtype and out.shape == q.shape
    assert_outputs_close([out], [_reference_attention(q, k_cache, v_cache, 4).to(dtype)])
    mask = torch.randn(3, 10)
    masked = torch.ops.llama.custom_sdpa(q, k_cache, v_cache, 4, mask, 0.0, False)
    assert_outputs_close([masked], [_reference_attention(q, k_cache, v_cache, 4, mask[:, :7], causal=False).to(dtype)])
    # The gate sees the causal offset: attending one position further is a different answer.
    assert not compare_outputs([out], [_reference_attention(q, k_cache, v_cache, 5)[:, :3].to(dtype)]).ok


def test_update_cache_writes_the_slice_in_place():
    cache = torch.zeros(1, 6, 2, 3)
    value = torch.randn(1, 2, 2, 3)
    torch.ops.llama.update_cache(value, cache, 3)
    expected = torch.zeros(1, 6, 2, 3)
    expected[:, 3:5] = value
    assert torch.equal(cache, expected)
    out = torch.empty(1)
    torch.ops.llama.update_cache.out(value * 2, cache, 0, out=out)
    assert torch.equal(cache[:, :2], value * 2)


def test_positions_past_the_cache_are_refused():
    cache = torch.zeros(1, 4, 2, 3)
    with pytest.raises(ValueError, match="start_pos 3 \\+ 2 positions run past the cache of 4"):
        torch.ops.llama.update_cache(torch.zeros(1, 2, 2, 3), cache, 3)
    with pytest.raises(ValueError, match="run past the cache"):
        torch.ops.llama.custom_sdpa(torch.zeros(1, 1, 2, 3), cache, cache, 4, None, 0.0, True)


def test_export_keeps_the_ops_whole():
    model, inputs = make_cached_decoder()
    ep = torch.export.export(model, inputs)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"llama.update_cache.default", "llama.custom_sdpa.default"} <= targets


@pytest.fixture(scope="module")
def published_files(tmp_path_factory, reference_runtime) -> dict:
    root = tmp_path_factory.mktemp("llm_ops")
    files = {torch.float32: reference_runtime.export(f"{MODELS_FILE}:make_cached_decoder", root / "decoder.pte")}
    bf16 = root / "bf16_models.py"
    bf16.write_text(f"import sys\nsys.path.insert(0, {str(MODELS_FILE.parent)!r})\n"
                    "from llm_custom_ops_models import make_cached_decoder\n"
                    "def make_bf16():\n    model, inputs = make_cached_decoder()\n    return model.to(__import__('torch').bfloat16), inputs\n")
    files[torch.bfloat16] = reference_runtime.export(f"{bf16}:make_bf16", root / "decoder_bf16.pte")
    return files


def _tolerance(dtype):
    eps = torch.finfo(dtype).eps
    return {} if dtype == torch.float32 else {"rtol": 4 * eps, "atol": 4 * eps}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("engine", ["native", "python"])
def test_published_decoder_decodes_as_eager(engine, dtype, published_files):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program(published_files[dtype].read_bytes()).load_method("forward")
    model, _ = make_cached_decoder()
    model = model.to(dtype)
    fresh, _ = make_cached_decoder()
    fresh = fresh.to(dtype)
    for pos, token in enumerate(TOKENS):
        inputs = [torch.tensor([[token]]), torch.tensor([pos])]
        with torch.no_grad():
            expected = model(*inputs)
        outputs = method.execute(inputs)
        assert_outputs_close(outputs, [expected], **_tolerance(dtype))
        if pos > 0:
            # The state is what is checked: the same token without the cached history is another answer.
            with torch.no_grad():
                forgetful = fresh(inputs[0], torch.tensor([0]))
            fresh.k_cache.zero_(), fresh.v_cache.zero_()
            assert not compare_outputs(outputs, [forgetful], **_tolerance(dtype)).ok


@pytest.mark.parametrize("engine", ["native", "python"])
def test_position_past_the_cache_is_an_error(engine, published_files):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program(published_files[torch.float32].read_bytes()).load_method("forward")
    with pytest.raises((ExecuTorchError, RuntimeError, ValueError)):
        method.execute([torch.tensor([[1]]), torch.tensor([MAX_SEQ])])
    # The method still runs after the refused call.
    assert method.execute([torch.tensor([[1]]), torch.tensor([0])])[0].shape == (1, 1, 40)
