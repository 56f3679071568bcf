"""`import executorch.kernels.quantized` registers the quantized ops' out variants for export and the Python runtime."""

from executorch.exir.dialects._quantized_ops import register

register()
