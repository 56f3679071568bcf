"""`BackendDetails`: a backend's ahead-of-time half, turning one partition into its payload."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Optional

from torch.export import ExportedProgram

from executorch.exir._serialize._named_data_store import NamedDataStoreOutput
from executorch.exir.backend.compile_spec_schema import CompileSpec


@dataclass
class PreprocessResult:
    """What `preprocess` returns: the payload the runtime backend's `init` receives, an optional
    map from debug handles to the nodes behind them, and named data stored beside the payload."""

    processed_bytes: bytes = b""
    debug_handle_map: Optional[dict] = None
    data_store_output: Optional[NamedDataStoreOutput] = None


class BackendDetails(ABC):
    """Subclass per backend; the class name is the backend id partitioners name in their
    `DelegationSpec`, and the id the runtime looks the backend up by."""

    @staticmethod
    @abstractmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """The payload for one partition (an edge-dialect program of the claimed nodes)."""


# Backends that ship with this package, imported when first named.
_BUILTIN = {"ExecutorBackend": "executorch.exir.backend.test.demos.rpc.executor_backend_preprocess",
            "XnnpackBackend": "executorch.backends.xnnpack.xnnpack_preprocess"}


def find_backend(backend_id: str) -> type:
    """The BackendDetails subclass named `backend_id` (searched among all loaded subclasses)."""
    if backend_id in _BUILTIN:
        import importlib

        importlib.import_module(_BUILTIN[backend_id])
    seen, todo = [], list(BackendDetails.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__name__ == backend_id:
            return cls
        seen.append(cls.__name__)
        todo.extend(cls.__subclasses__())
    from executorch.exir.error import ExportError

    raise ExportError(
        f"no BackendDetails subclass named {backend_id!r} is loaded (known: {sorted(seen)}); import the module "
        "that defines the backend's preprocess before lowering"
    )
