"""Graph passes ExecuTorch's LLM export flow applies (executorch.extension.llm.export.export_passes)."""
