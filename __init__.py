"""ExecuTorch-compatible export stack: `executorch.exir` writes `.pte` programs, `executorch.runtime` runs them."""
