"""`LoweredBackendModule`: one partition after its backend's `preprocess` — payload, specs, source."""

from __future__ import annotations

from typing import Optional

import torch
from torch.export import ExportedProgram

from executorch.exir._serialize._named_data_store import NamedDataStoreOutput
from executorch.exir.backend.compile_spec_schema import CompileSpec


class LoweredBackendModule(torch.nn.Module):
    """Held by the lowered graph (`get_attr lowered_module_N`) and called through
    `executorch_call_delegate`; the emitter turns it into a BackendDelegate entry."""

    def __init__(self, edge_program: ExportedProgram, backend_id: str, processed_bytes: bytes,
                 compile_specs: list[CompileSpec], named_data_store_output: Optional[NamedDataStoreOutput] = None,
                 meta: Optional[dict] = None) -> None:
        super().__init__()
        self._original_exported_program = edge_program
        self._backend_id = backend_id
        self._processed_bytes = processed_bytes
        self._compile_specs = list(compile_specs)
        self._named_data_store_output = named_data_store_output
        self.meta = dict(meta or {})

    @property
    def backend_id(self) -> str:
        return self._backend_id

    @property
    def processed_bytes(self) -> bytes:
        return self._processed_bytes

    @property
    def compile_specs(self) -> list[CompileSpec]:
        return self._compile_specs

    @property
    def original_module(self) -> ExportedProgram:
        """The partition's edge program, as `preprocess` saw it."""
        return self._original_exported_program

    @property
    def named_data_store_output(self) -> Optional[NamedDataStoreOutput]:
        return self._named_data_store_output

    def forward(self, *args):
        from executorch.exir.delegate import executorch_call_delegate

        return executorch_call_delegate(self, *args)




def __getattr__(name: str):
    # Graph inspection ships with the full wheel only (tools/packaging/components.py).
    if name in ("get_lowered_submodules", "get_lowered_backend_modules"):
        from executorch.exir.backend import _graph_tools

        return getattr(_graph_tools, name)
    raise AttributeError(f"module 'executorch.exir.lowered_backend_module' has no attribute {name!r}")
