"""ExecuTorch's kernel libraries; the Python side registers their operators with torch."""
