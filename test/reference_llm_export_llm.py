"""Run in the published ExecuTorch's Python: greedy-decode a .pte through its runtime, or generate text with its
TextLLMRunner binding. Prints one JSON line.

    python reference_llm_export_llm.py decode FILE.pte PROMPT_IDS_JSON COUNT
    python reference_llm_export_llm.py runner FILE.pte TOKENIZER.json PROMPT COUNT
"""

import json
import sys

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (the llama:: kernels)


def decode(pte: str, prompt: list, count: int) -> list:
    from executorch.runtime import Runtime

    forward = Runtime.get().load_program(pte).load_method("forward")
    logits = forward.execute([torch.tensor([prompt]), torch.tensor([0])])[0]
    tokens = []
    for pos in range(len(prompt), len(prompt) + count):
        tokens.append(int(logits.argmax(-1)))
        logits = forward.execute([torch.tensor([[tokens[-1]]]), torch.tensor([pos])])[0]
    return tokens


def runner(pte: str, tokenizer: str, prompt: str, count: int) -> str:
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    pieces = []
    config = GenerationConfig(temperature=0.0, max_new_tokens=count, echo=False, num_bos=1)
    TextLLMRunner(pte, tokenizer).generate(prompt, config, token_callback=pieces.append)
    return "".join(pieces)


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "decode":
        print(json.dumps(decode(args[0], json.loads(args[1]), int(args[2]))))
    else:
        print(json.dumps(runner(args[0], args[1], args[2], int(args[3]))))
