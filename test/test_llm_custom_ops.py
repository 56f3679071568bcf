"""ExecuTorch's LLM custom ops: `llama::custom_sdpa` / `llama::update_cache` in eager torch and torch.export,
and a KV-cache decoder written by the published exporter decoding on both runtimes, token by token, as eager."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import executorch.extension.llm.custom_ops  # noqa: F401  (registers the ops)
from executorch.devtools.compare import assert_outputs_close, compare_outputs, tolerance
from executorch.runtime import ExecuTorchError

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
                    "def make_bf16():\n    model, inputs = make_cached_decoder()\n"
                    "    return model.to(__import__('torch').bfloat16), inputs\n")
    files[torch.bfloat16] = reference_runtime.export(f"{bf16}:make_bf16", root / "decoder_bf16.pte")
    return files


def _tolerance(dtype):
    return tolerance(dtype, 4)


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


def _our_decoder_program():
    from executorch.exir import to_edge

    model, inputs = make_cached_decoder()
    return to_edge(torch.export.export(model, inputs)).to_executorch()


def _kernel_calls(plan) -> list[str]:
    return [plan.operators[i.instr_args.op_index].name for i in plan.chains[0].instructions
            if hasattr(i.instr_args, "op_index")]


def test_our_exporter_writes_the_cache_in_place_as_the_published_one():
    # auto_functionalized_v2 in the edge graph becomes update_cache itself again: its out kernel writes
    # the cache buffer in place, so no write-back copy follows (the published exporter's file has none).
    plan = _our_decoder_program().executorch_program.execution_plan[0]
    calls = _kernel_calls(plan)
    assert calls.count("llama::update_cache") == 2 and calls.count("llama::custom_sdpa") == 1
    assert "aten::copy_" not in calls
    caches = {plan.values[i.instr_args.args[1]].val.allocation_info.memory_offset_low
              for i in plan.chains[0].instructions
              if hasattr(i.instr_args, "op_index")
              and plan.operators[i.instr_args.op_index].name == "llama::update_cache"}
    sdpa = next(i for i in plan.chains[0].instructions
                if hasattr(i.instr_args, "op_index")
                and plan.operators[i.instr_args.op_index].name == "llama::custom_sdpa")
    assert caches == {plan.values[a].val.allocation_info.memory_offset_low for a in sdpa.instr_args.args[1:3]}


def _decode_calls():
    return [("forward", [torch.tensor([[t]]), torch.tensor([pos])]) for pos, t in enumerate(TOKENS)]


def _eager_steps() -> list:
    model, _ = make_cached_decoder()
    with torch.no_grad():
        return [model(*inputs) for _, inputs in _decode_calls()]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_our_decoder_decodes_as_eager(engine):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program(_our_decoder_program().buffer).load_method("forward")
    for (_, inputs), expected in zip(_decode_calls(), _eager_steps()):
        assert_outputs_close(method.execute(inputs), [expected])
    # The gate sees the state: a fresh method at the last position reads an empty cache, another answer.
    fresh = runtime.load_program(_our_decoder_program().buffer).load_method("forward")
    assert not compare_outputs(fresh.execute(_decode_calls()[-1][1]), [expected]).ok


def test_our_decoder_decodes_on_the_published_runtime(tmp_path, reference_runtime):
    import subprocess

    (tmp_path / "ours.pte").write_bytes(_our_decoder_program().buffer)
    torch.save(_decode_calls(), tmp_path / "ours.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), "ours"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (tmp_path / "ours.err.txt").exists(), (tmp_path / "ours.err.txt").read_text()
    for got, expected in zip(torch.load(tmp_path / "ours.out.pt"), _eager_steps()):
        assert_outputs_close(got, [expected])


@pytest.mark.parametrize("engine", ["native", "python"])
def test_cache_read_before_and_after_the_in_place_update(engine):
    from executorch.exir import to_edge

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")

    class ReadAround(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.arange(24.0).reshape(1, 4, 2, 3))

        def forward(self, x, pos):
            before = self.cache.view(1, 4, 6) * 1.0
            torch.ops.llama.update_cache(x, self.cache, pos.item())
            return before, self.cache.view(1, 4, 6) + 0.0

    x, pos = torch.full((1, 1, 2, 3), -1.0), torch.tensor(2)
    ep = torch.export.export(ReadAround(), (x, pos))
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["cache"])])
    program = to_edge(ep).to_executorch(config)
    got = runtime.load_program(program.buffer).load_method("forward").execute([x, pos])
    assert_outputs_close(got, list(ReadAround()(x, pos)))


@pytest.mark.parametrize("engine", ["native", "python"])
def test_our_bf16_decoder_decodes_as_eager(engine):
    from executorch.exir import to_edge

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")
    model, inputs = make_cached_decoder()
    program = to_edge(torch.export.export(model.to(torch.bfloat16), inputs)).to_executorch()
    eager = make_cached_decoder()[0].to(torch.bfloat16)  # fresh caches: export does not run the model
    method = runtime.load_program(program.buffer).load_method("forward")
    with torch.no_grad():
        for _, step in _decode_calls():
            got, expected = method.execute(step), eager(*step)
            assert got[0].dtype == torch.bfloat16
            assert_outputs_close(got, [expected])  # bf16's own relative tolerance
    fresh = runtime.load_program(program.buffer).load_method("forward")
    assert not compare_outputs(fresh.execute(_decode_calls()[-1][1]), [expected]).ok


class _DynamicPrefillAttention(torch.nn.Module):
    """custom_sdpa over a token count the export leaves dynamic (a prefill of several tokens in one call)."""

    def __init__(self, heads=2, head_dim=4, max_len=16):
        super().__init__()
        self.register_buffer("k_cache", torch.randn(1, max_len, heads, head_dim))
        self.register_buffer("v_cache", torch.randn(1, max_len, heads, head_dim))

    def forward(self, q, input_pos):
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start + q.shape[1] <= self.k_cache.shape[1])
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_custom_sdpa_over_a_dynamic_token_count(engine):
    from executorch.exir import to_edge

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"{engine} runtime not built (bash tools/run_tests.sh builds it)")
    torch.manual_seed(0)
    model = _DynamicPrefillAttention().eval()
    tokens = torch.export.Dim("tokens", min=1, max=8)
    ep = torch.export.export(model, (torch.randn(1, 3, 2, 4), torch.tensor([0])),
                             dynamic_shapes=({1: tokens}, None))
    method = runtime.load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    for n, pos in ((3, 0), (5, 3), (1, 8), (8, 8)):
        args = [torch.randn(1, n, 2, 4), torch.tensor([pos])]
        got = method.execute(args)
        assert got[0].shape == (1, n, 2, 4)
        assert_outputs_close(got, [model(*args)])
