"""Module swaps applied to an LLM before export (KV cache forms that call ExecuTorch's LLM ops)."""
