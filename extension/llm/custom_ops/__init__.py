"""LLM custom ops (`llama::custom_sdpa`, `llama::update_cache`): importing this package registers them with torch."""

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (registers on import)
