"""`save_pte_program`: write a lowered program's `.pte` (and its `.ptd` files, if any) where export
scripts put it. Names as ExecuTorch's `extension.export_util.utils`."""

from __future__ import annotations

import os

__all__ = ["save_pte_program"]


def save_pte_program(prog, model_name: str, output_dir: str = "") -> str:
    """Write `prog` (an ExecutorchProgramManager) to `model_name` when it ends in `.pte`, else to
    `output_dir/<model_name>.pte`, and its external tensor data to `output_dir`; returns the `.pte`
    path. The file appears whole or not at all; a failure raises (it is not logged and ignored)."""
    path = model_name if model_name.endswith(".pte") else os.path.join(output_dir, f"{model_name}.pte")
    prog.save(path)
    if getattr(prog, "data_files", None):
        prog.write_tensor_data_to_file(outdir=output_dir or os.path.dirname(path) or ".")
    return path
