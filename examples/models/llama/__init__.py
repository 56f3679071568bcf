"""Llama-family model pieces at ExecuTorch's module paths: the custom KV caches optimum-executorch imports."""
