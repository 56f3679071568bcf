"""export_llm: ExecuTorch's documented commands export a tiny Llama here that decodes like eager on both engines,
the published exporter's file for the same params and checkpoint decodes the same greedy tokens, and the published
TextLLMRunner runs our file; unsupported options are refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import project_runtimes, published_env  # noqa: E402
from executorch.examples.models.llama.export_llama_lib import apply_source_transforms, build_model
from executorch.extension.llm.export.export_llm import main, parse_args

HERE = Path(__file__).resolve().parent
PARAMS = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 300, "hidden_dim": 128,
          "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": False}
PROMPT_TEXT, NEW_TOKENS = "the quick", 8
# base.metadata's value is quoted for Hydra, which would otherwise read the JSON as a mapping.
COMMON = ["base.model_class=llama3", "base.params=params.json", "base.checkpoint=ckpt.pth",
          "base.tokenizer_path=tokenizer.json", "base.metadata='{\"get_bos_id\":0,\"get_eos_ids\":[1]}'",
          "model.use_kv_cache=True", "export.max_seq_length=32", "export.max_context_length=32"]
QUANT = ["quantization.qmode=8da4w", "quantization.group_size=32", "backend.xnnpack.enabled=True"]
CONFIGS = {
    "fp32": [],
    "fp32_sdpa": ["model.use_sdpa_with_kv_cache=True"],
    "8da4w_xnnpack": QUANT,
    "8da4w_xnnpack_sdpa": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.extended_ops=True"] + QUANT,
}


def _tokenizer(path: Path):
    """A byte-level BPE trained here on a few sentences (BOS <s> = 0, EOS </s> = 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["the quick brown fox jumps over the lazy dog", "a small model writes a few words",
            "hello world, this is a test of tokens"] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=PARAMS["vocab_size"], special_tokens=["<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    assert tok.get_vocab_size() == PARAMS["vocab_size"]
    tok.save(str(path))
    return tok


def _printable(tok, token_id: int) -> bool:
    return token_id > 1 and all(32 <= ord(c) < 127 for c in tok.decode([token_id]))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """params.json, tokenizer.json and a checkpoint in ExecuTorch's key layout, saved from our model's state dict.
    Weights are scaled up from PyTorch's defaults so greedy decoding varies; tokens that do not decode to printable
    ASCII (and EOS) get near-zero output rows, so the text the runner prints maps one to one onto token ids."""
    root = tmp_path_factory.mktemp("export_llm")
    (root / "params.json").write_text(json.dumps(PARAMS))
    tok = _tokenizer(root / "tokenizer.json")
    torch.manual_seed(0)
    model = build_model(parse_args(["base.params=" + str(root / "params.json")]))
    state = {k: torch.randn_like(v) * (0.3 if v.dim() == 2 else 0.1) + (1.0 if v.dim() == 1 else 0.0)
             for k, v in model.state_dict().items() if "cache" not in k}
    for token_id in range(PARAMS["vocab_size"]):
        if not _printable(tok, token_id):
            state["output.weight"][token_id] *= 0.01
    torch.save(state, root / "ckpt.pth")
    return root


@pytest.fixture(scope="module")
def exports(workdir):
    """Each configuration exported once: the documented 8da4w command through `python -m`, the others through
    the same entry point in this process."""
    done = {}
    for name, flags in CONFIGS.items():
        argv = COMMON + flags + [f"export.output_name={name}.pte"]
        if name == "8da4w_xnnpack_sdpa":
            run = subprocess.run([sys.executable, "-m", "executorch.extension.llm.export.export_llm", *argv],
                                 cwd=workdir, capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, run.stderr[-3000:]
        else:
            cwd = os.getcwd()
            os.chdir(workdir)
            try:
                assert main(argv) == 0
            finally:
                os.chdir(cwd)
        done[name] = workdir / f"{name}.pte"
    return done


def _prompt(workdir) -> list[int]:
    from tokenizers import Tokenizer

    return [0] + Tokenizer.from_file(str(workdir / "tokenizer.json")).encode(PROMPT_TEXT).ids


def _greedy(step, prompt: list[int], count: int = NEW_TOKENS) -> list[int]:
    logits = step(torch.tensor([prompt]), torch.tensor([0]))
    tokens = []
    for pos in range(len(prompt), len(prompt) + count):
        tokens.append(int(logits.argmax(-1)))
        logits = step(torch.tensor([[tokens[-1]]]), torch.tensor([pos]))
    return tokens


def _eager_tokens(workdir, flags, checkpoint="ckpt.pth") -> list[int]:
    argv = [a.replace("params.json", str(workdir / "params.json")).replace("ckpt.pth", str(workdir / checkpoint))
            for a in COMMON + flags]
    config = parse_args(argv)
    model = apply_source_transforms(build_model(config), config)
    with torch.no_grad():
        return _greedy(lambda t, p: model(t, {"input_pos": p}), _prompt(workdir))


def _file_tokens(runtime, pte: Path, prompt: list[int]) -> list[int]:
    forward = runtime.load_program(str(pte)).load_method("forward")
    return _greedy(lambda t, p: forward.execute([t, p])[0], prompt)


@pytest.mark.parametrize("name", CONFIGS)
def test_decodes_like_eager_on_both_engines(exports, workdir, name):
    want = _eager_tokens(workdir, CONFIGS[name])
    assert len(set(want)) > 3, want  # a decode that varies, so agreeing means something
    for engine, runtime in project_runtimes().items():
        assert _file_tokens(runtime, exports[name], _prompt(workdir)) == want, engine


def test_program_carries_the_runner_metadata(exports):
    program = project_runtimes()["python"].load_program(str(exports["8da4w_xnnpack_sdpa"]))
    values = {name: program.load_method(name).execute([])[0] for name in (
        "get_max_seq_len", "get_max_context_len", "get_n_layers", "get_vocab_size", "use_kv_cache",
        "use_sdpa_with_kv_cache", "enable_dynamic_shape", "get_bos_id", "get_eos_ids")}
    assert values == {"get_max_seq_len": 32, "get_max_context_len": 32, "get_n_layers": 2, "get_vocab_size": 300,
                      "use_kv_cache": True, "use_sdpa_with_kv_cache": True, "enable_dynamic_shape": True,
                      "get_bos_id": 0, "get_eos_ids": 1}


def test_gate_fails_for_a_different_checkpoint(exports, workdir):
    """The comparison above can fail: another checkpoint's eager tokens differ from the file's."""
    state = torch.load(workdir / "ckpt.pth")
    state["layers.1.feed_forward.w2.weight"] = state["layers.1.feed_forward.w2.weight"] * -1
    torch.save(state, workdir / "other.pth")
    other = _eager_tokens(workdir, [], checkpoint="other.pth")
    assert _file_tokens(project_runtimes()["python"], exports["fp32"], _prompt(workdir)) != other


def _published(reference_runtime, *args, cwd=None) -> str:
    run = subprocess.run([reference_runtime.python, *map(str, args)], capture_output=True, text=True, timeout=600,
                         env=published_env(), cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""


def test_published_exporter_decodes_the_same_tokens(exports, workdir, reference_runtime):
    """The same command and files through the published export_llm: its file decodes our file's greedy tokens,
    here on both engines and on the published runtime."""
    name = "8da4w_xnnpack_sdpa"
    argv = COMMON + CONFIGS[name] + ["export.output_name=published.pte"]
    _published(reference_runtime, "-m", "executorch.extension.llm.export.export_llm", *argv, cwd=workdir)
    prompt = _prompt(workdir)
    ours = _file_tokens(project_runtimes()["python"], exports[name], prompt)
    for engine, runtime in project_runtimes().items():
        assert _file_tokens(runtime, workdir / "published.pte", prompt) == ours, engine
    script = HERE / "reference_llm_export_llm.py"
    assert json.loads(_published(reference_runtime, script, "decode", exports[name], json.dumps(prompt),
                                 NEW_TOKENS)) == ours


def test_published_runner_runs_our_file(exports, workdir, reference_runtime):
    """The published TextLLMRunner (its Python binding) generates from our file and tokenizer the text our greedy
    tokens spell."""
    from tokenizers import Tokenizer

    name = "8da4w_xnnpack_sdpa"
    tok = Tokenizer.from_file(str(workdir / "tokenizer.json"))
    # The runner's tokenizer finds no BOS token in this tokenizer.json, so its prompt is the text's ids alone.
    ours = _file_tokens(project_runtimes()["python"], exports[name], tok.encode(PROMPT_TEXT).ids)
    text = tok.decode(ours)
    script = HERE / "reference_llm_export_llm.py"
    got = json.loads(_published(reference_runtime, script, "runner", exports[name], workdir / "tokenizer.json",
                                PROMPT_TEXT, NEW_TOKENS))
    assert got == text


@pytest.mark.parametrize("argv, message", [
    (["quantization.pt2e_quantize=xnnpack_dynamic"], "quantization.pt2e_quantize is not supported"),
    (["backend.coreml.enabled=True"], "backend.coreml is not supported"),
    (["quantization.embedding_quantize=4,32"], "quantization.embedding_quantize is not supported"),
    (["quantization.qmode=int8"], "quantization.qmode='int8' is not supported"),
    (["model.dtype_override=fp16"], "model.dtype_override='fp16' is not supported"),
    (["base.model_class=gemma9"], "base.model_class='gemma9' is not supported"),
    (["model.no_such_option=1"], "model.no_such_option: no such option"),
    (["model.use_kv_cache=maybe"], "model.use_kv_cache takes True or False"),
    (["model.use_sdpa_with_kv_cache=True"], "needs model.use_kv_cache=True"),
    (["export.max_seq_length=256"], "cannot be shorter than export.max_seq_length"),
    (["+model.use_kv_cache=True"], "not supported; write key=value"),
])
def test_unsupported_options_are_refused_by_name(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_config_file_then_overrides(tmp_path):
    (tmp_path / "c.yaml").write_text("model:\n  use_kv_cache: True\n  use_sdpa_with_kv_cache: True\n"
                                     "quantization:\n  qmode: 8da4w\n  group_size: 128\n"
                                     "backend:\n  xnnpack:\n    enabled: True\n    extended_ops: True\n")
    config = parse_args(["--config", str(tmp_path / "c.yaml"), "quantization.group_size=32",
                         "base.metadata='{\"get_bos_id\": 0}'"])
    assert config.model.use_sdpa_with_kv_cache and config.backend.xnnpack.extended_ops
    assert (config.quantization.qmode, config.quantization.group_size) == ("8da4w", 32)
    assert config.base.metadata == '{"get_bos_id": 0}'
