"""`exir_ops.edge.<namespace>.<op>.<overload>` and `exir_ops.backend....`: edge and backend operators by name."""

from __future__ import annotations

import importlib

import torch

from executorch.exir.dialects.backend._ops import _BACKEND_OP_LIB, BackendOpOverloadPacket
from executorch.exir.dialects.edge._ops import EdgeOpOverloadPacket, edge_packet


# Modules that define a namespace's operators, imported on its first lookup: the published `import executorch.exir`
# imports them all (ExecuTorch's quantized embeddings, torchao's quantization ops) and vendor code names them at once.
_DEFINED_BY = {"quantized_decomposed": "executorch.exir.dialects._quantized_ops",
               "torchao": "torchao.quantization.quant_primitives"}


def _define_namespace(namespace: str) -> None:
    module = _DEFINED_BY.get(namespace)
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError:  # torchao not installed: its ops are then unknown, which the lookup reports
            pass


class _Namespace:
    """`exir_ops.edge.aten`: operator packets looked up in torch's registry of the same namespace."""

    def __init__(self, dialect: str, namespace: str) -> None:
        self._dialect = dialect
        self._namespace = namespace

    def __getattr__(self, name: str) -> EdgeOpOverloadPacket:
        # Dunder names are operators too (`aten.__rshift__`, `aten.__and__`); a protocol probe such as
        # `__deepcopy__` finds no operator and gets the AttributeError it expects.
        _define_namespace(self._namespace)
        try:
            getattr(getattr(torch.ops, self._namespace), name)
        except (AttributeError, RuntimeError):
            raise AttributeError(
                f"no operator {self._namespace}::{name} is registered with torch; check the name, or import "
                "the library that defines it before naming it"
            ) from None
        cls = BackendOpOverloadPacket if self._dialect == "backend" else EdgeOpOverloadPacket
        return edge_packet(self._namespace, name, cls)

    def __repr__(self) -> str:
        return f"<{self._dialect} operators of namespace {self._namespace}>"


class _Dialect:
    """`exir_ops.edge`: one attribute per operator namespace."""

    def __init__(self, dialect: str) -> None:
        self._dialect = dialect

    def __getattr__(self, namespace: str) -> _Namespace:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        if self._dialect == "backend" and namespace not in _BACKEND_OP_LIB:
            raise RuntimeError(f"{namespace} is not a backend op library; a backend registers its namespace in "
                               "executorch.exir.dialects.backend._ops._BACKEND_OP_LIB first")
        return _Namespace(self._dialect, namespace)

    def __repr__(self) -> str:
        return f"<{self._dialect} dialect operators>"


class _Ops:
    """`exir_ops`: the edge dialect's operators (`exir_ops.edge`) and backends' (`exir_ops.backend`)."""

    edge = _Dialect("edge")
    backend = _Dialect("backend")


ops = _Ops()
