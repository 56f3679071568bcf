"""export_llm's configuration dataclasses (executorch.extension.llm.export.config.llm_config)."""
