"""The edge dialect: which operators a lowered program may hold, and the ExecuTorch-only ones."""
