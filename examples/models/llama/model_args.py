"""ModelArgs: a Llama-family architecture as ExecuTorch's params.json spells it, plus export-time settings."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional


@dataclass
class ModelArgs:
    """The architecture fields of params.json (upstream's names) and the export settings the model reads."""

    dim: int = 4096
    n_layers: int = 1
    n_heads: int = 32
    n_kv_heads: Optional[int] = None
    vocab_size: int = 512
    hidden_dim: Optional[int] = None
    head_dim: Optional[int] = None
    multiple_of: int = 256
    ffn_dim_multiplier: Optional[float] = None
    norm_eps: float = 1e-5
    attention_qkv_bias: bool = False
    rope_theta: Optional[float] = None
    rope_freq_base: float = 10000.0
    use_scaled_rope: bool = False
    rope_scale_factor: int = 8
    high_freq_factor: int = 4
    use_hf_rope: bool = False
    max_batch_size: int = 1
    max_seq_len: int = 2048
    max_context_len: int = 2048
    use_kv_cache: bool = False
    use_sdpa_with_kv_cache_op: bool = False
    enable_dynamic_shape: bool = False
    generate_full_logits: bool = False

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"ModelArgs: n_heads ({self.n_heads}) must be a multiple of n_kv_heads "
                             f"({self.n_kv_heads})")
        if self.rope_theta is not None:
            self.rope_freq_base = self.rope_theta
        if self.use_sdpa_with_kv_cache_op and not self.use_kv_cache:
            raise ValueError("ModelArgs: use_sdpa_with_kv_cache_op needs use_kv_cache")
        if self.hidden_dim is None:
            # SwiGLU's two-thirds of 4 * dim, scaled, rounded up to a multiple of `multiple_of`.
            hidden = int(2 * 4 * self.dim / 3)
            if self.ffn_dim_multiplier is not None:
                hidden = int(self.ffn_dim_multiplier * hidden)
            self.hidden_dim = -(-hidden // self.multiple_of) * self.multiple_of
        if self.head_dim is None:
            self.head_dim = self.dim // self.n_heads

    @classmethod
    def from_params(cls, params: dict[str, Any], **settings: Any) -> "ModelArgs":
        """ModelArgs from a params.json dict and export settings; a params key this model does not implement is
        an error naming it (rather than a model that silently differs from the checkpoint's)."""
        known = {f.name for f in fields(cls)}
        # Keys that describe the checkpoint's provenance or defaults equal to ours, not the computation.
        ignored = {"model_architecture", "bos_idx", "eos_idx", "bos_count", "eos_count", "norm_type", "act_fn",
                   "attention_type", "quantization_args", "lora_args"}
        unknown = sorted(set(params) - known - ignored)
        if unknown:
            raise ValueError(f"params.json: {', '.join(unknown)} not supported by this Llama definition "
                             f"(supported: {', '.join(sorted(known))})")
        for key, default in (("norm_type", "rmsnorm"), ("act_fn", "silu"), ("attention_type", "mha")):
            if params.get(key, default) != default:
                raise ValueError(f"params.json: {key}={params[key]!r} not supported (only {default!r})")
        return cls(**{k: v for k, v in params.items() if k in known}, **settings)
