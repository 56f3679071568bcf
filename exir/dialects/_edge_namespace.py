"""`exir_ops.edge.<namespace>.<op>.<overload>`: the operators an edge graph holds, by name."""

from __future__ import annotations

import torch


class _OpPacket:
    """`exir_ops.edge.aten.add`: its overloads are the torch operators edge graphs hold as targets."""

    def __init__(self, namespace: str, name: str, packet) -> None:
        self._namespace = namespace
        self._name = name
        self._packet = packet

    def __getattr__(self, overload: str):
        if overload.startswith("__"):
            raise AttributeError(overload)
        try:
            return getattr(self._packet, overload)
        except AttributeError:
            raise AttributeError(
                f"edge operator {self._namespace}::{self._name} has no overload {overload!r}; "
                f"its overloads: {sorted(self._packet.overloads())}"
            ) from None

    def __call__(self, *args, **kwargs):
        return self._packet(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<edge op packet {self._namespace}::{self._name}>"


class _Namespace:
    """`exir_ops.edge.aten`: operator packets looked up in torch's registry of the same namespace."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> _OpPacket:
        # Dunder names are operators too (`aten.__rshift__`, `aten.__and__`); a protocol probe such as
        # `__deepcopy__` finds no operator and gets the AttributeError it expects.
        try:
            packet = getattr(getattr(torch.ops, self._namespace), name)
        except (AttributeError, RuntimeError):
            raise AttributeError(
                f"no operator {self._namespace}::{name} is registered with torch; check the name, or import "
                "the library that defines it before naming it"
            ) from None
        return _OpPacket(self._namespace, name, packet)


class _Dialect:
    """`exir_ops.edge`: one attribute per operator namespace."""

    def __init__(self, dialect: str) -> None:
        self._dialect = dialect

    def __getattr__(self, namespace: str) -> _Namespace:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _Namespace(namespace)

    def __repr__(self) -> str:
        return f"<{self._dialect} dialect operators>"


class _Ops:
    """`exir_ops`: the edge dialect's operators (`exir_ops.edge`)."""

    edge = _Dialect("edge")


ops = _Ops()
