"""LlmConfig: what export_llm exports and how, in ExecuTorch's section and field names (base, model, export,
debug, quantization, backend), limited to the options this implementation honours.

`UNSUPPORTED` lists the published configuration's other options: setting one, on the command line or in a YAML
file, is an error naming it rather than an option silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional


class ModelType(str, Enum):
    """The `base.model_class` values exported here: one Llama-family definition covers them all."""

    stories110m = "stories110m"
    llama2 = "llama2"
    llama3 = "llama3"
    llama3_1 = "llama3_1"
    llama3_2 = "llama3_2"
    qwen2_5_0_5b = "qwen2_5_0_5b"
    qwen2_5_1_5b = "qwen2_5_1_5b"
    qwen2_5_coder_32b = "qwen2_5_coder_32b"


class DtypeOverride(str, Enum):
    """The model's dtype; only fp32 is exported here."""

    fp32 = "fp32"


@dataclass
class BaseConfig:
    """Which model: its class, params.json, checkpoint (random weights when absent), tokenizer and extra
    metadata (a JSON object whose entries become constant methods, e.g. `{"get_bos_id": 1}`)."""

    model_class: ModelType = ModelType.llama3
    params: Optional[str] = None
    checkpoint: Optional[str] = None
    tokenizer_path: Optional[str] = None
    metadata: Optional[str] = None


@dataclass
class ModelConfig:
    """How the model is built before export."""

    dtype_override: DtypeOverride = DtypeOverride.fp32
    enable_dynamic_shape: bool = True
    use_sdpa_with_kv_cache: bool = False
    use_kv_cache: bool = False

    def __post_init__(self) -> None:
        if self.use_sdpa_with_kv_cache and not self.use_kv_cache:
            raise ValueError("model.use_sdpa_with_kv_cache needs model.use_kv_cache=True")


@dataclass
class ExportConfig:
    """Sequence limits and where the .pte goes (`output_dir`/`<name>.pte`; `output_name` ending in .pte is
    used as given)."""

    max_seq_length: int = 128
    max_context_length: int = 128
    output_dir: str = "."
    output_name: Optional[str] = None

    def __post_init__(self) -> None:
        if self.max_context_length < self.max_seq_length:
            raise ValueError(f"export.max_context_length ({self.max_context_length}) cannot be shorter than "
                             f"export.max_seq_length ({self.max_seq_length})")


@dataclass
class DebugConfig:
    """`verbose`: log the export's steps and print the delegation summary."""

    generate_full_logits: bool = False
    verbose: bool = False


@dataclass
class QuantizationConfig:
    """`qmode`: 8da4w or 8da8w (torchao's int8 dynamic activations with int4 / int8 weights in groups of
    `group_size` input channels, 128 by default, 0 for one group per row)."""

    QMODE_OPTIONS = ("8da4w", "8da8w")

    qmode: Optional[str] = None
    group_size: Optional[int] = None
    use_hqq: bool = True

    def __post_init__(self) -> None:
        if self.qmode is not None and self.qmode not in self.QMODE_OPTIONS:
            raise ValueError(f"quantization.qmode={self.qmode!r} is not supported here "
                             f"(supported: {', '.join(self.QMODE_OPTIONS)})")


@dataclass
class XNNPackConfig:
    """`enabled`: delegate the dynamically quantized linears to XNNPACK; `extended_ops`: every op it takes."""

    enabled: bool = False
    extended_ops: bool = False


@dataclass
class BackendConfig:
    """The backends to lower to; only XNNPACK here."""

    xnnpack: XNNPackConfig = field(default_factory=XNNPackConfig)


@dataclass
class LlmConfig:
    """The whole export configuration."""

    base: BaseConfig = field(default_factory=BaseConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    quantization: QuantizationConfig = field(default_factory=QuantizationConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)


# The published configuration's options that are not implemented here, by section ("": top-level sections).
UNSUPPORTED = {
    "base": ("lora_config", "use_lora", "preq_mode", "preq_group_size", "preq_embedding_quantize"),
    "model": ("use_shared_embedding", "expand_rope_table", "use_attention_sink", "output_prune_map",
              "input_prune_map", "quantize_kv_cache", "static_quantize_kv_cache", "static_quantize_kv_cache_scale",
              "local_global_attention", "use_moe_quantized_op"),
    "export": ("so_library", "export_only", "foundation_weights_file", "lora_weights_file"),
    "debug": ("profile_memory", "profile_path", "generate_etrecord"),
    "quantization": ("embedding_quantize", "pt2e_quantize", "use_spin_quant", "use_qat", "quantize_scope",
                     "calibration_tasks", "calibration_limit", "calibration_seq_length", "calibration_data"),
    "backend": ("coreml", "vulkan", "qnn", "openvino", "torchao", "tosa", "ethosu", "vgf", "mlx"),
    "backend.xnnpack": ("enable_bf16",),
    "": ("multimethod",),
}
