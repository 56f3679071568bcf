"""`ConfigPrecisionType` and `XNNPartitionerConfig` at ExecuTorch's path (defined in `operators/node_config`)."""

from executorch.backends.xnnpack.operators.node_config import ConfigPrecisionType, XNNPartitionerConfig  # noqa: F401
