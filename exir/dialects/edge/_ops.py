"""The operators an edge graph's nodes call: `EdgeOpOverload`, one per torch operator overload.

After `to_edge`, every `call_function` node whose target was a torch operator overload (ATen or
custom, size arithmetic aside) calls its `EdgeOpOverload` instead, as in ExecuTorch: vendor passes
test `isinstance(node.target, EdgeOpOverload)`, compare targets with `exir_ops.edge.aten.add.Tensor`
and key tables by `node.target.__name__` (`"aten.add.Tensor"`). There is one object per operator,
so identity, equality and hashing agree, and an edge op is not equal to its ATen op (a table may
hold both, for the two dialects).

This package's own passes work on the operator an edge op stands for: `aten_op(target)` unwraps a
target, and `to_aten_targets` / `to_edge_targets` switch a whole graph between the two forms.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Callable, Optional

import torch
from torch import fx

_EDGE: dict[tuple, "EdgeOpOverload"] = {}  # (class, torch operator) -> its one object
_PACKETS: dict[object, "EdgeOpOverloadPacket"] = {}


class EdgeOpOverload:
    """An edge-dialect operator overload: calls, and answers for, the torch operator `_op`."""

    def __init__(self, op: torch._ops.OpOverload, schema=None) -> None:
        self._op = op
        self._schema = op._schema if schema is None else schema
        self.__name__ = f"{op.namespace}.{op.__name__}"
        self.__qualname__ = self.__name__
        self.__module__ = __name__

    def __getattr__(self, name: str):
        # Only reached for names this object lacks: `name()`, `namespace`, `tags`, `overloadpacket`,
        # `_overloadname` ... are the torch operator's. Protocol probes (`__deepcopy__`, ...) are not.
        if name.startswith("__") or name == "_op":
            raise AttributeError(name)
        return getattr(self._op, name)

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def to_out_variant(self) -> torch._ops.OpOverload:
        """The `.out` overload the runtime calls for this operator."""
        out = find_out_variant(self._op)
        if out is None:
            raise RuntimeError(f"{self.__name__} has no out variant; define an .out overload with the same "
                               "arguments plus Tensor(a!) out")
        return out

    def __repr__(self) -> str:
        return f"<EdgeOpOverload: {self.__name__}>: schema = {self._schema}"

    __str__ = __repr__

    def __deepcopy__(self, memo=None) -> "EdgeOpOverload":
        return self

    def __copy__(self) -> "EdgeOpOverload":
        return self

    def __reduce__(self):
        return _by_name, (type(self), self._op.namespace, self._op._schema.name.split("::")[1], self._op._overloadname)


class EdgeOpOverloadPacket:
    """`exir_ops.edge.aten.add`: the edge overloads of one torch operator packet."""

    def __init__(self, qualified_op_name: str, op_name: str, parent_overload_packet) -> None:
        self._parent_overload_packet = parent_overload_packet
        self._parent_qualified_op_name = parent_overload_packet._qualified_op_name
        self._qualified_op_name = qualified_op_name
        self.__name__ = qualified_op_name.replace("::", ".")
        self._op = getattr(parent_overload_packet, "_op", None)
        self._overload_names = parent_overload_packet._overload_names

    _overload_class = EdgeOpOverload

    def __getattr__(self, overload: str):
        if overload.startswith("__"):
            raise AttributeError(overload)
        try:
            op = getattr(self._parent_overload_packet, overload)
        except AttributeError:
            raise AttributeError(
                f"edge operator {self._qualified_op_name} has no overload {overload!r}; its overloads: "
                f"{sorted(self._parent_overload_packet.overloads())}"
            ) from None
        if not isinstance(op, torch._ops.OpOverload):
            return op
        return wrap_op(op, self._overload_class)

    def overloads(self) -> list[str]:
        return self._parent_overload_packet.overloads()

    def __call__(self, *args, **kwargs):
        return self._parent_overload_packet(*args, **(kwargs or {}))

    def __repr__(self) -> str:
        return (f"<EdgeOpOverloadPacket(op='{self.__name__}', "
                f"parent_op='{self._parent_qualified_op_name.replace('::', '.')}')>")

    def __str__(self) -> str:
        return self.__name__

    def __hash__(self) -> int:
        return hash(self._parent_overload_packet)

    @property
    def op(self):
        return self._op


def wrap_op(op: torch._ops.OpOverload, cls=EdgeOpOverload) -> EdgeOpOverload:
    """The one `cls` object (EdgeOpOverload or BackendOpOverload) of torch operator `op`."""
    got = _EDGE.get((cls, op))
    if got is None:
        got = _EDGE[(cls, op)] = cls(op)
    return got


def _by_name(cls: type, namespace: str, name: str, overload: str) -> EdgeOpOverload:
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    return wrap_op(op, cls)


def edge_packet(namespace: str, name: str, cls=EdgeOpOverloadPacket) -> EdgeOpOverloadPacket:
    parent = getattr(getattr(torch.ops, namespace), name)
    got = _PACKETS.get((cls, parent))
    if got is None:
        got = _PACKETS[(cls, parent)] = cls(f"{namespace}::{name}", name, parent)
    return got


def aten_op(target):
    """The torch operator an edge op stands for; any other target as it is."""
    return target._op if isinstance(target, EdgeOpOverload) else target


def retarget(gm: fx.GraphModule, convert: Callable, recompile: bool = True) -> bool:
    """Each call_function target of `gm` (and its submodules) replaced by `convert(target)`, in place;
    whether any changed. `recompile=False` leaves regenerating the modules' code to the caller."""
    changed = False
    for mod in gm.modules():
        if not isinstance(mod, fx.GraphModule):
            continue
        touched = False
        for node in mod.graph.nodes:
            if node.op == "call_function":
                new = convert(node.target)
                if new is not node.target:
                    node.target, touched = new, True
        if touched:
            if recompile:
                mod.recompile()
            changed = True
    return changed


def to_aten_targets(gm: fx.GraphModule) -> bool:
    """Every edge op target of `gm` (and its submodules) as the torch operator it stands for, in place."""
    return retarget(gm, aten_op)


@contextmanager
def torch_targets(gm: fx.GraphModule):
    """Within the block, `gm`'s edge op targets are the torch operators they stand for (nodes and
    their tags are untouched); afterwards they are the same edge ops again. For code written against
    torch operators, such as this package's partitioners, run on an edge graph."""
    saved = []
    for mod in gm.modules():
        if isinstance(mod, fx.GraphModule):
            for node in mod.graph.nodes:
                if node.op == "call_function" and isinstance(node.target, EdgeOpOverload):
                    saved.append((node, node.target))
                    node.target = node.target._op
    try:
        yield gm
    finally:
        for node, target in saved:
            if node.target is target._op:
                node.target = target


# Tensor options of factory-like ops: an out variant has none, the out tensor carries them.
_TENSOR_OPTIONS = frozenset({"dtype", "layout", "device", "pin_memory", "memory_format"})


def _arg_key(schema, drop_options: bool) -> tuple:
    return tuple((a.name, str(a.type)) for a in schema.arguments
                 if not a.is_out and not (drop_options and a.name in _TENSOR_OPTIONS))


def find_out_variant(op) -> Optional[torch._ops.OpOverload]:
    """The overload of `op`'s packet (a torch operator or its edge op) that writes its results into
    out arguments, or None."""
    return _find_out_variant(aten_op(op))


@lru_cache(maxsize=None)
def _find_out_variant(op: torch._ops.OpOverload) -> Optional[torch._ops.OpOverload]:
    schema = op._schema
    packet = op.overloadpacket
    candidates = [getattr(packet, name) for name in packet.overloads()]
    candidates = [c for c in candidates if any(a.is_out for a in c._schema.arguments)]
    # Exact argument match first; then the same arguments less the tensor options.
    for drop in (False, True):
        want = _arg_key(schema, drop)
        for cand in candidates:
            outs = [a for a in cand._schema.arguments if a.is_out]
            n_out = len(outs) if not str(outs[0].type).startswith("List") else len(schema.returns)
            if n_out == len(schema.returns) and _arg_key(cand._schema, drop) == want:
                return cand
    return None
