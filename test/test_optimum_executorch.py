"""Hugging Face optimum-executorch 1.1.0, unchanged, against this package: `optimum-cli export executorch`
of tiny random Llama and Qwen2 models (built here, never downloaded), loaded with
`ExecuTorchModelForCausalLM` and decoded greedily, against eager transformers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import project_runtimes  # noqa: E402

from executorch.devtools.compare import assert_outputs_close  # noqa: E402

if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.executorch") is None:
    pytest.skip("optimum-executorch is not installed (pip install -r requirements-dev.txt, then "
                "pip install --no-deps -r requirements-dev-nodeps.txt)", allow_module_level=True)
transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed (requirements-dev.txt pins it)")

PROMPT = [1, 5, 17, 3, 42, 9]
MAX_SEQ_LEN = 24  # the exported static cache: prompt plus 18 generated tokens
_TINY = dict(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=63, pad_token_id=0)
ARCHS = {
    "llama": lambda: (transformers.LlamaConfig(**_TINY), transformers.LlamaForCausalLM),
    "qwen2": lambda: (transformers.Qwen2Config(**_TINY, use_sliding_window=False), transformers.Qwen2ForCausalLM),
}
# (optimum recipe, --qlinear); the xnnpack recipe lowers with
# ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True).
EXPORTS = [("portable", None), ("xnnpack", None), ("portable", "8da4w"), ("xnnpack", "8da4w")]


def _needs_native() -> None:
    # ExecuTorchModelForCausalLM loads with executorch.extension.pybindings.portable_lib.
    if "native" not in project_runtimes():
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it); "
                    "optimum-executorch runs programs through portable_lib")


def _needs_partitioner() -> None:
    # optimum-executorch imports every one of its recipe modules at start-up, xnnpack's included.
    if importlib.util.find_spec("executorch.backends.xnnpack.partition") is None:
        pytest.skip("optimum-executorch imports executorch.backends.xnnpack.partition.xnnpack_partitioner at "
                    "start-up, and XnnpackPartitioner is not in this tree yet")


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    """Each architecture saved with seed-0 random weights, as `from_pretrained` reads a local folder."""
    root = tmp_path_factory.mktemp("hf_checkpoints")
    out = {}
    for arch, make in ARCHS.items():
        config, cls = make()
        torch.manual_seed(0)
        cls(config).eval().save_pretrained(root / arch)
        out[arch] = root / arch
    return out


@pytest.fixture(scope="module")
def exports(checkpoints, tmp_path_factory):
    """`get(arch, recipe, qlinear)`: the optimum-cli export's folder, made once per module."""
    made, root = {}, tmp_path_factory.mktemp("optimum_exports")

    def get(arch: str, recipe: str, qlinear) -> Path:
        key = (arch, recipe, qlinear)
        if key not in made:
            made[key] = _export(checkpoints[arch], recipe, qlinear, root / "-".join(map(str, key)) / "out")
        return made[key]

    return get


def _export(checkpoint: Path, recipe: str, qlinear, out: Path, flags: tuple = ()) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).with_name("optimum-cli")
    args = [str(cli), "export", "executorch", "--model", str(checkpoint), "--task", "text-generation",
            "--recipe", recipe, "--max_seq_len", str(MAX_SEQ_LEN), "--output_dir", str(out), *flags]
    if qlinear:
        args += ["--qlinear", qlinear]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200, env=_env(), cwd=out.parent)
    assert done.returncode == 0, f"optimum-cli {recipe} {qlinear or ''} {flags} failed:\n{done.stderr[-4000:]}"
    assert (out / "model.pte").is_file(), list(out.iterdir())
    return out


def _eager(checkpoint: Path, qlinear):
    """The eager model, quantized as optimum-executorch quantizes it before export when `qlinear` is set."""
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    if qlinear:
        from optimum.exporters.executorch.quantization import quantize_model_

        quantize_model_(model, qlinear_config=qlinear, qlinear_group_size=32)
    return model


def _eager_greedy(model, prompt: list, count: int) -> list:
    """`count` greedy tokens after `prompt`, each from a full causal forward pass of eager transformers."""
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            tokens.append(int(model(torch.tensor([tokens])).logits[0, -1].argmax()))
    return tokens[len(prompt):]


def _eager_logits(model, tokens: list) -> torch.Tensor:
    """Logits at every position of `tokens`, one causal forward pass over the whole sequence."""
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0]


def _et_logits(et_model, tokens: list) -> torch.Tensor:
    """Logits at every position, decoding `tokens` one at a time through the program's cache."""
    steps = []
    for pos, tok in enumerate(tokens):
        logits = et_model.forward(input_ids=torch.tensor([[tok]]), cache_position=torch.tensor([pos]))
        steps.append(logits.reshape(-1, logits.shape[-1])[-1])
    return torch.stack(steps)


@pytest.mark.parametrize("recipe,qlinear", EXPORTS,
                         ids=["portable-fp32", "xnnpack-fp32", "portable-8da4w", "xnnpack-8da4w"])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_export_load_and_decode_like_eager(checkpoints, exports, arch, recipe, qlinear):
    _needs_native()
    if os.environ.get("ET_OPTIMUM_DECODE_IN_CLEAN_VENV") == "1" and (recipe, qlinear) != ("portable", "8da4w"):
        pytest.skip("CI decodes this export in a clean venv with the wheel's optimum extra "
                    "(.ci/scripts/test_native.sh)")
    _needs_partitioner()
    if qlinear and importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    from optimum.executorch import ExecuTorchModelForCausalLM

    out = exports(arch, recipe, qlinear)
    et_model = ExecuTorchModelForCausalLM.from_pretrained(str(out))
    assert et_model.max_cache_size == MAX_SEQ_LEN
    eager = _eager(checkpoints[arch], qlinear)
    generated = et_model.generate(prompt_tokens=list(PROMPT), max_seq_len=MAX_SEQ_LEN)
    tokens = list(PROMPT) + generated
    got, want = _et_logits(et_model, tokens), _eager_logits(eager, tokens)
    scale = float(want.abs().max())
    if not qlinear:
        # fp32: the same greedy tokens, and logits equal to float32 rounding (summation order differs).
        assert generated == _eager_greedy(eager, list(PROMPT), len(generated))
        # generate stops at the cache's end, or at an end-of-sequence token after the first one it makes.
        assert len(tokens) == MAX_SEQ_LEN or generated[-1] == _TINY["eos_token_id"]
        assert float((got - want).abs().max()) <= 1e-4 * scale
        return
    # 8da4w: the reference is the same torchao-quantized model run eagerly (int8 activations per token,
    # int4 weights per group of 32, computed on dequantized values). The program computes the same
    # quantized values; where float summation order puts an activation on the other side of a rounding
    # boundary it moves by one int8 step, which over two layers stays far inside what quantization
    # itself moves the logits. Tolerance: a quarter of that movement (eager fp32 vs eager 8da4w), and
    # at least 1e-3 of the largest logit.
    _assert_within_quantization_noise(got, want, _eager_logits(_eager(checkpoints[arch], None), tokens))


def _assert_within_quantization_noise(got: torch.Tensor, want: torch.Tensor, fp32: torch.Tensor) -> None:
    """`got` is as close to the 8da4w eager logits `want` as a quarter of what quantization moves them (eager
    fp32 `fp32` against `want`), and at least 1e-3 of the largest logit."""
    scale = float(want.abs().max())
    moved = float((fp32 - want).abs().max())
    assert moved > 1e-3 * scale, "quantize_ changed nothing: the 8da4w reference is not quantized"
    err = float((got - want).abs().max())
    assert err <= max(0.25 * moved, 1e-3 * scale), f"max |logit error| {err:.3g}, quantization moves {moved:.3g}"


# The xnnpack recipe's 8da4w linears as XNNPACK QD8 fully connected nodes over the dynamic token count,
# on every runtime: a parallel prefill of the prompt (6 rows), then one token at a time through the cache.
TOKENS = PROMPT + [(5 * i + 11) % 63 for i in range(MAX_SEQ_LEN - len(PROMPT))]
CALLS = [[torch.tensor([PROMPT]), torch.arange(len(PROMPT))]] + [
    [torch.tensor([[t]]), torch.tensor([p])] for p, t in enumerate(TOKENS[len(PROMPT):], len(PROMPT))]


def _qd8_linears(pte: bytes) -> int:
    """Fully connected nodes of the program's XNNPACK delegates reading a qdint8 (per-row int8) value."""
    from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
    from executorch.exir._serialize._program import read_program

    program, count = read_program(pte), 0
    for d in program.execution_plan[0].delegates:
        graph = deserialize_xnnpack_binary(program.segment_data[d.processed.index]).graph
        count += sum(isinstance(n.xnode_union, xs.XNNFullyConnected) and xs.tensor_value(
            graph.xvalues[n.xnode_union.input1_id]).datatype == xs.XNNDatatype.xnn_datatype_qdint8
            for n in graph.xnodes)
    return count


def _logits(outputs: list) -> torch.Tensor:
    return torch.cat([o[0].reshape(-1, o[0].shape[-1]) for o in outputs])


@pytest.fixture(scope="module")
def qd8_export(checkpoints, exports) -> dict:
    _needs_partitioner()
    if importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    eager = _eager(checkpoints["llama"], "8da4w")
    linears = sum(isinstance(m, torch.nn.Linear) for m in eager.modules())
    return {"pte": (exports("llama", "xnnpack", "8da4w") / "model.pte").read_bytes(), "linears": linears,
            "want": _eager_logits(eager, TOKENS), "fp32": _eager_logits(_eager(checkpoints["llama"], None), TOKENS)}


def test_xnnpack_8da4w_linears_are_qd8_delegates(qd8_export, exports):
    assert qd8_export["linears"] == 15  # 2 layers x (q, k, v, o, gate, up, down) + lm_head
    assert _qd8_linears(qd8_export["pte"]) == qd8_export["linears"]
    # The gate: the portable recipe's file has none.
    assert _qd8_linears((exports("llama", "portable", "8da4w") / "model.pte").read_bytes()) == 0


@pytest.mark.parametrize("engine", ["python", "native"])
def test_xnnpack_8da4w_decodes_like_eager_on_our_engines(qd8_export, engine):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program(qd8_export["pte"]).load_method("forward")
    got = _logits([method.execute(list(call)) for call in CALLS])
    _assert_within_quantization_noise(got, qd8_export["want"], qd8_export["fp32"])


def _published_logits(pte: bytes, reference_runtime, tmp_path) -> torch.Tensor:
    """The logits of `CALLS` (prefill, then token by token) on the published runtime."""
    (tmp_path / "m.pte").write_bytes(pte)
    torch.save([("forward", call) for call in CALLS], tmp_path / "m.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    done = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), "m"], capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0 and not (tmp_path / "m.err.txt").exists(), (
        done.stderr[-2000:], (tmp_path / "m.err.txt").read_text() if (tmp_path / "m.err.txt").exists() else "")
    return _logits(torch.load(tmp_path / "m.out.pt"))


def test_xnnpack_8da4w_decodes_like_eager_on_published_runtime(qd8_export, reference_runtime, tmp_path):
    got = _published_logits(qd8_export["pte"], reference_runtime, tmp_path)
    _assert_within_quantization_noise(got, qd8_export["want"], qd8_export["fp32"])


# Both recipes' programs add the token count (a size) to a tensor; the size goes to aten::add.out as a 0-dim
# tensor made by aten::scalar_tensor, since the published kernel aborts on an Int operand there.
@pytest.mark.parametrize("qlinear", [None, "8da4w"], ids=["fp32", "8da4w"])
def test_portable_recipe_decodes_like_eager_on_published_runtime(checkpoints, exports, qlinear, reference_runtime,
                                                                 tmp_path):
    _needs_partitioner()
    if qlinear and importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    got = _published_logits((exports("llama", "portable", qlinear) / "model.pte").read_bytes(), reference_runtime,
                            tmp_path)
    want = _eager_logits(_eager(checkpoints["llama"], qlinear), TOKENS)
    if qlinear:
        _assert_within_quantization_noise(got, want, _eager_logits(_eager(checkpoints["llama"], None), TOKENS))
    else:
        assert float((got - want).abs().max()) <= 1e-4 * float(want.abs().max())


def test_the_quantization_noise_gate_fails_on_a_wrong_answer(qd8_export):
    want, fp32 = qd8_export["want"], qd8_export["fp32"]
    for wrong in (fp32, want.roll(1, dims=0), want * 1.05):
        with pytest.raises(AssertionError):
            _assert_within_quantization_noise(wrong, want, fp32)


# The xnnpack recipe in fp32: linears, attention and norms over the dynamic token count as XNNPACK nodes.
# Its file has no more delegates and no more kernel calls left outside than the published exporter's lowering
# of the same exported program with the recipe's options, and it decodes like eager on every runtime
# (CALLS: a parallel prefill of the prompt, then one token at a time through the cache).
@pytest.mark.parametrize("arch", list(ARCHS))
def test_xnnpack_fp32_structure_at_least_as_good_as_published(checkpoints, exports, arch, reference_runtime, tmp_path):
    _needs_partitioner()
    from optimum.exporters.executorch.task_registry import discover_tasks, task_registry

    from xnnpack_structure import structure

    discover_tasks()
    module = task_registry.get("text-generation")(str(checkpoints[arch]), max_seq_len=MAX_SEQ_LEN)
    (ep,) = module.export().values()
    torch.export.save(ep, tmp_path / "m.pt2")
    script = Path(__file__).with_name("reference_lower_xnnpack_pt2.py")
    done = subprocess.run([reference_runtime.python, str(script), str(tmp_path / "m.pt2"), str(tmp_path / "ref.pte"),
                           "--optimum"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    ref, ours = structure(tmp_path / "ref.pte"), structure(exports(arch, "xnnpack", None) / "model.pte")
    assert ours.delegates <= ref.delegates, (ours.delegates, ref.delegates)
    assert sum(ours.kernel_calls.values()) <= sum(ref.kernel_calls.values()), (ours.kernel_calls, ref.kernel_calls)
    linears = 2 * 7 + 1  # 2 layers x (q, k, v, o, gate, up, down) + lm_head
    assert ours.node_kinds["FullyConnected"] >= max(linears, ref.node_kinds["FullyConnected"]), ours.node_kinds
    assert ours.node_kinds["BatchMatrixMultiply"] >= ref.node_kinds["BatchMatrixMultiply"], ours.node_kinds


@pytest.fixture(scope="module")
def fp32_xnnpack(checkpoints, exports) -> dict:
    _needs_partitioner()
    return {"pte": (exports("llama", "xnnpack", None) / "model.pte").read_bytes(),
            "want": _eager_logits(_eager(checkpoints["llama"], None), TOKENS)}


@pytest.mark.parametrize("engine", ["python", "native"])
def test_xnnpack_fp32_decodes_like_eager_on_our_engines(fp32_xnnpack, engine):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    method = runtime.load_program(fp32_xnnpack["pte"]).load_method("forward")
    got = _logits([method.execute(list(call)) for call in CALLS])
    assert_outputs_close(got, fp32_xnnpack["want"])


def test_xnnpack_fp32_decodes_like_eager_on_published_runtime(fp32_xnnpack, reference_runtime, tmp_path):
    got = _published_logits(fp32_xnnpack["pte"], reference_runtime, tmp_path)
    assert_outputs_close(got, fp32_xnnpack["want"])


# optimum-executorch's recommended command for CPUs: custom SDPA over its custom KV cache (ExecuTorch's
# llama::custom_sdpa and llama::update_cache), int8-dynamic / int4-weight linears and 4-bit embeddings.
CUSTOM_CACHE = ("--use_custom_sdpa", "--use_custom_kv_cache")
_BYTE, _FLOAT = 0, 6  # ScalarType numbers of uint8 and float32
RECOMMENDED = CUSTOM_CACHE + ("--qembedding", "4w")


def _needs_custom_kv_cache() -> None:
    from transformers import cache_utils

    if not hasattr(cache_utils, "HybridCache"):
        pytest.skip("optimum-executorch 1.1.0's --use_custom_kv_cache imports transformers.cache_utils.HybridCache, "
                    f"which transformers {transformers.__version__} no longer has; its own pin (5.0.0rc1, what "
                    "`pip install \"executorch[optimum]\" optimum-executorch==1.1.0` installs) has it, and CI runs "
                    "these tests in such a venv (.ci/scripts/test_native.sh)")


@pytest.fixture(scope="module")
def recommended(checkpoints, tmp_path_factory):
    """`get(arch, flags)`: the xnnpack recipe's 8da4w export with extra optimum-cli flags, made once."""
    _needs_partitioner()
    _needs_custom_kv_cache()
    if importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    made, root = {}, tmp_path_factory.mktemp("optimum_recommended")

    def get(arch: str, flags: tuple = RECOMMENDED) -> bytes:
        key = (arch, flags)
        if key not in made:
            out = root / f"{arch}-{len(made)}" / "out"
            made[key] = (_export(checkpoints[arch], "xnnpack", "8da4w", out, flags) / "model.pte").read_bytes()
        return made[key]

    return get


def _embedding_lookups(pte: bytes) -> list:
    """(operator, table dtype as ScalarType's number, table shape) of each embedding call in the program's forward."""
    from executorch.exir._serialize._program import read_program

    plan = read_program(pte).execution_plan[0]
    names = [f"{op.name}.{op.overload}" for op in plan.operators]
    found = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            index = getattr(instruction.instr_args, "op_index", None)
            if index is not None and "embedding" in names[index]:
                table = plan.values[instruction.instr_args.args[0]].val
                found.append((names[index], int(table.scalar_type), list(table.sizes)))
    return found


def _recommended_eager(checkpoint: Path):
    from optimum.exporters.executorch.quantization import quantize_model_

    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    quantize_model_(model, qlinear_config="8da4w", qlinear_group_size=32, qembedding_config="4w")
    return model


@pytest.mark.parametrize("arch", list(ARCHS))
def test_recommended_command_stores_4bit_embeddings_and_qd8_linears(recommended, arch):
    pte, without = recommended(arch), recommended(arch, CUSTOM_CACHE)
    hidden = _TINY["hidden_size"]
    assert _embedding_lookups(pte) == [("quantized_decomposed::embedding_4bit.out", _BYTE,
                                        [_TINY["vocab_size"], hidden // 2])]
    assert _qd8_linears(pte) == 15  # 2 layers x (q, k, v, o, gate, up, down) + lm_head, as without --qembedding
    # The gate: without --qembedding the table is float, looked up by aten::embedding, and the file is larger.
    assert _embedding_lookups(without) == [("aten::embedding.out", _FLOAT, [_TINY["vocab_size"], hidden])]
    assert len(pte) < len(without) - _TINY["vocab_size"] * hidden * 3, (len(pte), len(without))


def _greedy(method, count: int) -> tuple[list, torch.Tensor]:
    """The prompt prefilled, then `count` greedy tokens fed back one at a time; the tokens and every logit row."""
    rows = [method.execute([torch.tensor([PROMPT]), torch.arange(len(PROMPT))])[0].reshape(-1, _TINY["vocab_size"])]
    tokens = []
    for pos in range(len(PROMPT), len(PROMPT) + count):
        tokens.append(int(rows[-1][-1].argmax()))
        step = method.execute([torch.tensor([[tokens[-1]]]), torch.tensor([pos])])[0]
        rows.append(step.reshape(-1, _TINY["vocab_size"]))
    return tokens, torch.cat(rows)


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_recommended_command_decodes_like_eager_on_our_engines(recommended, checkpoints, arch, engine):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    program = runtime.load_program(recommended(arch))
    tokens, got = _greedy(program.load_method("forward"), MAX_SEQ_LEN - len(PROMPT))
    assert tokens == [int(row.argmax()) for row in got[len(PROMPT) - 1:-1]]
    fed = list(PROMPT) + tokens
    want = _eager_logits(_recommended_eager(checkpoints[arch]), fed)
    _assert_within_quantization_noise(got, want, _eager_logits(_eager(checkpoints[arch], None), fed))


def _without_padding_idx(ep) -> None:
    # What the recipe's RemovePaddingIdxEmbeddingPass does before lowering: padding_idx only changes gradients.
    for node in ep.graph.nodes:
        if node.target == torch.ops.aten.embedding.default and len(node.args) > 2:
            node.args = node.args[:2]
    ep.graph_module.recompile()


@pytest.mark.parametrize("arch", list(ARCHS))
def test_recommended_command_decodes_as_the_published_stack(recommended, checkpoints, arch, reference_runtime,
                                                             tmp_path):
    # The published stack: its exporter lowers the program optimum exports with the recommended flags (the
    # recipe's options), and its runtime runs both files; all give our native engine's greedy tokens.
    import optimum.exporters.executorch.convert  # noqa: F401  (registers the custom_sdpa attention, as the CLI does)
    from optimum.exporters.executorch.task_registry import discover_tasks, task_registry

    discover_tasks()
    module = task_registry.get("text-generation")(str(checkpoints[arch]), max_seq_len=MAX_SEQ_LEN,
                                                  use_custom_sdpa=True, use_custom_kv_cache=True, qlinear="8da4w",
                                                  qembedding="4w")
    (ep,) = module.export().values()
    _without_padding_idx(ep)
    torch.export.save(ep, tmp_path / "m.pt2")
    script = Path(__file__).with_name("reference_lower_xnnpack_pt2.py")
    done = subprocess.run([reference_runtime.python, str(script), str(tmp_path / "m.pt2"), str(tmp_path / "ref.pte"),
                           "--optimum"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    published, ours = (tmp_path / "ref.pte").read_bytes(), recommended(arch)
    assert _embedding_lookups(published) == _embedding_lookups(ours)
    engine = project_runtimes().get("native") or project_runtimes()["python"]
    program = engine.load_program(ours)
    tokens, _ = _greedy(program.load_method("forward"), MAX_SEQ_LEN - len(PROMPT))
    fed = list(PROMPT) + tokens
    calls = [[torch.tensor([PROMPT]), torch.arange(len(PROMPT))]] + [
        [torch.tensor([[t]]), torch.tensor([p])] for p, t in enumerate(fed[len(PROMPT):], len(PROMPT))]
    for name, pte in (("ours", ours), ("published", published)):
        (tmp_path / f"{name}.pte").write_bytes(pte)
        torch.save([("forward", call) for call in calls], tmp_path / f"{name}.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    done = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), "ours", "published"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0 and not list(tmp_path.glob("*.err.txt")), done.stderr[-2000:]
    for name in ("ours", "published"):
        logits = _logits(torch.load(tmp_path / f"{name}.out.pt"))
        assert [int(row.argmax()) for row in logits[len(PROMPT) - 1:-1]] == tokens, name
