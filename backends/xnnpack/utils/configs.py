"""The edge and backend configs the XNNPACK flow uses, as ExecuTorch names them."""

from __future__ import annotations

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig


def get_xnnpack_edge_compile_config(skip_dim_order: bool = False) -> EdgeCompileConfig:
    """`to_edge` options for programs lowered to XNNPACK: no edge-op check (the partitioner keeps ops
    such as linear whole)."""
    return EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=skip_dim_order)


def get_xnnpack_executorch_backend_config(additional_passes=None) -> ExecutorchBackendConfig:
    """`to_executorch` options: the given passes, delegate payloads in their own segments."""
    return ExecutorchBackendConfig(passes=list(additional_passes or []), extract_delegate_segments=True)
