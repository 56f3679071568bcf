"""XNNPACK, ExecuTorch's CPU backend: partitioner, payload writer and quantizer in pure Python."""
