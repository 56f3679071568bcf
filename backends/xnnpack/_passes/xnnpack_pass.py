"""`XNNPACKPass`: an `ExportPass` that knows the exported program it rewrites (ExecuTorch's base of
XNNPACK passes; shared transforms import `ExportPass` from here too)."""

from __future__ import annotations

from torch.export import ExportedProgram

from executorch.exir.pass_base import ExportPass

__all__ = ["ExportPass", "XNNPACKPass"]


class XNNPACKPass(ExportPass):
    """A pass over one program's graph that may read its constants through `exported_program`."""

    def __init__(self, exported_program: ExportedProgram) -> None:
        super().__init__()
        self._exported_program = exported_program

    @property
    def exported_program(self) -> ExportedProgram:
        return self._exported_program
